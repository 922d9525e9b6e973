"""Quantized weights read packed: a linear layer whose int4 weights the model unpacks with shifts and
masks, dequantizes per group and reshapes reaches IREE's dispatch formation as IREE's own
dequant-matmul form (``mmaflow compile``'s front, at global-optimization).

A GPTQ/AWQ-style layer (``e2e_tests/models``, ``llama_mlp_wq``) stores two 4-bit weights a byte and
unpacks them in its forward: ``(w.unsqueeze(-1) >> [0, 4]) & 0xF``, a view as N x K/G x G,
``(q - zero) * scale`` per group, a view as N x K, then ``F.linear``. IREE 3.13 forms that as three
dispatches: the unpacking (a byte per weight), the dequantization (16 bits per weight), and the
matmul reading the dequantized copy: the reshape between the dequantization and the matmul stops the
fusion of the dequantization into the matmul's dispatch, and the unpacking's bytes are no i4 tensor.
Two rewrites, each exact, give IREE its own form back (the form its dequant-matmul tests write):

    unpacked i4    collapse([..., P, 2] <- chain(W [..., P] i8, [0, 4]))  ->  extui(bitcast(W) [..., 2P] i4)
                   where the chain of elementwise generics computes, for every byte b and both halves s,
                   exactly (b >> 4s) & 15 (evaluated on all 256 bytes): nibble s of byte p is weight
                   2p + s, IREE's i4 packing (low nibble first)
    matmul per     matmul(A [M, K], collapse(D [N, G, K/G]))  ->  generic(expand(A) [M, G, K/G], D)
    group          reducing over (G, K/G), where D is a dequantization (elementwise from an i4 / i8
                   tensor), B is read N x K (``F.linear``) and M is at most the weight-only kernel's rows
                   (past them the fused dispatch would go to IREE: the matmul stays apart, for the tiled kernels)

IREE then forms one dispatch per layer: the dequantization (i4, zeros and scales) feeding the
contraction, the epilogue fused behind it; the weight-only kernel (``kernels/decode/weight_only.py``)
takes it, and the weights are read packed, never dequantized into memory. Anything else is left as it
is (logged where the unpacking was found but a condition failed).

The hook tool (``mmaflow-codegen`` inside iree-compile) sees one executable at a time, after IREE
formed the dispatches: there the unpacking and dequantization stay dispatches of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iree.compiler import ir

from mmaflow.compiler.core.linalg_forms import element_bits
from mmaflow.compiler.core.mlir import defining_op, location_of, walk

_PARALLEL = "#linalg.iterator_type<parallel>"
_REDUCTION = "#linalg.iterator_type<reduction>"
_MAX_CHAIN = 8  # elementwise generics between the weight and the value looked for


def _iterators(op: ir.Operation) -> list[str]:
    return [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _dims(m: ir.AffineMap) -> list[int] | None:
    """The loop dims a projection map reads, in order (None: not a projection)."""
    if not all(isinstance(e, ir.AffineDimExpr) for e in m.results):
        return None
    return [ir.AffineDimExpr(e).position for e in m.results]


def _static(t: ir.Type) -> ir.RankedTensorType | None:
    try:
        t = ir.RankedTensorType(t)
    except ValueError:
        return None
    return t if t.has_static_shape else None


def _reassociation(op: ir.Operation) -> list[list[int]]:
    return [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]


def _body(op: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in op.regions[0].blocks[0].operations]


# ---- constants --------------------------------------------------------------------------------------


def _resource_bytes(op: ir.Operation) -> bytes | None:
    """The data of a ``dense_resource`` constant: the op printed alone in a module of its own carries its
    blob in the module's resource section (absent where the blob is: then None)."""
    with op.context, op.location:
        holder = ir.Module.create()
        op.clone(ir.InsertionPoint(holder.body))
        text = holder.operation.get_asm()
    name = str(op.attributes["value"]).split("<", 1)[1].split(">", 1)[0]
    found = re.search(re.escape(name) + r'\s*:\s*"0x([0-9A-Fa-f]*)"', text)
    if found is None or len(found.group(1)) < 8:
        return None
    return bytes.fromhex(found.group(1))[4:]  # (the first 4 bytes: the blob's alignment)


