"""The host program at executable-sources, read as byte ranges: what each ``stream.cmd.dispatch``
reads and writes, where.

A dispatch's access through a binding is each of its subspans there: the binding's offset at the
call site plus the subspan's offset (a constant, or push constants the call site passes: IREE's
``index_castui`` of one i32, or of two joined as ``lo | hi << 32``), for the subspan's bytes (a
static shape, or one dynamic dim passed the same way). A subspan whose offset or size cannot be
read covers the whole binding.

Values are ``Sym``: linear forms over the host's index values (``const + sum(coef * leaf)``), so a
range at a run-time offset (a KV cache's length) is as exact as a constant one: two dispatches
reading ``%15 = %9 + 8192`` read the same bytes, and ``[8192, 8192 + 1024 * n)`` ends where
``[8192 + 1024 * n, ...)`` starts. A leaf is a value the host does not compute by ``arith``
addition and scaling (a ``hal.buffer_view.dim``, a product of two run-time values, ...); only a
``hal.buffer_view.dim`` (or a product of such) is known not to be negative, which is what proving
two ranges apart takes (``Sym.nonneg``).

``causal_masks.py`` and ``gqa_broadcasts.py`` prove facts about the program through these ranges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from iree.compiler import ir

from mmaflow.compiler.core.causal import Offset, Subspan, subspans
from mmaflow.compiler.core.mlir import constant_int, defining_op, parent_named, segments, str_attr, user_of, walk

READ, WRITE = 1, 2  # stream.cmd.dispatch's resource_accesses bits
_WORD = 0xFFFFFFFF


@dataclass(frozen=True)
class Sym:
    """``const + sum(coef * leaf)`` over host values (``terms``: (leaf, coef) pairs, no zero coef)."""

    const: int = 0
    terms: frozenset = frozenset()

    @staticmethod
    def leaf(value: ir.Value) -> "Sym":
        return Sym(0, frozenset({(value, 1)}))

    def _combine(self, other: "Sym", sign: int) -> "Sym":
        coefs = dict(self.terms)
        for leaf, c in other.terms:
            coefs[leaf] = coefs.get(leaf, 0) + sign * c
        return Sym(self.const + sign * other.const, frozenset((k, c) for k, c in coefs.items() if c))

    def __add__(self, other: "Sym | int") -> "Sym":
        return self._combine(other if isinstance(other, Sym) else Sym(other), 1)

    def __sub__(self, other: "Sym | int") -> "Sym":
        return self._combine(other if isinstance(other, Sym) else Sym(other), -1)

    def __mul__(self, k: int) -> "Sym":
        return Sym(self.const * k, frozenset((leaf, c * k) for leaf, c in self.terms if c * k))

    @property
    def constant(self) -> int | None:
        return None if self.terms else self.const

    def nonneg(self) -> bool:
        """Provably >= 0: a non-negative constant plus non-negative multiples of non-negative leaves."""
        return self.const >= 0 and all(c > 0 and _nonneg_leaf(leaf) for leaf, c in self.terms)

    def divisible(self, d: int) -> bool:
        """Provably a multiple of ``d``: every coefficient and the constant are."""
        return self.const % d == 0 and all(c % d == 0 for _, c in self.terms)

    def __str__(self) -> str:
        parts = [f"{c}*{leaf.get_name()}" for leaf, c in self.terms] + ([str(self.const)] if self.const else [])
        return " + ".join(parts) or "0"


def _nonneg_leaf(value: ir.Value) -> bool:
    op = defining_op(value)
    if op is None:
        return False
    if op.name == "hal.buffer_view.dim":
        return True
    if op.name == "arith.muli":
        return all(s is not None and s.nonneg() for s in (host_value(v) for v in op.operands))
    return False


def host_value(value: ir.Value, depth: int = 0) -> Sym:
    """An index (or i64) host value as a linear form (a value the host does not add or scale: a leaf)."""
    if depth > 32:
        return Sym.leaf(value)
    op = defining_op(value)
    c = constant_int(value)
    if c is not None:
        return Sym(c)
    if op is None:
        return Sym.leaf(value)
    if op.name in ("arith.addi", "arith.subi"):
        a, b = (host_value(v, depth + 1) for v in op.operands)
        if a is None or b is None:
            return Sym.leaf(value)
        return a + b if op.name == "arith.addi" else a - b
    if op.name == "arith.muli":
        a, b = (host_value(v, depth + 1) for v in op.operands)
        if a is not None and b is not None:
            if a.constant is not None:
                return b * a.constant
            if b.constant is not None:
                return a * b.constant
        return Sym.leaf(value)
    if op.name == "arith.index_castui" and _width(value.type) == 64 and _width(op.operands[0].type) == 64:
        return host_value(op.operands[0], depth + 1)  # (index <-> i64: the same value)
    return Sym.leaf(value)


def _width(t: ir.Type) -> int | None:
    if isinstance(t, ir.IndexType):
        return 64
    return ir.IntegerType(t).width if isinstance(t, ir.IntegerType) else None


def _cast_of(value: ir.Value, names: tuple[str, ...]) -> ir.Value | None:
    op = defining_op(value)
    return op.operands[0] if op is not None and op.name in names else None


def _pair_source(lo: ir.Value, hi: ir.Value) -> ir.Value | None:
    """The 64-bit host value X a call site passes as two i32 push constants, IREE's way:
    ``lo = index_castui X : index to i32``, ``hi = trunci (shrui (index_castui X : index to i64), 32)``."""
    x_lo = _cast_of(lo, ("arith.index_castui",))
    shr = defining_op(_cast_of(hi, ("arith.trunci",))) if _cast_of(hi, ("arith.trunci",)) is not None else None
    if x_lo is None or shr is None or shr.name != "arith.shrui" or constant_int(shr.operands[1]) != 32:
        return None
    x_hi = _cast_of(shr.operands[0], ("arith.index_castui",))
    return x_lo if x_hi is not None and x_lo == x_hi else None


def push_value(uniforms: list[ir.Value], off: Offset) -> Sym | None:
    """What a dispatch function reads as ``off`` at a call site passing ``uniforms``."""
    if off.ordinal is None:
        return None if off.value is None else Sym(off.value)
    if max(off.ordinals) >= len(uniforms):
        return None
    lo = uniforms[off.ordinal]
    if off.high is None:  # one i32, read unsigned: known as a constant only (a run-time value may wrap)
        c = constant_int(lo)
        if c is None or (c < 0 and not off.unsigned):
            return None
        return Sym(c & _WORD)
    hi = uniforms[off.high]
    clo, chi = constant_int(lo), constant_int(hi)
    if clo is not None and chi is not None:
        return Sym((clo & _WORD) | (chi & _WORD) << 32)
    x = _pair_source(lo, hi)
    return None if x is None else host_value(x)


@dataclass
class Access:
    resource: ir.Value | None  # None: any resource (a dispatch this module cannot read)
    start: Sym | None  # None: unknown, the whole resource
    end: Sym | None
    reads: bool
    writes: bool
    binding: int = -1
    whole: bool = False  # a write storing every byte of [start, end)

    def overlaps(self, resource, start: Sym | None, end: Sym | None) -> bool:
        """Whether it may touch a byte of [start, end) of ``resource`` (True unless proven apart)."""
        if self.resource is not None and self.resource != resource:
            return False
        if self.start is None or start is None:
            return True
        return not (before(self.end, start) or before(end, self.start))


def before(a: Sym, b: Sym) -> bool:
    """Provably a <= b."""
    return (b - a).nonneg()


@dataclass
class Site:
    op: ir.Operation
    export: str  # "exe::variant::export"
    accesses: list[Access] = field(default_factory=list)
    exports: tuple[str, ...] = ()  # every entry point it names (one per target variant)
    bases: list = field(default_factory=list)  # per binding: (resource, byte offset Sym or None, length Sym or None)
    uniforms: list = field(default_factory=list)  # the push constants' host values

    @property
    def name(self) -> str:
        return self.export.split("::")[-1]

    def value(self, off: Offset | None) -> Sym | None:
        return None if off is None else push_value(self.uniforms, off)

    def range_of(self, sub: Subspan) -> tuple[ir.Value, Sym, Sym] | None:
        """Where a subspan of this dispatch's function lies at this call: (resource, start, end)."""
        if sub.binding >= len(self.bases):
            return None
        resource, base, _ = self.bases[sub.binding]
        off, size = self.value(sub.offset), self.nbytes(sub)
        if base is None or off is None or size is None:
            return None
        return resource, base + off, base + off + size

    def nbytes(self, sub: Subspan) -> Sym | None:
        """A subspan's bytes at this call: its static size, or its one dynamic dim's value times the rest."""
        if sub.nbytes is not None:
            return Sym(sub.nbytes)
        if sub.shape.count(None) != 1 or len(sub.dims) != 1 or sub.dims[0] is None:
            return None
        n, static = self.value(sub.dims[0]), math.prod(s for s in sub.shape if s is not None)
        if sub.bits is None or n is None or static * sub.bits % 8:
            return None
        return n * (static * sub.bits // 8)


def entry(ref: ir.Attribute) -> str:
    """An entry point reference as "exe::variant::export"."""
    return str(ref).replace("@", "").replace('"', "")


class Program:
    """The module's dispatch functions by export, and what each call site accesses."""

    def __init__(self, module: ir.Module):
        self.module = module
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
        self._subspans: dict[str, list[Subspan] | None] = {}
        self._facts: dict = {}
        self.sites: dict[ir.Operation, Site] = {}

    def fact(self, export: str, read):
        """``read(function)`` of the export's dispatch function, computed once (None: no such function)."""
        if (export, read) not in self._facts:
            f = self.funcs.get(export)
            self._facts[export, read] = None if f is None else read(f)
        return self._facts[export, read]

    def subspans_of(self, export: str) -> list[Subspan] | None:
        if export not in self._subspans:
            f = self.funcs.get(export)
            self._subspans[export] = None if f is None else list(subspans(f).values())
        return self._subspans[export]

    def calls(self):
        """Every dispatch command of the module: (its region's commands in order, its index there, its site),
        each site read as the walk reaches it."""
        for execute in walk(self.module.operation):
            if execute.name != "stream.cmd.execute":
                continue
            cmds = commands(execute)
            for i, cmd in enumerate(cmds):
                if cmd.name == "stream.cmd.dispatch":
                    yield cmds, i, self.site(cmd)

    def site(self, op: ir.Operation) -> Site:
        if op not in self.sites:
            self.sites[op] = self._site(op)
        return self.sites[op]

    def forget(self, op: ir.Operation, export: str | None = None) -> None:
        """A call site changed (its push constants, or its function ``export``'s subspans): read them again
        when asked."""
        self.sites.pop(op, None)
        if export is not None:
            self._subspans.pop(export, None)
            self._facts = {key: fact for key, fact in self._facts.items() if key[0] != export}

    def _site(self, op: ir.Operation) -> Site:
        """A dispatch's accesses: per binding, one per subspan of its function there."""
        exports = tuple(entry(r) for r in ir.ArrayAttr(op.attributes["entry_points"]))
        if len(exports) != 1:  # (several variants: their bindings' offsets may differ)
            return Site(op, exports[0] if exports else "", [Access(None, None, None, True, True)], exports)
        export = exports[0]
        _, uniforms, resources, _, offsets, lengths = segments(op)
        resources = [captured(op, r) for r in resources]  # (one resource captured twice is one resource)
        modes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["resource_accesses"])]
        subs = self.subspans_of(export)
        site = Site(op, export, exports=exports, uniforms=list(uniforms))
        for b, (res, off, length, mode) in enumerate(zip(resources, offsets, lengths, modes)):
            base, n = host_value(off), host_value(length)
            site.bases.append((res, base, n))
            whole_binding = (base, None if base is None or n is None else base + n)
            mine = [s for s in (subs or []) if s.binding == b]
            if subs is None or not mine:  # (nothing read of it: the whole binding, as the host says)
                mine = [None]
            for s in mine:
                start, end = whole_binding
                r = None if s is None else site.range_of(s)
                if r is not None:
                    start, end = r[1], r[2]
                reads = bool(mode & READ) and (s is None or s.reads)
                writes = bool(mode & WRITE) and (s is None or s.writes)
                whole = writes and r is not None and s.stored_whole
                site.accesses.append(Access(res, start if end is not None else None, end, reads, writes, b, whole))
        return site


