"""GQA's KV broadcast read through: a decoder step's attention reads its KV cache where the cache
lies, not after IREE copies it once per query head (``mmaflow compile``'s front, at
executable-sources).

IREE 3.13 forms PyTorch's ``scaled_dot_product_attention(..., enable_gqa=True)`` with one query
(a decoder step, ``e2e_tests/models/llama_decode``) as two broadcast dispatches and the attention:

    dispatch 7:  K'[kv, g, j]    = K[kv, j]       (8x4x? from 8x?: j runs over keys x head dim)
    dispatch 8:  V'[kv, g, d, s] = V[kv, s, d]    (8x4x64x? from 8x?x64: broadcast and transposed)
    dispatch 9:  attention(Q 32x64, K' as 32x?x64, V' as 32x64x?) -> O 32x64

The broadcasts write G = 4 copies of the cache (G query heads share a KV head) and the attention
reads every copy: 5x the cache's bytes moved, and V read along its keys. Where the host program
proves that the attention's K and V are, at every call, exactly what such broadcasts wrote from
bytes nothing overwrote since, this module rewrites the attention into IREE's GQA form with the
query heads folded into the rows (the form IREE itself makes of a prefill):

    attention(Q as 8x4x64, K 8x?x64, V 8x?x64) -> O as 8x4x64     (the same bytes for Q and O)

reading K and V at the broadcasts' sources (its push constants for their offsets rewritten at each
call), and removes each broadcast whose output nothing reads any more. The rewritten dispatch is
valid IR whoever compiles it: mmaflow's kernel, or IREE where mmaflow leaves it.

The proof, for each call of the attention (every call, or none is rewritten):
- the attention op is the dispatch's only linalg op, with no mask; Q, K and V are whole loads of
  subspans and O a whole store, each stored batch outermost (Q and O (batch..., [rows], head dim));
  K's and V's offsets are 64-bit push constants nothing else in the dispatch reads;
- walking back from the call, the first command writing any byte of K's range (``host_program.py``)
  is a dispatch of a broadcast function writing exactly that range: one ``linalg.generic`` copying
  its one input (a whole load) to its output (a whole store), all loops parallel, the output indexed
  by the identity, the input by a projection dropping only the output's dim 1 (G), with output
  [B / G, G, R...] where R is K's per-batch stored shape or its product; likewise V; the same G;
- the source lies in the attention's binding of K (V) and no command between the broadcast and the
  attention writes any of its bytes; its offset satisfies the attention's ``util.assume.int``
  promises for K's (V's) offset, and the host has it as a value (a constant, or the broadcast's own
  push constants).

The hook tool (``mmaflow-codegen`` inside iree-compile) sees one executable at a time, never the
host program: there the broadcasts stay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from iree.compiler import ir

from mmaflow.compiler.core.attention import ATTENTION_OPS, attention_roles, describe_attention
from mmaflow.compiler.core.causal import Offset, Subspan, bound_tensor, subspans
from mmaflow.compiler.core.errors import InputError
from mmaflow.compiler.core.mlir import defining_op, int_assumptions, segments, subspan_dims, user_of, walk
from mmaflow.compiler.driver.host_program import (
    Program,
    Site,
    Sym,
    before,
    commands,
    dead_after,
    entry,
    execute_of,
    last_writer,
    written_between,
)

GQA_FOLDED = "mmaflow.gqa_folded"  # on a rewritten attention op: what it reads instead of the broadcasts
_I32 = 0xFFFFFFFF


@dataclass(frozen=True)
class _Broadcast:
    """A dispatch function copying its one input to its output, broadcast along the output's dim 1."""

    src: Subspan
    dst: Subspan
    in_dims: tuple[int, ...]  # per input dim, the output dim it is


@dataclass
class _Fold:
    """One call's proof for K or V: the broadcast dispatch and the source's order and offset."""

    broadcast: Site
    write: object  # the broadcast's Access on the attention's range
    order: tuple[str, ...]  # the source's per-batch stored dims
    offset: Sym  # the source's byte offset in the attention's binding
    group: int  # query heads a KV head: the times the broadcast copies each
    push: tuple = ()  # the call's new push constants for it: (lo, hi) ints, or the broadcast's host values


