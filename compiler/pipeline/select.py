"""Stage `select`: find the matmul-like contraction of a dispatch and claim it for mmaflow.

Input: one ``hal.executable`` at IREE's executable-sources phase. A dispatch is taken when its
function holds exactly one linalg op whose indexing maps and iterator types make it a
contraction (batch) x M x N x K with a multiply-add body, optionally initialised by a
``linalg.fill``; it is matched by maps, not by op name, so ``linalg.matmul``, transposed
``linalg.matmul`` variants, ``linalg.batch_matmul`` and equivalent ``linalg.generic`` ops all fit.
Elementwise ``linalg.generic`` consumers of its result (bias, activation, scale, cast: arith and
math ops, inputs broadcast along any of the result's dimensions) are its epilogue.

Every tensor the kernel reads or writes must be a whole binding region: a
``hal.interface.binding.subspan`` (a binding and a byte offset into it: IREE packs tensors into
shared buffers) loaded or stored whole. A contraction on slices of a binding is left to IREE.

Output: the same IR with the contraction tagged ``mmaflow.contraction``, its epilogue generics
``mmaflow.epilogue``, and the function tagged ``mmaflow.dispatch``, ``mmaflow.target`` and
``mmaflow.problem`` (``problem.Contraction``, see ``core/attrs.py``). Dispatches without a
contraction are left to IREE with the reason logged; a contraction mmaflow cannot compile is an
error, never a silent hand-over.

An ``iree_linalg_ext.attention`` dispatch is taken on NVIDIA and AMD targets when the
flash-attention kernel (mma.sync; AMD: ``kernels/attention/amd.py``) supports it
(``nvidia.plan_flash_attention``: static, no mask, an additive mask of the inputs'
type (PyTorch's causal SDPA) or a boolean i1 mask stored one byte per element (PyTorch's boolean
``attn_mask``), f16/bf16 throughout, head dim 64 or 128, constant scale; Q, K, V,
O and the mask whole tensors at constant byte offsets): the function is tagged
``mmaflow.dispatch``, ``mmaflow.target`` and ``mmaflow.attention`` (``attention.AttentionDispatch``,
the mask's binding, offset and order with Q's, K's, V's and O's). Any other attention dispatch is
left to IREE with its description and the reason (an f32 mask with f16 inputs, head dim 32, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from iree.compiler import ir

from mmaflow.compiler.core import attrs, dynamic
from mmaflow.compiler.core.attention import ATTENTION_OPS, AttentionDispatch, describe_attention
from mmaflow.compiler.core.epilogue_chain import binding_of, element_type, loaded_from, match_epilogue, stored_to
from mmaflow.compiler.core.errors import InputError, UnsupportedError
from mmaflow.compiler.core.linalg_forms import folded_fill, scaled_matmul
from mmaflow.compiler.core.mlir import (
    defining_op,
    executable_target,
    location_of,
    ops_named,
    str_attr,
    subspan_binding,
    subspan_constant_offset,
    subspan_dims,
    subspan_offset,
    user_of,
    walk,
)
from mmaflow.compiler.core.problem import Binding, BlockScales, Contraction, operand_dims
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.targets import Target, get_target, target_for_arch

NAME = "select"

_LINALG_IGNORED = {"linalg.fill", "linalg.yield", "linalg.index"}
_CASTS = {"arith.extf", "arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp"}


@dataclass
class Decision:
    executable: str
    taken: bool
    reason: str

    def line(self) -> str:
        return f"mmaflow: {'taken' if self.taken else 'left '} {self.executable}: {self.reason}"


def variant_arch(variant: ir.Operation) -> tuple[str | None, str | None]:
    """(backend, GPU arch) of a hal.executable.variant; the arch is None without GPU target info."""
    return executable_target(variant.attributes["target"])


def resolve_target(variant: ir.Operation, requested: str | None) -> Target | None:
    """The mmaflow target for this variant, or None if the variant is not for one of ours."""
    backend, arch = variant_arch(variant)
    if requested:
        target = get_target(requested)
        if backend != target.vendor.iree_backend:
            # Another device's code: IREE also runs the hook on the host executables it builds to
            # evaluate constants at compile time (jit_eval_*, llvm-cpu). Not ours to take.
            return None
        if arch is not None and arch != target.iree_arch and not target.retarget_variant:
            raise InputError(f"the executable was configured for {arch}, not {requested}")
        return target
    return target_for_arch(arch)


def _map_dims(attr) -> list[list[int]]:
    out = []
    for a in ir.ArrayAttr(attr):
        amap = ir.AffineMapAttr(a).value
        dims = []
        for e in amap.results:
            if not isinstance(e, ir.AffineDimExpr):
                return []
            dims.append(e.position)
        out.append(dims)
    return out


def _body_casts(op: ir.Operation) -> tuple[str | None, str | None] | None:
    """Check the body is out + cast(a) * cast(b) (or the K = 1 form whose zero fill IREE folded
    into it, ``linalg_forms.folded_fill``); return the cast op names (None = no cast)."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    yields = [o for o in body if o.name == "linalg.yield"]
    if len(yields) != 1 or len(yields[0].operands) != 1:
        return None
    folded = folded_fill(op)
    args = list(block.arguments)
    a_arg, b_arg, out_arg = args[0], args[1], args[2]
    if folded is not None:
        mul = folded.product
    else:
        add = defining_op(yields[0].operands[0])
        if add is None or add.name not in ("arith.addf", "arith.addi"):
            return None
        lhs, rhs = add.operands
        mul_val = rhs if lhs == out_arg else lhs if rhs == out_arg else None
        mul = defining_op(mul_val) if mul_val is not None else None
    if mul is None or mul.name not in ("arith.mulf", "arith.muli"):
        return None

    def through_cast(v):
        o = defining_op(v)
        if o is not None and o.name in _CASTS:
            return o.operands[0], o.name
        return v, None

    (x, cx), (y, cy) = through_cast(mul.operands[0]), through_cast(mul.operands[1])
    if x == a_arg and y == b_arg:
        return cx, cy
    if x == b_arg and y == a_arg:
        return cy, cx
    return None


