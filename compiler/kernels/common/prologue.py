"""The prologue: what the kernel needs before its tensor program, kept where the script cannot
fold it away.

`normalize` hands the transform script a static stand-in problem (dynamic and unaligned sizes
rounded up to whole tiles) and moves the fused epilogue out of the tensor program. Two kinds of
values then have no use left in the function the script transforms, and canonicalization would
erase them:

- the dynamic sizes (push constants, ``util.assume.int``, workload ordinals; ``core/dynamic.py``);
- the bindings of the epilogue's extra inputs (a bias, a residual) and of a block-scaled
  matmul's scales (read in the K loop, not through the script's tiles): IREE's own
  ``hal.interface.binding.subspan`` ops, moved here unchanged (binding, byte offset, alignment,
  descriptor flags, layout, dynamic dims) and typed as the buffers `distribute` reads
  (``memref<shape, strided<[...], offset: ?>, #gpu.address_space<global>>``: the byte offset
  operand is what IREE's lowering adds, exactly as for the buffers it bufferizes itself).

So `normalize` puts them into a private function ``@<dispatch>_prologue`` (tagged
``mmaflow.prologue``) that returns, in order, the problem's dynamic sizes (``dynamic.DIM_ORDER``)
the epilogue inputs' buffers (``Contraction.epilogue`` order) and the A and B scale buffers; the ops computing them are
cloned along. `distribute` inlines it at the top of the kernel (``inline_prologue``).
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import func as func_d

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.dynamic import DIM_ORDER
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import clone_into, defining_op, str_attr
from mmaflow.compiler.core.problem import Contraction


def buffer_type(shape: list, elem: ir.Type, *, offset_known: int | None = None) -> ir.MemRefType:
    """``memref<shape x elem, strided<[row-major strides], offset: ?>, #gpu.address_space<global>>``
    (the offset static when ``offset_known`` is given, and the plain row-major layout when that is
    0; None sizes are dynamic)."""
    dyn = ir.ShapedType.get_dynamic_size()
    dims = [dyn if s is None else s for s in shape]
    strides, acc = [], 1
    for s in reversed(dims):
        strides.append(acc)
        acc = dyn if (acc == dyn or s == dyn) else acc * s
    strides.reverse()
    space = ir.Attribute.parse("#gpu.address_space<global>")
    if offset_known == 0:
        return ir.MemRefType.get(dims, elem, None, space)
    stride_offset = ir.ShapedType.get_dynamic_stride_or_offset()
    layout = ir.StridedLayoutAttr.get(
        stride_offset if offset_known is None else offset_known, [stride_offset if x == dyn else x for x in strides]
    )
    return ir.MemRefType.get(dims, elem, layout, space)


@dataclass
class Prologue:
    """What normalize moves into the prologue, in return order."""

    sizes: list  # (dim, ir.Value in the dispatch function)
    buffers: list  # hal.interface.binding.subspan ops (of the epilogue inputs) to move


def build(func: ir.Operation, problem: Contraction, pro: Prologue) -> ir.Operation | None:
    """Create ``@<func>_prologue`` returning ``pro``'s values; move the subspans into it (each
    keeps all its attributes and operands, the operands' computations cloned along). Returns
    the function, or None when there is nothing to return."""
    if not pro.sizes and not pro.buffers:
        return None
    dims = [d for d in DIM_ORDER if problem.dynamic_dim(d) is not None]
    if [d for d, _ in pro.sizes] != dims:
        raise CodegenError(f"prologue sizes {[d for d, _ in pro.sizes]} do not follow the problem's {dims}")
    entry = [o.operation for o in func.regions[0].blocks[0].operations]
    wanted = [v for _, v in pro.sizes] + [o for sub in pro.buffers for o in sub.operands]
    needed, todo = set(), list(wanted)
    while todo:
        op = defining_op(todo.pop())
        if op is None or op in needed:
            continue
        if op not in entry:
            raise CodegenError("a prologue value is computed inside a region")
        needed.add(op)
        todo += list(op.operands)
    slice_ops = [o for o in entry if o in needed]
    index = ir.IndexType.get()
    results = [index] * len(pro.sizes) + [sub.results[0].type for sub in pro.buffers]
    with func.location, ir.InsertionPoint(func):
        pfunc = func_d.FuncOp(f"{str_attr(func, 'sym_name')}_prologue", ([], results), visibility="private")
    attrs.mark(pfunc, attrs.PROLOGUE)
    block = pfunc.add_entry_block()
    ip = ir.InsertionPoint(block)
    mapping = clone_into(slice_ops, ip, {})
    for sub in pro.buffers:
        sub.detach_from_parent()
        ip.insert(sub)
        for i, v in enumerate(sub.operands):
            sub.operands[i] = mapping.get(v, v)
    with func.location, ip:
        func_d.ReturnOp([mapping[v] for _, v in pro.sizes] + [sub.results[0] for sub in pro.buffers])
    return pfunc


def inline_prologue(func: ir.Operation, ip: ir.InsertionPoint, problem: Contraction) -> tuple[dict, list]:
    """Clone the prologue's body at ``ip`` and erase it; return (dim -> size value, epilogue
    input buffers in order, then a block-scaled problem's A and B scale buffers). Empty when
    the dispatch has no prologue."""
    pfunc = attrs.marked_func(func.parent, attrs.PROLOGUE)
    dims = [d for d in DIM_ORDER if problem.dynamic_dim(d) is not None]
    scales = 2 if problem.scales is not None else 0
    want = len(dims) + len(problem.epilogue) + scales
    if pfunc is None:
        if want:
            raise CodegenError(
                f"the problem has {len(dims)} dynamic sizes, {len(problem.epilogue)} epilogue "
                f"inputs and {scales} scale buffers but the module has no prologue function"
            )
        return {}, []
    body = [o.operation for o in pfunc.regions[0].blocks[0].operations]
    ret = body[-1]
    mapping = clone_into(body[:-1], ip, {})
    out = [mapping[v] for v in ret.operands]
    if len(out) != want:
        raise CodegenError(
            f"the prologue returns {len(out)} values; the problem needs {len(dims)} sizes, "
            f"{len(problem.epilogue)} epilogue inputs and {scales} scale buffers"
        )
    pfunc.erase()
    return dict(zip(dims, out[: len(dims)])), out[len(dims) :]


# The ops a dispatch computes its dynamic sizes with (push constants and scalar arithmetic); a direct
# family's kernel (weight-only, attention) moves them ahead of itself.
_SCALAR_OPS = ("hal.interface.constant.load", "iree_tensor_ext.dispatch.workload.ordinal", "util.assume.int")


def scalar_prologue(fn: ir.Operation) -> list[ir.Operation]:
    """The dispatch's scalar ops (its dynamic sizes' definitions), in order."""
    out = []
    for op in (o.operation for o in fn.regions[0].blocks[0].operations):
        scalar = bool(op.results) and all(not isinstance(r.type, ir.ShapedType) for r in op.results)
        if op.name in _SCALAR_OPS or (op.name.startswith("arith.") and scalar):
            out.append(op)
    return out
