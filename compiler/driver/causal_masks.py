"""Causal masks proven through the host program (``mmaflow compile``'s front, at executable-sources).

An attention dispatch whose mask is, on every call, what a causal generator dispatch just wrote
(``core/causal.py``) gets ``mmaflow.causal_mask`` on its attention op: the kernel then skips the
masked key tiles and does not read the mask. Where nothing else reads what the generator writes,
its dispatch is removed from the host program: the mask is never written at all.

The proof, for each ``stream.cmd.dispatch`` of the attention (every one of them, or none gets the
attribute): in its ``stream.cmd.execute`` region, walking back in program order from the dispatch,
the first command that writes any byte of the mask's range (resource, binding offset + subspan
offset, the mask's bytes) is a dispatch of a generator writing exactly that range with the causal
pattern for this mask's query and key digits. A write whose range cannot be read (a dynamic
shape, an offset from a non-constant push constant, a copy or fill) counts as overlapping, so it
ends the proof. The mask reaching the region from outside it proves nothing.

The removal, for each dispatch of a generator that proved some mask: walking forward from it,
every command reading a byte of its range before a command overwrites the whole range is a proven
attention dispatch, and if the range is still live at the region's end, the resource is a
transient one that no other op than this region (and its deallocation) uses.

The hook tool (``mmaflow-codegen`` inside iree-compile) sees one executable at a time, never the
host program: there the mask is read, as any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iree.compiler import ir

from mmaflow.compiler.core.attention import ATTENTION_OPS, query_key_loops
from mmaflow.compiler.core.causal import CAUSAL_MASK, Generator, MaskSite, generator, mask_site, subspans
from mmaflow.compiler.core.errors import InputError
from mmaflow.compiler.core.mlir import defining_op, str_attr, user_of, walk

READ, WRITE = 1, 2  # stream.cmd.dispatch's resource_accesses bits


@dataclass
class _Access:
    resource: ir.Value
    start: int | None  # None: unknown, the whole resource
    end: int | None
    reads: bool
    writes: bool

    def overlaps(self, resource, start: int, end: int) -> bool:
        if self.resource is not None and self.resource != resource:  # (None: any resource)
            return False
        return self.start is None or (self.start < end and start < self.end)


@dataclass
class _Site:
    op: ir.Operation
    export: str  # "exe::variant::export"
    accesses: list[_Access] = field(default_factory=list)
    exports: tuple[str, ...] = ()  # every entry point it names (one per target variant)

    @property
    def name(self) -> str:
        return self.export.split("::")[-1]


def _const(value: ir.Value) -> int | None:
    op = defining_op(value)
    if op is not None and op.name == "arith.constant" and isinstance(op.attributes["value"], ir.IntegerAttr):
        return ir.IntegerAttr(op.attributes["value"]).value
    return None


def _segments(op: ir.Operation) -> list[list[ir.Value]]:
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands, out, i = list(op.operands), [], 0
    for n in sizes:
        out.append(operands[i : i + n])
        i += n
    return out


def _entry(ref: ir.Attribute) -> str:
    return str(ref).replace("@", "").replace('"', "")


class _Program:
    """The module's dispatch functions by export, and each execute region's commands."""

    def __init__(self, module: ir.Module):
        self.funcs: dict[str, ir.Operation] = {}
        for exe in walk(module.operation):
            if exe.name != "hal.executable":
                continue
            for variant in walk(exe):
                if variant.name != "hal.executable.variant":
                    continue
                for f in walk(variant):
                    if f.name == "func.func":
                        key = f"{str_attr(exe, 'sym_name')}::{str_attr(variant, 'sym_name')}::{str_attr(f, 'sym_name')}"
                        self.funcs[key] = f
        self._subspans: dict[str, dict] = {}

    def subspans_of(self, export: str) -> dict:
        if export not in self._subspans:
            f = self.funcs.get(export)
            self._subspans[export] = {} if f is None else {s.binding: s for s in subspans(f).values()}
        return self._subspans[export]

    def site(self, op: ir.Operation) -> _Site | None:
        """A dispatch's accesses, one per binding (its subspan's byte range where readable)."""
        exports = tuple(_entry(r) for r in ir.ArrayAttr(op.attributes["entry_points"]))
        if len(exports) != 1:  # (several variants: their bindings' offsets may differ)
            return _Site(op, exports[0] if exports else "", [_Access(None, None, None, True, True)], exports)
        export = exports[0]
        _, uniforms, resources, _, offsets, lengths = _segments(op)
        push = [_const(v) for v in uniforms]
        modes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["resource_accesses"])]
        subs = self.subspans_of(export)
        site = _Site(op, export, exports=exports)
        for b, (res, off, length, mode) in enumerate(zip(resources, offsets, lengths, modes)):
            base, n = _const(off), _const(length)
            s = subs.get(b)
            start = end = None
            if s is not None and base is not None and s.offset is not None and s.nbytes is not None:
                sub_off = s.offset.at(push)
                if sub_off is not None:
                    start, end = base + sub_off, base + sub_off + s.nbytes
            elif base is not None and n is not None:
                start, end = base, base + n
            site.accesses.append(_Access(res, start, end, bool(mode & READ), bool(mode & WRITE)))
        return site


def _commands(execute: ir.Operation) -> list[ir.Operation]:
    """An execute region's commands in program order (inside concurrent / serial blocks too)."""
    return [o for o in walk(execute) if o.name.startswith("stream.cmd.") and o.name not in _CONTAINERS]


