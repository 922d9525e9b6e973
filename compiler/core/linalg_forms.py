"""Forms IREE gives a contraction that more than one stage recognises (`select` accepts them,
`normalize` brings them into the form the transform script takes)."""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir

from mmaflow.compiler.core.mlir import defining_op


@dataclass(frozen=True)
class FoldedFill:
    """A one-step contraction (K = 1, IREE dropped the K loop) whose zero fill IREE folded into
    the body: the init is a ``tensor.empty`` and the body yields ``a*b + 0`` (``zero`` is that
    constant) or, for integers, the bare product ``a*b`` (``zero`` is None)."""

    product: ir.Operation  # the arith.mulf / arith.muli
    add: ir.Operation | None  # the add of the zero constant, if any
    zero: ir.Value | None


def folded_fill(op: ir.Operation) -> FoldedFill | None:
    """The folded form of ``op``, or None if ``op`` accumulates into its init."""
    if len(op.operands) != 3 or len(op.regions) != 1 or not list(op.regions[0].blocks):
        return None
    init = defining_op(op.operands[2])
    if init is None or init.name != "tensor.empty":
        return None
    block = op.regions[0].blocks[0]
    out_arg = list(block.arguments)[2]
    body = [o.operation for o in block.operations]
    if not body or body[-1].name != "linalg.yield" or len(body[-1].operands) != 1 or list(out_arg.uses):
        return None
    last = defining_op(body[-1].operands[0])
    if last is None:
        return None
    if last.name in ("arith.mulf", "arith.muli"):
        return FoldedFill(last, None, None)
    if last.name not in ("arith.addf", "arith.addi"):
        return None
    for i, v in enumerate(last.operands):
        c, other = defining_op(v), defining_op(last.operands[1 - i])
        if c is None or c.name != "arith.constant" or other is None or other.name not in ("arith.mulf", "arith.muli"):
            continue
        val = c.attributes["value"]
        if (isinstance(val, ir.FloatAttr) and ir.FloatAttr(val).value == 0.0) or (
            isinstance(val, ir.IntegerAttr) and ir.IntegerAttr(val).value == 0
        ):
            return FoldedFill(other, last, v)
    return None


def element_bits(t: ir.Type) -> int | None:
    """The width of an integer or float element type (None for any other type)."""
    for cls in (ir.IntegerType, ir.FloatType):
        try:
            return cls(t).width
        except ValueError:
            pass
    return None


def packed_bitcast(value: ir.Value) -> ir.Operation | None:
    """The ``iree_tensor_ext.bitcast`` that makes ``value`` a 4- or 6-bit tensor out of bytes, or
    None. It is the only way IREE passes such data (no 4/6-bit tensor crosses the HAL boundary):
    ``tensor<MxK/2xi8>`` bit-cast to ``tensor<MxKxf4E2M1FN>`` inside the dispatch."""
    op = defining_op(value)
    if op is None or op.name != "iree_tensor_ext.bitcast":
        return None
    src, dst = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.results[0].type)
    bits = element_bits(dst.element_type)
    return op if bits is not None and bits < 8 and str(src.element_type) == "i8" else None


@dataclass(frozen=True)
class ScaledMatmul:
    """IREE's scaled-matmul form (OCP MX block scaling): a ``linalg.generic`` over A ``[M, K/B, B]``,
    B ``[N, K/B, B]``, A-scales ``[M, K/B]`` and B-scales ``[N, K/B]``, iterators (parallel,
    parallel, reduction, reduction), body ``arith.scaling_extf`` of each operand with its scale,
    multiply, add. The inputs may come in either order IREE writes: (A, B, A-scales, B-scales) or
    (A, A-scales, B, B-scales); ``inputs`` gives the operand index of each."""

    a: int
    b: int
    a_scales: int
    b_scales: int
    m: int | None
    n: int | None
    blocks: int | None  # K / block
    block: int | None
    unit_m: bool = False  # M = 1 dropped by IREE: A [K/B, B], A-scales [K/B], the result [N]


def scaled_matmul(op: ir.Operation) -> tuple[ScaledMatmul | None, str]:
    """``op`` as IREE's scaled-matmul form, or (None, why not)."""
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.operands) != 5:
        return None, "not a generic of four inputs"
    maps = []
    for a in ir.ArrayAttr(op.attributes["indexing_maps"]):
        amap = ir.AffineMapAttr(a).value
        if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
            return None, "an indexing map that is not a permutation of loops"
        maps.append([e.position for e in amap.results])
    iters = ["reduction" in str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    if len(iters) not in (3, 4) or sum(iters) != 2:
        return None, "not two parallel (or N alone: M = 1 dropped) and two reduction loops"
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    args = list(block.arguments)
    names = [o.name for o in body]
    if sorted(names) != sorted(
        ["arith.scaling_extf", "arith.scaling_extf", "arith.mulf", "arith.addf", "linalg.yield"]
    ):
        return None, f"the body {names} is not scaling_extf x2, mulf, addf"
    add = defining_op(body[-1].operands[0])
    if add is None or add.name != "arith.addf" or args[4] not in list(add.operands):
        return None, "the body does not accumulate into its output"
    mul = defining_op([v for v in add.operands if v != args[4]][0])
    if mul is None or mul.name != "arith.mulf":
        return None, "the accumulated value is not a product"
    pairs = []
    for v in mul.operands:
        ext = defining_op(v)
        if ext is None or ext.name != "arith.scaling_extf" or not all(x in args[:4] for x in ext.operands):
            return None, "a factor is not a scaling_extf of two inputs"
        pairs.append((args.index(ext.operands[0]), args.index(ext.operands[1])))
    out = maps[4]
    if len(out) != len(iters) - 2:
        return None, "a result that is not 2-D (1-D where IREE dropped M = 1)"
    unit_m = len(out) == 1
    dm, dn = (None, out[0]) if unit_m else out
    red = [d for d in range(len(iters)) if iters[d]]
    (x, sx), (y, sy) = pairs
    if (dn in maps[x]) if unit_m else (dm not in maps[x]):  # A is the operand whose map holds M (not N)
        (x, sx), (y, sy) = (y, sy), (x, sx)
    kb = [d for d in red if d in maps[sx]]
    if len(kb) != 1:
        return None, "the scales do not follow one K dimension"
    ki = [d for d in red if d != kb[0]][0]
    rows = [] if unit_m else [dm]
    if (
        maps[x] != rows + [kb[0], ki]
        or maps[y] != [dn, kb[0], ki]
        or maps[sx] != rows + [kb[0]]
        or maps[sy] != [dn, kb[0]]
    ):
        return None, "indexing maps not A [M, K/B, B], B [N, K/B, B], scales [M, K/B] and [N, K/B]"
    a_shape = ([1] if unit_m else []) + list(ir.RankedTensorType(op.operands[x].type).shape)
    b_shape = ir.RankedTensorType(op.operands[y].type).shape

    def static(v):
        return None if ir.ShapedType.is_dynamic_size(v) else v

    return ScaledMatmul(
        x, y, sx, sy, static(a_shape[0]), static(b_shape[0]), static(a_shape[1]), static(a_shape[2]), unit_m
    ), ""