@dataclass
class _Attention:
    export: str
    op: ir.Operation
    func: ir.Operation
    batch: int
    rows: int  # queries per batch item (1: one query, no M loop)
    k1: int
    n: int
    subs: dict  # "Q", "K", "V", "O" -> (Subspan, subspan op, load or store op)
    per_batch: dict  # "K", "V" -> stored dims after the batch
    calls: list = field(default_factory=list)  # [(site, {"K": _Fold, "V": _Fold}, group)]
    refused: str = ""


def _whole_access(access: ir.Operation) -> bool:
    """A dispatch.tensor.load/store, directly in its function's body, of its subspan's whole binding tensor:
    offsets 0, unit strides, the binding tensor's every size (a dynamic one passed as the same value as the
    subspan's dim), the value's type that tensor's."""
    if access.parent is None or access.parent.name != "func.func":
        return False
    try:
        offs, sizes, strides = (
            list(ir.DenseI64ArrayAttr(access.attributes[n]))
            for n in ("static_offsets", "static_sizes", "static_strides")
        )
    except (KeyError, ValueError):
        return False
    groups = segments(access)
    tensor_dims, dyn_offsets, dyn_sizes, dyn_strides = groups[-4:]
    is_load = access.name.endswith(".load")
    value = access.results[0] if is_load else access.operands[0]
    sub = defining_op(access.operands[0] if is_load else access.operands[1])
    if sub is None or sub.name != "hal.interface.binding.subspan":
        return False
    bound = bound_tensor(sub.results[0].type)
    if bound is None:
        return False
    return (
        set(offs) <= {0}
        and set(strides) <= {1}
        and value.type == bound[1]
        and sizes == list(bound[1].shape)
        and not dyn_offsets
        and not dyn_strides
        and list(dyn_sizes) == list(tensor_dims) == list(subspan_dims(sub))
    )


def _broadcast(func: ir.Operation) -> _Broadcast | None:
    """The function as a broadcast copy (see the module's doc), or None."""
    generics = [o for o in walk(func) if o.name.startswith("linalg.") and o.name != "linalg.yield"]
    if len(generics) != 1 or generics[0].name != "linalg.generic":
        return None
    g = generics[0]
    if len(g.operands) != 2 or len(g.results) != 1:
        return None
    iters = [str(a) for a in ir.ArrayAttr(g.attributes["iterator_types"])]
    if any("parallel" not in it for it in iters):
        return None
    block = g.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if len(body) != 1 or body[0].name != "linalg.yield" or list(body[0].operands) != [block.arguments[0]]:
        return None
    in_map, out_map = (ir.AffineMapAttr(a).value for a in ir.ArrayAttr(g.attributes["indexing_maps"]))
    if not all(isinstance(e, ir.AffineDimExpr) for e in list(in_map.results) + list(out_map.results)):
        return None
    out_dims = [ir.AffineDimExpr(e).position for e in out_map.results]
    in_dims = tuple(ir.AffineDimExpr(e).position for e in in_map.results)
    if out_dims != list(range(len(iters))) or len(set(in_dims)) != len(in_dims):
        return None
    if sorted(set(range(len(iters))) - set(in_dims)) != [1] or in_dims[0] != 0:
        return None  # (G: the output's dim 1 alone is broadcast; the batch of KV heads outermost in both)
    load = defining_op(g.operands[0])
    users = [user_of(u) for u in g.results[0].uses]
    if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load" or len(users) != 1:
        return None
    store = users[0]
    if store.name != "iree_tensor_ext.dispatch.tensor.store" or not _whole_access(load) or not _whole_access(store):
        return None
    subs = subspans(func)
    src_op, dst_op = defining_op(load.operands[0]), defining_op(store.operands[1])
    if len(subs) != 2 or src_op not in subs or dst_op not in subs or g.parent.name != "func.func":
        return None
    if any(len(list(x.results[0].uses)) != 1 for x in (src_op, dst_op)):
        return None  # (one load of the input, one store of the output: nothing else reads or writes them)
    return _Broadcast(subs[src_op], subs[dst_op], in_dims)