_CONTAINERS = ("stream.cmd.execute", "stream.cmd.concurrent", "stream.cmd.serial")


def _site(prog: "_Program", cmd: ir.Operation, sites_of: dict) -> "_Site":
    if cmd not in sites_of:
        sites_of[cmd] = prog.site(cmd)
    return sites_of[cmd]


def _touches(op: ir.Operation, resource: ir.Value) -> bool:
    return any(v == resource for v in op.operands)


@dataclass
class _Mask:
    attention: ir.Operation  # the attention op
    site: MaskSite
    writer: str = ""  # the generator's export, once proven


def prove(module: ir.Module) -> list[str]:
    """Stamp every attention op whose mask is proven causal; remove the generator dispatches only
    such attention reads. Returns the log lines."""
    prog = _Program(module)
    masks: dict[str, _Mask] = {}
    log: list[str] = []
    for export, f in prog.funcs.items():
        for op in walk(f):
            if op.name not in ATTENTION_OPS:
                continue
            try:
                site = mask_site(op, *query_key_loops(op))
            except InputError:
                site = None
            if site is not None and site.subspan.offset is not None:
                masks[export] = _Mask(op, site)
    if not masks:
        return log
    generators: dict[str, Generator | None] = {}
    proven: dict[str, list] = {e: [] for e in masks}  # export -> [(attention site, generator site)] or None
    sites_of: dict[ir.Operation, _Site] = {}
    for execute in walk(module.operation):
        if execute.name != "stream.cmd.execute":
            continue
        cmds = _commands(execute)
        for i, cmd in enumerate(cmds):
            if cmd.name != "stream.cmd.dispatch":
                continue
            site = _site(prog, cmd, sites_of)
            for export in site.exports:
                if export not in masks or proven[export] is None:
                    continue
                writer = None
                if len(site.exports) == 1:
                    writer = _proof(prog, execute, cmds[:i], site, masks[export].site, generators, sites_of)
                if writer is None:
                    proven[export] = None
                else:
                    proven[export].append((site, writer))
    erased: set = set()
    for export, found in proven.items():
        if not found:
            if found is None:
                log.append(f"mmaflow: {export.split('::')[-1]}: its mask is read (not proven causal at every call)")
            continue
        writers = sorted({w.export.split("::")[-1] for _, w in found})
        attention = masks[export].attention
        with attention.context:
            attention.attributes[CAUSAL_MASK] = ir.StringAttr.get(f"written by {', '.join(writers)}")
        log.append(
            f"mmaflow: {export.split('::')[-1]}: its mask is the causal pattern {', '.join(writers)} writes: "
            "masked key tiles skipped, the mask not read"
        )
    stamped = {e for e, found in proven.items() if found}
    for execute in walk(module.operation):
        if execute.name != "stream.cmd.execute":
            continue
        cmds = _commands(execute)
        for i, cmd in enumerate(cmds):
            site = sites_of.get(cmd)
            if site is None or cmd in erased or not any(w is site for e in stamped for _, w in proven[e]):
                continue
            why = _dead(execute, cmds[i + 1 :], site, {e: masks[e].site for e in stamped}, sites_of, prog)
            name = site.name
            if why:
                log.append(f"mmaflow: {name}: kept ({why})")
                continue
            erased.add(cmd)
            log.append(f"mmaflow: {name}: dispatch removed (only causal attention reads what it writes)")
    for cmd in erased:
        cmd.erase()
    return log


def _proof(prog, execute, before, site: _Site, mask: MaskSite, generators, sites_of) -> _Site | None:
    """The generator dispatch that wrote this call's mask, if the walk back proves one: in this
    region, or (nothing in it writes the mask) in the initializer that wrote the immutable global
    the region reads it from."""
    acc = site.accesses[mask.subspan.binding] if mask.subspan.binding < len(site.accesses) else None
    if acc is None or acc.start is None:
        return None
    found, writer = _last_writer(prog, before, acc.resource, acc.start, acc.end, mask, generators, sites_of)
    if found:
        return writer
    init = _initializer_region(execute, acc.resource)
    if init is None:
        return None
    init_execute, inner = init
    found, writer = _last_writer(prog, _commands(init_execute), inner, acc.start, acc.end, mask, generators, sites_of)
    return writer if found else None


