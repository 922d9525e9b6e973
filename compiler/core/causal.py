"""Causal masks, read from the dispatch that writes them.

IREE 3.13 lowers PyTorch's ``scaled_dot_product_attention(is_causal=True)`` to an attention op
that reads an additive mask, and writes that mask in a dispatch of its own, run before the
attention on every call (GPT-2's SDPA block, at executable-sources)::

    %2 = linalg.generic {indexing_maps = [identity], iterator_types = ["parallel"]}
         outs(%1 : tensor<1572864xf16>) {
      %3 = linalg.index 0 : index
      %4 = arith.remsi %3, %c256 : index                       -- the key
      %6 = arith.remsi (arith.divsi %3, %c256), %c256 : index  -- the query
      %7 = arith.cmpi sge, %6, %4 : index
      %8 = arith.select %7, 0.0, -inf : f16
    }

From the attention dispatch alone the mask is data. This module reads both ends: what a
generator dispatch writes, symbolically (``Generator``: each value of its body as a digit of the
written tensor's row-major element index), and where an attention op's mask lives and which of
its element index's digits are the query and the key (``MaskSite``). ``Generator.causal_rows(site)``
says whether every element the generator writes is 0 where the key is at or before the query and
-inf after it (PyTorch's top-left aligned ``is_causal``), over the same element count and type, and
after how many rows the query position restarts (the rows themselves; for GQA, where IREE folds the
query heads sharing a KV head into the rows, each head's sequence).
``driver/causal_masks.py`` matches the two through the host program's byte ranges.

Anything outside the small grammar below (an added offset, a bottom-right alignment, a finite
"minus infinity", a mask loaded through a transpose) is not recognised: the kernel then reads
the mask, as it reads any other.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from iree.compiler import ir

from mmaflow.compiler.core.mlir import (
    defining_op,
    dispatch_tensor_access,
    parent_named,
    subspan_binding,
    subspan_dims,
    subspan_offset,
    user_of,
    walk,
)

# What stamps a proven causal mask on an attention op: a StringAttr naming the writer, and where the query
# position restarts before the rows end (GQA's folded heads), an IntegerAttr: the rows a position run covers.
CAUSAL_MASK = "mmaflow.causal_mask"
CAUSAL_ROWS = "mmaflow.causal_rows"

_TENSOR = re.compile(r"dispatch\.tensor<\w+:(tensor<[^>]*>)>")  # (the bindings have no class for the type)


@dataclass(frozen=True)
class Offset:
    """A subspan's byte offset (or a dynamic dim): a constant, or push constant ``ordinal`` (its value at
    each call site, an i32 read unsigned: IREE loads offsets with ``arith.index_castui``), or, where IREE
    passes a 64-bit value, push constants ``ordinal`` (the low word) and ``high`` joined
    (``lo | hi << 32``)."""

    value: int | None = None
    ordinal: int | None = None
    unsigned: bool = False
    high: int | None = None

    @property
    def ordinals(self) -> tuple[int, ...]:
        """The push constants it reads."""
        return tuple(i for i in (self.ordinal, self.high) if i is not None)


@dataclass(frozen=True)
class Subspan:
    """One ``hal.interface.binding.subspan`` of a dispatch function: its binding, offset (None:
    not readable here), access and size in bytes (None: a dynamic shape)."""

    binding: int
    offset: Offset | None
    access: str  # "readonly", "writeonly", "readwrite", or "unknown"
    nbytes: int | None
    shape: tuple[int | None, ...] = ()
    elem: str = ""
    stored_whole: bool = False  # written by one whole-tensor store in the function's body (every byte)
    dims: tuple[Offset | None, ...] = ()  # its dynamic dims' values, in order (None: not readable here)
    bits: int | None = None  # bits an element takes in memory (i1: a byte)

    @property
    def writes(self) -> bool:
        return self.access != "readonly"

    @property
    def reads(self) -> bool:
        return self.access != "writeonly"


def _int(value: ir.Value, depth: int = 0) -> Offset | None:
    """An index value as a constant or a push constant (through casts and ``util.assume.int``)."""
    op = defining_op(value)
    if op is None or depth > 8:
        return None
    if op.name == "arith.constant" and isinstance(op.attributes["value"], ir.IntegerAttr):
        return Offset(value=ir.IntegerAttr(op.attributes["value"]).value)
    if op.name in ("arith.index_castui", "arith.extui"):
        inner = _int(op.operands[0], depth + 1)
        return None if inner is None else Offset(inner.value, inner.ordinal, True, inner.high)
    if op.name == "arith.index_cast":
        return _int(op.operands[0], depth + 1)
    if op.name == "util.assume.int":
        i = list(op.results).index(value)
        return _int(op.operands[i], depth + 1)
    if op.name == "hal.interface.constant.load":
        return Offset(ordinal=ir.IntegerAttr(op.attributes["ordinal"]).value)
    if op.name == "arith.ori":  # a 64-bit value in two push constants: extui(lo) | shli(extui(hi), 32)
        lo, shl = _int(op.operands[0], depth + 1), defining_op(op.operands[1])
        if shl is None or shl.name != "arith.shli":
            return None
        hi, amount = _int(shl.operands[0], depth + 1), _int(shl.operands[1], depth + 1)
        if lo is None or hi is None or amount is None or amount.value != 32:
            return None
        if lo.ordinal is None or hi.ordinal is None or lo.high is not None or hi.high is not None:
            return None
        if not lo.unsigned or lo.ordinal == hi.ordinal:  # (the low word zero-extended; two words)
            return None
        return Offset(ordinal=lo.ordinal, unsigned=True, high=hi.ordinal)
    if op.name == "iree_tensor_ext.dispatch.workload.ordinal":
        return _int(op.operands[0], depth + 1)
    return None


def _bits(elem: ir.Type) -> int | None:
    for kind in (ir.IntegerType, ir.FloatType):
        if isinstance(elem, kind):
            bits = kind(elem).width
            return 8 if bits == 1 else bits  # i1 is stored a byte per element at a dispatch boundary
    return None


def bound_tensor(dt: ir.Type) -> tuple[str, ir.RankedTensorType] | None:
    """A dispatch tensor type's access and bound tensor type: the tensor read from its text, the access
    by comparing types built from it (``mlir.dispatch_tensor_access``); None for anything else."""
    m = _TENSOR.search(str(dt))
    if m is None:
        return None
    tensor = ir.RankedTensorType(ir.Type.parse(m.group(1), dt.context))
    access = dispatch_tensor_access(dt, tensor)
    return None if access is None else (access, tensor)


def subspans(func: ir.Operation) -> dict[ir.Operation, Subspan]:
    """Every subspan of a dispatch function, by its op."""
    out = {}
    for op in walk(func):
        if op.name != "hal.interface.binding.subspan":
            continue
        off = subspan_offset(op)
        offset = Offset(value=0) if off is None else _int(off)
        bound = bound_tensor(op.results[0].type)
        access, nbytes, shape, elem, bits = "unknown", None, (), "", None
        if bound is not None:
            access, t = bound
            shape = tuple(None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank))
            elem, bits = str(t.element_type), _bits(t.element_type)
            if bits is not None and None not in shape:
                nbytes = math.ceil(math.prod(shape) * bits / 8)
        users = [user_of(u) for u in op.results[0].uses]
        whole = (
            access == "writeonly"
            and len(users) == 1
            and users[0].name == "iree_tensor_ext.dispatch.tensor.store"
            and _top_level(op)
            and _top_level(users[0])  # (not under control flow: it stores on every run)
            and None not in shape
            and _whole(users[0], shape)
        )
        dims = tuple(_int(v) for v in subspan_dims(op))
        out[op] = Subspan(subspan_binding(op), offset, access, nbytes, shape, elem, whole, dims, bits)
    return out


def _top_level(op: ir.Operation) -> bool:
    """``op`` sits directly in its function's body (not inside an ``scf.if`` or a loop)."""
    parent = op.parent
    return parent is not None and parent.name in ("func.func", "util.func")


