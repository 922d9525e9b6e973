"""Heuristic seeds: the numbers the kernel families' heuristics start from, per target class, each
with a one-line provenance (the measurement or document that set it).

As IREE's ``KnownTargets.cpp`` keeps its ``kCDNA4Seeds`` beside the chip tables: data here, the
logic that turns seeds into a config in each family's ``heuristic.py``. Figures are kernel-only
(Nsight Compute) on the GPU named; ``docs/PERFORMANCE.md`` has the current ones and the commands.
A seed table refuses a field without its provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Seed:
    value: Any
    source: str  # one line: what measurement (GPU, shapes, figures) or document set the value

    def __post_init__(self):
        if not self.source or "\n" in self.source:
            raise ValueError(f"seed {self.value!r} needs a one-line provenance")


@dataclass(frozen=True)
class SeedTable:
    """Base class of every seed table: every field a ``Seed`` with its provenance."""

    def __post_init__(self):
        for f in fields(self):
            if not isinstance(getattr(self, f.name), Seed):
                raise TypeError(f"{type(self).__name__}.{f.name} is not a Seed (a value with its provenance)")


@dataclass(frozen=True)
class NvidiaMmaSeeds(SeedTable):
    """The mma.sync matmul kernel on sm_80 / sm_90a."""

    ring_stages: Seed  # the deepest cp.async LDS ring tried
    ring_bytes: Seed  # the most shared memory the ring may take
    raster: Seed  # tile rows per workgroup group, for grids of 8+ tiles per SM
    raster_tiles_per_sm: Seed  # workgroups are grouped by tile rows from this many tiles per SM
    column_order: Seed  # a grid of this many tile rows up to ``raster`` is walked column by column
    big_tiles_per_sm: Seed  # 64x64 warp tiles (128x256 workgroups) from this many 256x128 tiles per SM
    deep_ring_stages: Seed  # large 16-bit problems: K staged twice as deep in a ring of this many stages
    deep_k: Seed  # without a ring, K at least this stages twice as deep


@dataclass(frozen=True)
class AmdMatmulSeeds(SeedTable):
    """The WMMA / MFMA matmul kernel."""

    ring_workgroups: Seed  # gfx950's 2-stage register ring: workgroups per CU its LDS must leave room for


@dataclass(frozen=True)
class HopperWgmmaSeeds(SeedTable):
    """The warpgroup-MMA matmul kernel on sm_90a."""

    shapes: Seed  # (instruction N = tile_n, tile_m), preferred first, f16/bf16
    min_tiles_per_sm: Seed  # the kernel is chosen from this many tiles per SM
    raster_waves: Seed  # workgroups grouped by tile rows from this many waves of tiles
    fp8_shapes: Seed  # (N, tile_m) for fp8 (N <= 128: accumulator + two K tiles' partials in 255 registers)
    fp8_producer: Seed  # fp8 in 128-row tiles: warp-specialized (a producer warpgroup) by default
    producer_tile_m: Seed  # tiles of two MMA warpgroups: the producer warpgroup pays only there
    producer_max_tiles: Seed  # f16/bf16 warp-specialized where its persistent grid has 2 to this many tiles
    persistent_min_waves: Seed  # a persistent grid from this many waves of whole tiles
    small_grid_wide_tiles: Seed  # below min_tiles_per_sm: 64x128 tiles from this many per SM, else 64x64
    split_k_min_k_tiles: Seed  # split-K: K tiles of 64 per share at least
    deep_ring_min_k_tiles: Seed  # one wave of 64-row tiles: the deepest ring from this many K tiles per workgroup


@dataclass(frozen=True)
class StreamSeeds(SeedTable):
    """What the two kernels that stream B once (the decode kernel and the weight-only one) both seed."""

    waves_k: Seed  # waves splitting K in a workgroup
    columns: Seed  # output columns (N) per workgroup
    unroll: Seed  # chunks of K per K tile: 128-bit loads in flight per lane and B column
    row_tiles: Seed  # instruction row tiles (M up to row_tiles x the instruction's rows)
    # columns halved (to the instruction's N) while the grid has fewer warps than this a SM, as long as a workgroup
    # reads no more of A than of B (decode: columns >= M; weight-only: A's bytes <= the packed weights')
    warps_per_sm: Seed


@dataclass(frozen=True)
class DecodeSeeds(StreamSeeds):
    """The decode kernel (M <= one instruction's rows, B streamed once): per vendor."""

    # waves doubled (as many as a workgroup holds and the K tiles divide) where the grid gives a SM no more
    # warps than this at the seeded waves (0: never); the weight-only kernel does not (16 warps measured slower)
    idle_warps_per_sm: Seed


@dataclass(frozen=True)
class WeightOnlySeeds(StreamSeeds):
    """The weight-only decode kernel's (``kernels/decode/weight_only.py``): the decode kernel's, and a
    second shape for many rows of large weights."""

    wide_rows: Seed  # from this many rows (M) ...
    wide_elements: Seed  # ... and this many weights (N x K) ...
    wide_waves_k: Seed  # ... these waves ...
    wide_unroll: Seed  # ... each with this many chunks
    max_rows: Seed  # a static M past one pass (two row tiles) in row blocks, up to this many rows


NVIDIA_MMA = NvidiaMmaSeeds(
    ring_stages=Seed(4, "H100 2048^3: 2/3/4 stages 167/265/284 TFLOP/s; deeper not tried"),
    ring_bytes=Seed(112 * 1024, "H100 4096^3: 3 stages in 87.5 KB 295 TFLOP/s, 4 stages in 114 KB 273"),
    raster=Seed(8, "H100 8192^3 (2048 tiles): groups of 8 tile rows 390 TFLOP/s, 4: 388, 16: 386, none: 371"),
    raster_tiles_per_sm=Seed(
        8, "H100: 8192^3 (15.5 tiles per SM) gains 1.05x grouped; 4096^3 (3.9) the same either way"
    ),
    column_order=Seed(
        2,
        "H200 f16 512x128256x4096 (4 rows of 128x256 tiles): wgmma 1134.0 -> 812.4 us column by column, mma.sync "
        "1321.7 -> 1248.6; 512x14336x4096 (224 tiles) 111.7 -> 101.7",
    ),
    big_tiles_per_sm=Seed(2, "H100 4096^3: 64x64 warp tiles 1.3x faster than 64x32 from two 256x128 tiles per SM"),
    deep_ring_stages=Seed(
        3,
        "H100 128x256 tiles: 64 deep in 3 stages 407.7 / 434.3 TFLOP/s at 4096^3 / 8192^3, 32 deep in 4: 385.8 / 408.9",
    ),
    deep_k=Seed(8192, "H100 8192^3 without a ring: K staged 64 deep 234 TFLOP/s against 194 staged 32 deep"),
)

AMD_MATMUL = AmdMatmulSeeds(
    ring_workgroups=Seed(
        4, "gfx950 final ISA, f16 1024^3-4096^3 B^T: the 2-stage ring takes 128 VGPRs (4 waves/SIMD), one stage 142 (3)"
    ),
)

HOPPER_WGMMA = HopperWgmmaSeeds(
    shapes=Seed(
        ((256, 128), (128, 64)),
        "H100 f16: N256 in 128x256 tiles 572.6 TFLOP/s at 4096^3; N128 in 64x128 227.5 at 1024^3 (mma.sync 170.7)",
    ),
    min_tiles_per_sm=Seed(
        0.5,
        "H100 1024^3: 32 128x256 tiles (0.24 per SM) 124.7 TFLOP/s against mma.sync's 170.7; 128 64x128 tiles 227.5",
    ),
    raster_waves=Seed(
        2, "H200 128x256 tiles: 8192^3 700.4 -> 733.7 TFLOP/s in groups of 8 tile rows; 4096^3 673.3 -> 679.8"
    ),
    fp8_shapes=Seed(
        ((128, 128), (128, 64)), "fp8 wgmma N <= 128 (registers); the ring: 4 slots of (128 + 128) x 128 B = 128 KiB"
    ),
    fp8_producer=Seed(
        1,
        "H200 e4m3 4096^3 / 8192^3, persistent: warp-specialized 1085.7 / 1206.3 TFLOP/s, cp.async ring 950.4 / 1076.3",
    ),
    producer_tile_m=Seed(
        128, "H200 e4m3 1024^3 in 64x128 tiles (one MMA warpgroup): with a producer 313.5, without 355.0 TFLOP/s"
    ),
    producer_max_tiles=Seed(
        9, "H200 f16 3072^3-6144^3 (3-9 tiles per workgroup) 1.01-1.08x with a producer; 8192^3 (16) 728.1 -> 716.9"
    ),
    persistent_min_waves=Seed(
        2, "H200 f16 4096^3 676.9 -> 687.7 TFLOP/s, 8192^3 720.1 -> 729.3, e4m3 4096^3 922.0 -> 960.0 persistent"
    ),
    small_grid_wide_tiles=Seed(
        0.25,
        "H200 f16 tune at 22896ca: 64x128 tiles best where they give 32-64 tiles (down M 64: 42.7 us, k M 128: 9.3), "
        "64x64 below (k M 64: 7.3 against 8.9; BERT q 128x768x768: 4.7 against 5.7)",
    ),
    split_k_min_k_tiles=Seed(
        16,
        "H200 f16 tune at 22896ca: k M 128 in 64x128 tiles 4 shares of 16 K tiles 9.3 us, 8 of 8 14.7; q M 64 "
        "64x128 2 of 32 12.8, 4 of 16 14.4",
    ),
    deep_ring_min_k_tiles=Seed(
        32,
        "H200 tune at c2a76e6+changes, Llama-3-8B M 64-512: 64x64/64x128 tiles in one wave, 8 slots against 4, "
        "1.00-2.10x from 32 K tiles per workgroup (q M 128 26.4 -> 13.7 us, down M 64 split 2 56.4 -> 36.8); "
        "0.73-1.09x at 8-16",
    ),
)

DECODE_NVIDIA = DecodeSeeds(
    waves_k=Seed(
        8,
        "H200 f16, B N x K, M 1 and 16 x Llama-3-8B's q/k/gate/down (8 shapes), 18 configs: 8 warps x 4 chunks "
        "1.04x the per-shape best (geomean), 16 x 2 1.04x, 4 warps 1.12x or worse",
    ),
    columns=Seed(
        16, "the same H200 sweep: 16 columns per workgroup 1.04x the per-shape best, 32 columns 1.14x or worse"
    ),
    unroll=Seed(4, "the same H200 sweep, 8 warps: 4 chunks of 32 (K tiles of 128) 1.04x the best, 2 1.06x, 8 1.15x"),
    row_tiles=Seed(
        2,
        "H200 f16 B N x K, q/k/gate/down: M 32 in 2 row tiles 2.6/4.4/1.0/2.8x the tiled kernel (32 columns: gate "
        "37.3 against 16 columns' 45.9 us); M 64 in 4 tiles 2.2/3.8/0.65/2.1x (gate: every workgroup re-reads A)",
    ),
    warps_per_sm=Seed(
        4,
        "H200 f16 B N x K, k/v 1024 x 4096 (8 warps, 64 workgroups at 16 columns), three runs: M 1 / 8 / 16 in 16 "
        "columns 4.74-4.85 / 4.95 / 5.8-5.9 us, in 8 columns 4.35-4.42 / 4.85-5.0 / 6.05-6.3 (M 16 not narrowed)",
    ),
    idle_warps_per_sm=Seed(
        8,
        "H200 f16 B N x K, 26 decode rows of Llama-3-8B, Llama-3-70B TP8 and TinyLlama at M 1 / 16, every config "
        "timed: the 8 rows at or below 8 warps a SM gain 4-13% (k/v 1 x 1024 x 4096 4.38 -> 3.81 us, 70B "
        "TP8's q 5.95 -> 5.28), 1.075x -> 1.050x the per-row best (geomean); halving the waves past 32 warps a SM "
        "lost 4-7% on 3 of 6 rows (not kept)",
    ),
)

DECODE_AMD = DecodeSeeds(
    waves_k=Seed(4, "unmeasured (no AMD GPU here): 256 threads of wave64, as the NVIDIA seed's 8 warps of 32"),
    columns=Seed(16, "unmeasured: one 16-column instruction tile, the NVIDIA seed's N per workgroup"),
    unroll=Seed(4, "unmeasured: the NVIDIA seed's 4 chunks (64 bytes of B per lane and column in flight)"),
    row_tiles=Seed(2, "unmeasured: the NVIDIA seed's (the same A to B traffic ratio)"),
    warps_per_sm=Seed(0, "unmeasured (no AMD GPU here): the columns seed's, whatever the grid"),
    idle_warps_per_sm=Seed(0, "unmeasured (no AMD GPU here): the waves seed's, whatever the grid"),
)

# The weight-only decode kernel (kernels/decode/weight_only.py): the decode kernel's seeds but for the
# columns per workgroup, and fewer, longer waves for many rows of large weights. Measured on the H200
# (mmaflow bench --weight-only and configs around it: u4 in groups of 128, f16 scale and zero point).
WEIGHT_ONLY_NVIDIA = WeightOnlySeeds(
    waves_k=Seed(
        8, "H200 int4 M 1 / 16: 8 warps x 32 columns 6.9 / 8.0 us; 4 warps 7.3-16.0 / 9.0-15.3, 16 8.6 / 11.7"
    ),
    columns=Seed(32, "the same H200 run: 32 columns 6.9 / 8.0 us, 16 (the f16 seed) 7.0 / 9.8, 64 10.6 / 10.8"),
    unroll=Seed(4, "the same H200 run, 8 warps x 32 columns: 4 chunks of 128 6.9 / 8.0 us, 2 chunks 7.4 / 9.2"),
    row_tiles=Seed(
        2, "the f16 decode kernel's (DECODE_NVIDIA): every workgroup re-reads A, M / columns of its traffic"
    ),
    wide_rows=Seed(9, "H200 int4 M 16 / 32 (156 registers at M 16: one 8-warp workgroup per SM); M 1 not (127.2 us)"),
    wide_elements=Seed(
        1 << 25,
        "H200 int4 N x K 4096^2 M 16 / 32: 8 warps x 4 chunks 8.0 / 11.1 us, 4 x 8 9.3 / 11.4; 14336 x 4096 below",
    ),
    wide_waves_k=Seed(
        4,
        "H200 int4 M 16 / 32: 4 warps x 8 chunks, gate 14336 x 4096 21.6 / 31.5 us against 25.5 / 35.2, LM head "
        "128256 x 4096 149.2 / 252.5 against 211.9 / 281.9",
    ),
    wide_unroll=Seed(8, "the same H200 run (4 warps x 8 chunks)"),
    max_rows=Seed(
        128,
        "unmeasured: 4 passes of 32 rows; IREE's default ran this dispatch 85.0 us at M 16 on the H200 (10.6x ours)",
    ),
    warps_per_sm=Seed(
        4,
        "H200 llama_mlp_wq M 2: down 1024 x 2816 i8 (4 warps) in 32 / 16 / 8 columns 7.45 / 6.05 / 5.50 us (32 / 64 / "
        "128 workgroups); gate / up 2816 x 1024 i4 (8 warps, 88 workgroups at 32) 4.4 / 3.8 / 3.6; the A-bytes "
        "guard unmeasured (the decode kernel's: M 16 lost 8-13% narrowed)",
    ),
)
WEIGHT_ONLY_AMD = WeightOnlySeeds(
    waves_k=DECODE_AMD.waves_k,
    columns=DECODE_AMD.columns,
    unroll=DECODE_AMD.unroll,
    row_tiles=DECODE_AMD.row_tiles,
    wide_rows=Seed(1 << 30, "unmeasured (no AMD GPU here): the wide shape is not taken"),
    wide_elements=Seed(1 << 62, "unmeasured: not taken"),
    wide_waves_k=DECODE_AMD.waves_k,
    wide_unroll=DECODE_AMD.unroll,
    max_rows=Seed(128, "unmeasured (no AMD GPU here): the NVIDIA seed's"),
    warps_per_sm=Seed(0, "unmeasured (no AMD GPU here): the columns seed's, whatever the grid"),
)
