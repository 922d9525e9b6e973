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
