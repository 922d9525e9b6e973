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
    config: ir.Operation  # the iree_codegen.dispatch_config computing the grid
    workgroup_size: int
    wave_size: int
    bindings: dict  # binding index -> (shape (None where dynamic), MLIR element type, read_only)

    def grid(self, workload: list[int] | None = None) -> tuple[int, int, int]:
        """Evaluate the dispatch_config region (device, then the workload values)."""
        block = self.config.regions[0].blocks[0]
        args = list(block.arguments)[1:]
        workload = list(workload or [])
        if len(workload) != len(args):
            raise ExecutorError(f"the grid takes {len(args)} workload values, {len(workload)} given")
        env = dict(zip(args, workload))
        ops = {"arith.ceildivui": lambda a, b: -(-a // b), "arith.divui": lambda a, b: a // b,
               "arith.addi": lambda a, b: a + b, "arith.muli": lambda a, b: a * b,
               "arith.subi": lambda a, b: a - b, "arith.maxui": max, "arith.minui": min}
        for o in block.operations:
            o = o.operation
            if o.name == "arith.constant":
                env[o.results[0]] = ir.IntegerAttr(o.attributes["value"]).value
            elif o.name in ops:
                env[o.results[0]] = ops[o.name](*(env[v] for v in o.operands))
            elif o.name == "iree_codegen.yield":
                return tuple(env[v] for v in o.operands)
            else:
                raise ExecutorError(f"unsupported op {o.name} in dispatch_config")
        raise ExecutorError("the dispatch_config region does not yield")


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
    bindings = {}
    for o in _walk(func):
        if o.name == "hal.interface.binding.subspan":
            mt = ir.MemRefType(o.results[0].type)
            flags = str(o.attributes["descriptor_flags"]) if "descriptor_flags" in o.attributes else ""
            shape = tuple(None if ir.ShapedType.is_dynamic_size(x) else x for x in mt.shape)
            bindings[ir.IntegerAttr(o.attributes["binding"]).value] = (
                shape, str(mt.element_type), "ReadOnly" in flags or flags.strip().startswith("1"))
    return Dispatch(func, m.group(1), configs[0], int(wg.group(1)), int(sg.group(1)), bindings)


def run_dispatch(d: Dispatch, buffers: dict[int, np.ndarray], *, max_lanes: int = 1 << 14,
                 constants: list[int] | None = None, workload: list[int] | None = None) -> tuple[Stats, dict]:
    """Execute ``d`` over its grid on ``buffers`` (modified in place); return stats and the
    per-binding masks of elements the kernel stored. A dispatch with dynamic sizes takes them as
    push ``constants`` and the grid's ``workload`` (see ``dynamic_inputs``)."""
    k = Kernel(d.func, arch=d.arch, grid=d.grid(workload), workgroup_size=d.workgroup_size,
               wave_size=d.wave_size, constants=constants)
    stats = k.run(buffers, max_lanes=max_lanes)
    return stats, k.written


def dynamic_inputs(problem: dict, sizes: dict) -> tuple[list[int], list[int]]:
    """(push constants, workload) that give a dispatch its dynamic sizes, as IREE's host does:
    each size at its workload ordinal and as (low, high) 32-bit push constants."""
    constants, workload = {}, {}
    for d in problem.get("dynamic") or []:
        if d["dim"] not in sizes:
            raise ExecutorError(f"the dispatch has a dynamic {d['dim']}: give its size")
        v = int(sizes[d["dim"]])
        for o, (lo, hi) in zip(d["ordinals"], d["constants"]):
            constants[lo] = v & 0xFFFFFFFF
            if hi is not None:
                constants[hi] = v >> 32
            elif v >> 32:
                raise ExecutorError(f"{d['dim']} = {v} does not fit its 32-bit push constant")
            workload[o] = v
    if sorted(workload) != list(range(len(workload))):
        raise ExecutorError(f"the workload ordinals {sorted(workload)} are not 0..{len(workload) - 1}")
    n = max(constants) + 1 if constants else 0
    return [constants.get(i, 0) for i in range(n)], [workload[i] for i in range(len(workload))]


@dataclass
class SimResult:
    check: object  # numerics.Check
    stats: Stats
    out: np.ndarray
    ref: np.ndarray


def check_matmul(module: ir.Module, problem: dict, *, seed: int = 0, max_lanes: int = 1 << 14,
                 exact: bool = False, epilogue=None, sizes: dict | None = None) -> SimResult:
    """Run a handed-back matmul dispatch on random inputs and compare with numpy.

    ``problem`` is the dictionary the select stage recorded (``mmaflow.problem``): shapes, element
    types, transposition, signedness and binding indices. ``exact``: small-integer inputs whose
    dot products are exact in the output type, compared with zero tolerance (falls back to
    random data when K is too large for exactness). A dispatch with a fused epilogue needs its
    numpy reference, ``epilogue`` (a ``numerics.EpilogueReference``); its extra inputs are random
    in [-1, 1] (small integers when ``exact``). ``sizes``: the run-time size of each dynamic
    dimension ("m", "n", "k", "batch").
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
    sizes = dict(sizes or {})
    dyn = {d["dim"] for d in problem.get("dynamic") or []}
    if set(sizes) - dyn:
        raise ExecutorError(f"sizes given for static dimensions: {sorted(set(sizes) - dyn)}")
    constants, workload = dynamic_inputs(problem, sizes)
    m, n, k, batch = (problem[d] if d not in dyn else sizes[d] for d in ("m", "n", "k", "batch"))
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch > 1 else ()
    a_shape = lead + ((k, m) if problem["a_transposed"] else (m, k))
    b_shape = lead + ((n, k) if problem["b_transposed"] else (k, n))
    acc_t = problem["c_type"]
    out_t = problem.get("out_type") or acc_t
    lim = 1 if problem["a_type"] == "bf16" else 2
    exact = exact and acc_t != "i32" and k * lim * lim < num.exact_integer_limit(acc_t)
    a = num.random_matrix(rng, a_shape, problem["a_type"], unsigned=problem["unsigned_a"], small_integers=exact)
    if ba == bb:  # one tensor feeds both operands (A @ A^T)
        if a_shape != b_shape:
            raise ExecutorError(f"binding {ba} is both A {a_shape} and B {b_shape}")
        b = a
    else:
        b = num.random_matrix(rng, b_shape, problem["b_type"], unsigned=problem["unsigned_b"], small_integers=exact)
    c = np.zeros(lead + (m, n), num.DTYPES[out_t])
    buffers = {ba: a, bb: b, bc: c}
    extras = []
    extent = {"b": batch, "m": m, "n": n}
    for e in problem.get("epilogue") or []:
        x = num.random_matrix(rng, tuple(extent[d] for d in e["dims"]), e["type"], small_integers=exact)
        buffers[e["binding"]] = x
        extras.append(x)
    for idx, arr in buffers.items():
        shape, elem, _ = d.bindings[idx]
        have = (1,) * (len(shape) - arr.ndim) + arr.shape  # a batch of 1 may be left out
        fits = len(have) == len(shape) and all(s is None or s == x for s, x in zip(shape, have))
        if not fits or num.DTYPES[elem] != arr.dtype:
            raise ExecutorError(f"binding {idx} is memref<{shape}x{elem}>, expected {arr.shape} {arr.dtype}")
    stats, written = run_dispatch(d, buffers, max_lanes=max_lanes, constants=constants, workload=workload)
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
