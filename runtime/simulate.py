"""Run handed-back dispatches (hal.executable IR) on the lane executor, with their tensors where
IREE would put them.

The grid comes from the executable's ``iree_codegen.dispatch_config``, the workgroup and wave
size from the function's ``translation_info``, the architecture from the variant's target.

Memory is laid out as in a real run: every binding is a byte buffer, each tensor sits at its
subspan's byte offset, and every byte no tensor occupies holds a sentinel (0xFF: NaN in every
16- and 32-bit float type). After the run the check requires that the output was written in
full and that no byte outside the output changed -- inputs and sentinels alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import iree_codegen

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.mlir import executable_target, ops_named
from mmaflow.runtime.executor import ExecutorError, Kernel, Stats, cluster_shape, whole_clusters

SENTINEL = 0xFF
GUARD = 64  # sentinel bytes after the last tensor of every binding


@dataclass
class Dispatch:
    func: ir.Operation
    arch: str
    config: ir.Operation  # the iree_codegen.dispatch_config computing the grid
    workgroup_size: int
    wave_size: int

    def grid(self, workload: list[int] | None = None) -> tuple[int, int, int]:
        """Evaluate the dispatch_config region (device, then the workload values)."""
        block = self.config.regions[0].blocks[0]
        workload = list(workload or [])
        if len(workload) != len(list(block.arguments)) - 1:
            raise ExecutorError(
                f"the grid takes {len(list(block.arguments)) - 1} workload values, {len(workload)} given"
            )
        return _evaluate(block, [None, *workload], "iree_codegen.yield")


_INDEX_OPS = {
    "arith.ceildivui": lambda a, b: -(-a // b),
    "arith.divui": lambda a, b: a // b,
    "arith.remui": lambda a, b: a % b,
    "arith.addi": lambda a, b: a + b,
    "arith.muli": lambda a, b: a * b,
    "arith.subi": lambda a, b: a - b,
    "arith.maxui": max,
    "arith.minui": min,
    "arith.andi": lambda a, b: a & b,
    "arith.select": lambda c, a, b: a if c else b,
}


def _evaluate(block: ir.Block, args: list, terminator: str) -> tuple:
    """The values ``block`` (a dispatch_config's grid, an export's condition: index arithmetic on
    the workload) yields at ``terminator`` for its arguments ``args`` (the device's unused)."""
    env = dict(zip(block.arguments, args))
    for o in block.operations:
        o = o.operation
        if o.name == "arith.constant":
            env[o.results[0]] = ir.IntegerAttr(o.attributes["value"]).value
        elif o.name == "arith.cmpi":  # a version's test (stage `version`): eq, ne, ule
            pred = ir.IntegerAttr(o.attributes["predicate"]).value
            if pred not in _CMPI:
                raise ExecutorError(f"unsupported arith.cmpi predicate {pred} in {terminator}'s region")
            a, b = (env[v] for v in o.operands)
            env[o.results[0]] = int(_CMPI[pred](a, b))
        elif o.name in _INDEX_OPS:
            env[o.results[0]] = _INDEX_OPS[o.name](*(env[v] for v in o.operands))
        elif o.name == terminator:
            return tuple(env[v] for v in o.operands)
        else:
            raise ExecutorError(f"unsupported op {o.name} in {terminator}'s region")
    raise ExecutorError(f"the region does not end in {terminator}")


# arith.cmpi predicates a grid's test uses (MLIR's arith::CmpIPredicate numbering), on the
# workload's non-negative index values
_CMPI = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 7: lambda a, b: a <= b}