def _last_writer(prog, before, resource, start, end, mask, generators, sites_of) -> tuple[bool, _Site | None]:
    """Walking back over ``before``: whether a command writes a byte of [start, end) of
    ``resource``, and that command if it is a causal generator writing exactly that range."""
    for cmd in reversed(before):
        if cmd.name != "stream.cmd.dispatch":
            if _touches(cmd, resource):
                return True, None
            continue
        other = _site(prog, cmd, sites_of)
        hits = [a for a in other.accesses if a.writes and a.overlaps(resource, start, end)]
        if not hits:
            continue
        if other.export not in generators:
            f = prog.funcs.get(other.export)
            generators[other.export] = None if f is None else generator(f)[0]
        gen = generators[other.export]
        if gen is None or len(hits) != 1 or hits[0].resource is None or (hits[0].start, hits[0].end) != (start, end):
            return True, None
        if any(a.reads for a in other.accesses) or not gen.is_causal(mask):
            return True, None
        return True, other
    return False, None


def _initializer_region(execute: ir.Operation, resource: ir.Value) -> tuple[ir.Operation, ir.Value] | None:
    """Where a resource the region reads from an immutable global was written: the one execute region of
    the one initializer storing that global, and the resource's block argument there. IREE hoists a mask
    that depends on no input into such a global (computed once, at load)."""
    outer = _outer(execute, resource)
    load = None if outer is None else defining_op(outer)
    if load is None or load.name != "util.global.load" or "is_immutable" not in load.attributes:
        return None
    name = str(load.attributes["global"])
    module = load
    while module.parent is not None:
        module = module.parent
    stores = [o for o in walk(module) if o.name == "util.global.store" and str(o.attributes["global"]) == name]
    if len(stores) != 1 or _enclosing(stores[0], "util.initializer") is None:
        return None
    value = stores[0].operands[0]
    await_op = defining_op(value)
    if await_op is not None and await_op.name == "stream.timepoint.await":
        value = await_op.operands[list(await_op.results).index(value)]
    users = [user_of(u) for u in value.uses]
    executes = [u for u in users if u.name == "stream.cmd.execute"]
    if len(executes) != 1 or any(u.name not in ("stream.cmd.execute", "stream.timepoint.await") for u in users):
        return None
    (init_execute,) = executes
    captured = _segments(init_execute)[0]
    if captured.count(value) != 1:
        return None
    return init_execute, init_execute.regions[0].blocks[0].arguments[captured.index(value)]


def _enclosing(op: ir.Operation, name: str) -> ir.Operation | None:
    p = op.parent
    while p is not None and p.name != name:
        p = p.parent
    return p


def _dead(execute, after, gen: _Site, stamped: dict, sites_of, prog) -> str:
    """Why the generator's write must stay ("" if nothing but proven causal attention reads it, as
    its mask: ``stamped``, each proven export's mask)."""
    (acc,) = [a for a in gen.accesses if a.writes]
    resource, start, end = acc.resource, acc.start, acc.end
    for cmd in after:
        if cmd.name != "stream.cmd.dispatch":
            if _touches(cmd, resource):
                return f"{cmd.name} uses its resource"
            continue
        site = _site(prog, cmd, sites_of)
        reads = [b for b, a in enumerate(site.accesses) if a.reads and a.overlaps(resource, start, end)]
        if reads and (site.export not in stamped or reads != [stamped[site.export].subspan.binding]):
            return f"{site.name} reads it"
        covers = [
            a
            for a in site.accesses
            if a.writes and a.resource == resource and a.start is not None and a.start <= start and end <= a.end
        ]
        if covers and not reads:
            return ""
    outer = _outer(execute, resource)
    if outer is None:
        return "its resource is not one the region captures"
    if "transient" not in str(outer.type):
        return f"its resource is {outer.type}"
    users = {user_of(u).name for u in outer.uses}
    if (
        not users <= {"stream.cmd.execute", "stream.resource.dealloca"}
        or sum(1 for u in outer.uses if user_of(u).name == "stream.cmd.execute") != 1
    ):
        return "its resource is used beyond this region"
    return ""


def _outer(execute: ir.Operation, inner: ir.Value) -> ir.Value | None:
    """The value an execute region's block argument captures."""
    block = execute.regions[0].blocks[0]
    for i, arg in enumerate(block.arguments):
        if arg == inner:
            return _segments(execute)[0][i]
    return None
