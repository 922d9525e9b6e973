"""Python API: compile matmul modules with mmaflow and run them on a GPU or the lane executor.

    import numpy as np
    from mmaflow.runtime import matmul, compile_module, run_module

    a = np.random.rand(256, 128).astype(np.float16)
    b = np.random.rand(128, 512).astype(np.float16)
    c = matmul(a, b, target="gfx942")                 # no AMD GPU here: runs on the lane executor
    c = matmul(a, b, target="sm_80", device="cuda")   # a real GPU through IREE's CUDA runtime

    art = compile_module(open("mm.mlir").read(), target="gfx1100")
    out = run_module(art, [a, b], device="sim")

Devices: "auto" (the target's GPU driver when IREE sees a device, else the lane executor, saying
so), "hip", "cuda", "sim" (the lane executor), "local-task" (IREE's CPU backend and its own
pipeline: a reference, not mmaflow's code).
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from mmaflow.compiler.errors import DeviceError, InputError, UnsupportedError

_MLIR_TYPE = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.int8): "i8",
              np.dtype(np.int32): "i32"}


def _mlir_type(dt: np.dtype) -> str:
    import ml_dtypes
    extra = {np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(ml_dtypes.float8_e4m3fnuz): "f8E4M3FNUZ",
             np.dtype(ml_dtypes.float8_e5m2fnuz): "f8E5M2FNUZ", np.dtype(ml_dtypes.float8_e4m3fn): "f8E4M3FN",
             np.dtype(ml_dtypes.float8_e5m2): "f8E5M2"}
    try:
        return {**_MLIR_TYPE, **extra}[np.dtype(dt)]
    except KeyError:
        raise UnsupportedError(f"mmaflow has no matrix instruction for {np.dtype(dt)} inputs") from None


@dataclass
class Artifact:
    """A compiled module: the .vmfb (GPU targets), the handed-back dispatches, reports."""

    target: str
    source: str
    vmfb: bytes | None
    executables: list  # pipeline.ExecutableResult of the taken dispatches
    reports: dict = field(default_factory=dict)
    log: list = field(default_factory=list)
    dispatches: int = 0  # all dispatches of the module, taken or left to IREE

    @property
    def problem(self):
        """The ``problem.Contraction`` of a single-matmul module."""
        if len(self.executables) != 1:
            raise UnsupportedError(f"the module has {len(self.executables)} mmaflow dispatches; running and "
                                   f"checking is defined for single-matmul modules")
        return self.executables[0].facts.problem


def compile_module(source: str, target: str, *, config: dict | None = None, lower: bool = True) -> Artifact:
    """Compile MLIR text for ``target``. ``lower=False`` stops after mmaflow's stages (enough for
    the lane executor; no IREE backend run)."""
    from mmaflow.compiler.bridge import codegen_module, compile_module as bridge_compile
    from mmaflow.compiler.config import parse_overrides
    from mmaflow.compiler.pipeline import CodegenOptions
    overrides = config if isinstance(config, dict) else parse_overrides(list(config or []))
    opts = CodegenOptions(overrides=overrides)
    if lower:
        res = bridge_compile(source, target, options=opts)
        return Artifact(target, source, res.vmfb, res.taken, res.reports, res.log, len(res.executables))
    res = codegen_module(source, target, options=opts)
    return Artifact(target, source, None, res.taken, {}, res.log, len(res.executables))


def matmul_module_source(a_shape, b_shape, in_type: str, out_type: str) -> str:
    from mmaflow.runtime.modules import matmul_source
    if len(a_shape) != 2 or len(b_shape) != 2 or a_shape[1] != b_shape[0]:
        raise InputError(f"matmul needs (M, K) x (K, N) operands, got {tuple(a_shape)} x {tuple(b_shape)}")
    m, k = a_shape
    n = b_shape[1]
    return matmul_source(m, n, k, in_type, out_type)


def default_out_dtype(in_type: str) -> str:
    return "i32" if in_type == "i8" else "f32"


def resolve_device(target: str, device: str) -> str:
    """'auto' -> the target's GPU driver if IREE sees a device, else 'sim' (announced on stderr)."""
    from mmaflow.compiler.targets import get_target
    from mmaflow.runtime.iree_runner import device_present
    t = get_target(target)
    if device not in ("auto", "hip", "cuda", "sim", "local-task"):
        raise InputError(f"unknown device {device!r}; choices: auto, hip, cuda, sim, local-task")
    if device in ("hip", "cuda") and device != t.iree_device:
        raise InputError(f"{target} code runs on the {t.iree_device} driver, not {device}")
    if device != "auto":
        return device
    ok, why = device_present(t.iree_device)
    if ok:
        return t.iree_device
    print(f"mmaflow: {why}; running on the lane executor instead (--device sim)", file=sys.stderr)
    return "sim"


def run_module(art: Artifact, inputs: list[np.ndarray], *, device: str = "auto"):
    """Run a single-matmul artifact on ``inputs`` (A, B, then any fused epilogue's inputs, in the
    module's argument order; A alone where one tensor feeds both operands, as in A @ A^T);
    return (C, executor stats or None)."""
    device = resolve_device(art.target, device)
    if device == "sim":
        return _run_sim(art, inputs)
    if device == "local-task":
        return _run_local_task(art.source, inputs), None
    if art.vmfb is None:
        raise DeviceError("the artifact was compiled with lower=False; it can only run on the lane executor")
    from mmaflow.runtime.iree_runner import CompiledModule
    mod = CompiledModule(art.vmfb, device)
    return mod(None, *inputs), None


