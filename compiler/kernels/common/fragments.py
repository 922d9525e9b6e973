"""LDS -> register fragment loads and per-lane index arithmetic (used by `distribute`).

A fragment is one instruction's operand for this lane, read from an LDS tile stored
K-innermost (``[non-K][K + pad]``). Two ways, chosen from the layout alone:

- contiguous runs: ``Layout.runs`` along K; one ``vector.load`` per run (a run of 8 f16 is a
  ds_load_b128 / ld.shared.v4), assembled into the op's vector;
- ``nvgpu.ldmatrix`` (NVIDIA, wave32): when every 32-bit register r of the fragment holds, in
  lane l, the elements ``(R_r + l/4, C_r + e*(l%4) + j)`` of the tile (e = elements per register),
  i.e. row l/4 of an 8x8 (16-bit) block, which is exactly what ldmatrix delivers. Lane l then
  supplies the address of row ``l%8`` of block ``l/8``. The check runs on the layout model, so
  mma.sync A and B fragments qualify and nothing else is assumed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.mlir import defining_op
from mmaflow.compiler.kernels.common.emit import Emitter, vector_type
from mmaflow.compiler.target.layout import COL, ROW, Layout, Run


def _storage(rc: tuple[int, int], k_axis: str) -> tuple[int, int]:
    """(non-K, K) storage coordinates of an operand element (row, col)."""
    return rc if k_axis == COL else (rc[1], rc[0])


def ldmatrix_blocks(layout: Layout, k_axis: str, bits: int) -> list[tuple[int, int]] | None:
    """Per 32-bit register of one fragment, the (non-K, K) origin of its ldmatrix block, or None."""
    per = 32 // bits
    if layout.wave_size != 32 or layout.elements % per:
        return None
    regs = layout.elements // per
    if regs not in (1, 2, 4):
        return None
    blocks = []
    for r in range(regs):
        r0, c0 = _storage(layout.coords(0, per * r), k_axis)
        for lane in range(32):
            for j in range(per):
                if _storage(layout.coords(lane, per * r + j), k_axis) != (r0 + lane // 4, c0 + per * (lane % 4) + j):
                    return None
        blocks.append((r0, c0))
    return blocks


class LaneIndex:
    """Lane-dependent parts of coordinates, built once at the top of the function."""

    def __init__(self, top: Emitter, lane: ir.Value, wave_size: int):
        self.top, self.lane, self.wave = top, lane, wave_size
        self._cache: dict = {}

    def part(self, layout: Layout, axis: str):
        """sum over lane dims of ``axis``: ((lane // divisor) % size) * stride."""
        key = ("part", id(layout), axis)
        if key not in self._cache:
            terms = []
            for _, div, size, ax, stride in layout.lane_terms():
                if ax != axis:
                    continue
                t = self.top.div(self.lane, div)
                if div * size < self.wave:
                    t = self.top.rem(t, size)
                terms.append(self.top.mul(t, stride))
            self._cache[key] = self.top.add(*terms) if terms else 0
        return self._cache[key]

    def table(self, values: list[int], block: ir.Value, name: str):
        """values[block] for a per-lane block index (a select chain; values are constants)."""
        key = ("table", tuple(values), name)
        if key not in self._cache:
            self._cache[key] = self.top.table(values, block)
        return self._cache[key]


@dataclass(frozen=True)
class LdsRead:
    """One LDS access of a fragment load: ``length`` elements along K from tile offset
    (``nonk``, ``k``) plus the lane's part, split in registers into ``parts``: (position of the
    instruction in the load group, the layout run it fills)."""

    nonk: int
    k: int
    length: int
    parts: tuple[tuple[int, Run], ...]


@dataclass(frozen=True)
class FragmentPlan:
    """How one operand's fragments come out of its K-innermost LDS tile: numbers only, no IR."""

    layout: Layout
    k_axis: str  # the layout axis that is K (A: col, B: row)
    bits: int
    op_shape: tuple[int, ...]  # the instruction's operand vector shape
    blocks: tuple[tuple[int, int], ...] | None  # ldmatrix: per 32-bit register, its 8x8 block's (non-K, K) origin
    k_outer: bool = False  # the tile is stored [K][non-K]: ldmatrix .trans delivers the same registers

    @staticmethod
    def plan(
        layout: Layout,
        k_axis: str,
        bits: int,
        op_shape: tuple[int, ...],
        *,
        allow_ldmatrix: bool,
        k_outer: bool = False,
    ) -> "FragmentPlan":
        blocks = ldmatrix_blocks(layout, k_axis, bits) if allow_ldmatrix else None
        if k_outer and (blocks is None or bits != 16):
            raise ValueError(
                f"operand {layout.operand}: a K-outer LDS tile needs fragments that ldmatrix .trans "
                "delivers (16-bit elements in ldmatrix blocks)"
            )
        return FragmentPlan(
            layout, k_axis, bits, tuple(op_shape), tuple(blocks) if blocks is not None else None, k_outer
        )

    @property
    def kind(self) -> str:
        return ("ldmatrix.trans" if self.k_outer else "ldmatrix") if self.blocks is not None else "runs"

    @property
    def nonk_axis(self) -> str:
        return ROW if self.k_axis == COL else COL

    def offset(self, batch: tuple[int, int]) -> dict:
        """Lane-independent (row, col) origin of instruction ``batch`` in the wave tile."""
        r0, c0 = self.layout.coords(0, 0)
        r, c = self.layout.coords(0, 0, batch)
        return {ROW: r - r0, COL: c - c0}

    def reads(self, batches: list[tuple[int, int]]) -> list[LdsRead]:
        """The LDS reads that load the fragments of ``batches`` together (``runs`` kind). Runs
        that lie end to end along K in the tile (an interleaved layout puts consecutive K
        steps' runs there) become one access, up to 128 bits where its alignment allows."""
        lay = self.layout
        pieces = []  # (non-k offset, k offset, batch position, run)
        for b, batch in enumerate(batches):
            off = self.offset(batch)
            for run in lay.runs(self.k_axis):
                rc = {ROW: run.row + off[ROW], COL: run.col + off[COL]}
                pieces.append((rc[self.nonk_axis], rc[self.k_axis], b, run))
        pieces.sort(key=lambda p: (p[0], p[1]))
        widest = max(1, 128 // self.bits)
        k_strides = [stride for _, _, _, ax, stride in lay.lane_terms() if ax == self.k_axis]
        groups: list[list] = []
        for p in pieces:
            g = groups[-1] if groups else None
            if (
                g
                and g[-1][0] == p[0]
                and g[-1][1] + g[-1][3].length == p[1]
                and _aligned(g[0][1], sum(x[3].length for x in g) + p[3].length, k_strides, widest)
            ):
                g.append(p)
            else:
                groups.append([p])
        return [LdsRead(g[0][0], g[0][1], sum(x[3].length for x in g), tuple((x[2], x[3]) for x in g)) for g in groups]

    def describe(self, batches: list[tuple[int, int]]) -> str:
        """The reads that load ``batches`` (e.g. one K tile's instructions)."""
        if self.blocks is not None:
            trans = " .trans" if self.k_outer else ""
            if len(self.blocks) == 2:  # paired within each K step, as load_each reads them
                per_k = Counter(b[0] if self.k_axis == ROW else b[1] for b in batches).values()
                x4, x2 = sum(n // 2 for n in per_k), sum(n % 2 for n in per_k)
                if x4:
                    return f"{x4} x nvgpu.ldmatrix{trans} (x4), one per two instructions (x2 each)" + (
                        f", and {x2} x2" if x2 else ""
                    )
            return f"{len(batches)} x nvgpu.ldmatrix{trans} (x{len(self.blocks)}), one per instruction"
        reads = self.reads(batches)
        widths = sorted({r.length * self.bits for r in reads}, reverse=True)
        return (
            f"{len(reads)} x vector.load of {'/'.join(map(str, widths))} bits for {len(batches)} "
            f"instruction{'s' if len(batches) > 1 else ''}"
        )


class FragmentLoader:
    """Loads one operand's fragments for this lane from its LDS tile (a ``FragmentPlan`` bound
    to the tile and the lane's index values)."""

    def __init__(self, plan: FragmentPlan, storage: ir.Value, elem: ir.Type, lanes: LaneIndex):
        """``storage``: the LDS tile, or an LDS ring of tiles (a leading slot dimension; the
        loads' ``slot`` then selects the tile they read)."""
        self.plan, self.storage, self.elem, self.lanes = plan, storage, elem, lanes
        self._addresses: dict = {}
        if plan.blocks is not None:
            self._lane_address(plan.blocks)

    def _lane_address(self, blocks: tuple) -> tuple[ir.Value, ir.Value]:
        """ldmatrix of ``blocks`` ((non-K, K) origins): lane l gives the address of row l % 8
        of block l / 8 -- a non-K row of the block (K-innermost tile), or a K row (K-outer
        tile, read with .trans). (non-K, K) index values, built once per block list."""
        if blocks not in self._addresses:
            top, lanes = self.lanes.top, self.lanes
            blk = top.rem(top.div(lanes.lane, 8), len(blocks))
            nonk = lanes.table([b[0] for b in blocks], blk, "row")
            k = lanes.table([b[1] for b in blocks], blk, "col")
            if self.plan.k_outer:
                k = top.add(top.rem(lanes.lane, 8), k)
            else:
                nonk = top.add(top.rem(lanes.lane, 8), nonk)
            self._addresses[blocks] = (nonk, k)
        return self._addresses[blocks]

    def load(self, em: Emitter, base: dict, batch: tuple[int, int], slot: ir.Value | None = None) -> ir.Value:
        """This lane's fragment of instruction ``batch``; ``base`` maps axis -> tile origin;
        ``slot``: the ring slot to read (an LDS ring's storage), marked ``mmaflow.ring``."""
        return self.load_group(em, base, [batch], slot)[0]

    def load_each(
        self, em: Emitter, base: dict, batches: list[tuple[int, int]], slot: ir.Value | None = None
    ) -> list[ir.Value]:
        """The fragments of several instructions, each read on its own, except that ldmatrix
        fragments of two blocks are read two instructions per x4 (``load_group``)."""
        if self.plan.blocks is not None:
            return self.load_group(em, base, batches, slot)
        return [self.load(em, base, b, slot) for b in batches]

    def load_group(
        self, em: Emitter, base: dict, batches: list[tuple[int, int]], slot: ir.Value | None = None
    ) -> list[ir.Value]:
        """This lane's fragments of several instructions (``FragmentPlan.reads``)."""
        plan = self.plan
        lead = [] if slot is None else [slot]
        k_axis, nonk_axis = plan.k_axis, plan.nonk_axis
        em = em.named(f"fragment.{'A' if plan.layout.operand == 'A' else 'B'}")
        if plan.blocks is not None:
            # Two instructions of two blocks each share one x4 ldmatrix (the second's blocks
            # at its constant offset from the first's): half the shared-memory instructions.
            out = []
            nb, per = len(plan.blocks), 32 // plan.bits
            for i in range(0, len(batches), 2 if nb == 2 else 1):
                group = batches[i : i + 2] if nb == 2 else batches[i : i + 1]
                off = plan.offset(group[0])
                blocks = plan.blocks
                if len(group) == 2:
                    off2 = plan.offset(group[1])
                    dn, dk = off2[nonk_axis] - off[nonk_axis], off2[k_axis] - off[k_axis]
                    blocks = blocks + tuple((n + dn, k + dk) for n, k in blocks)
                ld_nonk, ld_k = self._lane_address(blocks)
                k0, n0 = em.add(base[k_axis], off[k_axis]), em.add(base[nonk_axis], off[nonk_axis])
                at = [em.add(n0, ld_nonk), em.add(k0, ld_k)]
                val = _ring(
                    em.ldmatrix(
                        self.storage,
                        lead + (at[::-1] if plan.k_outer else at),
                        len(blocks),
                        vector_type([len(blocks), per], self.elem),
                        transpose=plan.k_outer,
                    ),
                    slot,
                )
                for g in range(len(group)):
                    part = val if len(group) == 1 else em.extract_slice(val, [g * nb], [nb])
                    out.append(em.shape_cast(part, plan.op_shape))
            return out
        k_lane, n_lane = self.lanes.part(plan.layout, k_axis), self.lanes.part(plan.layout, nonk_axis)
        values: list[list] = [[] for _ in batches]
        for read in plan.reads(batches):
            idx = {k_axis: em.add(base[k_axis], k_lane, read.k), nonk_axis: em.add(base[nonk_axis], n_lane, read.nonk)}
            val = _ring(
                em.lds_load(self.storage, lead + [idx[nonk_axis], idx[k_axis]], vector_type([read.length], self.elem)),
                slot,
            )
            at = 0
            for b, run in read.parts:
                part = val if len(read.parts) == 1 else em.extract_slice(val, at, run.length)
                values[b].append((run, part))
                at += run.length
        return [self._assemble(em, parts) for parts in values]

    def _assemble(self, em: Emitter, parts: list) -> ir.Value:
        length = self.plan.layout.op_vector_length
        if len(parts) == 1 and parts[0][0].length == length:
            flat = parts[0][1]
        else:
            flat = em.splat_const(vector_type([length], self.elem), _zero(self.elem))
            for run, val in parts:
                flat = em.insert_slice(val, flat, run.first)
        return em.shape_cast(flat, self.plan.op_shape)


def _ring(val: ir.Value, slot: ir.Value | None) -> ir.Value:
    """A read of an LDS ring slot is ordered by the ring's own barrier (attrs.RING)."""
    if slot is not None:
        attrs.mark(defining_op(val), attrs.RING)
    return val


def _aligned(start: int, length: int, k_strides: list[int], widest: int) -> bool:
    """Whether ``length`` elements from K offset ``start`` (plus any lane's K offset) can be one
    access: at most ``widest`` elements, a power of two, starting at a multiple of its size (LDS
    rows are 16-byte aligned; emit.Emitter._align asserts the access's own size)."""
    if length > widest or length & (length - 1):
        return False
    return start % length == 0 and all(s % length == 0 for s in k_strides)


def _zero(elem: ir.Type) -> ir.Attribute:
    if isinstance(elem, ir.IntegerType):
        return ir.IntegerAttr.get(elem, 0)
    return ir.FloatAttr.get(elem, 0.0)
