"""The Hopper warpgroup-MMA family's heuristic: where it takes a problem on sm_90a, its tile shape,
ring, raster, warp specialization and persistent grid."""

from __future__ import annotations

from dataclasses import replace

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.common.tiles import RASTER, group_reason, grouped_rows, matching_intrinsics
from mmaflow.compiler.kernels.wgmma.plan import (
    DEFAULT_STAGES,
    MAX_SPLIT_K,
    STAGES,
    deepest_stages,
    output_tiles,
    overhangs,
    persistent_refusal,
    tma_refusal,
    validate_warpgroup,
    warpgroup_config,
)
from mmaflow.compiler.target.intrinsics import FP8, WarpgroupIntrinsic, wgmma
from mmaflow.compiler.target.seeds import HOPPER_WGMMA, NVIDIA_MMA
from mmaflow.compiler.target.targets import Target

# Hopper: the warpgroup-MMA kernel (kernels/wgmma/plan.py) where it measured faster than mma.sync on the
# H100: the first shape that gives one tile per two SMs; below that 64-row tiles for a static grid that is not
# batched (_small_grid), mma.sync otherwise (seed: target/seeds.py).
WARPGROUP_SHAPES = HOPPER_WGMMA.shapes.value  # (N of the instruction = tile_n, tile_m), preferred first
WARPGROUP_MIN_TILES_PER_SM = HOPPER_WGMMA.min_tiles_per_sm.value
# Workgroups grouped by tile rows (common.tiles.grouped_rows) from two waves of tiles on (seed: target/seeds.py).
WARPGROUP_RASTER_WAVES = HOPPER_WGMMA.raster_waves.value
# fp8: N 128 at most (wgmma.plan.FP8_MAX_N: accumulator plus two K tiles' partials in 255 registers),
# 128x128 tiles where they give one tile per two SMs, else 64x128 (seed: target/seeds.py).
FP8_WARPGROUP_SHAPES = HOPPER_WGMMA.fp8_shapes.value
# fp8: the warp-specialized kernel (a producer warpgroup feeds the TMA ring through "full" / "empty"
# mbarriers) where the TMA ring serves, persistent as the cp.async ring (seed: target/seeds.py).
FP8_PRODUCER = HOPPER_WGMMA.fp8_producer.value
# ... for tiles of two MMA warpgroups (fp8 and f16/bf16 alike; seed: target/seeds.py).
PRODUCER_TILE_M = HOPPER_WGMMA.producer_tile_m.value


def warpgroup_only(target: Target, problem: Contraction) -> bool:
    """Whether only the warpgroup kernel computes ``problem``'s types on ``target``: fp8 x fp8 ->
    f32 on sm_90a, which no mma.sync instruction mmaflow emits takes."""
    return (
        target.warpgroup_mma
        and problem.a_type in FP8
        and problem.b_type in FP8
        and problem.c_type == "f32"
        and not matching_intrinsics(target, problem)
    )


def warpgroup_refusal(target: Target, problem: Contraction) -> str | None:
    """For a ``warpgroup_only`` problem: why the warpgroup kernel does not take it (None: it does)."""
    try:
        warpgroup_default(target, problem, {})
    except (UnsupportedError, ConfigError) as e:
        return str(e)
    return None