def same_tensor(x: ir.Operation, y: ir.Operation) -> bool:
    """Do two subspans name the same tensor: one op, or the same binding, byte offset (the same
    constant, or the same run-time value), type and dynamic sizes?"""
    if x == y:
        return True
    ox, oy = subspan_offset(x), subspan_offset(y)
    same_offset = ox == oy or (
        subspan_constant_offset(x) is not None and subspan_constant_offset(x) == subspan_constant_offset(y)
    )
    return (
        subspan_binding(x) == subspan_binding(y)
        and same_offset
        and x.results[0].type == y.results[0].type
        and subspan_dims(x) == subspan_dims(y)
    )


def match_contraction(op: ir.Operation) -> tuple[dict | None, str]:
    """Return (the problem's shape and type fields, "") if ``op`` is a matmul-like contraction,
    else (None, why not)."""
    if op.name.startswith("iree_linalg_ext."):
        return None, f"{op.name} (not a matmul; IREE compiles it)"
    if "indexing_maps" not in op.attributes or len(op.regions) != 1:
        return None, f"{op.name} (not a contraction)"
    maps = _map_dims(op.attributes["indexing_maps"])
    n_loops = max((max(m) for m in maps if m), default=-1) + 1
    if "iterator_types" in op.attributes:
        iters = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
        reductions = {i for i, t in enumerate(iters) if "reduction" in t}
    else:  # named op: loops missing from the output are the reductions
        reductions = set(range(n_loops)) - set(maps[-1] if maps else [])
    n_in = len(op.operands) - len(op.results)
    what = (
        f"{op.name} ({n_in} input{'s' if n_in != 1 else ''}, "
        f"{len(reductions) or 'no'} reduction{'s' if len(reductions) > 1 else ''})"
    )
    if len(maps) != 3 or n_in != 2:
        return None, what
    a_map, b_map, c_map = maps
    if len(reductions) > 1:
        return None, what
    kd = next(iter(reductions), None)
    batch = [d for d in c_map if d in a_map and d in b_map]
    ms = [d for d in c_map if d in a_map and d not in b_map]
    ns = [d for d in c_map if d in b_map and d not in a_map]
    if len(ms) > 1 or len(ns) > 1 or len(batch) > 1 or (kd is not None and (kd not in a_map or kd not in b_map)):
        return None, f"{what}: indexing maps not those of a (batch) matmul"
    # IREE drops a generic's unit dimensions (M, N or K = 1): a vector-matrix product, an outer
    # product. Those loops are absent from the maps; they have size 1.
    md, nd = (ms[0] if ms else None), (ns[0] if ns else None)
    dropped = tuple(d for d, x in (("m", md), ("n", nd), ("k", kd)) if x is None)
    if dropped and op.name != "linalg.generic":
        return None, f"{what}: indexing maps not those of a (batch) matmul"
    if len(dropped) > 1:
        return None, f"{what}: {' and '.join(dropped)} both 1 (a dot or scalar product, not a matmul)"

    def present(*ds):
        return [d for d in ds if d is not None]

    if c_map != batch + present(md, nd):
        return None, f"{what}: result written transposed or permuted (output map {c_map})"
    if a_map == batch + present(md, kd):
        a_t = False
    elif a_map == batch + present(kd, md):
        a_t = True
    else:
        return None, f"{what}: A map {a_map} is not (batch,) m, k or k, m"
    if b_map == batch + present(kd, nd):
        b_t = False
    elif b_map == batch + present(nd, kd):
        b_t = True
    else:
        return None, f"{what}: B map {b_map} is not (batch,) k, n or n, k"
    casts = _body_casts(op)
    if casts is None:
        return None, f"{what}: the body is not a multiply-accumulate"
    ins = list(op.operands)
    (at, ashape), (bt, bshape), (ct, cshape) = (element_type(v) for v in ins[:3])
    sizes = {}
    for shape, dims in ((ashape, a_map), (bshape, b_map), (cshape, c_map)):
        for s, d in zip(shape, dims):
            if s != -1:
                sizes[d] = s
            else:
                sizes.setdefault(d, None)

    def size(d):
        return 1 if d is None else sizes[d]  # a dropped unit dimension

    return dict(
        k_dropped=kd is None,
        m=size(md),
        n=size(nd),
        k=size(kd),
        batch=sizes[batch[0]] if batch else 1,
        a_type=at,
        b_type=bt,
        c_type=ct,
        a_transposed=a_t,
        b_transposed=b_t,
        batched=bool(batch),
        unsigned_a=casts[0] == "arith.extui",
        unsigned_b=casts[1] == "arith.extui",
    ), ""


