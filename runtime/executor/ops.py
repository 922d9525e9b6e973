"""The lane executor's generic ops: arith and math, constants, the HAL interface, memory (LDS
and global, with the race, in-flight, bank-conflict and bounds checks), vectors, ldmatrix,
cp.async, the matrix instructions of the ISA model (``amdgpu.wmma`` / ``mfma``,
``nvgpu.mma.sync``), cross-lane ops, and control flow (``scf.for``, ``scf.if`` with its warp
roles). ``HANDLERS``: op name -> handler; ``end_check``: what must hold when a batch ends.

A handler ``h(k, op)`` runs once per op when the ``Kernel`` compiles the function and returns
``run(st)``, which executes the op for every lane of a ``State``.
"""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
from iree.compiler import ir

from mmaflow.runtime.executor.core import (
    ExecutorError,
    FuncReturn,
    MemRef,
    Roles,
    State,
    np_dtype,
    op_loc,
    per_lane,
    role_progress,
    run_block,
    wait_or_fail,
)
from mmaflow.runtime.executor.wgmma import WARPGROUP, h_register_a_wgmma, lds_write_check
from mmaflow.runtime.isa import IsaError
from mmaflow.runtime.isa import execute as isa_execute
from mmaflow.runtime.isa.decode import decode


def _uniform(v, what: str, op) -> int:
    a = np.asarray(v)
    if not np.all(a == a.flat[0]):
        raise ExecutorError(
            f"{op_loc(op)}: {what} differs between lanes (non-uniform control flow is not supported here)"
        )
    return int(a.flat[0])


def _int_bits(t) -> int:
    s = str(t)
    if s == "index":
        return 64
    if s.startswith("i"):
        return int(s[1:])
    return 0


def _unsigned(a, bits):
    a = np.asarray(a).astype(np.int64)
    if bits >= 64:
        return a.astype(np.uint64)
    return (a & ((1 << bits) - 1)).astype(np.uint64)


def _cmpi(pred, a, b, bits):
    if pred >= 6:
        a, b = _unsigned(a, bits), _unsigned(b, bits)
    return [
        np.equal,
        np.not_equal,
        np.less,
        np.less_equal,
        np.greater,
        np.greater_equal,
        np.less,
        np.less_equal,
        np.greater,
        np.greater_equal,
    ][pred](a, b)