def _constant_ints(value: ir.Value) -> list[int] | None:
    """The elements of an integer constant tensor (dense or dense_resource, i8), or None."""
    op = defining_op(value)
    if op is None or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    t = _static(attr.type)
    if t is None or t.rank != 1 or str(t.element_type) != "i8":
        return None
    if str(attr).startswith("dense_resource<"):
        data = _resource_bytes(op)
        if data is None or len(data) != t.shape[0]:
            return None
        return [b - 256 if b > 127 else b for b in data]
    try:
        dense = ir.DenseIntElementsAttr(attr)
    except ValueError:
        return None
    if dense.is_splat:
        return [ir.IntegerAttr(dense.get_splat_value()).value] * t.shape[0]
    return [dense[i] for i in range(len(dense))]


# ---- the unpacking ----------------------------------------------------------------------------------


_I8_OPS = {
    "arith.shrui": lambda a, b: (a & 0xFF) >> b,
    "arith.shrsi": lambda a, b: (a - 256 if a & 0x80 else a) >> b,
    "arith.shli": lambda a, b: a << b,
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
}
_SHIFTS = ("arith.shrui", "arith.shrsi", "arith.shli")


@dataclass(frozen=True)
class _Step:
    op: ir.Operation  # an elementwise linalg.generic of the chain
    roles: tuple[str, ...]  # per input: "prev" (the chain's value), "src" (the bytes), "pair" (the [2] constant)
    pairs: tuple  # per "pair" input, its two values


def _unpack_chain(value: ir.Value) -> tuple[ir.Value, list[_Step]] | None:
    """The bytes W [..., P] (i8) and the elementwise generics computing ``value`` [..., P, 2] from them
    and constants of two elements indexed by the last dim, each result used only by the next; or None."""
    t = _static(value.type)
    if t is None or t.rank < 2 or t.shape[-1] != 2 or str(t.element_type) != "i8":
        return None
    rank, steps = t.rank, []
    ident, bytes_map, pair_map = list(range(rank)), list(range(rank - 1)), [rank - 1]
    while len(steps) < _MAX_CHAIN:
        g = defining_op(value)
        if g is None or g.name != "linalg.generic" or len(g.results) != 1 or len(list(value.uses)) != 1:
            return None
        if any(it != _PARALLEL for it in _iterators(g)) or len(_iterators(g)) != rank:
            return None
        maps = [_dims(m) for m in _maps(g)]
        ins = list(g.operands)[:-1]
        out_arg = list(g.regions[0].blocks[0].arguments)[len(ins)]
        if maps[-1] != ident or list(out_arg.uses):
            return None
        roles, pairs, src, prev = [], [], None, None
        for v, m in zip(ins, maps):
            vt = _static(v.type)
            if vt is None or str(vt.element_type) != "i8":
                return None
            if m == ident and list(vt.shape) == list(t.shape):
                roles.append("prev")
                prev = v
            elif m == bytes_map and list(vt.shape) == list(t.shape[:-1]):
                roles.append("src")
                src = v
            elif m == pair_map and list(vt.shape) == [2]:
                vals = _constant_ints(v)
                if vals is None or len(vals) != 2:
                    return None
                roles.append("pair")
                pairs.append(tuple(vals))
            else:
                return None
        if (src is None) == (prev is None) or roles.count("prev") + roles.count("src") != 1:
            return None
        steps.insert(0, _Step(g, tuple(roles), tuple(pairs)))
        if src is not None:
            return src, steps
        value = prev
    return None


def _evaluate(steps: list[_Step], byte: int, half: int) -> int | None:
    """The chain's i8 result for one byte and one half (0: the first of the pair's values), or None
    where it holds an op the evaluation does not know (or a shift out of range)."""
    current = None
    for step in steps:
        block = step.op.regions[0].blocks[0]
        args = list(block.arguments)
        env, pairs = {}, iter(step.pairs)
        for arg, role in zip(args, step.roles):
            env[arg] = current if role == "prev" else byte if role == "src" else next(pairs)[half]
        for op in _body(step.op):
            if op.name == "linalg.yield":
                current = env.get(op.operands[0])
                break
            if op.name == "arith.constant":
                try:
                    env[op.results[0]] = ir.IntegerAttr(op.attributes["value"]).value
                except ValueError:
                    return None
                continue
            fn = _I8_OPS.get(op.name)
            if fn is None or str(op.results[0].type) != "i8":
                return None
            a, b = (env.get(v, _outer_int(v)) for v in op.operands)
            if a is None or b is None or (op.name in _SHIFTS and not 0 <= (b & 0xFF) < 8):
                return None
            r = fn(a & 0xFF, b & 0xFF) & 0xFF
            env[op.results[0]] = r
        if current is None:
            return None
    return current


