"""The weight-only decode kernel: a matmul whose weights are stored as 4- or 8-bit integers with
per-group parameters (``core/quantized.py``), for the decode shapes (M up to two instruction row
tiles, or a dynamic M in blocks of that), where the cost is reading the weights once.

It is the decode kernel (``plan.py``) with B read packed. Each lane loads 128 bits of its B column
per chunk (32 i4 or 16 i8 weights, one contiguous run of K), unpacks them in registers to the
activation type and applies the dispatch's own dequantization body to them, then feeds them to the
matrix instruction as its B operand; K is split across the workgroup's waves, partial sums added
through LDS by wave 0, which stores the outputs. No dequantized copy of the weights exists anywhere.

Unpacking (exact, a few integer operations per pair): a 16-bit float whose bits are
``magic | v`` is ``base + v`` for a small integer v (f16 0x6400 = 1024: v < 1024; bf16 0x4300 = 128:
v < 128), so ``((word >> s) & 0x000F000F) | 0x64006400`` reinterpreted as two f16 and minus 1024
gives two 4-bit weights at once; into f16 the odd fields skip their shift: ``(word & 0x00F000F0) |
0x64006400`` is two 1024 + 16 v, and ``fma(x, 1/16, -64)`` gives v exactly (Marlin's unpacking: one
shift a word for 8 weights, not three). Signed weights are biased first (``xor`` of each field's sign bit)
and the bias subtracted with the base. 8-bit weights to bf16 go through f32 (``0x4B000000 | v`` is
2^23 + v) and a truncation, exact for |v| < 256. The unpacked order is not memory order: value i of
the run is weight ``unpack_order()[i]``; the K order (``plan.plan_k_order``) gives the instruction's
K positions in value order and A reads the same positions, so the sum over K is the same.

The dequantization body runs elementwise on the unpacked vector: the dispatch's ``linalg.generic``
body after the integer's conversion to float, cloned with vector types, its per-group operands
loaded once per lane and run (a run never crosses a group: the group is a multiple of the run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from iree.compiler import ir
from iree.compiler.dialects import arith, func, hal, llvm, scf, vector

from mmaflow.compiler.core import attrs, dynamic
from mmaflow.compiler.core.epilogue_chain import match_epilogue
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import (
    defining_op,
    op_attributes,
    segments,
    subspan_binding,
    subspan_constant_offset,
    user_of,
)
from mmaflow.compiler.core.problem import Binding
from mmaflow.compiler.core.quantized import WeightOnlyMatmul
from mmaflow.compiler.kernels.common.emit import Emitter, vector_type
from mmaflow.compiler.kernels.common.epilogue import Epilogue, compose_epilogue
from mmaflow.compiler.kernels.common.fragments import LaneIndex
from mmaflow.compiler.kernels.common.prologue import scalar_prologue
from mmaflow.compiler.kernels.decode.plan import LOAD_BITS, KOrder, LaneAffine, plan_a_loads, plan_k_order
from mmaflow.compiler.kernels.decode.rewrite import a_operands, lane_affine
from mmaflow.compiler.target.intrinsics import Intrinsic, WarpgroupIntrinsic
from mmaflow.compiler.target.layout import COL, ROW
from mmaflow.compiler.target.seeds import WEIGHT_ONLY_AMD, WEIGHT_ONLY_NVIDIA
from mmaflow.compiler.target.targets import Target, Vendor, get_target, read_target

_READ_ONLY, _INDIRECT = 1, 2  # hal.interface.binding.subspan descriptor_flags bits (IREE's HAL)
Q_BITS = {"i4": 4, "i8": 8}
ACT_TYPES = ("f16", "bf16")
# Elementwise ops the dequantization body may hold after the integer's conversion (cloned on vectors).
BODY_OPS = frozenset(
    {
        "arith.addf",
        "arith.subf",
        "arith.mulf",
        "arith.divf",
        "arith.negf",
        "arith.extf",
        "arith.truncf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.maxnumf",
        "arith.minnumf",
        "math.fma",
        "arith.constant",
    }
)


# ---- the dispatch ---------------------------------------------------------------------------------


def _dims(attr: ir.Attribute) -> list[int]:
    out = []
    for e in ir.AffineMapAttr(attr).value.results:
        if not isinstance(e, ir.AffineDimExpr):
            raise UnsupportedError(f"indexing map {attr}: not a projection of loops")
        out.append(ir.AffineDimExpr(e).position)
    return out


def _elem(v: ir.Value) -> str:
    return str(ir.ShapedType(v.type).element_type)


def _shape(v: ir.Value) -> list[int]:
    t = ir.ShapedType(v.type)
    if not t.has_static_shape:
        raise UnsupportedError("dynamic sizes (the weight-only kernel is planned for static ones)")
    return list(t.shape)


def _whole_load(v: ir.Value, what: str) -> ir.Operation:
    """The subspan ``v`` is loaded whole from (``UnsupportedError`` otherwise)."""
    load = defining_op(v)
    if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load":
        raise UnsupportedError(f"{what} is not loaded from a binding (computed in the dispatch?)")
    _check_whole(load, v.type, what)
    return defining_op(load.operands[0])


def _check_whole(access: ir.Operation, tensor: ir.Type, what: str) -> None:
    def arr(name):
        return list(ir.DenseI64ArrayAttr(access.attributes[name]))

    full = list(ir.RankedTensorType(tensor).shape)
    if any(arr("static_offsets")) or arr("static_sizes") != full or any(s != 1 for s in arr("static_strides")):
        raise UnsupportedError(f"{what} is a slice of its binding, not the whole tensor")


def _binding(sub: ir.Operation, what: str) -> Binding:
    if sub is None or sub.name != "hal.interface.binding.subspan":
        raise UnsupportedError(f"{what} does not come from a binding")
    offset = subspan_constant_offset(sub)
    if offset is None:
        raise UnsupportedError(f"{what} is at a run-time byte offset (constants only)")
    return Binding(subspan_binding(sub), offset)


@dataclass
class Match:
    """A weight-only dispatch as read from its IR: the record, and what the kernel clones."""

    record: WeightOnlyMatmul
    dequant: ir.Operation  # the linalg.generic turning W into act_type
    q_index: int  # which of its inputs is W
    convert: ir.Operation  # the body's integer -> float conversion (uitofp / sitofp)
    layout: ir.Attribute  # the bindings' pipeline layout
    result: ir.Value | None = None  # the contraction's result (an epilogue's accumulator)
    epilogue: tuple = ()  # the fused consumers of ``result``, in order (empty: none, or a lone truncf)
    epilogue_values: tuple = ()  # the tensors they read besides it, in the record's order
    epilogue_subspans: tuple = ()  # the subspans those are loaded from (a run-time M: their own sizes)


def _body(op: ir.Operation) -> list[ir.Operation]:
    return [x.operation for x in op.regions[0].blocks[0].operations]


def _contraction_body(op: ir.Operation, act: str) -> str:
    """The accumulator type of ``acc + a * b`` (a, b of ``act``, extended or not)."""
    block = op.regions[0].blocks[0]
    ops = _body(op)
    names = [o.name for o in ops]
    acc = block.arguments[2]
    if names[-3:] != ["arith.mulf", "arith.addf", "linalg.yield"] or any(n != "arith.extf" for n in names[:-3]):
        raise UnsupportedError(f"the contraction's body {names} is not acc + a * b")
    add, mul = ops[-2], ops[-3]
    if (
        acc not in list(add.operands)
        or ops[-1].operands[0] != add.results[0]
        or mul.results[0] not in list(add.operands)
    ):
        raise UnsupportedError("the contraction's body does not accumulate into its output")

    def source(v):  # through the operand's extension, the block argument it reads
        op = defining_op(v)
        return op.operands[0] if op is not None and op.name == "arith.extf" else v

    inputs = list(block.arguments)[:2]
    srcs = [source(v) for v in mul.operands]
    if not (srcs[0] in inputs and srcs[1] in inputs and srcs[0] != srcs[1]):
        raise UnsupportedError("the contraction's body does not multiply its two inputs")
    return str(acc.type)


def claims(fn: ir.Operation) -> bool:
    """Whether the dispatch is the weight-only form at all: an all-parallel generic turning an i4 /
    i8 tensor into floats, whose result a contraction (a generic with reductions) reads."""
    for op in fn.regions[0].blocks[0].operations:
        if is_dequantization(op.operation):
            for use in op.operation.results[0].uses:
                if _is_contraction(user_of(use)):
                    return True
    return False


def lone_dequantization(fn: ir.Operation) -> str | None:
    """``"i8 -> f16"`` (stored -> produced type) for a dispatch holding a dequantization generic whose
    result no contraction reads (IREE formed it apart from its matmul), else None."""
    if claims(fn):
        return None
    for op in fn.regions[0].blocks[0].operations:
        if is_dequantization(op.operation):
            q = next(
                v for v in list(op.operation.operands)[:-1] if isinstance(v.type, ir.ShapedType) and _elem(v) in Q_BITS
            )
            return f"{_elem(q)} -> {_elem(op.operation.results[0])}"
    return None


def is_dequantization(op: ir.Operation) -> bool:
    """An all-parallel generic turning an i4 / i8 tensor into floats (an integer extension feeding
    an integer matmul is not one)."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return False
    iters = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    return (
        all("parallel" in t for t in iters)
        and _elem(op.results[0]).startswith(("f", "bf"))
        and any(_elem(v) in Q_BITS for v in list(op.operands)[:-1] if isinstance(v.type, ir.ShapedType))
    )


