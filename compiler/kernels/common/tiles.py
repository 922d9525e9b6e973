"""The tile arithmetic every script-based contraction family shares: which catalogue instructions
compute a problem, the LDS tiles of one stage and their bytes, the ring's slots, and the validation
of a config against the target and the problem."""

from __future__ import annotations

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.target.intrinsics import TYPE_BITS, Intrinsic
from mmaflow.compiler.target.seeds import NVIDIA_MMA
from mmaflow.compiler.target.targets import Target, Vendor

RASTER = NVIDIA_MMA.raster.value  # tile rows per workgroup group (seed: target/seeds.py)


def matching_intrinsics(
    target: Target, problem: Contraction, wave_size: int | None = None, *, opt_in: bool = True
) -> list[Intrinsic]:
    """The target's instructions that compute ``problem``'s types; ``opt_in=False`` (what a
    heuristic chooses from): without those a user must name (xf32's rounded inputs)."""
    out = []
    # a block-scaled problem (MX): the block-scaled instructions, which no other problem takes
    scaled = problem.scales is not None
    pool = target.scaled_intrinsics() if scaled else target.intrinsics(wave_size)
    for intr in pool:
        if wave_size is not None and intr.wave_size != wave_size:
            continue
        if scaled and intr.scale_block != problem.scales.block:
            continue
        if intr.reduced_precision and not opt_in:
            continue
        if (intr.a_type, intr.b_type, intr.c_type) != (problem.a_type, problem.b_type, problem.c_type):
            continue
        if intr.a_type in ("i8", "i4") and (intr.unsigned_a, intr.unsigned_b) != (
            problem.unsigned_a,
            problem.unsigned_b,
        ):
            continue
        out.append(intr)
    return out


def require_intrinsic(target: Target, problem: Contraction) -> None:
    if not matching_intrinsics(target, problem) and problem.scales is not None:
        have = sorted({f"{i.a_type}x{i.b_type}->{i.c_type}" for i in target.scaled_intrinsics()})
        raise UnsupportedError(
            f"no block-scaled matrix instruction on {target.name} computes {problem.a_type} x {problem.b_type} -> "
            f"{problem.c_type} with {problem.scales.type} scales; {target.name} has: {', '.join(have) or 'none'}"
        )
    if not matching_intrinsics(target, problem):
        have = sorted({f"{i.a_type}x{i.b_type}->{i.c_type}" for i in target.intrinsics()})
        sign = ""
        if problem.a_type in ("i8", "i4"):
            a, b = ("unsigned" if u else "signed" for u in (problem.unsigned_a, problem.unsigned_b))
            sign = f" ({a} x {b})"
        raise UnsupportedError(
            f"no matrix instruction on {target.name} computes {problem.a_type} x {problem.b_type} -> "
            f"{problem.c_type}{sign}; {target.name} has: {', '.join(have)}"
        )


def k_outer(problem: Contraction, operand: str) -> bool:
    """Whether the operand's global tile has K outermost (B of a plain matmul, A transposed)."""
    return problem.a_transposed if operand == "A" else not problem.b_transposed


def async_ring(cfg: KernelConfig, target: Target) -> bool:
    """Whether the LDS tiles are a ring filled by asynchronous copies (NVIDIA's cp.async, which
    store the global tile as it is); AMD's ring is filled through registers, like one stage."""
    return cfg.stages > 1 and target.vendor is Vendor.NVIDIA


def lds_tile(cfg: KernelConfig, problem: Contraction, operand: str, target: Target) -> tuple[int, int]:
    """One stage's LDS tile of an operand, padded rows last: K-innermost ``[non-K][K + pad]``,
    except in an asynchronously filled LDS ring (``async_ring``), where the copies store the
    global tile as it is: a K-outer operand keeps ``[K][non-K + pad]`` (its fragments come from
    ``ldmatrix .trans``)."""
    nonk = cfg.tile_m if operand == "A" else cfg.tile_n
    if async_ring(cfg, target) and k_outer(problem, operand):
        return cfg.tile_k, nonk + cfg.lds_pad
    return nonk, cfg.tile_k + cfg.lds_pad