def load_dispatch(module: ir.Module, workload: list[int] | None = None) -> Dispatch:
    """The handed-back dispatch of ``module``. A dispatch with versions (stage `version`: an export
    each, the first with a ``condition`` on the workload and a ``fallback``) runs the kernel whose
    export the ``workload`` selects, as IREE's host does: the condition of the export the host
    dispatches, then its fallback's, and so on."""
    variants = ops_named(module.operation, "hal.executable.variant")
    if len(variants) != 1:
        raise ExecutorError(f"expected one hal.executable.variant, found {len(variants)}")
    _, arch = executable_target(variants[0].attributes["target"])
    if arch is None:
        raise ExecutorError("the executable's target has no GPU architecture")
    funcs = {
        ir.StringAttr(f.attributes["sym_name"]).value: f
        for f in ops_named(module.operation, "func.func")
        if "translation_info" in f.attributes
    }
    if not funcs:
        raise ExecutorError("expected a dispatch function with translation_info")
    name = next(iter(funcs)) if len(funcs) == 1 else _selected_export(variants[0], workload)
    if name not in funcs:
        raise ExecutorError(f"the export @{name} has no function with translation_info")
    func = funcs[name]
    ti = iree_codegen.TranslationInfoAttr(func.attributes["translation_info"])
    if not iree_codegen.NoPipelineAttr.isinstance(ti.pass_pipeline) or not ti.workgroup_size:
        raise ExecutorError(f"the function is not handed-back code (translation_info: {ti})")
    wg = list(ti.workgroup_size)
    if wg[1:] != [1, 1]:
        raise ExecutorError("the executor supports 1-D workgroups")
    configs = [
        c
        for c in ops_named(module.operation, "iree_codegen.dispatch_config")
        if ir.FlatSymbolRefAttr(c.attributes["function_ref"]).value == name
    ]
    if len(configs) != 1:
        raise ExecutorError(f"expected one iree_codegen.dispatch_config of @{name}")
    return Dispatch(func, arch, configs[0], wg[0], ti.subgroup_size)


def _selected_export(variant: ir.Operation, workload: list[int] | None) -> str:
    """The export a dispatch of ``variant`` runs at ``workload``: the one no other falls back to
    (the host's), its ``condition`` evaluated, else its ``fallback``'s, ... (IREE's rule)."""
    exports = {ir.StringAttr(e.attributes["sym_name"]).value: e for e in ops_named(variant, "hal.executable.export")}
    targets = {
        ir.FlatSymbolRefAttr(e.attributes["condition_fallback"]).value
        for e in exports.values()
        if "condition_fallback" in e.attributes
    }
    roots = [n for n in exports if n not in targets]
    if len(roots) != 1:
        raise ExecutorError(f"expected one export no other falls back to, found {len(roots)}: {roots}")
    name = roots[0]
    if workload is None:
        raise ExecutorError("a dispatch of several exports (stage `version`): its workload selects the kernel")
    while "condition_fallback" in exports[name].attributes:
        block = exports[name].regions[1].blocks[0]
        if len(list(block.arguments)) != len(workload) + 1:
            raise ExecutorError(f"@{name}'s condition takes {len(list(block.arguments)) - 1} workload values")
        if _evaluate(block, [None, *workload], "hal.return")[0]:
            return name
        name = ir.FlatSymbolRefAttr(exports[name].attributes["condition_fallback"]).value
    return name


def run_dispatch(
    d: Dispatch,
    buffers: dict[int, np.ndarray],
    *,
    max_lanes: int = 1 << 14,
    constants: list[int] | None = None,
    workload: list[int] | None = None,
    workgroups=None,
    progress=None,
) -> tuple[Stats, dict]:
    """Execute ``d`` over its grid (or the linear workgroup ids ``workgroups``) on ``buffers``
    (modified in place; with thread block clusters the executor runs the whole clusters of
    ``workgroups``: ``whole_clusters``); return stats and, per binding, which bytes the kernel stored. A
    dispatch with push constants (dynamic sizes, run-time offsets) takes them as ``constants``,
    its grid's ``workload`` too (see ``dynamic_inputs``)."""
    k = Kernel(
        d.func,
        arch=d.arch,
        grid=d.grid(workload),
        workgroup_size=d.workgroup_size,
        wave_size=d.wave_size,
        constants=constants,
    )
    stats = k.run(buffers, max_lanes=max_lanes, workgroups=workgroups, progress=progress)
    return stats, k.written


