"""The warpgroup-MMA kernel (Hopper ``wgmma.mma_async``): its config and its plan, as data.

Asked for with ``--config intrinsic=WGMMA_F32_64x<N>x16_F16`` (or ``_BF16``, or
``WGMMA_F32_64x<N>x32_F8E4M3FN`` / ``_F8E5M2``) on sm_90a, and the heuristic's choice for f16/bf16
-> f32 problems of enough tiles (or a small static grid) and for every fp8 -> f32 problem it takes
(``wgmma.heuristic.warpgroup_default``; ``Target.intrinsics()`` does not list warpgroup MMAs). The kernel:

- a workgroup tile of ``tile_m`` x N x ``tile_k`` (tile_m 128: two warpgroups, 256 threads; 64:
  one), tile_k = one 128-byte swizzle line of K (64 f16/bf16, 128 fp8), each warpgroup owning 64
  rows and issuing one m64nNk16 (m64nNk32 for fp8: 32 bytes of K either way) per K step (4 per K
  tile);
- A and B both read from shared memory through matrix descriptors, each tile an ``SmemLayout``
  with the 128-byte swizzle: K-major where the operand's global rows run along K (A of a plain
  matmul, B^T), MN-major where they run along M/N (B of a plain matmul, A^T; imm-trans, 16-bit
  types only), so every 16-byte global chunk is one 16-byte shared-memory chunk and the copies
  never transpose. fp8 has no imm-trans: the kernel takes fp8 A as M x K and B as N x K
  (``matmul_transpose_b``, torch._scaled_mm's column-major B) and refuses the other forms;
- one shared-memory allocation holding both tiles, each 1024-byte aligned at run time (IREE packs
  workgroup allocations into dynamic shared memory declared ``.align 16``: the kernel rounds the
  allocation's address up and the allocation has 1024 bytes of slack); two, A's slots and B's,
  when their element types differ (mixed fp8: a cp.async copies between memrefs of one element
  type), each rounded up the same way;
- per K tile: barrier (the previous tile's wgmmas of every warpgroup are done), 128-bit global
  loads -> shared stores at ``SmemLayout.offset``, ``fence.proxy.async.shared::cta`` (the generic
  stores become visible to the async proxy), barrier, ``wgmma.fence``, 4 wgmmas, commit, wait 0;
- the accumulator (an ``!llvm.struct`` of N/2 f32 per thread) stored through the existing
  epilogue (fused elementwise epilogues and f16/bf16 outputs included, applied in registers) from the D layout, seen
  per warp: warp w of the workgroup holds rows 16w..16w+15 of the tile in mma.sync m16n8's C layout, N/8 times along N
  (``warp_c_layout``), which is the script's wave tile of 16 x N with ``waves_m`` = tile_m / 16 warps of 32.

Partial tiles (M, N, K not multiples of the tile) are bounded: out-of-range chunks are
zero-filled (the one-stage kernel's loads select 0, cp.async copies 0 source bytes), out-of-range
stores dropped.

Dynamic M, N, K and batch are taken as the mma.sync kernel takes them (``core/dynamic.py``): the sizes
come from the inlined prologue (push constants), the bounds above compare with those values (a
dimension promised a multiple of its tile is not checked: ``plan.Extents.bounded``), the K loops
run ceil(K / 64) tiles of the run-time K (``WgmmaPlan.k_tiles`` None), the ring's prologue copies
are guarded by tile < K tiles (K may be 0), and hand-back computes the grid from the workload.
A chunk is 16 bytes of one global row, so a dynamic dimension that an operand's rows run along (K
for A / B^T, M for A^T, N for B) needs a divisibility promise of 8 elements
(``Contraction.multiple_of``); without it the kernel refuses, naming the promise.

Refused (``UnsupportedError`` / ``ConfigError`` naming why): other targets, fp8 operands whose
global rows run along M/N (a K x N B, an A^T), operand rows not
whole 16-byte chunks (static, or dynamic without that promise), other tile shapes, ``stages``
outside 1..8 (``MAX_STAGES``) or more than the shared memory holds.

``stages`` 2..8 (default: 4, or 3 where 4 does not fit in 227 KB; the deepest that fits for one wave of
long K loops, ``heuristic._deep_ring``, which `mmaflow tune` tries under a wave) replaces the stores with a ring of
``stages`` slots filled by cp.async (see ``WgmmaPlan.copy_ahead`` / ``wgmma_lag`` and
``kernels/wgmma/rewrite.py``); ``stages`` = 1 is the synchronous kernel above.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.common.plan import EpiloguePlan, Extents, lane_pairs, same_tensor_note
from mmaflow.compiler.kernels.wgmma.tma import (
    MAP_BYTES,
    MAX_STAGES,
    ONE_BLOCK_PER_SM,
    TmaPlan,
    operand_boxes,
    plan_tma,
    validate_tma,
)
from mmaflow.compiler.target.intrinsics import F32, FP8, TYPE_BITS, WARPGROUP, WGMMA_CODEGEN_TYPES, WarpgroupIntrinsic
from mmaflow.compiler.target.layout import COL, Layout, Run, make_layout
from mmaflow.compiler.target.limits import THREAD_REGISTERS
from mmaflow.compiler.target.smem_layout import Major, MatrixDescriptor, SmemLayout, Swizzle
from mmaflow.compiler.target.targets import Target, Vendor

WARP = 32
LINE_BYTES = 128  # the K tile: one 128-byte swizzle line (64 f16/bf16, 128 fp8 elements)
TILE_M = (64, 128)  # one or two warpgroups of 64 rows
SWIZZLE = Swizzle.B128
ALIGN = SWIZZLE.atom_bytes  # a 128B-swizzle tile starts on 1024 bytes
CHUNK_BYTES = 16  # one 128-bit global load and shared store per chunk
# What a user may set; every other field follows from the intrinsic (tile_n = N, tile_k = 64, ...).
OVERRIDABLE = ("intrinsic", "tile_m", "raster", "stages", "copy", "persistent", "producer", "cluster", "split_k")
CLUSTERS = (1, 2)  # workgroups per thread block cluster (2: B multicast to the pair)
# split_k: workgroups per output tile, one thread block cluster (PTX ISA: at most 8 CTAs per cluster
# is the portable size, "Cluster of Cooperative Thread Arrays")
MAX_SPLIT_K = 8
PARTIAL_CHUNK = 16  # split-K partial sums: 16-byte chunks (4 f32), chunk c of thread t at (c * threads + t) * 16
STAGES = tuple(range(1, MAX_STAGES + 1))  # 1: one slot, synchronous stores, wait 0 (the first kernel); 2+: the ring
DEFAULT_STAGES = (4, 3)  # the deepest ring that fits in shared memory
REGISTERS = THREAD_REGISTERS  # per thread (sm_90a)
# fp8 promotes each K tile's partial to f32 (``WgmmaPlan.promotes``): a thread holds the f32
# accumulator and the tile's partial, 2 x N/2 f32 (3 x N/2 if the previous tile's partial were
# kept in flight too, wgmma_lag 1). N 256: 256 registers (384), N 192: 192 (288) before addresses,
# descriptors and the copies' indices, against the 255 a thread has; N 128: 128 (192). So fp8
# takes N <= 128 (ptxas: the 4-slot ring of 128x128 tiles builds without spills,
# e2e_tests/test_wgmma_fp8.py).
FP8_MAX_N = 128

TMA_COPIES = ("tma", "tma-wide")  # tma-wide: MN-major tiles K-atoms fastest (one box per 64-column atom)


def default_copy(target: Target, problem: Contraction, cfg: KernelConfig) -> str | None:
    """The ring's copies when the user does not say (``kernels/wgmma/tma.py``; docs/kernels/hopper_wgmma.md,
    The ring). Measured on the H200 (kernel-only TFLOP/s at 4096-class sizes, cp.async ->
    copy=tma-wide): unaligned 4000^3 553.6 -> 631.7, dynamic sizes with divisibility promises
    572.3 -> 670.8, dynamic rows 658.1 -> 672.3 (TMA zero-fills what lies past the tensor,
    so no copy carries a bound), but aligned static 685.1 -> 678.2 (4096^3) and 735.7 -> 729.9
    (8192^3), and 64x128 tiles lose their second block per SM (1024^3: 278.5 -> 245.7). So
    ``tma-wide`` where some tile overhangs the problem (a size not a multiple of its tile, or
    dynamic) in 128-row tiles, when the TMA ring can serve (``tma_refusal``); cp.async (None)
    elsewhere."""
    intr = target.intrinsic(cfg.intrinsic)
    overhangs = problem.is_dynamic or any(
        getattr(problem, d) % t for d, t in (("m", cfg.tile_m), ("n", cfg.tile_n), ("k", cfg.tile_k))
    )
    if not overhangs or cfg.tile_m != 128 or intr.a_type in FP8:
        return None
    return "tma-wide" if tma_refusal(target, problem, cfg) is None else None


def tma_refusal(target: Target, problem: Contraction, cfg: KernelConfig) -> str | None:
    """Why ``copy=tma`` cannot serve this problem and config, or None."""
    try:
        validate_tma(
            replace(cfg, copy="tma"),
            target,
            problem,
            target.intrinsic(cfg.intrinsic),
            fp8_pair_tiles=WgmmaPlan.fp8_pair_tiles,
        )
    except (ConfigError, UnsupportedError) as e:
        return str(e)
    return None


def tile_k(elem: str) -> int:
    """The K tile of the warpgroup kernel for inputs of type ``elem``: one 128-byte line."""
    return LINE_BYTES * 8 // TYPE_BITS[elem]


def warpgroup_config(target: Target, problem: Contraction, intr: WarpgroupIntrinsic, overrides: dict) -> KernelConfig:
    """The config of the warpgroup kernel for ``intr``, with the user's overrides, validated."""
    tile_m = overrides.get("tile_m", 128)
    cfg = KernelConfig(
        intrinsic=intr.name,
        wave_size=WARP,
        tile_m=tile_m,
        tile_n=intr.n,
        tile_k=tile_k(intr.a_type),
        waves_m=max(1, tile_m // 16),
        waves_n=1,
        lds_pad=0,
        stages=1,
        raster=1,
    )
    if "stages" not in overrides:  # the deepest default ring within the target's shared memory
        deepest = deepest_stages(cfg, target, intr, DEFAULT_STAGES) if tile_m in TILE_M else None
        cfg = replace(cfg, stages=deepest or DEFAULT_STAGES[-1])  # (refused below)
    fixed = {k: v for k, v in overrides.items() if k not in OVERRIDABLE}
    if any(getattr(cfg, k) != v for k, v in fixed.items()):
        bad = ", ".join(f"{k}={v}" for k, v in sorted(fixed.items()) if getattr(cfg, k) != v)
        raise ConfigError(
            f"{intr.name}: {bad} cannot be set; a warpgroup-MMA kernel takes only "
            f"{', '.join(OVERRIDABLE)} (tile_m 64 or 128); the rest follows from the intrinsic "
            f"(tile_n = N = {intr.n}, tile_k = {tile_k(intr.a_type)}, warps of 32, waves_m = tile_m / 16, "
            f"stages 1 to {MAX_STAGES})"
        )
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if k in OVERRIDABLE})
    if "copy" not in overrides and cfg.stages > 1:
        cfg = replace(cfg, copy=default_copy(target, problem, cfg))
        if cfg.producer and cfg.copy is None:  # the producer warpgroup issues TMA copies
            cfg = replace(cfg, copy="tma")
    validate_warpgroup(cfg, target, problem, intr)
    return cfg