def ring_slots(cfg: KernelConfig, target: Target) -> int:
    """K tiles the LDS holds. NVIDIA's ring: ``stages`` (the async copies of S - 1 tiles in flight
    land in LDS). AMD's ring keeps its S - 1 tiles in flight in registers and stores each into
    LDS one tile before it is read: with one barrier per K tile two slots are all it can use
    (the tile being read and the next), a third would sit idle."""
    if cfg.stages == 1:
        return 1
    return cfg.stages if target.vendor is Vendor.NVIDIA else 2


def lds_bytes(cfg: KernelConfig, problem: Contraction, target: Target) -> int:
    return ring_slots(cfg, target) * sum(
        r * c * TYPE_BITS[t] // 8
        for r, c, t in (
            lds_tile(cfg, problem, "A", target) + (problem.a_type,),
            lds_tile(cfg, problem, "B", target) + (problem.b_type,),
        )
    )


def ring_problem(cfg: KernelConfig, target: Target, problem: Contraction) -> str | None:
    """Why an LDS ring of ``cfg.stages`` K tiles cannot serve this problem, or None. On AMD the
    ring is filled through registers by the copies of one stage (any problem they serve). On
    NVIDIA it is filled by cp.async (``nvgpu.device_async_copy``: 4, 8 or 16 bytes per thread,
    straight to shared memory), so: 16-bit operands where a tile is K-outer (``ldmatrix .trans``
    transposes 16-bit elements only), and chunks of at least 4 bytes that divide the global
    rows."""
    if target.vendor is Vendor.AMD:
        return None
    for op, t in (("A", problem.a_type), ("B", problem.b_type)):
        bits = TYPE_BITS[t]
        if k_outer(problem, op) and bits != 16:
            return f"{op} is {t} with K outermost: ldmatrix .trans transposes 16-bit elements only"
        rows, cols = (
            (cfg.tile_k, cfg.tile_m if op == "A" else cfg.tile_n)
            if k_outer(problem, op)
            else (cfg.tile_m if op == "A" else cfg.tile_n, cfg.tile_k)
        )
        dim = "k" if not k_outer(problem, op) else ("m" if op == "A" else "n")
        dyn = problem.dynamic_dim(dim)  # (the heuristic sees dynamic sizes as DYNAMIC_ESTIMATE)
        row_len = dyn.divisor if dyn is not None else getattr(problem, dim)
        v = 128 // bits
        while cols % v or row_len % v:
            v //= 2
        if v * bits < 32:
            return (
                f"{op}'s rows ({row_len} elements) allow only {v * bits}-bit chunks; cp.async copies 4, 8 or 16 bytes"
            )
    return None