def select(module: ir.Module, requested_target: str | None) -> list[Decision]:
    """Tag the contraction of each executable in ``module`` that mmaflow takes."""
    decisions = []
    with module.context:
        for exe in ops_named(module.operation, "hal.executable"):
            name = str_attr(exe, "sym_name")
            for variant in ops_named(exe, "hal.executable.variant"):
                target = resolve_target(variant, requested_target)
                if target is None:
                    backend, arch = variant_arch(variant)
                    decisions.append(Decision(name, False, f"variant {backend}/{arch} is not an mmaflow target"))
                    continue
                decisions.append(_select_in_variant(name, variant, target))
    return decisions


def _dynamic_dims(func: ir.Operation, problem: Contraction, op: ir.Operation, role_subspans: list) -> tuple:
    """Trace every dynamic size of the dispatch to M, N, K or batch through the tensors it
    shapes (a tensor's role gives each axis its dimension), then make sure every workload value
    of the dispatch is accounted for (the grid and the lane executor need them all).
    ``role_subspans``: (subspan, the problem dimension of each axis) of A, B, C and the epilogue
    inputs."""
    traces: dict[str, list] = {}
    for sub in ops_named(func, "hal.interface.binding.subspan"):
        dyn = subspan_dims(sub)
        if not dyn:
            continue
        roles = [dims for s, dims in role_subspans if s == sub]
        if not roles:
            raise UnsupportedError(
                f"binding {subspan_binding(sub)} has dynamic sizes but is not A, B, C or an epilogue input",
                stage=NAME,
                location=location_of(sub),
            )
        shape = ir.ShapedType(_loaded_type(sub)).shape
        axes = [a for a, d in enumerate(shape) if ir.ShapedType.is_dynamic_size(d)]
        for axis, value in zip(axes, dyn):
            dim = roles[0][axis]
            try:
                traces.setdefault(dim, []).append(dynamic.trace(dim, value))
            except UnsupportedError as e:
                e.stage, e.location = NAME, location_of(sub)
                raise
    dims = tuple(dynamic.merge(traces[d]) for d in dynamic.DIM_ORDER if d in traces)
    missing = [d for d in ("batch", "m", "n", "k") if getattr(problem, d) is None and d not in traces]
    if missing:
        raise UnsupportedError(
            f"the dynamic size of {missing[0]} does not shape any binding", stage=NAME, location=location_of(op)
        )
    seen = {o for d in dims for o in d.ordinals}
    for w in ops_named(func, "iree_tensor_ext.dispatch.workload.ordinal"):
        if ir.IntegerAttr(w.attributes["ordinal"]).value not in seen:
            raise UnsupportedError(
                "a dynamic size of the dispatch is none of M, N, K, batch", stage=NAME, location=location_of(w)
            )
    return dims