def _attention(export: str, func: ir.Operation) -> _Attention | str | None:
    """The function's attention as the fold needs it, a reason it cannot be folded, or None (not one)."""
    linalg = [
        o for o in walk(func) if o.name.startswith(("linalg.", "iree_linalg_ext.")) and not o.name.endswith(".yield")
    ]
    ops = [o for o in linalg if o.name in ATTENTION_OPS]
    if len(ops) != 1:
        return None
    op = ops[0]
    if len(linalg) != 1 or op.name != "iree_linalg_ext.attention":
        return "the dispatch holds more than the attention op"
    try:
        attn = describe_attention(op)
        dims, values, roles = attention_roles(op)
    except InputError as e:
        return e.message
    if "mask" in values or len(op.results) != 1:
        return "the attention reads a mask"
    if None in attn.batch or attn.k1 is None or attn.n is None or attn.m is None:
        return "a dynamic batch, query count or head dim"
    batch, m = roles["batch"], (roles["M"] or [None])[0]
    k1, k2, n = roles["K1"][0], roles["K2"][0], roles["N"][0]
    names = {k1: "k1", k2: "k2", n: "n", m: "m"}
    subs_by_op = subspans(func)
    found = {}
    for what in ("Q", "K", "V"):
        load = defining_op(values[what])
        if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load" or not _whole_access(load):
            return f"its {what} is not a whole binding tensor"
        found[what] = (subs_by_op[defining_op(load.operands[0])], defining_op(load.operands[0]), load)
    users = [user_of(u) for u in op.results[0].uses]
    if len(users) != 1 or users[0].name != "iree_tensor_ext.dispatch.tensor.store" or not _whole_access(users[0]):
        return "its O is not stored whole into a binding tensor"
    o_sub = defining_op(users[0].operands[1])
    found["O"] = (subs_by_op[o_sub], o_sub, users[0])
    if any(x not in names for w in dims for x in dims[w] if w in ("Q", "K", "V", "O") and x not in batch):
        return "a loop of its maps plays no role"
    if len({found[w][1] for w in "QKVO"}) != 4 or any(len(list(found[w][1].results[0].uses)) != 1 for w in "QKVO"):
        return "its tensors' subspans are shared"
    init = defining_op(op.operands[len(op.operands) - 1])
    if init is None or init.name != "tensor.empty" or len(init.operands) or len(list(init.results[0].uses)) != 1:
        return "its output's init is not a static tensor.empty of its own"
    per_batch = {}
    for what in ("Q", "K", "V", "O"):
        d = dims[what]
        if d[: len(batch)] != batch:
            return f"its {what} is not stored batch outermost"
        rest = tuple(names[x] for x in d[len(batch) :])
        if what in ("Q", "O") and rest not in ((("m", "k1") if what == "Q" else ("m", "n")), ("k1",), ("n",)):
            return f"its {what} is not stored (batch..., rows, head dim)"
        per_batch[what] = rest
    for what in "QO":
        if None in found[what][0].shape:
            return f"its {what} has a run-time size"
    for what in "KV":  # (only the keys may be a run-time size: the rewrite keeps that one dim's operand)
        at_k2 = dims[what].index(k2)  # (a whole load: its map's dims are its binding tensor's)
        if any(d is None for i, d in enumerate(found[what][0].shape) if i != at_k2):
            return f"its {what} has a run-time size besides the keys"
    return _Attention(export, op, func, math.prod(attn.batch), attn.m, attn.k1, attn.n, found, per_batch)


def _shape_at(site: Site, sub: Subspan) -> list[Sym] | None:
    """A subspan's shape at a call: its static dims, and its dynamic ones as the call passes them."""
    dyn = iter(sub.dims)
    out = []
    for s in sub.shape:
        v = Sym(s) if s is not None else site.value(next(dyn, None))
        if v is None:
            return None
        out.append(v)
    return out


def _product(xs: list[Sym]) -> Sym | None:
    """The product of sizes, at most one of them a run-time value."""
    consts = [x.constant for x in xs if x.constant is not None]
    runtime = [x for x in xs if x.constant is None]
    if len(runtime) > 1:
        return None
    return (runtime[0] if runtime else Sym(1)) * math.prod(consts)