def _run_sim(art: Artifact, inputs):
    if art.dispatches != 1:
        raise UnsupportedError(
            f"the lane executor runs single-dispatch matmul modules here; this module has {art.dispatches} "
            f"dispatches ({len(art.executables)} compiled by mmaflow)",
            hint="check every dispatch of a model with `mmaflow run MODEL.mlir --target T --device sim`")
    from mmaflow.compiler.mlir import new_context, parse_module
    from mmaflow.runtime.numerics import DTYPES
    from mmaflow.runtime.simulate import Memory, Region, dynamic_inputs, load_dispatch, run_dispatch, written_elements
    prob = art.problem
    extra = prob.epilogue
    names = ("A (also B)",) if prob.same_ab else ("A", "B")
    names += tuple(f"epilogue input {i}" for i in range(len(extra)))
    if len(inputs) != len(names):
        raise InputError(f"the module takes {', '.join(names)}: {len(names)} arrays, {len(inputs)} given")
    inputs = [np.ascontiguousarray(x) for x in inputs]
    a, b, *rest = [inputs[0]] + inputs if prob.same_ab else inputs
    module = parse_module(art.executables[0].text, new_context())
    d = load_dispatch(module)
    sizes = _sizes_of(prob, a.shape, b.shape)
    out_shape = (((sizes.get("batch", prob.batch),) if prob.batched else ())
                 + (sizes.get("m", prob.m), sizes.get("n", prob.n)))
    constants, workload = dynamic_inputs(prob, {x.dim: sizes[x.dim] for x in prob.dynamic})
    mem = Memory()
    a_lead = a.shape if a.ndim == (3 if prob.batched else 2) else (1,) + a.shape
    mem.place(Region(prob.a.binding, prob.a.offset, DTYPES[prob.a_type], tuple(a_lead), "A"), a.reshape(a_lead))
    b_lead = b.shape if b.ndim == (3 if prob.batched else 2) else (1,) + b.shape
    mem.place(Region(prob.b.binding, prob.b.offset, DTYPES[prob.b_type], tuple(b_lead), "B"), b.reshape(b_lead))
    for i, (e, x) in enumerate(zip(extra, rest)):
        mem.place(Region(e.at.binding, e.at.offset, DTYPES[e.type], x.shape, f"epilogue input {i}"), x)
    c_region = Region(prob.c.binding, prob.c.offset, DTYPES[prob.stored_type], out_shape, "C")
    mem.place(c_region)
    buffers = mem.buffers()
    start = time.perf_counter()
    stats, written = run_dispatch(d, buffers, constants=constants, workload=workload)
    stats.seconds = time.perf_counter() - start
    if not written_elements(written, c_region).all():
        raise DeviceError("the kernel left part of the output unwritten on the lane executor")
    return Memory.read(buffers, c_region), stats


def _sizes_of(prob, a_shape, b_shape) -> dict:
    """M, N, K (and batch) as the input arrays give them, checked against the static ones."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    lead = a_shape[:-2]
    m, k = (a_shape[-1], a_shape[-2]) if prob.a_transposed else (a_shape[-2], a_shape[-1])
    n, kb = (b_shape[-2], b_shape[-1]) if prob.b_transposed else (b_shape[-1], b_shape[-2])
    sizes = {"m": m, "n": n, "k": k}
    if prob.batched:
        sizes["batch"] = lead[0] if lead else 1
    if kb != k:
        raise InputError(f"A has K = {k}, B has K = {kb}")
    for dim, v in sizes.items():
        if getattr(prob, dim) is not None and getattr(prob, dim) != v:
            raise InputError(f"the module's {dim} is {getattr(prob, dim)}, the inputs give {v}")
    return sizes


def _run_local_task(source: str, inputs):
    from iree.compiler import compile_str

    from mmaflow.runtime.iree_runner import CompiledModule
    vmfb = compile_str(source, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=host"])
    return CompiledModule(vmfb, "local-task")(None, *inputs)


@functools.lru_cache(maxsize=32)
def _compiled(source: str, target: str, config_items: tuple, lower: bool) -> Artifact:
    return compile_module(source, target, config=dict(config_items), lower=lower)


def matmul(a: np.ndarray, b: np.ndarray, *, target: str, out_dtype: str | None = None,
           device: str = "auto", config: dict | None = None) -> np.ndarray:
    """C = A @ B through mmaflow's kernel for ``target`` (compiled once per shape/dtype/config)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        raise InputError(f"A and B must have the same dtype, got {a.dtype} and {b.dtype}")
    in_t = _mlir_type(a.dtype)
    out_t = out_dtype or default_out_dtype(in_t)
    src = matmul_module_source(a.shape, b.shape, in_t, out_t)
    dev = resolve_device(target, device)
    art = _compiled(src, target, tuple(sorted((config or {}).items())), dev not in ("sim", "local-task"))
    out, _ = run_module(art, [a, b], device=dev)
    return out