def _whole(op: ir.Operation, shape: tuple) -> bool:
    """A dispatch.tensor load or store of the whole tensor (offsets 0, full sizes, unit strides)."""
    try:
        offsets, sizes, strides = (
            list(ir.DenseI64ArrayAttr(op.attributes[n])) for n in ("static_offsets", "static_sizes", "static_strides")
        )
    except (KeyError, ValueError):
        return False
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    return not any(seg[-4:]) and set(offsets) <= {0} and tuple(sizes) == shape and set(strides) <= {1}


# ---- the generator's body, symbolically ------------------------------------------------------------


@dataclass(frozen=True)
class Digit:
    """(L // div) % mod over the written tensor's row-major element index L (mod None: no modulo)."""

    div: int
    mod: int | None


def _digit(div: int, mod: int | None, total: int) -> Digit:
    if mod is not None and total % div == 0 and mod >= total // div:
        mod = None  # L // div < total / div already
    return Digit(div, mod)


@dataclass(frozen=True)
class Compare:
    pred: int  # arith.cmpi's: eq 0, ne 1, slt 2, sle 3, sgt 4, sge 5, ult 6, ule 7, ugt 8, uge 9
    lhs: Digit
    rhs: Digit


@dataclass(frozen=True)
class Select:
    cond: Compare
    true: float
    false: float