def _fold(prog: Program, cmds, i: int, site: Site, att: _Attention, what: str) -> tuple[_Fold | None, str, bool]:
    """One call's proof for K or V: (the fold or None, why not, whether a broadcast wrote it)."""
    sub = att.subs[what][0]
    where = site.range_of(sub)
    if where is None:
        return None, f"its {what}'s bytes at the call cannot be read", False
    resource, start, end = where
    _, bsite, hit = last_writer(prog, cmds[:i], resource, start, end)
    b = None if bsite is None or len(bsite.exports) != 1 else prog.fact(bsite.export, _broadcast)
    if b is None:
        return None, f"no broadcast dispatch is the last to write its {what}", False
    if bsite.range_of(b.dst) != (resource, start, end) or (hit.start, hit.end) != (start, end):
        return None, f"{bsite.name} writes other bytes than its {what}'s", True
    if not b.src.elem == b.dst.elem == sub.elem:
        return None, f"{bsite.name} copies {b.src.elem} to {b.dst.elem}, the attention reads {sub.elem}", True
    out, inn, mine = _shape_at(bsite, b.dst), _shape_at(bsite, b.src), _shape_at(site, sub)
    if out is None or inn is None or mine is None:
        return None, f"{bsite.name}'s or its {what}'s sizes cannot be read", True
    if any(inn[j] != out[d] for j, d in enumerate(b.in_dims)):
        return None, f"{bsite.name}'s input is not its output's shape", True
    kv, group = out[0].constant, out[1].constant
    if kv is None or group is None or group < 2 or kv * group != att.batch:
        return None, f"{bsite.name} does not broadcast {att.batch} // G KV heads G times", True
    names = att.per_batch[what]
    per, rest = mine[len(mine) - len(names) :], out[2:]
    if rest == per:
        order = tuple(names[d - 2] for d in b.in_dims[1:])
    elif len(rest) == 1 and rest[0] == _product(per) and b.in_dims == (0, 2):
        order = names  # (the keys and head dim collapsed into one dim, in the attention's order)
    else:
        return None, f"{bsite.name}'s output is not its {what} per KV head", True
    src = bsite.range_of(b.src)
    res, base, length = site.bases[sub.binding]
    if src is None or base is None or length is None or src[0] != res:
        return None, f"{bsite.name}'s input is not in the resource the attention reads its {what} from", True
    if not (before(base, src[1]) and before(src[2], base + length)):
        return None, f"{bsite.name}'s input is not inside the attention's binding of {what}", True
    if bsite.range_of(b.dst)[0] == src[0] and not (before(src[2], start) or before(end, src[1])):
        return None, f"{bsite.name} writes over its own input", True
    peers = cmds[cmds.index(bsite.op) + 1 : i]
    parent = site.op.parent
    while parent.name != "stream.cmd.execute":  # (a concurrent block's commands run beside the attention)
        if parent.name == "stream.cmd.concurrent":
            peers += [c for c in commands(parent) if c != site.op and c not in peers]
        parent = parent.parent
    writer = written_between(prog, peers, src[0], src[1], src[2])
    if writer or any(a.writes and a.overlaps(src[0], src[1], src[2]) for a in site.accesses):
        return None, f"{writer or 'the attention'} writes {bsite.name}'s input before the attention reads it", True
    return _Fold(bsite, hit, order, src[1] - base, group), "", True


def _feeds_only(func: ir.Operation, ordinals: tuple[int, ...], sub_op: ir.Operation) -> bool:
    """Push constants ``ordinals`` reach nothing in the function but ``sub_op``'s offset."""
    passing = ("arith.extui", "arith.shli", "arith.ori", "arith.index_castui")
    loads = [
        o
        for o in walk(func)
        if o.name == "hal.interface.constant.load" and ir.IntegerAttr(o.attributes["ordinal"]).value in ordinals
    ]
    todo = [ld.results[0] for ld in loads]
    while todo:
        value = todo.pop()
        for use in value.uses:
            user = user_of(use)
            if user == sub_op:
                if use.operand_number != 0:  # (the offset, not one of the subspan's dims)
                    return False
            elif user.name in passing:
                todo.append(user.results[0])
            elif user.name == "util.assume.int":  # only the one defining the offset (``_promises`` checks it)
                result = user.results[use.operand_number]
                if [(user_of(u), u.operand_number) for u in result.uses] != [(sub_op, 0)]:
                    return False
                todo.append(result)
            else:
                return False
    return bool(loads)


def _promises(sub_op: ir.Operation, offset: Sym) -> str:
    """Why ``offset`` breaks the ``util.assume.int`` promises on the subspan's offset ("" if it keeps them)."""
    value = sub_op.operands[0]
    assume = defining_op(value)
    if assume is None or assume.name != "util.assume.int":
        return ""
    rows = int_assumptions(assume.attributes["assumptions"])[list(assume.results).index(value)]
    for row in rows:
        udiv, umin, umax = row.get("udiv", 1), row.get("umin", 0), row.get("umax")
        if not offset.divisible(udiv) or not before(Sym(umin), offset):
            return f"it is not provably a multiple of {udiv} at least {umin}"
        if umax is not None and umax < 1 << 62 and (offset.constant is None or offset.constant > umax):
            return f"it is not provably at most {umax}"
    return ""


