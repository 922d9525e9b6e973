"""Stage `normalize`: bring the dispatch into the form the transform script takes, in place.

The form: subspans, dispatch.tensor loads of A and B, zero fill, the contraction (tagged
``mmaflow.contraction``, a named op or a ``linalg.generic`` as IREE formed it) and the store of
its accumulator-typed result, every shape static and a whole number of tiles.

The dispatch is rewritten through the MLIR bindings, never regenerated: each subspan keeps every
attribute and its byte-offset operand (IREE packs tensors into shared buffers, so a tensor may
start at any offset of its binding), the contraction keeps its maps and body.

- Unaligned shapes: when M, N or K is not a multiple of the config's tile, the types of the
  subspans, loads, fill and contraction are rounded up to whole tiles. No data is copied or
  padded: `distribute` gives the bindings their true shapes back (``mmaflow.problem`` keeps them)
  and bounds every global access.
- Dynamic sizes: the script sees two tiles per dynamic dimension; the ops computing the true
  sizes go to the prologue function (``compiler/kernels/common/prologue.py``); the subspans' dynamic-dim
  operands are dropped here and restored by `distribute` from the prologue.
- A fused epilogue (elementwise consumers tagged ``mmaflow.epilogue`` by `select`) is moved out
  of the tensor program into a private scalar function ``@<dispatch>_epilogue(acc, inputs...) ->
  stored`` (tagged ``mmaflow.epilogue``); the subspans of its inputs move to the prologue. The
  result's subspan holds the accumulator type until `distribute` stores the epilogue's type.

- 4- and 6-bit operands (bytes bit-cast in the dispatch, ``linalg_forms.packed_bitcast``): the
  bitcast is folded into the binding, whose subspan and load take the 4/6-bit tensor type (the
  same bytes, the same offset). The script then tiles and promotes them as any operand;
  `distribute` moves them as bytes.

Aligned static dispatches without an epilogue or packed operands pass through untouched.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, iree_tensor_ext, tensor

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.dynamic import DIM_ORDER
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.linalg_forms import folded_fill, packed_bitcast, scaled_matmul
from mmaflow.compiler.core.mlir import (
    defining_op,
    dispatch_tensor_access,
    dispatch_tensor_type,
    location_of,
    op_attributes,
    segments,
    unique_ops,
    user_of,
    walk,
)
from mmaflow.compiler.core.problem import Contraction, operand_shapes, padded_problem
from mmaflow.compiler.kernels.common import prologue
from mmaflow.compiler.kernels.common.epilogue import compose_epilogue

NAME = "normalize"


class _Rewriter:
    """The dispatch's tensor program: its contraction, epilogue chain, loads, subspans."""

    def __init__(self, func: ir.Operation, problem: Contraction):
        self.func, self.problem = func, problem
        (self.contraction,) = [o for o in walk(func) if attrs.marked(o, attrs.CONTRACTION)]
        self.chain = [o for o in walk(func) if o.name == "linalg.generic" and attrs.marked(o, attrs.EPILOGUE)]
        last = self.chain[-1] if self.chain else self.contraction
        (self.store,) = [user_of(u) for u in last.results[0].uses]
        if self.store.name != "iree_tensor_ext.dispatch.tensor.store":
            raise CodegenError(f"the contraction's result reaches {self.store.name}, not a store", stage=NAME)
        self.loads = [defining_op(self.contraction.operands[i]) for i in (0, 1)]
        self.subspans = {
            "A": defining_op(self.loads[0].operands[0]),
            "B": defining_op(self.loads[1].operands[0]),
            "C": defining_op(self.store.operands[1]),
        }
        moved = {
            "A": self.loads[0].results[0].type,
            "B": self.loads[1].results[0].type,
            "C": self.store.operands[0].type,
        }
        self.access = {r: dispatch_tensor_access(self.subspans[r].results[0].type, moved[r]) for r in "ABC"}
        if None in self.access.values():
            raise CodegenError("a binding's type does not match the tensor loaded or stored through it", stage=NAME)
        # The epilogue's extra inputs (loads of whole bindings, select checked), in problem order.
        self.epilogue_inputs = []
        value = self.contraction.results[0]
        for gen in self.chain:
            self.epilogue_inputs += [v for v in list(gen.operands)[:-1] if v != value]
            value = gen.results[0]
        if len(self.epilogue_inputs) != len(problem.epilogue):
            raise CodegenError(
                f"the epilogue reads {len(self.epilogue_inputs)} tensors, select recorded {len(problem.epilogue)}",
                stage=NAME,
            )

    def detach_epilogue(self) -> list[ir.Operation]:
        """Move the epilogue into its function; store the accumulator instead. Returns the
        subspans of its inputs (now unused), to go to the prologue."""
        p = self.problem
        compose_epilogue(
            self.func,
            p.c_type,
            [e.type for e in p.epilogue],
            p.stored_type,
            self.chain,
            self.contraction.results[0],
            self.epilogue_inputs,
            stage=NAME,
        )
        self.store.operands[0] = self.contraction.results[0]
        for gen in reversed(self.chain):
            outs = defining_op(list(gen.operands)[-1])
            gen.erase()
            if outs is not None and outs.name == "tensor.empty" and not list(outs.results[0].uses):
                outs.erase()
        subs = []
        for value, desc in zip(self.epilogue_inputs, self.problem.epilogue):
            load = defining_op(value)
            sub = defining_op(load.operands[0])
            if not list(value.uses):
                load.erase()
            subs.append(sub)
        for sub, desc in zip(subs, self.problem.epilogue):
            if list(sub.results[0].uses):
                raise CodegenError(
                    f"binding {desc.at.binding} feeds both the epilogue and the contraction",
                    stage=NAME,
                    location=location_of(sub),
                )
            elem = ir.Type.parse(desc.type)
            bits = ir.FloatType(elem).width if isinstance(elem, ir.FloatType) else ir.IntegerType(elem).width
            known = (
                desc.at.offset // (bits // 8)
                if desc.at.offset is not None and desc.at.offset % (bits // 8) == 0
                else None
            )
            sub.results[0].set_type(prologue.buffer_type(list(desc.shape), elem, offset_known=known))
        return subs

    def restore_fill(self) -> bool:
        """K = 1: IREE folded the zero fill into the body (``linalg_forms.folded_fill``). Put the
        fill back and let the body add its accumulator, the form every other matmul has."""
        folded = folded_fill(self.contraction)
        if folded is None:
            return False
        from iree.compiler.dialects import linalg  # (its import builds every named op: 0.3 s)

        op = self.contraction
        block = op.regions[0].blocks[0]
        out_arg = list(block.arguments)[2]
        zero_type = out_arg.type
        if folded.add is not None:  # a*b + 0: add the accumulator instead
            zero_attr = defining_op(folded.zero).attributes["value"]
            folded.add.operands[list(folded.add.operands).index(folded.zero)] = out_arg
        else:  # the bare product: out + a*b
            zero_attr = (
                ir.IntegerAttr.get(zero_type, 0)
                if isinstance(zero_type, ir.IntegerType)
                else ir.FloatAttr.get(zero_type, 0.0)
            )
            yield_op = [o.operation for o in block.operations][-1]
            name = "arith.addi" if folded.product.name == "arith.muli" else "arith.addf"
            with folded.product.location, ir.InsertionPoint(yield_op):
                add = ir.Operation.create(name, results=[zero_type], operands=[out_arg, folded.product.results[0]])
            yield_op.operands[0] = add.results[0]
        empty = defining_op(op.operands[2])
        with op.location, ir.InsertionPoint(op):
            zero = ir.Operation.create("arith.constant", results=[zero_type], attributes={"value": zero_attr})
            op.operands[2] = linalg.fill(zero.results[0], outs=[empty.results[0]])
        return True

    def to_static(self, padded: Contraction) -> None:
        """Give the tensor program the static shapes of ``padded`` (whole tiles): subspans, loads,
        fill, contraction, store. Subspans keep their attributes and byte offset; dynamic dims
        are dropped (the prologue holds them)."""
        shapes = operand_shapes(padded)
        elem = {"A": padded.a_type, "B": padded.b_type, "C": padded.c_type}
        types = {r: ir.RankedTensorType.get(shapes[r], ir.Type.parse(elem[r])) for r in "ABC"}
        new_subs = {}
        for role, sub in self.subspans.items():
            twin = new_subs.get("A") if role == "B" and sub == self.subspans["A"] else None
            if twin is not None and twin.type == dispatch_tensor_type(self.access["B"], types["B"]):
                new_subs[role] = twin  # one tensor as both operands, in one padded shape
            else:
                new_subs[role] = self._retype_subspan(sub, self.access[role], types[role], copy=twin is not None)
        old_loads = []
        for i, role in enumerate("AB"):
            load = self.loads[i]
            with load.location, ir.InsertionPoint(load):
                new = iree_tensor_ext.DispatchTensorLoadOp(
                    types[role],
                    new_subs[role],
                    [],
                    [],
                    [],
                    [],
                    [0] * len(shapes[role]),
                    shapes[role],
                    [1] * len(shapes[role]),
                )
            self.contraction.operands[i] = new.result
            old_loads.append(load)
        for load in unique_ops(old_loads):
            if not list(load.results[0].uses):
                load.erase()
        init = self.contraction.operands[2]
        fill = defining_op(init)
        empty = defining_op(fill.operands[1])
        with empty.location, ir.InsertionPoint(empty):
            new_empty = tensor.EmptyOp(shapes["C"], types["C"].element_type)
        fill.operands[1] = new_empty.result
        if not list(empty.results[0].uses):
            empty.erase()
        fill.results[0].set_type(types["C"])
        self.contraction.results[0].set_type(types["C"])
        self._restore_unit_dims(padded)
        store = self.store
        with store.location, ir.InsertionPoint(store):
            iree_tensor_ext.DispatchTensorStoreOp(
                store.operands[0],
                new_subs["C"],
                [],
                [],
                [],
                [],
                [0] * len(shapes["C"]),
                shapes["C"],
                [1] * len(shapes["C"]),
            )
        store.erase()
        for sub in unique_ops(self.subspans.values()):  # A @ A: one subspan, two roles
            if not list(sub.results[0].uses):
                sub.erase()

    def _restore_unit_dims(self, padded: Contraction) -> None:
        """A generic whose unit dimensions IREE dropped (M, N or K = 1) gets them back: its maps
        and iterator types become those of the full (batch) matmul, as its operand types now are.
        The body (a multiply-accumulate, select checked) is untouched."""
        op, p = self.contraction, padded
        n_loops = 4 if p.batched else 3
        if ir.AffineMapAttr(ir.ArrayAttr(op.attributes["indexing_maps"])[0]).value.n_dims == n_loops:
            return
        if op.name != "linalg.generic":
            raise CodegenError(f"{op.name} has fewer loops than a matmul", stage=NAME, location=location_of(op))
        from iree.compiler.dialects import linalg  # (its import builds every named op: 0.3 s)

        b, m, n, k = (
            ([ir.AffineDimExpr.get(0)] if p.batched else []),
            *(ir.AffineDimExpr.get(i + p.batched) for i in range(3)),
        )
        a = b + ([k, m] if p.a_transposed else [m, k])
        bb = b + ([n, k] if p.b_transposed else [k, n])
        c = b + [m, n]
        op.attributes["indexing_maps"] = ir.ArrayAttr.get(
            [ir.AffineMapAttr.get(ir.AffineMap.get(n_loops, 0, r)) for r in (a, bb, c)]
        )
        kinds = [linalg.IteratorType.parallel] * (n_loops - 1) + [linalg.IteratorType.reduction]
        op.attributes["iterator_types"] = ir.AttrBuilder.get("IteratorTypeArrayAttr")(kinds, op.context)

    @staticmethod
    def _retype_subspan(sub: ir.Operation, access: str, tensor_t: ir.RankedTensorType, *, copy: bool) -> ir.Value:
        """``sub`` typed as the dispatch tensor of ``tensor_t``: in place when it has no dynamic
        dims (and no ``copy`` is asked for), else a copy of the op without them; every attribute
        and the byte-offset operand are kept."""
        new_t = dispatch_tensor_type(access, tensor_t)
        offset, dims = segments(sub)
        if not dims and not copy:
            sub.results[0].set_type(new_t)
            return sub.results[0]
        named = op_attributes(sub)
        named["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(offset), 0])
        with sub.location, ir.InsertionPoint(sub):
            new = ir.Operation.create(
                "hal.interface.binding.subspan", results=[new_t], operands=offset, attributes=named
            )
        return new.results[0]


def normalize(module: ir.Module, func: ir.Operation) -> list[str]:
    """Rewrite ``func`` in place into the script's form if it needs it; return what was done."""
    problem, cfg = attrs.read_problem(func), attrs.read_config(func)
    folded = _fold_packed_bitcasts(module, func)
    scale_subs = _unscale(module, func, problem) if problem.scales is not None else []
    done = []
    if scale_subs:
        done.append("the block scales moved out of the contraction (distribute puts them into each instruction)")
    unaligned = [
        d
        for d, t in (("m", cfg.tile_m), ("n", cfg.tile_n), ("k", cfg.tile_k))
        if getattr(problem, d) is not None and getattr(problem, d) % t
    ]
    if unaligned:
        done.append(f"iteration space rounded up to whole tiles ({', '.join(unaligned)} unaligned)")
    if problem.has_epilogue:
        done.append(f"epilogue ({' '.join(problem.epilogue_ops)}) moved into a function")
    if problem.is_dynamic:
        names = ", ".join(d.dim for d in problem.dynamic)
        done.append(f"dynamic {names}: the script sees two tiles each; the sizes moved into the prologue")
    if not done:
        return folded
    with module.context, func.location:
        rw = _Rewriter(func, problem)
        if rw.restore_fill():
            done.append("the zero fill IREE folded into the body (K = 1) restored")
        n_loops = ir.AffineMapAttr(ir.ArrayAttr(rw.contraction.attributes["indexing_maps"])[0]).value.n_dims
        if n_loops < 3 + problem.batched:
            unit = [d.upper() for d in ("m", "n", "k") if getattr(problem, d) == 1]
            done.append(f"the unit dimension IREE dropped ({', '.join(unit)} = 1) restored: full matmul maps")
        buffers = (rw.detach_epilogue() if problem.has_epilogue else []) + scale_subs
        sizes = []
        if problem.is_dynamic:
            ordinals = {
                ir.IntegerAttr(o.attributes["ordinal"]).value: o.results[0]
                for o in walk(func)
                if o.name == "iree_tensor_ext.dispatch.workload.ordinal"
            }
            sizes = [(d.dim, ordinals[d.ordinal]) for d in sorted(problem.dynamic, key=lambda d: _dim_rank(d.dim))]
        prologue.build(func, problem, prologue.Prologue(sizes, buffers))
        if unaligned or problem.is_dynamic or problem.has_epilogue:
            rw.to_static(padded_problem(problem, cfg))
    return folded + done


def _unscale(module: ir.Module, func: ir.Operation, problem: Contraction) -> list[ir.Operation]:
    """A block-scaled contraction (select: IREE's scaled-matmul form, ``linalg_forms.scaled_matmul``)
    as the plain A @ B^T the script tiles: A and B typed ``[M, K]`` / ``[N, K]`` (the same bytes:
    ``[M, K/32, 32]`` is row-major), a two-input generic (extf, mulf, addf) tagged
    ``mmaflow.scaled`` in its place. The scales leave the tensor program: their subspans, typed as
    the buffers `distribute` reads, are returned for the prologue, and `distribute` puts each lane's
    scale into every instruction (``amdgpu.scaled_mfma``)."""
    from iree.compiler.dialects import linalg  # (its import builds every named op: 0.3 s)

    op = next(o for o in walk(func) if attrs.marked(o, attrs.CONTRACTION))
    sm, why = scaled_matmul(op)
    if sm is None:
        raise CodegenError(f"the block-scaled contraction is not in IREE's scaled form: {why}", stage=NAME)
    operands = list(op.operands)
    with module.context, op.location:
        flat = []
        for i, rows in ((sm.a, None if sm.unit_m else problem.m), (sm.b, problem.n)):
            load = defining_op(operands[i])
            sub = defining_op(load.operands[0])
            shape = [problem.k] if rows is None else [rows, problem.k]
            t = ir.RankedTensorType.get(shape, ir.RankedTensorType(operands[i].type).element_type)
            sub.results[0].set_type(
                dispatch_tensor_type(dispatch_tensor_access(sub.results[0].type, load.results[0].type), t)
            )
            load.results[0].set_type(t)
            for name, val in (("static_offsets", 0), ("static_sizes", None), ("static_strides", 1)):
                load.attributes[name] = ir.DenseI64ArrayAttr.get(list(shape) if val is None else [val] * len(shape))
            flat.append(load.results[0])
        # M = 1 dropped (``sm.unit_m``): the matvec IREE forms for a plain one-row matmul (A [K], C [N]),
        # whose unit dimension ``_restore_unit_dims`` gives back as for any other
        n_loops = 2 if sm.unit_m else 3
        d = [ir.AffineDimExpr.get(i) for i in range(n_loops)]
        exprs = ([d[1]], [d[0], d[1]], [d[0]]) if sm.unit_m else ([d[0], d[2]], [d[1], d[2]], [d[0], d[1]])
        maps = [ir.AffineMap.get(n_loops, 0, r) for r in exprs]
        kinds = [linalg.IteratorType.parallel] * (n_loops - 1) + [linalg.IteratorType.reduction]
        out_t = op.results[0].type
        with ir.InsertionPoint(op):
            gen = linalg.GenericOp(
                [out_t],
                flat,
                [operands[4]],
                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                ir.AttrBuilder.get("IteratorTypeArrayAttr")(kinds, op.context),
            )
        f32 = ir.RankedTensorType(out_t).element_type
        block = gen.regions[0].blocks.append(*(ir.RankedTensorType(v.type).element_type for v in flat), f32)
        with ir.InsertionPoint(block):
            x, y = (arith.ExtFOp(f32, v).result for v in list(block.arguments)[:2])
            linalg.YieldOp([arith.AddFOp(list(block.arguments)[2], arith.MulFOp(x, y).result).result])
        attrs.mark(gen.operation, attrs.CONTRACTION)
        attrs.mark(gen.operation, attrs.SCALED)
        op.results[0].replace_all_uses_with(gen.results[0])
        op.erase()
        subs = []
        for i, at, rows in ((sm.a_scales, problem.scales.a, problem.m), (sm.b_scales, problem.scales.b, problem.n)):
            load = defining_op(operands[i])
            sub = defining_op(load.operands[0])
            load.erase()
            # (bytes: distribute loads them as i8 and bit-casts each to f8E8M0FNU)
            sub.results[0].set_type(
                prologue.buffer_type(
                    [rows, problem.k // problem.scales.block], ir.IntegerType.get_signless(8), offset_known=at.offset
                )
            )
            subs.append(sub)
    return subs


def _fold_packed_bitcasts(module: ir.Module, func: ir.Operation) -> list[str]:
    """Each bitcast of loaded bytes to a 4/6-bit type (``packed_bitcast``) folded into its binding:
    the subspan and the load take the bitcast's type, the bitcast goes. The byte offset, flags
    and dynamic sizes stay (select accepts a packed dimension only where it is static)."""
    casts = [o for o in walk(func) if o.name == "iree_tensor_ext.bitcast" and packed_bitcast(o.results[0]) is o]
    done = []
    with module.context, func.location:
        for cast in casts:
            load = defining_op(cast.operands[0])
            sub = defining_op(load.operands[0]) if load is not None else None
            if load is None or sub is None or load.name != "iree_tensor_ext.dispatch.tensor.load":
                raise CodegenError("a 4/6-bit bitcast not of a loaded binding", stage=NAME, location=location_of(cast))
            users = {user_of(u) for u in sub.results[0].uses} | {user_of(u) for u in load.results[0].uses}
            if users - {load, cast}:
                raise CodegenError(
                    "a 4/6-bit operand's bytes are read elsewhere in the dispatch too",
                    stage=NAME,
                    location=location_of(cast),
                )
            packed_t = ir.RankedTensorType(cast.results[0].type)
            access = dispatch_tensor_access(sub.results[0].type, load.results[0].type)
            sub.results[0].set_type(dispatch_tensor_type(access, packed_t))
            load.results[0].set_type(packed_t)
            load.attributes["static_sizes"] = ir.DenseI64ArrayAttr.get(list(packed_t.shape))
            cast.results[0].replace_all_uses_with(load.results[0])
            cast.erase()
            binding = ir.IntegerAttr(sub.attributes["binding"]).value
            done.append(f"{packed_t.element_type} bytes of binding {binding} typed as {packed_t}")
    return done


def _dim_rank(dim: str) -> int:

    return DIM_ORDER.index(dim)