def validate_warpgroup(cfg: KernelConfig, target: Target, problem: Contraction, intr: WarpgroupIntrinsic) -> None:
    """Refuse what the warpgroup kernel does not implement, saying why."""
    if not target.warpgroup_mma:
        raise UnsupportedError(f"{intr.name} is a Hopper warpgroup MMA; {target.name} has none (use sm_90a)")
    if intr.a_type not in WGMMA_CODEGEN_TYPES or intr.c_type != F32:
        raise UnsupportedError(f"{intr.name}: wgmma codegen implements f16/bf16/fp8 -> f32 only")
    if (intr.a_type, intr.b_type, intr.c_type) != (problem.a_type, problem.b_type, problem.c_type):
        raise ConfigError(
            f"intrinsic {intr.name} computes {intr.a_type}x{intr.b_type}->{intr.c_type}, "
            f"the matmul is {problem.a_type}x{problem.b_type}->{problem.c_type}"
        )
    refuse_fp8_forms(intr, problem)
    if intr.a_type in FP8 and intr.n > FP8_MAX_N:
        raise ConfigError(
            f"{intr.name}: fp8 wgmma takes N <= {FP8_MAX_N}: its partial sums are promoted to f32 per "
            f"K tile (Hopper's fp8 accumulator keeps 14 bits), so a thread holds the f32 accumulator "
            f"and a K tile's partial, 2 x N/2 = {intr.n} f32 registers for N {intr.n} before any "
            f"address or index, against the {REGISTERS} a thread has; use WGMMA_F32_64x128x32_... "
            f"(128x128 tiles)"
        )
    tk = tile_k(intr.a_type)
    want = dict(wave_size=WARP, tile_n=intr.n, tile_k=tk, waves_m=cfg.tile_m // 16, waves_n=1, lds_pad=0)
    if cfg.stages not in STAGES:
        raise ConfigError(
            f"{intr.name}: stages={cfg.stages}; the warpgroup-MMA kernel has 1 (synchronous stores, "
            f"wait 0 per K tile) or a cp.async ring of 2 to {MAX_STAGES} shared-memory slots"
        )
    if cfg.tile_m not in TILE_M:
        raise ConfigError(
            f"{intr.name}: tile_m={cfg.tile_m}; a warpgroup-MMA kernel has tile_m 64 (one warpgroup) or 128 (two)"
        )
    wrong = [f"{k}={getattr(cfg, k)} (must be {v})" for k, v in want.items() if getattr(cfg, k) != v]
    if wrong:
        raise ConfigError(
            f"{intr.name}: {', '.join(wrong)}: the warpgroup-MMA kernel has tile "
            f"{cfg.tile_m}x{intr.n}x{tk}, warps of 32"
        )
    if not 1 <= cfg.raster <= 64:
        raise ConfigError(f"raster must be 1 to 64 (tile rows per workgroup group), got {cfg.raster}")
    # Partial tiles (M, N or K not a multiple of the tile) are bounded like the mma.sync kernel's:
    # chunks past the true extent are zero-filled, stores past it dropped, against the static size
    # or the run-time value of a dynamic one. A chunk is 16 bytes of one global row, so each
    # operand's row length must be whole chunks (and 16-byte aligned rows): static, or promised.
    per_chunk = CHUNK_BYTES * 8 // TYPE_BITS[intr.a_type]
    for name in ("A", "B"):
        dim = row_dim(problem, name)
        if problem.multiple_of(dim) % per_chunk == 0:
            continue
        if problem.dynamic_dim(dim) is None:
            raise UnsupportedError(
                f"{intr.name}: {name}'s global rows run along {dim.upper()} = {getattr(problem, dim)}, "
                f"not a multiple of {per_chunk} elements: the warpgroup-MMA kernel copies whole "
                f"16-byte chunks (partial tiles are otherwise bounded)"
            )
        div = problem.multiple_of(dim)
        promise = f"promised only to be a multiple of {div}" if div > 1 else "has no divisibility promise"
        raise UnsupportedError(
            f"{intr.name}: {name}'s global rows run along {dim.upper()}, which is dynamic and "
            f"{promise}: the warpgroup-MMA kernel copies whole 16-byte chunks, so it needs "
            f"{dim.upper()} to be a multiple of {per_chunk} elements; a promise that it is "
            f"(util.assume.int %{dim}<udiv = {per_chunk}>, or any multiple of {per_chunk}) would "
            f"let the kernel take this matmul"
        )
    threads = cfg.compute_threads
    for name, mn in (("A", cfg.tile_m), ("B", cfg.tile_n)):
        chunks = mn * tk * TYPE_BITS[intr.a_type] // 8 // CHUNK_BYTES
        if chunks % threads and cfg.copy not in TMA_COPIES:
            raise UnsupportedError(
                f"{intr.name}: {name}'s tile is {chunks} 16-byte chunks, not a whole number per thread of {threads}"
            )
        operand_layout(name, problem, mn, intr.element_type(name))  # whole swizzle atoms, or UnsupportedError
    if cfg.copy is not None:
        if cfg.copy not in TMA_COPIES:
            raise ConfigError(
                f"{intr.name}: copy={cfg.copy}; the warpgroup kernel's copies are cp.async, {', '.join(TMA_COPIES)}"
            )
        validate_tma(cfg, target, problem, intr, fp8_pair_tiles=WgmmaPlan.fp8_pair_tiles)
    if cfg.producer not in (0, 1):
        raise ConfigError(
            f"{intr.name}: producer={cfg.producer}; 0 (the MMA warpgroups issue the copies) or 1 (a "
            f"producer warpgroup issues them: warp-specialized)"
        )
    if cfg.producer and cfg.stages < 2:
        raise ConfigError(
            f"{intr.name}: producer=1 feeds a ring of 2 to {MAX_STAGES} slots; stages=1 is the synchronous kernel"
        )
    if cfg.producer and cfg.copy not in TMA_COPIES:
        raise ConfigError(
            f"{intr.name}: producer=1 issues TMA copies into mbarrier-guarded slots; with "
            f"copy={cfg.copy or 'cp.async'} every thread copies (use copy=tma or tma-wide)"
        )
    if cfg.persistent is not None:
        why = persistent_refusal(cfg, problem, intr)
        if why:
            raise ConfigError(f"{intr.name}: persistent={cfg.persistent}: {why}")
    why = cluster_refusal(cfg, problem, intr)
    if why:
        raise ConfigError(f"{intr.name}: cluster={cfg.cluster}: {why}")
    why = split_k_refusal(cfg, problem, intr)
    if why:
        raise ConfigError(f"{intr.name}: split_k={cfg.split_k}: {why}")
    smem = plan_bytes(cfg, intr.a_type, allocations(intr))
    if smem > target.lds_bytes:
        raise ConfigError(
            f"the warpgroup kernel needs {smem} bytes of shared memory ({cfg.stages} stage"
            f"{'s' if cfg.stages > 1 else ''} of {slot_bytes(cfg, intr.a_type)} B + {ALIGN} B of "
            f"alignment slack per allocation), {target.name} has {target.lds_bytes}: use fewer stages"
        )


def output_tiles(cfg: KernelConfig, problem: Contraction) -> int:
    """The output tiles of a static problem (batch included)."""
    return -(-problem.m // cfg.tile_m) * -(-problem.n // cfg.tile_n) * (problem.batch or 1)


def overhangs(cfg: KernelConfig, problem: Contraction) -> bool:
    """Whether the problem's last tiles are partial in M, N or K (the config's K tile: ``tile_k``)."""
    return bool(problem.m % cfg.tile_m or problem.n % cfg.tile_n or problem.k % cfg.tile_k)


def persistent_refusal(cfg: KernelConfig, problem: Contraction, intr: WarpgroupIntrinsic) -> str | None:
    """Why the persistent grid (``cfg.persistent`` tiles per workgroup) cannot serve, or None.
    It loops over static tiles, a batch's items one after the other (tile t of item t / (tiles of
    one item)): every workgroup runs the same number of tiles (the lane
    executor runs workgroups in lockstep). With the cp.async ring the tiles must be whole (the
    ring's prefetch of the next tile has no bounds); the warp-specialized TMA ring takes partial
    ones (the copies are zero-filled past the extents, the epilogue's stores bounded per tile)."""
    if problem.is_dynamic:
        return "the persistent grid takes static sizes (the tile count must divide by it at compile time)"
    if overhangs(cfg, problem) and not cfg.producer:  # (its TMA copies' zero fill bounds them; producer => TMA)
        return (
            f"{problem.m}x{problem.n}x{problem.k} is not whole {cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k} tiles (the next "
            f"tile's cp.async copies are issued unbounded; the warp-specialized TMA ring takes them)"
        )
    if cfg.stages < 2 or (cfg.copy is not None and not cfg.producer):
        return (
            "the persistent grid runs the cp.async ring (stages >= 2, copy unset) or the warp-specialized "
            "TMA ring (producer=1)"
        )
    if intr.a_type in FP8 and WgmmaPlan.fp8_pair_tiles:
        return "fp8 pair tiles are not taken by the persistent grid"
    tiles = output_tiles(cfg, problem)
    if cfg.persistent < 2 or tiles % cfg.persistent:
        return (
            f"{tiles} output tiles are not a whole number of {cfg.persistent} per workgroup (2 or more, a "
            f"divisor of {tiles}: every workgroup runs as many)"
        )
    return None


def partial_bytes(cfg: KernelConfig) -> int:
    """Shared bytes of a workgroup's f32 partial output tile (split-K's reduction)."""
    return cfg.tile_m * cfg.tile_n * 4


def split_k_refusal(cfg: KernelConfig, problem: Contraction, intr: WarpgroupIntrinsic) -> str | None:
    """Why ``cfg.split_k`` workgroups per output tile cannot serve, or None (always None for 1).
    The S workgroups of a tile are one thread block cluster (S, 1, 1): rank r runs K tiles
    r * T / S .. (r + 1) * T / S - 1 of the T, then each stores its f32 partial in its own
    shared memory (over the ring's slots), barrier.cluster, the owner of each warp's rows (rank
    w % S) adds the ranks' partials in rank order over distributed shared memory, barrier.cluster,
    and the owners run the epilogue. So the sizes are static and the K tiles divide by S; the
    ring's barrier.cluster needs every thread, outside warp roles (no producer warpgroup); one
    tile per workgroup (no persistent grid); no B multicast cluster; the partial fits the slots'
    shared memory."""
    s = cfg.split_k
    if s == 1:
        return None
    if not 2 <= s <= MAX_SPLIT_K:
        return f"2 to {MAX_SPLIT_K} workgroups per output tile (one thread block cluster, the portable size)"
    if problem.is_dynamic:
        return "dynamic sizes: the K tiles are shared out, and the grid sized, at compile time"
    tiles = -(-problem.k // tile_k(intr.a_type))
    if tiles % s:
        return f"the {tiles} K tiles of {tile_k(intr.a_type)} (K = {problem.k}) do not divide into {s} equal shares"
    if cfg.producer:
        return (
            "the warp-specialized kernel's roles never meet at a CTA-wide barrier, and the reduction's "
            "barrier.cluster needs every thread (use producer=0)"
        )
    if cfg.persistent:
        return "a persistent grid: split-K runs one output tile per workgroup"
    if cfg.cluster != 1:
        return "clusters of B multicast (cluster=2) and split-K clusters do not combine"
    b = TYPE_BITS[intr.a_type] // 8  # (the first allocation's slots: A's alone for mixed fp8 types)
    slot = slot_bytes(cfg, intr.a_type) if allocations(intr) == 1 else _round(cfg.tile_m * tile_k(intr.a_type) * b)
    need, have = partial_bytes(cfg), cfg.stages * slot
    if need > have:
        return (
            f"the {cfg.tile_m}x{cfg.tile_n} f32 partial needs {need} bytes of shared memory, the "
            f"{cfg.stages}-slot ring has {have} (use more stages)"
        )
    return None


def cluster_refusal(cfg: KernelConfig, problem: Contraction, intr: WarpgroupIntrinsic) -> str | None:
    """Why clusters of ``cfg.cluster`` workgroups cannot serve, or None (always None for 1). The
    pair of a cluster computes tile rows 2p and 2p + 1 of one tile column at every step of the
    persistent loop (they share B's K tiles, each copying half by multicast), so the kernel is the
    warp-specialized persistent one, the tile rows pair up and the grid is whole clusters."""
    if cfg.cluster == 1:
        return None
    if cfg.cluster not in CLUSTERS:
        return f"clusters of {', '.join(map(str, CLUSTERS))} workgroups are implemented"
    if not cfg.producer or cfg.persistent is None:
        return (
            "clusters are built on the warp-specialized persistent kernel (producer=1, persistent=W): its "
            "producer multicasts half of B's boxes and waits for both workgroups' release of a slot"
        )
    rows = -(-problem.m // cfg.tile_m)
    if rows % cfg.cluster:
        return (
            f"{rows} tile rows of {cfg.tile_m} (M = {problem.m}) do not pair up: the workgroups of a cluster "
            f"compute tile rows 2p and 2p + 1 of one tile column"
        )
    grid = output_tiles(cfg, problem) // cfg.persistent
    if grid % cfg.cluster:
        return (
            f"the persistent grid of {grid} workgroups ({output_tiles(cfg, problem)} tiles / {cfg.persistent}) is "
            f"not whole clusters of {cfg.cluster}"
        )
    wide = cfg.copy == "tma-wide" and not k_innermost(problem, "B")
    try:
        operand_boxes("B", operand_layout("B", problem, cfg.tile_n, intr.element_type("B"), wide), 0, cfg.cluster)
    except UnsupportedError as e:
        return f"{e}{' (copy=tma: 8-K-line boxes, more of them)' if wide else ''}"
    return None


def refuse_fp8_forms(intr: WarpgroupIntrinsic, problem: Contraction) -> None:
    """What the kernel does not take for 8-bit inputs, with the reason and the form it takes."""
    if intr.a_type not in FP8:
        return
    for name in ("A", "B"):
        if k_innermost(problem, name):
            continue
        form = "K x M (A^T)" if name == "A" else "K x N (a plain matmul's B)"
        raise UnsupportedError(
            f"{intr.name}: {name} is stored {form}: its global rows run along "
            f"{row_dim(problem, name).upper()}, and 8-bit wgmma reads only K-major shared-memory "
            f"operands (no imm-trans for fp8), while the kernel's 16-byte copies do not transpose; "
            f"the fp8 kernel takes A as M x K and B as N x K (linalg.matmul_transpose_b form, "
            f"torch._scaled_mm's column-major B)"
        )


def k_innermost(problem: Contraction, name: str) -> bool:
    """Whether the operand's global rows run along K (A of a plain matmul, B^T)."""
    return not problem.a_transposed if name == "A" else problem.b_transposed


def row_dim(problem: Contraction, name: str) -> str:
    """The problem dimension an operand's global rows run along (contiguous in memory)."""
    return "k" if k_innermost(problem, name) else ("m" if name == "A" else "n")


def operand_layout(name: str, problem: Contraction, mn: int, elem: str, k_atoms_fastest: bool = False) -> SmemLayout:
    major = Major.K if k_innermost(problem, name) else Major.MN
    try:
        return SmemLayout(major, SWIZZLE, TYPE_BITS[elem], mn, tile_k(elem), k_atoms_fastest)
    except UnsupportedError as e:
        raise UnsupportedError(
            f"{name}'s {mn}x{tile_k(elem)} tile in shared memory ({major.value}-major, 128B swizzle): {e}"
        ) from None


def slot_bytes(cfg: KernelConfig, elem: str) -> int:
    """One ring slot: the A tile and the B tile, each starting on 1024 bytes."""
    b = TYPE_BITS[elem] // 8
    return _round(cfg.tile_m * tile_k(elem) * b) + _round(cfg.tile_n * tile_k(elem) * b)


def allocations(intr: WarpgroupIntrinsic) -> int:
    """Shared-memory allocations of the kernel: one holding every slot's A and B tile, or two (A's
    slots, B's slots) when A and B differ in element type (mixed fp8 pairs): a cp.async copies
    between memrefs of one element type."""
    return 1 if intr.a_type == intr.b_type else 2


def deepest_stages(cfg: KernelConfig, target: Target, intr: WarpgroupIntrinsic, stages) -> int | None:
    """The largest of ``stages`` whose ring of ``cfg``'s slots (its copies' maps and barriers included)
    fits in the target's shared memory, or None. Shared memory is the only bound a deeper ring meets."""
    fits = [s for s in stages if plan_bytes(replace(cfg, stages=s), intr.a_type, allocations(intr)) <= target.lds_bytes]
    return max(fits, default=None)


def plan_bytes(cfg: KernelConfig, elem: str, allocations: int = 1) -> int:
    """The shared memory allocated: ``stages`` slots plus, per allocation, the slack for the
    run-time 1024-byte alignment; with TMA copies (one allocation: A and B of one type) also the two tensor
    maps and one mbarrier per slot, and at least ``tma.ONE_BLOCK_PER_SM`` bytes (one block per
    SM: the per-SM map slots)."""
    ring = allocations * ALIGN + cfg.stages * slot_bytes(cfg, elem)
    if cfg.copy in TMA_COPIES:
        barriers = (2 if cfg.producer else 1) * 8 * cfg.stages  # "full" per slot (+ "empty": producer=1)
        return max(ring + 2 * MAP_BYTES + barriers, ONE_BLOCK_PER_SM)
    return ring


def _round(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def warp_c_layout(n: int) -> Layout:
    """One warp's part of the wgmma accumulator: warp w of a warpgroup holds rows 16w..16w+15 of
    the 64 x N result, d[i] at row groupID + 8*((i/2)%2), column 8*(i/4) + 2*tig + i%2 (the
    warpgroup D layout of ``target/intrinsics.py`` without its LaneZ = warp; tested against it)."""
    return make_layout(
        "C", WARP, rows=[("LaneY", 8), ("VectorY", 2)], cols=[("VectorX", 2), ("LaneX", 4), ("VectorZ", n // 8)]
    )


@dataclass(frozen=True)
class WgmmaOperand:
    """One operand's shared-memory tile and the copy that fills it."""

    name: str
    smem: SmemLayout
    offset: int  # bytes from the aligned base of its allocation (a multiple of 1024)
    rows: int  # the global tile: rows x cols, cols contiguous in global memory
    cols: int
    chunks_per_thread: int
    allocation: int = 0  # which shared-memory allocation holds its tiles (1: B's own, mixed types)
    slot_stride: int = 0  # bytes from one slot's tile to the next (the slot, or the tile in its own ring)

    @property
    def k_innermost(self) -> bool:
        return self.smem.major is Major.K

    def element(self, row: int, col: int) -> tuple[int, int]:
        """(mn, k) of global-tile element (row, col)."""
        return (row, col) if self.k_innermost else (col, row)


@dataclass(frozen=True)
class WgmmaPlan:
    intrinsic: WarpgroupIntrinsic
    vendor: Vendor
    wave_size: int  # the warp (the script's wave): the epilogue's lane index
    workgroup_size: int
    warpgroups: int
    a: WgmmaOperand
    b: WgmmaOperand
    tile_k: int
    k_steps: int  # wgmma per K tile and warpgroup
    k_tiles: int | None  # None: from the run-time K
    smem_bytes: int
    epilogue: EpiloguePlan
    notes: tuple[str, ...] = ()
    stages: int = 1  # shared-memory slots; 1: the synchronous kernel
    slot_bytes: int = 0  # one slot (A tile + B tile), a multiple of 1024
    allocations: int = 1  # 2: A's slots and B's slots apart (mixed element types)
    dynamic: tuple[str, ...] = ()  # per dynamic dimension: its promise and how its tiles are bounded
    tma: "TmaPlan | None" = None  # copy=tma: the boxes, maps and mbarriers (kernels/wgmma/tma.py); None: cp.async
    persistent: int | None = None  # output tiles per workgroup (None: one)
    tile_grid: tuple[int, int] = (0, 0)  # output tiles along N and M
    batch: int = 1  # batch items (static), each a tile grid: the persistent grid walks them all
    raster: int = 1
    split_k: int = 1  # workgroups (a cluster) per output tile, each k_tiles of the K tiles

    @property
    def tma_min_bytes(self) -> int:
        return ONE_BLOCK_PER_SM

    @property
    def pipelined(self) -> bool:
        return self.stages > 1

    @property
    def promotes(self) -> bool:
        """8-bit inputs: each K tile's wgmmas accumulate into a fresh partial (the first with
        scale-d 0), which is added into the f32 accumulator with f32 adds right after the tile's ``wait_group 0``
        (``wgmma_lag`` is 0 for fp8: see ``wgmma_lag``). Hopper's fp8 wgmma keeps only 14 bits below its largest
        addend (``runtime/isa/wgmma.py``, measured on the H200), so an accumulator carried through every wgmma is cut
        ever coarser as it grows; cuBLAS promotes the same way (CUTLASS ``GmmaFP8Accumulation``, promotion interval =
        one 128-k tile). 16-bit inputs accumulate in f32 in the instruction and carry the one accumulator."""
        return self.intrinsic.a_type in FP8

    # fp8 with 3+ stages: False (default) waits for each K tile's group before promoting its
    # partial (wgmma_lag 0, as CUTLASS's GmmaFP8Accumulation::promote_core); True runs the K loop
    # two tiles per iteration, the second tile's wgmmas issued while the first's run (wait_group 1
    # then 0, two partials: ``WgmmaRewriter._pair_loop``; 246 registers instead of 186). Not yet
    # measured on a GPU: a class-level switch for the bench's same-run comparison and the tests.
    fp8_pair_tiles = False

    @property
    def wgmma_lag(self) -> int:
        """``wgmma.wait_group`` N at the end of a K tile: with 3+ slots the previous tile's group
        may still run while the next is issued (one slot stays held by it); with 2 slots that
        slot is the one the next copy needs, so the group is waited for (0). fp8 (``promotes``):
        0, each tile's partial is added right after its group completes -- a partial carried
        across the loop's back edge makes ptxas serialize the wgmmas (C7514; and a one-tile loop
        carrying it, PTX movs of a running group's registers at the loop head, C7517), see
        ``WgmmaRewriter._pair_loop`` -- unless ``fp8_pair_tiles`` (1 inside a pair of tiles)."""
        if self.promotes and not (self.fp8_pair_tiles and self.stages >= 3):
            return 0
        return 1 if self.stages >= 3 else 0

    @property
    def copy_ahead(self) -> int:
        """K tiles copied ahead of the one multiplied: the slots neither the current tile nor a
        still-running wgmma group holds. The copy of tile t + copy_ahead goes into the slot of
        tile t - 1 - wgmma_lag, whose group every warpgroup waited for before this tile's barrier."""
        return self.stages - 1 - self.wgmma_lag

    @property
    def copy_pending(self) -> int:
        """cp.async.wait_group N at the top of a K tile (this tile landed; later ones may fly)."""
        return self.copy_ahead - 1

    def __post_init__(self):
        # A warpgroup's A descriptor is the first warpgroup's plus a fixed step: the kernel adds
        # warpgroup * a_warpgroup_step at run time.
        for w in range(self.warpgroups):
            for s in range(self.k_steps):
                assert self.a_offset(w, s) == w * self.a_warpgroup_step + self.a_offset(0, s), (w, s)

    @property
    def operands(self) -> tuple[WgmmaOperand, WgmmaOperand]:
        return self.a, self.b

    def allocation_bytes(self, i: int) -> int:
        """Bytes of shared-memory allocation ``i`` (its alignment slack included)."""
        if self.allocations == 1:
            return self.smem_bytes
        return ALIGN + self.stages * self.operands[i].slot_stride

    def a_offset(self, warpgroup: int, step: int) -> int:
        """Start of warpgroup ``warpgroup``'s A rows at K step ``step``, bytes from the A tile's base."""
        return self.a.smem.linear_offset(64 * warpgroup, self.intrinsic.k * step)

    @property
    def a_warpgroup_step(self) -> int:
        return self.a_offset(1, 0) - self.a_offset(0, 0) if self.warpgroups > 1 else 0

    def descriptor(self, name: str, warpgroup: int, step: int) -> MatrixDescriptor:
        """The instruction's descriptor for shared memory based at address 0 (the kernel adds the
        aligned base's start field at run time)."""
        intr = self.intrinsic
        if name == "A":
            return self.a.smem.descriptor(self.a.offset, 64 * warpgroup, intr.k * step, intr.m, intr.k)
        return self.b.smem.descriptor(self.b.offset, 0, intr.k * step, intr.n, intr.k)

    def expectations(self) -> attrs.Expectations:
        """The ISA must show 128-bit global loads (stages 1) or 16-byte cp.async (the ring), the K
        loop's wgmma (k_steps per K tile), and two barriers per K tile (stages 1) or one (the ring)."""
        if self.tma is not None:  # bulk tensor copies, one barrier per K tile (warp-specialized: none)
            return attrs.Expectations(
                CHUNK_BYTES * 8,
                self.k_tiles or 0,
                self.k_steps,
                False,
                0 if self.tma.specialized else 1,
                tma=True,
                cluster=self.tma.cluster if self.tma.cluster > 1 else None,
                split_k=self.split_k if self.split_k > 1 else None,
            )
        split = self.split_k if self.split_k > 1 else None
        if self.pipelined:  # cp.async copies, one barrier per K tile
            return attrs.Expectations(CHUNK_BYTES * 8, self.k_tiles or 0, self.k_steps, True, 1, split_k=split)
        return attrs.Expectations(CHUNK_BYTES * 8, self.k_tiles or 0, self.k_steps, False, 2, split_k=split)

    def describe(self) -> list[str]:
        intr = self.intrinsic
        lines = [
            f"{intr.name}: {self.warpgroups} warpgroup{'s' if self.warpgroups > 1 else ''} of 128 threads "
            f"({self.workgroup_size} threads), each 64 rows x {intr.n}; K tiles of {self.tile_k}: "
            f"{self.k_tiles if self.k_tiles is not None else 'from the run-time K'}; "
            f"{self.k_steps} wgmma.mma_async per K tile and warpgroup, A and B from shared memory"
        ]
        for o in self.operands:
            lbo, sbo = o.smem.strides()
            copy = (
                f"{o.chunks_per_thread} x 128-bit chunks per thread {'cp.async to' if self.pipelined else 'stored at'} "
                f"SmemLayout.offset"
                if self.tma is None
                else "TMA (below)"
            )
            lines.append(
                f"{o.name}: shared tile at +{o.offset} B{' of each slot' if self.pipelined else ''}: "
                f"{o.smem.describe()}; copy: global rows of "
                f"{o.cols} ({'K' if o.k_innermost else 'M/N'} innermost), {copy}"
            )
            d0 = self.descriptor(o.name, 0, 0)
            lines.append(
                f"{o.name}: descriptor (base 0) warpgroup 0 step 0: start {d0.start_address} LBO {lbo} "
                f"SBO {sbo} mode {o.smem.swizzle.descriptor_code} = {d0.encode():#018x}; steps: "
                + ", ".join(
                    f"+{self.descriptor(o.name, 0, s).start_address - d0.start_address}" for s in range(1, self.k_steps)
                )
            )
        if self.persistent:
            gx, gy = self.tile_grid
            grid = gx * gy * self.batch // self.persistent
            head = (
                f"persistent: {grid} workgroups, each {self.persistent} output tiles in "
                f"turn (tile lin + j * {grid}, j < {self.persistent}"
                + (f"; batch item tile / {gx * gy}" if self.batch > 1 else "")
                + (
                    f"; a cluster's workgroups on tile rows {self.tma.cluster}q .. {self.tma.cluster}q + "
                    f"{self.tma.cluster - 1} of one column, the raster over q"
                    if self.tma and self.tma.cluster > 1
                    else ""
                )
                + "); "
            )
            if self.tma is not None and self.tma.specialized:
                lines.append(
                    head + "the ring count runs on across tiles (n = j * K tiles + t), so the producer "
                    "copies the next tile's K tiles while the MMA warpgroups run this one's epilogue"
                )
            else:
                lines.append(
                    head + f"the next tile's first {self.copy_ahead} K tiles copied after a barrier that "
                    f"ends this tile's K loop, before its epilogue"
                )
        if self.split_k > 1:
            s, threads = self.split_k, self.warpgroups * 128
            lines.append(
                f"split-K: a thread block cluster of {s} workgroups per output tile (grid x: {s} per tile column, "
                f"rank = workgroup x % {s}); rank r runs K tiles {self.k_tiles}r .. {self.k_tiles}r + "
                f"{self.k_tiles - 1}; then barrier; each thread stores its {self.intrinsic.n // 2} f32 partial "
                f"sums into its own shared memory (over the slots; 16-byte chunk c of thread t at "
                f"(c * {threads} + t) * 16); barrier.cluster; warp w's rows are rank w % {s}'s: it adds "
                f"ranks 0 .. {s - 1}'s chunks in rank order (mapa + ld.shared::cluster: the same sum every "
                "run); barrier.cluster (no peer exits while read); the owners run the epilogue"
            )
        if self.dynamic:
            lines.append(
                "dynamic: " + "; ".join(self.dynamic) + " (sizes from the push constants, the grid from the workload)"
            )
        where = (
            "in one allocation, its address"
            if self.allocations == 1
            else f"in two allocations (A's slots of {self.a.slot_stride} B, B's of {self.b.slot_stride} B: their "
            f"element types differ), each address"
        )
        if not self.pipelined:
            lines.append(f"stages: 1; shared memory: {self.smem_bytes} B {where} rounded up to {ALIGN} at run time")
            lines.append(
                "K tile: barrier; global -> shared stores; fence.proxy.async.shared::cta; barrier; "
                f"wgmma.fence; {self.k_steps} x wgmma.mma_async; commit_group; wait_group 0"
            )
        elif self.tma is not None:
            lines.append(
                f"stages: {self.stages} slots of {self.slot_bytes} B (tile t in slot t % {self.stages}); shared "
                f"memory: {self.smem_bytes} B in one allocation (at least {self.tma_min_bytes} B: one block "
                f"per SM), its address rounded up to {ALIGN} at run time"
            )
            lines += self.tma.describe()
            if self.tma.specialized:
                lines.append(
                    f"warp-specialized: threads {self.tma.first_issuer}..{self.workgroup_size - 1} are the "
                    f"producer warpgroup (setmaxnreg.dec), threads 0..{self.tma.first_issuer - 1} the "
                    f"{self.warpgroups} MMA warpgroup{'s' if self.warpgroups > 1 else ''} (setmaxnreg.inc); no CTA "
                    f"barrier after the prologue"
                )
                lines.append(
                    f"producer, K tile t (issuers only): mbarrier.try_wait.parity (empty slot t % {self.stages}, "
                    f"parity (t / {self.stages} + 1) % 2: the slot's release of tile t - {self.stages}); "
                    f"{self.tma.issuers} threads arrive.expect_tx(box bytes) + cp.async.bulk.tensor tile t -> "
                    f"slot t % {self.stages}"
                )
                lines.append(
                    f"MMA warpgroups, K tile t: mbarrier.try_wait.parity (full slot t % {self.stages}, parity "
                    f"(t / {self.stages}) % 2); wgmma.fence; {self.k_steps} x wgmma.mma_async; commit_group; "
                    f"wait_group {self.wgmma_lag}; thread 0 of each warpgroup arrives on the empty mbarrier "
                    f"of tile t - {self.wgmma_lag}'s slot; the epilogue by the MMA warpgroups only"
                )
            else:
                lines.append(
                    f"ring: {self.copy_ahead} K tile{'s' if self.copy_ahead > 1 else ''} copied ahead by TMA, "
                    f"{self.wgmma_lag} wgmma group{'s' if self.wgmma_lag != 1 else ''} left running; prologue: "
                    f"copy tiles 0..{self.copy_ahead - 1}"
                )
                lines.append(
                    f"K tile t: mbarrier.try_wait.parity (slot t % {self.stages}, parity (t / {self.stages}) % 2); "
                    f"barrier; wgmma.fence; {self.k_steps} x wgmma.mma_async (slot t % {self.stages}); commit_group; "
                    f"{self.tma.issuers} threads arrive.expect_tx(box bytes) + "
                    f"cp.async.bulk.tensor tile t+{self.copy_ahead} -> slot (t+{self.copy_ahead}) % {self.stages}; "
                    f"wait_group {self.wgmma_lag}"
                )
        else:
            lines.append(
                f"stages: {self.stages} slots of {self.slot_bytes} B (tile t in slot t % {self.stages}); shared "
                f"memory: {self.smem_bytes} B {where} rounded up to {ALIGN} at run time"
            )
            lines.append(
                f"ring: {self.copy_ahead} K tile{'s' if self.copy_ahead > 1 else ''} copied ahead by cp.async, "
                f"{self.wgmma_lag} wgmma group{'s' if self.wgmma_lag != 1 else ''} left running; prologue: "
                f"copy tiles 0..{self.copy_ahead - 1}"
            )
            lines.append(
                f"K tile t: cp.async.wait_group {self.copy_pending}; fence.proxy.async.shared::cta; barrier; "
                f"wgmma.fence; {self.k_steps} x wgmma.mma_async (slot t % {self.stages}); commit_group; "
                f"cp.async tile t+{self.copy_ahead} -> slot (t+{self.copy_ahead}) % {self.stages}; "
                f"wait_group {self.wgmma_lag}"
            )
        if self.promotes:
            n = self.intrinsic.n // 2
            if self.wgmma_lag:
                lines.append(
                    f"fp8: partial sums promoted to f32 per K tile, two K tiles per loop iteration: each "
                    f"tile's {self.k_steps} wgmma.mma_async into a fresh partial (the first with scale-d 0); "
                    f"wait_group 1 after the first tile, 0 after the second, then both partials added into "
                    f"the f32 accumulator ({n} + 2 x {n} f32 per thread)"
                )
            else:
                lines.append(
                    f"fp8: partial sums promoted to f32 per K tile: each tile's {self.k_steps} "
                    f"wgmma.mma_async into a fresh partial (the first with scale-d 0), added into the f32 "
                    f"accumulator after its wait_group 0 ({n} + {n} f32 per thread)"
                )
        lay = self.epilogue.layout
        lines.append(
            f"epilogue: the accumulator's {intr.n // 2} f32 per thread, per warp "
            f"{' x '.join(f'{d.name}({d.size})' for d in lay.ordered_dims())}, "
            f"{len(self.epilogue.runs)} stores of {self.epilogue.runs[0].length}{self.epilogue.pairs_note}"
        )
        return lines


def plan_wgmma(
    problem: Contraction, cfg: KernelConfig, target: Target, intr: WarpgroupIntrinsic, c_extents: Extents
) -> WgmmaPlan:
    validate_warpgroup(cfg, target, problem, intr)
    threads = cfg.compute_threads  # (the producer warpgroup copies nothing by cp.async)
    ops = []
    offset = 0
    split = allocations(intr) > 1
    for i, (name, mn) in enumerate((("A", cfg.tile_m), ("B", cfg.tile_n))):
        smem = operand_layout(
            name,
            problem,
            mn,
            intr.element_type(name),
            k_atoms_fastest=cfg.copy == "tma-wide" and not k_innermost(problem, name),
        )
        rows, cols = (mn, smem.k) if smem.major is Major.K else (smem.k, mn)
        chunks = smem.bytes // CHUNK_BYTES
        if chunks % threads and cfg.copy not in TMA_COPIES:  # (validate_warpgroup refuses it: TMA boxes only)
            raise UnsupportedError(f"{intr.name}: {name}'s tile is not a whole number of 16-byte chunks per thread")
        ops.append(
            WgmmaOperand(
                name,
                smem,
                0 if split else offset,
                rows,
                cols,
                chunks // threads,
                allocation=i if split else 0,
                slot_stride=_round(smem.bytes) if split else slot_bytes(cfg, intr.a_type),
            )
        )
        offset += _round(smem.bytes)
    lay = warp_c_layout(intr.n)
    runs = tuple(lay.runs(COL))
    bounded = tuple(c_extents.bounded()[-2:])
    if bounded[1] and any(c_extents.multiple(-1) % r.length or r.col % r.length for r in runs):
        runs = tuple(Run(e, 1, *lay.element_offsets()[e]) for e in range(lay.elements))  # may straddle N
    pairs = lane_pairs(
        lay,
        runs,
        intr.m,
        intr.n,
        problem.stored_type,
        c_extents,
        target.vendor,
        problem.c.offset,
        bool(problem.epilogue_ops),
    )
    epi = EpiloguePlan(lay, runs, bounded, tuple(problem.epilogue_ops), problem.stored_type, c_extents, *(pairs or ()))
    tk = tile_k(intr.a_type)
    tiles = {"m": cfg.tile_m, "n": cfg.tile_n, "k": tk, "batch": 1}
    dynamic = []
    for d in problem.dynamic:
        div, tile = d.divisor, tiles[d.dim]
        promise = f"a multiple of {div}" if div > 1 else "no divisibility promise"
        bounds = (
            "whole tiles, unchecked"
            if div % tile == 0
            else (
                f"K tiles: ceil(K / {tk}), the last zero-filled past K"
                if d.dim == "k"
                else "one workgroup per tile"
                if d.dim == "batch"
                else "partial tiles bounded"
            )
        )
        dynamic.append(f"{d.dim.upper()} ({promise}: {bounds})")
    lag = 0 if intr.a_type in FP8 and not WgmmaPlan.fp8_pair_tiles else 1 if cfg.stages >= 3 else 0  # (wgmma_lag)
    kind = (
        "one stage, wait 0 per K tile"
        if cfg.stages == 1
        else f"a {cfg.stages}-slot {'TMA' if cfg.copy else 'cp.async'} ring, wait_group {lag} per K tile"
    )
    tma = None
    if cfg.copy in TMA_COPIES:
        tma = plan_tma(
            ops[0].smem,
            ops[1].smem,
            cfg.stages * slot_bytes(cfg, intr.a_type),
            cfg.stages,
            cfg.compute_threads if cfg.producer else None,
            cfg.cluster,
        )
    notes = (f"{intr.name}: the warpgroup-MMA kernel ({kind})",)
    if problem.same_ab:
        notes += (same_tensor_note(problem),)
    return WgmmaPlan(
        intr,
        target.vendor,
        WARP,
        cfg.workgroup_size,
        cfg.tile_m // 64,
        ops[0],
        ops[1],
        tk,
        tk // intr.k,
        None if problem.k is None else -(-problem.k // tk) // cfg.split_k,
        plan_bytes(cfg, intr.a_type, allocations(intr)),
        epi,
        notes,
        cfg.stages,
        slot_bytes(cfg, intr.a_type),
        dynamic=tuple(dynamic),
        allocations=allocations(intr),
        tma=tma,
        persistent=cfg.persistent,
        raster=cfg.raster,
        split_k=cfg.split_k,
        tile_grid=(0, 0) if problem.is_dynamic else (-(-problem.n // cfg.tile_n), -(-problem.m // cfg.tile_m)),
        batch=problem.batch or 1,
    )


__all__ = ["WARPGROUP", "warpgroup_config", "validate_warpgroup", "plan_wgmma", "WgmmaPlan", "warp_c_layout"]
