"""The copy kernel (docs/kernels/copy.md): IREE's ``slow_memcpy`` dispatches (a static slice of one
binding tensor stored into another, ``core/copy.py``) as full-width vector copies.

Plan. The widest access (16, 8, 4, 2 or 1 bytes, at least one element) that divides the slice's
innermost run in bytes and every row's first byte at both ends: the binding's byte offset, the
slice's innermost offset, and each outer stride of the tensor it lies in. A thread copies one such
chunk (``vector.load`` then ``vector.store``; AMD: raw buffer loads and stores), 256 threads a
workgroup, as many workgroups as the chunks need (up to ``MAX_WORKGROUPS``; past that, each thread
copies several, a fixed count, the last ones guarded).

The dispatch's subspans stay as IREE wrote them (binding, byte offset, alignment, descriptor
flags), retyped from dispatch tensors to memrefs; the load and store become the kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import hal

from mmaflow.compiler.core.copy import CopyDispatch
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import (
    defining_op,
    op_attributes,
    segments,
    subspan_binding,
    subspan_constant_offset,
)
from mmaflow.compiler.core.problem import Binding
from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.kernels.common.prologue import buffer_type
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.targets import Vendor, get_target

THREADS = 256  # a workgroup
MAX_WORKGROUPS = 65535  # grid x; past it each thread copies several chunks
WIDTHS = (16, 8, 4, 2, 1)  # access bytes, widest first
COPY_BITS = {**{t: b for t, b in TYPE_BITS.items() if b % 8 == 0}, "i16": 16, "i64": 64}  # whole-byte elements
LOAD = "iree_tensor_ext.dispatch.tensor.load"
STORE = "iree_tensor_ext.dispatch.tensor.store"
# Besides the load and store, a copy holds only what computes their scalars (push constants, offsets, sizes).
_SCALAR = ("func.return", "hal.interface.binding.subspan", "hal.interface.constant.load", "util.assume.int")
_SCALAR += ("iree_tensor_ext.dispatch.workload.ordinal",)


@dataclass(frozen=True)
class CopyMatch:
    record: CopyDispatch
    src_sub: ir.Operation
    dst_sub: ir.Operation
    load: ir.Operation
    store: ir.Operation


def _static(op: ir.Operation, name: str) -> tuple[int, ...] | None:
    """A dispatch.tensor load/store's static offsets, sizes or strides (None: some dynamic)."""
    key = {"offsets": "static_offsets", "sizes": "static_sizes", "strides": "static_strides"}[name]
    vals = list(ir.DenseI64ArrayAttr(op.attributes[key]))
    return None if any(ir.ShapedType.is_dynamic_size(v) for v in vals) else tuple(vals)


def _bound(sub: ir.Operation) -> ir.RankedTensorType:
    """The tensor a subspan's ``!iree_tensor_ext.dispatch.tensor<access:tensor<...>>`` binds."""
    text = str(sub.results[0].type)
    start = text.index("tensor<", text.index(":"))
    return ir.RankedTensorType(ir.Type.parse(text[start : text.rindex(">")], sub.context))