# Named contractions IREE keeps as such in a dispatch (a torch ``F.linear`` on dequantized weights
# arrives as ``linalg.matmul`` with B's map transposed), with their loops' kinds.
NAMED_CONTRACTIONS = {"linalg.matmul": ["parallel", "parallel", "reduction"]}


def _iterators(op: ir.Operation) -> list[str]:
    if op.name in NAMED_CONTRACTIONS:
        return NAMED_CONTRACTIONS[op.name]
    return [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]


def _is_contraction(op: ir.Operation) -> bool:
    return op.name in NAMED_CONTRACTIONS or (
        op.name == "linalg.generic" and any("reduction" in t for t in _iterators(op))
    )


def match_weight_only(fn: ir.Operation) -> Match:
    """Read a dispatch holding a dequantization generic feeding a contraction; ``UnsupportedError``
    naming what differs from that form."""
    ops = [o.operation for o in fn.regions[0].blocks[0].operations]
    structured = [o for o in ops if o.name.startswith(("linalg.", "iree_linalg_ext.")) and o.name != "linalg.fill"]
    if [o.name for o in structured if o.name not in ("linalg.generic", *NAMED_CONTRACTIONS)]:
        raise UnsupportedError("not a dequantization generic feeding one contraction")
    iters = _iterators
    contr = [g for g in structured if _is_contraction(g)]
    if len(contr) != 1:
        raise UnsupportedError("not a dequantization generic feeding one contraction")
    contr = contr[0]
    out_rank = ir.RankedTensorType(contr.results[0].type).rank
    chain, store, inputs, names, stored = match_epilogue(contr, False, roles=("m", "n")[-out_rank:])
    claimed = [contr] + chain
    deq = [g for g in structured if g not in claimed and all("parallel" in t for t in iters(g))]
    if len(deq) != 1 or len(structured) != 2 + len(chain):
        raise UnsupportedError("not a dequantization generic feeding one contraction and its elementwise consumers")
    lone_truncation = names == ["arith.truncf"] and not inputs
    if chain and not names:
        raise UnsupportedError("an elementwise consumer of the contraction that computes nothing (yields an input)")
    for _, e in inputs:
        if e.at.offset is None or any(d is None for i, d in enumerate(e.shape) if i or e.dims[0] != "m"):
            raise UnsupportedError(
                f"an epilogue input ({e.at.describe()}, {e.type}{list(e.shape)}) at a run-time offset or of a "
                "run-time size other than M stored outermost"
            )
    deq = deq[0]
    c_in = list(contr.operands)[:-1]
    if len(c_in) != 2 or len(deq.results) != 1 or deq.results[0] not in c_in:
        raise UnsupportedError("the dequantization's result is not an operand of the contraction")
    w_pos = c_in.index(deq.results[0])
    a_val = c_in[1 - w_pos]
    act = _elem(deq.results[0])
    if act not in ACT_TYPES or _elem(a_val) != act:
        raise UnsupportedError(f"activations {_elem(a_val)} and dequantized weights {act}: f16 or bf16 both")
    maps = [_dims(m) for m in ir.ArrayAttr(contr.attributes["indexing_maps"])]
    amap, wmap, omap = maps[1 - w_pos], maps[w_pos], maps[2]
    loops = range(len(iters(contr)))
    n_l = [d for d in loops if d in wmap and d in omap and d not in amap]
    m_l = [d for d in loops if d in amap and d in omap and d not in wmap]
    k_l = [d for d in loops if d in amap and d in wmap and d not in omap]
    if len(n_l) != 1 or len(m_l) > 1 or not k_l or len(n_l) + len(m_l) + len(k_l) != len(loops):
        raise UnsupportedError(f"contraction maps {maps}: not (M, K) x (N, K) -> (M, N) (batched?)")
    if any("reduction" not in iters(contr)[d] for d in k_l):
        raise UnsupportedError("the contraction's K loops are not reductions")
    if wmap != n_l + k_l or amap != m_l + k_l or omap != m_l + n_l:
        raise UnsupportedError(
            f"contraction maps {maps}: the weights stored N x K and the activations M x K, K innermost "
            "and in one order, the output M x N"
        )
    acc = _contraction_body(contr, act)
    init = defining_op(list(contr.operands)[2])
    if init is None or init.name != "linalg.fill" or not _is_zero(init.operands[0]):
        raise UnsupportedError("the contraction's accumulator does not start at zero")
    # The dequantization: W and per-group parameters, its output laid out as the weights.
    w_shape = _shape(deq.results[0])
    dmaps = [_dims(m) for m in ir.ArrayAttr(deq.attributes["indexing_maps"])]
    rank = len(w_shape)
    ident = list(range(rank))
    if dmaps[-1] != ident:
        raise UnsupportedError("the dequantization does not write the weights in its loop order")
    d_in = list(deq.operands)[: len(dmaps) - 1]
    q_index = [i for i, v in enumerate(d_in) if _elem(v) in Q_BITS]
    if len(q_index) != 1 or dmaps[q_index[0]] != ident:
        raise UnsupportedError("the dequantization does not read one i4 / i8 weight tensor elementwise")
    q_index = q_index[0]
    q_type = _elem(d_in[q_index])
    group = w_shape[-1] if rank > 2 else math.prod(w_shape[1:])
    param_types, params = [], []
    for i, v in enumerate(d_in):
        if i == q_index:
            continue
        if dmaps[i] != ident[:-1]:
            raise UnsupportedError(
                f"dequantization operand {i} (map {dmaps[i]}) is not one value per row and group (the weights' "
                "dims but the innermost)"
            )
        if not _elem(v).startswith(("f", "bf")):
            raise UnsupportedError(f"dequantization operand {i} is {_elem(v)}: the kernel takes float parameters")
        param_types.append(_elem(v))
        params.append(_binding(_whole_load(v, f"dequantization operand {i}"), f"dequantization operand {i}"))
    convert, signed = _conversion(deq, q_index)
    _check_body(deq, q_index, convert)
    out = (chain[-1] if chain else contr).results[0]
    _check_whole(store, out.type, "the output")
    a_type = ir.RankedTensorType(a_val.type)
    a_shape = list(a_type.shape)
    n, k = w_shape[0], math.prod(w_shape[1:])
    a_sub = _whole_load(a_val, "the activations")
    dyn = ()
    if m_l and a_type.is_dynamic_dim(0):  # a dynamic M (the batch of a serving step): its push constants
        if any(a_type.is_dynamic_dim(i) for i in range(1, a_type.rank)) or ir.RankedTensorType(out.type).rank != 2:
            raise UnsupportedError("dynamic sizes other than M (the weight-only kernel takes a dynamic M only)")
        # M's push constants: A's, and those of the output and the epilogue inputs (stored M outermost)
        traces = [dynamic.trace("m", segments(a_sub)[1][0])]
        for sub in [sub for sub, _ in inputs] + [defining_op(store.operands[1])]:
            traces += [dynamic.trace("m", v) for v in segments(sub)[1]]
        m, dyn = None, (dynamic.merge(traces),)
        if math.prod(a_shape[1:]) != k:
            raise UnsupportedError(f"activations {a_shape} do not hold M x K, K = {k}")
    else:
        a_shape = _shape(a_val)
        m = a_shape[0] if m_l else 1
        if math.prod(a_shape) != m * k:
            raise UnsupportedError(f"activations {a_shape} do not hold M x K = {m} x {k}")
    q_sub = _whole_load(d_in[q_index], "the weights")
    record = WeightOnlyMatmul(
        m=m,
        n=n,
        k=k,
        group=group,
        q_type=q_type,
        signed=signed,
        act_type=act,
        acc_type=acc,
        out_type=stored if chain else None,
        epilogue=() if lone_truncation else tuple(e for _, e in inputs),
        epilogue_ops=() if lone_truncation else tuple(names),
        param_types=tuple(param_types),
        a=_binding(a_sub, "the activations"),
        w=_binding(q_sub, "the weights"),
        out=_binding(defining_op(store.operands[1]), "the output"),
        params=tuple(params),
        dynamic=dyn,
    )
    if dyn == () and any(segments(sub)[1] for sub, _ in inputs):
        raise UnsupportedError("an epilogue input of a run-time size in a dispatch of static sizes")
    values = []
    for gen in chain:  # (the order match_epilogue recorded the inputs in)
        values += [v for v in list(gen.operands)[:-1] if v != (claimed[claimed.index(gen) - 1]).results[0]]
    return Match(
        record,
        deq,
        q_index,
        convert,
        q_sub.attributes["layout"],
        contr.results[0],
        () if lone_truncation else tuple(chain),
        () if lone_truncation else tuple(values),
        () if lone_truncation else tuple(sub for sub, _ in inputs),
    )