def _loaded_type(sub: ir.Operation) -> ir.Type:
    """The tensor type a subspan's whole loads/stores move."""
    for use in sub.results[0].uses:
        user = user_of(use)
        if user.name == "iree_tensor_ext.dispatch.tensor.load":
            return user.results[0].type
        if user.name == "iree_tensor_ext.dispatch.tensor.store":
            return user.operands[0].type
    raise UnsupportedError(
        "a binding of the dispatch is neither loaded nor stored", stage=NAME, location=location_of(sub)
    )


def _packed_refusal(fields: dict) -> str | None:
    """Why a matmul of 4- or 6-bit operands cannot be taken (None: it can). Each such operand
    arrives packed along the tensor's last dimension (two fp4 or i4 a byte, four fp6 in three):
    as bytes bit-cast in the dispatch (the 4/6-bit floats: IREE passes them as i8) or as a
    binding of that type (i4, which IREE packs so itself): the kernels move whole 16-byte chunks of K (stage
    `normalize` folds the bitcast into the binding's type), so that dimension must be K, static,
    and every row must start on a 16-byte boundary."""
    for role, t, k_last in (
        ("A", fields["a_type"], not fields["a_transposed"]),
        ("B", fields["b_type"], fields["b_transposed"]),
    ):
        bits = TYPE_BITS.get(t, 8)
        if bits >= 8:
            continue
        if not k_last:
            return (
                f"operand {role} ({t}) is packed along {'M' if role == 'A' else 'N'} (stored "
                f"{'K x M' if role == 'A' else 'K x N'}): mmaflow loads 4- and 6-bit operands packed along K "
                f"only (A stored M x K, B stored N x K)"
            )
        if None in (fields["k"], fields["m"], fields["n"]):
            return (
                f"operand {role} ({t}) in a matmul of dynamic sizes: mmaflow takes 4- and 6-bit operands in "
                f"static matmuls (IREE sizes their bitcast with workload ordinals of its own)"
            )
        if fields["k"] * bits % 128:
            return (
                f"operand {role} ({t}): K = {fields['k']} is not a whole number of 16-byte chunks "
                f"({128 // math.gcd(128, bits)} {t} values); mmaflow loads 4- and 6-bit rows in 16-byte chunks"
            )
    return None


