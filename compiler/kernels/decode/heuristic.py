"""The decode kernel's config: which problems it takes, and its numbers from the seeds.

It takes a static contraction (batched too: one batch entry a workgroup) whose M fits two
instruction row tiles, B stored N x K and A M x K (``plan.decode_refusal`` names what else it
needs), unless ``--config`` names keys of the tiled kernel. Its config is a ``KernelConfig``
with ``waves_k`` > 1: ``tile_m`` the row tiles' rows, ``tile_n`` the columns per workgroup,
``tile_k`` the K one wave takes per K tile, one wave grid row and column. The seeds
(``target/seeds.py``: ``DECODE_NVIDIA``, ``DECODE_AMD``) give the waves, columns and unroll; the
K tile shrinks until it divides K, and the waves to the K tiles.
"""

from __future__ import annotations

from dataclasses import replace

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import ConfigError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.common.tiles import matching_intrinsics
from mmaflow.compiler.kernels.decode.plan import decode_refusal, max_row_tiles, open_dims, plan_k_order, seeds
from mmaflow.compiler.target.intrinsics import WarpgroupIntrinsic
from mmaflow.compiler.target.targets import Target

# The keys a decode config has; any other --config key asks for the tiled kernel (``stages`` too, without
# ``waves_k``: the ring depth of the tiled kernel).
OWN_KEYS = frozenset({"waves_k", "intrinsic", "wave_size", "tile_n", "tile_k", "stages"})
_LDS_ELEM_BYTES = 4  # the partial sums: f32 / i32
# The most columns a workgroup takes where K is too short for the seeded K tiles (an attention
# head's 64 or 128: eager attention's decode scores): 8 mma.sync column tiles of B runs and
# accumulators, 64 registers a lane. H200 (`mmaflow tune`, 2026-12-01, batched M 1 x 2048 keys):
# K 128 at 64 columns 5.06 us against 5.15 at 32; K 64 7.55 against 7.01 at 32 (the table's).
SHORT_K_COLUMNS = 64