def _is_zero(v: ir.Value) -> bool:
    op = defining_op(v)
    if op is None or op.name != "arith.constant":
        return False
    attr = op.attributes["value"]
    try:
        return ir.FloatAttr(attr).value == 0
    except ValueError:
        return ir.IntegerAttr(attr).value == 0


def _check_body(deq: ir.Operation, q_index: int, convert: ir.Operation) -> None:
    """The body the kernel clones: before the conversion only the weight's extension, after it only
    ``BODY_OPS`` reading the parameters, constants and earlier results (``_Builder.dequantize``)."""
    block = deq.regions[0].blocks[0]
    args = list(block.arguments)
    known = {a for i, a in enumerate(args[:-1]) if i != q_index} | {convert.results[0]}
    ops = [o.operation for o in block.operations]
    at = ops.index(convert)
    if any(o.name not in ("arith.extui", "arith.extsi") for o in ops[:at]) or len(ops[:at]) > 1:
        raise UnsupportedError(
            f"the dequantization computes {[o.name for o in ops[:at]]} before the weight's conversion"
        )
    for op in ops[at + 1 :]:
        if op.name == "linalg.yield":
            if op.operands[0] not in known:
                raise UnsupportedError("the dequantization yields a value it does not compute from the weight")
            return
        if op.name not in BODY_OPS:
            raise UnsupportedError(
                f"the dequantization body holds {op.name}; the kernel clones {', '.join(sorted(BODY_OPS))}"
            )
        for v in op.operands:
            outer = defining_op(v)
            if v not in known and not (outer is not None and outer.name == "arith.constant"):
                raise UnsupportedError("the dequantization body reads a value other than its parameters and constants")
        known |= set(op.results)


