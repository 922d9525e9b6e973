"""Run one handed-back dispatch (hal.executable IR) on the lane executor.

The grid comes from the executable's ``iree_codegen.dispatch_config``, the workgroup and wave
size from the function's ``translation_info``, the architecture from the variant's target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from iree.compiler import ir

from .executor import ExecutorError, Kernel, Stats


@dataclass
class Dispatch:
    func: ir.Operation
    arch: str
    grid: tuple[int, int, int]
    workgroup_size: int
    wave_size: int
    bindings: dict  # binding index -> (shape, MLIR element type, read_only)


def _walk(op):
    yield op
    for r in op.regions:
        for b in r.blocks:
            for o in b.operations:
                yield from _walk(o.operation)


def load_dispatch(module: ir.Module) -> Dispatch:
    ops = list(_walk(module.operation))
    variants = [o for o in ops if o.name == "hal.executable.variant"]
    if len(variants) != 1:
        raise ExecutorError(f"expected one hal.executable.variant, found {len(variants)}")
    m = re.search(r'arch = "([^"]+)"', str(variants[0].attributes["target"]))
    if not m:
        raise ExecutorError("the executable's target has no arch")
    funcs = [o for o in ops if o.name == "func.func" and "translation_info" in o.attributes]
    if len(funcs) != 1:
        raise ExecutorError("expected one dispatch function with translation_info")
    func = funcs[0]
    ti = str(func.attributes["translation_info"])
    wg = re.search(r"workgroup_size = \[(\d+), (\d+), (\d+)\]", ti)
    sg = re.search(r"subgroup_size = (\d+)", ti)
    if not wg or not sg or "no_pipeline" not in ti:
        raise ExecutorError(f"the function is not handed-back code (translation_info: {ti})")
    if wg.group(2) != "1" or wg.group(3) != "1":
        raise ExecutorError("the executor supports 1-D workgroups")
    configs = [o for o in ops if o.name == "iree_codegen.dispatch_config"]
    if len(configs) != 1:
        raise ExecutorError("expected one iree_codegen.dispatch_config")
    consts = {}
    grid = None
    for o in configs[0].regions[0].blocks[0].operations:
        o = o.operation
        if o.name == "arith.constant":
            consts[o.results[0]] = ir.IntegerAttr(o.attributes["value"]).value
        elif o.name == "iree_codegen.yield":
            try:
                grid = tuple(consts[v] for v in o.operands)
            except KeyError:
                raise ExecutorError("the executor needs a constant grid (dynamic grids are not supported yet)") from None
        else:
            raise ExecutorError(f"unsupported op {o.name} in dispatch_config")
    bindings = {}
    for o in _walk(func):
        if o.name == "hal.interface.binding.subspan":
            mt = ir.MemRefType(o.results[0].type)
            flags = str(o.attributes["descriptor_flags"]) if "descriptor_flags" in o.attributes else ""
            bindings[ir.IntegerAttr(o.attributes["binding"]).value] = (
                tuple(mt.shape), str(mt.element_type), "ReadOnly" in flags or flags.strip().startswith("1"))
    return Dispatch(func, m.group(1), grid, int(wg.group(1)), int(sg.group(1)), bindings)


def run_dispatch(d: Dispatch, buffers: dict[int, np.ndarray], *, max_lanes: int = 1 << 14) -> tuple[Stats, dict]:
    """Execute ``d`` over its grid on ``buffers`` (modified in place); return stats and the
    per-binding masks of elements the kernel stored."""
    k = Kernel(d.func, arch=d.arch, grid=d.grid, workgroup_size=d.workgroup_size, wave_size=d.wave_size)
    stats = k.run(buffers, max_lanes=max_lanes)
    return stats, k.written


@dataclass
class SimResult:
    check: object  # numerics.Check
    stats: Stats
    out: np.ndarray
    ref: np.ndarray


def check_matmul(module: ir.Module, problem: dict, *, seed: int = 0, max_lanes: int = 1 << 14,
                 exact: bool = False, epilogue=None) -> SimResult:
    """Run a handed-back matmul dispatch on random inputs and compare with numpy.

    ``problem`` is the dictionary the select stage recorded (``mmaflow.problem``): shapes, element
    types, transposition, signedness and binding indices. ``exact``: small-integer inputs whose
    dot products are exact in the output type, compared with zero tolerance (falls back to
    random data when K is too large for exactness). A dispatch with a fused epilogue needs its
    numpy reference, ``epilogue`` (a ``numerics.EpilogueReference``); its extra inputs are random
    in [-1, 1] (small integers when ``exact``).
    """
    from . import numerics as num
    d = load_dispatch(module)
    if not problem.get("bindings"):
        raise ExecutorError("the dispatch does not record which bindings hold A, B and C")
    extra = problem.get("epilogue_ops") or []
    if extra and epilogue is None:
        raise ExecutorError(f"the dispatch has a fused epilogue ({' '.join(extra)}): pass its numpy reference")
    if epilogue is not None and not extra:
        raise ExecutorError("an epilogue reference was given but the dispatch has no epilogue")
    ba, bb, bc = problem["bindings"]
    m, n, k, batch = problem["m"], problem["n"], problem["k"], problem["batch"]
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch > 1 else ()
    a_shape = lead + ((k, m) if problem["a_transposed"] else (m, k))
    b_shape = lead + ((n, k) if problem["b_transposed"] else (k, n))
    acc_t = problem["c_type"]
    out_t = problem.get("out_type") or acc_t
    lim = 1 if problem["a_type"] == "bf16" else 2
    exact = exact and acc_t != "i32" and k * lim * lim < num.exact_integer_limit(acc_t)
    a = num.random_matrix(rng, a_shape, problem["a_type"], unsigned=problem["unsigned_a"], small_integers=exact)
    b = num.random_matrix(rng, b_shape, problem["b_type"], unsigned=problem["unsigned_b"], small_integers=exact)
    c = np.zeros(lead + (m, n), num.DTYPES[out_t])
    buffers = {ba: a, bb: b, bc: c}
    extras = []
    for e in problem.get("epilogue") or []:
        x = num.random_matrix(rng, tuple(e["shape"]), e["type"], small_integers=exact)
        buffers[e["binding"]] = x
        extras.append(x)
    for idx, arr in buffers.items():
        shape, elem, _ = d.bindings[idx]
        if int(np.prod(shape)) != arr.size or num.DTYPES[elem] != arr.dtype:
            raise ExecutorError(f"binding {idx} is memref<{shape}x{elem}>, expected {arr.shape} {arr.dtype}")
    stats, written = run_dispatch(d, buffers, max_lanes=max_lanes)
    a_log = np.swapaxes(a, -1, -2) if problem["a_transposed"] else a
    b_log = np.swapaxes(b, -1, -2) if problem["b_transposed"] else b
    ref, tol = num.matmul_reference(a_log, b_log, acc_t, unsigned_a=problem["unsigned_a"],
                                    unsigned_b=problem["unsigned_b"])
    if epilogue is not None:
        ref, tol = num.epilogue_reference(ref, tol, extras, epilogue, out_t)
    if exact:
        tol = np.zeros_like(tol)
    wmask = written.get(bc, np.zeros(c.size, bool)).reshape(c.shape)
    return SimResult(num.compare(c, ref, tol, written=wmask, out_type=out_t), stats, c, ref)
