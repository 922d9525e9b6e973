"""An independent reference for a dispatch: IREE's own dispatch IR, evaluated in numpy.

The function mmaflow took, as IREE formed it (executable-sources phase, before any mmaflow stage),
is interpreted op by op: push constants and their arithmetic, the binding subspans at their byte
offsets, ``iree_tensor_ext.dispatch.tensor.load/store``, ``tensor.empty``, ``linalg.fill``, the
contraction (any linalg op whose body multiplies and accumulates, evaluated with ``einsum`` in
float64 from its indexing maps) and elementwise ``linalg.generic`` ops (arith and math bodies).
It shares no code with the compiler's stages, so a mistake there cannot hide here.

Every value carries a radius: how far the hardware's value may lie from the reference's.
- contraction: the accumulation bound K * u(acc) * (|A| @ |B|) (any summation order, Higham 3.1);
- each elementwise op is evaluated in float64 and rounded to its result type, as the hardware
  rounds; its radius is the largest change of the op over the corners of its inputs'
  intervals, plus one ulp of the result type (the rounding may go the other way for an input a
  little off), plus a few ulps for math library functions, which are not correctly rounded on
  GPUs.
A comparison passes where |kernel - reference| <= radius; a non-finite value passes only where
the reference is the same non-finite value.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from iree.compiler import ir

from mmaflow.compiler.core.errors import Exit, MmaflowError

UNIT_ROUNDOFF = {"f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}
# Units of the result type a GPU math library may be off by (CUDA libdevice / ROCm ocml: <= 4 ulp
# for the functions below in f32; f16 versions compute in f32 and round once).
MATH_ULPS = 4

_NP = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,  # MX block scales: 2^(e - 127), 0xFF NaN
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "index": np.int64,
}


FP8_TYPES = ("f8E4M3FN", "f8E5M2")  # Hopper's (OCP) fp8: what its fp8 wgmma multiplies


class InterpretError(MmaflowError):
    """The reference cannot evaluate the dispatch (an op it does not know)."""

    exit_code = Exit.CHECKER


def np_dtype(t) -> np.dtype:
    name = str(t)
    if name not in _NP:
        raise InterpretError(f"no numpy type for {name}")
    return np.dtype(_NP[name])


def _is_float(t: str) -> bool:
    return t.startswith(("f", "bf"))


def round_to(x: np.ndarray, t: str) -> np.ndarray:
    """``x`` (float64) rounded to element type ``t`` and back to float64; integers wrap."""
    if _is_float(t):
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(x, np.float64).astype(np_dtype(t)).astype(np.float64)
    bits = 64 if t == "index" else int(t[1:])
    if bits == 1:
        return np.asarray(x).astype(bool)
    v = np.asarray(x).astype(np.int64)
    if bits < 64:
        v = (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return v


@dataclass
class Val:
    """A tensor or scalar value of the interpreted dispatch: its float64 (or int64) value, the
    radius around it, and its MLIR element type."""

    v: np.ndarray
    r: np.ndarray
    t: str

    @staticmethod
    def exact(v, t: str) -> "Val":
        v = np.asarray(v)
        return Val(v, np.zeros(v.shape), t)


_FLOAT_BIN = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    "arith.maximumf": np.maximum,
    "arith.minimumf": np.minimum,
    "arith.maxnumf": np.fmax,
    "arith.minnumf": np.fmin,
    "math.powf": np.power,
}
_FLOAT_UN = {
    "arith.negf": np.negative,
    "math.absf": np.abs,
    "math.exp": np.exp,
    "math.exp2": np.exp2,
    "math.log": np.log,
    "math.log2": np.log2,
    "math.log1p": np.log1p,
    "math.expm1": np.expm1,
    "math.tanh": np.tanh,
    "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1 / np.sqrt(x),
    "math.sin": np.sin,
    "math.cos": np.cos,
    "math.erf": np.vectorize(math.erf, otypes=[np.float64]),
    "math.floor": np.floor,
    "math.ceil": np.ceil,
    "math.round": np.round,
}
_MATH_INEXACT = {
    "math.exp",
    "math.exp2",
    "math.log",
    "math.log2",
    "math.log1p",
    "math.expm1",
    "math.tanh",
    "math.rsqrt",
    "math.sin",
    "math.cos",
    "math.erf",
    "math.powf",
    "math.fpowi",
}
_INT_BIN = {
    "arith.addi": np.add,
    "arith.subi": np.subtract,
    "arith.muli": np.multiply,
    "arith.andi": np.bitwise_and,
    "arith.ori": np.bitwise_or,
    "arith.xori": np.bitwise_xor,
    "arith.shli": np.left_shift,
    "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum,
}
_CMPF = {
    0: None,
    1: np.equal,
    2: np.greater,
    3: np.greater_equal,
    4: np.less,
    5: np.less_equal,
    6: np.not_equal,
    8: np.equal,
    9: np.greater,
    10: np.greater_equal,
    11: np.less,
    12: np.less_equal,
    13: np.not_equal,
}


def _ulp(t: str, x: np.ndarray) -> np.ndarray:
    """One unit in the last place of ``x`` in type ``t`` (2u|x|): what a rounding decided the
    other way, for an input a little off, changes."""
    return 2.0 * UNIT_ROUNDOFF.get(t, 0.0) * np.abs(x)


def _corners(fn, args: list[Val]) -> tuple[np.ndarray, np.ndarray]:
    """(fn at the midpoints, the largest |change| of fn over the corners of the intervals)."""
    mid = fn(*[a.v for a in args])
    dev = np.zeros(np.shape(mid))
    if any(np.any(a.r) for a in args):
        for signs in itertools.product((-1.0, 1.0), repeat=len(args)):
            with np.errstate(all="ignore"):
                at = fn(*[a.v + s * a.r for a, s in zip(args, signs)])
                dev = np.fmax(dev, np.abs(at - mid))
    return mid, dev


def _result_type(op: ir.Operation) -> str:
    t = op.results[0].type
    return str(ir.ShapedType(t).element_type) if isinstance(t, ir.ShapedType) else str(t)


def scalar_op(op: ir.Operation, args: list[Val]) -> Val:
    """One arith/math op on (broadcast) values, rounded to its result type."""
    name, t = op.name, _result_type(op)
    if name == "arith.constant":
        attr = op.attributes["value"]
        if isinstance(attr, ir.DenseElementsAttr):
            attr = ir.DenseElementsAttr(attr).get_splat_value()
        value = ir.FloatAttr(attr).value if isinstance(attr, ir.FloatAttr) else ir.IntegerAttr(attr).value
        return Val.exact(round_to(np.float64(value) if _is_float(t) else value, t), t)
    if name in _FLOAT_BIN or name in _FLOAT_UN or name == "math.fpowi":
        if name in _FLOAT_BIN:
            fn = _FLOAT_BIN[name]
        elif name == "math.fpowi":
            fn = np.power
        else:
            fn = _FLOAT_UN[name]
        with np.errstate(all="ignore"):
            mid, dev = _corners(fn, args)
        out = round_to(mid, t)
        ulps = 1 + (MATH_ULPS if name in _MATH_INEXACT else 0)
        return Val(out, dev + ulps * _ulp(t, out), t)
    if name in ("arith.truncf", "arith.extf", "arith.sitofp", "arith.uitofp"):
        src = args[0]
        v = src.v.astype(np.float64)
        if name == "arith.uitofp":
            bits = int(src.t[1:])
            v = np.where(v < 0, v + 2.0**bits, v)
        out = round_to(v, t)
        return Val(out, src.r + _ulp(t, out), t)
    if name == "arith.fptosi":
        out = round_to(np.trunc(args[0].v), t)
        return Val(out, args[0].r + 1.0, t)
    if name in ("arith.extsi", "arith.index_cast", "arith.trunci"):
        return Val(round_to(args[0].v, t), args[0].r, t)
    if name in ("arith.extui", "arith.index_castui"):
        bits = 64 if args[0].t == "index" else int(args[0].t[1:])
        v = np.asarray(args[0].v).astype(np.int64)
        if bits < 64:
            v = v & ((1 << bits) - 1)
        return Val(round_to(v, t), args[0].r, t)
    if name in _INT_BIN:
        return Val(
            round_to(_INT_BIN[name](args[0].v.astype(np.int64), args[1].v.astype(np.int64)), t),
            args[0].r + args[1].r,
            t,
        )
    if name in ("arith.divui", "arith.divsi", "arith.remui", "arith.remsi", "arith.ceildivui"):
        a, b = args[0].v.astype(np.int64), args[1].v.astype(np.int64)
        fn = {
            "arith.divui": lambda: a // b,
            "arith.divsi": lambda: np.trunc(a / b).astype(np.int64),
            "arith.remui": lambda: a % b,
            "arith.remsi": lambda: np.fmod(a, b),
            "arith.ceildivui": lambda: -(-a // b),
        }[name]
        return Val.exact(round_to(fn(), t), t)
    if name == "arith.cmpf":
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        fn = _CMPF.get(pred)
        if fn is None:
            raise InterpretError(f"arith.cmpf predicate {pred} is not modelled")
        a, b = args
        mid = fn(a.v, b.v)
        uncertain = np.zeros(mid.shape, bool)
        for sa, sb in itertools.product((-1.0, 1.0), repeat=2):
            uncertain |= fn(a.v + sa * a.r, b.v + sb * b.r) != mid
        return Val(mid, uncertain.astype(np.float64), "i1")
    if name == "arith.select":
        c, a, b = args
        v = np.where(c.v, a.v, b.v)
        r = np.where(c.v, a.r, b.r)
        flip = c.r > 0
        return Val(v, np.where(flip, np.abs(a.v - b.v) + np.maximum(a.r, b.r), r), t)
    raise InterpretError(f"the reference interpreter does not evaluate {name}")


def _iteration_view(x: np.ndarray, dims: list[int], n_loops: int) -> np.ndarray:
    """``x`` (axes indexed by loop dims ``dims``) as an array over all ``n_loops`` loops
    (broadcast where a loop is missing)."""
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    y = np.transpose(x, order) if x.ndim else x
    present = sorted(dims)
    shape = [1] * n_loops
    for axis, d in enumerate(present):
        shape[d] = y.shape[axis]
    return y.reshape(shape)


def _maps(op: ir.Operation) -> list[list[int]]:
    out = []
    for a in ir.ArrayAttr(op.attributes["indexing_maps"]):
        amap = ir.AffineMapAttr(a).value
        dims = []
        for e in amap.results:
            if not isinstance(e, ir.AffineDimExpr):
                raise InterpretError(f"{op.name} has a non-dimension indexing expression {e}")
            dims.append(e.position)
        out.append(dims)
    return out


def _loop_sizes(maps: list[list[int]], shapes: list[tuple]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for dims, shape in zip(maps, shapes):
        for d, s in zip(dims, shape):
            sizes[d] = s
    return sizes


def linalg_op(op: ir.Operation, ins: list[Val], init: Val, *, fp8_k_tile: int = 0, fp8_split: int = 1) -> Val:
    """A linalg op with indexing maps and a scalar body: elementwise when every loop is
    parallel, else a multiply-accumulate contraction (``fp8_k_tile``: one of 8-bit float inputs
    is computed as Hopper's fp8 wgmma kernel computes it, promoting every K tile of that many k:
    ``numerics.fp8_tensor_core_reference``, exact -- what the lane executor's model gives;
    ``fp8_split``: the K tiles shared out by split-K)."""
    if "indexing_maps" not in op.attributes:
        raise InterpretError(f"the reference interpreter does not evaluate {op.name}")
    maps = _maps(op)
    sizes = _loop_sizes(maps, [x.v.shape for x in ins] + [init.v.shape])
    n_loops = max(sizes) + 1 if sizes else 0
    out_dims = maps[-1]
    reductions = [d for d in range(n_loops) if d not in out_dims]
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    args = list(block.arguments)
    t = str(ir.ShapedType(op.results[0].type).element_type)
    if reductions:
        return _contraction(op, ins, init, maps, body, args, t, fp8_k_tile, fp8_split)
    env = {}
    for arg, x, dims in zip(args, ins + [init], maps):
        env[arg] = Val(_iteration_view(x.v, dims, n_loops), _iteration_view(x.r, dims, n_loops), x.t)
    for o in body:
        if o.name == "linalg.yield":
            res = env[o.operands[0]]
            shape = tuple(sizes[d] for d in range(n_loops))
            v = np.broadcast_to(res.v, shape)
            r = np.broadcast_to(res.r, shape)
            perm = [out_dims.index(d) for d in range(n_loops)] if out_dims != list(range(n_loops)) else None
            if perm is not None:
                v, r = np.transpose(v, np.argsort(perm)), np.transpose(r, np.argsort(perm))
            return Val(np.ascontiguousarray(v), np.ascontiguousarray(r), t)
        if o.name == "linalg.index":
            raise InterpretError("linalg.index in an elementwise body is not modelled")
        vals = []
        for v in o.operands:
            if v not in env:
                env[v] = scalar_op(v.owner.operation if isinstance(v.owner, ir.OpView) else v.owner, [])
            vals.append(env[v])
        res = scalar_op(o, vals)
        env[o.results[0]] = res
    raise InterpretError(f"{op.name} has no linalg.yield")


def _contraction(
    op, ins: list[Val], init: Val, maps, body, args, t: str, fp8_k_tile: int = 0, fp8_split: int = 1
) -> Val:
    """out = init + sum over the reduction loops of cast(a) * cast(b) (or of scaled a and b:
    ``_scaled_operands``)."""
    names = [o.name for o in body]
    if "arith.scaling_extf" in names:
        ins, maps = _scaled_operands(op, ins, maps, body, args)
        body = [o for o in body if o.name != "arith.scaling_extf"]
    if len(ins) != 2:
        raise InterpretError(f"{op.name}: a contraction of {len(ins)} inputs is not modelled")
    names = [o.name for o in body]
    allowed = {
        "arith.extf",
        "arith.extsi",
        "arith.extui",
        "arith.mulf",
        "arith.muli",
        "arith.addf",
        "arith.addi",
        "linalg.yield",
    }
    if not set(names) <= allowed or not any(n.startswith("arith.mul") for n in names):
        raise InterpretError(f"{op.name}: the body {names} is not a multiply-accumulate")
    unsigned = [False, False]
    for o in body:
        if o.name == "arith.extui" and o.operands[0] in list(args)[:2]:
            unsigned[list(args).index(o.operands[0])] = True
    letters = "abcdefghijklmnopqrstuvwxyz"
    spec = (
        ",".join("".join(letters[d] for d in dims) for dims in maps[:2]) + "->" + "".join(letters[d] for d in maps[2])
    )
    a, b = ins
    if _is_float(a.t):
        av, bv = a.v.astype(np.float64), b.v.astype(np.float64)
        if fp8_k_tile and a.t in FP8_TYPES and b.t in FP8_TYPES:
            return _fp8_tensor_core(op, av, bv, init, spec, fp8_k_tile, t, fp8_split)
        total = np.einsum(spec, av, bv)
        bound = np.einsum(spec, np.abs(av), np.abs(bv))
        k = int(np.prod([s for s, d in zip(a.v.shape, maps[0]) if d not in maps[2]])) or 1
        value = init.v + total
        radius = init.r + k * UNIT_ROUNDOFF[t] * (bound + np.abs(init.v)) + UNIT_ROUNDOFF[t] * np.abs(value)
        return Val(round_to(value, t), radius, t)
    av, bv = (  # (extui reads an i8 or i4 value's bits unsigned)
        x.v.astype(np.int64) & ((1 << int(x.t[1:])) - 1) if u else x.v.astype(np.int64)
        for x, u in ((a, unsigned[0]), (b, unsigned[1]))
    )
    return Val.exact(round_to(init.v.astype(np.int64) + np.einsum(spec, av, bv), t), t)


def _scaled_operands(op, ins: list, maps: list, body, args) -> tuple[list, list]:
    """A block-scaled contraction's body (IREE's scaled-matmul form): each factor is
    ``arith.scaling_extf(x, s)`` = x * s of an input and its scale input (an E8M0 power of two,
    already its value here; NaN at 0xFF), the scale's loops a subset of the input's. Returns the
    two scaled inputs (exact in float64) and their maps."""
    out_ins, out_maps = [], []
    for o in body:
        if o.name != "arith.scaling_extf":
            continue
        x, s = (list(args).index(v) for v in o.operands)
        dx, ds = maps[x], maps[s]
        if not set(ds) <= set(dx):
            raise InterpretError(f"{op.name}: a scale indexed by loops its operand does not have")
        order = [ds.index(d) for d in dx if d in ds]
        shape = [ins[s].v.shape[ds.index(d)] if d in ds else 1 for d in dx]
        factor = np.transpose(ins[s].v, order).reshape(shape)
        out_ins.append(Val.exact(ins[x].v.astype(np.float64) * factor, "f64"))
        out_maps.append(dx)
    if len(out_ins) != 2:
        raise InterpretError(f"{op.name}: {len(out_ins)} scaled factors (a block-scaled matmul has two)")
    return out_ins, out_maps + [maps[-1]]


def _fp8_tensor_core(
    op, av: np.ndarray, bv: np.ndarray, init: Val, spec: str, k_tile: int, t: str, split: int = 1
) -> Val:
    """The contraction ``spec`` (one reduction, M, N, at most one batch loop) of fp8 values as the
    fp8 wgmma kernel computes it (``numerics.fp8_tensor_core_reference``), onto a zero init: exact."""
    ins, out = spec.split("->")
    la, lb = ins.split(",")
    red = [c for c in la if c in lb and c not in out]
    batch = [c for c in out if c in la and c in lb]
    m = [c for c in la if c in out and c not in lb]
    n = [c for c in lb if c in out and c not in la]
    if len(red) != 1 or len(m) != 1 or len(n) != 1 or len(batch) > 1 or t != "f32" or np.any(init.v) or np.any(init.r):
        raise InterpretError(
            f"{op.name}: the fp8 tensor-core arithmetic is modelled for C = A @ B (one K, M, N, "
            f"at most one batch) into a zero f32 init, not {spec} -> {t}"
        )
    from mmaflow.runtime.numerics import fp8_tensor_core_reference

    bt = "".join(batch)
    a_log = np.einsum(f"{la}->{bt}{m[0]}{red[0]}", av)
    b_log = np.einsum(f"{lb}->{bt}{red[0]}{n[0]}", bv)
    c = fp8_tensor_core_reference(a_log, b_log, k_tile, split=split).astype(np.float64)
    return Val.exact(np.ascontiguousarray(np.einsum(f"{bt}{m[0]}{n[0]}->{out}", c)), t)


def compare(out: np.ndarray, ref: Val, mask: np.ndarray | None = None) -> dict:
    """|out - ref| <= radius where ``mask`` (all elements when None); non-finite values must match."""
    o = out.astype(np.float64) if _is_float(ref.t) else out.astype(np.int64)
    rv, rr = np.asarray(ref.v, np.float64), np.asarray(ref.r, np.float64)
    sel = np.ones(o.shape, bool) if mask is None else mask
    o, rv, rr = o[sel], rv[sel], rr[sel]
    finite = np.isfinite(rv)
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(o - rv), 0.0)
    same_special = ~finite & ((np.isnan(rv) & np.isnan(o)) | (rv == o))
    bad = (finite & ~np.isfinite(o)) | (finite & (err > rr + np.finfo(np.float32).tiny)) | (~finite & ~same_special)
    ok_err = np.where(finite & np.isfinite(o), err, 0.0)
    worst = int(np.argmax(np.where(bad, np.inf, ok_err - rr))) if o.size else 0
    return {
        "passed": not bad.any(),
        "elements": int(o.size),
        "bad": int(bad.sum()),
        "max_abs_err": float(ok_err.max()) if o.size else 0.0,
        "max_radius": float(rr.max()) if o.size else 0.0,
        "max_err_over_radius": float(np.max(ok_err / np.maximum(rr, 1e-30))) if o.size else 0.0,
        "worst": {"got": float(o[worst]), "expected": float(rv[worst]), "radius": float(rr[worst])} if o.size else {},
    }