def _conversion(deq: ir.Operation, q_index: int) -> tuple[ir.Operation, bool]:
    """The body's integer -> float conversion of the weight (an optional ``extui`` / ``extsi``,
    then ``uitofp`` / ``sitofp``) and whether it reads the weight signed."""
    block = deq.regions[0].blocks[0]
    v = block.arguments[q_index]
    ext = None
    uses = [user_of(u) for u in v.uses]
    if len(uses) == 1 and uses[0].name in ("arith.extui", "arith.extsi"):
        ext = uses[0]
        uses = [user_of(u) for u in ext.results[0].uses]
    if len(uses) != 1 or uses[0].name not in ("arith.uitofp", "arith.sitofp"):
        raise UnsupportedError(
            "the dequantization does not start with the weight's conversion to float "
            "([arith.extui | arith.extsi] then arith.uitofp | arith.sitofp)"
        )
    conv = uses[0]
    if ext is not None and ext.name == "arith.extsi" and conv.name == "arith.uitofp":
        raise UnsupportedError("the weight is sign-extended and then converted as unsigned (extsi, uitofp)")
    signed = conv.name == "arith.sitofp" and (ext is None or ext.name == "arith.extsi")
    if str(conv.results[0].type) not in ("f16", "bf16", "f32"):
        raise UnsupportedError(f"the weight converts to {conv.results[0].type}: f16, bf16 or f32")
    return conv, signed


# ---- the plan ---------------------------------------------------------------------------------------