def _instruction(target: Target, problem: Contraction, overrides: dict):
    """The asked instruction, else the target's at its default wave size whose rows hold M in one
    row tile (the fewest rows: a 16-row instruction before a 32-row one), else in the fewest row
    tiles up to ``plan.max_row_tiles``."""
    name = overrides.get("intrinsic")
    if name is not None:
        return target.intrinsic(name)
    wave = overrides.get("wave_size") or target.default_wave_size
    cands = matching_intrinsics(target, problem, wave, opt_in=False)
    fits = [i for i in cands if i.m >= problem.m]
    if fits:
        return min(fits, key=lambda i: i.m)
    tiled = [i for i in cands if -(-problem.m // i.m) <= max_row_tiles(target)]
    return min(tiled, key=lambda i: -(-problem.m // i.m)) if tiled else None


def _no_instruction(target: Target, problem: Contraction) -> str:
    if not matching_intrinsics(target, problem):
        return (
            f"no matrix instruction of {target.name}'s mma.sync / WMMA / MFMA computes {problem.a_type} x "
            f"{problem.b_type} -> {problem.c_type}"
        )
    return "no instruction for the types holds M rows"


def reach(target: Target, problem: Contraction) -> int:
    """The largest M the decode kernel takes for ``problem`` (its types, storage, N and K) were M
    static and that large; 0 where it takes none."""
    static = replace(problem, dynamic=tuple(d for d in problem.dynamic if d.dim != "m"))
    best = 0
    for m in sorted(
        {
            i.m * t
            for i in matching_intrinsics(target, problem, opt_in=False)
            for t in range(1, max_row_tiles(target) + 1)
        }
    ):
        probe = replace(static, m=m)
        intr = _instruction(target, probe, {})
        if intr is not None and decode_refusal(target, probe, intr) is None:
            best = m
    return best


def decode_config(target: Target, problem: Contraction, overrides: dict, why: list):
    """(config, instruction), or None where the decode kernel declines (the reason in ``why``).
    ``--config waves_k=W`` (W > 1) asks for it: a problem it cannot take is then a ``ConfigError``."""
    asked = overrides.get("waves_k")
    if asked is not None and asked <= 1:
        why.append(f"waves_k = {asked}: the tiled kernel, as asked")
        return None
    # (``stages`` is the tiled kernel's ring depth too: the decode kernel's only beside ``waves_k``)
    foreign = sorted(set(overrides) - (OWN_KEYS if asked is not None else OWN_KEYS - {"stages"}))
    if foreign and asked is None:
        why.append(f"not the decode kernel: --config {', '.join(foreign)} configures the tiled kernel")
        return None
    if foreign:
        raise ConfigError(f"waves_k={asked} asks for the decode kernel, which has no {', '.join(foreign)}")
    name = overrides.get("intrinsic")
    if name is not None and isinstance(target.intrinsic(name), WarpgroupIntrinsic):
        if asked is not None:
            raise ConfigError(f"waves_k={asked} asks for the decode kernel; {name} is a warpgroup instruction")
        why.append(f"not the decode kernel: {name} is a warpgroup instruction (the warpgroup kernel's)")
        return None
    # (configure sees a dynamic problem's estimate: its sizes are stand-ins, so say "dynamic" first)
    unbounded = open_dims(problem)
    intr = None if unbounded else _instruction(target, problem, overrides)
    if unbounded:
        refusal = decode_refusal(target, problem, None)
    else:
        refusal = decode_refusal(target, problem, intr) if intr is not None else _no_instruction(target, problem)
    if refusal is not None:
        beyond = not unbounded and problem.m > max(i.m for i in target.intrinsics()) * max_row_tiles(target)
        if beyond and asked is None:
            return None  # (no decode problem at all: M is past any instruction's row tiles; nothing to say)
        if asked is not None:
            what = "a problem with dynamic sizes" if unbounded else problem.describe()
            raise ConfigError(f"waves_k={asked}: the decode kernel cannot take {what}: {refusal}")
        why.append(f"not the decode kernel: {refusal}")
        return None
    s = seeds(target)
    ko = plan_k_order(intr)
    chunks = problem.k // ko.chunk
    m_tiles = -(-problem.m // intr.m)
    # each row tile's A operands are loaded for every chunk of a K tile: fewer chunks per row tile;
    # a short K (an attention head's 64 or 128) in K tiles of fewer chunks, two at least for two waves
    cap = max(1, s.unroll.value // m_tiles)
    unroll = max(u for u in range(1, cap + 1) if chunks % u == 0 and (chunks // u >= 2 or u == 1))
    k_tiles = chunks // unroll
    # (A's traffic per column tile as at one row tile)
    columns = s.columns.value * m_tiles
    short = chunks < 2 * cap
    if short:  # as many columns more as the seeded waves x chunks in flight are more than this K has
        columns *= max(1, min(SHORT_K_COLUMNS // columns, s.waves_k.value * cap // chunks))
    waves = max((w for w in range(2, s.waves_k.value + 1) if k_tiles % w == 0), default=0)
    n_tiles = max(1, columns // intr.n)
    cfg = KernelConfig(
        intrinsic=intr.name,
        wave_size=intr.wave_size,
        tile_m=m_tiles * intr.m,
        tile_n=n_tiles * intr.n,
        tile_k=unroll * ko.chunk,
        waves_m=1,
        waves_n=1,
        lds_pad=0,
        waves_k=waves,
    )
    if not cfg.waves_k:
        why.append(
            f"not the decode kernel: no 2 to {s.waves_k.value} waves split the {k_tiles} K tiles of {cfg.tile_k}"
        )
        return None
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if k in ("waves_k", "tile_n", "tile_k", "stages")})
    # a grid too small to give each SM its warps (one a scheduler): narrower workgroups, more of them, as long
    # as a workgroup's columns are no fewer than M's rows (each re-reads A: no more of it than of B); not for
    # a short K (its columns are widened for the loads in flight a K tile lacks) nor for asked columns
    narrowed = n_tiles

    seeded = cfg.waves_k  # (the seeded or asked waves: the grid's warps are counted at them)

    def warps(tiles: int) -> int:
        return (problem.batch or 1) * -(-problem.n // (tiles * intr.n)) * seeded

    floor = s.warps_per_sm.value * target.compute_units
    while (
        "tile_n" not in overrides
        and not short
        and narrowed > 1
        and (narrowed // 2) * intr.n >= problem.m
        and warps(narrowed) < floor
    ):
        narrowed //= 2
    cfg = replace(cfg, tile_n=cfg.tile_n if "tile_n" in overrides else narrowed * intr.n)
    # a grid that leaves each SM few warps even so: the waves doubled, as many as a workgroup holds and the K
    # tiles divide (each wave's loop shorter, more of K in flight at once); not for asked waves nor a short K.
    # Registers: a workgroup of the target's most threads leaves a lane 64 (sm_80 / sm_90a), enough for one
    # row tile of one column tile (ptxas, 32 waves: 48-54 registers, no spills); two column tiles at 1024
    # threads spilled 16-24 bytes, two row tiles 16-172: those stop at half the most threads, or do not double.
    idle = s.idle_warps_per_sm.value * target.compute_units
    grid_warps = warps(cfg.tile_n // intr.n)
    if "waves_k" not in overrides and not short and m_tiles == 1 and idle and grid_warps <= idle:
        tiles_k = problem.k // cfg.tile_k
        most = target.max_workgroup_size // (1 if cfg.tile_n == intr.n else 2)
        doubled = seeded
        while (
            tiles_k % (doubled * 2) == 0
            and doubled * 2 * intr.wave_size <= most
            and lds_bytes(replace(cfg, waves_k=doubled * 2), target) <= target.lds_bytes
        ):
            doubled *= 2
        cfg = replace(cfg, waves_k=doubled)
    why.append(
        f"decode kernel ({intr.name}): M = {problem.m} fits {m_tiles} {intr.m}-row instruction tile"
        f"{'s' if m_tiles > 1 else ''}, B is streamed once; "
        f"{cfg.waves_k} waves split K = {problem.k} in K tiles of {cfg.tile_k} ({unroll} chunks of {ko.chunk}: "
        f"seed {s.unroll.value} divided among {m_tiles} row tile(s), {s.unroll.source}); {cfg.tile_n} columns "
        f"per workgroup ({s.columns.source}; as many per row tile"
        + (
            f"; K = {problem.k} is short of two K tiles of {cap} chunks (the seeds'): up to {SHORT_K_COLUMNS} columns, "
            "as many more as the seeded waves x chunks in flight exceed K's chunks, unmeasured"
            if short
            else ""
        )
        + (
            f"; narrowed from {n_tiles * intr.n}: {warps(n_tiles)} warps are fewer than {s.warps_per_sm.value} a SM "
            f"x {target.compute_units} SMs = {floor} ({s.warps_per_sm.source})"
            if narrowed != n_tiles
            else ""
        )
        + "); "
        f"waves: {s.waves_k.source}"
        + (
            f"; doubled from {seeded}: {grid_warps} warps are no "
            f"more than {s.idle_warps_per_sm.value} a SM x {target.compute_units} SMs ({s.idle_warps_per_sm.source})"
            if cfg.waves_k != seeded
            else ""
        )
    )
    validate_decode(cfg, target, problem)
    return cfg, intr


def validate_decode(cfg: KernelConfig, target: Target, problem: Contraction) -> None:
    intr = target.intrinsic(cfg.intrinsic)
    if intr not in matching_intrinsics(target, problem, cfg.wave_size):
        raise ConfigError(f"intrinsic {intr.name} does not compute {problem.describe()} at wave{cfg.wave_size}")
    ko = plan_k_order(intr)
    m_tiles = -(-problem.m // intr.m)
    if cfg.tile_m != m_tiles * intr.m or (cfg.waves_m, cfg.waves_n) != (1, 1):
        raise ConfigError(
            f"the decode kernel's tile holds M = {problem.m} in {m_tiles} {intr.m}-row instruction tiles "
            f"(tile_m {m_tiles * intr.m}) and one wave grid cell"
        )
    if cfg.tile_n <= 0 or cfg.tile_n % intr.n:
        raise ConfigError(f"tile_n={cfg.tile_n} must be a positive multiple of {intr.name}'s N={intr.n}")
    if cfg.tile_k <= 0 or cfg.tile_k % ko.chunk or problem.k % cfg.tile_k:
        raise ConfigError(
            f"tile_k={cfg.tile_k} must be a multiple of the {ko.chunk}-deep chunk of {intr.name} "
            f"({ko.j} instructions) that divides K = {problem.k}"
        )
    k_tiles = problem.k // cfg.tile_k
    if cfg.waves_k < 2 or k_tiles % cfg.waves_k:
        raise ConfigError(f"waves_k={cfg.waves_k} must be 2 or more and divide the {k_tiles} K tiles of {cfg.tile_k}")
    if cfg.workgroup_size > target.max_workgroup_size:
        raise ConfigError(
            f"{cfg.waves_k} waves of {cfg.wave_size} = {cfg.workgroup_size} threads exceed "
            f"{target.name}'s {target.max_workgroup_size}"
        )
    if cfg.stages not in (1, 2):
        raise ConfigError(
            f"stages={cfg.stages}: the decode kernel has no LDS ring; stages=2 issues a wave's next K tile's "
            "loads before the current one's instructions (in registers), 1 does not"
        )
    if cfg.stages == 2 and k_tiles // cfg.waves_k < 2:
        raise ConfigError(
            f"stages=2 issues a wave's next K tile's loads ahead: {cfg.waves_k} waves over {k_tiles} K tiles of "
            f"{cfg.tile_k} leave each wave one"
        )
    if (cfg.raster, cfg.persistent, cfg.producer, cfg.cluster, cfg.copy, cfg.split_k) != (1, None, 0, 1, None, 1):
        raise ConfigError(
            "the decode kernel has no raster, persistent grid, producer, clusters, copies or "
            "split_k (its waves split K: waves_k)"
        )
    need = lds_bytes(cfg, target)
    if need > target.lds_bytes:
        raise ConfigError(f"the partial sums need {need} bytes of LDS, {target.name} has {target.lds_bytes}")


def lds_bytes(cfg: KernelConfig, target: Target) -> int:
    """The partial sums' LDS: one accumulator vector per wave, instruction tile and lane."""
    intr = target.intrinsic(cfg.intrinsic)
    tiles = (cfg.tile_m // intr.m) * (cfg.tile_n // intr.n)
    return cfg.waves_k * tiles * cfg.wave_size * intr.c.op_vector_length * _LDS_ELEM_BYTES


# `mmaflow tune`'s candidates: waves splitting K by columns per workgroup (the seeds' neighbours;
# tile_k is the heuristic's, fitted to the row tiles). 32 waves: a grid of few workgroups whose K loop
# then runs once (H200, k/v 1 x 1024 x 4096: 8 / 16 / 32 waves of 8 columns 4.45 / 4.06 / 3.87 us).
# 8 columns: the narrowed workgroups of a small grid (``DecodeSeeds.warps_per_sm``), where the intrinsic's N is 8.
TUNING_WAVES = (4, 8, 16, 32)
TUNING_COLUMNS = (8, 16, 32, 64)


def tuning_candidates(target: Target, problem: Contraction) -> list[dict]:
    """The configs `mmaflow tune` times for the decode kernel (``--config`` overrides), where it
    takes the problem at all (M within two row tiles, B N x K, ...: ``decode_config``), at the columns
    the intrinsic's N divides. A short K (fewer than 16 K tiles of the heuristic's): every split of its
    chunks into 2 or more waves, at those columns and 128 (loads not issued ahead)."""
    chosen = decode_config(target, problem, {}, [])
    if chosen is None:
        return []
    cfg, intr = chosen
    columns = [c for c in TUNING_COLUMNS if c % intr.n == 0]
    chunk = plan_k_order(intr).chunk
    tiles = problem.k // cfg.tile_k
    if tiles >= 16:
        waves = [w for w in TUNING_WAVES if tiles % w == 0 and w * intr.wave_size <= target.max_workgroup_size]
        # and each with its next K tile's loads issued ahead (stages 2) where a wave runs two K tiles or more
        return [{"waves_k": w, "tile_n": c} for w in waves for c in columns] + [
            {"waves_k": w, "tile_n": c, "stages": 2} for w in waves if tiles // w >= 2 for c in columns
        ]
    chunks = problem.k // chunk
    return [
        {"waves_k": w, "tile_k": u * chunk, "tile_n": c}
        for u in range(1, 5)
        if chunks % u == 0
        for w in range(2, 17)
        if (chunks // u) % w == 0 and (w & (w - 1) == 0 or w == chunks // u)
        for c in (*columns, 128)
    ]