def validate(cfg: KernelConfig, target: Target, problem: Contraction) -> Intrinsic:
    """Check a config against the target and the problem; return its intrinsic."""
    intr = target.intrinsic(cfg.intrinsic)
    if cfg.wave_size not in target.wave_sizes:
        raise ConfigError(
            f"wave_size={cfg.wave_size} is not available on {target.name} "
            f"(choices: {', '.join(map(str, target.wave_sizes))})"
        )
    if intr.wave_size != cfg.wave_size:
        raise ConfigError(f"intrinsic {intr.name} runs at wave{intr.wave_size}, config says wave_size={cfg.wave_size}")
    if bool(intr.scale_block) != (problem.scales is not None):
        raise ConfigError(
            f"intrinsic {intr.name} is block-scaled (E8M0 scales a 32-value block); the matmul has no scales"
            if intr.scale_block
            else f"intrinsic {intr.name} takes no scales; the matmul is block-scaled (an MFMA_SCALE_* instruction)"
        )
    if intr not in matching_intrinsics(target, problem, cfg.wave_size):
        raise ConfigError(
            f"intrinsic {intr.name} computes {intr.a_type}x{intr.b_type}->{intr.c_type}, "
            f"the matmul is {problem.a_type}x{problem.b_type}->{problem.c_type}"
        )
    for name in ("tile_m", "tile_n", "tile_k", "waves_m", "waves_n"):
        if getattr(cfg, name) <= 0:
            raise ConfigError(f"{name} must be positive, got {getattr(cfg, name)}")
    if cfg.lds_pad < 0:
        raise ConfigError(f"lds_pad must be >= 0, got {cfg.lds_pad}")
    if cfg.tile_m % cfg.waves_m or cfg.wave_tile_m % intr.m:
        raise ConfigError(
            f"tile_m={cfg.tile_m} must split into waves_m={cfg.waves_m} wave tiles that are "
            f"multiples of the instruction's M={intr.m}"
        )
    if cfg.tile_n % cfg.waves_n or cfg.wave_tile_n % intr.n:
        raise ConfigError(
            f"tile_n={cfg.tile_n} must split into waves_n={cfg.waves_n} wave tiles that are "
            f"multiples of the instruction's N={intr.n}"
        )
    if cfg.tile_k % intr.k:
        fits = [i.name for i in matching_intrinsics(target, problem, cfg.wave_size) if cfg.tile_k % i.k == 0]
        raise ConfigError(
            f"tile_k={cfg.tile_k} must be a multiple of {intr.name}'s K={intr.k}"
            + (
                f"; {', '.join(fits)} fit{'s' if len(fits) == 1 else ''} it (--config intrinsic={fits[0]})"
                if fits
                else f"; no {target.name} wave{cfg.wave_size} instruction for this problem has a K dividing "
                f"{cfg.tile_k}"
            )
        )
    if cfg.workgroup_size > target.max_workgroup_size:
        raise ConfigError(
            f"{cfg.num_waves} waves of {cfg.wave_size} = {cfg.workgroup_size} threads exceed "
            f"{target.name}'s {target.max_workgroup_size}"
        )
    if not 1 <= cfg.raster <= 64:
        raise ConfigError(f"raster must be 1 to 64 (tile rows per workgroup group), got {cfg.raster}")
    if not 1 <= cfg.stages <= 4:
        wgmma = (
            " (sm_90a's warpgroup-MMA kernel takes up to 8: --config intrinsic=WGMMA_...)"
            if target.warpgroup_mma
            else ""
        )
        raise ConfigError(f"stages must be 1 to 4 (K tiles in LDS at once), got {cfg.stages}{wgmma}")
    if cfg.persistent is not None:
        raise ConfigError(
            f"persistent={cfg.persistent}: the persistent grid is the warpgroup-MMA kernel's only (sm_90a, "
            f"--config intrinsic=WGMMA_...)"
        )
    if cfg.producer:
        raise ConfigError(
            f"producer={cfg.producer}: the producer warpgroup feeds the warpgroup-MMA kernel's TMA ring "
            f"only (sm_90a, --config intrinsic=WGMMA_...)"
        )
    if cfg.cluster != 1:
        raise ConfigError(
            f"cluster={cfg.cluster}: clusters are the warp-specialized warpgroup-MMA kernel's only "
            f"(sm_90a, --config intrinsic=WGMMA_... producer=1 persistent=W)"
        )
    if cfg.split_k != 1:
        raise ConfigError(
            f"split_k={cfg.split_k}: workgroups split K (a thread block cluster per output tile) in the "
            f"warpgroup-MMA kernel only (sm_90a, --config intrinsic=WGMMA_...)"
        )
    if cfg.waves_k != 1:
        raise ConfigError(
            f"waves_k={cfg.waves_k}: waves split K in the decode kernel only (M up to one instruction's rows, "
            f"B stored N x K)"
        )
    if cfg.copy is not None:
        raise ConfigError(
            f"copy={cfg.copy}: TMA copies feed the warpgroup-MMA kernel only (sm_90a, "
            f"--config intrinsic=WGMMA_...); {cfg.intrinsic} is filled by cp.async or loads"
        )
    if cfg.stages > 1:
        why = ring_problem(cfg, target, problem)
        if why:
            raise ConfigError(f"stages={cfg.stages}: {why}")
    for op, t in (("A", problem.a_type), ("B", problem.b_type)):
        row = lds_tile(cfg, problem, op, target)[1]
        row_bytes = row * TYPE_BITS[t] / 8  # (4/6-bit data: possibly not a whole number of bytes)
        if row * TYPE_BITS[t] % 128:
            raise ConfigError(
                f"an LDS row of {op} ({row} elements with lds_pad={cfg.lds_pad}) is {row_bytes:g} "
                f"bytes; it must be a multiple of 16 so 128-bit LDS accesses stay aligned"
            )
    need = lds_bytes(cfg, problem, target)
    if need > target.lds_bytes:
        raise ConfigError(f"the config needs {need} bytes of LDS, {target.name} has {target.lds_bytes}")
    return intr