def _push(prog: Program, fold: _Fold, off: Offset) -> tuple | str:
    """The call's new push constants for an offset: two ints (a constant) or the two host values the
    broadcast passes for its input's offset; or why there are none."""
    if off.high is None:
        return "its offset is one 32-bit push constant"
    c = fold.offset.constant
    if c is not None:
        return (c & _I32, c >> 32)
    src_off = prog.fact(fold.broadcast.export, _broadcast).src.offset
    if src_off is None or src_off.high is None or fold.broadcast.value(src_off) != fold.offset:
        return "its source's offset is not a value the host passes"
    u = fold.broadcast.uniforms
    return (u[src_off.ordinal], u[src_off.high])


def fold(module: ir.Module) -> list[str]:
    """Rewrite every attention whose K and V are provably GQA broadcasts of a cache at every call (see the
    module's doc) and remove the broadcasts nothing reads any more; the log lines."""
    prog = Program(module)
    atts = {}
    for export, f in prog.funcs.items():
        a = _attention(export, f)
        if isinstance(a, _Attention):
            atts[export] = a
    log: list[str] = []
    if not atts:
        return log
    for cmds, i, site in prog.calls():
        for export in site.exports:
            a = atts.get(export)
            if a is not None and not a.refused:
                _prove_call(prog, cmds, i, site, a)
    erase: dict[ir.Operation, _Fold] = {}
    for a in atts.values():
        name = a.export.split("::")[-1]
        if a.refused:
            if a.refused is not True:
                log.append(f"mmaflow: {name}: K and V read as the broadcasts write them ({a.refused})")
            continue
        if not a.calls:
            continue
        groups = {g for _, _, g in a.calls}
        orders = {tuple(f[w].order for w in "KV") for _, f, _ in a.calls}
        if len(groups) != 1 or len(orders) != 1:
            log.append(f"mmaflow: {name}: K and V read as the broadcasts write them (different at different calls)")
            continue
        (group,), ((k_order, v_order),) = groups, orders
        _rewrite_function(a, group, {"K": k_order, "V": v_order})
        for site, folds, _ in a.calls:
            for what in "KV":
                _set_push(site, a.subs[what][0].offset, folds[what].push)
                erase.setdefault(folds[what].broadcast.op, folds[what])
            prog.forget(site.op, a.export)
        writers = sorted({f.broadcast.name for _, folds, _ in a.calls for f in folds.values()})
        log.append(
            f"mmaflow: {name}: GQA folded: K and V read where {', '.join(writers)} read them, {group} query "
            f"heads a KV head as the rows (batch {a.batch // group}, {a.rows * group} queries)"
        )
    removed: list[_Fold] = []
    for op, f in erase.items():
        execute = execute_of(op)
        cmds = commands(execute)
        why = dead_after(prog, execute, cmds[cmds.index(op) + 1 :], f.write, lambda s, _: f"{s.name} reads it")
        if why:
            log.append(f"mmaflow: {f.broadcast.name}: kept ({why})")
            continue
        parent = op.parent
        op.erase()
        removed.append(f)
        if parent.name == "stream.cmd.concurrent" and not commands(parent):
            parent.erase()
        log.append(f"mmaflow: {f.broadcast.name}: dispatch removed (its broadcast is read by nothing any more)")
    _drop_unused_executables(module, {f.broadcast.export.split("::")[0] for f in removed})
    return log


def _drop_unused_executables(module: ir.Module, candidates: set[str]) -> None:
    """Erase each of the removed broadcasts' ``hal.executable`` that no dispatch names any more."""
    named = {
        entry(ref).split("::")[0]
        for op in walk(module.operation)
        if op.name == "stream.cmd.dispatch"
        for ref in ir.ArrayAttr(op.attributes["entry_points"])
    }
    for exe in [o for o in walk(module.operation) if o.name == "hal.executable"]:
        name = ir.StringAttr(exe.attributes["sym_name"]).value
        if name in candidates and name not in named:
            exe.erase()


