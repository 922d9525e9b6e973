"""Dynamic sizes: where a dispatch finds them at run time, and how mmaflow's kernel gets them.

IREE passes a dynamic size as push constants (``hal.interface.constant.load``, 64-bit values as
two i32 halves), tags it with what the program promises (``util.assume.int``: range, ``udiv``
divisibility) and with its place in the dispatch workload (``iree_tensor_ext.dispatch.workload.
ordinal``), from which the host computes the workgroup count.

- `select` traces each dynamic M/N/K/batch to its workload ordinal, push constants and divisor
  (``DynamicDim``).
- `normalize` copies the ops computing them into the prologue function (``kernels/common/prologue.py``) so that
  the transform script, which sees a static stand-in problem, cannot fold them away.
- `distribute` inlines the prologue at the top of the kernel and uses the values for the K
  loop's trip count, the bindings' shapes and every bounds check.
- `hand-back` computes the grid from the workload (``iree_codegen.dispatch_config`` arguments).
"""

from __future__ import annotations

import math

from iree.compiler import ir

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import defining_op, int_assumptions, user_of
from mmaflow.compiler.core.problem import DynamicDim

DIM_ORDER = ("batch", "m", "n", "k")


def _udiv(assume: ir.Operation, index: int) -> int:
    """The divisor ``util.assume.int`` promises for its ``index``-th value (1 if none): the gcd
    over all of its call sites."""
    rows = int_assumptions(assume.attributes["assumptions"])
    if index >= len(rows):
        return 1
    return math.gcd(*(site.get("udiv", 1) for site in rows[index])) if rows[index] else 1


def promised_divisor(value: ir.Value) -> int:
    """The divisor the program promises for a run-time index value (a byte offset or a size): its
    ``util.assume.int`` udiv (the gcd over the call sites), 1 when it has none."""
    assume = defining_op(value)
    if assume is None or assume.name != "util.assume.int":
        return 1
    return _udiv(assume, list(assume.results).index(value))


def _feeds_shift(load: ir.Operation) -> bool:
    """Does the constant reach an arith.shli within two steps (extui -> shli: the high half)?"""
    for use in load.results[0].uses:
        user = user_of(use)
        if user.name == "arith.shli" or any(user_of(u).name == "arith.shli" for r in user.results for u in r.uses):
            return True
    return False


def _push_constants(value: ir.Value) -> tuple:
    """(low, high) push-constant ordinals a 64-bit size is assembled from ((ordinal, -1) for
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
        return (ir.IntegerAttr(loads[0].attributes["ordinal"]).value, -1)
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
        raise UnsupportedError(
            f"the dynamic size of {dim} is not a dispatch workload value ({op.name if op else 'a block argument'})"
        )
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
