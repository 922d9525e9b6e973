"""The mma.sync / WMMA / MFMA matmul family's heuristic: the default config per target.

Tiles sized to the register file so that large matmuls do not spill; an LDS ring on NVIDIA where
cp.async can fill it, on AMD only where the final ISA showed it better. The numbers it starts from
are seeds with their provenance (``target/seeds.py``)."""

from __future__ import annotations

import math
from dataclasses import replace

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.common.tiles import (
    fit_tile,
    group_reason,
    grouped_rows,
    k_outer,
    lds_bytes,
    matching_intrinsics,
    require_intrinsic,
    ring_problem,
    validate,
    waves_for,
)
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.seeds import AMD_MATMUL, NVIDIA_MMA
from mmaflow.compiler.target.targets import Family, Target, Vendor


def default_config(
    target: Target,
    problem: Contraction,
    wave_size: int | None = None,
    intrinsic: str | None = None,
    why: list | None = None,
) -> KernelConfig:
    """Pick a config sized to the target's register file so that large matmuls do not spill.

    Per-wave register tiles (f32 accumulators in VGPRs): RDNA wave32 64x32 (8 WMMA, 64 VGPRs),
    RDNA3 wave64 64x64 (16 WMMA, 64 VGPRs), CDNA 64x64 (16 MFMA 16x16, 64 VGPRs), mma.sync 64x32
    (16 instructions, 64 registers); on NVIDIA 64x64 in 128x256 workgroup tiles (256x128 without
    an LDS ring) when the problem has at least two such tiles per SM, and 32x32 in 64x128 tiles
    when 128x128 ones would be fewer than the SMs. Workgroups are 2 x 4, 4 x 2 or 2 x 2 waves, K
    staged 32 (16-bit) or 64 (8-bit) deep; each dimension shrinks to fit small problems. An LDS
    ring on NVIDIA where cp.async can fill it (``_ring``); on AMD only where measured better
    (``_amd_ring``: gfx950 with both operands K-innermost).
    """
    why = why if why is not None else []
    require_intrinsic(target, problem)
    wave = wave_size or target.default_wave_size
    candidates = matching_intrinsics(target, problem, wave, opt_in=False)
    if not candidates:
        raise UnsupportedError(f"{target.name} has no wave{wave} instruction for {problem.describe()}")
    intr = candidates[0] if intrinsic is None else target.intrinsic(intrinsic)
    why.append(
        f"{intr.name}: "
        + (
            "as asked"
            if intrinsic
            else f"the first of {target.name}'s wave{wave} instructions for {problem.a_type} x {problem.b_type} -> "
            f"{problem.c_type} ({', '.join(c.name for c in candidates)})"
        )
    )
    bits = TYPE_BITS[problem.a_type]
    narrow = min(bits, TYPE_BITS[problem.b_type])  # (fp8 x fp4: K tiles and padding in whole fp4 bytes)
    if target.vendor is Vendor.NVIDIA:
        # Measured on the H100: 64x64 warp tiles beat 64x32 ones by 1.3x at 4096^3, once there are
        # >= 2 256x128 workgroups per SM; with the LDS ring, in a 128x256 tile (2x4 warps) rather
        # than 256x128 (4x2): 4096^3 359 -> 395 TFLOP/s, 8192^3 393 -> 412.
        # Fewer 128x128 tiles than SMs: 64x128 ones (32x32 per warp) put twice as many SMs to
        # work; measured 152 vs 127 TFLOP/s at 1024^3 (128x64 the same, 64x64 127).
        big = (problem.m // 256) * (problem.n // 128) >= NVIDIA_MMA.big_tiles_per_sm.value * target.compute_units
        # (sizes known at compile time only: a dynamic size is an estimate here, a dynamic batch 1)
        few = (
            not problem.dynamic
            and problem.n >= 128
            and -(-problem.m // 128) * -(-problem.n // 128) * problem.batch < target.compute_units
            and fit_tile(problem.m, 64, 2 * intr.m, intr.m) == 64
        )  # (not 32 rows: a 4000-row M keeps 128)
        waves_m, waves_n, wt_m, wt_n = (2, 4, 64, 64) if big else (2, 4, 32, 32) if few else (2, 4, 64, 32)
        why.append(
            f"{waves_m}x{waves_n} warps of {wt_m}x{wt_n}: "
            + (
                f"at least two 256x128 workgroup tiles per SM ({target.compute_units} SMs): 64x64 warp tiles measured "
                f"1.3x faster at 4096^3 on the H100, 128x256 1.1x faster than 256x128 with a ring"
                if big
                else f"fewer 128x128 tiles than SMs ({target.compute_units}): 64x128 tiles keep twice as many SMs busy "
                f"(1.2x at 1024^3 on the H100)"
                if few
                else f"fewer than two 256x128 tiles per SM ({target.compute_units} SMs): smaller tiles keep every "
                "SM busy"
            )
        )
    elif intr.family.startswith("wmma") and wave == 32:
        waves_m, waves_n, wt_m, wt_n = 2, 4, 64, 32
        why.append(
            "2x4 waves of 64x32: 8 WMMA accumulators (64 VGPRs) per wave32 leave room for fragments "
            "and prefetched tiles in 256 VGPRs"
        )
    elif narrow == 4 and intr.family == "mfma":
        # fp4 (MXFP4 too): a 16x16x128 MFMA reads 16 bytes of A and of B a lane; 128x64 wave tiles
        # read 12 fragments for 32 MFMAs (6 bytes a lane per MFMA, IREE 3.13's own MXFP4 kernel's
        # figure at 4096^3) where 64x64 read 8 for 16 (8 bytes): 238 VGPRs, 2 waves/SIMD as IREE's.
        waves_m, waves_n, wt_m, wt_n = 2, 2, 128, 64
        why.append(
            "2x2 waves of 128x64: 4-bit operands' 16-byte fragments, 12 LDS reads for 32 MFMAs a K step "
            "(64x64: 8 for 16), IREE's own MXFP4 kernel's LDS bytes per MFMA"
        )
    else:
        waves_m, waves_n, wt_m, wt_n = 2, 2, 64, 64
        why.append(
            f"2x2 waves of 64x64: {(64 // intr.m) * (64 // intr.n)} instructions' accumulators per wave "
            f"within the register budget"
        )
    # K tiles in whole 16-byte chunks (an LDS row of 128-bit accesses) and whole instructions: f32's
    # k of 2 or 4 would otherwise fit K = 40 with tiles of 10 (40-byte rows)
    # values in a whole number of 16-byte chunks of either operand (fp6: 64 in 48 bytes)
    chunk = math.lcm(*(128 // math.gcd(128, TYPE_BITS[t]) for t in (problem.a_type, problem.b_type)))
    k_quantum = max(intr.k, chunk)
    tile_k = -(-max(intr.k, 32 * 16 // bits) // k_quantum) * k_quantum  # (fp6: 85 -> 128)
    why.append(f"K staged {tile_k} deep: {tile_k * bits // 8} bytes per LDS row, 128-bit copies")
    tm = fit_tile(problem.m, waves_m * wt_m, waves_m * intr.m, intr.m)
    tn = fit_tile(problem.n, waves_n * wt_n, waves_n * intr.n, intr.n)
    tk = fit_tile(problem.k, tile_k, k_quantum, k_quantum)
    for dim, size, want, got in (
        ("M", problem.m, waves_m * wt_m, tm),
        ("N", problem.n, waves_n * wt_n, tn),
        ("K", problem.k, tile_k, tk),
    ):
        if got != want:
            why.append(
                f"tile {dim} {got} instead of {want}: fitted to {dim} = {size}"
                + (" (a multiple that divides it)" if size % got == 0 else " (the last tile partial)")
            )
        elif size % got:
            why.append(f"tile {dim} {got}: {dim} = {size} leaves a partial last tile (bounded accesses, no padding)")
    # Fewer waves when the tile shrank below the wave grid.
    wm = waves_for(tm, waves_m, intr.m, wt_m)
    wn = waves_for(tn, waves_n, intr.n, wt_n)
    if (wm, wn) != (waves_m, waves_n):
        why.append(f"{wm}x{wn} waves: the smaller tile splits into no more")
    pad = chunk  # one 16-byte chunk per row (of the narrower operand; fp6: three): staggers rows across banks
    why.append(f"lds_pad {pad}: {pad * narrow // 8} bytes per LDS row stagger rows across banks")
    cfg = KernelConfig(intr.name, wave, tm, tn, tk, wm, wn, pad)
    if target.vendor is Vendor.AMD:
        cfg = _amd_ring(cfg, target, problem, why)
    if target.vendor is Vendor.NVIDIA:
        cfg = _ring(cfg, target, problem, why)
        if (
            big
            and cfg.stages > 1
            and bits == 16
            and problem.k >= 2 * tile_k
            and problem.m >= waves_m * wt_m
            and problem.n >= waves_n * wt_n
        ):
            # H100 kernel-only (the ring's copies unguarded in a main loop with a drain): 128x256
            # tiles staged 64 deep in 3 stages (153 KB) 407.7 / 434.3 TFLOP/s at 4096^3 / 8192^3,
            # against 385.8 / 408.9 staged 32 deep in 4 (108 KB); 64 deep in 4 stages 402.1 /
            # 433.6; 256x128x64 in 3 404.5 / 430.9. The full tile even where a smaller one would
            # divide the problem: 4000^3 378.9 with partial 128x256x64 tiles, 310.5 with the
            # dividing 128x160x32 (static 4096^3: 406.5 alongside).
            deep = replace(
                cfg,
                tile_m=waves_m * wt_m,
                tile_n=waves_n * wt_n,
                tile_k=2 * tile_k,
                waves_m=waves_m,
                waves_n=waves_n,
                stages=NVIDIA_MMA.deep_ring_stages.value,
            )
            if not ring_problem(deep, target, problem) and lds_bytes(deep, problem, target) <= target.lds_bytes:
                if (deep.tile_m, deep.tile_n, deep.tile_k) != (cfg.tile_m, cfg.tile_n, 2 * cfg.tile_k):
                    why.append(
                        f"tile {deep.tile_m}x{deep.tile_n} kept (the last tiles partial) rather than one "
                        f"dividing the problem: 1.22x at 4000^3 on the H100"
                    )
                cfg = deep
                why.append(
                    f"K staged {cfg.tile_k} deep in a 3-stage ring instead ({lds_bytes(cfg, problem, target)} bytes): "
                    f"half the barriers per MMA, 1.06x at 4096^3 and 8192^3 on the H100"
                )
        if big and cfg.stages == 1:
            # Without a ring the 256x128 orientation: 53.0 vs 38.0 TFLOP/s on the H100 for a 4096^3
            # matmul of dynamic sizes with no divisibility promise.
            tm, tn = fit_tile(problem.m, 256, 4 * intr.m, intr.m), fit_tile(problem.n, 128, 2 * intr.n, intr.n)
            cfg = replace(
                cfg, tile_m=tm, tile_n=tn, waves_m=waves_for(tm, 4, intr.m, 64), waves_n=waves_for(tn, 2, intr.n, 64)
            )
            why.append(f"no LDS ring: tile {tm}x{tn} (4x2 warps) instead, measured faster without one")
        rows = -(-problem.m // cfg.tile_m)
        tiles = rows * -(-problem.n // cfg.tile_n)  # per batch: grouping is within one
        grouped = tiles >= NVIDIA_MMA.raster_tiles_per_sm.value * target.compute_units
        group = grouped_rows(rows)
        if not problem.dynamic and grouped and group > 1:
            # seed: target/seeds.py (H100 8192^3); 4096^3 the same either way, 2048^3 279 vs 288
            # TFLOP/s without. Not measured on AMD: IREE's order there.
            cfg = replace(cfg, raster=group)
            why.append(group_reason(group, rows, tiles, "8+ per SM"))
        if cfg.stages == 1 and cfg.waves_m == 4 and problem.k >= NVIDIA_MMA.deep_k.value:
            # H100, 8192^3 without a ring: 234 vs 194 TFLOP/s with K staged 64 deep. With the ring,
            # 32 deep in 3 stages is faster (371 vs 287).
            cfg = replace(cfg, tile_k=fit_tile(problem.k, 2 * tile_k, k_quantum, k_quantum))
            why.append(f"K staged {cfg.tile_k} deep instead: K >= 8192 without an LDS ring measured faster so")
    validate(cfg, target, problem)
    return cfg


# NVIDIA's LDS ring: the deepest of up to RING_STAGES that fits in RING_BYTES (seed: target/seeds.py;
# H100 8192^3 in 256x128x64 tiles: 2 stages (106 KB) 346 TFLOP/s, 3 (159 KB) 309).
RING_STAGES = NVIDIA_MMA.ring_stages.value
RING_BYTES = NVIDIA_MMA.ring_bytes.value


def _ring(cfg: KernelConfig, target: Target, problem: Contraction, why: list) -> KernelConfig:
    """The deepest LDS ring up to RING_STAGES that the problem allows and RING_BYTES (and the
    target's shared memory) hold; stages=1 (the next tile prefetched in registers) with the
    reason when none does."""
    reason = None
    budget = min(RING_BYTES, target.lds_bytes)
    for stages in range(RING_STAGES, 1, -1):
        ring = replace(cfg, stages=stages)
        reason = ring_problem(ring, target, problem)
        if reason:
            break
        if lds_bytes(ring, problem, target) <= budget:
            why.append(
                f"{stages}-stage LDS ring: {stages - 1} K tiles in flight through cp.async, one barrier "
                f"per K tile ({lds_bytes(ring, problem, target)} bytes of shared memory; deeper rings or more "
                f"than {RING_BYTES} bytes measured slower on the H100)"
            )
            return ring
        reason = f"{stages} stages need {lds_bytes(ring, problem, target)} bytes of shared memory, more than {budget}"
    why.append(f"stages 1 (the next K tile prefetched in registers): {reason}")
    return cfg


# AMD's LDS ring (--config stages=2..4), final ISA of f16 1024^3 and 4096^3: one barrier per K tile
# instead of two, 0 LDS bank conflicts either way, but its two LDS slots (20 -> 40 KB) and tiles in
# flight cost waves (waves/SIMD, stages 1 -> 2 -> 3: gfx1100 6 -> 6 -> 6, gfx1201 8 -> 6 -> 6,
# gfx942 3 -> 1 -> 1, gfx950 4 -> 3 -> 3). Better on every figure only on gfx950 with A and B both
# K-innermost (seed: target/seeds.py); elsewhere one stage, until hardware timings weigh barriers
# against waves (docs/kernels/matmul.md, "The K loop and its ring").
AMD_RING_WORKGROUPS = AMD_MATMUL.ring_workgroups.value  # gfx950: the waves/SIMD its 2-stage ring's registers allow


def _amd_ring(cfg: KernelConfig, target: Target, problem: Contraction, why: list) -> KernelConfig:
    """A 2-stage LDS ring on gfx950 when both operands are K-innermost in memory and its LDS
    leaves room for AMD_RING_WORKGROUPS workgroups; one stage otherwise (see above)."""
    ring = replace(cfg, stages=2)
    if target.family is not Family.CDNA4:
        why.append(
            "stages 1 (one LDS tile, the next prefetched in registers): on this target an LDS ring's LDS and "
            "registers cost waves (docs/kernels/matmul.md, The K loop and its ring)"
        )
        return cfg
    if k_outer(problem, "A") or k_outer(problem, "B"):
        why.append(
            "stages 1: an operand is K-outer in memory (transposed on its way into LDS); gfx950's LDS ring "
            "measured no better there (docs/kernels/matmul.md, The K loop and its ring)"
        )
        return cfg
    if problem.k <= cfg.tile_k:
        why.append("stages 1: one K tile, nothing to pipeline")
        return cfg
    # A wave tile past 64x64 (4-bit operands' 128x64: 32 accumulators, 128 VGPRs before fragments)
    # leaves room for 2 waves a SIMD: 2 workgroups of 4 waves a CU need LDS, not 4.
    workgroups = AMD_RING_WORKGROUPS if cfg.wave_tile_m * cfg.wave_tile_n <= 64 * 64 else AMD_RING_WORKGROUPS // 2
    if workgroups * lds_bytes(ring, problem, target) > target.lds_bytes:
        why.append(
            f"stages 1: a 2-stage LDS ring needs {lds_bytes(ring, problem, target)} bytes, more than a "
            f"{workgroups}th of {target.lds_bytes}"
        )
        return cfg
    why.append(
        "2-stage LDS ring: A and B are K-innermost (direct copies), one barrier per K tile instead of two"
        + (" (f16 4096^3: measured 128 VGPRs instead of 142, 4 waves/SIMD instead of 3)" if workgroups == 4 else "")
        + f" ({lds_bytes(ring, problem, target)} bytes of LDS: {workgroups} workgroups per CU)"
    )
    return ring


# `mmaflow tune`'s candidates: workgroup tiles (M x N, waves M x N) from 64x64 to 128x256; on NVIDIA
# K staged 32 deep in a 4-stage ring or 64 deep in 3 (the ring sizes the heuristic picks from).
TUNING_TILES = ((64, 64, 2, 2), (64, 128, 2, 4), (128, 64, 4, 2), (128, 128, 2, 4), (128, 256, 2, 4))
TUNING_DEPTHS = ((32, 4), (64, 3))  # (tile_k for 16-bit inputs, stages); twice as deep for 8-bit
# AMD (no GPU here: the static choice): one stage, as the heuristic (``_amd_ring``), 32 or 64 deep.
AMD_TUNING_DEPTHS = ((32, 1), (64, 1))


def tuning_candidates(target: Target, problem: Contraction) -> list[dict]:
    """The configs `mmaflow tune` tries (``--config`` overrides): tiles no larger than the problem's
    power-of-two bucket (a tile past it only masks). NVIDIA: timed on a GPU, each tile K staged 32
    deep in a 4-stage ring or 64 deep in 3, in IREE's order and in grouped tile rows past a wave of
    tiles. AMD: chosen statically (``runtime/static_cost.py``), each tile K staged 32 or 64 deep
    without a ring, and with gfx950's 2-stage ring."""
    if problem.m is None or problem.n is None:
        return []
    scale = 16 // TYPE_BITS[problem.a_type] if TYPE_BITS[problem.a_type] < 16 else 1
    if target.vendor is Vendor.NVIDIA:
        depths = TUNING_DEPTHS
    else:
        depths = AMD_TUNING_DEPTHS + ((32, 2),) * (target.family is Family.CDNA4)
    out = []
    for tm, tn, wm, wn in TUNING_TILES:
        if tm > max(64, 2 * problem.m) or tn > max(64, 2 * problem.n):
            continue
        rows = -(-problem.m // tm)
        tiles = rows * -(-problem.n // tn)
        # NVIDIA grids past a wave: IREE's order and grouped tile rows both (the heuristic's order
        # otherwise, which it chose for its own tile)
        orders = (1, grouped_rows(rows)) if target.vendor is Vendor.NVIDIA and tiles > target.compute_units else ()
        for tk, stages in depths:
            cand = {"tile_m": tm, "tile_n": tn, "tile_k": tk * scale, "waves_m": wm, "waves_n": wn, "stages": stages}
            out += [{**cand, "raster": r} for r in sorted(set(orders))] or [cand]
    return out
