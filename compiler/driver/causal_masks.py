"""Causal masks proven through the host program (``mmaflow compile``'s front, at executable-sources).

An attention dispatch whose mask is, on every call, what a causal generator dispatch just wrote
(``core/causal.py``) gets ``mmaflow.causal_mask`` on its attention op (and ``mmaflow.causal_rows``
where the query position restarts: IREE's GQA form): the kernel then skips the masked key tiles
and does not read the mask. After codegen, where mmaflow took every attention reading what a
generator writes, and nothing else reads it, that generator's dispatch is removed from the host
program: the mask is never written at all. Where IREE compiles the attention (select refused it),
IREE's code reads the mask, and its writer stays.

Ranges: a dispatch's access through a binding is each of its subspans there (``host_program.py``:
binding offset + subspan offset, for the subspan's bytes, constants or linear forms over the host's
run-time values); a subspan whose offset or size cannot be read covers the whole binding.

The proof, for each ``stream.cmd.dispatch`` of the attention (every one of them, or none gets the
attribute): the attention op is the dispatch's only one, and its mask a whole-tensor load of a
subspan nothing else in the dispatch uses and no other subspan of the dispatch overlaps. In its
``stream.cmd.execute`` region, walking back in program order from the dispatch, the first command
that writes any byte of the mask's range is a dispatch of a generator writing exactly that range
with the causal pattern for this mask's query and key digits. A copy, a fill or any other command
on the resource ends the proof. Nothing in the region writing it, the resource must be an immutable
constant global's, stored once by an initializer from the one region that writes it there.

The removal, for each dispatch of a generator that proved some mask: walking forward from it,
every command reading a byte of its range before a command overwrites the whole range (a whole
store of a subspan covering it) is a dispatch of a proven attention mmaflow took, reading it as
its mask; and if the range is still live at the region's end, the resource is a transient one the
function allocates and that no other op than this region (and its deallocation) uses.

The hook tool (``mmaflow-codegen`` inside iree-compile) sees one executable at a time, never the
host program: there the mask is read, as any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iree.compiler import ir

from mmaflow.compiler.core.attention import ATTENTION_OPS, query_key_loops
from mmaflow.compiler.core.causal import CAUSAL_MASK, CAUSAL_ROWS, Generator, MaskSite, generator, mask_site
from mmaflow.compiler.core.errors import InputError
from mmaflow.compiler.core.mlir import defining_op, parent_named, segments, user_of, walk
from mmaflow.compiler.driver.host_program import Program, Site, commands, dead_after, execute_of, last_writer


def _generator(func: ir.Operation) -> Generator | None:
    """The causal generator a dispatch function is (``core/causal.py``), or None."""
    return generator(func)[0]


@dataclass
class _Mask:
    attention: ir.Operation  # the attention op
    site: MaskSite
    calls: list = field(default_factory=list)  # [(attention call site, generator call site)]
    refused: str = ""  # why not proven at some call


class Proof:
    """What ``prove`` found: the stamped attention executables, and the generator dispatches that
    ``remove`` may take out once codegen has said which of those attention executables it took."""

    def __init__(self, prog: Program, masks: dict[str, _Mask], log: list[str]):
        self.prog, self.masks, self.log = prog, masks, log

    @property
    def stamped(self) -> dict[str, _Mask]:
        return {e: m for e, m in self.masks.items() if m.calls and not m.refused}

    def remove(self, taken: set[str]) -> list[str]:
        """Erase each generator dispatch whose range only attention executables in ``taken`` (mmaflow's,
        causal, the mask not read) read as their mask; the log lines."""
        readers = {e: m for e, m in self.stamped.items() if e.split("::")[0] in taken}
        log, erased, seen = [], [], set()
        for m in self.stamped.values():
            for _, gen in m.calls:
                if gen.op in seen:
                    continue
                seen.add(gen.op)
                execute = execute_of(gen.op)
                cmds = commands(execute)
                why = _dead(self.prog, execute, cmds[cmds.index(gen.op) + 1 :], gen, readers, self.stamped)
                if why:
                    log.append(f"mmaflow: {gen.name}: kept ({why})")
                else:
                    erased.append(gen.op)
                    log.append(f"mmaflow: {gen.name}: dispatch removed (only mmaflow's causal attention reads it)")
        for op in erased:
            op.erase()
        return log


def prove(module: ir.Module) -> Proof:
    """Stamp every attention op whose mask is proven causal at every call (``Proof.log`` says which);
    ``Proof.remove`` then takes out the writers nothing else needs."""
    prog = Program(module)
    masks: dict[str, _Mask] = {}
    log: list[str] = []
    for export, f in prog.funcs.items():
        ops = [op for op in walk(f) if op.name in ATTENTION_OPS]
        if len(ops) != 1:  # (none, or several: one kernel replaces one attention op)
            continue
        try:
            site = mask_site(ops[0], *query_key_loops(ops[0]))
        except InputError:
            site = None
        if site is not None and site.subspan.offset is not None:
            masks[export] = _Mask(ops[0], site)
    if not masks:
        return Proof(prog, masks, log)
    for cmds, i, site in prog.calls():  # (every call site read now: codegen replaces the functions it reads)
        for export in site.exports:
            m = masks.get(export)
            if m is None or m.refused:
                continue
            writer = _proof(prog, cmds[:i], site, m.site) if len(site.exports) == 1 else None
            if writer is None:
                m.refused = "not proven causal at every call"
            else:
                m.calls.append((site, writer))
    for export, m in masks.items():
        name = export.split("::")[-1]
        if not m.calls and not m.refused:
            continue
        rows = {prog.fact(w.export, _generator).causal_rows(m.site) for _, w in m.calls}
        if not m.refused and len(rows) != 1:
            m.refused = "causal with different periods at different calls"
        if m.refused:
            log.append(f"mmaflow: {name}: its mask is read ({m.refused})")
            continue
        writers = sorted({w.name for _, w in m.calls})
        (period,) = rows
        with m.attention.context:
            m.attention.attributes[CAUSAL_MASK] = ir.StringAttr.get(f"written by {', '.join(writers)}")
            if period != m.site.rows:
                m.attention.attributes[CAUSAL_ROWS] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), period)
        restart = f", query positions restarting every {period} rows" if period != m.site.rows else ""
        log.append(
            f"mmaflow: {name}: its mask is the causal pattern {', '.join(writers)} writes{restart}: the kernel "
            "may skip masked key tiles and not read it"
        )
    return Proof(prog, masks, log)


def _proof(prog: Program, before, site: Site, mask: MaskSite) -> Site | None:
    """The generator dispatch that wrote this call's mask, if the walk back proves one: in this
    region, or (nothing in it writes the mask) in the initializer that wrote the immutable global
    the region reads it from."""
    where = site.range_of(mask.subspan)
    if where is None:
        return None
    resource, start, end = where
    mine = [
        a
        for a in site.accesses
        if a.binding == mask.subspan.binding and (a.start, a.end) == (start, end) and a.reads and not a.writes
    ]
    others = [a for a in site.accesses if a.overlaps(resource, start, end)]
    if len(mine) != 1 or len(others) != 1:  # (another tensor of the dispatch on the mask's bytes)
        return None
    found, writer = _last_writer(prog, before, resource, start, end, mask)
    if found:
        return writer
    init = _initializer_region(resource)
    if init is None:
        return None
    init_execute, value = init
    found, writer = _last_writer(prog, commands(init_execute), value, start, end, mask)
    return writer if found else None


def _last_writer(prog: Program, before, resource, start, end, mask) -> tuple[bool, Site | None]:
    """Walking back over ``before``: whether a command writes a byte of [start, end) of
    ``resource``, and that command if it is a causal generator writing exactly that range."""
    found, other, hit = last_writer(prog, before, resource, start, end)
    if other is None:
        return found, None
    gen = prog.fact(other.export, _generator)
    if gen is None or (hit.start, hit.end) != (start, end):
        return True, None
    if any(a.reads for a in other.accesses) or gen.causal_rows(mask) is None:
        return True, None
    return True, other


def _initializer_region(outer: ir.Value) -> tuple[ir.Operation, ir.Value] | None:
    """Where a resource a region reads from an immutable constant global was written: the one execute
    region of the one initializer storing that global, and the value it captures there. IREE hoists a
    mask that depends on no input into such a global (computed once, at load)."""
    load = defining_op(outer)
    if load is None or load.name != "util.global.load" or "is_immutable" not in load.attributes:
        return None
    if "resource<constant>" not in str(outer.type):
        return None
    name = str(load.attributes["global"])
    module = load
    while module.parent is not None:
        module = module.parent
    stores = [o for o in walk(module) if o.name == "util.global.store" and str(o.attributes["global"]) == name]
    if len(stores) != 1 or parent_named(stores[0], "util.initializer") is None:
        return None
    value = stores[0].operands[0]
    await_op = defining_op(value)
    if await_op is not None and await_op.name == "stream.timepoint.await":
        value = await_op.operands[list(await_op.results).index(value)]
    alloc = defining_op(value)
    if alloc is None or alloc.name != "stream.resource.alloca":
        return None
    users = [user_of(u) for u in value.uses]
    executes = [u for u in users if u.name == "stream.cmd.execute"]
    if len(executes) != 1 or any(u.name not in ("stream.cmd.execute", "stream.timepoint.await") for u in users):
        return None
    (init_execute,) = executes
    if segments(init_execute)[0].count(value) != 1:
        return None
    return init_execute, value


def _dead(prog: Program, execute, after, gen: Site, readers: dict[str, _Mask], stamped) -> str:
    """Why the generator's write must stay ("" if nothing but ``readers``' attention reads it, each as
    its mask; ``stamped``: every proven attention export, taken by mmaflow or not)."""
    writes = [a for a in gen.accesses if a.writes]
    if len(writes) != 1 or writes[0].start is None:
        return "its write is not one known range"
    write = writes[0]

    def reader(site: Site, reads) -> str:
        m = readers.get(site.export)
        own = None if m is None else site.range_of(m.site.subspan)
        if own is None or own != (write.resource, write.start, write.end) or len(reads) != 1:
            return f"{site.name} reads it" + (" (left to IREE)" if m is None and site.export in stamped else "")
        if (reads[0].start, reads[0].end, reads[0].binding) != (write.start, write.end, m.site.subspan.binding):
            return f"{site.name} reads it"
        return ""

    return dead_after(prog, execute, after, write, reader)