def _outer_int(v: ir.Value) -> int | None:
    """A scalar integer constant defined outside a generic's body (captured by it), or None."""
    op = defining_op(v)
    if op is None or op.name != "arith.constant":
        return None
    try:
        return ir.IntegerAttr(op.attributes["value"]).value
    except ValueError:
        return None


def _unpacks_nibbles(steps: list[_Step]) -> bool:
    """Whether the chain gives, for every byte b, (b >> 0) & 15 at half 0 and (b >> 4) & 15 at half 1."""
    for half in (0, 1):
        for b in range(256):
            if _evaluate(steps, b, half) != (b >> (4 * half)) & 15:
                return False
    return True


def _generic(
    ins: list[ir.Value], init: ir.Value, maps: list[ir.AffineMap], iterators: list[str], block_types: list[ir.Type]
) -> tuple[ir.Operation, ir.Block]:
    op = ir.Operation.create(
        "linalg.generic",
        results=[init.type],
        operands=ins + [init],
        attributes={
            "indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            "iterator_types": ir.ArrayAttr.get([ir.Attribute.parse(i) for i in iterators]),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(ins), 1]),
        },
        regions=1,
    )
    return op, op.regions[0].blocks.append(*block_types)


def _read_as_i4(collapse: ir.Operation, src: ir.Value) -> ir.Operation:
    """``extui(bitcast(src as i4))``, of the collapse's type, before it; returns the extension."""
    out_t = ir.RankedTensorType(collapse.results[0].type)
    i4, i8 = ir.IntegerType.get_signless(4), ir.IntegerType.get_signless(8)
    with collapse.location, ir.InsertionPoint(collapse):
        q = ir.Operation.create(
            "flow.tensor.bitcast",
            results=[ir.RankedTensorType.get(out_t.shape, i4)],
            operands=[src],
            attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0, 0])},
        )
        empty = ir.Operation.create("tensor.empty", results=[out_t])
        ident = ir.AffineMap.get_identity(out_t.rank)
        ext, block = _generic([q.results[0]], empty.results[0], [ident, ident], [_PARALLEL] * out_t.rank, [i4, i8])
    with collapse.location, ir.InsertionPoint(block):
        wide = ir.Operation.create("arith.extui", results=[i8], operands=[block.arguments[0]])
        ir.Operation.create("linalg.yield", operands=[wide.results[0]])
    return ext


def _unpackings(module: ir.Module) -> list[str]:
    log = []
    # (collected first: the rewrite erases ops a walk would still visit)
    for op in [o for o in walk(module.operation) if o.name == "tensor.collapse_shape"]:
        src_t, out_t = _static(op.operands[0].type), _static(op.results[0].type)
        if src_t is None or out_t is None or str(src_t.element_type) != "i8" or src_t.rank < 2:
            continue
        if src_t.shape[-1] != 2:
            continue
        if _reassociation(op) != [[i] for i in range(src_t.rank - 2)] + [[src_t.rank - 2, src_t.rank - 1]]:
            continue
        found = _unpack_chain(op.operands[0])
        if found is None:
            continue
        src, steps = found
        where = location_of(op)
        if not _unpacks_nibbles(steps):
            log.append(
                f"mmaflow: {where}: bytes split in two halves that are not their nibbles (low first): left as is"
            )
            continue
        ext = _read_as_i4(op, src)
        op.results[0].replace_all_uses_with(ext.results[0])
        op.erase()
        for step in reversed(steps):
            if not list(step.op.results[0].uses):
                step.op.erase()
        log.append(
            f"mmaflow: {where}: int4 weights unpacked by shifts and masks read packed "
            f"({src.type} as {ext.operands[0].type})"
        )
    return log


# ---- the matmul per group ---------------------------------------------------------------------------