def _cmpf(pred, a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    table = {
        0: lambda: np.zeros(np.broadcast(a, b).shape, bool),
        1: lambda: a == b,
        2: lambda: a > b,
        3: lambda: a >= b,
        4: lambda: a < b,
        5: lambda: a <= b,
        6: lambda: (a != b) & ~np.isnan(a) & ~np.isnan(b),
        7: lambda: ~np.isnan(a) & ~np.isnan(b),
        8: lambda: (a == b) | np.isnan(a) | np.isnan(b),
        9: lambda: (a > b) | np.isnan(a) | np.isnan(b),
        10: lambda: (a >= b) | np.isnan(a) | np.isnan(b),
        11: lambda: (a < b) | np.isnan(a) | np.isnan(b),
        12: lambda: (a <= b) | np.isnan(a) | np.isnan(b),
        13: lambda: (a != b) | np.isnan(a) | np.isnan(b),
        14: lambda: np.isnan(a) | np.isnan(b),
        15: lambda: np.ones(np.broadcast(a, b).shape, bool),
    }
    return table[pred]()


def _cast(a, dt, unsigned_src, src_bits):
    a = np.asarray(a)
    if unsigned_src:
        a = _unsigned(a, src_bits)
    if dt == np.bool_ and a.dtype.kind in "iu":  # arith.trunci to i1 keeps bit 0 (not "nonzero")
        return (a.astype(np.int64) & 1).astype(np.bool_)
    if dt.kind in "iu" and a.dtype.kind == "f":
        return np.trunc(a.astype(np.float64)).astype(dt)
    if dt == np.float16 or dt.kind == "V" or str(dt).startswith("float8") or str(dt) == "bfloat16":
        return a.astype(np.float64).astype(dt) if a.dtype.kind != "f" or a.dtype.itemsize > 4 else a.astype(dt)
    return a.astype(dt)


def _float_op(f):
    def run(a, b, dt, bits):
        if dt.itemsize < 4 or str(dt) == "bfloat16":  # round the f32 result once (exact for +,-,*)
            return f(np.asarray(a, np.float32), np.asarray(b, np.float32)).astype(dt)
        return f(np.asarray(a, dt), np.asarray(b, dt))

    return run


def _int_op(f, unsigned=False):
    def run(a, b, dt, bits):
        if unsigned:
            r = f(_unsigned(a, bits), _unsigned(b, bits))
            return r.astype(np.int64).astype(dt) if bits < 64 else r.astype(dt)
        return f(np.asarray(a, dt), np.asarray(b, dt))

    return run


def _divsi(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)


def _remsi(a, b):
    return a - _divsi(a, b) * b


def _ceildivsi(a, b):
    return -((-a) // b)


def _select(c, a, b, dt, bits):
    c, a, b = np.asarray(c), np.asarray(a), np.asarray(b)
    extra = max(a.ndim, b.ndim) - c.ndim
    if extra > 0:  # i1 per lane selecting between vectors
        c = c.reshape(c.shape + (1,) * extra)
    return np.where(c, a, b)


def _float_math(f):
    """A float op evaluated in float64 and rounded once to the result type: the correctly rounded
    result, which GPU math libraries approximate to a few ulp (epilogue tolerances allow that)."""

    def run(*args):
        *xs, dt, _bits = args
        return f(*(np.asarray(x, np.float64) for x in xs)).astype(dt)

    return run


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _fma(a, b, c, dt, _bits):
    """fma, rounded once to ``dt`` for f32, f16 and bf16: a * b + c in float64 rounded to odd, then to
    ``dt``. The product of two such floats is exact in float64, TwoSum gives the sum's error, and an
    inexact sum ending in an even bit moves one ulp towards the exact value (53 bits >= 2 x 24 + 2).
    f64: the float64 expression (two roundings)."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    if np.dtype(dt) == np.float64:
        return a * b + c
    p = a * b
    s = p + c
    v = s - p
    e = (p - (s - v)) + (c - v)  # s + e == p + c exactly (no overflow)
    even = (np.asarray(s, np.float64).view(np.int64) & 1) == 0
    fix = (e != 0) & even & np.isfinite(s)
    return np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s).astype(dt)


_ARITH = {
    "arith.negf": (_float_math(np.negative), "float"),
    "math.absf": (_float_math(np.abs), "float"),
    "math.tanh": (_float_math(np.tanh), "float"),
    "math.erf": (_float_math(_erf), "float"),
    "math.exp": (_float_math(np.exp), "float"),
    "math.exp2": (_float_math(np.exp2), "float"),
    "math.log": (_float_math(np.log), "float"),
    "math.log2": (_float_math(np.log2), "float"),
    "math.sqrt": (_float_math(np.sqrt), "float"),
    "math.rsqrt": (_float_math(lambda x: 1.0 / np.sqrt(x)), "float"),
    "math.floor": (_float_math(np.floor), "float"),
    "math.ceil": (_float_math(np.ceil), "float"),
    "math.powf": (_float_math(np.power), "float"),
    "math.fpowi": (_float_math(np.power), "float"),
    "math.fma": (_fma, "float"),
    # (LLVM's fma intrinsic: the weight-only kernel's f16x2 unpacking, which IREE's NVVM lowering of
    # math.fma would widen to f32)
    "llvm.intr.fma": (_fma, "float"),
    "math.sin": (_float_math(np.sin), "float"),
    "math.cos": (_float_math(np.cos), "float"),
    "arith.addi": (_int_op(np.add), "int"),
    "arith.subi": (_int_op(np.subtract), "int"),
    "arith.muli": (_int_op(np.multiply), "int"),
    "arith.divui": (_int_op(np.floor_divide, True), "int"),
    "arith.remui": (_int_op(np.remainder, True), "int"),
    "arith.divsi": (_int_op(_divsi), "int"),
    "arith.remsi": (_int_op(_remsi), "int"),
    "arith.floordivsi": (_int_op(np.floor_divide), "int"),
    "arith.ceildivsi": (_int_op(_ceildivsi), "int"),
    "arith.andi": (_int_op(np.bitwise_and), "int"),
    "arith.ori": (_int_op(np.bitwise_or), "int"),
    "arith.xori": (_int_op(np.bitwise_xor), "int"),
    "arith.shli": (_int_op(np.left_shift), "int"),
    "arith.shrsi": (_int_op(np.right_shift), "int"),
    "arith.shrui": (_int_op(np.right_shift, True), "int"),
    "arith.minsi": (_int_op(np.minimum), "int"),
    "arith.maxsi": (_int_op(np.maximum), "int"),
    "arith.minui": (_int_op(np.minimum, True), "int"),
    "arith.maxui": (_int_op(np.maximum, True), "int"),
    "arith.addf": (_float_op(np.add), "float"),
    "arith.subf": (_float_op(np.subtract), "float"),
    "arith.mulf": (_float_op(np.multiply), "float"),
    # (``fastmath<afn>`` too: the NVIDIA epilogue's reciprocal, PTX ``rcp.approx.f32``, within one
    # ulp, is modelled correctly rounded, as nvvm.ex2 is; what the kernel makes of it, a 16-bit
    # reciprocal or a quotient after a Newton step and a correction, is the same either way)
    "arith.divf": (_float_op(np.divide), "float"),
    "arith.maximumf": (_float_op(np.maximum), "float"),
    "arith.minimumf": (_float_op(np.minimum), "float"),
    "arith.maxnumf": (_float_op(np.fmax), "float"),
    "arith.minnumf": (_float_op(np.fmin), "float"),
    "arith.select": (_select, "select"),
    "arith.cmpi": (None, "cmp"),
    "arith.cmpf": (None, "cmpf"),
    "arith.index_cast": (None, "cast"),
    "arith.index_castui": (None, "cast"),
    "arith.extf": (None, "cast"),
    "arith.truncf": (None, "cast"),
    "llvm.fptrunc": (None, "cast"),  # LLVM's fptrunc: round to nearest even, as arith.truncf
    "arith.extsi": (None, "cast"),
    "arith.extui": (None, "cast"),
    "arith.trunci": (None, "cast"),
    "arith.sitofp": (None, "cast"),
    "arith.uitofp": (None, "cast"),
    "arith.fptosi": (None, "cast"),
    "arith.fptoui": (None, "cast"),
}


def _h_arith(k, op):
    """The arith and math ops of ``_ARITH``: elementwise, per lane."""
    fn, kind = _ARITH[op.name]
    ins, (out,) = k._ins(op), k._outs(op)
    rtype = op.results[0].type
    elem = ir.VectorType(rtype).element_type if isinstance(rtype, ir.VectorType) else rtype
    dt = np_dtype(elem)
    pred = ir.IntegerAttr(op.attributes["predicate"]).value if "predicate" in op.attributes else None
    src_t = op.operands[0].type
    src_elem = ir.VectorType(src_t).element_type if isinstance(src_t, ir.VectorType) else src_t
    unsigned_src = op.name in ("arith.uitofp", "arith.extui")
    src_bits = _int_bits(src_elem)

    def run(st):
        args = [st.env[i] for i in ins]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if kind == "cmp":
                r = _cmpi(pred, args[0], args[1], src_bits)
            elif kind == "cmpf":
                r = _cmpf(pred, args[0], args[1])
            elif kind == "cast":
                r = _cast(args[0], dt, unsigned_src, src_bits)
            else:
                r = fn(*args, dt, src_bits)
        st.env[out] = np.asarray(r).astype(dt, copy=False) if kind != "select" else r

    return run


# ---- inline PTX --------------------------------------------------------------------------------
#
# [PTX ISA 8.x, "Logic and Shift Instructions: lop3"] lop3.b32 d, a, b, c, immLut: each bit of d is
# immLut's bit at index (a << 2) | (b << 1) | c of the three inputs' bits (so immLut is F(0xF0,
# 0xCC, 0xAA)). Modelled from that definition for any LUT, on i32 registers ("=r,r,r,r"), written
# ``lop3.b32 $0, $1, $2, $3, LUT;`` with LUT in hex or decimal; the weight-only kernel's
# ``(w & mask) | fill`` is 0xEA. Other inline assembly: the register-A wgmma chain (wgmma.py).
_LOP3 = re.compile(r"^lop3\.b32 \$0, \$1, \$2, \$3, (0x[0-9a-fA-F]{1,2}|0|[1-9][0-9]{0,2});$")


def lop3(a, b, c, lut: int) -> np.ndarray:
    """PTX lop3.b32 on int32 arrays (broadcast), as int32."""
    a, b, c = (np.asarray(x).astype(np.int64) & 0xFFFFFFFF for x in (a, b, c))
    d = np.zeros(np.broadcast(a, b, c).shape, np.int64)
    for i in range(8):
        if lut >> i & 1:
            d |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    d &= 0xFFFFFFFF
    return (d - ((d >> 31) << 32)).astype(np.int32)


def _h_inline_asm(k, op):
    code = ir.StringAttr(op.attributes["asm_string"]).value.strip()
    if not code.startswith("lop3"):
        return h_register_a_wgmma(k, op)
    m = _LOP3.match(code)
    if m is None:
        raise ExecutorError(f"{op_loc(op)}: {code!r}: lop3 is modelled as 'lop3.b32 $0, $1, $2, $3, LUT;' only")
    cons = ir.StringAttr(op.attributes["constraints"]).value
    types = [str(v.type) for v in op.operands] + [str(r.type) for r in op.results]
    if cons != "=r,r,r,r" or types != ["i32"] * 4:
        raise ExecutorError(
            f"{op_loc(op)}: lop3.b32 is modelled on i32 registers ('=r,r,r,r'), not {cons!r} on {types}"
        )
    lut = int(m.group(1), 0)
    if lut > 0xFF:
        raise ExecutorError(f"{op_loc(op)}: lop3.b32's LUT {lut} is past 8 bits")
    ins, (out,) = k._ins(op), k._outs(op)

    def run(st):
        st.env[out] = lop3(*(st.env[i] for i in ins), lut)

    return run


# ---- handlers ---------------------------------------------------------------------------------


def _h_constant(k, op):
    (out,) = k._outs(op)
    attr = op.attributes["value"]
    t = op.results[0].type
    if isinstance(t, ir.VectorType):
        dt = np_dtype(t.element_type)
        dense = ir.DenseElementsAttr(attr)
        if dense.is_splat:
            val = _attr_value(dense.get_splat_value(), dt)
            arr = np.full(tuple(t.shape), val, dtype=dt)
        else:
            arr = np.array([_attr_value(dense[i], dt) for i in range(len(dense))], dtype=dt).reshape(t.shape)
        arr = arr[None]
    else:
        dt = np_dtype(t)
        arr = np.asarray([_attr_value(attr, dt)], dtype=dt)

    def run(st):
        st.env[out] = arr

    return run


def _attr_value(attr, dt):
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        v = attr.value
        if dt == np.bool_:
            return bool(v & 1)
        return v
    raise ExecutorError(f"unsupported constant {attr}")


def _h_poison(k, op):
    (out,) = k._outs(op)
    t = op.results[0].type
    shape = tuple(ir.VectorType(t).shape) if isinstance(t, ir.VectorType) else ()
    dt = np_dtype(ir.VectorType(t).element_type if shape else t)

    def run(st):
        st.env[out] = np.zeros((1,) + shape, dt)

    return run


def _h_noop(k, op):
    ins, outs = k._ins(op), k._outs(op)

    def run(st):
        for i, o in zip(ins, outs):
            st.env[o] = st.env[i]

    return run


def _h_thread_id(k, op):
    (out,) = k._outs(op)
    dim = str(op.attributes["dimension"])

    def run(st):
        st.env[out] = st.tid if dim.endswith("x>") else np.zeros(1, np.int64)

    return run


def _h_workgroup_id(k, op):
    (out,) = k._outs(op)
    d = ir.IntegerAttr(op.attributes["dimension"]).value

    def run(st):
        st.env[out] = st.wg_id[d]

    return run


def _h_workgroup_count(k, op):
    (out,) = k._outs(op)
    d = ir.IntegerAttr(op.attributes["dimension"]).value

    def run(st):
        st.env[out] = np.asarray([k.grid[d]], np.int64)

    return run


def _subspan_layout(op, mt: ir.MemRefType) -> tuple[int | None, list]:
    """(static element offset or None when dynamic, strides) of a binding's memref type. Only
    row-major strides are modelled (what IREE's bindings are)."""
    strides, offset = mt.get_strides_and_offset()
    dyn = ir.ShapedType.get_dynamic_stride_or_offset()
    shape = list(mt.shape)
    expect = 1
    for axis in reversed(range(len(shape))):
        if strides[axis] != dyn and strides[axis] != expect:
            raise ExecutorError(f"{op_loc(op)}: binding memref {mt} is not row-major")
        expect = None if (expect is None or ir.ShapedType.is_dynamic_size(shape[axis])) else expect * shape[axis]
        if expect is None:
            break
    return (None if offset == dyn else offset), strides


def _h_subspan(k, op):
    """A binding's tensor, addressed as IREE's lowering (ConvertToLLVM, binding subspans) does:
    at the element offset of the memref's layout when that is static -- the byte-offset operand
    is then ignored by IREE, so a disagreement between the two is reported, never papered over
    -- and at byte offset / element size when the layout's offset is dynamic. The buffer
    instructions' bounds (``amdgpu.raw_buffer_*``) start at that element and span the memref."""
    (out,) = k._outs(op)
    binding = ir.IntegerAttr(op.attributes["binding"]).value
    mt = ir.MemRefType(op.results[0].type)
    ins = k._ins(op)
    segments = (
        list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        if "operandSegmentSizes" in op.attributes
        else [len(ins), 0]
    )
    off_ids, dim_ids = ins[: segments[0]], ins[segments[0] :]
    dt = np_dtype(mt.element_type)
    static = list(mt.shape)
    if sum(1 for s in static if ir.ShapedType.is_dynamic_size(s)) != len(dim_ids):
        raise ExecutorError(f"{op_loc(op)}: {len(dim_ids)} dynamic dims for {mt}")
    layout_offset, _ = _subspan_layout(op, mt)

    def run(st):
        buf = k.bindings.get(binding)
        if buf is None:
            raise ExecutorError(f"{op_loc(op)}: no buffer given for binding {binding}")
        dyn = iter([_uniform(st.env[i], "dynamic binding size", op) for i in dim_ids])
        shape = [next(dyn) if ir.ShapedType.is_dynamic_size(s) else s for s in static]
        byte_offset = _uniform(st.env[off_ids[0]], "binding offset", op) if off_ids else 0
        if layout_offset is not None:
            if byte_offset != layout_offset * dt.itemsize:
                raise ExecutorError(
                    f"{op_loc(op)}: binding {binding}'s subspan has byte offset {byte_offset} but its memref "
                    f"{mt} puts the tensor at element {layout_offset} (byte {layout_offset * dt.itemsize}); "
                    f"IREE's lowering addresses the memref's offset, so the kernel reads another tensor"
                )
            start = layout_offset * dt.itemsize
        else:
            if byte_offset % dt.itemsize:
                raise ExecutorError(
                    f"{op_loc(op)}: binding {binding}'s byte offset {byte_offset} is not a multiple "
                    f"of the element size {dt.itemsize}"
                )
            start = byte_offset
        raw = buf.reshape(-1).view(np.uint8)
        numel = int(np.prod(shape))
        if start + numel * dt.itemsize > raw.size:
            raise ExecutorError(
                f"{op_loc(op)}: binding {binding} holds {raw.size} bytes; the memref needs bytes "
                f"{start}..{start + numel * dt.itemsize}"
            )
        flat = raw[start : start + numel * dt.itemsize].view(dt)
        mem = MemRef(flat, shape, "global", f"binding{binding}@{start}")
        mem.binding, mem.start = binding, start  # (its address, for TMA's tensor maps: tma.py)
        written = k.written.setdefault(binding, np.zeros(raw.size, bool))
        mem.written = written[start : start + numel * dt.itemsize].reshape(numel, dt.itemsize)
        st.env[out] = mem

    return run


def _h_constant_load(k, op):
    """hal.interface.constant.load: a push constant (how dynamic sizes reach the kernel)."""
    (out,) = k._outs(op)
    ordinal = ir.IntegerAttr(op.attributes["ordinal"]).value
    dt = np_dtype(op.results[0].type)

    def run(st):
        if ordinal >= len(k.constants):
            raise ExecutorError(f"{op_loc(op)}: push constant {ordinal} was not given ({len(k.constants)} given)")
        st.env[out] = np.asarray([k.constants[ordinal]], np.int64).astype(np.uint32).view(np.int32).astype(dt)

    return run


def _h_memref_dim(k, op):
    """memref.dim: a memref's extent along a (uniform) dimension, its run-time one when dynamic."""
    (out,) = k._outs(op)
    ins = k._ins(op)

    def run(st):
        mem = st.env[ins[0]]
        i = _uniform(st.env[ins[1]], "memref.dim index", op)
        if not 0 <= i < len(mem.shape):
            raise ExecutorError(f"{op_loc(op)}: memref.dim {i} of a rank-{len(mem.shape)} memref")
        st.env[out] = np.asarray([mem.shape[i]], np.int64)

    return run


def _h_alloc(k, op):
    (out,) = k._outs(op)
    mt = ir.MemRefType(op.results[0].type)
    if "workgroup" not in str(mt.memory_space):
        raise ExecutorError(f"{op_loc(op)}: only workgroup-memory allocations are supported")
    dt = np_dtype(mt.element_type)
    shape = list(mt.shape)
    numel = int(np.prod(shape))

    def run(st):
        data = np.zeros((st.G, numel), dt)
        base = st.lds_offset
        st.lds_offset = base + -(-numel * dt.itemsize // 16) * 16
        mem = MemRef(data, shape, "lds", f"lds@{base}", base)
        st.env[out] = mem
        st.lds[base] = mem  # workgroup memory by byte address (wgmma descriptors address it)
        st.race_meta[id(mem)] = (
            np.full((st.G, numel), -1, np.int32),
            np.full((st.G, numel), -1, np.int64),
            np.full((st.G, numel), -1, np.int32),
            np.full((st.G, numel), -1, np.int64),
        )
        if getattr(k, "uses_dsmem", False):  # (w_phase, w_rank, r_phase, r_rank): cluster_order_check
            st.dsmem[id(mem)] = tuple(np.full((st.G, numel), -1, t) for t in (np.int32, np.int8, np.int32, np.int8))

    return run


def _barrier(k, st, op):
    if st.mask is not None and not st.mask.all():
        raise ExecutorError(f"{op_loc(op)}: barrier under divergent control flow")
    st.epoch += 1
    k.stats.barriers += 1


def _h_barrier(k, op):
    def run(st):
        _barrier(k, st, op)

    return run


# -- named barriers ---------------------------------------------------------------------------------
#
# ``nvvm.barrier`` with an id and a thread count (``bar.sync id, n``) arrives at barrier ``id`` of
# the workgroup and waits until n threads arrived; ``nvvm.barrier.arrive`` (``bar.arrive``) only
# arrives [PTX 9.7.13.1, "bar, barrier"]. Ids 1-15 (0 is the CTA barrier, ``gpu.barrier``), n a
# multiple of 32, whole warps arriving, every arrival of one completion counting the same n.
# The race model gives a named barrier no memory ordering: a kernel that orders shared-memory data
# by one is reported racing (conservative). FlashAttention-3's ping-pong orders only when each
# warpgroup issues its wgmmas. Arrivals left pending at the kernel's end are allowed (the
# ping-pong's last hand-over has no one to wait for it). A side of a warp-role split that uses
# named barriers runs as one task per warpgroup (``core.Roles``), so one warpgroup can wait while
# another goes on; outside a split every warpgroup runs in lockstep, and a barrier only some of
# them could complete is a deadlock.

NAMED_BARRIERS = 16


class _NamedBarrier:
    """Per workgroup row: threads arrived, the count they wait for (0: none arrived yet), and
    completions so far."""

    def __init__(self, G: int):
        self.arrived = np.zeros(G, np.int64)
        self.expected = np.zeros(G, np.int64)
        self.completed = np.zeros(G, np.int64)


def _arriving(st, op, vid, act, what: str) -> int:
    v = np.asarray(per_lane(st.env[vid], st.L)).reshape(st.L)[act]
    if not np.all(v == v[0]):
        raise ExecutorError(f"{op_loc(op)}: the {what} differs between the threads that arrive")
    return int(v[0])


def _named_barrier(k, op, bid_id, n_id, wait: bool):
    what = "bar.sync" if wait else "bar.arrive"

    def run(st):
        act = st.active()
        bid = _arriving(st, op, bid_id, act, "barrier id")
        n = _arriving(st, op, n_id, act, "thread count")
        if not 1 <= bid < NAMED_BARRIERS:
            raise ExecutorError(
                f"{op_loc(op)}: {what} on barrier {bid}: named barriers are 1-{NAMED_BARRIERS - 1} "
                f"(0 is the CTA barrier, gpu.barrier)"
            )
        if n <= 0 or n % 32 or n > st.T:
            raise ExecutorError(
                f"{op_loc(op)}: {what} counts {n} threads: a multiple of 32, at most the workgroup's {st.T}"
            )
        warps = act.reshape(st.G, -1, 32) if st.T % 32 == 0 else None
        if warps is None or not np.all(warps.all(axis=2) == warps.any(axis=2)):
            raise ExecutorError(f"{op_loc(op)}: {what} by part of a warp (whole warps arrive at a named barrier)")
        bars = st.named_barriers
        b = bars.setdefault(bid, _NamedBarrier(st.G))
        count = act.reshape(st.G, st.T).sum(axis=1)
        rows = count > 0
        clash = rows & (b.expected > 0) & (b.expected != n)
        if clash.any():
            raise ExecutorError(
                f"{op_loc(op)}: {what} on barrier {bid} counts {n} threads, the arrivals before it "
                f"{int(b.expected[clash][0])}"
            )
        b.expected[rows] = n
        b.arrived[rows] += count[rows]
        if (b.arrived > b.expected).any():
            g = int(np.argmax(b.arrived > b.expected))
            raise ExecutorError(f"{op_loc(op)}: {int(b.arrived[g])} threads arrive at barrier {bid}, which counts {n}")
        before = b.completed.copy()
        full = rows & (b.arrived == b.expected)
        b.completed[full] += 1
        b.arrived[full] = 0
        b.expected[full] = 0
        k.stats.named_arrivals += int(count.sum())
        role_progress(st)
        while wait and not np.all(b.completed[rows] > before[rows]):
            g = int(np.argmax(rows & (b.completed <= before)))
            why = (
                f"{op_loc(op)}: threads of workgroup row {g} wait at barrier {bid} for {n} threads, "
                f"{int(b.arrived[g])} arrived"
            )
            wait_or_fail(st, why, "the warpgroups run in lockstep here, so none can arrive later")

    return run


def _h_nvvm_barrier(k, op):
    if len(op.operands) == 0:
        return _h_barrier(k, op)
    if len(op.operands) != 2:
        raise ExecutorError(f"{op_loc(op)}: nvvm.barrier is modelled with both an id and a thread count, or neither")
    bid, n = k._ins(op)
    return _named_barrier(k, op, bid, n, wait=True)


def _h_nvvm_barrier_arrive(k, op):
    if len(op.operands) != 2:
        raise ExecutorError(f"{op_loc(op)}: nvvm.barrier.arrive is modelled with an id and a thread count")
    bid, n = k._ins(op)
    return _named_barrier(k, op, bid, n, wait=False)


def _uses_named_barrier(region) -> bool:
    for block in region.blocks:
        for o in block.operations:
            o = o.operation
            if o.name == "nvvm.barrier.arrive" or (o.name == "nvvm.barrier" and len(o.operands)):
                return True
            if any(_uses_named_barrier(r) for r in o.regions):
                return True
    return False


# -- memory ---------------------------------------------------------------------------------------


def _vec_len(t) -> tuple[int, tuple]:
    if isinstance(t, ir.VectorType):
        return int(np.prod(t.shape)), tuple(t.shape)
    return 1, ()


def _access(
    k,
    st: State,
    op,
    mem: MemRef,
    idx_ids,
    n: int,
    *,
    write: bool,
    values=None,
    buffer_checked: bool = False,
    index_offset: int = 0,
    sgpr_ids=(),
    align: int = 0,
):
    """Read (returns values) or write ``n`` consecutive elements per active lane; a global access
    that promises ``align`` bytes of alignment (``vector.load`` / ``store``'s ``alignment``) must
    start on a multiple of it, counted from the binding's start (IREE's bindings are 64-byte
    aligned), as a misaligned vector access faults on the GPU."""
    active = st.active()
    idx = [per_lane(st.env[i], st.L) for i in idx_ids]
    lin = mem.linear(idx) + index_offset
    if sgpr_ids:
        lin = lin + per_lane(st.env[sgpr_ids[0]], st.L)
    lin = per_lane(lin, st.L)
    elems = lin[:, None] + np.arange(n)[None, :]  # (L, n)
    inb = (elems >= 0) & (elems < mem.numel)
    act = active[:, None] & np.ones((1, n), bool)
    if mem.space == "lds":
        bad = act & ~inb
        if bad.any():
            lane = int(np.argwhere(bad)[0][0])
            raise ExecutorError(
                f"{op_loc(op)}: LDS access out of bounds: lane {lane % st.T} of workgroup "
                f"{lane // st.T} touches element {int(elems[lane].min())}..{int(elems[lane].max())} "
                f"of {mem.numel} ({mem.name})"
            )
        race_check(k, st, op, mem, elems, act, write)
        _in_flight_check(st, op, mem, elems, act)
        _bank_conflicts(k, st, op, mem, lin, n, active)
        rows = st.wg_local[:, None]
        if write:
            lds_write_check(st, op, mem, elems, act, lands=True)
            vals = per_lane(values, st.L).reshape(st.L, n)
            mem.data[rows[act[:, 0]], elems[act[:, 0]]] = vals[act[:, 0]]
            return None
        return mem.data[rows, np.clip(elems, 0, mem.numel - 1)] * 1
    # global memory
    start = getattr(mem, "start", None)
    if align > 1 and start is not None:
        addr = start + lin * mem.elem_bytes
        off = active & (addr % align != 0)
        if off.any():
            lane = int(np.argmax(off))
            raise ExecutorError(
                f"{op_loc(op)}: a {n * mem.elem_bytes}-byte access promising {align}-byte alignment starts at byte "
                f"{int(addr[lane])} of binding {mem.binding} (lane {lane % st.T} of workgroup {lane // st.T})"
            )
    bytes_per_lane = n * mem.elem_bytes
    waves = int(np.ceil(active.sum() / k.wave_size)) if active.any() else 0
    (k.stats.global_stores if write else k.stats.global_loads)[bytes_per_lane] += waves
    if not buffer_checked:
        bad = act & ~inb
        if bad.any():
            lane = int(np.argwhere(bad)[0][0])
            raise ExecutorError(
                f"{op_loc(op)}: global access out of bounds: lane {lane % st.T} of workgroup "
                f"{lane // st.T} touches element {int(elems[lane].max())} of {mem.numel} ({mem.name})"
            )
    ok = act & inb
    if write:
        vals = np.asarray(per_lane(values, st.L)).reshape(st.L, n)
        mem.data[elems[ok]] = vals[ok]
        if mem.written is not None:
            mem.written[elems[ok]] = True
        return None
    out = np.zeros((st.L, n), mem.data.dtype)
    out[ok] = mem.data[elems[ok]]
    return out


def race_check(k, st, op, mem, elems, act, write, rows=None, lanes=None):
    """Races on LDS elements ``elems`` (L, n) of ``mem`` accessed by the active lanes: in the
    shared memory of their own workgroup rows, or of ``rows`` (L,) (another CTA of the cluster,
    a shared::cluster access), the accessing thread then named by ``lanes`` (L,)
    (``remote_lane``). Within a CTA barrier epoch (``_report_race``), and across the CTAs of a
    cluster (``cluster_order_check``, which raises)."""
    w_lane, w_epoch, r_lane, r_epoch = st.race_meta[id(mem)]
    lanes = np.broadcast_to((st.tid if lanes is None else lanes)[:, None], elems.shape)
    rows = np.broadcast_to((st.wg_local if rows is None else rows)[:, None], elems.shape)
    sel = act
    e, rw, ln = elems[sel], rows[sel], lanes[sel]
    if e.size == 0:
        return
    order = st.dsmem.get(id(mem))
    if order is not None:
        who = np.broadcast_to(np.arange(st.L)[:, None], elems.shape)[sel]
        cluster_order_check(st, op, mem, order, rw, e, who, write)
    cur = st.epoch
    if write:
        war = (r_epoch[rw, e] == cur) & (r_lane[rw, e] != ln)
        waw = (w_epoch[rw, e] == cur) & (w_lane[rw, e] != ln)
        if war.any() or waw.any():
            i = int(np.argmax(war | waw))
            kind = "write after another lane's read" if war[i] else "write after another lane's write"
            _report_race(k, op, mem, kind, int(e[i]), _lane_name(st, int(ln[i])))
        w_lane[rw, e] = ln
        w_epoch[rw, e] = cur
    else:
        raw = (w_epoch[rw, e] == cur) & (w_lane[rw, e] != ln)
        if raw.any():
            i = int(np.argmax(raw))
            other = _lane_name(st, int(w_lane[rw[i], e[i]]))
            _report_race(k, op, mem, f"read of lane {other}'s write", int(e[i]), _lane_name(st, int(ln[i])))
        prev_same = r_epoch[rw, e] == cur
        r_lane[rw, e] = np.where(prev_same & (r_lane[rw, e] != ln), -2, ln)
        r_epoch[rw, e] = cur
        # several lanes of this very access reading one element: mark as shared
        back = r_lane[rw, e]
        r_lane[rw[back != ln], e[back != ln]] = -2


def remote_lane(st, lanes: np.ndarray) -> np.ndarray:
    """How ``race_check`` names threads accessing another CTA's shared memory: thread t of
    cluster rank q is ``T * (q + 1) + t``, apart from every thread of the CTA itself (0..T-1)."""
    return st.T * (st.rank[lanes] + 1) + st.tid[lanes]


def _lane_name(st, ln: int):
    return ln if ln < st.T else f"{ln % st.T} of cluster rank {ln // st.T - 1}"


def cluster_order_check(st, op, mem, order, rows, e, lanes, write: bool) -> None:
    """Distributed shared memory ordering (tma.py, "Clusters"): lanes ``lanes`` access elements
    ``e`` of ``mem`` in the shared memory of workgroup rows ``rows`` (flat, one per access).
    ``order`` holds per row and element the cluster phase (the row's ``State.cluster_count``:
    barrier.cluster completed so far) and CTA rank of the last write, and of the reads (rank -2:
    several CTAs read). Across CTAs only a completed barrier.cluster orders: a read of an element
    another CTA wrote in the current phase, or a write of one another CTA read or wrote in it,
    is an error; accesses of one CTA among themselves are ``race_check``'s (epochs)."""
    w_phase, w_rank, r_phase, r_rank = order
    cur = st.cluster_count[rows].astype(np.int32)
    q = st.rank[lanes].astype(np.int8)
    wrote = (w_phase[rows, e] == cur) & (w_rank[rows, e] != q)
    read = (r_phase[rows, e] == cur) & (r_rank[rows, e] != q) if write else np.zeros_like(wrote)
    if wrote.any() or read.any():
        i = int(np.argmax(wrote | read))
        row, el = int(rows[i]), int(e[i])
        if wrote[i]:
            other = f"CTA {int(w_rank[row, el])} of the cluster wrote"
        else:
            r = int(r_rank[row, el])
            other = "several CTAs of the cluster read" if r == -2 else f"CTA {r} of the cluster read"
        _cluster_race(st, op, mem, int(lanes[i]), row, el, "writes" if write else "reads", other)
    if write:
        w_phase[rows, e] = cur
        w_rank[rows, e] = q
        clash = w_rank[rows, e] != q  # CTAs writing one element in this very access
        if clash.any():
            i = int(np.argmax(clash))
            other = f"CTA {int(w_rank[rows[i], e[i]])} of the cluster writes at the same time"
            _cluster_race(st, op, mem, int(lanes[i]), int(rows[i]), int(e[i]), "writes", other)
    else:
        prev = (r_phase[rows, e] == cur) & (r_rank[rows, e] != q)
        r_rank[rows, e] = np.where(prev, -2, q)
        r_phase[rows, e] = cur
        back = r_rank[rows, e]
        r_rank[rows[back != q], e[back != q]] = -2  # CTAs reading one element in this very access


def _cluster_race(st, op, mem, lane: int, row: int, e: int, verb: str, other: str):
    raise ExecutorError(
        f"{op_loc(op)}: distributed shared memory race: thread {lane % st.T} of workgroup row "
        f"{int(st.wg_local[lane])} (cluster rank {int(st.rank[lane])}) {verb} element {e} of {mem.name} "
        f"of cluster rank {int(st.row_rank[row])} (workgroup row {row}), which {other} with no "
        f"barrier.cluster completed in between (a CTA barrier orders no other CTA's accesses)"
    )


def _in_flight_check(st, op, mem, elems, act):
    """An LDS access to elements an async copy has not finished writing (no wait since its
    issue) reads stale data or loses a write: the hardware gives no order."""
    flying = st.in_flight.get(id(mem))
    if flying is None:
        return
    rows = np.broadcast_to(st.wg_local[:, None], elems.shape)
    hit = act & flying[rows, np.clip(elems, 0, mem.numel - 1)]
    if hit.any():
        lane, j = (int(x) for x in np.argwhere(hit)[0])
        raise ExecutorError(
            f"{op_loc(op)}: lane {lane % st.T} of workgroup {lane // st.T} accesses element "
            f"{int(elems[lane, j])} of {mem.name} while an async copy to it is in flight "
            f"(no nvgpu.device_async_wait covers the copy)"
        )


def _report_race(k, op, mem, kind, elem, lane):
    msg = f"{op_loc(op)}: LDS race on {mem.name} element {elem}: lane {lane} {kind} with no barrier in between"
    if msg not in k.stats.races:
        k.stats.races.append(msg)


def _bank_conflicts(k, st, op, mem, lin, n, active):
    esize = mem.elem_bytes
    total_bytes = n * esize
    piece = min(16, total_bytes)
    pieces = max(1, total_bytes // piece)
    dw_per = max(1, piece // 4)
    lanes_per_phase = max(1, (k.banks * 4) // max(piece, 4))
    W = k.wave_size
    nwaves = st.L // W
    addr = mem.base + lin.astype(np.int64) * esize  # byte address of each lane's first element
    act = active.reshape(nwaves, W)
    for p in range(pieces):
        a = addr + p * piece
        dwords = (a[:, None] // 4) + np.arange(dw_per)[None, :]  # (L, dw)
        dwords = dwords.reshape(nwaves, W, dw_per)
        phases = W // lanes_per_phase if W >= lanes_per_phase else 1
        lp = min(lanes_per_phase, W)
        d = dwords.reshape(nwaves, phases, lp * dw_per)
        m = np.repeat(act.reshape(nwaves, phases, lp), dw_per, axis=2)
        live = m.any(axis=2)
        d = np.where(m, d, -1).reshape(-1, lp * dw_per)
        d.sort(axis=1)
        distinct = np.concatenate([np.ones((d.shape[0], 1), bool), d[:, 1:] != d[:, :-1]], axis=1) & (d >= 0)
        banks = np.where(distinct, d % k.banks, k.banks)
        counts = np.zeros((d.shape[0], k.banks + 1), np.int64)
        np.add.at(counts, (np.repeat(np.arange(d.shape[0]), d.shape[1]), banks.reshape(-1)), 1)
        degree = counts[:, : k.banks].max(axis=1)
        live = live.reshape(-1)
        k.stats.lds_access_pieces += int(live.sum())
        k.stats.lds_ideal_cycles += int(live.sum())
        cyc = int(np.maximum(degree[live], 1).sum())
        k.stats.lds_cycles += cyc
        where = k.op_names.get(op) or k.op_names.setdefault(op, op_loc(op))
        k.stats.lds_pieces_by_op[where] += int(live.sum())
        if cyc > live.sum():
            k.stats.lds_conflicts_by_op[where] += cyc - int(live.sum())


def _alignment(op) -> int:
    """The bytes of alignment a vector.load / store promises (0: none)."""
    return ir.IntegerAttr(op.attributes["alignment"]).value if "alignment" in op.attributes else 0


def _h_vector_load(k, op):
    (out,) = k._outs(op)
    ins = k._ins(op)
    n, shape = _vec_len(op.results[0].type)

    align = _alignment(op)

    def run(st):
        mem = st.env[ins[0]]
        v = _access(k, st, op, mem, ins[1:], n, write=False, align=align)
        st.env[out] = v.reshape((st.L,) + shape)

    return run


def _h_vector_store(k, op):
    ins = k._ins(op)
    n, _ = _vec_len(op.operands[0].type)

    align = _alignment(op)

    def run(st):
        _access(k, st, op, st.env[ins[1]], ins[2:], n, write=True, values=st.env[ins[0]], align=align)

    return run


def _h_memref_load(k, op):
    (out,) = k._outs(op)
    ins = k._ins(op)

    def run(st):
        st.env[out] = _access(k, st, op, st.env[ins[0]], ins[1:], 1, write=False).reshape(st.L)

    return run


def _h_memref_store(k, op):
    ins = k._ins(op)

    def run(st):
        _access(k, st, op, st.env[ins[1]], ins[2:], 1, write=True, values=st.env[ins[0]])

    return run


def _raw_buffer_parts(op, k, value_first: bool):
    ins = k._ins(op)
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    pos = 0
    parts = []
    for s in seg:
        parts.append(ins[pos : pos + s])
        pos += s
    if value_first:
        value, mem, idx, sgpr = parts
    else:
        value, (mem, idx, sgpr) = None, parts
    index_offset = ir.IntegerAttr(op.attributes["indexOffset"]).value if "indexOffset" in op.attributes else 0
    checked = ir.BoolAttr(op.attributes["boundsCheck"]).value if "boundsCheck" in op.attributes else True
    return value, mem[0], idx, sgpr, index_offset, checked


def _check_buffer_width(op, t):
    n, _ = _vec_len(t)
    elem = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
    bits = n * np_dtype(elem).itemsize * 8
    if bits > 128:
        raise ExecutorError(f"{op_loc(op)}: {op.name} moves {bits} bits per lane; buffer instructions move at most 128")


def _h_raw_buffer_load(k, op):
    (out,) = k._outs(op)
    _, mem_id, idx, sgpr, ioff, checked = _raw_buffer_parts(op, k, False)
    n, shape = _vec_len(op.results[0].type)
    _check_buffer_width(op, op.results[0].type)

    def run(st):
        v = _access(
            k, st, op, st.env[mem_id], idx, n, write=False, buffer_checked=checked, index_offset=ioff, sgpr_ids=sgpr
        )
        st.env[out] = v.reshape((st.L,) + shape)

    return run


def _h_raw_buffer_store(k, op):
    value, mem_id, idx, sgpr, ioff, checked = _raw_buffer_parts(op, k, True)
    n, _ = _vec_len(op.operands[0].type)
    _check_buffer_width(op, op.operands[0].type)

    def run(st):
        _access(
            k,
            st,
            op,
            st.env[mem_id],
            idx,
            n,
            write=True,
            values=st.env[value[0]],
            buffer_checked=checked,
            index_offset=ioff,
            sgpr_ids=sgpr,
        )

    return run


# -- vectors --------------------------------------------------------------------------------------


def _static_pos(op):
    pos = list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))
    if any(p < 0 for p in pos):
        raise ExecutorError(f"{op_loc(op)}: dynamic vector positions are not supported")
    return tuple(pos)


def _h_extract(k, op):
    (out,) = k._outs(op)
    ins = k._ins(op)
    pos = _static_pos(op)

    def run(st):
        st.env[out] = np.asarray(st.env[ins[0]])[(slice(None),) + pos]

    return run


def _h_insert(k, op):
    (out,) = k._outs(op)
    ins = k._ins(op)
    pos = _static_pos(op)
    _, shape = _vec_len(op.results[0].type)

    def run(st):
        val = np.asarray(st.env[ins[0]])
        dest = np.array(per_lane(st.env[ins[1]], max(val.shape[0], np.asarray(st.env[ins[1]]).shape[0])))
        dest[(slice(None),) + pos] = val
        st.env[out] = dest

    return run


def _h_from_elements(k, op):
    (out,) = k._outs(op)
    ins = k._ins(op)
    _, shape = _vec_len(op.results[0].type)

    def run(st):
        parts = [np.asarray(st.env[i]) for i in ins]
        n = max(p.shape[0] for p in parts)
        st.env[out] = np.stack([per_lane(p, n) for p in parts], axis=1).reshape((n,) + shape)

    return run


def _h_shape_cast(k, op):
    (out,) = k._outs(op)
    (src,) = k._ins(op)
    _, shape = _vec_len(op.results[0].type)
    _, src_shape = _vec_len(op.operands[0].type)

    def run(st):
        v = np.asarray(st.env[src])
        st.env[out] = v.reshape((v.shape[0],) + shape)

    return run


def _h_vector_bitcast(k, op):
    """vector.bitcast: the same bytes as another element type, the last dimension rescaled
    (``vector<2xf16>`` <-> ``vector<1xi32>``: element 0 in the low half, little-endian as on the
    GPU); a bit-for-bit reinterpretation of each lane's value, no rounding."""
    (out,) = k._outs(op)
    (src,) = k._ins(op)
    src_t, dst_t = ir.VectorType(op.operands[0].type), ir.VectorType(op.results[0].type)
    _, shape = _vec_len(dst_t)
    if str(src_t.element_type) in _SUB_BYTE or str(dst_t.element_type) in _SUB_BYTE:
        return _sub_byte_bitcast(op, out, src, src_t, dst_t, shape)
    src_dt, dst_dt = np_dtype(src_t.element_type), np_dtype(dst_t.element_type)

    def run(st):
        v = np.ascontiguousarray(np.asarray(st.env[src]).astype(src_dt, copy=False))
        st.env[out] = v.view(dst_dt).reshape((v.shape[0],) + shape)

    return run


# 4- and 6-bit register values, as the ISA model's matrix instructions take them (ml_dtypes:
# one code a byte, in its low bits). They exist only in registers: memory holds their bytes.
_SUB_BYTE = {
    "f4E2M1FN": (4, ml_dtypes.float4_e2m1fn),
    "f6E2M3FN": (6, ml_dtypes.float6_e2m3fn),
    "f6E3M2FN": (6, ml_dtypes.float6_e3m2fn),
    "i4": (4, ml_dtypes.int4),
}


def _bit_string(v: np.ndarray, t: ir.Type) -> np.ndarray:
    """Each lane's vector as its little-endian bit string (lanes, bits): element i in bits
    [i*w, (i+1)*w) of a ``w``-bit type, low bit first."""
    name = str(t)
    if name in _SUB_BYTE:
        w, dt = _SUB_BYTE[name]
        codes = np.ascontiguousarray(v.astype(dt, copy=False)).view(np.uint8) & ((1 << w) - 1)
    else:  # its little-endian bytes
        codes, w = np.ascontiguousarray(v.astype(np_dtype(t), copy=False)).view(np.uint8), 8
    bits = np.unpackbits(codes.reshape(codes.shape[0], -1)[..., None], axis=-1, bitorder="little")
    return bits[..., :w].reshape(codes.shape[0], -1)


def _sub_byte_bitcast(op, out, src, src_t, dst_t, shape):
    """vector.bitcast to or from a 4- or 6-bit element type: the bits of each lane's vector
    regrouped (LLVM's order: element 0 in the low bits of byte 0, fp6 straddling bytes)."""
    d_name = str(dst_t.element_type)

    def run(st):
        v = np.asarray(st.env[src])
        bits = _bit_string(v, src_t.element_type)
        if d_name in _SUB_BYTE:
            w, dt = _SUB_BYTE[d_name]
            fields = bits.reshape(bits.shape[0], -1, w).astype(np.uint8)
            codes = (fields << np.arange(w, dtype=np.uint8)).sum(axis=-1, dtype=np.uint8)
            st.env[out] = codes.view(dt).reshape((v.shape[0],) + shape)
        else:
            raw = np.packbits(bits.reshape(bits.shape[0], -1, 8), axis=-1, bitorder="little")
            words = raw.reshape(bits.shape[0], -1).view(np_dtype(dst_t.element_type))
            st.env[out] = words.reshape((v.shape[0],) + shape)

    return run


def _h_broadcast(k, op):
    (out,) = k._outs(op)
    (src,) = k._ins(op)
    _, shape = _vec_len(op.results[0].type)
    src_rank = len(_vec_len(op.operands[0].type)[1])

    def run(st):
        v = np.asarray(st.env[src])
        if src_rank == 0:
            v = v.reshape((v.shape[0],) + (1,) * len(shape))
        st.env[out] = np.broadcast_to(v, (v.shape[0],) + shape).copy()

    return run


def _strided_1d(op, name):
    offsets = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["offsets"])]
    strides = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["strides"])]
    if len(offsets) != 1 or strides != [1]:
        raise ExecutorError(f"{op_loc(op)}: only 1-D unit-stride {name} is supported")
    return offsets[0]


def _h_insert_strided(k, op):
    (out,) = k._outs(op)
    src, dst = k._ins(op)
    off = _strided_1d(op, "vector.insert_strided_slice")
    n, _ = _vec_len(op.operands[0].type)

    def run(st):
        sv = np.asarray(st.env[src])
        d = np.array(per_lane(st.env[dst], max(sv.shape[0], np.asarray(st.env[dst]).shape[0])))
        d[:, off : off + n] = sv
        st.env[out] = d

    return run


def _h_extract_strided(k, op):
    """A unit-stride slice along the leading dimension (the rest whole): contiguous in the
    flattened per-lane vector."""
    (out,) = k._outs(op)
    (src,) = k._ins(op)
    _, shape = _vec_len(op.operands[0].type)
    off = _strided_1d(op, "vector.extract_strided_slice") * int(np.prod(shape[1:], dtype=np.int64))
    n, out_shape = _vec_len(op.results[0].type)

    def run(st):
        v = np.asarray(st.env[src])
        if len(shape) == 1:
            st.env[out] = v[..., off : off + n]
        else:  # per-lane values keep the vector's shape: slice the flattened elements
            flat = v.reshape(v.shape[: v.ndim - len(shape)] + (-1,))
            st.env[out] = flat[..., off : off + n].reshape(flat.shape[:-1] + out_shape)

    return run


# -- warp-collective loads --------------------------------------------------------------------------


def _active_waves(st, wave: int, op, what: str) -> np.ndarray | None:
    """The lanes running a warp-wide op: every lane (None) or whole waves only. A wave that skips a
    uniform branch issues nothing; one with some lanes active and some not is refused (the matrix
    instructions and ldmatrix are undefined under divergence within a warp)."""
    if st.mask is None or st.mask.all():
        return None
    waves = np.asarray(st.mask).reshape(-1, wave)
    if not np.all(waves.all(axis=1) | ~waves.any(axis=1)):
        raise ExecutorError(f"{op_loc(op)}: {what} under control flow divergent within a wave")
    return np.asarray(st.mask)


def _h_ldmatrix(k, op):
    """PTX ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16.

    Matrix i (an 8x8 block of 16-bit elements, each row 16 contiguous bytes) has its 8 row
    addresses supplied by lanes 8i..8i+7 (lane 8i+r: row r). Thread t receives, in 32-bit
    register i, row t/4 of matrix i, bytes 4*(t%4)..4*(t%4)+3 (two 16-bit or four 8-bit elements);
    with .trans (16-bit only), column t/4 of matrix i: the elements of rows 2*(t%4) and 2*(t%4)+1.
    """
    (out,) = k._outs(op)
    mem_id, *idx_ids = k._ins(op)
    n = ir.IntegerAttr(op.attributes["numTiles"]).value
    trans = "transpose" in op.attributes and ir.BoolAttr(op.attributes["transpose"]).value
    vt = ir.VectorType(op.results[0].type)
    per = vt.shape[1]  # elements per 32-bit register
    if trans and per != 2:
        raise ExecutorError(f"{op_loc(op)}: ldmatrix .trans moves 16-bit elements only, the result is {vt}")
    W = k.wave_size

    def run(st):
        lanes = _active_waves(st, W, op, "nvgpu.ldmatrix")
        mem = st.env[mem_id]
        if mem.space != "lds":
            raise ExecutorError(f"{op_loc(op)}: ldmatrix reads shared memory only")
        lin = per_lane(mem.linear([per_lane(st.env[i], st.L) for i in idx_ids]), st.L)  # row starts
        nw = st.L // W
        rows = lin.reshape(nw, W)
        t = np.arange(W)
        # element index of (warp, lane t, register i, element j)
        if trans:  # .trans: column t/4 of matrix i, rows 2*(t%4)+j -- each row from the lane that gave it
            src_lane = 8 * np.arange(n)[None, :, None] + (per * (t % 4))[:, None, None] + np.arange(per)[None, None, :]
            elems = rows[:, src_lane] + (t // 4)[None, :, None, None]
        else:
            src_lane = 8 * np.arange(n)[None, :] + (t // 4)[:, None]  # (W, n): lane that gave the row
            elems = rows[:, src_lane][..., None] + (per * (t % 4))[None, :, None, None] + np.arange(per)
        elems = elems.reshape(st.L, n * per)
        act = np.ones(elems.shape, bool) if lanes is None else np.repeat(lanes[:, None], n * per, axis=1)
        inb = (elems >= 0) & (elems < mem.numel)
        if not inb[act].all():
            raise ExecutorError(f"{op_loc(op)}: ldmatrix reads outside {mem.name}")
        elems = np.where(act, elems, 0)  # (a skipping wave's lanes read nothing; their values are not used)
        race_check(k, st, op, mem, elems, act, write=False)
        _in_flight_check(st, op, mem, elems, act)
        # Bank conflicts: each matrix is served as one phase of its 8 row reads (16 bytes each).
        for i in range(n):
            row_lanes = np.zeros(st.L, bool)
            row_lanes.reshape(nw, W)[:, 8 * i : 8 * i + 8] = True
            if lanes is not None:
                row_lanes &= lanes
            _bank_conflicts(k, st, op, mem, np.where(row_lanes, lin, 0), 16 // mem.elem_bytes, row_lanes)
        st.env[out] = mem.data[st.wg_local[:, None], elems].reshape((st.L,) + tuple(vt.shape))

    return run


# -- matrix ops -----------------------------------------------------------------------------------


def _h_async_copy(k, op):
    """nvgpu.device_async_copy (PTX cp.async): ``dstElements`` elements from global memory to
    LDS per lane, of which the first ``srcElements`` (all when absent) are read and the rest
    zero-filled. The data lands when a wait covers the copy's group, not before: an LDS access
    to the elements in between is an error (``_in_flight_check``). The write counts for races at
    its issue (other lanes' earlier reads since the last barrier) and again where it lands."""
    (out,) = k._outs(op)
    ins = k._ins(op)
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    dst_id, dst_idx = ins[0], ins[1 : 1 + seg[1]]
    src_id = ins[1 + seg[1]]
    src_idx = ins[2 + seg[1] : 2 + seg[1] + seg[3]]
    src_n = ins[2 + seg[1] + seg[3]] if seg[4] else None
    n = ir.IntegerAttr(op.attributes["dstElements"]).value

    def run(st):
        dst, src = st.env[dst_id], st.env[src_id]
        if dst.space != "lds" or src.space == "lds":
            raise ExecutorError(f"{op_loc(op)}: async copies go from global memory to LDS")
        active = st.active()
        count = np.full(st.L, n, np.int64) if src_n is None else per_lane(st.env[src_n], st.L).astype(np.int64)
        if ((count < 0) | (count > n)).any():
            raise ExecutorError(f"{op_loc(op)}: srcElements outside 0..{n}")
        vals = np.zeros((st.L, n), src.data.dtype)
        for m in range(1, n + 1):  # lanes reading m elements (one access per distinct count)
            sel = active & (count == m)
            if sel.any():
                saved = st.mask
                st.mask = sel
                try:
                    got = _access(k, st, op, src, src_idx, m, write=False)
                finally:
                    st.mask = saved
                vals[sel, :m] = got[sel]
        elems = (
            per_lane(dst.linear([per_lane(st.env[i], st.L) for i in dst_idx]), st.L)[:, None] + np.arange(n)[None, :]
        )
        if (active[:, None] & ((elems < 0) | (elems >= dst.numel))).any():
            raise ExecutorError(f"{op_loc(op)}: async copy outside {dst.name}")
        act = active[:, None] & np.ones((1, n), bool)
        race_check(k, st, op, dst, elems, act, write=True)
        _in_flight_check(st, op, dst, elems, act)
        lds_write_check(st, op, dst, elems, act, lands=False)
        _bank_conflicts(k, st, op, dst, elems[:, 0], n, active)
        flying = st.in_flight.setdefault(id(dst), np.zeros((st.G, dst.numel), bool))
        rows = np.broadcast_to(st.wg_local[:, None], elems.shape)
        flying[rows[act], elems[act]] = True
        st.async_open.append((op, dst, elems, act, vals))
        st.env[out] = np.zeros(1, np.int64)  # the token

    return run


def _h_async_group(k, op):
    (out,) = k._outs(op)

    def run(st):
        if st.mask is not None and not st.mask.all():
            raise ExecutorError(f"{op_loc(op)}: async copy group committed under divergent control flow")
        st.async_groups.append(st.async_open)
        st.async_open = []
        st.env[out] = np.zeros(1, np.int64)

    return run


def _h_async_wait(k, op):
    keep = ir.IntegerAttr(op.attributes["numGroups"]).value if "numGroups" in op.attributes else 0

    def run(st):
        if st.mask is not None and not st.mask.all():
            raise ExecutorError(f"{op_loc(op)}: async wait under divergent control flow")
        # (copies not yet committed to a group are not covered: cp.async.wait_group counts groups)
        done = st.async_groups[: max(0, len(st.async_groups) - keep)]
        st.async_groups = st.async_groups[len(done) :]
        for group in done:
            for cop, dst, elems, act, vals in group:
                rows = np.broadcast_to(st.wg_local[:, None], elems.shape)
                st.in_flight[id(dst)][rows[act], elems[act]] = False
                race_check(k, st, cop, dst, elems, act, write=True)
                lds_write_check(st, cop, dst, elems, act, lands=True)
                dst.data[rows[act], elems[act]] = vals[act]
                k.stats.async_copy_bytes += int(act.sum()) * dst.elem_bytes

    return run


def _h_mma(k, op):
    (out,) = k._outs(op)
    a_id, b_id, c_id = k._ins(op)[:3]
    a_type, c_t = op.operands[0].type, ir.VectorType(op.operands[2].type)
    # (amdgpu.mfma takes f32 / f64 operands as scalars: one element a lane)
    a_elem, b_elem = (
        str(ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t) for t in (a_type, op.operands[1].type)
    )
    c_elem = str(c_t.element_type)
    if op.name == "nvgpu.mma.sync":
        mnk = tuple(ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["mmaShape"]))
    else:
        mnk = tuple(ir.IntegerAttr(op.attributes[d]).value for d in ("m", "n", "k"))
    key = decode(op.name, k.arch, k.wave_size, mnk, a_elem, c_elem, b_elem, "reducePrecision" in op.attributes)
    unsigned_a = "unsignedA" in op.attributes
    unsigned_b = "unsignedB" in op.attributes
    if (
        op.name == "amdgpu.wmma"
        and "subwordOffset" in op.attributes
        and ir.IntegerAttr(op.attributes["subwordOffset"]).value
    ):
        raise ExecutorError(f"{op_loc(op)}: the ISA model implements OPSEL (subwordOffset) 0 only")
    if op.name == "amdgpu.mfma":
        for attr in ("cbsz", "abid"):
            if attr in op.attributes and ir.IntegerAttr(op.attributes[attr]).value:
                raise ExecutorError(f"{op_loc(op)}: mfma broadcast controls ({attr}) are not modelled")
    W = k.wave_size
    scale_ids = k._ins(op)[3:5] if op.name == "amdgpu.scaled_mfma" else ()
    # each scale operand: a vector<4xf8E8M0FNU> of which scalesIdxA/B picks a byte (None), or a
    # scalar E8M0 in byte 0 of its VGPR (0): op_sel picking another byte of it is not modelled
    scale_idx = []
    for i, x in enumerate("AB"[: len(scale_ids)]):
        idx = ir.IntegerAttr(op.attributes[f"scalesIdx{x}"]).value
        if not isinstance(op.operands[3 + i].type, ir.VectorType):
            if idx:
                raise ExecutorError(f"{op_loc(op)}: a scalar scale of {x} with scalesIdx{x} != 0 is not modelled")
            idx = None
        scale_idx.append(idx)

    def regs(v, L):
        v = per_lane(v, L)
        return v.reshape(L // W, W, -1)

    def scales(st):
        out = {}
        for name, sid, idx in zip(("scales_a", "scales_b"), scale_ids, scale_idx):
            v = per_lane(st.env[sid], st.L).reshape(st.L // W, W, -1)
            out[name] = v[..., 0 if idx is None else idx]
        return out

    def run(st):
        lanes = _active_waves(st, W, op, op.name)
        c = st.env[c_id]
        try:
            d = isa_execute(
                key,
                regs(st.env[a_id], st.L),
                regs(st.env[b_id], st.L),
                regs(c, st.L),
                unsigned_a=unsigned_a,
                unsigned_b=unsigned_b,
                **scales(st),
            )
        except IsaError as e:
            raise ExecutorError(f"{op_loc(op)}: {e}") from None
        st.env[out] = d.reshape((st.L,) + tuple(c_t.shape))
        k.stats.matrix_ops += st.L // W if lanes is None else int(lanes.sum()) // W

    return run


# -- cross-lane ------------------------------------------------------------------------------------


def _h_permlanex16(k, op):
    """rocdl.permlanex16 (RDNA ``V_PERMLANEX16_B32``, RDNA3 ISA guide 16.x "VOP3"): lanes are
    rows of 16; each lane reads the lane of the *other* row of its 32-lane pair named by a 4-bit
    selector, lane i of a row (i < 8) by bits 4i..4i+3 of the first scalar operand, lane i >= 8 by
    bits 4(i-8).. of the second. In wave64 the two 32-lane halves do this independently. The
    selectors are scalar (SGPR) operands: uniform across the wave. With every lane active the
    fetch-inactive and bound-control flags make no difference (a lane under divergent control
    flow is refused). The value may be any 32-bit type (e.g. vector<2xf16>)."""
    (out,) = k._outs(op)
    _, src_id, sel_lo_id, sel_hi_id = k._ins(op)
    rtype = op.results[0].type
    if isinstance(rtype, ir.VectorType):
        width = ir.VectorType(rtype).shape[0] * 8 * np_dtype(ir.VectorType(rtype).element_type).itemsize
    else:
        width = 8 * np_dtype(rtype).itemsize
    if width != 32:
        raise ExecutorError(f"{op_loc(op)}: v_permlanex16_b32 moves 32-bit values, not {op.results[0].type}")

    def run(st):
        if st.mask is not None and not st.mask.all():
            raise ExecutorError(f"{op_loc(op)}: rocdl.permlanex16 under divergent control flow")
        lo = _uniform(st.env[sel_lo_id], "the permlanex16 lane selector", op) & 0xFFFFFFFF
        hi = _uniform(st.env[sel_hi_id], "the permlanex16 lane selector", op) & 0xFFFFFFFF
        sel = np.array([(lo >> (4 * i)) & 0xF for i in range(8)] + [(hi >> (4 * i)) & 0xF for i in range(8)], np.int64)
        lane = np.arange(st.L, dtype=np.int64)  # waves and their 32-lane halves are aligned in the batch
        in_pair = st.tid % 32
        other_row = lane - in_pair + 16 * (1 - in_pair // 16)
        src = other_row + sel[in_pair % 16]
        st.env[out] = per_lane(st.env[src_id], st.L)[src]
        k.stats.cross_lane_ops += st.L // k.wave_size

    return run


def _h_gpu_shuffle(k, op):
    """gpu.shuffle (MLIR GPU dialect; on NVIDIA ``shfl.sync.{bfly,idx,down,up}.b32`` with a full
    mask, PTX ISA 9.7.8.6 "shfl.sync"): every lane reads ``value`` from a source lane of its
    warp -- xor: lane ^ offset, idx: offset, down: lane + offset, up: lane - offset -- and the
    second result says whether that source lies in [0, width); where it does not, the lane
    keeps its own value (what shfl.sync returns). ``offset`` and ``width`` must be uniform and
    ``width`` the wave size (the only form modelled); every lane of a wave that runs it must be
    active (a shuffle under control flow divergent within a wave is refused, as for the matrix
    instructions; a warp-role split runs it on whole waves)."""
    value_out, valid_out = k._outs(op)
    val_id, off_id, width_id = k._ins(op)
    mode = str(op.attributes["mode"]).rstrip(">").split("<")[-1].split()[-1]  # #gpu.shuffle_mode<xor>

    def run(st):
        if st.mask is not None:
            waves = np.asarray(st.mask).reshape(-1, k.wave_size)
            if not np.all(waves.all(axis=1) | ~waves.any(axis=1)):
                raise ExecutorError(f"{op_loc(op)}: gpu.shuffle under divergent control flow")
        off = _uniform(st.env[off_id], "the shuffle offset", op)
        width = _uniform(st.env[width_id], "the shuffle width", op)
        if width != k.wave_size:
            raise ExecutorError(
                f"{op_loc(op)}: gpu.shuffle width {width}: only the wave size ({k.wave_size}) is modelled"
            )
        lane = st.tid % k.wave_size
        src = {"xor": lane ^ off, "idx": np.full_like(lane, off), "down": lane + off, "up": lane - off}.get(mode)
        if src is None:
            raise ExecutorError(f"{op_loc(op)}: gpu.shuffle mode {mode!r} is not modelled")
        valid = (src >= 0) & (src < width)
        src = np.where(valid, src, lane)
        values = per_lane(st.env[val_id], st.L)
        st.env[value_out] = values[np.arange(st.L) - lane + src]
        st.env[valid_out] = valid
        k.stats.cross_lane_ops += st.L // k.wave_size

    return run


def _h_nvvm_ex2(k, op):
    """nvvm.ex2 (PTX ``ex2.approx[.ftz].f32``, PTX ISA "Floating Point Instructions: ex2"): 2^x
    with a maximum relative error of about 2^-22 (the MUFU unit); modelled as the correctly
    rounded f32 value, as the executor's math functions are. ``ftz``: subnormal inputs and
    results flushed to sign-preserving zero. ex2(-inf) = +0, ex2(+inf) = +inf, NaN -> NaN.
    f32 scalars and vectors only (not the packed f16x2 / bf16x2 forms)."""
    (out,) = k._outs(op)
    (src,) = k._ins(op)
    t = op.results[0].type
    elem = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
    if str(elem) != "f32":
        raise ExecutorError(f"{op_loc(op)}: nvvm.ex2 on {t}: only f32 is modelled")
    ftz = "ftz" in op.attributes and ir.BoolAttr(op.attributes["ftz"]).value
    tiny = np.finfo(np.float32).tiny

    def run(st):
        x = np.asarray(st.env[src], np.float64)
        if ftz:
            x = np.where(np.abs(x) < tiny, 0.0, x)
        with np.errstate(over="ignore", under="ignore"):
            r = np.exp2(x).astype(np.float32)
        if ftz:
            r = np.where(np.abs(r) < tiny, np.float32(0), r)
        st.env[out] = r

    return run


def _h_rocdl_exp2(k, op):
    """rocdl.exp2 (``llvm.amdgcn.exp2``: ``V_EXP_F32``, AMD ISA guides (CDNA3 / RDNA3 / RDNA4)
    "V_EXP_F32: D = 2^S0", a transcendental of about 1 ULP): modelled as the correctly rounded
    f32 2^x with results below the smallest normal f32 flushed to +0 (the instruction returns no
    denormals: LLVM's ``llvm.exp2.f32`` lowering wraps it in a range fix-up for them, this op
    has none). exp2(-inf) = +0, exp2(+inf) = +inf, NaN -> NaN. f32 scalars and vectors only."""
    (out,) = k._outs(op)
    (src,) = k._ins(op)
    t = op.results[0].type
    elem = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
    if str(elem) != "f32":
        raise ExecutorError(f"{op_loc(op)}: rocdl.exp2 on {t}: only f32 is modelled")
    tiny = np.finfo(np.float32).tiny

    def run(st):
        x = np.asarray(st.env[src], np.float64)
        with np.errstate(over="ignore", under="ignore"):
            r = np.exp2(x).astype(np.float32)
        st.env[out] = np.where(np.abs(r) < tiny, np.float32(0), r)

    return run


# -- control flow ---------------------------------------------------------------------------------


def _h_for(k, op):
    lb, ub, step, *inits = k._ins(op)
    outs = k._outs(op)
    body_block = op.regions[0].blocks[0]
    args = [k._id(a) for a in body_block.arguments]
    body = k._compile_block(body_block)
    yield_op = [o.operation for o in body_block.operations][-1]
    yields = k._ins(yield_op)

    def run(st):
        lo = _uniform(st.env[lb], "loop lower bound", op)
        hi = _uniform(st.env[ub], "loop upper bound", op)
        s = _uniform(st.env[step], "loop step", op)
        carried = [st.env[i] for i in inits]
        tick = st.tick if st.loop_depth == 0 else None  # an outermost loop (the K loop) reports progress
        steps = range(lo, hi, s)
        st.loop_depth += 1
        try:
            for i, iv in enumerate(steps):
                st.env[args[0]] = np.asarray([iv], np.int64)
                for a, v in zip(args[1:], carried):
                    st.env[a] = v
                run_block(body[:-1], st)
                carried = [st.env[y] for y in yields]
                if tick is not None:
                    tick((i + 1) / len(steps), len(steps))
        finally:
            st.loop_depth -= 1
        for o, v in zip(outs, carried):
            st.env[o] = v

    return run


def _merge(c, tv, ev, L: int):
    """The value of an scf.if result: per lane, the then side's where ``c``, else the else
    side's (a wgmma accumulator struct keeps the group still writing either side's)."""
    if hasattr(tv, "groups") or hasattr(ev, "groups"):
        if not (hasattr(tv, "groups") and hasattr(ev, "groups")):
            raise ExecutorError("an scf.if yields a wgmma accumulator on one side only")
        data = np.where(np.asarray(c)[:, None], per_lane(tv.data, L), per_lane(ev.data, L))
        groups = {**{w: g for w, g in ev.groups.items() if g.state != "done"}}
        groups.update({w: g for w, g in tv.groups.items() if g.state != "done"})
        return type(tv)(data, groups, np.maximum(tv.fence_seq, ev.fence_seq))
    return _select(c, tv, ev, None, 0)


def _contains(region, name: str) -> bool:
    for block in region.blocks:
        for o in block.operations:
            if o.operation.name == name or any(_contains(r, name) for r in o.operation.regions):
                return True
    return False


def _h_if(k, op):
    (cond,) = k._ins(op)
    outs = k._outs(op)
    then_block = op.regions[0].blocks[0]
    then_body = k._compile_block(then_block)
    then_yield = k._ins([o.operation for o in then_block.operations][-1])
    has_else = len(op.regions) > 1 and len(op.regions[1].blocks) > 0
    if has_else:
        else_block = op.regions[1].blocks[0]
        else_body = k._compile_block(else_block)
        else_yield = k._ins([o.operation for o in else_block.operations][-1])
    # Warp roles (``core.Roles``): the sides of a divergent if that wait on mbarriers, or that use
    # named barriers (a side that does runs as one task per warpgroup).
    named = [_uses_named_barrier(r) for r in op.regions]
    roles = (has_else and any(_contains(r, "nvvm.mbarrier.try_wait") for r in op.regions)) or any(named)

    def run(st):
        c = np.asarray(st.env[cond])
        if c.shape[0] == 1 or bool(np.all(c == c.flat[0])):
            take = bool(c.flat[0])
            if take:
                run_block(then_body[:-1], st)
                vals = [st.env[y] for y in then_yield]
            elif has_else:
                run_block(else_body[:-1], st)
                vals = [st.env[y] for y in else_yield]
            else:
                vals = []
            for o, v in zip(outs, vals):
                st.env[o] = v
            return
        saved = st.mask
        base = st.active()
        c = per_lane(c, st.L)
        sides, scoped = [], []
        if roles:
            halves = [(base & c, then_body[:-1], named[0])]
            if has_else:
                halves.append((base & ~c, else_body[:-1], named[1]))
            for m, body, split in halves:
                for w in range(-(-st.T // WARPGROUP)) if split else [None]:
                    mw = m if w is None else m & (st.tid // WARPGROUP == w)
                    if mw.any():
                        scoped += [len(sides)] if split else []
                        sides.append((mw, body))
        if len(sides) > 1:
            if getattr(st, "roles", None) is not None:
                raise ExecutorError(f"{op_loc(op)}: a warp-role split inside another one")
            if scoped and outs:
                raise ExecutorError(f"{op_loc(op)}: a warp role that uses named barriers yields values")
            Roles(len(sides)).run(st, sides, tuple(scoped))
            for o, tv, ev in zip(outs, [st.env[y] for y in then_yield], [st.env[y] for y in else_yield]):
                st.env[o] = _merge(c, tv, ev, st.L)
            return
        # A side no active lane takes (its condition true only on lanes masked off further out)
        # does not run, and its results are the other side's: no lane that reads them took it.
        st.mask = base & c
        t_vals = e_vals = None
        if st.mask.any():
            run_block(then_body[:-1], st)
            t_vals = [st.env[y] for y in then_yield]
        if has_else:
            st.mask = base & ~c
            if st.mask.any():
                run_block(else_body[:-1], st)
                e_vals = [st.env[y] for y in else_yield]
        t_vals = e_vals if t_vals is None else t_vals
        e_vals = t_vals if e_vals is None else e_vals
        st.mask = saved
        if t_vals is None:  # (no results: an scf.if without else, no lane taking it)
            return
        for o, tv, ev in zip(outs, t_vals, e_vals):
            st.env[o] = _select(c, tv, ev, None, 0)

    return run


def _h_yield(k, op):
    def run(st):
        pass

    return run


def _h_return(k, op):
    def run(st):
        raise FuncReturn()

    return run


HANDLERS = {
    "arith.constant": _h_constant,
    "ub.poison": _h_poison,
    "gpu.thread_id": _h_thread_id,
    "gpu.barrier": _h_barrier,
    "nvvm.barrier": _h_nvvm_barrier,
    "nvvm.barrier.arrive": _h_nvvm_barrier_arrive,
    "amdgpu.lds_barrier": _h_barrier,
    "hal.interface.workgroup.id": _h_workgroup_id,
    "hal.interface.workgroup.count": _h_workgroup_count,
    "hal.interface.binding.subspan": _h_subspan,
    "memref.alloc": _h_alloc,
    "hal.interface.constant.load": _h_constant_load,
    # compiler hints on dynamic sizes: the values pass through
    "util.assume.int": _h_noop,
    "iree_tensor_ext.dispatch.workload.ordinal": _h_noop,
    "memref.dealloc": lambda k, op: lambda st: None,
    "memref.assume_alignment": _h_noop,
    # an instruction-scheduling fence for LLVM: no effect on values or memory
    "amdgpu.sched_barrier": lambda k, op: lambda st: None,
    "vector.load": _h_vector_load,
    "vector.store": _h_vector_store,
    "memref.dim": _h_memref_dim,
    "memref.load": _h_memref_load,
    "memref.store": _h_memref_store,
    "amdgpu.raw_buffer_load": _h_raw_buffer_load,
    "amdgpu.raw_buffer_store": _h_raw_buffer_store,
    "vector.extract": _h_extract,
    "vector.insert": _h_insert,
    "vector.from_elements": _h_from_elements,
    "vector.shape_cast": _h_shape_cast,
    "vector.bitcast": _h_vector_bitcast,
    "vector.broadcast": _h_broadcast,
    "vector.insert_strided_slice": _h_insert_strided,
    "vector.extract_strided_slice": _h_extract_strided,
    "amdgpu.wmma": _h_mma,
    "amdgpu.mfma": _h_mma,
    "amdgpu.scaled_mfma": _h_mma,
    "nvgpu.mma.sync": _h_mma,
    "nvgpu.ldmatrix": _h_ldmatrix,
    "nvgpu.device_async_copy": _h_async_copy,
    "nvgpu.device_async_create_group": _h_async_group,
    "nvgpu.device_async_wait": _h_async_wait,
    "rocdl.permlanex16": _h_permlanex16,
    "gpu.shuffle": _h_gpu_shuffle,
    "nvvm.ex2": _h_nvvm_ex2,
    "rocdl.exp2": _h_rocdl_exp2,
    "scf.for": _h_for,
    "scf.if": _h_if,
    "scf.yield": _h_yield,
    "func.return": _h_return,
    "llvm.inline_asm": _h_inline_asm,
    **{name: _h_arith for name in _ARITH},
}


def end_check(st) -> None:
    """At the end of a workgroup batch: no cp.async copy left unwaited."""
    if st.async_open or st.async_groups:
        raise ExecutorError("the kernel ends with async copies (cp.async) it never waited for")
