"""The static cost model behind the AMD tuning tables: an estimate of a build's kernel time on a
target's reference part (``compiler/target/chips.py``) from what can be known without the GPU --
the final ISA (registers, hence occupancy; LDS bytes; matrix instructions waiting on LDS in the K
loop) and the lane executor's counters for one full workgroup (matrix instructions, LDS cycles with
bank conflicts, global bytes loaded).

The busiest unit (CU or WGP) runs ``ceil(workgroups / units)`` workgroups, ``resident`` at a time
(registers, LDS). Its time is the largest of four demands, plus the LDS latency the ISA exposes:

    matrix  workgroups x matrix instructions x the instruction's cycles / (SIMDs x clock), over the
            SIMDs its waves fill; without a cycle count (RDNA), matrix FLOPs / (the part's peak /
            units) -- which credits every instruction with the type's fastest rate
    lds     workgroups x the executor's LDS cycles (conflicts included) / clock
    l2      workgroups x global bytes loaded / (``l2_bytes_per_clock`` x clock)
    hbm     the unique bytes of A, B and C / the part's HBM bandwidth (the whole kernel)
    + exposed: per round of resident workgroups, K iterations x matrix instructions behind an LDS
      wait x ``LDS_LATENCY_CYCLES``, divided by the waves per SIMD that hide it

It ranks one row's candidates against each other (same instruction, same problem); its absolute
figures are estimates, never measurements, and the table says so (``measured: false``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mmaflow.compiler.target.chips import LDS_LATENCY_CYCLES, Chip
from mmaflow.compiler.target.intrinsics import TYPE_BITS


@dataclass(frozen=True)
class Estimate:
    us: float  # estimated kernel time, microseconds
    bound: str  # which demand set it: matrix, lds, l2 or hbm
    parts: dict  # every term, microseconds, and the occupancy figures it used

    def line(self) -> str:
        p = self.parts
        return (
            f"{self.us:.2f} us ({self.bound}-bound: matrix {p['matrix']:.2f}, lds {p['lds']:.2f}, l2 {p['l2']:.2f}, "
            f"hbm {p['hbm']:.2f}, exposed {p['exposed']:.2f}; {p['workgroups']} workgroups, {p['per_unit']} per unit, "
            f"{p['resident']} resident)"
        )


def estimate(
    chip: Chip,
    *,
    a_type: str,
    out_bits: int,
    m: int,
    n: int,
    k: int,
    batch: int,
    flops_per_matrix_op: int,
    cycles_per_matrix_op: int | None = None,
    wave_size: int,
    waves_per_workgroup: int,
    waves_per_simd: int,
    lds_bytes: int,
    behind_lds_wait: int,
    k_iterations: int,
    workgroups: int,
    counters: dict,
) -> Estimate:
    """``counters``: one full workgroup's executor counters (``matrix_ops``, ``lds_cycles``,
    ``global_load_bytes``); the rest from the problem, the config and the final ISA.
    ``cycles_per_matrix_op``: the instruction's cycles on one SIMD (``Intrinsic.cycles``), where
    known: gfx950's 16x16x16 f16 MFMA runs at half the part's f16 peak, its 16x16x32 at all of it."""
    per_unit = -(-workgroups // chip.units)
    by_regs = max(1, waves_per_simd * chip.simds // max(1, waves_per_workgroup))
    by_lds = max(1, chip.lds_bytes // lds_bytes) if lds_bytes else by_regs
    resident = max(1, min(per_unit, by_regs, by_lds))
    simds_busy = min(chip.simds, resident * waves_per_workgroup) / chip.simds
    clock = chip.clock_ghz * 1e9
    unit_flops = chip.peak_flops(a_type) / chip.units
    if cycles_per_matrix_op:
        matrix = per_unit * counters["matrix_ops"] * cycles_per_matrix_op / (chip.simds * clock) / simds_busy
    else:
        matrix = per_unit * counters["matrix_ops"] * flops_per_matrix_op / unit_flops / simds_busy
    lds = per_unit * counters["lds_cycles"] / clock
    l2 = per_unit * counters["global_load_bytes"] / (chip.l2_bytes_per_clock * clock)
    bits = TYPE_BITS[a_type]
    unique = batch * ((m * k + k * n) * bits + m * n * out_bits) / 8
    hbm = unique / (chip.hbm_tbs * 1e12)
    hiding = max(1.0, resident * waves_per_workgroup / chip.simds)
    rounds = math.ceil(per_unit / resident)
    exposed = rounds * k_iterations * behind_lds_wait * LDS_LATENCY_CYCLES / hiding / clock
    terms = {"matrix": matrix, "lds": lds, "l2": l2, "hbm": hbm}
    bound = max(terms, key=terms.get)
    us = (terms[bound] + exposed) * 1e6
    parts = {name: round(v * 1e6, 3) for name, v in terms.items()} | {
        "exposed": round(exposed * 1e6, 3),
        "workgroups": workgroups,
        "per_unit": per_unit,
        "resident": resident,
        "waves_per_simd": waves_per_simd,
    }
    return Estimate(round(us, 3), bound, parts)


def counters_of(stats, ran: int, wave_size: int) -> dict:
    """Per-workgroup counters from the executor's ``Stats`` of ``ran`` workgroups."""
    loads = sum(b * count for b, count in stats.global_loads.items()) * wave_size
    return {
        "matrix_ops": stats.matrix_ops / ran,
        "lds_cycles": stats.lds_cycles / ran,
        "global_load_bytes": loads / ran,
    }