def _select_scaled(name: str, func: ir.Operation, op: ir.Operation, sm, linalg_ops: list, target: Target) -> Decision:
    """IREE's scaled-matmul form (``linalg_forms.scaled_matmul``: OCP MX block scaling), either
    operand order: the problem is A @ B^T over K = blocks x block, with its E8M0 scales."""
    operands = list(op.operands)
    a_t, b_t, sa_t, sb_t = (
        str(ir.ShapedType(operands[i].type).element_type) for i in (sm.a, sm.b, sm.a_scales, sm.b_scales)
    )
    what = f"a block-scaled matmul ({a_t} x {b_t}, {sa_t} scales)"
    others = [o for o in linalg_ops if o != op]
    if others:
        return Decision(
            name, False, f"{what} with {others[0].name} in its dispatch: mmaflow takes the scaled matmul alone"
        )
    if None in (sm.m, sm.n, sm.blocks):
        return Decision(name, False, f"{what} of dynamic sizes: mmaflow takes static block-scaled matmuls")
    if sm.block != 32 or sa_t != "f8E8M0FNU" or sb_t != "f8E8M0FNU":
        return Decision(name, False, f"{what} with blocks of {sm.block}: OCP MX scales are f8E8M0FNU, one a 32 K")
    fp8, narrow = ("f8E4M3FN", "f8E5M2"), ("f4E2M1FN", "f6E2M3FN", "f6E3M2FN")
    if not ({a_t, b_t} <= set(fp8) or {a_t, b_t} <= set(narrow)):
        return Decision(
            name,
            False,
            f"{what}: a block-scaled MFMA reads 8-bit A and B, or 4/6-bit A and B (a lane's 32 values one "
            f"block); 8-bit x 4/6-bit pairs share no K order: left to IREE",
        )
    subs = {
        r: loaded_from(operands[i]) for r, i in (("A", sm.a), ("B", sm.b), ("SA", sm.a_scales), ("SB", sm.b_scales))
    }
    store = next((user_of(u) for u in op.results[0].uses), None)
    subs["C"] = (
        stored_to(store) if store is not None and store.name == "iree_tensor_ext.dispatch.tensor.store" else None
    )
    missing = [r for r, sub in subs.items() if sub is None]
    if missing:
        return Decision(name, False, f"{what}: {missing[0]} is not a whole tensor of a binding")
    init = defining_op(operands[4])
    if init is None or init.name != "linalg.fill":
        raise UnsupportedError(
            "the matmul accumulates into an existing tensor (C += A*B); mmaflow needs a zero-filled init (linalg.fill)",
            stage=NAME,
            location=location_of(op),
        )
    problem = Contraction(
        m=sm.m,
        n=sm.n,
        k=sm.blocks * sm.block,
        batch=1,
        a_type=a_t,
        b_type=b_t,
        c_type=str(ir.ShapedType(op.results[0].type).element_type),
        a=binding_of(subs["A"]),
        b=binding_of(subs["B"]),
        c=binding_of(subs["C"]),
        b_transposed=True,
        scales=BlockScales(binding_of(subs["SA"]), binding_of(subs["SB"]), sa_t, sm.block),
    )
    refusal = _packed_refusal(
        {
            "a_type": a_t,
            "b_type": b_t,
            "a_transposed": False,
            "b_transposed": True,
            "k": problem.k,
            "m": sm.m,
            "n": sm.n,
        }
    )
    if refusal is not None:
        return Decision(name, False, f"{what}: {refusal}")
    try:
        registry.require_instruction(target, problem)
    except UnsupportedError as e:
        e.stage, e.location = NAME, location_of(op)
        raise
    attrs.mark(op, attrs.CONTRACTION)
    attrs.mark(func, attrs.DISPATCH)
    attrs.write_target(func, target)
    attrs.write_problem(func, problem)
    where = ", ".join(
        f"{r}: {b.describe()}"
        for r, b in (
            ("A", problem.a),
            ("B", problem.b),
            ("C", problem.c),
            ("A-scales", problem.scales.a),
            ("B-scales", problem.scales.b),
        )
    )
    return Decision(name, True, f"{problem.describe()} on {target.name} ({where})")


def _select_attention(name: str, func: ir.Operation, op: ir.Operation, linalg_ops: list, target: Target) -> Decision:
    """Take an attention dispatch the flash-attention kernel supports on ``target``
    (``nvidia.plan_flash_attention`` decides, and names why not); leave every other one
    to IREE with its description and the reason."""
    try:
        attn = describe_attention(op)
    except InputError as e:  # a form the description does not read: IREE compiles it all the same
        return Decision(name, False, f"{op.name} ({e.message}): IREE compiles it")
    what = attn.describe()
    try:
        with op.location:
            family = registry.direct_family("attention")
            family.plan(attn, target)
            placements, _, _, consumers = family.placements(op)
            lengths = family.key_lengths(op)  # a run-time key length: where each tensor gets it
            dyn = (dynamic.merge([dynamic.trace("k2", v) for v in lengths.values()]),) if lengths else ()
    except UnsupportedError as e:  # the message starts with the description where it is about the sizes
        why = e.message.removeprefix(f"{what}: ")
        return Decision(name, False, f"{what}: {why}; IREE compiles it")
    others = [o.name for o in linalg_ops if o != op and o not in consumers]
    if others:
        return Decision(
            name,
            False,
            f"{what}: the dispatch also holds {', '.join(others)}; the attention kernel "
            f"computes one attention op, IREE compiles it",
        )
    pls = [placements[r] for r in ("Q", "K", "V", "O")]
    mask = placements.get("mask")
    record = AttentionDispatch(
        attn,
        *(Binding(p.binding, p.offset) for p in pls),
        orders=None if all(p.order is None for p in pls) else tuple(p.order for p in pls),
        mask=Binding(mask.binding, mask.offset) if mask is not None else None,
        mask_order=mask.order if mask is not None else None,
        dynamic=dyn,
    )
    attrs.mark(func, attrs.DISPATCH)
    attrs.write_target(func, target)
    attrs.write_attention(func, record)
    return Decision(name, True, f"attention: {what} on {target.name} ({record.where()})")