def _prove_call(prog: Program, cmds, i: int, site: Site, a: _Attention) -> None:
    """One call of ``a``: its proof appended to ``a.calls``, or ``a.refused`` set (True: no broadcast in
    sight, nothing to say; a str: why not)."""
    if len(site.exports) != 1:
        a.refused = "the dispatch has several target variants"
        return
    folds = {}
    for what in "KV":
        f, why, seen = _fold(prog, cmds, i, site, a, what)
        if f is None:
            a.refused = why if seen or folds else True
            return
        off = a.subs[what][0].offset
        if off is None or not _feeds_only(a.func, off.ordinals, a.subs[what][1]):
            a.refused = f"its {what}'s offset is not push constants read only as that offset"
            return
        broken = _promises(a.subs[what][1], f.offset)
        push = _push(prog, f, off)
        if broken or isinstance(push, str):
            a.refused = f"the source's offset for its {what}: {broken or push}"
            return
        f.push = push
        folds[what] = f
    if folds["K"].group != folds["V"].group:
        a.refused = "K and V broadcast a different number of times"
        return
    a.calls.append((site, folds, folds["K"].group))


def _set_push(site: Site, off: Offset, push: tuple) -> None:
    """Pass ``push`` (two ints, or two host values) as push constants ``off.ordinal`` and ``off.high``."""
    op = site.op
    base = len(segments(op)[0])  # (the workload comes first)
    values = list(push)
    for j, v in enumerate(values):
        if isinstance(v, int):
            execute = execute_of(op)
            with ir.InsertionPoint(execute), execute.location:
                i32 = ir.IntegerType.get_signless(32)
                signed = v - (1 << 32) if v >= 1 << 31 else v
                values[j] = ir.Operation.create(
                    "arith.constant", results=[i32], attributes={"value": ir.IntegerAttr.get(i32, signed)}
                ).results[0]
    op.operands[base + off.ordinal] = values[0]
    op.operands[base + off.high] = values[1]


def _tensor(dims: list, elem: ir.Type) -> ir.RankedTensorType:
    dyn = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get([dyn if d is None else d for d in dims], elem)


def _retype_subspan(sub_op: ir.Operation, tensor: ir.RankedTensorType) -> None:
    text = str(sub_op.results[0].type)
    access = text[text.index("<") + 1 : text.index(":")]
    sub_op.results[0].set_type(ir.Type.parse(f"!iree_tensor_ext.dispatch.tensor<{access}:{tensor}>"))


def _retype_access(access: ir.Operation, tensor: ir.RankedTensorType) -> None:
    rank = tensor.rank
    with access.context:
        access.attributes["static_offsets"] = ir.DenseI64ArrayAttr.get([0] * rank)
        access.attributes["static_sizes"] = ir.DenseI64ArrayAttr.get(list(tensor.shape))
        access.attributes["static_strides"] = ir.DenseI64ArrayAttr.get([1] * rank)
    if access.name.endswith(".load"):
        access.results[0].set_type(tensor)


def _rewrite_function(a: _Attention, group: int, orders: dict) -> None:
    """The attention op and its tensors' types in the folded form: batch ``a.batch / group``, ``group``
    query heads (each ``a.rows`` queries) as the rows, K and V stored per KV head in ``orders``."""
    op = a.op
    with op.context, op.location:
        k_sub = a.subs["K"][0]
        k2 = k_sub.shape[len(k_sub.shape) - len(a.per_batch["K"]) + a.per_batch["K"].index("k2")]
        size = {"k1": a.k1, "k2": k2, "n": a.n}
        kv, rows = a.batch // group, a.rows * group
        shapes = {
            "Q": [kv, rows, a.k1],
            "K": [kv] + [size[d] for d in orders["K"]],
            "V": [kv] + [size[d] for d in orders["V"]],
            "O": [kv, rows, a.n],
        }
        loop = {"k1": 2, "k2": 3, "n": 4}
        dims = {
            "Q": [0, 1, 2],
            "K": [0] + [loop[d] for d in orders["K"]],
            "V": [0] + [loop[d] for d in orders["V"]],
            "O": [0, 1, 4],
        }
        for what in "QKVO":
            sub, sub_op, access = a.subs[what]
            elem = ir.ShapedType(op.results[0].type if what == "O" else access.results[0].type).element_type
            t = _tensor(shapes[what], elem)
            _retype_subspan(sub_op, t)
            _retype_access(access, t)
            if what == "O":
                init = defining_op(op.operands[len(op.operands) - 1])
                init.results[0].set_type(t)
                op.results[0].set_type(t)

        def amap(ds):
            return ir.AffineMapAttr.get(ir.AffineMap.get(5, 0, [ir.AffineDimExpr.get(d) for d in ds]))

        maps = [amap(dims["Q"]), amap(dims["K"]), amap(dims["V"]), amap([]), amap(dims["O"])]
        op.attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
        op.attributes[GQA_FOLDED] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), group)