_CONTAINERS = ("stream.cmd.execute", "stream.cmd.concurrent", "stream.cmd.serial")


def commands(execute: ir.Operation) -> list[ir.Operation]:
    """An execute region's commands in program order (inside concurrent / serial blocks too)."""
    return [o for o in walk(execute) if o.name.startswith("stream.cmd.") and o.name not in _CONTAINERS]


def execute_of(op: ir.Operation) -> ir.Operation:
    execute = op.parent
    while execute.name != "stream.cmd.execute":
        execute = execute.parent
    return execute


def touches(op: ir.Operation, resource: ir.Value) -> bool:
    return any(captured(op, v) == resource for v in op.operands)


def captured(op: ir.Operation, value: ir.Value) -> ir.Value:
    """What an execute region's block argument stands for: the value it captures (``value`` itself
    when it is not one), so that accesses compare resources, not their names in the region."""
    execute = parent_named(op, "stream.cmd.execute")
    if execute is None:
        return value
    block = execute.regions[0].blocks[0]
    for i, arg in enumerate(block.arguments):
        if arg == value:
            return segments(execute)[0][i]
    return value


def last_writer(prog: Program, before_cmds, resource, start: Sym, end: Sym):
    """Walking back over ``before_cmds``: (True, site, access) for the first dispatch that writes a byte of
    [start, end) of ``resource`` through exactly one access; (True, None, None) where another command or
    a dispatch that cannot be read does; (False, None, None) where nothing does."""
    for cmd in reversed(before_cmds):
        if cmd.name != "stream.cmd.dispatch":
            if touches(cmd, resource):
                return True, None, None
            continue
        other = prog.site(cmd)
        hits = [a for a in other.accesses if a.writes and a.overlaps(resource, start, end)]
        if not hits:
            continue
        if len(hits) != 1 or hits[0].resource is None:
            return True, None, None
        return True, other, hits[0]
    return False, None, None