def _select_direct(name: str, func: ir.Operation, kind: str, what: str, target: Target, detail=None) -> Decision:
    """Take a dispatch of a direct family's form (``kind``: a dequantization feeding a matmul for the
    weight-only kernel, IREE's ``slow_memcpy`` for the copy kernel) that the family plans on
    ``target``; leave every other one to IREE with the reason, named as ``what``. ``detail(plan)``:
    what the decision line adds about the plan."""
    family = registry.direct_family(kind)
    try:
        with func.location:
            record = family.placements(func)
            plan = family.plan(record, target)
    except UnsupportedError as e:
        return Decision(name, False, f"{what}: {e.message}; IREE compiles it")
    attrs.mark(func, attrs.DISPATCH)
    attrs.write_target(func, target)
    attrs.write_direct(func, kind, record)
    extra = f" ({detail(plan)})" if detail else ""
    return Decision(name, True, f"{record.describe()}{extra} on {target.name} ({record.where()})")


def _select_in_variant(name: str, variant: ir.Operation, target: Target) -> Decision:
    funcs = ops_named(variant, "func.func")
    if len(funcs) != 1:
        return Decision(name, False, f"{len(funcs)} functions in the variant (expected 1)")
    func = funcs[0]
    body = func.regions[0].blocks[0]
    linalg_ops = [
        o.operation
        for o in body.operations
        if o.operation.name.startswith(("linalg.", "iree_linalg_ext.")) and o.operation.name not in _LINALG_IGNORED
    ]
    attention = [o for o in linalg_ops if o.name in ATTENTION_OPS]
    if attention:  # named with what it computes, not as "no matmul-like contraction"
        return _select_attention(name, func, attention[0], linalg_ops, target)
    weight_only = registry.direct_family("weight_only")
    if weight_only.claims(func):
        return _select_direct(name, func, "weight_only", "a dequantization feeding a matmul", target)
    if not linalg_ops and registry.direct_family("copy").claims(func):
        return _select_direct(name, func, "copy", "a copy", target, lambda plan: f"{plan.width}-byte accesses")
    found, why_not = [], []
    for op in linalg_ops:
        fields, why = match_contraction(op)
        if fields is None:
            scaled, _ = scaled_matmul(op)
            if scaled is not None:
                return _select_scaled(name, func, op, scaled, linalg_ops, target)
            why_not.append(why)
        else:
            found.append((op, fields))
    if not found:
        lone = weight_only.lone_dequantization(func)
        if lone is not None:  # named for what it is: the weight-only kernel takes it with its matmul only
            return Decision(
                name,
                False,
                f"a dequantization ({lone}) without a matmul: IREE formed it as a dispatch of its own; the "
                "weight-only kernel takes a dequantization and the matmul reading it in one dispatch",
            )
        reason = "no matmul-like contraction" + (f": {'; '.join(why_not)}" if why_not else " (no linalg op: a copy)")
        return Decision(name, False, reason)
    if len(found) > 1:
        raise UnsupportedError(
            f"{len(found)} contractions in one dispatch; mmaflow compiles one per dispatch",
            stage=NAME,
            location=location_of(found[1][0]),
        )
    op, fields = found[0]
    k_dropped = fields.pop("k_dropped")
    chain, store, inputs, names, stored = match_epilogue(op, fields["batched"], NAME)
    if chain and ir.ShapedType(op.results[0].type).rank < 2 + fields["batched"]:
        return Decision(
            name,
            False,
            f"{'M' if fields['m'] == 1 else 'N'} = 1 with a fused epilogue: IREE dropped "
            "the unit dimension, and mmaflow applies epilogues to 2-D results only",
        )
    others = [o for o in linalg_ops if o != op and o not in chain]
    if k_dropped and (chain or others):  # a broadcast multiply inside a larger fusion: not a matmul to take
        return Decision(
            name, False, f"an outer product (K = 1) fused with {(chain or others)[0].name}: IREE compiles the fusion"
        )
    if others:
        raise UnsupportedError(
            f"the dispatch also holds {others[0].name}, which does not consume the matmul's result; mmaflow "
            f"compiles a matmul and its elementwise epilogue",
            stage=NAME,
            location=location_of(others[0]),
        )
    refusal = _packed_refusal(fields)
    if refusal is not None:
        return Decision(name, False, refusal)
    subs = {"A": loaded_from(op.operands[0]), "B": loaded_from(op.operands[1]), "C": stored_to(store)}
    sliced = [role for role, sub in subs.items() if sub is None]
    if sliced:
        role = sliced[0]
        what = "the result" if role == "C" else f"operand {role}"
        return Decision(
            name,
            False,
            f"{what} of the contraction is not a whole tensor of a binding (a slice, or "
            f"computed in the dispatch); mmaflow takes contractions on whole tensors",
        )
    problem = Contraction(
        **fields,
        a=binding_of(subs["A"]),
        b=binding_of(subs["B"]),
        c=binding_of(subs["C"]),
        same_ab=same_tensor(subs["A"], subs["B"]),
        out_type=stored if stored != fields["c_type"] else None,
        epilogue=tuple(e for _, e in inputs),
        epilogue_ops=tuple(names),
    )
    if any(getattr(problem, d) is None for d in ("batch", "m", "n", "k")):
        dims = operand_dims(problem)
        role_subspans = [(subs[r], dims[r]) for r in "ABC"]
        role_subspans += [(sub, ["batch" if d == "b" else d for d in e.dims]) for sub, e in inputs]
        problem = replace(problem, dynamic=_dynamic_dims(func, problem, op, role_subspans))
    for fill in (o for o in walk(func) if o.name == "linalg.fill"):
        if fill.results[0] != op.operands[2]:
            raise UnsupportedError(
                "a linalg.fill that does not initialise the matmul", stage=NAME, location=location_of(fill)
            )
    init = defining_op(op.operands[2])
    accumulates = (init is None or init.name != "linalg.fill") and folded_fill(op) is None
    if accumulates and k_dropped:
        return Decision(
            name, False, "an outer product (K = 1) added to an existing tensor: an elementwise op, IREE compiles it"
        )
    if accumulates:
        raise UnsupportedError(
            "the matmul accumulates into an existing tensor (C += A*B); mmaflow needs a zero-filled init (linalg.fill)",
            stage=NAME,
            location=location_of(op),
        )
    sole = registry.sole_family(target, problem)  # fp8 on sm_90a: the warpgroup kernel or nothing of ours
    if sole is not None:
        refusal = sole.refusal(target, problem)
        if refusal is not None:
            return Decision(
                name,
                False,
                f"{problem.describe()}: only {sole.title} computes "
                f"{problem.a_type} x {problem.b_type} on {target.name}, and it refuses: "
                f"{refusal}; left to IREE's own pipeline (whose CUDA lowering of fp8 "
                f"matmuls fails in IREE 3.13)",
            )
    try:
        registry.require_instruction(target, problem)
    except UnsupportedError as e:
        if k_dropped:  # an outer product (a broadcast multiply) without a matrix instruction: IREE's
            return Decision(
                name,
                False,
                f"an outer product (K = 1) of {problem.a_type} x {problem.b_type} -> "
                f"{problem.c_type}, which no {target.name} matrix instruction computes",
            )
        e.stage, e.location = NAME, location_of(op)
        raise
    attrs.mark(op, attrs.CONTRACTION)
    for g in chain:
        attrs.mark(g, attrs.EPILOGUE)
    attrs.mark(func, attrs.DISPATCH)
    attrs.write_target(func, target)
    attrs.write_problem(func, problem)
    where = ", ".join(f"{r}: {b.describe()}" for r, b in (("A", problem.a), ("B", problem.b), ("C", problem.c)))
    note = "; A and B are one tensor" if problem.same_ab else ""
    return Decision(name, True, f"{problem.describe()} on {target.name} ({where}{note})")
