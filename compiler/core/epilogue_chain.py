"""The elementwise consumers IREE fuses behind a contraction in one dispatch, read as the chain a
kernel applies to its accumulators in registers (the matmul families' epilogue and the weight-only
kernel's), and the whole-binding accesses every kernel reads its tensors through.

A consumer is a ``linalg.generic`` elementwise over the contraction's result: it reads that result
element by element, its other inputs (a bias, a residual, the other half of a gated activation)
through broadcasts or permutations of whole tensors loaded from bindings, and computes with arith
and math ops only. The chain ends in the store of a whole binding.
"""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.linalg_forms import packed_bitcast
from mmaflow.compiler.core.mlir import (
    defining_op,
    dispatch_tensor_access,
    location_of,
    segments,
    subspan_binding,
    subspan_constant_offset,
    subspan_dims,
    user_of,
)
from mmaflow.compiler.core.problem import Binding, EpilogueInput


def element_type(value: ir.Value) -> tuple[str, list[int]]:
    t = ir.ShapedType(value.type)
    return str(t.element_type), [t.get_dim_size(i) if not t.is_dynamic_dim(i) else -1 for i in range(t.rank)]


def whole_access(op: ir.Operation, sub: ir.Operation, tensor: ir.Type) -> bool:
    """Does the dispatch.tensor.load/store ``op`` move all of ``sub``'s tensor (offsets 0, full
    sizes, strides 1, the binding's own dynamic sizes)? ``tensor`` is the loaded/stored type."""
    if dispatch_tensor_access(sub.results[0].type, tensor) is None:
        return False

    def arr(name):
        return list(ir.DenseI64ArrayAttr(op.attributes[name]))

    full = list(ir.RankedTensorType(tensor).shape)
    if not (
        all(o == 0 for o in arr("static_offsets"))
        and arr("static_sizes") == full
        and all(x == 1 for x in arr("static_strides"))
    ):
        return False
    *_, dims, offsets, sizes, strides = segments(op)
    return dims == subspan_dims(sub) and sizes == subspan_dims(sub) and not offsets and not strides


def subspan_of(value: ir.Value) -> ir.Operation | None:
    op = defining_op(value)
    return op if op is not None and op.name == "hal.interface.binding.subspan" else None


def loaded_from(value: ir.Value) -> ir.Operation | None:
    """The subspan a tensor was loaded from, whole (through iree_tensor_ext.dispatch.tensor.load,
    and a bitcast of bytes to a 4/6-bit type: ``packed_bitcast``)."""
    cast = packed_bitcast(value)
    if cast is not None:
        value = cast.operands[0]
    load = defining_op(value)
    if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load":
        return None
    sub = subspan_of(load.operands[0])
    return sub if sub is not None and whole_access(load, sub, value.type) else None


def stored_to(store: ir.Operation) -> ir.Operation | None:
    """The subspan a dispatch.tensor.store writes whole."""
    sub = subspan_of(store.operands[1])
    return sub if sub is not None and whole_access(store, sub, store.operands[0].type) else None


def binding_of(sub: ir.Operation) -> Binding:
    return Binding(subspan_binding(sub), subspan_constant_offset(sub))


_ROLES = ("b", "m", "n")


def consumer_problem(gen: ir.Operation, value: ir.Value, rank: int) -> str | None:
    """Why ``gen`` is not an elementwise consumer of ``value`` mmaflow can apply in registers
    (None if it is one)."""
    if gen.name != "linalg.generic":
        return "is not a linalg.generic"
    iters = [str(t) for t in ir.ArrayAttr(gen.attributes["iterator_types"])]
    if len(iters) != rank or any("parallel" not in t for t in iters):
        return f"is not elementwise over the {rank}-D result (iterators {iters})"
    if len(gen.results) != 1:
        return f"has {len(gen.results)} results"
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(gen.attributes["indexing_maps"])]
    ins = list(gen.operands)[:-1]
    identity = ir.AffineMap.get_identity(rank, context=gen.context)
    if maps[-1] != identity:
        return "writes its result permuted"
    uses = [i for i, v in enumerate(ins) if v == value]
    if len(uses) != 1 or maps[uses[0]] != identity:
        return "does not read the matmul result element by element"
    for amap in maps[:-1]:
        dims = [e.position for e in amap.results if isinstance(e, ir.AffineDimExpr)]
        if len(dims) != len(amap.results) or len(set(dims)) != len(dims):
            return f"reads an input through {amap}, which is not a broadcast or permutation"
    block = gen.regions[0].blocks[0]
    out_arg = list(block.arguments)[-1]
    if len(list(out_arg.uses)):
        return "reads its output tensor"
    inside = {o.operation for o in block.operations}
    for o in (o.operation for o in block.operations):
        if o.name == "linalg.yield":
            continue
        if o.name == "linalg.index":
            return "depends on the element's position (linalg.index)"
        if not o.name.startswith(("arith.", "math.")) or o.regions:
            return f"computes with {o.name} (mmaflow applies arith and math ops in registers)"
        for v in o.operands:
            d = defining_op(v)
            if d is not None and d not in inside and d.name != "arith.constant":
                return f"uses {d.name} defined outside its body"
    return None


def match_epilogue(op: ir.Operation, batched: bool, stage: str | None = None, roles: tuple | None = None):
    """Follow the contraction's result through fused elementwise consumers to its store; ``roles``:
    what each dim of the result is ("b", "m", "n"; by default (b,) m, n).

    Returns (consumer generics in order, the final store, [(input subspan, EpilogueInput)], body
    op names, stored element type)."""
    roles = roles or _ROLES[-(3 if batched else 2) :]
    rank = len(roles)
    chain, inputs, names = [], [], []
    value = op.results[0]
    while True:
        users = [user_of(u) for u in value.uses]
        what = "the matmul result" if not chain else f"the result of {chain[-1].name}"
        if len(users) != 1:
            raise UnsupportedError(
                f"{what} has {len(users)} users; mmaflow stores exactly one result per dispatch",
                stage=stage,
                location=location_of(op),
            )
        user = users[0]
        if user.name == "iree_tensor_ext.dispatch.tensor.store":
            return chain, user, inputs, names, str(ir.ShapedType(value.type).element_type)
        why = consumer_problem(user, value, rank)
        if why:
            raise UnsupportedError(
                f"the matmul is fused with {user.name}, which {why}; mmaflow fuses elementwise epilogues only",
                stage=stage,
                location=location_of(user),
            )
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(user.attributes["indexing_maps"])]
        for operand, amap in zip(list(user.operands)[:-1], maps):
            if operand == value:
                continue
            sub = loaded_from(operand)
            if sub is None:
                src = defining_op(operand)
                if src is not None and src.name == "tensor.empty":
                    raise UnsupportedError(
                        f"the epilogue {user.name} reads an uninitialized tensor (tensor.empty)",
                        stage=stage,
                        location=location_of(user),
                    )
                raise UnsupportedError(
                    f"an epilogue input ({src.name if src else 'a block argument'}) is not a whole tensor "
                    f"loaded from a binding",
                    stage=stage,
                    location=location_of(user),
                )
            elem, shape = element_type(operand)
            inputs.append(
                (
                    sub,
                    EpilogueInput(
                        binding_of(sub),
                        elem,
                        tuple(None if x == -1 else x for x in shape),
                        tuple(roles[e.position] for e in amap.results),
                    ),
                )
            )
        names += [o.operation.name for o in user.regions[0].blocks[0].operations if o.operation.name != "linalg.yield"]
        chain.append(user)
        value = user.results[0]