def _byte_range(shape, offsets, sizes, base: int, eb: int) -> tuple[int, int]:
    """The first and one-past-last byte a slice of a row-major tensor at ``base`` touches."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    first = sum(o * s for o, s in zip(offsets, strides))
    last = sum((o + n - 1) * s for o, n, s in zip(offsets, sizes, strides))
    return base + first * eb, base + (last + 1) * eb


def claims(func: ir.Operation) -> bool:
    """Whether ``func`` is a copy at all: one dispatch-tensor load, one store of exactly its
    result, nothing else but the scalars they take (whether the kernel takes it: ``match_copy``)."""
    ops = [o.operation for o in func.regions[0].blocks[0].operations]
    loads = [o for o in ops if o.name == LOAD]
    stores = [o for o in ops if o.name == STORE]
    other = [o for o in ops if o.name not in (LOAD, STORE, *_SCALAR) and not o.name.startswith("arith.")]
    if len(loads) != 1 or len(stores) != 1 or other:
        return False
    return stores[0].operands[0] == loads[0].results[0]


def match_copy(func: ir.Operation) -> CopyMatch:
    """The copy's record and ops; ``UnsupportedError`` naming why the kernel does not take it."""
    if not claims(func):
        raise UnsupportedError("not one dispatch-tensor load stored whole by one store")
    ops = [o.operation for o in func.regions[0].blocks[0].operations]
    (load,) = [o for o in ops if o.name == LOAD]
    (store,) = [o for o in ops if o.name == STORE]
    src_sub, dst_sub = defining_op(load.operands[0]), defining_op(store.operands[1])
    for sub, what in ((src_sub, "read"), (dst_sub, "written")):
        if sub is None or sub.name != "hal.interface.binding.subspan":
            raise UnsupportedError(f"the tensor {what} is not a hal.interface.binding.subspan")
        if segments(sub)[1]:
            raise UnsupportedError(f"the tensor {what} has dynamic dimensions")
    got = {}
    for op, what in ((load, "load"), (store, "store")):
        for part in ("offsets", "sizes", "strides"):
            got[what, part] = _static(op, part)
            if got[what, part] is None:
                raise UnsupportedError(f"the copy's {what} has run-time {part}")
        if any(s != 1 for s in got[what, "strides"]):
            raise UnsupportedError(f"the copy's {what} has strides {list(got[what, 'strides'])} (the kernel: unit)")
    sizes = got["load", "sizes"]
    loaded = ir.RankedTensorType(load.results[0].type)
    if got["store", "sizes"] != sizes or tuple(loaded.shape) != sizes:
        raise UnsupportedError(
            f"the copy's load takes {list(sizes)} as {loaded}, its store {list(got['store', 'sizes'])}: "
            "the kernel copies one shape, no rank change"
        )
    if src_sub == dst_sub:
        raise UnsupportedError("the copy reads and writes one tensor (a copy within a buffer, in place)")
    src_t, dst_t = _bound(src_sub), _bound(dst_sub)
    if not ir.ShapedType(src_t).has_static_shape or not ir.ShapedType(dst_t).has_static_shape:
        raise UnsupportedError("a copy of a dynamically shaped tensor")
    src_shape, dst_shape = tuple(src_t.shape), tuple(dst_t.shape)
    if len(src_shape) != len(sizes) or len(dst_shape) != len(sizes):
        raise UnsupportedError("a rank-changing copy")
    if dst_shape != sizes:  # (the lane executor's reference models whole stores only)
        raise UnsupportedError(
            f"a store into part of a larger tensor ({list(sizes)} into {list(dst_shape)} at "
            f"{list(got['store', 'offsets'])}): the kernel stores whole tensors"
        )
    offsets = {}
    for sub, what in ((src_sub, "src"), (dst_sub, "dst")):
        off = subspan_constant_offset(sub)
        if off is None:
            raise UnsupportedError(
                f"the {'source' if what == 'src' else 'destination'}'s byte offset is a run-time value"
            )
        offsets[what] = Binding(subspan_binding(sub), off)
    elem = str(loaded.element_type)
    if elem not in COPY_BITS or COPY_BITS[elem] % 8:
        raise UnsupportedError(f"a copy of {elem} (the kernel copies elements of whole bytes: {', '.join(COPY_BITS)})")
    eb = COPY_BITS[elem] // 8
    if offsets["src"].binding == offsets["dst"].binding:  # one buffer: the regions must not overlap
        a = _byte_range(src_shape, got["load", "offsets"], sizes, offsets["src"].offset, eb)
        b = _byte_range(dst_shape, got["store", "offsets"], sizes, offsets["dst"].offset, eb)
        if a[0] < b[1] and b[0] < a[1]:
            raise UnsupportedError(
                f"the copy's source (bytes {a[0]}..{a[1]}) and destination ({b[0]}..{b[1]}) overlap in binding "
                f"{offsets['src'].binding}"
            )
    record = CopyDispatch(
        elem,
        sizes,
        offsets["src"],
        src_shape,
        got["load", "offsets"],
        offsets["dst"],
        dst_shape,
        got["store", "offsets"],
        _alignment(src_sub),
        _alignment(dst_sub),
    )
    return CopyMatch(record, src_sub, dst_sub, load, store)


def _alignment(sub: ir.Operation) -> int:
    """The subspan's ``alignment`` (the binding's base alignment IREE promises; 1 when absent)."""
    return ir.IntegerAttr(sub.attributes["alignment"]).value if "alignment" in sub.attributes else 1


@dataclass(frozen=True)
class CopyPlan:
    record: CopyDispatch
    target: str
    vendor: Vendor
    wave_size: int
    elem_bytes: int
    width: int  # bytes an access moves
    per_thread: int  # chunks a thread copies

    @property
    def chunks(self) -> int:
        return self.record.elements * self.elem_bytes // self.width

    @property
    def workgroup_size(self) -> int:
        return min(THREADS, self.chunks)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (math.ceil(self.chunks / (self.workgroup_size * self.per_thread)), 1, 1)

    @property
    def guarded(self) -> bool:
        """Whether some thread's chunk index runs past the copy (the last ones are skipped)."""
        return self.grid[0] * self.workgroup_size * self.per_thread != self.chunks

    @property
    def lds_bytes(self) -> int:
        return 0

    def describe(self) -> str:
        return (
            f"{self.record.describe()}: {self.width}-byte accesses, {self.chunks} of them, "
            f"{self.per_thread} a thread, grid {self.grid}, {self.workgroup_size} threads"
        )


