"""Reference parts: the one chip per AMD target whose peak rates the static cost model of
`mmaflow tune` (``runtime/static_cost.py``) divides by, each figure with a one-line provenance.

No AMD GPU is reachable from here, so an AMD tuning table holds the *static* choice: the candidate
configs' final ISA and lane-executor counters turned into an estimate of kernel time on the part
named below. The figures are the vendors' peak numbers as IREE 3.13's ``KnownTargets.cpp`` carries
them (its ``ChipDetails``: units, TB/s, dense TFLOP/s per type class), the rest from the product
pages; the two that are assumptions say so. The table a static run writes names its part; a user
on another part of the family (MI325X, MI350X, RX 7900 XT ...) gets the same choice, as IREE's
``gfx942`` target does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chip:
    part: str  # the product the figures are for
    units: int  # CUs (CDNA) or WGPs (RDNA, as IREE counts them: two CUs, four SIMD32s)
    simds: int  # SIMDs per unit (matrix units a unit's waves spread over)
    lds_bytes: int  # LDS per unit: how many workgroups' allocations it holds at once
    clock_ghz: float  # peak engine clock (LDS and L2 rates are per clock)
    hbm_tbs: float  # peak memory bandwidth, TB/s
    tflops: dict  # dense matrix TFLOP/s (TOP/s for integers) per operand class ("f16", "fp8", ...)
    l2_bytes_per_clock: int  # L2 -> unit fill rate per clock (an assumption: see ``L2_NOTE``)
    source: str  # one line: where the figures come from

    def __post_init__(self):
        if not self.source or "\n" in self.source:
            raise ValueError(f"chip {self.part} needs a one-line provenance")

    def peak_flops(self, a_type: str) -> float:
        """Dense matrix FLOP/s of the whole part for operands of ``a_type``."""
        cls = OPERAND_CLASS.get(a_type)
        if cls is None or cls not in self.tflops:
            raise KeyError(f"{self.part} has no matrix rate for {a_type} operands")
        return self.tflops[cls] * 1e12


# Operand type -> the rate class the vendors quote (bf16 runs at f16's rate, u8 at i8's).
OPERAND_CLASS = {
    "f16": "f16",
    "bf16": "f16",
    "f8E4M3FN": "fp8",
    "f8E5M2": "fp8",
    "f8E4M3FNUZ": "fp8",
    "f8E5M2FNUZ": "fp8",
    "i8": "i8",
    "u8": "i8",
    "f32": "f32",
    "f64": "f64",
}

L2_NOTE = (
    "assumed, not a published figure: 64 bytes per clock per unit, one 64-byte request per clock "
    "from the unit's vector cache; it prices each workgroup's re-reads of A and B (tile shape) "
    "against each other, HBM bounds the unique bytes"
)
# The latency one wave waits when a matrix instruction sits behind an LDS read issued just before
# it (``isa.matrix_behind_lds_wait``); other waves on the SIMD hide it in proportion. Assumed: the
# order of the LDS round trip the ISA guides describe (tens of cycles), not measured here.
LDS_LATENCY_CYCLES = 64

CHIPS: dict[str, Chip] = {
    "gfx942": Chip(
        part="MI300X",
        units=304,
        simds=4,
        lds_bytes=64 * 1024,
        clock_ghz=2.1,
        hbm_tbs=5.3,
        tflops={"f16": 1307.4, "fp8": 2614.9, "i8": 2614.9, "f32": 163.4, "f64": 163.4},
        l2_bytes_per_clock=64,
        source="IREE 3.13 KnownTargets.cpp mi300xChip (CDNA3 white paper p.23: 304 CUs, 5.3 TB/s, TFLOP/s); "
        "2.1 GHz peak engine clock and FP64 matrix 163.4 TFLOP/s from AMD's MI300X product page",
    ),
    "gfx950": Chip(
        part="MI355X",
        units=256,
        simds=4,
        lds_bytes=160 * 1024,
        clock_ghz=2.4,
        hbm_tbs=8.0,
        tflops={"f16": 2500.0, "fp8": 5000.0, "i8": 5000.0, "f32": 157.3, "f64": 78.6},
        l2_bytes_per_clock=64,
        source="IREE 3.13 KnownTargets.cpp mi355xChip (CDNA4 white paper p.18: 256 CUs, 8 TB/s, TFLOP/s); "
        "2.4 GHz peak engine clock and FP64 matrix 78.6 TFLOP/s from AMD's MI355X product page",
    ),
    "gfx1100": Chip(
        part="Radeon RX 7900 XTX",
        units=48,
        simds=4,
        lds_bytes=128 * 1024,
        clock_ghz=2.5,
        hbm_tbs=0.96,
        tflops={"f16": 122.8, "i8": 122.8},
        l2_bytes_per_clock=64,
        source="IREE 3.13 KnownTargets.cpp rx7900xtxChip (96 CUs = 48 WGPs); 960 GB/s, 2.5 GHz boost, "
        "122.8 TFLOP/s FP16 and 122.8 TOP/s INT8 (WMMA runs i8 at f16's rate) from AMD's product page",
    ),
    "gfx1201": Chip(
        part="Radeon RX 9070 XT",
        units=32,
        simds=4,
        lds_bytes=128 * 1024,
        clock_ghz=2.97,
        hbm_tbs=0.64,
        tflops={"f16": 195.0, "fp8": 389.0, "i8": 389.0},
        l2_bytes_per_clock=64,
        source="IREE 3.13 KnownTargets.cpp rx9070xtChip (64 CUs = 32 WGPs, 0.64 TB/s, TFLOP/s); 2.97 GHz "
        "boost clock from AMD's product page",
    ),
}


def chip(target_name: str) -> Chip:
    try:
        return CHIPS[target_name]
    except KeyError:
        raise KeyError(
            f"no reference part for {target_name}: the static cost model covers {', '.join(CHIPS)}"
        ) from None