def warpgroup_default(
    target: Target, problem: Contraction, overrides: dict, why: list | None = None
) -> tuple[KernelConfig, WarpgroupIntrinsic] | None:
    """The warpgroup-MMA kernel's config where the heuristic picks it (see WARPGROUP_SHAPES), or
    None with the reason in ``why``: not Hopper, other types, too few tiles, or a problem the
    kernel does not take (its refusal is quoted). fp8 (``warpgroup_only``) has no mma.sync to
    fall back to: the kernel takes it with the overrides, in the smallest shape where the tiles
    are few, and its refusal is raised (select leaves such dispatches to IREE beforehand)."""
    why = why if why is not None else []
    if not target.warpgroup_mma:
        return None
    types = (problem.a_type, problem.b_type, problem.c_type)
    if warpgroup_only(target, problem):
        return _warpgroup_fp8(target, problem, overrides, why)
    if problem.a_type not in ("f16", "bf16") or types[1:] != (problem.a_type, "f32"):
        why.append(
            f"mma.sync, not wgmma: the warpgroup kernel takes f16/bf16 -> f32 (and fp8 -> f32), this is "
            f"{' x '.join(types[:2])} -> {types[2]}"
        )
        return None
    # (a dynamic size counts as its estimate, as in default_config; a dynamic batch as 1)
    est = problem.estimate()
    shapes = fitted_shapes(WARPGROUP_SHAPES, est)
    names = [f"WGMMA_F32_64x{n}x16_{problem.a_type.upper()}" for n, _ in shapes]
    # copy=tma, persistent=W, producer=1, cluster=2 or split_k=S alone ask for the heuristic's wgmma kernel
    copy = {k: v for k, v in overrides.items() if k in ("copy", "persistent", "producer", "cluster", "split_k")}
    overrides = {k: v for k, v in overrides.items() if k not in copy}
    if overrides:
        why.append(
            f"mma.sync, not wgmma: --config {', '.join(sorted(overrides))} configures the mma.sync kernel "
            f"(--config intrinsic={names[0]} asks for the warpgroup kernel)"
        )
        return None
    dyn = (
        f", dynamic {'/'.join(d.dim.upper() for d in problem.dynamic)} estimated as {Contraction.DYNAMIC_ESTIMATE}"
        if problem.is_dynamic
        else ""
    )
    counts = []
    for name, (n, tile_m) in zip(names, shapes):
        tiles = (-(-est.m // tile_m)) * (-(-est.n // n)) * (est.batch or 1) * copy.get("split_k", 1)
        counts.append(f"{tiles} {'workgroups' if copy.get('split_k', 1) > 1 else 'tiles'} of {tile_m}x{n}")
        if tiles >= WARPGROUP_MIN_TILES_PER_SM * target.compute_units:
            break
    else:
        small = _small_grid(target, problem, copy, why)
        if small is not None:
            return small
        why.append(
            f"mma.sync, not wgmma: {' or '.join(counts)} for {target.compute_units} SMs{dyn} (the warpgroup "
            f"kernel is chosen from one tile per two SMs)"
        )
        return None
    try:
        cfg = warpgroup_config(target, problem, target.intrinsic(name), {"tile_m": tile_m, **copy})
    except (UnsupportedError, ConfigError) as e:
        if "split_k" in copy:  # (only this kernel splits K: its refusal is the answer)
            raise
        why.append(f"mma.sync, not wgmma: {str(e).removeprefix(f'{name}: ')}")
        return None
    why.append(
        f"{name}: the warpgroup-MMA kernel, {cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k} tiles, {cfg.stages}-slot "
        f"{'TMA' if cfg.copy else 'cp.async'} ring ({counts[-1]} for {target.compute_units} SMs{dyn}; "
        f"measured faster than mma.sync on the H100 from 1024^3)"
    )
    cfg = _warpgroup_raster(target, problem, cfg, why)
    if "persistent" in copy:
        return cfg, target.intrinsic(name)
    if not copy:
        specialized = _warpgroup_specialized(target, problem, cfg, why)
        if specialized is not None:
            return specialized, target.intrinsic(name)
    cfg = _warpgroup_persistent(target, problem, cfg, why)
    return _deep_ring(target, problem, cfg, why), target.intrinsic(name)


def fitted_shapes(shapes: tuple, est: Contraction) -> list[tuple[int, int]]:
    """``shapes`` ((instruction N, tile_m), preferred first) no wider or taller than the problem
    needs: N halved down to 64 while half still covers N, tile_m 64 where M fits 64 rows (a
    128x256 tile over an N of 128 computes and stages twice what it stores); duplicates dropped.
    H200, kernel-only: GPT-2's decode P V over 96 heads (1x64x2048 each) 38.2 -> 9.4 us, Llama-3-8B's
    32x512x128x512 P V 12.6 -> 8.3, decode scores 1.3-1.5x (docs/PERFORMANCE.md, attention batches)."""
    out: list[tuple[int, int]] = []
    for n, tile_m in shapes:
        while n > 64 and n // 2 >= est.n:
            n //= 2
        fit = (n, 64 if est.m <= 64 else tile_m)
        if fit not in out:
            out.append(fit)
    return out


# Below one tile per two SMs (static f16/bf16): 64-row wgmma tiles of 64x128 from SMALL_GRID_WIDE_TILES tiles per SM,
# else 64x64, each tile's K split over a cluster where shares of SPLIT_K_MIN_K_TILES K tiles fill a wave at most
# (seeds: target/seeds.py).
SMALL_GRID_WIDE_TILES = HOPPER_WGMMA.small_grid_wide_tiles.value
SPLIT_K_MIN_K_TILES = HOPPER_WGMMA.split_k_min_k_tiles.value
# One wave of 64-row tiles (N <= 128) whose workgroups each run DEEP_RING_MIN_K_TILES K tiles or more: the
# deepest ring that fits (8 slots of 16-24 KiB) instead of 4 (seed: target/seeds.py).
DEEP_RING_MIN_K_TILES = HOPPER_WGMMA.deep_ring_min_k_tiles.value


def _small_grid(
    target: Target, problem: Contraction, overrides: dict, why: list
) -> tuple[KernelConfig, WarpgroupIntrinsic] | None:
    """The warpgroup kernel with split-K for a static grid of fewer tiles than the heuristic's
    shapes need and a K long enough for two shares of SPLIT_K_MIN_K_TILES: one MMA warpgroup per
    64-row tile, S workgroups per tile (``split_k_refusal``), as many as fill one wave; None
    (mma.sync) for dynamic sizes, a batch with a short K, or where the kernel refuses. Measured
    against the mma.sync kernel (H200, `mmaflow tune` at 22896ca, the configs this rule gives): Llama-3-8B
    k/v at M 128 38.9 -> 9.9 us, down at M 128 132.3 -> 58.6, q at M 64 39.2 -> 12.3, BERT-base down at
    M 128 29.6 -> 7.0. A K too short to split keeps the 64-row tiles unsplit (not batched): BERT-base's
    q / up at M 128 (128x768x768, 128x3072x768, both B orders) 4.7-5.1 us against mma.sync's 9.0-9.9 (H200,
    `mmaflow tune` at ac048f2; BERT at batch 2 x 128 tokens, M 256, had taken mma.sync's 24 tiles of 64x128:
    9.8 us against cuBLAS's 4.4)."""
    if problem.is_dynamic or set(overrides) - {"split_k"}:
        return None
    sms = target.compute_units
    n = 128 if -(-problem.m // 64) * -(-problem.n // 128) * (problem.batch or 1) >= SMALL_GRID_WIDE_TILES * sms else 64
    tiles = -(-problem.m // 64) * -(-problem.n // n) * (problem.batch or 1)
    k_tiles = -(-problem.k // 64)
    fits = [s for s in range(1, MAX_SPLIT_K + 1) if k_tiles % s == 0 and tiles * s <= sms]
    split = overrides.get("split_k", max([s for s in fits if k_tiles // s >= SPLIT_K_MIN_K_TILES], default=1))
    if split == 1 and problem.batched:  # (batched: measured either way, `mmaflow tune`'s table decides)
        return None
    name = f"WGMMA_F32_64x{n}x16_{problem.a_type.upper()}"
    over = {"tile_m": 64} | ({"split_k": split} if split > 1 else {})
    try:
        cfg = warpgroup_config(target, problem, target.intrinsic(name), over)
    except (UnsupportedError, ConfigError) as e:
        if "split_k" in overrides:  # (only this kernel splits K: its refusal is the answer)
            raise
        why.append(f"mma.sync, not wgmma: {str(e).removeprefix(f'{name}: ')}")
        return None
    if split == 1:
        why.append(
            f"{name}: the warpgroup-MMA kernel in 64x{n} tiles ({tiles} tiles for {sms} SMs: under one tile per two "
            f"SMs; {k_tiles} K tiles, too few to split into shares of {SPLIT_K_MIN_K_TILES}; measured 1.8-2.1x the "
            f"mma.sync kernel on such grids on the H200)"
        )
    else:
        why.append(
            f"{name}: the warpgroup-MMA kernel in 64x{n} tiles, K split {split} ways ({k_tiles // split} K tiles each) "
            f"by a cluster of {split} workgroups per tile ({tiles} tiles, {tiles * split} workgroups for {sms} SMs: "
            f"under one tile per two SMs; measured 2.3-4.2x the mma.sync kernel on such grids on the H200)"
        )
    return _deep_ring(target, problem, cfg, why), target.intrinsic(name)


def _deep_ring(target: Target, problem: Contraction, cfg: KernelConfig, why: list) -> KernelConfig:
    """``cfg`` on the deepest cp.async ring that fits where its static grid of 64-row tiles (N <= 128) fills
    one wave at most and each workgroup runs DEEP_RING_MIN_K_TILES K tiles or more: one workgroup per SM, a
    long K loop whose 4-slot ring leaves HBM's latency exposed. Else ``cfg``: TMA copies, the warp-specialized
    kernel, persistent grids and B-multicast clusters keep their ring (not measured deeper, or slower: the
    producer's 7-slot ring, docs/kernels/hopper_wgmma.md)."""
    if problem.is_dynamic or cfg.copy or cfg.producer or cfg.persistent or cfg.cluster != 1:
        return cfg
    if cfg.tile_m != 64 or cfg.tile_n > 128:
        return cfg
    workgroups = output_tiles(cfg, problem) * cfg.split_k
    k_tiles = -(-problem.k // cfg.tile_k) // cfg.split_k
    # A deep ring leaves one workgroup per SM, and a split-K cluster of S > 2 must then find S free SMs in one
    # GPC: cuOccupancyMaxActiveClusters on the H200 gives 102-120 co-resident workgroups for clusters of 3-8 (132
    # for 1-2). Past that the grid runs a second wave, so such clusters take the deep ring within half the SMs.
    wave = target.compute_units if cfg.split_k <= 2 else target.compute_units // 2
    if workgroups > wave or k_tiles < DEEP_RING_MIN_K_TILES or cfg.stages < max(DEFAULT_STAGES):
        return cfg
    intr = target.intrinsic(cfg.intrinsic)
    s = deepest_stages(cfg, target, intr, STAGES)
    if s is None or s <= cfg.stages:
        return cfg
    deep = replace(cfg, stages=s)
    validate_warpgroup(deep, target, problem, intr)  # (shared memory is the only bound a deeper ring meets)
    why.append(
        f"{cfg.intrinsic}: a ring of {s} slots, not {cfg.stages} ({workgroups} workgroups for "
        f"{target.compute_units} SMs, {k_tiles} K tiles each: measured 1.00-2.10x on such grids on the H200)"
    )
    return deep


# f16/bf16: the warp-specialized kernel (producer=1, copy=tma-wide) where its persistent grid has 2 to
# PRODUCER_MAX_TILES tiles per workgroup (seed: target/seeds.py; docs/PERFORMANCE.md, Hopper wgmma).
PRODUCER_MAX_TILES = HOPPER_WGMMA.producer_max_tiles.value


def _warpgroup_specialized(target: Target, problem: Contraction, cfg: KernelConfig, why: list) -> KernelConfig | None:
    """The f16/bf16 warp-specialized persistent kernel where it measured faster (see
    PRODUCER_MAX_TILES), else None: silently for what it never takes (dynamic sizes: no persistent
    grid; 64-row tiles: one MMA warpgroup, as for fp8; what the TMA ring refuses), with the reason
    in ``why`` where only its tile count per workgroup decides."""
    if problem.is_dynamic or cfg.tile_m != PRODUCER_TILE_M or tma_refusal(target, problem, cfg) is not None:
        return None
    ws = warpgroup_config(
        target,
        problem,
        target.intrinsic(cfg.intrinsic),
        {"tile_m": cfg.tile_m, "raster": cfg.raster, "copy": "tma-wide", "producer": 1},
    )
    trial: list[str] = []
    ws = _warpgroup_persistent(target, problem, ws, trial)
    if not ws.persistent or ws.persistent > PRODUCER_MAX_TILES:
        tiles = f"{ws.persistent} tiles per workgroup" if ws.persistent else "one tile per workgroup"
        why.append(
            f"not warp-specialized: its persistent grid would run {tiles} (measured faster with 3 to "
            f"{PRODUCER_MAX_TILES} on the H200; slower with 16 at 8192^3 and with one)"
        )
        return None
    why.append(
        f"instead, the {ws.stages}-slot tma-wide ring fed by a producer warpgroup (warp-specialized: 1.01x-1.08x "
        f"that ring at 3072^3 to 6144^3 f16/bf16 on the H200, both persistent)"
    )
    why.extend(trial)
    return ws


# The persistent grid (wgmma.plan.persistent_refusal, wgmma.rewrite._persist): from two waves of
# tiles, W = ceil(tiles / SMs) tiles per workgroup where W divides the tile count (seed: target/seeds.py).
PERSISTENT_MIN_WAVES = HOPPER_WGMMA.persistent_min_waves.value


def _warpgroup_persistent(target: Target, problem: Contraction, cfg: KernelConfig, why: list) -> KernelConfig:
    """The persistent grid where it serves (static sizes; whole tiles with the cp.async ring,
    partial ones too with the warp-specialized TMA ring; two waves or more, a tile count that W
    divides: ``wgmma.plan.persistent_refusal``); else the plain grid, the reason in ``why`` when
    the problem has the waves for it. Warp-specialized e4m3 4000^3 on the H200: 908.3 -> 971.1
    TFLOP/s."""
    if problem.is_dynamic or problem.m is None or problem.n is None or cfg.split_k > 1:
        return cfg
    tiles = output_tiles(cfg, problem)
    if tiles < PERSISTENT_MIN_WAVES * target.compute_units:
        return cfg
    if (problem.batch or 1) > 1 and overhangs(cfg, problem):
        why.append(
            "one tile per workgroup: a batch whose items' tiles overhang walks no persistent grid by default (H200, "
            "kernel-only: vit-b16's 384x197x197x64 93.3 us persistent and warp-specialized against 84.9 without; "
            "whole tiles gain: Llama-3-70B's 8x4096x4096x128 155.6 against 187.8)"
        )
        return cfg
    w = -(-tiles // target.compute_units)
    refusal = persistent_refusal(replace(cfg, persistent=w), problem, target.intrinsic(cfg.intrinsic))
    if refusal:
        why.append(f"one tile per workgroup, not a persistent grid: {refusal}")
        return cfg
    gain = (
        "the producer copying the next tile's K tiles during this one's epilogue (1.07x at 4096^3 e4m3, "
        "warp-specialized, on the H200)"
        if cfg.producer
        else "the next tile's first K tiles copied during this one's epilogue (1.02x at 4096^3 f16, 1.04x e4m3, "
        "on the H200)"
    )
    why.append(
        f"persistent grid: {tiles // w} workgroups of {w} tiles each ({tiles} tiles, {target.compute_units} "
        f"SMs), {gain}"
    )
    return replace(cfg, persistent=w)


def _warpgroup_raster(target: Target, problem: Contraction, cfg: KernelConfig, why: list) -> KernelConfig:
    """Workgroups in groups of RASTER tile rows from WARPGROUP_RASTER_WAVES waves of tiles on; a
    grid of fewer tile rows (``grouped_rows``: all of them) column by column from more than one wave.
    Of dynamic sizes, only a dynamic M over more than a wave of static tile columns is grouped: any
    two tile rows then pass a wave, and the kernel sizes the last group at run time (fewer than
    RASTER rows: column by column), which is the static rule at every M."""
    if problem.dynamic:
        cols = -(-problem.n // cfg.tile_n) if problem.n is not None else 0
        if {d.dim for d in problem.dynamic} != {"m"} or cols <= target.compute_units or RASTER == 1:
            return cfg
        why.append(
            f"workgroups in groups of up to {RASTER} tile rows (column by column over fewer): M is dynamic, and "
            f"{cols} tile columns alone fill more than a wave ({NVIDIA_MMA.column_order.source})"
        )
        return replace(cfg, raster=RASTER)
    rows = -(-problem.m // cfg.tile_m) if problem.m is not None else 0
    tiles = rows * -(-problem.n // cfg.tile_n) if problem.n is not None else 0
    group = grouped_rows(rows)
    if group < rows:  # groups of RASTER rows
        enough, many = tiles >= WARPGROUP_RASTER_WAVES * target.compute_units, f"{WARPGROUP_RASTER_WAVES}+ waves"
    else:  # column by column
        enough, many = tiles > target.compute_units, "more than a wave"
    if group == 1 or not enough:
        return cfg
    why.append(group_reason(group, rows, tiles, many))
    return replace(cfg, raster=group)


def _warpgroup_fp8(
    target: Target, problem: Contraction, overrides: dict, why: list
) -> tuple[KernelConfig, WarpgroupIntrinsic]:
    """fp8 x fp8 -> f32 on sm_90a: the warpgroup kernel, the first FP8_WARPGROUP_SHAPES shape that
    gives one tile per two SMs (else the smallest: no mma.sync kernel computes fp8), with the
    user's overrides (``warpgroup_config`` refuses the ones it cannot take)."""
    est = problem.estimate()
    counts = []
    for n, tile_m in FP8_WARPGROUP_SHAPES:
        tiles = (-(-est.m // tile_m)) * (-(-est.n // n)) * (est.batch or 1)
        counts.append(f"{tiles} tiles of {tile_m}x{n}")
        if tiles >= WARPGROUP_MIN_TILES_PER_SM * target.compute_units:
            break
    intr = wgmma(n, problem.a_type, problem.b_type)
    over = {k: v for k, v in overrides.items() if k != "intrinsic"}
    cfg = warpgroup_config(target, problem, intr, {"tile_m": tile_m, **over})
    not_specialized = None
    if not {"producer", "copy", "persistent"} & set(over) and cfg.stages > 1:
        refusal = tma_refusal(target, problem, cfg)
        if refusal is None and cfg.tile_m < PRODUCER_TILE_M:
            not_specialized = (
                f"{cfg.tile_m}-row tiles have one MMA warpgroup (measured slower with a producer: "
                f"313.5 against 355.0 TFLOP/s at 1024^3 e4m3 on the H200)"
            )
        elif refusal is None:
            cfg = warpgroup_config(target, problem, intr, {"tile_m": tile_m, **over, "producer": FP8_PRODUCER})
        else:
            not_specialized = refusal
    ring = (
        f"{cfg.copy} ring fed by a producer warpgroup (warp-specialized: 1.14x / 1.12x the cp.async ring at "
        f"4096^3 / 8192^3 e4m3 on the H200, both persistent)"
        if cfg.producer
        else f"{cfg.copy or 'cp.async'} ring"
    )
    why.append(
        f"{intr.name}: the warpgroup-MMA kernel, {cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k} tiles, {cfg.stages}-slot "
        f"{ring} ({counts[-1]} for {target.compute_units} SMs; fp8: no mma.sync instruction computes "
        f"{problem.a_type} x {problem.b_type})"
    )
    if not_specialized:
        why.append(f"fp8 on the cp.async ring, not warp-specialized: {not_specialized}")
    cfg = cfg if "raster" in overrides else _warpgroup_raster(target, problem, cfg, why)
    return (cfg if "persistent" in overrides else _warpgroup_persistent(target, problem, cfg, why)), intr


# `mmaflow tune`'s candidates: (instruction N = tile_n, tile_m), each on the cp.async ring and, for
# 128-row tiles, warp-specialized on the tma-wide ring; split-K under a wave of tiles, grouped tile
# rows past one wave, a persistent grid where it can serve.
TUNING_SHAPES = ((64, 64), (128, 64), (128, 128), (256, 64), (256, 128))


def tuning_candidates(target: Target, problem: Contraction) -> list[dict]:
    """The configs `mmaflow tune` times for the warpgroup kernel (``--config`` overrides): f16/bf16
    -> f32 on sm_90a (fp8's shapes are the heuristic's; N <= 128)."""
    if not target.warpgroup_mma or problem.a_type not in ("f16", "bf16") or problem.m is None or problem.n is None:
        return []
    out = []
    for n, tm, tma_only in _wave_fitted_shapes(target, problem):
        base = {"intrinsic": f"WGMMA_F32_64x{n}x16_{problem.a_type.upper()}", "tile_m": tm}
        specialized = {**base, "copy": "tma-wide", "producer": 1}
        if not tma_only:
            out += [base] + ([specialized] if tm == PRODUCER_TILE_M else [])
        elif _configures(target, problem, specialized):
            out.append(specialized)
    for n, tm in TUNING_SHAPES:
        if tm > max(64, 2 * problem.m) or n > max(64, 2 * problem.n):
            continue
        base = {"intrinsic": f"WGMMA_F32_64x{n}x16_{problem.a_type.upper()}", "tile_m": tm}
        out.append(base)
        if tm == PRODUCER_TILE_M:
            out.append({**base, "copy": "tma-wide", "producer": 1})
        tiles = -(-problem.m // tm) * -(-problem.n // n) * (problem.batch or 1)
        split = [{**base, "split_k": s} for s in _split_k_candidates(target, problem, tiles)]
        out += split
        if tiles < target.compute_units:  # under a wave: short K loops, the ring's depth hides HBM's latency
            out += [c for c in (_deepest_ring(target, problem, c) for c in [base, *split]) if c is not None]
        group = grouped_rows(-(-problem.m // tm))
        if group > 1 and tiles > target.compute_units:
            out.append({**base, "raster": group})
        w = -(-tiles // target.compute_units)
        if tiles >= PERSISTENT_MIN_WAVES * target.compute_units and tiles % w == 0:
            out.append({**base, "persistent": w})
            if tm == PRODUCER_TILE_M:
                out.append({**base, "copy": "tma-wide", "producer": 1, "persistent": w})
    return out


def _deepest_ring(target: Target, problem: Contraction, over: dict) -> dict | None:
    """``over`` on the deepest ring of more than the default 4 slots that fits in shared memory
    (wgmma.tma.MAX_STAGES at most), or None where none does or the kernel refuses ``over`` itself
    (`mmaflow tune` reports that refusal for ``over``'s own candidate)."""
    intr = target.intrinsic(over["intrinsic"])
    try:
        cfg = warpgroup_config(target, problem, intr, over)
    except (UnsupportedError, ConfigError):
        return None
    s = deepest_stages(cfg, target, intr, STAGES)
    return {**over, "stages": s} if s is not None and s > max(DEFAULT_STAGES) else None


def _wave_fitted_shapes(target: Target, problem: Contraction) -> list[tuple[int, int, bool]]:
    """(instruction N, tile_m, TMA only) beside TUNING_SHAPES' powers of two: the narrowest N (64..256)
    whose tiles fill one or two waves of the SMs without a mostly idle last wave -- TinyLlama's
    512x5632 gate in 128x256 tiles is 88 workgroups on 132 SMs, in 128x192 tiles 120. N is a
    multiple of 16 per warpgroup, so that the cp.async ring's threads copy whole 16-byte chunks of
    B's 64-deep K tile; a narrower multiple of 16 that only TMA boxes copy is a third element True
    (128x176: 128 workgroups, 22.05 against 128x192's 22.85 us on the H200, `mmaflow tune`: docs/PERFORMANCE.md)."""
    out: list[tuple[int, int, bool]] = []
    for tm in (64, 128):
        rows = -(-problem.m // tm) * max(problem.batch or 1, 1)
        for waves in (1, 2):
            cols = waves * target.compute_units // rows
            if cols < 1 or tm > max(64, 2 * problem.m):
                continue
            step = 16 * (tm // 64)  # (B's 64-deep K tile in whole 16-byte chunks per thread: 128 per warpgroup)
            for n, tma_only in (
                (-(-problem.n // (cols * step)) * step, False),
                (-(-problem.n // (cols * 16)) * 16, True),
            ):
                if 64 <= n <= 256 and (n, tm) not in TUNING_SHAPES and all((n, tm) != o[:2] for o in out):
                    out.append((n, tm, tma_only))
    return out


def _configures(target: Target, problem: Contraction, over: dict) -> bool:
    """Whether the kernel takes ``over`` (a candidate it refuses is not one: an MN-major B tile of
    176 columns is not whole 64-column swizzle atoms)."""
    try:
        warpgroup_config(target, problem, target.intrinsic(over["intrinsic"]), over)
    except (UnsupportedError, ConfigError):
        return False
    return True


def _split_k_candidates(target: Target, problem: Contraction, tiles: int) -> list[int]:
    """Split-K's candidate S (``wgmma.plan.split_k_refusal``): where the tiles fill under one
    wave of the SMs, each S that divides the K tiles into shares of two or more, up to a wave
    and a half of workgroups (static sizes)."""
    if problem.is_dynamic or tiles >= target.compute_units:
        return []
    k_tiles = -(-problem.k // 64)  # (f16/bf16: K tiles of 64)
    return [
        s
        for s in range(2, MAX_SPLIT_K + 1)
        if k_tiles % s == 0 and k_tiles // s >= 2 and tiles * s <= 3 * target.compute_units // 2
    ]
