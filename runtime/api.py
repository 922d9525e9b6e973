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

from mmaflow.compiler.core.errors import DeviceError, InputError, UnsupportedError

_MLIR_TYPE = {
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.int8): "i8",
    np.dtype(np.int32): "i32",
}


def _mlir_type(dt: np.dtype) -> str:
    import ml_dtypes

    extra = {
        np.dtype(ml_dtypes.bfloat16): "bf16",
        np.dtype(ml_dtypes.float8_e4m3fnuz): "f8E4M3FNUZ",
        np.dtype(ml_dtypes.float8_e5m2fnuz): "f8E5M2FNUZ",
        np.dtype(ml_dtypes.float8_e4m3fn): "f8E4M3FN",
        np.dtype(ml_dtypes.float8_e5m2): "f8E5M2",
    }
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
            raise UnsupportedError(
                f"the module has {len(self.executables)} mmaflow dispatches; running and "
                f"checking is defined for single-matmul modules"
            )
        exe = self.executables[0]
        if exe.facts.kind != "matmul":  # a direct family's dispatch (its title from the registry)
            from mmaflow.compiler.kernels.registry import direct_family

            title = direct_family(exe.facts.kind).title
            article = "an" if exe.facts.kind[0] in "aeiou" else "a"
            raise UnsupportedError(
                f"{exe.name} is {article} {exe.facts.kind.replace('_', '-')} dispatch ({title}); running and checking "
                "through this API is defined for single-matmul modules (mmaflow run --device sim checks it on the "
                "lane executor)"
            )
        return self.executables[0].facts.problem

    @functools.cached_property
    def signature(self):
        """(argument shapes, result shape) of the module's function (``_signature``), parsed once."""
        return _signature(self.source)


def compile_module(
    source: str, target: str, *, config: dict | list | None = None, lower: bool = True, source_name: str = "<source>"
) -> Artifact:
    """Compile MLIR text for ``target``. ``config``: overrides of the heuristic, as a dict
    ({"tile_m": 64, "waves": "2x2"}) or "KEY=VALUE" strings. ``lower=False`` stops after mmaflow's
    stages (enough for the lane executor; no IREE backend run). ``source_name`` names the text
    in error messages."""
    from mmaflow.compiler.core.config import overrides_from
    from mmaflow.compiler.driver.bridge import codegen_module
    from mmaflow.compiler.driver.bridge import compile_module as bridge_compile
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions

    if not isinstance(source, str):
        raise InputError(f"source must be MLIR text (str), got {type(source).__name__}")
    opts = CodegenOptions(overrides=overrides_from(config))
    if lower:
        res = bridge_compile(source, target, options=opts, source_name=source_name)
        return Artifact(target, source, res.vmfb, res.taken, res.reports, res.log, len(res.executables))
    res = codegen_module(source, target, options=opts, source_name=source_name)
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


# What a matmul may store, per input type (the instruction's accumulator, or a narrower float
# the accumulator is converted to in registers).
OUT_DTYPES = {
    "f16": ("f32", "f16"),
    "bf16": ("f32", "bf16"),
    "i8": ("i32",),
    "f8E4M3FNUZ": ("f32",),
    "f8E5M2FNUZ": ("f32",),
    "f8E4M3FN": ("f32",),
    "f8E5M2": ("f32",),
}


def resolve_device(target: str, device: str) -> str:
    """'auto' -> the target's GPU driver if IREE sees a device, else 'sim' (announced on stderr)."""
    from mmaflow.compiler.target.targets import get_target
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
    if why not in _ANNOUNCED:  # once per process, not on every matmul() call
        _ANNOUNCED.add(why)
        print(f"mmaflow: {why}; running on the lane executor instead (--device sim)", file=sys.stderr)
    return "sim"


_ANNOUNCED: set = set()


def run_module(art: Artifact, inputs: list[np.ndarray], *, device: str = "auto"):
    """Run a single-matmul artifact on ``inputs`` (A, B, then any fused epilogue's inputs, in the
    module's argument order; A alone where one tensor feeds both operands, as in A @ A^T);
    return (C, executor stats or None)."""
    device = resolve_device(art.target, device)
    inputs = check_inputs(art, inputs)
    if device == "sim":
        return _run_sim(art, inputs)
    if device == "local-task":
        return _run_local_task(art.source, inputs), None
    if art.vmfb is None:
        raise DeviceError("the artifact was compiled with lower=False; it can only run on the lane executor")
    from mmaflow.runtime.iree_runner import CompiledModule

    mod = CompiledModule(art.vmfb, device)
    return _as_result(mod(None, *inputs), art), None