def _dequantized(value: ir.Value) -> bool:
    """Whether ``value`` comes, through elementwise generics and reshapes, from an i4 / i8 tensor turned
    into floats (``uitofp`` / ``sitofp`` on the way): a dequantization."""
    todo, seen, converts = [(value, 0)], set(), False
    while todo:
        v, depth = todo.pop()
        op = defining_op(v)
        if op is None or depth > _MAX_CHAIN or op in seen:
            continue
        seen.add(op)
        if op.name in ("tensor.expand_shape", "tensor.collapse_shape", "flow.tensor.bitcast"):
            todo.append((op.operands[0], depth + 1))
        elif op.name == "linalg.generic" and all(it == _PARALLEL for it in _iterators(op)):
            converts |= any(o.name in ("arith.uitofp", "arith.sitofp") for o in _body(op))
            for x in list(op.operands)[:-1]:
                t = _static(x.type)
                if t is not None and isinstance(t.element_type, ir.IntegerType) and element_bits(t.element_type) <= 8:
                    if converts or any(o.name in ("arith.uitofp", "arith.sitofp") for o in _body(op)):
                        return True
                todo.append((x, depth + 1))
    return False


def _per_group(module: ir.Module, max_rows: int) -> list[str]:
    log = []
    for op in [o for o in walk(module.operation) if o.name == "linalg.matmul"]:  # (collected first: erased below)
        if "indexing_maps" not in op.attributes:
            continue
        if [_dims(m) for m in _maps(op)] != [[0, 2], [1, 2], [0, 1]]:
            continue  # (B read N x K: F.linear's weights)
        a, b, init = op.operands
        collapse = defining_op(b)
        if collapse is None or collapse.name != "tensor.collapse_shape":
            continue
        d = collapse.operands[0]
        a_t, d_t = _static(a.type), _static(d.type)
        if a_t is None or d_t is None or a_t.rank != 2 or d_t.rank != 3 or _reassociation(collapse) != [[0], [1, 2]]:
            continue
        if not _dequantized(d):
            continue
        m, (n, groups, size) = a_t.shape[0], d_t.shape
        if m > max_rows:  # (the dequantization fused into the matmul's dispatch, which no kernel of ours takes)
            log.append(
                f"mmaflow: {location_of(op)}: a {m}x{n}x{groups * size} matmul of dequantized weights left as it "
                f"is: M = {m} is past the weight-only kernel's {max_rows} rows (the tiled kernels take it apart)"
            )
            continue
        with op.location, ir.InsertionPoint(op):
            a3 = ir.Operation.create(
                "tensor.expand_shape",
                results=[ir.RankedTensorType.get([m, groups, size], a_t.element_type)],
                operands=[a],
                attributes={
                    "reassociation": collapse.attributes["reassociation"],
                    "static_output_shape": ir.DenseI64ArrayAttr.get([m, groups, size]),
                },
            )
            maps = [
                ir.AffineMap.get(4, 0, [ir.AffineDimExpr.get(i) for i in dims])
                for dims in ([0, 2, 3], [1, 2, 3], [0, 1])
            ]
            block = op.regions[0].blocks[0]
            new, new_block = _generic(
                [a3.results[0], d],
                init,
                maps,
                [_PARALLEL, _PARALLEL, _REDUCTION, _REDUCTION],
                [arg.type for arg in block.arguments],
            )
        mapping = dict(zip(list(block.arguments), list(new_block.arguments)))
        ip = ir.InsertionPoint(new_block)
        for body_op in _body(op):
            clone = body_op.clone(ip)
            for i, v in enumerate(body_op.operands):
                if v in mapping:
                    clone.operands[i] = mapping[v]
            mapping.update(zip(body_op.results, clone.results))
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()
        if not list(collapse.results[0].uses):
            collapse.erase()
        log.append(
            f"mmaflow: {location_of(new)}: a {m}x{n}x{groups * size} matmul of dequantized weights read per "
            f"group ({groups} groups of {size}): IREE fuses the dequantization into its dispatch"
        )
    return log


def fold(module: ir.Module, max_rows: int) -> list[str]:
    """Both rewrites of the module's doc on a module at global-optimization, the matmuls per group only up to
    ``max_rows`` rows (the weight-only kernel's, on the target); the log lines."""
    with module.context:
        return _unpackings(module) + _per_group(module, max_rows)
