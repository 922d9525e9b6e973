"""Small helpers over IREE's MLIR Python bindings (``iree.compiler.ir``), used by every stage.

Parsing turns MLIR diagnostics into ``InputError`` with the first error's location, so that bad
input never surfaces as a traceback from inside the bindings.
"""

from __future__ import annotations

import re
from typing import Iterator

from iree.compiler import ir, passmanager

from .errors import CodegenError, InputError


def new_context() -> ir.Context:
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = False
    return ctx


_DIAG_RE = re.compile(r"error: (?P<loc>\"[^\"]*\":\d+:\d+|[^:]+:\d+:\d+)?:?\s*(?P<msg>.*)")


def parse_module(text: str, ctx: ir.Context, *, source: str = "<input>") -> ir.Module:
    """Parse MLIR text, or raise InputError naming the file, line and problem."""
    try:
        with ctx:
            return ir.Module.parse(text)
    except ir.MLIRError as e:
        diags = getattr(e, "error_diagnostics", None) or []
        if diags:
            d = diags[0]
            loc = str(d.location)
            m = re.match(r'loc\("[^"]*":(\d+):(\d+)\)', loc)
            where = f"{source}:{m.group(1)}:{m.group(2)}" if m else source
            raise InputError(f"malformed MLIR: {d.message}", location=where) from None
        raise InputError(f"malformed MLIR: {e}", location=source) from None


def walk(op) -> Iterator[ir.Operation]:
    """Pre-order walk over ``op`` and everything nested in it (Operation objects)."""
    op = op.operation
    yield op
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield from walk(child)


def ops_named(root, *names: str) -> list[ir.Operation]:
    return [o for o in walk(root) if o.name in names]


def children(block) -> list[ir.Operation]:
    return [o.operation for o in block.operations]


def parent_named(op: ir.Operation, name: str) -> ir.Operation | None:
    p = op.parent
    while p is not None:
        if p.name == name:
            return p
        p = p.parent
    return None


def location_of(op: ir.Operation) -> str:
    """Human-readable 'file:line:col' of an op, or its name when it has no file location."""
    text = str(op.location)
    m = re.search(r'"([^"]+)":(\d+):(\d+)', text)
    return f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m else op.name


def print_op(op, *, debug_info: bool = False) -> str:
    return op.operation.get_asm(enable_debug_info=debug_info, assume_verified=False)


def run_passes(op, pipeline: str, ctx: ir.Context, *, stage: str) -> None:
    """Run a textual pass pipeline on ``op`` (e.g. "builtin.module(func.func(canonicalize,cse))")."""
    try:
        with ctx:
            pm = passmanager.PassManager.parse(pipeline)
            pm.run(op.operation)
    except ir.MLIRError as e:
        raise CodegenError(f"pass pipeline '{pipeline}' failed: {e}", stage=stage) from None


def str_attr(op: ir.Operation, name: str) -> str | None:
    if name not in op.attributes:
        return None
    return ir.StringAttr(op.attributes[name]).value


def int_list(attr) -> list[int]:
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(attr)]


def clone_into(ops, ip: ir.InsertionPoint, mapping: dict) -> dict:
    """Clone ``ops`` (in order) at ``ip``, their operands remapped through ``mapping`` (values
    not in it are used as they are); ``mapping`` gains each old result -> its clone's."""
    for op in ops:
        new = op.clone(ip)
        for i, v in enumerate(op.operands):
            if v in mapping:
                new.operands[i] = mapping[v]
        for old, res in zip(op.results, new.results):
            mapping[old] = res
    return mapping


def user_of(use) -> ir.Operation:
    """The operation that owns an OpOperand (``for use in value.uses``)."""
    owner = use.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The operation defining ``value``, or None for a block argument."""
    owner = value.owner
    if isinstance(owner, ir.OpView):
        return owner.operation
    if isinstance(owner, ir.Operation):
        return owner
    return None