class _Unreadable(Exception):
    pass


def _body_value(value: ir.Value, env: dict, shape: tuple, total: int):
    """The symbolic value of ``value`` in the generic's body (Digit, Compare, Select or a constant)."""
    if value in env:
        return env[value]
    op = defining_op(value)
    if op is None:
        raise _Unreadable("the body reads its block arguments")
    args = [_body_value(v, env, shape, total) for v in op.operands]
    name = op.name
    if name == "linalg.index":
        dim = ir.IntegerAttr(op.attributes["dim"]).value
        out = _digit(math.prod(shape[dim + 1 :]), shape[dim], total)
    elif name == "arith.constant":
        attr = op.attributes["value"]
        if isinstance(attr, ir.IntegerAttr):
            out = ir.IntegerAttr(attr).value
        elif isinstance(attr, ir.FloatAttr):
            out = ir.FloatAttr(attr).value
        else:
            raise _Unreadable(f"a constant {attr}")
    elif name in ("arith.index_cast", "arith.index_castui", "arith.extui", "arith.extsi") and isinstance(
        args[0], Digit
    ):
        # Every value the digit takes must fit the result's signed range (a narrowing cast wraps).
        t = op.results[0].type
        bits = 64 if str(t) == "index" else ir.IntegerType(t).width
        top = (total - 1) // args[0].div if args[0].mod is None else args[0].mod - 1
        if top >= 1 << (bits - 1):
            raise _Unreadable(f"{name} to {t} of values up to {top}")
        out = args[0]
    elif name in ("arith.remsi", "arith.remui", "arith.divsi", "arith.divui") and isinstance(args[0], Digit):
        x, c = args
        if not isinstance(c, int) or c < 1:
            raise _Unreadable(f"{name} by {c}")
        if name.startswith("arith.rem"):
            if x.mod is not None and x.mod % c:
                raise _Unreadable(f"{name}: {c} does not divide {x.mod}")
            out = _digit(x.div, c, total)
        else:
            if x.mod is not None and x.mod % c:
                raise _Unreadable(f"{name}: {c} does not divide {x.mod}")
            out = _digit(x.div * c, None if x.mod is None else x.mod // c, total)
    elif name == "arith.cmpi" and all(isinstance(a, Digit) for a in args):
        out = Compare(ir.IntegerAttr(op.attributes["predicate"]).value, *args)
    elif name == "arith.select" and isinstance(args[0], Compare) and all(isinstance(a, float) for a in args[1:]):
        out = Select(*args)
    else:
        raise _Unreadable(f"{name}")
    env[value] = out
    return out


@dataclass(frozen=True)
class MaskSite:
    """Where an attention op's mask lives (a whole-tensor load of ``subspan``) and, over the stored
    tensor's row-major element index, which digits are the query and the key."""

    subspan: Subspan
    query: Digit
    key: Digit
    rows: int = 0  # the query extent (M)


@dataclass(frozen=True)
class Generator:
    """A dispatch that writes one whole tensor computed from its element indices only."""

    subspan: Subspan
    value: object  # Select (an additive mask) or Compare (a boolean one)
    total: int

    def causal_rows(self, site: MaskSite) -> int | None:
        """Where every element is 0 where key <= query position and -inf where key > it, over the
        mask's elements (same count, type and bytes): the rows after which the query position
        restarts (``site.rows``: the query row itself; fewer: IREE's GQA form, the query heads sharing
        a KV head folded into the rows, each head's positions from 0); None where it is not so."""
        s = self.subspan
        if (s.elem, s.nbytes, self.total) != (site.subspan.elem, site.subspan.nbytes, math.prod(site.subspan.shape)):
            return None
        v = self.value
        if not isinstance(v, Select) or site.subspan.elem not in ("f16", "bf16", "f32"):
            return None
        k, c = site.key, v.cond
        pred = {6: 2, 7: 3, 8: 4, 9: 5}.get(c.pred, c.pred)  # unsigned as signed: indices are >= 0
        q = c.lhs
        if c.rhs != k:  # k <= q as q >= k
            q, pred = c.rhs, {2: 4, 3: 5, 4: 2, 5: 3}.get(pred, pred)
            if c.lhs != k:
                return None
        if q == site.query:
            rows = site.rows
        elif q.div == site.query.div and q.mod is not None and site.rows % q.mod == 0:
            rows = q.mod  # the query digit modulo a divisor of its extent: positions restart every q.mod rows
        else:
            return None
        if pred == 5:  # q >= k: kept when true
            kept, masked = v.true, v.false
        elif pred == 2:  # q < k: masked when true
            kept, masked = v.false, v.true
        else:
            return None
        return rows if kept == 0.0 and math.isinf(masked) and masked < 0 else None


def generator(func: ir.Operation) -> tuple[Generator | None, str]:
    """The tensor ``func`` writes if it is a generator (one ``linalg.generic`` without inputs,
    its body a function of ``linalg.index`` alone, stored whole to the one subspan it writes);
    else None and why not."""
    subs = subspans(func)
    writes = [s for s in subs.values() if s.writes]
    generics = [o for o in walk(func) if o.name == "linalg.generic"]
    stores = [o for o in walk(func) if o.name == "iree_tensor_ext.dispatch.tensor.store"]
    if len(writes) != 1 or len(generics) != 1 or len(stores) != 1 or len(subs) != 1:
        return None, "not a single generic writing one tensor from nothing"
    (gen,), (store,) = generics, stores
    if not (_top_level(gen) and _top_level(store) and len(func.regions[0].blocks) == 1):
        return None, "its generic or store is under control flow"
    seg = list(ir.DenseI32ArrayAttr(gen.attributes["operandSegmentSizes"]))
    if seg[0] != 0 or store.operands[0] != gen.results[0]:
        return None, "the generic reads inputs or is not what it stores"
    target = defining_op(store.operands[1])
    sub = subs.get(target)
    t = ir.RankedTensorType(gen.results[0].type)
    shape = tuple(t.shape)
    if sub is None or sub.shape != shape or not _whole(store, shape):
        return None, "the generic's result is not stored whole into its subspan"
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(gen.attributes["indexing_maps"])]
    if len(maps) != 1 or [e.position if isinstance(e, ir.AffineDimExpr) else None for e in maps[0].results] != list(
        range(maps[0].n_dims)
    ):
        return None, "the generic's output map is not the identity"
    body = gen.regions[0].blocks[0]
    (term,) = [o for o in body.operations if o.operation.name == "linalg.yield"]
    total = math.prod(shape)
    try:
        value = _body_value(term.operands[0], {}, shape, total)
    except _Unreadable as e:
        return None, f"its body has {e}"
    return Generator(sub, value, total), ""


