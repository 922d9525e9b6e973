"""Check every dispatch mmaflow takes in a whole module on the lane executor, with its tensors
where IREE puts them.

For each taken dispatch and each of its call sites (IREE merges identical executables: one
executable, several dispatches, told apart by push constants; ``util.assume.int`` records each
site's values):

1. the push constants of the site are rebuilt from those records (byte offsets of tensors in
   shared buffers, sizes); a byte offset the records leave open (only a divisor promised) is
   chosen: the tensor after the others of its binding, aligned as promised;
2. every binding becomes a byte buffer of sentinel bytes (0xFF) with random inputs placed at the
   byte offsets IREE's own dispatch IR computes for them;
3. the reference (``reference.py``) interprets IREE's dispatch as IREE formed it, before any
   mmaflow stage; the lane executor runs mmaflow's kernel on a copy of the same bytes;
4. the output must match within the reference's error bound, every output element must be
   written, and no other byte -- inputs, sentinels, other tensors sharing the binding -- may
   change.

A taken attention dispatch (the flash-attention kernel) is checked the same way, against a
float64 softmax(Q K^T * scale + mask) V (``attention_reference.py``, with its error bound) instead
of the interpreter (which evaluates linalg, not ``iree_linalg_ext.attention``); Q, K, V, O and an
additive mask are found among the dispatch's regions by the bindings and byte offsets select
recorded, or, at a run-time offset, by the subspan the attention op reads or writes them through
(the mask, another dispatch's output, filled with a causal pattern plus random values).

Dispatches left to IREE are listed with the reason select gave.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import ml_dtypes
import numpy as np
from iree.compiler import ir

from mmaflow.compiler.core import attrs, dynamic
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import (
    defining_op,
    int_assumptions,
    new_context,
    ops_named,
    parse_module,
    subspan_offset,
    user_of,
)
from mmaflow.runtime import numerics
from mmaflow.runtime.attention_reference import attention_bound, attention_reference, bool_mask_additive
from mmaflow.runtime.executor import cluster_shape, whole_clusters
from mmaflow.runtime.reference import InterpretError, Val, compare, linalg_op, np_dtype, scalar_op
from mmaflow.runtime.simulate import (
    Memory,
    Region,
    fp8_tensor_core,
    load_dispatch,
    ownership,
    run_dispatch,
    sample_workgroups,
    tile_mask,
    written_elements,
)

# Executor throughput on this kind of machine (multiply-adds per second, measured on 2 cores with
# the f16 1024^3 kernel: 18 s), for the up-front estimate of a full run.
EXECUTOR_MACS_PER_SECOND = 6.0e7


def _func(module: ir.Module) -> ir.Operation:
    funcs = [f for f in ops_named(module.operation, "func.func") if "sym_visibility" not in f.attributes]
    if len(funcs) != 1:
        raise InterpretError(f"expected one public dispatch function, found {len(funcs)}")
    return funcs[0]


# ---- call sites: the push constants of each dispatch of an executable ---------------------------
def call_sites(func: ir.Operation, sizes: dict | None = None, problem=None) -> list[list[int]]:
    """One push-constant vector per call site. Values come from ``util.assume.int`` (IREE
    records every site's value of a run-time offset or size there), dynamic sizes from
    ``sizes`` through the problem's ``DynamicDim``s; a tensor's run-time byte offset no record
    pins is chosen here (``_place_offsets``). A push constant none of these gives is an error."""
    loads = ops_named(func, "hal.interface.constant.load")
    count = len({ir.IntegerAttr(o.attributes["ordinal"]).value for o in loads})
    if not loads:
        return [[]]
    known: list[dict[int, int]] = []
    for assume in ops_named(func, "util.assume.int"):
        rows = int_assumptions(assume.attributes["assumptions"])
        for j, sites in enumerate(rows):
            lo, hi = dynamic._push_constants(assume.operands[j])
            while len(known) < len(sites):
                known.append({})
            for s, a in enumerate(sites):
                if "umin" in a and a.get("umin") == a.get("umax"):
                    v = a["umin"]
                    known[s][lo] = v & 0xFFFFFFFF
                    if hi >= 0:
                        known[s][hi] = v >> 32
    if not known:
        known = [{}]
    if sizes and problem is not None:
        from mmaflow.runtime.simulate import dynamic_inputs

        consts, _ = dynamic_inputs(problem, sizes)
        for site in known:
            for i, v in enumerate(consts):
                if any(i in (lo, hi) for d in problem.dynamic for lo, hi in d.constants):
                    site[i] = v
    offsets = _offset_subspans(func)
    out = []
    for s, site in enumerate(known):
        open_offsets = {key: subs for key, subs in offsets.items() if key[0] not in site}
        free = {i for key in open_offsets for i in key if i >= 0}
        missing = [i for i in range(count) if i not in site and i not in free]
        if missing:
            raise InterpretError(
                f"push constant {missing[0]} of call site {s} is not pinned by the dispatch's "
                f"util.assume.int and is not a dynamic size given with --dims"
            )
        if open_offsets:
            _place_offsets(func, site, s, open_offsets, count)
        out.append([site[i] for i in range(count)])
    return out


# The ops that make an index of two i32 push constants (the low and high halves of a 64-bit value).
_OFFSET_ASSEMBLY = ("arith.extui", "arith.shli", "arith.ori", "arith.index_castui", "arith.index_cast")


def _assumed(value: ir.Value) -> tuple[ir.Operation | None, int]:
    """The ``util.assume.int`` that gives ``value`` and the row of its assumptions (None, -1
    when ``value`` comes from elsewhere)."""
    op = defining_op(value)
    if op is None or op.name != "util.assume.int":
        return None, -1
    return op, list(op.results).index(value)


def _offset_subspans(func: ir.Operation) -> dict[tuple[int, int], list[ir.Operation]]:
    """The byte offsets the dispatch takes from push constants that feed nothing else: (low,
    high) push-constant ordinals (high -1 for one 32-bit constant) -> the subspans at that
    offset, in IR order."""
    found: dict[tuple[int, int], list[ir.Operation]] = {}
    for sub in ops_named(func, "hal.interface.binding.subspan"):
        value = subspan_offset(sub)
        if value is None:
            continue
        assume, row = _assumed(value)
        try:
            key = dynamic._push_constants(value if assume is None else assume.operands[row])
        except UnsupportedError:
            continue  # a constant offset (no push constant), or one assembled otherwise
        if all(_feeds_only_offsets(func, i) for i in key if i >= 0):
            found.setdefault(key, []).append(sub)
    return found


def _feeds_only_offsets(func: ir.Operation, ordinal: int) -> bool:
    """Whether push constant ``ordinal`` reaches nothing but binding subspans' byte offsets
    (through the ops that make an index of it, and ``util.assume.int``)."""
    todo = [
        load.results[0]
        for load in ops_named(func, "hal.interface.constant.load")
        if ir.IntegerAttr(load.attributes["ordinal"]).value == ordinal
    ]
    while todo:
        for use in todo.pop().uses:
            user = user_of(use)
            if user.name == "hal.interface.binding.subspan":
                if use.operand_number != 0 or subspan_offset(user) is None:
                    return False  # a dynamic size of the tensor
            elif user.name == "util.assume.int":
                todo.append(user.results[use.operand_number])
            elif user.name in _OFFSET_ASSEMBLY:
                todo.append(user.results[0])
            else:
                return False
    return True


def _promise(sub: ir.Operation, site: int) -> dict:
    """What ``util.assume.int`` promises about a subspan's byte offset at call site ``site``
    (umin / umax / udiv; empty when nothing)."""
    assume, row = _assumed(subspan_offset(sub))
    if assume is None:
        return {}
    sites = int_assumptions(assume.attributes["assumptions"])[row]
    return sites[site] if site < len(sites) else {}


def _subspans_binding(subs: list[ir.Operation]) -> int:
    """The one binding of subspans that share a run-time offset."""
    bindings = {ir.IntegerAttr(sub.attributes["binding"]).value for sub in subs}
    if len(bindings) != 1:
        raise InterpretError(f"one run-time byte offset is given to tensors of bindings {sorted(bindings)}")
    return bindings.pop()


def _place_offsets(
    func: ir.Operation, site: dict, s: int, open_offsets: dict[tuple[int, int], list], count: int
) -> None:
    """Choose the run-time byte offsets of call site ``s`` that no record pins (``open_offsets``:
    (low, high) push-constant ordinals -> the subspans at that offset) and write them into
    ``site``. Binding by binding, in IR order, each such tensor goes after every other tensor of
    its binding (those at fixed offsets and those placed before it), at the first offset that is a
    multiple of 64 (IREE's binding alignment) and of its promised ``udiv``, and at least its
    promised ``umin``; InterpretError if that passes its promised ``umax``."""
    provisional = [site.get(i, 0) for i in range(count)]  # the open offsets at 0: only sizes matter here
    lay = FrontDispatch(None, func).layout(provisional)
    placing = {sub.results[0]: key for key, subs in open_offsets.items() for sub in subs}
    ends: dict[int, int] = {}  # binding -> the end of its tensors so far
    extent: dict[tuple[int, int], int] = {}  # open offset -> bytes of its largest tensor
    for value, r in lay.inputs + lay.outputs:
        if value in placing:
            extent[placing[value]] = max(extent.get(placing[value], 0), r.nbytes)
        else:
            ends[r.binding] = max(ends.get(r.binding, 0), r.end)
    binding = {key: _subspans_binding(subs) for key, subs in open_offsets.items()}
    for key in sorted(open_offsets, key=binding.get):  # (sorted is stable: IR order within a binding)
        lo, hi = key
        promises = [_promise(sub, s) for sub in open_offsets[key]]
        at = _aligned_offset(ends.get(binding[key], 0), promises, f"push constant {lo} of call site {s}")
        if hi < 0 and at >> 32:
            raise InterpretError(f"push constant {lo} of call site {s}: offset {at} does not fit 32 bits")
        ends[binding[key]] = at + extent.get(key, 0)
        site[lo] = at & 0xFFFFFFFF
        if hi >= 0:
            site[hi] = at >> 32


def _aligned_offset(end: int, promises: list[dict], what: str) -> int:
    """The first byte offset from ``end`` on that is a multiple of 64 and of every promised
    ``udiv`` and at least every promised ``umin``; InterpretError past a promised ``umax``."""
    step = math.lcm(64, *(p.get("udiv", 1) for p in promises))
    at = max([end] + [p.get("umin", 0) for p in promises])
    at = -(-at // step) * step
    umax = min((p["umax"] for p in promises if "umax" in p), default=None)
    if umax is not None and at > umax:
        raise InterpretError(
            f"{what}: the byte offset it gives must be at least {at} (after the binding's other tensors, "
            f"a multiple of {step}) but the dispatch promises at most {umax}"
        )
    return at


# ---- IREE's dispatch, interpreted --------------------------------------------------------------
@dataclass
class Layout:
    """Where a dispatch's tensors are for one call site: regions read and written, workload."""

    inputs: list = field(default_factory=list)  # (subspan value, Region)
    outputs: list = field(default_factory=list)
    workload: list = field(default_factory=list)


class FrontDispatch:
    """A dispatch function as IREE formed it (executable-sources)."""

    def __init__(self, module: ir.Module | None, func: ir.Operation | None = None):
        self.module = module  # keeps the IR (and its context) alive (None: whoever parsed ``func`` does)
        self.func = func if func is not None else _func(module)

    def _scalars(self, constants: list[int]) -> dict:
        """Every scalar (index/integer) value of the function: push constants and arithmetic."""
        env: dict = {}
        for op in (o.operation for o in self.func.regions[0].blocks[0].operations):
            if op.name == "hal.interface.constant.load":
                ordinal = ir.IntegerAttr(op.attributes["ordinal"]).value
                if ordinal >= len(constants):
                    raise InterpretError(f"push constant {ordinal} was not given")
                env[op.results[0]] = Val.exact(np.int64(constants[ordinal]), "i32")
            elif op.name in ("util.assume.int",):
                for r, v in zip(op.results, op.operands):
                    env[r] = env[v]
            elif op.name == "iree_tensor_ext.dispatch.workload.ordinal":
                env[op.results[0]] = env[op.operands[0]]
            elif op.name.startswith("arith.") and op.results and not isinstance(op.results[0].type, ir.ShapedType):
                env[op.results[0]] = scalar_op(op, [env[v] for v in op.operands])
        return env

    def layout(self, constants: list[int]) -> Layout:
        env = self._scalars(constants)
        out = Layout()
        for op in ops_named(self.func, "iree_tensor_ext.dispatch.workload.ordinal"):
            n = ir.IntegerAttr(op.attributes["ordinal"]).value
            while len(out.workload) <= n:
                out.workload.append(None)
            out.workload[n] = int(env[op.results[0]].v)
        for sub in ops_named(self.func, "hal.interface.binding.subspan"):
            binding = ir.IntegerAttr(sub.attributes["binding"]).value
            seg = list(ir.DenseI32ArrayAttr(sub.attributes["operandSegmentSizes"]))
            offset = int(env[list(sub.operands)[0]].v) if seg[0] else 0
            dims = [int(env[v].v) for v in list(sub.operands)[seg[0] :]]
            bound = _bound_tensor(sub)  # the binding tensor; a load may read a slice of it
            for use in sub.results[0].uses:
                user = user_of(use)
                if user.name == "iree_tensor_ext.dispatch.tensor.load":
                    side, tt = out.inputs, bound
                elif user.name == "iree_tensor_ext.dispatch.tensor.store":
                    # The stored value's shape (IREE drops unit dims: a rank-reduced store of the whole tensor)
                    side, tt = out.outputs, ir.RankedTensorType(user.operands[0].type)
                    if _sliced(user) or _fewer(user, bound):
                        raise InterpretError(f"binding {binding}: a store into part of its tensor is not modelled")
                else:
                    raise InterpretError(f"binding {binding} is used by {user.name}")
                dyn = iter(dims)
                shape = tuple(next(dyn) if ir.ShapedType.is_dynamic_size(s) else s for s in tt.shape)
                if str(tt.element_type) == "i4":  # IREE packs i4 two to a byte, element 2i in the low nibble
                    if shape[-1] % 2:
                        raise InterpretError(f"binding {binding}: an i4 tensor with an odd innermost size {shape[-1]}")
                    region = Region(binding, offset, np.dtype(np.uint8), shape[:-1] + (shape[-1] // 2,), PACKED_I4)
                else:
                    region = Region(binding, offset, np_dtype(tt.element_type), shape, f"binding {binding} @ {offset}")
                side.append((sub.results[0], region))
        return out

    def evaluate(
        self, buffers: dict, constants: list[int], lay: Layout, *, fp8_k_tile: int = 0, fp8_split: int = 1
    ) -> dict:
        """The outputs (Region -> Val) of the dispatch on ``buffers`` (``fp8_k_tile``: an fp8
        contraction as the fp8 wgmma kernel computes it, ``reference.linalg_op``; ``fp8_split``: its
        K tiles shared out by split-K)."""
        env = self._scalars(constants)
        regions = dict(lay.inputs + lay.outputs)  # subspan value -> its tensor's region
        outputs = {}
        for op in (o.operation for o in self.func.regions[0].blocks[0].operations):
            if op.results and op.results[0] in env:
                continue
            name = op.name
            if name in (
                "hal.interface.binding.subspan",
                "hal.interface.constant.load",
                "func.return",
                "util.assume.int",
                "iree_tensor_ext.dispatch.workload.ordinal",
            ):
                continue
            if name == "iree_tensor_ext.dispatch.tensor.load":
                region = regions[op.operands[0]]
                t = str(ir.RankedTensorType(op.results[0].type).element_type)
                whole = Memory.read(buffers, region)
                if t == "i4":
                    whole = unpack_i4(whole)
                part = _slice(op, whole)
                want = ir.RankedTensorType(op.results[0].type)
                if want.has_static_shape and part.shape != tuple(want.shape) and part.size == np.prod(want.shape):
                    part = part.reshape(want.shape)  # a rank-reducing load (unit dims dropped)
                env[op.results[0]] = Val.exact(part.astype(np.float64 if t.startswith(("f", "bf")) else np.int64), t)
            elif name == "iree_tensor_ext.bitcast":
                env[op.results[0]] = bitcast_bytes(op, env[op.operands[0]])
            elif name == "tensor.empty":
                tt = ir.RankedTensorType(op.results[0].type)
                dyn = iter(int(env[v].v) for v in op.operands)
                shape = [next(dyn) if ir.ShapedType.is_dynamic_size(x) else x for x in tt.shape]
                env[op.results[0]] = Val.exact(np.zeros(shape), str(tt.element_type))
            elif name == "linalg.fill":
                value, init = env[op.operands[0]], env[op.operands[1]]
                env[op.results[0]] = Val(
                    np.full(init.v.shape, value.v, np.float64), np.full(init.v.shape, value.r), init.t
                )
            elif name.startswith("linalg."):
                n_in = len(op.operands) - len(op.results)
                ins = [env[v] for v in list(op.operands)[:n_in]]
                env[op.results[0]] = linalg_op(
                    op, ins, env[list(op.operands)[n_in]], fp8_k_tile=fp8_k_tile, fp8_split=fp8_split
                )
            elif name == "iree_tensor_ext.dispatch.tensor.store":
                outputs[regions[op.operands[1]]] = env[op.operands[0]]
            elif name.startswith(("arith.", "math.")):
                env[op.results[0]] = scalar_op(op, [env[v] for v in op.operands])
            else:
                raise InterpretError(f"the reference interpreter does not evaluate {name}")
        return outputs


PACKED_I4 = "i4 (two per byte)"  # the name of a packed i4 tensor's Region


def unpack_i4(packed: np.ndarray) -> np.ndarray:
    """Bytes of two i4 each (element 2i in the low nibble) -> the elements, sign-extended (signless
    i4: ``arith.uitofp`` reads them back unsigned)."""
    nib = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[:-1] + (packed.shape[-1] * 2,))
    return np.where(nib >= 8, nib.astype(np.int64) - 16, nib.astype(np.int64))


# 4- and 6-bit types as ml_dtypes holds them: one code a byte, in its low bits.
_PACKED = {
    "f4E2M1FN": (4, ml_dtypes.float4_e2m1fn),
    "f6E2M3FN": (6, ml_dtypes.float6_e2m3fn),
    "f6E3M2FN": (6, ml_dtypes.float6_e3m2fn),
    "i4": (4, ml_dtypes.int4),
}


def unpack_codes(packed: np.ndarray, bits: int) -> np.ndarray:
    """Bytes (last axis) -> the ``bits``-wide codes they hold, element i in bits [i*bits,
    (i+1)*bits) of the little-endian bit string (LLVM's vector bitcast: two fp4 a byte, element
    2i in the low nibble; four fp6 in three bytes)."""
    b = np.unpackbits(np.asarray(packed, np.uint8)[..., None], axis=-1, bitorder="little")
    b = b.reshape(packed.shape[:-1] + (packed.shape[-1] * 8 // bits, bits)).astype(np.uint8)
    return (b << np.arange(bits, dtype=np.uint8)).sum(axis=-1, dtype=np.uint8)


def bitcast_bytes(op: ir.Operation, src: "Val") -> "Val":
    """``iree_tensor_ext.bitcast`` of i8 bytes to a 4- or 6-bit type (how IREE passes such data
    into a dispatch): the values the codes stand for."""
    s_t, d_t = (ir.RankedTensorType(v.type) for v in (op.operands[0], op.results[0]))
    t = str(d_t.element_type)
    if str(s_t.element_type) != "i8" or t not in _PACKED:
        raise InterpretError(f"a bitcast of {s_t} to {d_t} is not modelled (i8 to a 4/6-bit type only)")
    bits, dtype = _PACKED[t]
    codes = unpack_codes(np.asarray(src.v).astype(np.int64) & 0xFF, bits)
    vals = codes.view(dtype)
    return Val.exact(vals.astype(np.float64 if t.startswith("f") else np.int64), t)


def _bound_tensor(sub: ir.Operation) -> ir.RankedTensorType:
    """The tensor type a subspan's ``!iree_tensor_ext.dispatch.tensor<access:tensor<...>>`` binds."""
    text = str(sub.results[0].type)
    start = text.index("tensor<", text.index(":"))
    with sub.context:
        return ir.RankedTensorType(ir.Type.parse(text[start : text.rindex(">")]))


def _sliced(op: ir.Operation) -> bool:
    """Whether a dispatch.tensor load / store touches less than its whole tensor (static offsets
    not all zero, or strides not all one; its sizes are compared by the caller)."""
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    return any(o != 0 for o in offsets) or any(s != 1 for s in strides)


def _fewer(op: ir.Operation, bound: ir.RankedTensorType) -> bool:
    """Whether a store's static sizes cover fewer elements than its (static) bound tensor."""
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    if any(ir.ShapedType.is_dynamic_size(x) for x in sizes) or not bound.has_static_shape:
        return False
    return int(np.prod(sizes)) != int(np.prod(bound.shape))


def _slice(op: ir.Operation, whole: np.ndarray) -> np.ndarray:
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    if any(ir.ShapedType.is_dynamic_size(x) for x in offsets + sizes + strides):
        if offsets == [0] * len(offsets) and all(s == 1 for s in strides):
            return whole
        raise InterpretError("a dynamic slice of a binding is not modelled")
    return whole[tuple(slice(o, o + n * s, s) for o, n, s in zip(offsets, sizes, strides))]


# ---- the check ---------------------------------------------------------------------------------
@dataclass
class SiteCheck:
    executable: str
    site: int
    sites: int
    passed: bool
    detail: str
    max_abs_err: float = 0.0
    max_err_over_bound: float = 0.0
    workgroups: int = 0
    grid_size: int = 0
    seconds: float = 0.0
    stats: object = None  # executor.Stats: LDS, access widths, races

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        where = f" (call {self.site + 1} of {self.sites})" if self.sites > 1 else ""
        ran = (
            f"{self.workgroups} of {self.grid_size} workgroups"
            if self.workgroups != self.grid_size
            else f"all {self.grid_size} workgroups"
        )
        return (
            f"{verdict} {self.executable}{where}: max |err| {self.max_abs_err:.3e} = "
            f"{self.max_err_over_bound:.2f} x its bound; {ran}, {self.seconds:.1f} s; {self.detail}"
        )


def random_inputs(rng: np.random.Generator, region: Region) -> np.ndarray:
    if region.name == PACKED_I4:  # every byte value: both nibbles uniform over 0..15
        return rng.integers(0, 256, size=region.shape, dtype=np.uint8)
    name = {v: k for k, v in numerics.DTYPES.items()}.get(region.dtype)
    if name is None:
        raise InterpretError(f"no random data for {region.dtype}")
    return numerics.random_matrix(rng, region.shape, name)


def check_site(
    exe,
    handed: ir.Module,
    front: FrontDispatch,
    constants: list[int],
    *,
    site: int,
    sites: int,
    seed: int,
    sample: int = 0,
    progress=None,
) -> SiteCheck:
    start = time.perf_counter()
    lay = front.layout(constants)
    rng = np.random.default_rng(seed + site)
    mem = Memory()
    for _, region in lay.inputs:
        if region not in mem.data:
            mem.place(region, random_inputs(rng, region))
    for region in {r: None for _, r in lay.outputs}:
        mem.place(region)
    buffers = mem.buffers()
    before = {b: buf.copy() for b, buf in buffers.items()}
    if exe.facts.is_weight_only:  # (a direct family: no config; its plan's column tiles, all M rows)
        from mmaflow.compiler.kernels.decode.weight_only import plan_weight_only

        plan = plan_weight_only(exe.facts.problem, exe.facts.target)
        owns, fp8 = (exe.facts.problem.m, plan.tile_n), False
    elif exe.facts.is_copy:  # (a direct family; every workgroup runs: the slice is split in chunks, not tiles)
        owns, fp8 = (1, 1), False
    else:
        # a versioned dispatch: the config of the kernel the workload's export selects (as the host does)
        cfg = attrs.read_config(load_dispatch(handed, list(lay.workload)).func)
        owns, fp8 = ownership(cfg), fp8_tensor_core(cfg, exe.facts.problem)
    reference = front.evaluate(
        {b: buf.copy() for b, buf in buffers.items()},
        constants,
        lay,
        fp8_k_tile=cfg.tile_k if fp8 else 0,
        fp8_split=cfg.split_k if fp8 else 1,
    )
    workload = [w for w in lay.workload]
    d = load_dispatch(handed, workload)  # (a versioned dispatch: the kernel the workload selects)
    grid = d.grid(workload)
    chosen = sample_workgroups(grid, sample, seed + site) if sample and not exe.facts.is_copy else None
    if chosen is not None:  # a cluster runs whole (Kernel.run): its every workgroup's tile is checked
        chosen = whole_clusters(chosen, grid, cluster_shape(d.func))
    stats, written = run_dispatch(
        d, buffers, constants=constants, workload=workload, workgroups=chosen, progress=progress
    )
    problems, worst_abs, worst_ratio = [], 0.0, 0.0
    for region in {r: None for _, r in lay.outputs}:
        got = Memory.read(buffers, region)
        owned = tile_mask(got.shape, grid, chosen, *owns)
        res = compare(got, reference[region], owned)
        wmask = written_elements(written, region)
        unwritten, stray = int((owned & ~wmask).sum()), int((wmask & ~owned).sum())
        worst_abs, worst_ratio = max(worst_abs, res["max_abs_err"]), max(worst_ratio, res["max_err_over_radius"])
        if not res["passed"]:
            w = res["worst"]
            problems.append(
                f"{res['bad']} of {res['elements']} elements of {region.name} outside the bound "
                f"(worst: got {w['got']:.6g}, expected {w['expected']:.6g} +- {w['radius']:.3g})"
            )
        if unwritten:
            problems.append(f"{unwritten} elements of {region.name} never written")
        if stray:
            problems.append(f"{stray} elements of {region.name} written by workgroups that do not own them")
    problems += Memory.changed_outside(before, buffers, [r for _, r in lay.outputs])
    problems += [f"race: {race}" for race in stats.races]
    detail = (
        "; ".join(problems)
        if problems
        else f"outputs {', '.join(r.name for _, r in lay.outputs)}; inputs and sentinel bytes unchanged"
    )
    if fp8:
        detail += " (against the modelled fp8 tensor-core arithmetic, per-K-tile promotion)"
    total = int(np.prod(grid))
    stats.seconds = time.perf_counter() - start
    return SiteCheck(
        exe.name,
        site,
        sites,
        not problems,
        detail,
        worst_abs,
        worst_ratio,
        len(chosen) if chosen is not None else total,
        total,
        stats.seconds,
        stats,
    )


def _attention_owned(
    shape: tuple, grid: tuple, workgroups: list[int] | None, block_m: int, split: int = 1
) -> np.ndarray:
    """Which elements of O (batch, M, N) the workgroups own: workgroup (x, y) writes rows
    (x / split)*block_m.. of batch entry y (``split``: a split-KV cluster's workgroups along x
    share a block of queries)."""
    if workgroups is None:
        return np.ones(shape, bool)
    gx, gy, _ = grid
    mask = np.zeros(shape, bool)
    for w in workgroups:
        x, y = (w % gx) // split, (w // gx) % gy
        mask[y, x * block_m : (x + 1) * block_m] = True
    return mask


def _attention_subspans(func: ir.Operation) -> dict[str, ir.Value]:
    """The binding subspan each tensor of the dispatch's one ``iree_linalg_ext.attention`` is
    loaded from or stored to: "q", "k", "v" (operands 0-2), "mask" (operand 4, when it has one;
    an i1 mask through ``arith.trunci`` of its i8 bytes) and "o" (its result, through at most one
    ``linalg.generic`` that permutes it)."""
    ops = ops_named(func, "iree_linalg_ext.attention")
    if len(ops) != 1:
        raise InterpretError(f"expected one iree_linalg_ext.attention, found {len(ops)}")
    attention = ops[0]
    operands = list(attention.operands)
    roles = {"q": 0, "k": 1, "v": 2} | ({"mask": 4} if len(operands) == 6 else {})
    found = {role: _loaded_from(operands[i], role) for role, i in roles.items()}
    found["o"] = _stored_to(attention.results[0])
    return found


def _loaded_from(value: ir.Value, role: str) -> ir.Value:
    """The subspan a tensor is loaded from (an ``arith.trunci`` of the load looked through)."""
    load = defining_op(value)
    if load is not None and load.name == "arith.trunci":
        load = defining_op(load.operands[0])
    if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load":
        raise InterpretError(f"the attention's {role} is not loaded from a binding")
    return load.operands[0]


def _stored_to(value: ir.Value) -> ir.Value:
    """The subspan a tensor is stored to (one ``linalg.generic`` in between looked through)."""
    users = [user_of(u) for u in value.uses]
    if len(users) == 1 and users[0].name == "linalg.generic":
        users = [user_of(u) for u in users[0].results[0].uses]
    if len(users) != 1 or users[0].name != "iree_tensor_ext.dispatch.tensor.store":
        raise InterpretError("the attention's output is not stored to a binding")
    return users[0].operands[1]


def check_attention_site(
    exe,
    handed: ir.Module,
    front: FrontDispatch,
    constants: list[int],
    *,
    site: int,
    sites: int,
    seed: int,
    sample: int = 0,
    progress=None,
) -> SiteCheck:
    """One call site of a taken attention dispatch: Q, K, V random at their regions (binding and
    byte offset from the facts; at a run-time offset, the subspan the attention op reads), the
    additive mask (if any) a causal 0 / -inf pattern plus random finite values (an i1 mask: random
    bytes 0 / 1, mostly 1, key 0 always 1; a mask proven causal: NaN, and the reference causal),
    sentinels elsewhere; the kernel's O against the float64 reference within ``attention_bound``;
    O written in full (by the workgroups run), nothing else changed."""
    from mmaflow.compiler.kernels.attention.nvidia import BLOCK_M

    start = time.perf_counter()
    rec = exe.facts.problem
    attn = rec.attention
    lay = front.layout(constants)

    subspans = (
        _attention_subspans(front.func)
        if None in (rec.q.offset, rec.k.offset, rec.v.offset, rec.o.offset)
        or (rec.mask is not None and rec.mask.offset is None)
        else {}
    )

    def region(binding, role, outputs=False):
        """The region of the attention's ``role`` tensor: by its binding and byte offset, or (a
        run-time offset) by the subspan the attention op reads it through."""
        side = lay.outputs if outputs else lay.inputs
        if binding.offset is None:
            value = subspans[role]
            found = [r for v, r in side if v == value and r.binding == binding.binding]
        else:
            found = [r for _, r in side if r.binding == binding.binding and r.start == binding.offset]
        if len(found) != 1:
            raise InterpretError(
                f"{exe.name}: no single tensor at {binding.describe()} among the dispatch's "
                f"{'outputs' if outputs else 'inputs'}"
            )
        return found[0]

    q_r, k_r, v_r = region(rec.q, "q"), region(rec.k, "k"), region(rec.v, "v")
    o_r = region(rec.o, "o", outputs=True)
    if attn.k2 is None:  # a run-time key length: the size this call site gives, as K's region holds it
        key_dim = (rec.orders[1] if rec.orders is not None else tuple(range(len(attn.batch) + 2))).index(
            len(attn.batch)
        )
        attn = replace(attn, k2=k_r.shape[key_dim])
    rng = np.random.default_rng(seed + site)
    batch = int(np.prod(attn.batch))
    # Q scaled so that the scores (variance ~ 0.8^2 with scale 1/sqrt(D)) spread softmax's weights:
    # neither uniform nor one-hot.
    q = (0.8 * rng.standard_normal(q_r.shape)).astype(q_r.dtype)
    k = rng.standard_normal(k_r.shape).astype(k_r.dtype)
    v = rng.standard_normal(v_r.shape).astype(v_r.dtype)
    placed = [(q_r, q), (k_r, k), (v_r, v)]
    nb = len(attn.batch)
    ref_mask = None
    if rec.mask is not None and attn.causal:
        # Proven causal from the dispatch that writes it (``attn.causal`` names it): the kernel must not read
        # it. NaN there (an all-ones byte pattern) would reach O through any read.
        m_r = region(rec.mask, "mask")
        placed.append((m_r, np.full(m_r.shape, np.nan, dtype=m_r.dtype)))
    elif rec.mask is not None:
        # The additive mask is another dispatch's output: a causal 0 / -inf pattern (every row
        # sees key 0) plus random finite values, in its stored order (a batch dim it lacks is a
        # broadcast).
        m_r = region(rec.mask, "mask")
        order = rec.mask_order or tuple(range(nb + 2))
        sizes = list(attn.batch) + [attn.m, attn.k2]
        full = [sizes[i] if i in order else 1 for i in range(nb + 2)]
        if attn.mask_type == "i1":
            # A boolean mask (stored one byte per element, 1 = takes part): random, mostly true,
            # key 0 true for every row (a row with no key is NaN, which the check refuses).
            logical = rng.random(full) < 0.8
            logical[..., 0] = True
        else:
            # Causal, bottom-right aligned where the queries are fewer than the keys (a decoder step's last
            # query sees them all: top-left aligned, one query would see key 0 alone), plus random values.
            shift = max(0, attn.k2 - attn.m)
            hidden = np.arange(attn.k2)[None, :] > np.arange(attn.m)[:, None] + shift
            logical = np.where(hidden, -np.inf, 0.0) + rng.uniform(-3.0, 1.0, full)
        present = [i for i in range(nb + 2) if i in order]
        squeezed = logical.reshape([sizes[i] for i in present])
        mask = np.transpose(squeezed, [present.index(i) for i in order]).astype(m_r.dtype)
        placed.append((m_r, mask.reshape(m_r.shape)))
        additive = bool_mask_additive(mask) if attn.mask_type == "i1" else mask.astype(np.float64)
        seen = np.transpose(additive, [order.index(i) for i in present])
        ref_mask = np.broadcast_to(seen.reshape([sizes[i] if i in order else 1 for i in range(nb + 2)]), sizes).reshape(
            batch, attn.m, attn.k2
        )
    mem = Memory()
    for r, x in placed:
        mem.place(r, x)
    mem.place(o_r)
    buffers = mem.buffers()
    before = {b: buf.copy() for b, buf in buffers.items()}
    d = load_dispatch(handed, list(lay.workload))
    grid = d.grid(list(lay.workload))
    chosen = sample_workgroups(grid, sample, seed + site) if sample else None
    if chosen is not None:
        chosen = whole_clusters(chosen, grid, cluster_shape(d.func))
    # Causal: each workgroup's key loop ends at its own diagonal, and the executor needs loop bounds uniform
    # across the lanes it runs together: one workgroup at a time.
    lanes = {"max_lanes": d.workgroup_size} if attn.causal else {}
    stats, written = run_dispatch(
        d, buffers, constants=constants, workload=list(lay.workload), workgroups=chosen, progress=progress, **lanes
    )

    def flat(x, which, rows):  # stored -> (batch, rows, head dim), through the recorded storage order
        if rec.orders is not None:
            order = rec.orders[which]
            logical = list(attn.batch) + [rows, attn.k1 if which < 2 else attn.n]
            x = x.reshape([logical[i] for i in order])  # (one query: the unit rows dim its tensor lacks)
            x = np.transpose(x, [order.index(axis) for axis in range(len(order))])
        return x.reshape(batch, rows, -1)

    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    ref = attention_reference(
        flat(q64, 0, attn.m),
        flat(k64, 1, attn.k2),
        flat(v64, 2, attn.k2),
        attn.scale,
        causal=bool(attn.causal),
        mask=ref_mask,
        causal_rows=attn.causal_rows,
    )
    bound = attention_bound(ref, flat(v64, 2, attn.k2), attn.q_type)
    got = flat(Memory.read(buffers, o_r).astype(np.float64), 3, attn.m)
    owned = _attention_owned(got.shape, grid, chosen, BLOCK_M, cluster_shape(d.func)[0])
    wmask = flat(written_elements(written, o_r), 3, attn.m)
    err = np.where(owned, np.abs(got - ref), 0.0)
    err = np.where(np.isnan(err), np.inf, err)
    problems = []
    bad = int((err > bound).sum())
    worst_abs = float(err.max()) if err.size else 0.0
    worst_ratio = float((err / bound).max()) if err.size else 0.0
    if bad:
        i = np.unravel_index(int(np.argmax(err / bound)), err.shape)
        problems.append(
            f"{bad} of {int(owned.sum())} elements of O ({o_r.name}) outside the bound (worst: got "
            f"{got[i]:.6g}, expected {ref[i]:.6g} +- {bound[i]:.3g})"
        )
    unwritten, stray = int((owned & ~wmask).sum()), int((wmask & ~owned).sum())
    if unwritten:
        problems.append(f"{unwritten} elements of O never written")
    if stray:
        problems.append(f"{stray} elements of O written by workgroups that do not own them")
    problems += Memory.changed_outside(before, buffers, [o_r])
    problems += [f"race: {race}" for race in stats.races]
    detail = (
        "; ".join(problems) if problems else f"flash attention: output {o_r.name}; inputs and sentinel bytes unchanged"
    )
    total = int(np.prod(grid))
    stats.seconds = time.perf_counter() - start
    return SiteCheck(
        exe.name,
        site,
        sites,
        not problems,
        detail,
        worst_abs,
        worst_ratio,
        len(chosen) if chosen is not None else total,
        total,
        stats.seconds,
        stats,
    )


def estimate_seconds(exe, sample: int = 0, sizes: dict | None = None) -> float:
    """A full run's executor time from the problem size (or the sample's share of it); a
    dynamic dimension's size from ``sizes`` (``--dims``: the run-time size), else 4096."""
    if exe.facts.is_attention:  # QK^T and PV: two products of batch x rows x K2 x D multiply-adds
        from mmaflow.compiler.kernels.attention.nvidia import BLOCK_M

        a = exe.facts.problem.attention
        k2 = a.k2 if a.k2 is not None else (sizes or {}).get("k2", 4096)
        macs = 2 * int(np.prod(a.batch)) * -(-a.m // BLOCK_M) * BLOCK_M * k2 * a.k1  # whole blocks of queries run
        if sample:
            macs = macs * min(1.0, sample / max(-(-a.m // BLOCK_M) * int(np.prod(a.batch)), 1))
        return macs / EXECUTOR_MACS_PER_SECOND
    p = exe.facts.problem
    if exe.facts.is_copy:  # every element once, no multiply-adds: count each as one
        return p.elements / EXECUTOR_MACS_PER_SECOND
    if exe.facts.is_weight_only:  # static; its workgroups split N
        from mmaflow.compiler.kernels.decode.weight_only import plan_weight_only

        macs = (p.m if p.m is not None else (sizes or {}).get("m", 32)) * p.n * p.k
        if sample:
            macs = macs * min(1.0, sample / max(plan_weight_only(p, exe.facts.target).grid[0], 1))
        return macs / EXECUTOR_MACS_PER_SECOND

    def size(d, unknown):
        given = (sizes or {}).get(d, getattr(p, d))
        return unknown if given is None else given

    batch, m, n, k = size("batch", 1), size("m", 4096), size("n", 4096), size("k", 4096)
    macs = batch * m * n * k
    if sample:
        cfg = exe.facts.config
        tiles = -(-m // cfg.tile_m) * -(-n // cfg.tile_n) * batch
        macs = macs * min(1.0, sample / max(tiles, 1))
    return macs / EXECUTOR_MACS_PER_SECOND


def check_sizes(exe, sizes: dict | None) -> None:
    """Refuse run-time sizes a dispatch cannot take (before anything runs)."""
    if exe.facts.is_attention and sizes and (set(sizes) != {"k2"} or not exe.facts.problem.dynamic):
        dyn = " ".join(d.dim for d in exe.facts.problem.dynamic) or "none"
        raise InterpretError(
            f"{exe.name}: {', '.join(sorted(sizes))} given; the attention dispatch's run-time sizes: {dyn}"
        )


def check_executable(
    exe, *, seed: int = 0, sample: int = 0, sizes: dict | None = None, progress=None
) -> list[SiteCheck]:
    """Every call site of one taken executable (``pipeline.ExecutableResult`` with its source)."""
    check_sizes(exe, sizes)
    front = FrontDispatch(parse_module(exe.source, new_context(), source=exe.name))
    handed = parse_module(exe.text, new_context(), source=exe.name)
    if exe.facts.is_attention:
        sites = call_sites(front.func, sizes, exe.facts.problem)
        return [
            check_attention_site(
                exe, handed, front, constants, site=i, sites=len(sites), seed=seed, sample=sample, progress=progress
            )
            for i, constants in enumerate(sites)
        ]
    sites = call_sites(front.func, sizes, exe.facts.problem)
    return [
        check_site(exe, handed, front, constants, site=i, sites=len(sites), seed=seed, sample=sample, progress=progress)
        for i, constants in enumerate(sites)
    ]