def _row_alignment(shape: tuple[int, ...], offsets: tuple[int, ...], base: int, eb: int, align: int) -> int:
    """The largest power of two (bytes, up to 16) every row of the slice starts on: the binding's
    base is ``align``-aligned, the tensor ``base`` bytes into it."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    terms = [align, base, offsets[-1] * eb] + [s * eb for s in strides[:-1]]
    g = 0
    for t in terms:
        g = math.gcd(g, t)
    align = 16
    while align > 1 and g % align:
        align //= 2
    return align


def plan_copy(record: CopyDispatch, target) -> CopyPlan:
    """The access width and grid; ``UnsupportedError`` where the kernel does not take the copy."""
    tgt = get_target(target) if isinstance(target, str) else target
    bits = COPY_BITS.get(record.elem, 0)
    if bits % 8 or not bits:
        raise UnsupportedError(
            f"a copy of {record.elem} (the kernel copies elements of whole bytes: {', '.join(COPY_BITS)})"
        )
    eb = bits // 8
    if record.elements == 0:
        raise UnsupportedError("an empty copy")
    run = record.sizes[-1] * eb
    align = min(
        _row_alignment(record.src_shape, record.src_offsets, record.src.offset, eb, record.src_align),
        _row_alignment(record.dst_shape, record.dst_offsets, record.dst.offset, eb, record.dst_align),
    )
    width = next(w for w in WIDTHS if w == eb or (w > eb and run % w == 0 and align % w == 0))
    for shape, what in ((record.src_shape, "source"), (record.dst_shape, "destination")):
        if tgt.is_amd and math.prod(shape) * eb >= 2**31:
            raise UnsupportedError(f"the {what} holds {math.prod(shape) * eb} bytes: AMD buffer accesses reach 2 GiB")
    chunks = record.elements * eb // width
    per_thread = max(1, math.ceil(chunks / (THREADS * MAX_WORKGROUPS)))
    return CopyPlan(record, tgt.name, tgt.vendor, tgt.default_wave_size, eb, width, per_thread)


def emit_copy(plan: CopyPlan, match: CopyMatch, loc: ir.Location) -> None:
    """The kernel in place of the match's load and store (see the module docstring)."""
    rec = plan.record
    elem = ir.RankedTensorType(match.load.results[0].type).element_type
    mems = {}
    for what, sub, shape in (("src", match.src_sub, rec.src_shape), ("dst", match.dst_sub, rec.dst_shape)):
        named = op_attributes(sub)
        with sub.location, ir.InsertionPoint(sub):
            mems[what] = ir.Operation.create(
                "hal.interface.binding.subspan",
                results=[buffer_type(list(shape), elem)],
                operands=list(sub.operands),
                attributes=named,
            ).results[0]
    em = Emitter(ir.InsertionPoint(match.store), loc, plan.vendor)
    with loc, em.ip:
        wg = hal.interface_workgroup_id(0)
    tid = em.thread_id()
    vtype = ir.VectorType.get([plan.width // plan.elem_bytes], elem)
    per_vec = plan.width // plan.elem_bytes
    threads = plan.grid[0] * plan.workgroup_size
    first = em.add(em.mul(wg, plan.workgroup_size), tid)
    for j in range(plan.per_thread):
        chunk = em.add(first, j * threads) if j else first
        body = em.if_then(em.lt(chunk, plan.chunks)) if plan.guarded else em
        e = body.mul(chunk, per_vec)  # the slice's element index, row-major
        idx, rest = [], e
        for i in range(len(rec.sizes)):
            inner = math.prod(rec.sizes[i + 1 :])
            d = body.div(rest, inner) if inner > 1 else rest
            if i:
                d = body.rem(d, rec.sizes[i]) if inner > 1 else body.rem(rest, rec.sizes[i])
            idx.append(d)
        src = [body.add(x, o) if o else x for x, o in zip(idx, rec.src_offsets)]
        dst = [body.add(x, o) if o else x for x, o in zip(idx, rec.dst_offsets)]
        val = body.global_load(mems["src"], src, vtype)
        body.global_store(val, mems["dst"], dst)
    for op in (match.store, match.load, match.src_sub, match.dst_sub):  # (two subspans: match_copy)
        op.erase()


def rewrite_dispatch(fn: ir.Operation, target: str) -> CopyPlan:
    """Replace the copy dispatch's load and store by the kernel, in place; returns the plan."""
    match = match_copy(fn)
    plan = plan_copy(match.record, target)
    with fn.context, fn.location:
        emit_copy(plan, match, ir.Location.name("mmaflow.copy", childLoc=fn.location))
    return plan