def check_inputs(art: Artifact, inputs) -> list[np.ndarray]:
    """The arrays for a single-matmul artifact, checked against its problem before anything runs:
    how many, their dtypes (never reinterpreted) and their ranks and sizes."""
    from mmaflow.runtime.numerics import DTYPES

    if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
        raise InputError("inputs must be a list of arrays: [A, B, epilogue inputs...]")
    prob = art.problem
    names = ("A (also B)",) if prob.same_ab else ("A", "B")
    names += tuple(f"epilogue input {i}" for i in range(len(prob.epilogue)))
    types = ([prob.a_type] if prob.same_ab else [prob.a_type, prob.b_type]) + [e.type for e in prob.epilogue]
    if len(inputs) != len(names):
        raise InputError(f"the module takes {', '.join(names)}: {len(names)} arrays, {len(inputs)} given")
    out = []
    for name, want, x in zip(names, types, inputs):
        if not isinstance(x, np.ndarray):
            raise InputError(
                f"{name} must be a numpy array of {np.dtype(DTYPES[want])} ({want}), got {type(x).__name__}",
                hint=f"np.asarray(x, dtype=...) with the module's {want}",
            )
        if x.dtype != np.dtype(DTYPES[want]):
            raise InputError(
                f"{name} is {x.dtype}, the module takes {want} ({np.dtype(DTYPES[want])}); mmaflow "
                "does not convert (a cast changes the numbers)",
                hint=f"x.astype({np.dtype(DTYPES[want]).name})",
            )
        out.append(np.ascontiguousarray(x))
    rank = 3 if prob.batched else 2
    core = [_drop_unit_batch(x, rank) for x in out[:2]]
    for name, x, c in zip(names[:2], out[:2], core):
        if c.ndim not in (rank, 2) or (c.ndim == 2 and rank == 3 and prob.batch not in (None, 1)):
            raise InputError(
                f"{name} has shape {x.shape}: the module's {'batch ' if prob.batched else ''}matmul "
                f"takes rank-{rank} operands"
            )
    sig = art.signature
    if prob.is_dynamic or sig is None or len(sig[0]) != len(out):
        _sizes_of(prob, core[0].shape, (core[0] if prob.same_ab else core[1]).shape)
    else:  # static: the function's own argument types decide (a unit M of a generic has no transposition)
        for i, (name, x, want) in enumerate(zip(names, out, sig[0])):
            if x.ndim != len(want) or any(w is not None and w != d for w, d in zip(want, x.shape)):
                _sizes_of(prob, core[0].shape, (core[0] if prob.same_ab else core[1]).shape)  # the plainer words
                shown = "x".join("?" if w is None else str(w) for w in want)
                raise InputError(f"{name} has shape {x.shape}; the function's argument {i} is {shown}")
    return out


def _drop_unit_batch(x: np.ndarray, rank: int) -> np.ndarray:
    """``x`` without leading unit dimensions beyond ``rank`` (a unit batch of a generic
    contraction, which IREE drops inside the dispatch)."""
    while x.ndim > rank and x.shape[0] == 1:
        x = x.reshape(x.shape[1:])
    return x


def _signature(source: str):
    """(argument shapes, result shape) of the module's one public function, None where a dim is
    dynamic; None when there is not exactly one public function of ranked tensors and one result."""
    from iree.compiler import ir

    from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module

    module = parse_module(source, new_context())
    funcs = [f for f in ops_named(module.operation, "func.func") if "sym_visibility" not in f.attributes]
    if len(funcs) != 1:
        return None
    ftype = ir.FunctionType(ir.TypeAttr(funcs[0].attributes["function_type"]).value)
    if len(ftype.results) != 1:
        return None
    shapes = []
    for t in list(ftype.inputs) + list(ftype.results):
        try:
            t = ir.RankedTensorType(t)
        except ValueError:
            return None
        shapes.append(tuple(None if t.is_dynamic_dim(i) else t.shape[i] for i in range(t.rank)))
    return shapes[:-1], shapes[-1]


def _as_result(out: np.ndarray, art: Artifact) -> np.ndarray:
    """The output with the shape the module's function returns (IREE drops a generic's unit
    batch dimension inside the dispatch; the function still returns it)."""
    shape = art.signature[1] if art.signature else None
    if shape is None or None in shape or tuple(out.shape) == shape:
        return out
    if int(np.prod(shape)) != out.size:
        raise DeviceError(f"the dispatch produced {out.shape}, the function returns {shape}")
    return out.reshape(shape)