def mask_site(op: ir.Operation, query_loop: int | None, key_loop: int) -> MaskSite | None:
    """An attention op's mask as a whole-tensor load of a subspan, with the digits of its
    element index that are the query (loop ``query_loop``) and the key (``key_loop``); None
    when the mask reaches the op any other way, or there is no query loop (one query: no causal pattern to prove)."""
    n_out = len(op.results)
    ins = list(op.operands)[: len(op.operands) - n_out]
    if len(ins) != 5 or query_loop is None:
        return None
    load = defining_op(ins[4])
    if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load":
        return None
    sub_op = defining_op(load.operands[0])
    if sub_op is None:
        return None
    sub = subspans(parent_named(sub_op, "func.func")).get(sub_op)
    if [user_of(u) for u in sub_op.results[0].uses] != [load] or [user_of(u) for u in load.results[0].uses] != [op]:
        return None  # (anything else reading the mask would read what the kernel no longer needs written)
    t = ir.RankedTensorType(ins[4].type)
    shape = tuple(t.shape)
    if sub is None or t.has_static_shape is False or sub.shape != shape or not _whole(load, shape):
        return None
    amap = ir.AffineMapAttr(ir.ArrayAttr(op.attributes["indexing_maps"])[4]).value
    dims = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
    if dims.count(query_loop) != 1 or dims.count(key_loop) != 1:
        return None
    total = math.prod(shape)
    qa, ka = dims.index(query_loop), dims.index(key_loop)
    return MaskSite(
        sub,
        _digit(math.prod(shape[qa + 1 :]), shape[qa], total),
        _digit(math.prod(shape[ka + 1 :]), shape[ka], total),
        shape[qa],
    )