def written_between(prog: Program, cmds, resource, start: Sym, end: Sym) -> str:
    """The first of ``cmds`` that may write a byte of [start, end) of ``resource`` ("" if none)."""
    for cmd in cmds:
        if cmd.name != "stream.cmd.dispatch":
            if touches(cmd, resource):
                return cmd.name
            continue
        site = prog.site(cmd)
        if any(a.writes and a.overlaps(resource, start, end) for a in site.accesses):
            return site.name
    return ""


def dead_after(prog: Program, execute, after, write: Access, reader) -> str:
    """Why a write must stay ("" if no command after it reads its bytes, before a whole store overwrites them,
    other than those ``reader(site, reads)`` accepts, returning "", and the region's end leaves them to a
    transient resource the function allocates and nothing else uses)."""
    host = execute.parent
    while host is not None and host.name not in ("util.func", "func.func", "util.initializer"):
        if host.name.startswith(("scf.", "cf.")):  # (a loop runs the region again: earlier commands read it too)
            return f"its region runs under {host.name}"
        host = host.parent
    if host is None or len(host.regions[0].blocks) != 1:
        return "its region is not in straight-line host code"
    if write.start is None:
        return "its write is not one known range"
    resource = write.resource
    live = [(write.start, write.end)]  # the bytes of the range no whole store has overwritten since
    for cmd in after:
        if cmd.name != "stream.cmd.dispatch":
            if touches(cmd, resource):
                return f"{cmd.name} uses its resource"
            continue
        site = prog.site(cmd)
        reads = [a for a in site.accesses if a.reads and any(a.overlaps(resource, s, e) for s, e in live)]
        if reads:
            why = reader(site, reads)
            if why:
                return why
            continue
        for a in site.accesses:  # whole stores over part of it: those bytes hold other data from here on
            if a.whole and a.resource == resource:
                live = [piece for s, e in live for piece in _cut(s, e, a.start, a.end)]
        if not live:
            return ""  # overwritten whole: what follows reads other data
    alloc = defining_op(resource)
    if alloc is None or alloc.name != "stream.resource.alloca" or "transient" not in str(resource.type):
        return f"its resource is {resource.type}, not a transient one the function allocates"
    users = [user_of(u).name for u in resource.uses]
    if set(users) - {"stream.cmd.execute", "stream.resource.dealloca"} or users.count("stream.cmd.execute") != 1:
        return "its resource is used beyond this region"
    return ""


def _cut(s: Sym, e: Sym, a: Sym, b: Sym) -> list[tuple[Sym, Sym]]:
    """What of [s, e) is left once [a, b) is overwritten: exact for constants; for run-time bounds, the
    piece goes only where [a, b) provably covers it."""
    if all(x.constant is not None for x in (s, e, a, b)):
        cs, ce, ca, cb = (x.constant for x in (s, e, a, b))
        pieces = ((cs, min(ce, ca)), (max(cs, cb), ce))
        return [(Sym(x), Sym(y)) for x, y in pieces if x < y]
    return [] if before(a, s) and before(e, b) else [(s, e)]