def _run_sim(art: Artifact, inputs):
    if art.dispatches != 1:
        raise UnsupportedError(
            f"the lane executor runs single-dispatch matmul modules here; this module has {art.dispatches} "
            f"dispatches ({len(art.executables)} compiled by mmaflow)",
            hint="check every dispatch of a model with `mmaflow run MODEL.mlir --target T --device sim`",
        )
    from mmaflow.compiler.core.mlir import new_context, parse_module
    from mmaflow.runtime.numerics import DTYPES
    from mmaflow.runtime.simulate import Memory, Region, dynamic_inputs, load_dispatch, run_dispatch, written_elements

    prob = art.problem
    extra = prob.epilogue
    a, b, *rest = [inputs[0]] + inputs if prob.same_ab else inputs
    a, b = (_drop_unit_batch(x, 3 if prob.batched else 2) for x in (a, b))
    module = parse_module(art.executables[0].text, new_context())
    sizes = _sizes_of(prob, a.shape, b.shape) if prob.is_dynamic else {}  # (static: checked by check_inputs)
    out_shape = ((sizes.get("batch", prob.batch),) if prob.batched else ()) + (
        sizes.get("m", prob.m),
        sizes.get("n", prob.n),
    )
    constants, workload = dynamic_inputs(prob, {x.dim: sizes[x.dim] for x in prob.dynamic})
    d = load_dispatch(module, workload)  # (a versioned dispatch: the kernel the workload selects)
    from mmaflow.runtime.model_check import EXECUTOR_MACS_PER_SECOND

    batch, m, n, k = (sizes.get(x, getattr(prob, x)) for x in ("batch", "m", "n", "k"))
    seconds = (batch or 1) * m * n * k / EXECUTOR_MACS_PER_SECOND
    if seconds > 60:
        print(
            f"mmaflow: the lane executor needs about {seconds:.0f} s for this {m}x{n}x{k} matmul "
            "(`mmaflow run M.mlir --device sim --sample N` checks N workgroups instead)",
            file=sys.stderr,
        )
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
    return _as_result(Memory.read(buffers, c_region), art), stats


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
    return np.asarray(CompiledModule(vmfb, "local-task")(None, *inputs))


@functools.lru_cache(maxsize=32)
def _compiled(source: str, target: str, config_items: tuple, lower: bool) -> Artifact:
    return compile_module(source, target, config=dict(config_items), lower=lower)


def matmul(
    a: np.ndarray,
    b: np.ndarray,
    *,
    target: str,
    out_dtype: str | None = None,
    device: str = "auto",
    config: dict | None = None,
) -> np.ndarray:
    """C = A @ B through mmaflow's kernel for ``target`` (compiled once per shape/dtype/config)."""
    for name, x in (("A", a), ("B", b)):
        if not isinstance(x, np.ndarray):
            raise InputError(
                f"{name} must be a numpy array, got {type(x).__name__}",
                hint="np.asarray(x, dtype=np.float16) (or the dtype you mean to multiply in)",
            )
    if a.dtype != b.dtype:
        raise InputError(f"A and B must have the same dtype, got {a.dtype} and {b.dtype}")
    in_t = _mlir_type(a.dtype)
    out_t = out_dtype or default_out_dtype(in_t)
    if in_t not in OUT_DTYPES:  # f32, i32: numpy's own types, which no matrix instruction multiplies
        narrow, acc = ("np.int8", "i32") if in_t == "i32" else ("np.float16", "f32")
        raise UnsupportedError(
            f"mmaflow has no matrix instruction for {a.dtype} inputs; it multiplies {', '.join(OUT_DTYPES)}",
            hint=f"convert A and B first, e.g. matmul(a.astype({narrow}), b.astype({narrow}), "
            f"...){' (or ml_dtypes.bfloat16)' if acc == 'f32' else ''}: "
            f"the product accumulates and returns in {acc}",
        )
    if out_t not in OUT_DTYPES[in_t]:
        raise InputError(
            f"out_dtype {out_t!r} with {in_t} inputs: mmaflow stores {' or '.join(OUT_DTYPES.get(in_t, ()))}"
        )
    from mmaflow.compiler.core.config import overrides_from
    from mmaflow.runtime.numerics import DTYPES

    overrides = overrides_from(config)
    if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0] and 0 in (a.shape[0], a.shape[1], b.shape[1]):
        # An empty product (K = 0: an empty sum; M or N = 0: no output). IREE 3.13 cannot compile a
        # zero-sized contraction (it stops on a division by zero), and nothing needs computing.
        resolve_device(target, device)
        return np.zeros((a.shape[0], b.shape[1]), DTYPES[out_t])
    src = matmul_module_source(a.shape, b.shape, in_t, out_t)
    dev = resolve_device(target, device)
    art = _compiled(src, target, tuple(sorted(overrides.items())), dev not in ("sim", "local-task"))
    out, _ = run_module(art, [a, b], device=dev)
    return out
