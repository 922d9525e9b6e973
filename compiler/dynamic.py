"""Dynamic sizes: where a dispatch finds them at run time, and how mmaflow's kernel gets them.

IREE passes a dynamic size as push constants (``hal.interface.constant.load``, 64-bit values as
two i32 halves), tags it with what the program promises (``util.assume.int``: range, ``udiv``
divisibility) and with its place in the dispatch workload (``iree_tensor_ext.dispatch.workload.
ordinal``), from which the host computes the workgroup count.

- `select` traces each dynamic M/N/K/batch to its workload ordinal, push constants and divisor
  (``DynamicDim``).
- `normalize` copies the ops computing them into a private function ``@<dispatch>_sizes() ->
  (index, ...)`` (tagged ``mmaflow.sizes``) so that the transform script, which sees a static
  stand-in problem, cannot fold them away.
- `distribute` inlines that function at the top of the kernel (``inline_sizes``) and uses the
  values for the K loop's trip count, the bindings' shapes and every bounds check.
- `hand-back` computes the grid from the workload (``iree_codegen.dispatch_config`` arguments).
"""

from __future__ import annotations

import math
import re

from iree.compiler import ir
from iree.compiler.dialects import func as func_d

from .errors import CodegenError, UnsupportedError
from .mlir import clone_into, defining_op, ops_named, str_attr, user_of
from .problem import Contraction, DynamicDim

SIZES_ATTR = "mmaflow.sizes"
DIM_ORDER = ("batch", "m", "n", "k")


def _udiv(assume: ir.Operation, index: int) -> int:
    """The divisor ``util.assume.int`` promises for its ``index``-th value (1 if none): the gcd
    over all of its assumption rows (one per call site)."""
    rows = re.findall(r"\[((?:#util\.int\.assumption<[^>]*>(?:, )?)*)\]", str(assume.attributes["assumptions"]))
    if index >= len(rows):
        return 1
    divs = [int(m.group(1)) if (m := re.search(r"udiv = (\d+)", a)) else 1
            for a in re.findall(r"#util\.int\.assumption<[^>]*>", rows[index])]
    return math.gcd(*divs) if divs else 1


def _feeds_shift(load: ir.Operation) -> bool:
    """Does the constant reach an arith.shli within two steps (extui -> shli: the high half)?"""
    for use in load.results[0].uses:
        user = user_of(use)
        if user.name == "arith.shli" or any(user_of(u).name == "arith.shli" for r in user.results for u in r.uses):
            return True
    return False


def _push_constants(value: ir.Value) -> tuple:
    """(low, high) push-constant ordinals a 64-bit size is assembled from ((ordinal, None) for
    one 32-bit constant), found by walking the value's definition."""
    loads, seen, todo = [], set(), [value]
    while todo:
        v = todo.pop()
        op = defining_op(v)
        if op is None or op in seen:
            continue
        seen.add(op)
        if op.name == "hal.interface.constant.load":
            loads.append(op)
        else:
            todo += list(op.operands)
    if len(loads) == 1:
        return (ir.IntegerAttr(loads[0].attributes["ordinal"]).value, None)
    if len(loads) == 2:
        lo, hi = sorted(loads, key=_feeds_shift)
        if not _feeds_shift(hi) or _feeds_shift(lo):
            raise UnsupportedError("a dynamic size is assembled from push constants in an unexpected way")
        return (ir.IntegerAttr(lo.attributes["ordinal"]).value, ir.IntegerAttr(hi.attributes["ordinal"]).value)
    raise UnsupportedError(f"a dynamic size comes from {len(loads)} push constants; mmaflow expects one or two")


def trace(dim: str, value: ir.Value) -> DynamicDim:
    """Where the dynamic size ``value`` of ``dim`` comes from."""
    op = defining_op(value)
    if op is None or op.name != "iree_tensor_ext.dispatch.workload.ordinal":
        raise UnsupportedError(f"the dynamic size of {dim} is not a dispatch workload value "
                               f"({op.name if op else 'a block argument'})")
    ordinal = ir.IntegerAttr(op.attributes["ordinal"]).value
    src = op.operands[0]
    divisor = 1
    assume = defining_op(src)
    if assume is not None and assume.name == "util.assume.int":
        i = list(assume.results).index(src)
        divisor = _udiv(assume, i)
        src = assume.operands[i]
    return DynamicDim(dim, (ordinal,), (_push_constants(src),), divisor)


def merge(traces: list[DynamicDim]) -> DynamicDim:
    """One dimension seen through several loads (K of A and of B): all its workload ordinals
    and their push constants, every promise (the lcm of the divisors)."""
    pairs = dict((o, c) for t in traces for o, c in zip(t.ordinals, t.constants))
    divisor = math.lcm(*(t.divisor for t in traces))
    return DynamicDim(traces[0].dim, tuple(pairs), tuple(pairs.values()), divisor)


def sizes_function(func: ir.Operation, problem: Contraction, values: dict) -> ir.Operation:
    """``func.func private @<name>_sizes() -> (index, ...)``: the ops of ``func`` computing the
    dynamic sizes ``values`` (dim -> ir.Value), in DIM_ORDER."""
    dims = [d for d in DIM_ORDER if problem.dynamic_dim(d) is not None]
    wanted = [values[d] for d in dims]
    # The backward slice, in the order the ops appear in the function.
    entry = [o.operation for o in func.regions[0].blocks[0].operations]
    needed, todo = set(), list(wanted)
    while todo:
        op = defining_op(todo.pop())
        if op is None or op in needed:
            continue
        if op not in entry:
            raise CodegenError("a dynamic size is computed inside a region")
        needed.add(op)
        todo += list(op.operands)
    slice_ops = [o for o in entry if o in needed]
    index = ir.IndexType.get()
    with func.location, ir.InsertionPoint(func):
        sfunc = func_d.FuncOp(f"{str_attr(func, 'sym_name')}_sizes", ([], [index] * len(dims)), visibility="private")
    sfunc.attributes[SIZES_ATTR] = ir.UnitAttr.get()
    block = sfunc.add_entry_block()
    ip = ir.InsertionPoint(block)
    mapping = clone_into(slice_ops, ip, {})
    with func.location, ip:
        func_d.ReturnOp([mapping[v] for v in wanted])
    return sfunc


def inline_sizes(func: ir.Operation, ip: ir.InsertionPoint, problem: Contraction) -> dict:
    """Clone the body of the module's sizes function at ``ip`` and erase the function; return
    dim -> ir.Value for the problem's dynamic dimensions (empty when it has none)."""
    found = [f for f in ops_named(func.parent, "func.func") if SIZES_ATTR in f.attributes]
    dims = [d for d in DIM_ORDER if problem.dynamic_dim(d) is not None]
    if not found:
        if dims:
            raise CodegenError(f"the problem has dynamic sizes ({', '.join(dims)}) but no sizes function")
        return {}
    (sfunc,) = found
    body = [o.operation for o in sfunc.regions[0].blocks[0].operations]
    ret = body[-1]
    mapping = clone_into(body[:-1], ip, {})
    out = [mapping[v] for v in ret.operands] if ret.name == "func.return" else None
    if out is None or len(out) != len(dims):
        raise CodegenError(f"the sizes function returns {0 if out is None else len(out)} values for "
                           f"{len(dims)} dynamic sizes")
    sfunc.erase()
    return dict(zip(dims, out))
