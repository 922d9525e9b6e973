"""Small helpers over IREE's MLIR Python bindings (``iree.compiler.ir``), used by every stage.

Parsing turns MLIR diagnostics into ``InputError`` with the first error's location, so that bad
input never surfaces as a traceback from inside the bindings.
"""

from __future__ import annotations

from typing import Iterator

from iree.compiler import ir, passmanager

from mmaflow.compiler.core.errors import CodegenError, InputError


def new_context() -> ir.Context:
    """A context for one executable. Single-threaded: the IR of one dispatch is too small for
    MLIR's thread pool to pay, and the codegen server forks workers, which must not inherit a
    pool whose threads are gone."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = False
    ctx.enable_multithreading(False)
    return ctx


def parse_module(text: str, ctx: ir.Context, *, source: str = "<input>") -> ir.Module:
    """Parse MLIR text, or raise InputError naming the file, line and problem."""
    try:
        with ctx:
            return ir.Module.parse(text)
    except ir.MLIRError as e:
        diags = getattr(e, "error_diagnostics", None) or []
        if diags:
            d = diags[0]
            at = file_location(d.location)
            where = f"{source}:{at.start_line}:{at.start_col}" if at is not None else source
            raise InputError(f"malformed MLIR: {d.message}", location=where) from None
        raise InputError(f"malformed MLIR: {e}", location=source) from None


def walk(op) -> Iterator[ir.Operation]:
    """Pre-order walk over ``op`` and everything nested in it (Operation objects), collected by
    MLIR's own walker first (so the caller may change the IR while iterating)."""
    found: list[ir.Operation] = []

    def visit(o):
        found.append(o)
        return ir.WalkResult.ADVANCE

    op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return iter(found)


def ops_named(root, *names: str) -> list[ir.Operation]:
    return [o for o in walk(root) if o.name in names]


def parent_named(op: ir.Operation, name: str) -> ir.Operation | None:
    p = op.parent
    while p is not None:
        if p.name == name:
            return p
        p = p.parent
    return None


def typed_location(loc: ir.Location):
    """``loc`` as its own kind (FileLineColLoc, NameLoc, ...): diagnostics hand out plain ones."""
    for kind in (ir.FileLineColLoc, ir.NameLoc, ir.FusedLoc, ir.CallSiteLoc):
        if isinstance(loc, kind):
            return loc
    for kind in (ir.FileLineColLoc, ir.NameLoc, ir.FusedLoc, ir.CallSiteLoc):
        try:
            return kind(loc)
        except ValueError:
            continue
    return None


def file_location(loc: ir.Location):
    """The first file:line:col inside a location (through names, fusions, call sites), or None."""
    loc = typed_location(loc)
    if isinstance(loc, ir.FileLineColLoc):
        return loc
    if isinstance(loc, ir.NameLoc):
        inner = [loc.child_loc]
    elif isinstance(loc, ir.FusedLoc):
        inner = list(loc.locations)
    elif isinstance(loc, ir.CallSiteLoc):
        inner = [loc.callee]
    else:
        inner = []
    for sub in inner:
        found = file_location(sub)
        if found is not None:
            return found
    return None


def location_of(op: ir.Operation) -> str:
    """Human-readable 'file:line:col' of an op, or its name when it has no file location."""
    at = file_location(op.location)
    return f"{at.filename}:{at.start_line}:{at.start_col}" if at is not None else op.name


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


def unique_ops(ops) -> list[ir.Operation]:
    """``ops`` without repeats (two Python objects may wrap one op: compared with ==)."""
    out: list = []
    for op in ops:
        if not any(op == seen for seen in out):
            out.append(op)
    return out


def op_attributes(op: ir.Operation) -> dict:
    """An op's attributes (properties included) as name -> attribute."""
    return {name: op.attributes[name] for name in op.attributes}


def constant_int(value: ir.Value) -> int | None:
    """The integer a value holds when an ``arith.constant`` defines it, else None."""
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.IntegerAttr):
        return None
    return ir.IntegerAttr(op.attributes["value"]).value


def segments(op: ir.Operation) -> list[list[ir.Value]]:
    """An op's operands split by its ``operandSegmentSizes``."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands, out, pos = list(op.operands), [], 0
    for n in sizes:
        out.append(operands[pos : pos + n])
        pos += n
    return out


# ---- hal.interface.binding.subspan ------------------------------------------------------------
def subspan_binding(sub: ir.Operation) -> int:
    return ir.IntegerAttr(sub.attributes["binding"]).value


def subspan_offset(sub: ir.Operation) -> ir.Value | None:
    """The subspan's byte-offset operand (None when it has none: offset 0)."""
    offset, _ = segments(sub)
    return offset[0] if offset else None


def subspan_dims(sub: ir.Operation) -> list[ir.Value]:
    """The subspan's dynamic-dimension operands."""
    return segments(sub)[1]


def subspan_constant_offset(sub: ir.Operation) -> int | None:
    """The byte offset when it is a constant (0 when absent), None when known only at run time."""
    off = subspan_offset(sub)
    return 0 if off is None else constant_int(off)


# ---- !iree_tensor_ext.dispatch.tensor ---------------------------------------------------------
# The bindings have no Python class for this type: it is built from a well-formed snippet and
# compared, never taken apart as text.
ACCESS_KINDS = ("readonly", "writeonly", "readwrite")


def dispatch_tensor_type(access: str, tensor: ir.Type) -> ir.Type:
    return ir.Type.parse(f"!iree_tensor_ext.dispatch.tensor<{access}:{tensor}>", tensor.context)


def dispatch_tensor_access(dt: ir.Type, tensor: ir.Type) -> str | None:
    """The access kind that makes ``dt`` the dispatch tensor of ``tensor`` (None: it is not)."""
    for access in ACCESS_KINDS:
        if dispatch_tensor_type(access, tensor) == dt:
            return access
    return None


# ---- attributes the bindings expose no accessor for --------------------------------------------
def executable_target(target_attr: ir.Attribute) -> tuple[str | None, str | None]:
    """(backend, GPU arch) of a ``#hal.executable.target<"backend", "format", {...}>``: the arch
    through ``iree_gpu.TargetInfo``, None for a target without GPU target info (a CPU variant, or
    IREE's description of sm_90a; IREE's accessor crashes on those, so the info's presence is
    checked first). The attribute has no Python class: the backend is its first parameter."""
    from iree.compiler.dialects import iree_gpu

    text = str(target_attr)
    head = '#hal.executable.target<"'
    backend = text[len(head) : text.index('"', len(head))] if text.startswith(head) else None
    if "iree_codegen.target_info" not in text:
        return backend, None
    return backend, iree_gpu.TargetInfo.get_gpu_target_info(target_attr).arch


def int_assumptions(attr: ir.Attribute) -> list[list[dict]]:
    """``util.assume.int``'s ``assumptions``: per operand, per call site, the dict of
    umin/umax/udiv it promises. ``#util.int.assumption`` has no Python class; each one is read
    from its own printed form (``<umin = 0, umax = 8, udiv = 4>``)."""
    out = []
    for row in ir.ArrayAttr(attr):
        sites = []
        for a in ir.ArrayAttr(row):
            text = str(a)
            body = text[text.index("<") + 1 : text.rindex(">")]
            fields = {}
            for part in filter(None, (p.strip() for p in body.split(","))):
                key, _, value = part.partition("=")
                fields[key.strip()] = int(value.strip())
            sites.append(fields)
        out.append(sites)
    return out


def str_attr(op: ir.Operation, name: str) -> str | None:
    if name not in op.attributes:
        return None
    return ir.StringAttr(op.attributes[name]).value


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