def dynamic_inputs(problem, sizes: dict) -> tuple[list[int], list[int]]:
    """(push constants, workload) that give a dispatch its dynamic sizes, as IREE's host does:
    each size at its workload ordinal and as (low, high) 32-bit push constants."""
    constants, workload = {}, {}
    for d in problem.dynamic:
        if d.dim not in sizes:
            raise ExecutorError(f"the dispatch has a dynamic {d.dim}: give its size")
        v = int(sizes[d.dim])
        if v < 0:
            raise ExecutorError(f"{d.dim} = {v}: sizes are not negative")
        for o, (lo, hi) in zip(d.ordinals, d.constants):
            constants[lo] = v & 0xFFFFFFFF
            if hi >= 0:
                constants[hi] = v >> 32
            elif v >> 32:
                raise ExecutorError(f"{d.dim} = {v} does not fit its 32-bit push constant")
            workload[o] = v
    if sorted(workload) != list(range(len(workload))):
        raise ExecutorError(f"the workload ordinals {sorted(workload)} are not 0..{len(workload) - 1}")
    n = max(constants) + 1 if constants else 0
    return [constants.get(i, 0) for i in range(n)], [workload[i] for i in range(len(workload))]


# ---- memory with tensors at their offsets --------------------------------------------------------
@dataclass(frozen=True)
class Region:
    """A tensor inside a binding: where it starts (bytes) and what it holds."""

    binding: int
    start: int
    dtype: np.dtype
    shape: tuple
    name: str = field(default="", compare=False)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    @property
    def end(self) -> int:
        return self.start + self.nbytes


