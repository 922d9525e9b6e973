"""Write the AMD LDS ring tables of docs/BENCHMARKS.md: stages 1-4 on every AMD target at 1024³
and 4096³ f16, from the final ISA (what `mmaflow report examples/matmul_N_f16.mlir --target T
--config stages=S` reads) and the lane executor's LDS counters. No GPU needed; ~3 minutes.

    python docs/bench/amd_ring_tables.py > /tmp/ring.md

Occupancy: the register file's waves/SIMD (`IsaReport.waves_per_simd`), and what whole
workgroups make of it once LDS is counted: a workgroup of 256 threads puts 256 / wave / SIMDs
waves on each SIMD (RDNA wave32: 2 of its 8 waves on each of a WGP's 4 SIMDs; CDNA wave64: 1
on each of a CU's 4), and a WGP / CU holds as many workgroups as its LDS allows (RDNA3/RDNA4:
128 KB per WGP; CDNA3: 64 KB per CU; CDNA4: 160 KB per CU).

The K loop's order, compressed: G global loads, S LDS stores, R LDS reads, M matrix
instructions, B barriers, V:x a wait on global loads (s_waitcnt vmcnt / gfx12 s_wait_loadcnt)
leaving x in flight.
"""

import re
import sys

from mmaflow.compiler.bridge import codegen_module, compile_module
from mmaflow.compiler.mlir import new_context, parse_module
from mmaflow.compiler.pipeline import CodegenOptions
from mmaflow.compiler.targets import get_target
from mmaflow.runtime.modules import matmul_module
from mmaflow.runtime.simulate import check_matmul

TARGETS = ["gfx1100", "gfx1201", "gfx942", "gfx950"]
SIZES = [1024, 4096]
STAGES = [1, 2, 3, 4]
LDS_PER_CU = {"gfx1100": 131072, "gfx1201": 131072, "gfx942": 65536, "gfx950": 163840}
SIMDS = 4
_MARKS = [("B", re.compile(r"^s_barrier(_wait)?\b")),
          ("V", re.compile(r"^s_waitcnt\b.*vmcnt\((\d+)\)|^s_wait_loadcnt\s+(0x[0-9a-f]+|\d+)")),
          ("M", re.compile(r"^v_(wmma|mfma)_")), ("G", re.compile(r"^(buffer|global)_load")),
          ("S", re.compile(r"^ds_(store|write)")), ("R", re.compile(r"^ds_(load|read)"))]


def loop_order(listing):
    marks = []
    for line in listing:
        for name, pat in _MARKS:
            if m := pat.search(line):
                marks.append(f"V:{int(next(g for g in m.groups() if g is not None), 0)}" if name == "V" else name)
                break
    out = []
    for m in marks:
        if out and out[-1][0] == m:
            out[-1][1] += 1
        else:
            out.append([m, 1])
    return " ".join(f"{m}{f'x{n}' if n > 1 else ''}" for m, n in out)


def occupancy(target, rep, cfg):
    per_wg = cfg.workgroup_size // rep.wave_size // SIMDS  # waves per SIMD of one workgroup
    by_regs = rep.waves_per_simd // per_wg
    by_lds = LDS_PER_CU[target] // rep.lds_bytes
    return min(by_regs, by_lds) * per_wg


def row(target, n, stages):
    src = matmul_module(n, n, n)
    opts = CodegenOptions(overrides={"stages": stages})
    res = compile_module(src, target, options=opts)
    (exe,) = res.taken
    rep = res.reports[exe.name]
    tiles = rep.loop_counts["matrix"] // exe.facts.expect.mma_per_k_tile
    (handed,) = codegen_module(src, target, options=opts).taken
    sim = check_matmul(parse_module(handed.text, new_context()), seed=5, sample=1)
    assert sim.check.passed and not sim.stats.races, (target, n, stages, sim.check.line())
    barriers = sum(1 for line in rep.loop_listing if _MARKS[0][1].search(line))
    return (f"| {target} | {n}³ | {stages} | {rep.vgprs} | {rep.vgpr_spills} | {rep.lds_bytes // 1024} KB | "
            f"{rep.waves_per_simd} / {occupancy(target, rep, exe.facts.config)} | {barriers / tiles:g} | "
            f"{rep.matrix_behind_lds_wait} of {rep.loop_counts['matrix']} | {sim.stats.lds_cycles} | "
            f"{sim.stats.lds_conflict_cycles} | `{loop_order(rep.loop_listing)}` |")


def main():
    print("| target | size | stages | VGPRs | spills | LDS | waves/SIMD: registers / with LDS | K-loop barriers "
          "per K tile | matrix behind an LDS wait | LDS cycles (4 workgroups) | conflict cycles | K loop |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for t in TARGETS:
        assert get_target(t).is_amd
        for n in SIZES:
            for s in STAGES:
                print(row(t, n, s), flush=True)


if __name__ == "__main__":
    sys.exit(main())