def grouped_rows(rows: int) -> int:
    """``KernelConfig.raster`` for a grid of ``rows`` tile rows that the NVIDIA kernels group:
    RASTER rows a group, or all of them where there are fewer. Then the workgroups walk the tiles
    column by column, and those running together read each B tile from memory once instead of
    once per tile row (a wide-N matmul whose B outgrows L2: an LM head at M 512)."""
    return min(RASTER, rows) if rows >= NVIDIA_MMA.column_order.value else 1


def group_reason(group: int, rows: int, tiles: int, many: str) -> str:
    """The heuristic's line for grouping ``rows`` tile rows by ``group`` (``grouped_rows``)."""
    if group < rows:
        return (
            f"workgroups in groups of {group} tile rows: with {tiles} tiles ({many}) those running together "
            f"share A and B tiles in L2 (1.05x at 8192^3)"
        )
    return (
        f"workgroups column by column over the {rows} tile rows: with {tiles} tiles ({many}) those running "
        f"together read each B tile from memory once, not once per tile row ({NVIDIA_MMA.column_order.source})"
    )


def waves_for(tile: int, waves: int, quantum: int, wave_tile: int) -> int | None:
    """The most waves (<= ``waves``) that split ``tile`` into equal wave tiles that are multiples
    of the instruction's ``quantum`` and no larger than ``wave_tile``; None if there are none."""
    for w in range(min(waves, tile // quantum), 0, -1):
        if tile % w == 0 and (tile // w) % quantum == 0 and tile // w <= wave_tile:
            return w
    return None


def fit_tile(dim: int, preferred: int, grid: int, quantum: int) -> int:
    """A workgroup tile for a dimension of ``dim``.

    ``grid`` is the wave grid's granularity (waves x instruction size): tiles that are multiples of
    it keep the whole wave grid busy. The largest such tile dividing ``dim`` wins if it is at least
    half the preferred size; otherwise the preferred tile, with a partial last tile (the normalize stage
    and the bounds checks handle it) -- 4000 gets 128, not an 80 that no wave grid splits. A
    dimension smaller than the preferred tile gets the smallest multiple of the instruction's
    ``quantum`` covering it that some number of waves splits without any wave's tile outgrowing
    the preferred per-wave tile (100 gets 2 x 64, not 1 x 112: a 112x112 wave tile spills hundreds
    of registers; 33 gets 3 x 16)."""
    if dim < preferred:
        waves = grid // quantum
        wave_tile = preferred // waves
        t = -(-dim // quantum) * quantum
        while waves_for(t, waves, quantum, wave_tile) is None:
            t += quantum
        return t
    t = preferred
    while t >= max(grid, preferred // 2):
        if dim % t == 0:
            return t
        t -= grid
    return preferred
