"""A fused epilogue, applied to accumulator registers by the `distribute` stage.

`normalize` set the epilogue aside as a scalar function ``(acc, inputs...) -> stored`` (arith and
math ops only). Here each of its ops is re-created on vectors: one application per run of
accumulator elements that are contiguous along N (the runs the store writes), with the extra
inputs loaded at the run's coordinates:

    input indexed by ... n (last)   a vector load of the run's length (bias over columns, residual)
    input without n                 one element, broadcast (bias over rows, per-batch scale)
    input with n not last           one load per element (a transposed residual)

Loads are shared between runs that read the same elements (a row bias is loaded once per
accumulator tile, not once per element), and bounded like every global access when the tiles
overhang the true output. On NVIDIA, ``math.erf`` is expanded here (``kernels/common/fast_math.py``: no division,
about half the instructions of IREE's lowering, as accurate), and GELU's ``1 + erf(u)`` (an ``arith.addf``
of the f32 constant 1.0 and an erf used nowhere else) is evaluated whole as erfc(-u), in one piece
(``fast_math.emit_one_plus_erf``); ``math.exp`` and a 16-bit ``arith.divf`` are expanded there too, the
division branch-free and bit for bit IREE's (``fast_math.emit_divide``). An ``arith.truncf`` goes through
``Emitter.convert``: to bf16 on NVIDIA one ``cvt`` a pair, where IREE 3.13 rounds with integer ops. The
inputs' buffers are IREE's own subspans, kept in the prologue (``kernels/common/prologue.py``) with their
byte offsets.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import func as func_d

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import clone_into, defining_op, location_of, str_attr
from mmaflow.compiler.core.problem import EpilogueInput
from mmaflow.compiler.kernels.common.emit import Emitter, type_bits, vector_type
from mmaflow.compiler.kernels.common.fast_math import (
    NVIDIA_EXPANSIONS,
    emit_divide,
    emit_one_plus_erf,
    is_one,
    one_plus_erf,
)
from mmaflow.compiler.target.targets import Vendor


def epilogue_function(module_op: ir.Operation) -> ir.Operation | None:
    return attrs.marked_func(module_op, attrs.EPILOGUE)


def compose_epilogue(
    func: ir.Operation,
    acc_type: str,
    input_types: list[str],
    stored_type: str,
    chain: list,
    result: ir.Value,
    input_values: list,
    *,
    stage: str,
) -> ir.Operation:
    """The epilogue generics' bodies (``chain``, consumers of the contraction's ``result``), composed into
    ``func.func private @<name>_epilogue(acc, inputs...) -> stored`` before ``func``; ``input_values``:
    the tensors the chain reads besides the accumulator, in the record's order."""
    types = [ir.Type.parse(acc_type)] + [ir.Type.parse(t) for t in input_types]
    ftype = ir.FunctionType.get(types, [ir.Type.parse(stored_type)])
    with func.location, ir.InsertionPoint(func):
        efunc = func_d.FuncOp(f"{str_attr(func, 'sym_name')}_epilogue", ftype, visibility="private")
    attrs.mark(efunc, attrs.EPILOGUE)
    block = efunc.add_entry_block()
    ip = ir.InsertionPoint(block)
    args = list(block.arguments)
    current, value, nxt = args[0], result, 1
    constants: dict = {}
    for gen in chain:
        gblock = gen.regions[0].blocks[0]
        local = {}
        for barg, operand in zip(list(gblock.arguments), list(gen.operands)[:-1]):
            if operand == value:
                local[barg] = current
            else:
                if nxt > len(input_values) or input_values[nxt - 1] != operand:
                    raise CodegenError(
                        "the epilogue reads its inputs in another order than select recorded",
                        stage=stage,
                        location=location_of(gen),
                    )
                local[barg] = args[nxt]
                nxt += 1
        for o in (o.operation for o in gblock.operations):
            if o.name == "linalg.yield":
                current = local[o.operands[0]]
                break
            for v in o.operands:
                if v not in local:  # a constant captured from outside the generic (select checked)
                    if v not in constants:
                        constants[v] = defining_op(v).clone(ip).results[0]
                    local[v] = constants[v]
            clone_into([o], ip, local)
        value = gen.results[0]
    with func.location, ip:
        func_d.ReturnOp([current])
    if nxt != len(args):
        raise CodegenError(f"the epilogue reads {nxt - 1} inputs, select recorded {len(args) - 1}", stage=stage)
    return efunc