def unpack_order(bits: int, slot_bits: int) -> tuple[int, ...]:
    """Which weight of a 128-bit run (memory order) each unpacked value is: field s (bits ``bits * s``
    of each ``slot_bits``-wide slot h) of the run's 32-bit words w, values in order (s, w, h)."""
    words, per, shifts = LOAD_BITS // 32, 32 // slot_bits, slot_bits // bits
    return tuple(
        w * (32 // bits) + h * (slot_bits // bits) + s for s in range(shifts) for w in range(words) for h in range(per)
    )


def slot_bits(q_type: str, float_type: str) -> int:
    """The float width the weights are unpacked through: 16 when the type's base holds every
    value exactly (f16 1024 + v for v < 1024; bf16 128 + v for v < 128), else 32."""
    if float_type == "f16" or (float_type == "bf16" and Q_BITS[q_type] == 4):
        return 16
    return 32


@dataclass(frozen=True)
class WeightOnlyPlan:
    record: WeightOnlyMatmul
    target: str
    intrinsic: Intrinsic
    vendor: Vendor
    wave_size: int
    waves_k: int
    n_tiles: int
    unroll: int
    k_order: KOrder
    a_start: LaneAffine
    a_loads: tuple  # per instruction row tile i (rows i * the instruction's M ..): A's loads
    a_zero_rows: tuple  # per row tile: the lane rows past M (zeros, no load)
    convert_type: str  # what the body converts the weight to
    slot_bits: int
    # A dynamic M: ``record.m`` is the bound one pass takes; the kernel loops over row blocks of it
    # up to the run-time M, every A load and output store bounded by that M.
    dynamic_m: bool = False
    # A static M past one pass (``record.m`` rows): the M the row blocks cover (None: one pass).
    total_m: int | None = None

    @property
    def row_blocks(self) -> bool:
        """Whether the kernel loops over row blocks of ``record.m`` (a dynamic M, or a larger static one)."""
        return self.dynamic_m or self.total_m is not None

    @property
    def bits(self) -> int:
        return Q_BITS[self.record.q_type]

    @property
    def tile_k(self) -> int:
        return self.unroll * self.k_order.chunk

    @property
    def chunks_per_wave(self) -> int:
        return self.record.k // self.k_order.chunk // self.waves_k

    @property
    def loop_steps(self) -> int:
        """Iterations of the K loop: whole K tiles (``unroll`` chunks) a wave."""
        return self.chunks_per_wave // self.unroll

    @property
    def tail(self) -> int:
        """A wave's chunks after its whole K tiles, added after the loop (0: none)."""
        return self.chunks_per_wave % self.unroll

    @property
    def m_tiles(self) -> int:
        return len(self.a_loads)

    @property
    def tile_n(self) -> int:
        return self.n_tiles * self.intrinsic.n

    @property
    def workgroup_size(self) -> int:
        return self.waves_k * self.wave_size

    @property
    def grid(self) -> tuple[int, int, int]:
        return (-(-self.record.n // self.tile_n), 1, 1)

    @property
    def lds_bytes(self) -> int:
        return self.waves_k * self.m_tiles * self.n_tiles * self.wave_size * self.intrinsic.c.op_vector_length * 4

    def describe(self) -> str:
        r, intr, ko = self.record, self.intrinsic, self.k_order
        shown = replace(r, m=None if self.dynamic_m else (self.total_m or r.m))
        rows = f" ({'dynamic ' if self.dynamic_m else ''}M in row blocks of {r.m})" if self.row_blocks else ""
        return (
            f"{shown.describe()}{rows}: weight-only decode "
            f"kernel, {intr.name} wave{self.wave_size}; {self.waves_k} waves "
            f"split K in tiles of {self.tile_k} ({self.unroll} chunks of {ko.chunk})"
            + (f" and {self.tail} chunk(s) after them" if self.tail else "")
            + f"; {self.tile_n} columns per "
            f"workgroup ({self.grid[0]} workgroups); B: {LOAD_BITS}-bit loads of {ko.run} {r.q_type} per lane and "
            f"chunk unpacked through {'f16' if self.slot_bits == 16 else 'f32'}, the dequantization in registers"
        )


def _instruction(target: Target, rec: WeightOnlyMatmul, row_tiles: int) -> Intrinsic:
    """The target's instruction for the types at its default wave size whose rows hold M in one row
    tile (the fewest rows), else in the fewest tiles up to ``row_tiles``."""
    wave = target.default_wave_size
    cands = [
        i
        for i in target.intrinsics()
        if not isinstance(i, WarpgroupIntrinsic)
        and i.a_type == i.b_type == rec.act_type
        and i.c_type == rec.acc_type
        and i.wave_size == wave
        and not getattr(i, "reduced_precision", False)
        and -(-rec.m // i.m) <= row_tiles
    ]
    if not cands:
        raise UnsupportedError(
            f"{rec.describe()}: no {target.name} instruction computes {rec.act_type} x {rec.act_type} -> "
            f"{rec.acc_type} with {rec.m} rows in {row_tiles} row tiles (the weight-only kernel's limit)"
        )
    return min(cands, key=lambda i: (-(-rec.m // i.m), i.m, -i.n))


def _one_pass(target: Target, rec: WeightOnlyMatmul, row_tiles: int) -> bool:
    """Whether an instruction holds M in ``row_tiles`` row tiles (else: row blocks)."""
    m_bound(target, rec)  # (raises where no instruction computes the types at all)
    try:
        _instruction(target, rec, row_tiles)
    except UnsupportedError:
        return False
    return True


def m_bound(target: Target, rec: WeightOnlyMatmul) -> int:
    """The rows one pass of the kernel takes for a dynamic M (a run-time M past it loops over row
    blocks of this many): the seeds' row tiles of the target's shortest instruction for the types."""
    s = WEIGHT_ONLY_NVIDIA if target.vendor is Vendor.NVIDIA else WEIGHT_ONLY_AMD
    intr = _instruction(target, replace(rec, m=1), 1)
    return intr.m * s.row_tiles.value


def plan_weight_only(rec: WeightOnlyMatmul, target: Target, convert_type: str | None = None) -> WeightOnlyPlan:
    what = rec.describe()
    if rec.act_type not in ACT_TYPES:
        raise UnsupportedError(f"{what}: activations f16 or bf16")
    s = WEIGHT_ONLY_NVIDIA if target.vendor is Vendor.NVIDIA else WEIGHT_ONLY_AMD
    dynamic_m, total_m = rec.m is None, None
    if dynamic_m:  # planned at the bound; the loads and stores are bounded by the run-time M
        rec = replace(rec, m=m_bound(target, rec))
    elif not _one_pass(target, rec, s.row_tiles.value):  # row blocks of the bound, up to the seeds' limit
        if rec.m > s.max_rows.value:
            raise UnsupportedError(
                f"{what}: M = {rec.m} is past {s.max_rows.value} rows (the weight-only kernel re-reads the weights "
                f"once per {m_bound(target, rec)} rows)"
            )
        rec, total_m = replace(rec, m=m_bound(target, rec)), rec.m
    intr = _instruction(target, rec, s.row_tiles.value)
    convert_type = convert_type or rec.act_type
    sb = slot_bits(rec.q_type, convert_type)
    bits = Q_BITS[rec.q_type]
    ko = plan_k_order(intr, stored_bits=bits, value_order=unpack_order(bits, sb))
    if ko.run != LOAD_BITS // bits:
        raise UnsupportedError(f"{what}: {intr.name}'s lanes take {ko.run} weights per chunk, not one 128-bit run")
    if rec.group % ko.run:
        raise UnsupportedError(f"{what}: groups of {rec.group} split a lane's run of {ko.run} weights")
    if rec.k % ko.chunk:
        raise UnsupportedError(f"{what}: K is not a multiple of the {ko.chunk}-deep chunk")
    if rec.k * 16 % LOAD_BITS:
        raise UnsupportedError(f"{what}: activation rows are not whole 16-byte loads")
    for name, at in (("activations", rec.a), ("weights", rec.w)):
        if at.offset % (LOAD_BITS // 8):
            raise UnsupportedError(f"{what}: the {name} are not at a 16-byte aligned byte offset ({at.describe()})")
    chunks = rec.k // ko.chunk
    wide = rec.m >= s.wide_rows.value and rec.n * rec.k >= s.wide_elements.value
    waves_seed, unroll_seed = (s.wide_waves_k, s.wide_unroll) if wide else (s.waves_k, s.unroll)
    waves = max((w for w in range(1, waves_seed.value + 1) if chunks % w == 0))
    unroll = min(unroll_seed.value, chunks // waves)  # (a wave's chunks past whole K tiles: the tail)
    n_tiles = max(1, s.columns.value // intr.n)
    # a grid too small to give each SM its warps (one a scheduler): narrower workgroups, more of them, as long
    # as a workgroup reads no more bytes of A (M rows, 16-bit) than of its packed weights
    while (
        n_tiles > 1
        and (n_tiles // 2) * intr.n * bits >= rec.m * 16
        and -(-rec.n // (n_tiles * intr.n)) * waves < s.warps_per_sm.value * target.compute_units
    ):
        n_tiles //= 2
    m_tiles = -(-rec.m // intr.m)
    tiles = [plan_a_loads(intr, ko, rec.m - i * intr.m) for i in range(m_tiles)]
    plan = WeightOnlyPlan(
        record=rec,
        dynamic_m=dynamic_m,
        total_m=total_m,
        target=target.name,
        intrinsic=intr,
        vendor=target.vendor,
        wave_size=intr.wave_size,
        waves_k=waves,
        n_tiles=n_tiles,
        unroll=unroll,
        k_order=ko,
        a_start=tiles[0][0],
        a_loads=tuple(t[1] for t in tiles),
        a_zero_rows=tuple(t[2] for t in tiles),
        convert_type=convert_type,
        slot_bits=sb,
    )
    if plan.lds_bytes > target.lds_bytes:
        raise UnsupportedError(f"{what}: {plan.lds_bytes} bytes of LDS for the partial sums")
    return plan


# ---- the kernel -------------------------------------------------------------------------------------


def _memref(shape: list, elem: ir.Type) -> ir.MemRefType:
    """Row-major global memref with a run-time offset; a None first dim is dynamic."""
    dyn = ir.ShapedType.get_dynamic_size()
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    layout = ir.Attribute.parse(f"strided<[{', '.join(map(str, strides))}], offset: ?>")
    dims = [dyn if d is None else d for d in shape]
    return ir.MemRefType.get(dims, elem, layout=layout, memory_space=ir.Attribute.parse("#gpu.address_space<global>"))


class _Builder:
    # Mutation hook for the tests (the executor must find the LDS race without it): the barrier
    # between a dynamic M's row blocks.
    _row_block_barrier = True

    def __init__(self, plan: WeightOnlyPlan, match: Match, em: Emitter, efunc: ir.Operation | None = None):
        self.plan, self.match, self.em, self.efunc = plan, match, em, efunc
        self.layouts = dict(zip("ABC", plan.intrinsic.codegen_layouts()))

    def unpack(self, em: Emitter, words: ir.Value) -> ir.Value:
        """The run's weights as ``convert_type`` values (``unpack_order``), exactly as the body's
        ``uitofp`` / ``sitofp`` gives them."""
        p, rec = self.plan, self.plan.record
        bits, sb = p.bits, p.slot_bits
        i32 = ir.IntegerType.get_signless(32)
        wt = vector_type([LOAD_BITS // 32], i32)
        field = (1 << bits) - 1

        def rep(v: int, width: int) -> int:  # v in every ``width``-bit slot of a word
            return sum(v << (width * i) for i in range(32 // width)) & 0xFFFFFFFF

        def splat(v: int) -> ir.Value:
            return em.splat_const(wt, ir.IntegerAttr.get(i32, v - (1 << 32) if v >= 1 << 31 else v))

        bias = 0
        with em.loc, em.ip:
            if rec.signed:  # two's complement -> offset binary: v + 2^(bits-1), unsigned
                words = arith.XOrIOp(words, splat(rep(1 << (bits - 1), bits))).result
                bias = 1 << (bits - 1)
            if sb == 16:
                slot_t = ir.F16Type.get() if p.convert_type == "f16" else ir.BF16Type.get()
                magic, base = (0x6400, 1024.0) if p.convert_type == "f16" else (0x4300, 128.0)
            else:
                slot_t, magic, base = ir.F32Type.get(), 0x4B000000, float(1 << 23)
            # f16's 10-bit mantissa holds a 4-bit field one place up too: (w & 0x00F000F0) | 0x6400 is
            # 1024 + 16 v, and v = x / 16 - 64 exactly (one fma; signed: - 72), so odd fields need no shift of their own
            up = bits == 4 and p.convert_type == "f16"  # (f16 slots: slot_bits)
            pt = vector_type([LOAD_BITS // sb], slot_t)
            lowest = em.splat_const(pt, ir.FloatAttr.get(slot_t, base + bias))
            if up:
                scale = em.splat_const(pt, ir.FloatAttr.get(slot_t, 1.0 / (1 << bits)))
                offset = em.splat_const(pt, ir.FloatAttr.get(slot_t, -(base / (1 << bits) + bias)))
            parts = []
            for s in range(sb // bits):
                if up and s % 2:
                    w = arith.ShRUIOp(words, splat(bits * (s - 1))).result if s > 1 else words
                    w = em.masked_or(w, rep(field << bits, sb), rep(magic, sb))
                    parts.append(llvm.intr_fma(vector.BitCastOp(pt, w).result, scale, offset))
                    continue
                w = arith.ShRUIOp(words, splat(bits * s)).result if s else words
                w = em.masked_or(w, rep(field, sb), rep(magic, sb))
                x = vector.BitCastOp(pt, w).result
                parts.append(arith.SubFOp(x, lowest).result)
            vals = em.concat(parts)
        want = ir.Type.parse(p.convert_type)
        if slot_t != want:  # (f32 slots: the integers are exact in any float type the body converts to)
            vals = em.convert(vals, want)  # (NVIDIA bf16: one cvt per pair, Emitter.convert)
        return vals

    def dequantize(self, em: Emitter, vals: ir.Value, params: list[ir.Value]) -> ir.Value:
        """The dispatch's dequantization body on the unpacked run: every op after the conversion,
        elementwise on vectors, the per-group operands broadcast."""
        deq, m = self.match.dequant, self.match
        block = deq.regions[0].blocks[0]
        n = ir.VectorType(vals.type).shape[0]
        args = list(block.arguments)
        env: dict = {}
        params = iter(params)
        for i, a in enumerate(args[:-1]):
            if i != m.q_index:
                env[a] = em.broadcast(next(params), vector_type([n], a.type))
        env[m.convert.results[0]] = vals
        started = False
        for op in [x.operation for x in block.operations]:
            if op == m.convert:
                started = True
                continue
            if not started:
                continue
            if op.name == "linalg.yield":
                return env[op.operands[0]]
            if op.name not in BODY_OPS:
                raise UnsupportedError(
                    f"the dequantization body holds {op.name} (the kernel clones {sorted(BODY_OPS)})"
                )
            if op.name == "arith.constant":
                t = op.results[0].type
                env[op.results[0]] = em.splat_const(vector_type([n], t), op.attributes["value"])
                continue
            if op.name == "arith.truncf" and "roundingmode" not in op.attributes and op.operands[0] in env:
                # to nearest even, as Emitter.convert emits it (NVIDIA bf16: one cvt per pair)
                env[op.results[0]] = em.convert(env[op.operands[0]], op.results[0].type)
                continue
            operands = []
            for v in op.operands:
                if v not in env:
                    outer = defining_op(v)
                    if outer is None or outer.name != "arith.constant":
                        raise UnsupportedError("the dequantization body reads a value other than its operands")
                    env[v] = em.splat_const(vector_type([n], v.type), outer.attributes["value"])
                operands.append(env[v])
            attrs = op_attributes(op)
            with em.loc, em.ip:
                new = ir.Operation.create(
                    op.name,
                    results=[vector_type([n], r.type) for r in op.results],
                    operands=operands,
                    attributes=attrs,
                )
            env[op.results[0]] = new.results[0]
        raise UnsupportedError("the dequantization body does not yield")

    def build(self, mems: dict, m_value: ir.Value | None = None) -> None:
        """The kernel at ``self.em``; ``m_value``: the run-time M of a dynamic-M plan (row blocks of
        ``record.m`` in a loop, every A load and store bounded by it)."""
        p, em = self.plan, self.em
        intr = p.intrinsic
        tid = em.thread_id()
        lane, wave = em.rem(tid, p.wave_size), em.div(tid, p.wave_size)
        lanes = LaneIndex(em, lane, p.wave_size)
        acc_t = vector_type(intr.c_shape, ir.Type.parse(intr.c_type))
        c_len = intr.c.op_vector_length
        part = em.alloc_lds([p.waves_k, p.m_tiles * p.n_tiles, p.wave_size, c_len], acc_t.element_type)
        with em.loc, em.ip:
            n0 = em.mul(hal.interface_workgroup_id(0), p.tile_n)
        # Every lane-dependent value at the top, before any loop (LaneIndex emits at the top).
        la, lb, lc = self.layouts["A"], self.layouts["B"], self.layouts["C"]
        for lay, axis in ((la, ROW), (lb, COL), (lc, ROW), (lc, COL)):
            lanes.part(lay, axis)
        starts = (
            lane_affine(em, lanes, self.layouts, p.k_order.b_start),
            lane_affine(em, lanes, self.layouts, p.a_start),
        )
        ctx = dict(mems=mems, lanes=lanes, lane=lane, wave=wave, n0=n0, acc_t=acc_t, part=part, starts=starts)
        if not p.row_blocks:
            self.rows = p.record.m
            self._pass(em, 0, **ctx)
            return
        bound = p.record.m
        if p.dynamic_m:
            self.rows = m_value
            blocks = em.div(em.add(m_value, bound - 1), bound)
        else:
            self.rows = p.total_m
            blocks = em.const(-(-p.total_m // bound))
        with em.loc, em.ip:
            rb = scf.ForOp(em.const(0), blocks, em.const(1), [])
        inner = Emitter(ir.InsertionPoint(rb.body), em.loc, p.vendor).named("weight_only.rows")
        self._pass(inner, inner.mul(rb.induction_variable, bound), **ctx)
        if self._row_block_barrier:  # wave 0 has read the partial sums before the next block's waves store theirs
            inner.barrier()
        with em.loc, ir.InsertionPoint(rb.body):
            scf.YieldOp([])

    def _pass(self, em: Emitter, row_base, *, mems, lanes, lane, wave, n0, acc_t, part, starts) -> None:
        """One pass over K for the rows ``row_base`` .. + ``record.m``: loads, unpacking, the
        matrix instructions, the partial sums' reduction and the stores."""
        p = self.plan
        ko = p.k_order
        la, lb = self.layouts["A"], self.layouts["B"]
        b_col = lanes.part(lb, COL)
        b_start, a_start = starts
        a_row = em.add(row_base, lanes.part(la, ROW)) if row_base else lanes.part(la, ROW)
        init = em.zero_vector(acc_t)
        with em.loc, em.ip:
            loop = scf.ForOp(em.const(0), em.const(p.loop_steps), em.const(1), [init] * (p.m_tiles * p.n_tiles))
        body = Emitter(ir.InsertionPoint(loop.body), em.loc, p.vendor).named("weight_only")
        k_tile = body.mul(body.add(body.mul(loop.induction_variable, p.waves_k), wave), p.tile_k)
        step = dict(mems=mems, n0=n0, b_col=b_col, a_row=a_row, b_start=b_start, a_start=a_start)
        accs = self._chunks(
            body, [body.add(k_tile, u * ko.chunk) for u in range(p.unroll)], list(loop.inner_iter_args), **step
        )
        with em.loc, ir.InsertionPoint(loop.body):
            scf.YieldOp(accs)
        accs = list(loop.results)
        if p.tail:  # the wave's last chunks, fewer than a K tile: after the full tiles, ``tail`` chunks a wave
            tail = em.named("weight_only.tail")
            first = tail.add(tail.mul(wave, p.tail * ko.chunk), p.loop_steps * p.waves_k * p.tile_k)
            accs = self._chunks(tail, [tail.add(first, u * ko.chunk) for u in range(p.tail)], accs, **step)
        self._reduce_and_store(em, mems, accs, lanes, wave, lane, n0, acc_t, part, row_base)

    def _chunks(self, body: Emitter, k0s: list, accs: list, *, mems, n0, b_col, a_row, b_start, a_start) -> list:
        """The chunks at K offsets ``k0s`` (each ``k_order.chunk`` deep) added to ``accs`` (row tile-major:
        (i, t) at i * n_tiles + t): every load first, then the unpacking and the matrix instructions."""
        p = self.plan
        rec, intr, ko = p.record, p.intrinsic, p.k_order
        act = ir.Type.parse(rec.act_type)
        words_per_run = LOAD_BITS // 32
        n_limit = rec.n if rec.n % p.tile_n else None
        a_ops, b_ops = [], []
        for k0 in k0s:
            k_run = body.add(k0, b_start)
            word = body.div(body.mul(k_run, p.bits), 32)
            group = body.div(k_run, rec.group)
            runs = []
            for t in range(p.n_tiles):
                col = body.add(n0, b_col, t * intr.n)
                lim = [n_limit, None]
                words = body.bounded_global_load(
                    mems["W"], [col, word], vector_type([words_per_run], ir.IntegerType.get_signless(32)), lim
                )
                params = [
                    body.extract(
                        body.bounded_global_load(mems[f"P{i}"], [col, group], vector_type([1], ir.Type.parse(t_)), lim),
                        0,
                    )
                    for i, t_ in enumerate(rec.param_types)
                ]
                runs.append((words, params))
            b_ops.append(runs)
            a_ops.append(
                [self._a_operands(body, mems["A"], a_row, body.add(k0, a_start), act, i) for i in range(p.m_tiles)]
            )
        accs = list(accs)
        mma = body.named("mma")
        e_count = self.layouts["B"].elements
        for u in range(len(k0s)):
            for t in range(p.n_tiles):
                words, params = b_ops[u][t]
                deq = self.dequantize(body, self.unpack(body, words), params)
                for j in range(ko.j):
                    b_op = body.shape_cast(body.extract_slice(deq, j * e_count, e_count), list(intr.b_shape))
                    for i in range(p.m_tiles):
                        at = i * p.n_tiles + t
                        accs[at] = mma.mma(intr, a_ops[u][i][j], b_op, accs[at])
        return accs

    def _a_operands(self, em: Emitter, mem, a_row, k0, elem, tile: int) -> list:
        """Row tile ``tile``'s A operands for the chunk (``rewrite.a_operands``), rows past M zeros."""
        p, intr = self.plan, self.plan.intrinsic
        row0 = tile * intr.m
        limit = self.rows if p.row_blocks or row0 + intr.m > p.record.m else None
        return a_operands(
            em,
            intr,
            self.layouts["A"],
            p.k_order.j,
            p.a_loads[tile],
            p.a_zero_rows[tile],
            mem,
            em.add(a_row, row0),
            k0,
            elem,
            limit,
            self.rows if p.dynamic_m else None,  # (AMD: the run-time M, past which loads read 0)
        )

    def _reduce_and_store(self, em, mems, accs, lanes, wave, lane, n0, acc_t, part, row_base) -> None:
        """Partial sums through LDS; wave 0 adds them in wave order (deterministic), applies the
        epilogue and stores the rows below M, columns below N."""
        p, em, intr = self.plan, em.named("weight_only.reduce"), self.plan.intrinsic
        out, rec = mems["O"], self.plan.record
        n_over = rec.n % p.tile_n != 0
        epi = (  # (one per pass: its loads are shared within the pass only)
            None
            if self.efunc is None
            else Epilogue(
                self.efunc,
                rec.epilogue,
                [mems[f"E{i}"] for i in range(len(rec.epilogue))],
                {"b": False, "m": True, "n": n_over},
                {"b": None, "m": self.rows, "n": rec.n},
            )
        )
        lc = self.layouts["C"]
        c_len = intr.c.op_vector_length
        tiles = p.m_tiles * p.n_tiles
        for t, acc in enumerate(accs):
            em.lds_store(em.shape_cast(acc, [c_len]), part, [wave, em.const(t), lane, em.const(0)])
        em.barrier()
        row, col = lanes.part(lc, ROW), lanes.part(lc, COL)
        first = em.if_then(em.and_(em.eq(wave, 0), em.lt(lane, lc.lanes_used)))
        out_t = ir.MemRefType(out.type).element_type
        offsets = lc.element_offsets()
        for t in range(tiles):
            i, tn = divmod(t, p.n_tiles)  # row tile, column tile
            total = None
            for w in range(p.waves_k):
                v = first.lds_load(
                    part,
                    [first.const(w), first.const(t), lane, first.const(0)],
                    vector_type([c_len], acc_t.element_type),
                )
                total = v if total is None else first.add_values(total, v)
            for e, (dr, dc) in enumerate(offsets):
                r = first.add(row_base, row, i * intr.m + dr) if row_base else first.add(row, i * intr.m + dr)
                c = first.add(n0, col, tn * intr.n + dc)
                at = e * lc.vector_stride + lc.vector_offset  # (RDNA3's 16-bit C: every other slot)
                val = first.extract_slice(total, at, 1)
                if epi is not None:
                    coords = {"b": None, "m": r, "n": c}
                    val = epi.apply(first, val, coords, {"b": 0, "m": i * intr.m + dr, "n": tn * intr.n + dc})
                val = first.convert(val, out_t)
                limits = [self.rows, p.record.n if n_over else None]
                first.bounded_global_store(val, out, [r, c], limits, extent0=self.rows if p.dynamic_m else None)


def emit_weight_only(
    plan: WeightOnlyPlan,
    match: Match,
    *,
    name: str,
    ip: ir.InsertionPoint,
    loc: ir.Location,
    prologue: list[ir.Operation] = (),
    m_value: ir.Value | None = None,
    efunc: ir.Operation | None = None,
    epilogue_dims: tuple = (),
):
    """The kernel as ``func.func @name()`` at ``ip``, reading the bindings at the record's byte
    offsets. A dynamic-M plan: ``prologue`` (the dispatch's scalar ops, moved into the kernel)
    defines ``m_value``, the run-time M, which sizes A and the output. ``efunc``: the epilogue
    (``compose_epilogue``) of a record that has one, applied to each output before its store."""
    if bool(plan.record.epilogue_ops) != (efunc is not None):
        raise UnsupportedError(f"{plan.record.describe()}: the epilogue function and the record disagree")
    rec = plan.record
    if plan.dynamic_m and m_value is None:
        raise UnsupportedError(f"{rec.describe()}: a dynamic-M plan needs the run-time M")
    with loc, ip:
        fn = func.FuncOp(name, ir.FunctionType.get([], []))
    entry = fn.add_entry_block()
    body_ip = ir.InsertionPoint(entry)
    em = Emitter(body_ip, loc, plan.vendor)
    i32 = ir.IntegerType.get_signless(32)
    groups = rec.k // rec.group
    rows = None if plan.dynamic_m else (plan.total_m or rec.m)  # (None: a dynamic first dim, sized by m_value)
    types = {
        "A": (rec.a, [rows, rec.k], ir.Type.parse(rec.act_type)),
        "W": (rec.w, [rec.n, rec.k * plan.bits // 32], i32),
        "O": (rec.out, [rows, rec.n], ir.Type.parse(rec.out_type or rec.acc_type)),
    }
    for i, (b, t) in enumerate(zip(rec.params, rec.param_types)):
        types[f"P{i}"] = (b, [rec.n, groups], ir.Type.parse(t))
    for i, e in enumerate(rec.epilogue):  # (a run-time size is M's: match_weight_only checked)
        types[f"E{i}"] = (e.at, list(e.shape), ir.Type.parse(e.type))
    mems = {}
    for key, (b, shape, elem) in types.items():
        flags = _INDIRECT | (0 if key == "O" else _READ_ONLY)
        dims = [m_value] if shape[0] is None else []
        if key.startswith("E") and dims:  # (an epilogue input sized by its own push constants, as IREE's IR has it)
            dims = list(epilogue_dims[int(key[1:])])
        with loc, body_ip:
            mems[key] = hal.InterfaceBindingSubspanOp(
                _memref(shape, elem),
                match.layout,
                b.binding,
                dims,
                byte_offset=em.const(b.offset),
                alignment=64,
                descriptor_flags=ir.IntegerAttr.get(i32, flags),
            ).result
    with loc:
        _Builder(plan, match, em, efunc).build(mems, m_value if plan.dynamic_m else None)
    with loc, body_ip:
        func.ReturnOp([])
    anchor = entry.operations[0]
    for op in prologue:  # ahead of everything, in their order (they define m_value)
        op.move_before(anchor)
    return fn.operation


def rewrite_dispatch(fn: ir.Operation, target: str) -> WeightOnlyPlan:
    """Replace the dispatch function by the kernel (same name); returns the plan."""
    match = match_weight_only(fn)
    plan = plan_weight_only(match.record, get_target(target), str(match.convert.results[0].type))
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    extra = {}
    if plan.dynamic_m:  # the run-time M: A's subspan's dynamic dim, defined by the moved scalar ops
        rec = match.record
        a_sub = next(
            op
            for op in (o.operation for o in fn.regions[0].blocks[0].operations)
            if op.name == "hal.interface.binding.subspan"
            and (subspan_binding(op), subspan_constant_offset(op)) == (rec.a.binding, rec.a.offset)
            and segments(op)[1]
        )
        extra = dict(
            prologue=scalar_prologue(fn),
            m_value=segments(a_sub)[1][0],
            epilogue_dims=tuple(tuple(segments(sub)[1]) for sub in match.epilogue_subspans),
        )
    with fn.context, fn.location:
        rec = match.record
        if rec.epilogue_ops:
            extra["efunc"] = compose_epilogue(
                fn,
                rec.acc_type,
                [e.type for e in rec.epilogue],
                rec.out_type,
                list(match.epilogue),
                match.result,
                list(match.epilogue_values),
                stage="build",
            )
        emit_weight_only(
            plan,
            match,
            name=name,
            ip=ir.InsertionPoint(fn),
            loc=ir.Location.name("mmaflow.weight_only", childLoc=fn.location),
            **extra,
        )
        if rec.epilogue_ops:  # (applied in registers: nothing calls it)
            extra["efunc"].erase()
    fn.erase()
    return plan


def expectations(plan: WeightOnlyPlan):
    """What verify demands of the lowered kernel: 128-bit global loads, the plan's matrix
    instructions per wave and K tile."""
    return attrs.Expectations(
        global_load_bits=LOAD_BITS,
        k_tiles=plan.loop_steps,
        mma_per_k_tile=plan.unroll * plan.k_order.j * plan.m_tiles * plan.n_tiles,
        tail_mma=plan.tail * plan.k_order.j * plan.m_tiles * plan.n_tiles,
    )


def lower_weight_only(func: ir.Operation) -> tuple[ir.Operation, WeightOnlyPlan]:
    """Replace the tagged dispatch ``func`` by the kernel; returns the new function and the plan."""
    target, record = read_target(func), attrs.read_weight_only(func)
    name, inner = str(ir.StringAttr(func.attributes["sym_name"]).value), func.parent
    plan = rewrite_dispatch(func, target.name)
    found = [f for f in inner.regions[0].blocks[0].operations if f.operation.name == "func.func"]
    kernel = next(f.operation for f in found if ir.StringAttr(f.operation.attributes["sym_name"]).value == name)
    attrs.mark(kernel, attrs.DISPATCH)
    attrs.write_target(kernel, target)
    attrs.write_weight_only(kernel, record)
    attrs.write_expect(kernel, expectations(plan))
    return kernel, plan