@dataclass
class Memory:
    """Byte buffers for a dispatch's bindings: tensors placed at their regions, sentinel bytes
    everywhere else (and ``GUARD`` bytes past the last tensor of each binding)."""

    regions: list = field(default_factory=list)
    data: dict = field(default_factory=dict)  # Region -> the array placed there (inputs)

    def place(self, region: Region, array: np.ndarray | None = None) -> None:
        for r in self.regions:
            if r.binding == region.binding and r.start < region.end and region.start < r.end:
                if r == region:
                    if array is not None and r in self.data and not np.array_equal(self.data[r], array):
                        raise ExecutorError(f"{r.name} and {region.name} are one tensor given two values")
                    break
                raise ExecutorError(
                    f"{region.name} (binding {region.binding} bytes {region.start}..{region.end}) "
                    f"overlaps {r.name} (bytes {r.start}..{r.end})"
                )
        else:
            self.regions.append(region)
        if array is not None:
            if array.dtype != region.dtype or tuple(array.shape) != tuple(region.shape):
                raise ExecutorError(f"{region.name} is {region.shape} {region.dtype}, got {array.shape} {array.dtype}")
            self.data[region] = np.ascontiguousarray(array)

    def buffers(self) -> dict[int, np.ndarray]:
        out = {}
        for b in sorted({r.binding for r in self.regions}):
            end = max(r.end for r in self.regions if r.binding == b)
            buf = np.full(-(-(end + GUARD) // 16) * 16, SENTINEL, np.uint8)
            out[b] = buf
        for r, array in self.data.items():
            out[r.binding][r.start : r.end] = array.reshape(-1).view(np.uint8)
        return out

    @staticmethod
    def read(buffers: dict, region: Region) -> np.ndarray:
        return buffers[region.binding][region.start : region.end].view(region.dtype).reshape(region.shape).copy()

    @staticmethod
    def changed_outside(before: dict, after: dict, outputs: list[Region]) -> list[str]:
        """Bytes the kernel changed outside its outputs (clobbered inputs or sentinels)."""
        problems = []
        for b, buf in after.items():
            diff = buf != before[b]
            for r in outputs:
                if r.binding == b:
                    diff[r.start : r.end] = False
            if diff.any():
                where = np.flatnonzero(diff)
                problems.append(
                    f"binding {b}: {where.size} bytes outside the output changed "
                    f"(bytes {int(where[0])}..{int(where[-1])})"
                )
        return problems


def written_elements(written: dict, region: Region) -> np.ndarray:
    """Which elements of ``region`` the kernel stored (every byte of each)."""
    mask = written.get(region.binding)
    if mask is None:
        return np.zeros(region.shape, bool)
    return mask[region.start : region.end].reshape(-1, region.dtype.itemsize).all(axis=1).reshape(region.shape)


def sample_workgroups(grid: tuple, count: int, seed: int) -> list[int]:
    """A sample of linear workgroup ids: the corners of the grid (first and last tile in every
    dimension: the partial tiles of unaligned shapes sit there) plus random ones."""
    gx, gy, gz = grid
    total = gx * gy * gz
    if count <= 0 or count >= total:
        return list(range(total))
    corners = {x + gx * (y + gy * z) for x in {0, gx - 1} for y in {0, gy - 1} for z in {0, gz - 1}}
    rng = np.random.default_rng(seed)
    rest = [i for i in rng.permutation(total).tolist() if i not in corners]
    return sorted(list(corners) + rest[: max(0, count - len(corners))])


@dataclass
class SimResult:
    check: object  # numerics.Check
    stats: Stats
    out: np.ndarray
    ref: np.ndarray
    workgroups: int = 0  # how many workgroups ran (all of them unless sampled)
    grid: tuple = ()
    config: object = None  # the KernelConfig that ran (a versioned dispatch's: the one its sizes chose)
    # The verdict against numerics.matmul_reference's accumulation bound (the bench's check on the
    # GPU). The same as ``check`` except for the fp8 wgmma kernel, whose ``check`` is against the
    # modelled hardware arithmetic (numerics.fp8_tensor_core_reference), bit for bit.
    bound_check: object = None


def tile_mask(
    shape: tuple,
    grid: tuple,
    workgroups: list[int] | None,
    tile_m: int,
    tile_n: int,
    split_k: int = 1,
    raster: int = 1,
    persistent: int | None = None,
    cluster: int = 1,
) -> np.ndarray:
    """Which output elements the workgroups ``workgroups`` own (all when None), as the kernel maps
    its workgroup ids to tiles (written here from the kernels' documented order, not imported):
    workgroup (x, y, z) takes tile column x // split_k (split-K: ``split_k`` workgroups per tile
    along x, a cluster storing it together), tile row y, batch item z; ``raster`` > 1 walks the
    tiles in groups of that many tile rows, column by column within a group (the last group may be
    short); ``persistent`` W: workgroup x runs tiles x, x + G, ... (W of them, G workgroups), each
    tile index split into batch item and tile, in clusters of ``cluster`` tile rows of one column."""
    if workgroups is None:
        return np.ones(shape, bool)
    if len(shape) == 1:  # a unit M IREE dropped: one row
        return tile_mask((1,) + tuple(shape), grid, workgroups, tile_m, tile_n, split_k, raster, persistent, cluster)[0]
    gx, gy, _ = grid
    mask = np.zeros(shape, bool)
    view = mask.reshape((-1,) + tuple(shape[-2:]))

    def rastered(lin: int, cols: int, rows: int) -> tuple[int, int]:  # (tile row, tile column)
        first = lin // (cols * raster) * raster
        size = min(rows - first, raster)
        within = lin % (cols * raster)
        return first + within % size, within // size

    def own(z: int, row: int, col: int) -> None:
        view[z if view.shape[0] > 1 else 0, row * tile_m : (row + 1) * tile_m, col * tile_n : (col + 1) * tile_n] = True

    if persistent:
        cols, rows = -(-shape[-1] // tile_n), -(-shape[-2] // tile_m)
        for w in workgroups:
            for j in range(persistent):
                z, t = divmod(w + j * gx, cols * rows)
                q, col = rastered(t // cluster, cols, rows // cluster)
                own(z, q * cluster + t % cluster, col)
        return mask
    cols = gx // split_k
    for w in workgroups:
        x, y, z = w % gx // split_k, (w // gx) % gy, w // (gx * gy)
        own(z, *rastered(y * cols + x, cols, gy))  # (raster 1: row y, column x)
    return mask


def ownership(cfg) -> tuple:
    """``tile_mask``'s arguments after the grid and workgroups, from a kernel's config."""
    return cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.raster, cfg.persistent, cfg.cluster


def check_matmul(
    module: ir.Module,
    *,
    seed: int = 0,
    max_lanes: int = 1 << 14,
    exact: bool = False,
    epilogue=None,
    sizes: dict | None = None,
    sample: int = 0,
    workgroups: list[int] | None = None,
) -> SimResult:
    """Run a handed-back matmul dispatch on random inputs and compare with numpy.

    The problem is what `select` recorded on the dispatch (``mmaflow.problem``): shapes, element
    types, transposition, signedness and where each tensor lives. ``exact``: small-integer
    inputs whose dot products are exact in the output type, compared with zero tolerance
    (random data when K is too large for exactness). A dispatch with a fused epilogue needs its
    numpy reference, ``epilogue`` (a ``numerics.EpilogueReference``); its extra inputs are random
    in [-1, 1] (small integers when ``exact``). ``sizes``: the run-time size of each dynamic
    dimension ("m", "n", "k", "batch"). ``sample``: run only that many workgroups (the grid's
    corners and random ones) and check the tiles they own; ``workgroups``: those linear ids instead
    (`mmaflow tune`'s static counters run workgroup 0, a full tile).
    """
    from mmaflow.runtime import numerics as num

    problem = attrs.read_problem(attrs.dispatch_func(module.operation))
    extra = problem.epilogue_ops
    if extra and epilogue is None:
        raise ExecutorError(f"the dispatch has a fused epilogue ({' '.join(extra)}): pass its numpy reference")
    if epilogue is not None and not extra:
        raise ExecutorError("an epilogue reference was given but the dispatch has no epilogue")
    sizes = dict(sizes or {})
    dyn = {x.dim for x in problem.dynamic}
    if set(sizes) - dyn:
        raise ExecutorError(f"sizes given for static dimensions: {sorted(set(sizes) - dyn)}")
    constants, workload = dynamic_inputs(problem, sizes)
    d = load_dispatch(module, workload)  # a versioned dispatch: the kernel its export's condition selects
    cfg = attrs.read_config(d.func)
    m, n, k, batch = (getattr(problem, x) if x not in dyn else sizes[x] for x in ("m", "n", "k", "batch"))
    rng = np.random.default_rng(seed)
    lead = (batch,) if problem.batched else ()
    a_shape = lead + ((k, m) if problem.a_transposed else (m, k))
    b_shape = lead + ((n, k) if problem.b_transposed else (k, n))
    acc_t, out_t = problem.c_type, problem.stored_type
    lim = 1 if problem.a_type == "bf16" else 2
    exact = exact and acc_t != "i32" and k * lim * lim < num.exact_integer_limit(acc_t)
    a = num.random_matrix(rng, a_shape, problem.a_type, unsigned=problem.unsigned_a, small_integers=exact)
    b = (
        a
        if problem.same_ab
        else num.random_matrix(rng, b_shape, problem.b_type, unsigned=problem.unsigned_b, small_integers=exact)
    )
    if problem.same_ab and a_shape != b_shape:
        raise ExecutorError(f"one tensor is both A {a_shape} and B {b_shape}")
    mem = Memory()

    def region(at, dtype: str, shape, name) -> Region:
        if at.offset is None:
            raise ExecutorError(
                f"{name} lives at a run-time offset; check the dispatch within its module "
                f"(mmaflow run MODEL.mlir --device sim)"
            )
        return Region(at.binding, at.offset, num.DTYPES[dtype], tuple(shape), name)

    mem.place(region(problem.a, problem.a_type, a_shape, "A"), a)
    mem.place(region(problem.b, problem.b_type, b_shape, "B"), b)
    extent = {"b": batch, "m": m, "n": n}
    extras = []
    for i, e in enumerate(problem.epilogue):
        x = num.random_matrix(rng, tuple(extent[dd] for dd in e.dims), e.type, small_integers=exact)
        mem.place(region(e.at, e.type, x.shape, f"epilogue input {i}"), x)
        extras.append(x)
    c_region = region(problem.c, out_t, lead + (m, n), "C")
    mem.place(c_region)
    buffers = mem.buffers()
    before = {bb: buf.copy() for bb, buf in buffers.items()}
    grid = d.grid(workload)
    chosen = sample_workgroups(grid, sample, seed) if sample else None
    if workgroups is not None:
        total = int(np.prod(grid))
        if sample or not workgroups or not all(0 <= w < total for w in workgroups):
            raise ExecutorError(f"workgroups {workgroups}: ids in [0, {total}), and not with sample")
        chosen = sorted(set(workgroups))
    if chosen is not None:  # a cluster runs whole (Kernel.run): its every workgroup's tile is checked
        chosen = whole_clusters(chosen, grid, cluster_shape(d.func))
    stats, written = run_dispatch(
        d, buffers, max_lanes=max_lanes, constants=constants, workload=workload, workgroups=chosen
    )
    c = Memory.read(buffers, c_region)
    a_log = np.swapaxes(a, -1, -2) if problem.a_transposed else a
    b_log = np.swapaxes(b, -1, -2) if problem.b_transposed else b
    # (read from the kernel's IR, not the compiler's records: an MFMA that rounds its inputs to xf32)
    xf32 = any("reducePrecision" in op.attributes for op in ops_named(d.func, "amdgpu.mfma"))
    ref, tol = num.matmul_reference(
        a_log,
        b_log,
        acc_t,
        unsigned_a=problem.unsigned_a,
        unsigned_b=problem.unsigned_b,
        input_roundoff=num.XF32_INPUT_ROUNDOFF if xf32 else 0.0,
    )
    hw_ref = None
    if fp8_tensor_core(cfg, problem):
        # Hopper's fp8 wgmma does not accumulate in f32 (runtime/isa/wgmma.py, measured): the kernel
        # promotes each K tile's partial to f32, and the executor must reproduce that arithmetic
        # exactly (a kernel that promotes otherwise, or not at all, differs by far more than f32 ulps).
        hw_ref = num.fp8_tensor_core_reference(a_log, b_log, cfg.tile_k, split=cfg.split_k).astype(np.float64)
    owned = tile_mask(c.shape, grid, chosen, *ownership(cfg))
    wmask = written_elements(written, c_region)
    checks = []
    for r, t in [(ref, tol)] if hw_ref is None else [(ref, tol), (hw_ref, np.zeros_like(tol))]:
        if epilogue is not None:
            r, t = num.epilogue_reference(r, t, extras, epilogue, out_t)
        if exact:
            t = np.zeros_like(t)
        checks.append(num.compare(c[owned], r[owned], t[owned], written=wmask[owned], out_type=out_t))
    bound_check, check = checks[0], checks[-1]
    if hw_ref is not None:
        check.detail += " (against the modelled fp8 tensor-core arithmetic, per-K-tile promotion)"
    stray = int((wmask & ~owned).sum())
    clobbered = Memory.changed_outside(before, buffers, [c_region])
    if stray or clobbered:
        check.passed = False
        check.detail += "".join(f"; {p}" for p in clobbered)
        if stray:
            check.detail += f"; {stray} output elements written by workgroups that do not own them"
    return SimResult(
        check, stats, c, ref, len(chosen) if chosen is not None else int(np.prod(grid)), grid, cfg, bound_check
    )


def fp8_tensor_core(cfg, problem) -> bool:
    """Whether the dispatch's kernel is Hopper's fp8 wgmma kernel (8-bit float inputs on a
    ``WGMMA_`` intrinsic), whose accumulation the ISA model gives as measured, not as f32."""
    return (
        str(getattr(cfg, "intrinsic", "") or "").startswith("WGMMA_")
        and problem.a_type in ("f8E4M3FN", "f8E5M2")
        and problem.c_type == "f32"
    )