class Epilogue:
    """Applies ``efunc`` to runs of accumulator elements; ``described``: the ``EpilogueInput`` of each
    of its inputs, ``inputs`` their buffers.

    ``overhang``: for each of "b", "m", "n", whether its tiles overhang the true extent (then
    the input loads along it are bounded); ``extents``: the true extents (int or index value)."""

    def __init__(self, efunc: ir.Operation, described: tuple, inputs: list[ir.Value], overhang: dict, extents: dict):
        self.func = efunc
        self.inputs: list[tuple[EpilogueInput, ir.Value]] = list(zip(described, inputs))
        self.overhang, self.extents = overhang, extents
        self._loaded: dict = {}
        # 1 + erf(u), the erf used nowhere else: the addf's result -> u, and the erfs it absorbs
        # (NVIDIA only: fast_math.emit_one_plus_erf)
        self._one_plus_erf: dict = {}
        self._absorbed: set = set()
        for op in (o.operation for o in efunc.regions[0].blocks[0].operations):
            erf = one_plus_erf(op)
            if erf is not None:
                self._one_plus_erf[op.results[0]] = erf.operands[0]
                self._absorbed.add(erf.results[0])

    def apply(self, em: Emitter, acc: ir.Value, coords: dict, key: dict) -> ir.Value:
        """The epilogue of ``acc`` (vector<L x acc>, L elements along n from ``coords``).

        ``coords``: index values of the run's first element for "b" (if batched), "m", "n".
        ``key``: a hashable stand-in for each coordinate (equal keys = equal index values) so that
        runs reading the same input elements share one load."""
        length = ir.VectorType(acc.type).shape[0]
        values = [acc] + [self._input(em, desc, mem, coords, key, length) for desc, mem in self.inputs]
        block = self.func.regions[0].blocks[0]
        mapping = dict(zip(list(block.arguments), values))
        for op in (o.operation for o in block.operations):
            if op.name == "func.return":
                return mapping[op.operands[0]]
            if op.name == "arith.constant":
                vt = vector_type([length], op.results[0].type)
                mapping[op.results[0]] = em.splat_const(vt, op.attributes["value"])
                continue
            if em.vendor == Vendor.NVIDIA and op.results[0] in self._absorbed:
                continue  # evaluated with the addf below
            if em.vendor == Vendor.NVIDIA and op.results[0] in self._one_plus_erf:
                # 1 + erf(u) = erfc(-u) in one piece: cheaper than the erf expansion plus the add
                mapping[op.results[0]] = emit_one_plus_erf(em, mapping[self._one_plus_erf[op.results[0]]])
                continue
            expand = NVIDIA_EXPANSIONS.get(op.name) if em.vendor == Vendor.NVIDIA else None
            elem = op.results[0].type
            if op.name == "arith.truncf" and len(op.attributes) == 0:
                # (Emitter.convert: to bf16 on NVIDIA one cvt a pair, where IREE expands the op into
                # integer rounding; a rounding mode or fastmath flag keeps the op as it is)
                mapping[op.results[0]] = em.convert(mapping[op.operands[0]], elem)
                continue
            if (
                em.vendor == Vendor.NVIDIA
                and op.name == "arith.divf"
                and str(elem) in ("f16", "bf16")
                and "roundingmode" not in op.attributes
            ):
                # branch-free and correctly rounded (to nearest even; another rounding mode keeps the op),
                # where IREE's f32 division branches to a slow path per element (fast_math.py, "arith.divf")
                f32 = ir.F32Type.get()
                num, den = (em.convert(mapping[v], f32) for v in op.operands)
                num = None if is_one(op.operands[0], str(elem)) else num
                mapping[op.results[0]] = em.convert(emit_divide(em, num, den, wide=str(elem) == "bf16"), elem)
                continue
            if expand and str(elem) in ("f32", "f16", "bf16"):
                # cheaper than IREE's lowering of the op, as accurate (kernels/common/fast_math.py); a
                # 16-bit one as IREE evaluates it, in f32, then truncated (convert: none for f32)
                wide = em.convert(mapping[op.operands[0]], ir.F32Type.get())
                mapping[op.results[0]] = em.convert(expand(em, wide), elem)
                continue
            with em.loc, em.ip:
                new = ir.Operation.create(
                    op.name,
                    results=[vector_type([length], r.type) for r in op.results],
                    operands=[mapping[v] for v in op.operands],
                    attributes={op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))},
                )
            for old, res in zip(op.results, new.results):
                mapping[old] = res
        raise CodegenError("the epilogue function has no return")

    def load_bytes(self, length: int) -> int:
        """The bytes of input one run of ``length`` elements loads (an input without n: one element)."""
        return sum(
            (length if "n" in desc.dims else 1) * max(8, type_bits(ir.Type.parse(desc.type))) // 8
            for desc, _ in self.inputs
        )

    def prefetch(self, em: Emitter, coords: dict, key: dict, length: int) -> None:
        """Issue the loads of a run's inputs now (``apply`` then finds them). The caller issues
        them runs ahead of the runs it computes and stores: on NVIDIA each bounded store is its
        own basic block (``bounded_global_store``), across which ptxas does not hoist a load, so
        loads issued with their run wait out a global load's latency once per run."""
        for desc, mem in self.inputs:
            self._cached(em, desc, mem, coords, key, length)

    def _cached(self, em: Emitter, desc: EpilogueInput, mem: ir.Value, coords: dict, key: dict, length: int):
        """The input's elements for a run: loaded once per distinct set of elements."""
        along_n = "n" in desc.dims
        cache_key = (id(mem), tuple(key[d] for d in desc.dims), length if along_n else 1)
        if cache_key not in self._loaded:
            elem = ir.Type.parse(desc.type)
            self._loaded[cache_key] = self._load(em, desc, mem, coords, length if along_n else 1, elem)
        return self._loaded[cache_key]

    def _input(self, em: Emitter, desc: EpilogueInput, mem: ir.Value, coords: dict, key: dict, length: int) -> ir.Value:
        elem = ir.Type.parse(desc.type)
        along_n = "n" in desc.dims
        val = self._cached(em, desc, mem, coords, key, length)
        if not along_n and length > 1:
            val = em.broadcast(em.extract(val, 0), vector_type([length], elem))
        return val

    def _load(
        self, em: Emitter, desc: EpilogueInput, mem: ir.Value, coords: dict, length: int, elem: ir.Type
    ) -> ir.Value:
        limits = [self.extents[d] if self.overhang[d] else None for d in desc.dims]
        extent0 = self.extents[desc.dims[0]]
        idx = [coords[d] for d in desc.dims]
        if length == 1 or desc.dims[-1] == "n":
            piece = max(1, min(length, 128 // type_bits(elem)))  # global accesses are at most 128 bits
            if piece == length:
                return em.bounded_global_load(mem, idx, vector_type([length], elem), limits, extent0)
            out = em.zero_vector(vector_type([length], elem))
            for start in range(0, length, piece):
                at = idx[:-1] + [em.add(idx[-1], start)]
                part = em.bounded_global_load(mem, at, vector_type([piece], elem), limits, extent0)
                out = em.insert_slice(part, out, start)
            return out
        n_axis = desc.dims.index("n")
        parts = []
        for i in range(length):
            at = list(idx)
            at[n_axis] = em.add(idx[n_axis], i)
            parts.append(em.extract(em.bounded_global_load(mem, at, vector_type([1], elem), limits, extent0), 0))
        return em.from_elements(vector_type([length], elem), parts)
