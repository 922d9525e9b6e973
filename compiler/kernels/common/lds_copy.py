"""Global -> LDS copies of one K-tile: the plan (``CopyShape``, numbers only) and its emission
(``Copy``, split into loads and stores; used by `distribute`).

Every thread of the workgroup moves 128-bit chunks (narrower only when a tile row is shorter).
The loads and the stores are emitted separately so that the K loop can carry the loaded
registers into the next iteration (prefetch): the next tile's loads are in flight while the
current tile is multiplied.

Two shapes of copy, decided by the LDS plan (tiles are stored K-innermost):
- direct: the global tile is already K-innermost (A of a plain matmul): chunk c of row r is
  stored where it came from;
- transposing: the global tile has K outermost (B of a plain matmul, K x N): a thread loads kb
  consecutive rows of one column chunk and writes V vectors of kb elements along K (the
  transpose happens in registers; kb is as large as keeps every thread busy).
Chunks past the tile (when chunks do not divide evenly among threads) load a clamped, valid
chunk and skip the store (the store is the only guarded op).

AMD's LDS ring (``stages`` > 1) uses these copies, storing into the ring slot of the tile.
NVIDIA's ring copies asynchronously instead: one ``nvgpu.device_async_copy``
(cp.async) per chunk, global straight to the ring slot with no registers in between, the tile
stored as it is in global memory (a K-outer tile stays K-outer; its fragments come from
``ldmatrix .trans``).

Unaligned problems (the `normalize` stage rounded the iteration space up): a chunk outside the true
tensor must read zeros. The chunk width divides the true row length, so a chunk is wholly in or
out. AMD: an out-of-range chunk's leading index is set to its extent, which puts its address
past the end of the buffer, and the buffer bounds check returns 0 (no mask on the data). NVIDIA:
the address is clamped to a valid one and the value replaced by zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.mlir import defining_op
from mmaflow.compiler.kernels.common.emit import Emitter, vector_type


@dataclass(frozen=True)
class CopyShape:
    """How the workgroup's threads split one operand's global tile (rows x cols, cols contiguous
    in memory) into chunks, and in which order they store them: numbers only, no IR."""

    operand: str  # "A" | "B"
    rows: int
    cols: int
    bits: int  # element width
    transposed: bool  # global rows are K: stored transposed (LDS tiles are K-innermost)
    threads: int
    v: int  # elements per chunk
    per_row: int  # chunks per global row
    kb: int  # global rows per item of a transposing copy (1: direct)
    total: int  # work items: chunks (direct) or kb-row blocks (transposing)
    rounds: int  # items per thread
    row_group: int  # direct copies: rows one phase of LDS stores writes ...
    row_step: int  # ... and how far apart they are (1: plain row order)
    asynchronous: bool = False  # one nvgpu.device_async_copy per chunk (cp.async), no registers
    # Transposing copies: the lanes of one store phase holding its c-th column chunk write that
    # chunk's columns in the order x ^ swizzle[c] (store x writes column x ^ swizzle[c]): chunks
    # 8 columns apart otherwise land on the same banks (empty: plain order).
    swizzle: tuple[int, ...] = ()

    @staticmethod
    def plan(
        operand: str,
        rows: int,
        cols: int,
        bits: int,
        transposed: bool,
        threads: int,
        *,
        row_length: int = 0,
        lds_row: int = 0,
        banks: int = 0,
        wave: int = 64,
        asynchronous: bool = False,
    ) -> "CopyShape":
        """``row_length``: what a global row's true length (elements) is a multiple of (chunks
        must divide it; 0: no constraint); ``lds_row``: elements per LDS row (with padding);
        ``banks``: LDS banks (4 bytes each) to keep the stores conflict-free for, 0 for the
        plain order; ``wave``: lanes per wave (a store phase never spans two waves)."""
        v = 128 // bits
        while cols % v or (row_length and row_length % v):
            v //= 2
        per_row = cols // v
        kb = 1
        if transposed:
            for cand in (16, 8, 4, 2):
                if cand <= v and rows % cand == 0 and (rows // cand) * per_row >= threads:
                    kb = cand
                    break
        total = (rows // kb) * per_row
        group, step = _store_row_order(rows, per_row, v * bits // 8, lds_row * bits, transposed, banks)
        if asynchronous and transposed:
            raise ValueError(f"{operand}: an asynchronous copy stores chunks as they are, it cannot transpose")
        swizzle = _transposed_swizzle(rows // kb, v, kb * bits, lds_row * bits, banks, wave) if transposed else ()
        return CopyShape(
            operand,
            rows,
            cols,
            bits,
            transposed,
            threads,
            v,
            per_row,
            kb,
            total,
            math.ceil(total / threads),
            group,
            step,
            asynchronous,
            swizzle,
        )

    def registers(self) -> int:
        """Vectors one thread holds between the loads and the stores (none when asynchronous)."""
        return 0 if self.asynchronous else self.rounds * self.kb

    def describe(self) -> str:
        how = (
            f"transposing ({self.kb} K row{'s' if self.kb > 1 else ''} per item)"
            if self.transposed
            else "asynchronous (cp.async)"
            if self.asynchronous
            else "direct"
        )
        order = f", LDS store rows {self.row_step} apart in groups of {self.row_group}" if self.row_step > 1 else ""
        if self.swizzle:
            order += f", each store phase's column chunks in the order x ^ {'/'.join(map(str, self.swizzle))}"
        return (
            f"{self.rows}x{self.cols} tile {how}: {self.v * self.bits}-bit chunks, {self.total} items over "
            f"{self.threads} threads ({self.rounds} round{'s' if self.rounds > 1 else ''}, "
            f"{self.registers()} registers carried){order}"
        )


def _store_row_order(
    rows: int, per_row: int, chunk_bytes: int, row_bits: int, transposed: bool, banks: int
) -> tuple[int, int]:
    """(g, d): the g tile rows that one phase of a direct copy's LDS stores writes (the lanes of
    a phase are ``banks * 4 / chunk bytes`` consecutive threads) are rows d apart, with d the
    smallest power of two for which their dword ranges fall in distinct banks (g = 1 or d = 1:
    plain order). With 16-byte chunks, 32 banks and 80-byte padded rows, rows 0 and 1 share 4
    banks; rows 0 and 4 share none."""
    if transposed or not banks or chunk_bytes < 4:
        return 1, 1
    lanes = banks * 4 // chunk_bytes
    if lanes % per_row:
        return 1, 1
    g = lanes // per_row
    stride, span = row_bits // 32, per_row * chunk_bytes // 4  # LDS row and one row's chunks, dwords
    if g < 2 or row_bits % 32 or g * span > banks:
        return 1, 1
    d = 1
    while g * d <= rows and rows % (g * d) == 0:
        used = set()
        for j in range(g):
            used.update((j * d * stride + w) % banks for w in range(span))
        if len(used) == g * span:
            return g, d
        d *= 2
    return 1, 1


def _transposed_swizzle(blocks: int, v: int, store_bits: int, row_bits: int, banks: int, wave: int) -> tuple[int, ...]:
    """Per column chunk of a store phase, the XOR that orders a transposing copy's stores.
    Lanes take K blocks fastest (``blocks`` lanes per chunk of ``v`` columns) and store x
    writes one ``store_bits`` piece into LDS row col + x, so a phase of m chunks writes rows 8
    apart, which can share banks (80-byte rows, 32 banks: rows 0 and 8 start on the same bank).
    Chunk c then writes row col + (x ^ s[c]). Chosen chunk by chunk (s[0] = 0; for each next
    chunk the smallest s whose stores miss the banks of the chunks before it, for every x);
    () when none is needed, when some chunk has no such s, or when the bank model does not
    apply."""
    if not banks or store_bits % 32 or row_bits % 32 or v & (v - 1):
        return ()
    lanes = min(banks * 32 // store_bits, wave)  # one store phase
    if lanes % blocks or lanes // blocks < 2:
        return ()
    m, row_dw, dw = lanes // blocks, row_bits // 32, store_bits // 32

    def banks_of(c: int, s: int, x: int) -> set:
        row = c * v + (x ^ s)
        return {(row * row_dw + b * dw + w) % banks for b in range(blocks) for w in range(dw)}

    used = [banks_of(0, 0, x) for x in range(v)]  # per store x, the banks of the chunks so far
    if any(len(u) != blocks * dw for u in used):
        return ()
    chosen = [0]
    for c in range(1, m):
        for s in range(v):
            mine = [banks_of(c, s, x) for x in range(v)]
            if all(len(mine[x]) == blocks * dw and not (mine[x] & used[x]) for x in range(v)):
                break
        else:
            return ()
        chosen.append(s)
        for x in range(v):
            used[x] |= mine[x]
    return tuple(chosen) if any(chosen) else ()


class Copy:
    """A ``CopyShape`` bound to its IR: the global memref and the LDS tile."""

    def __init__(
        self,
        shape: CopyShape,
        elem: ir.Type,
        src: ir.Value,
        lead: list,
        storage: ir.Value,
        dst: tuple,
        limits: tuple = (None, None),
        extent0=None,
        *,
        k_axis: int,
        col_bits: int = 8,
    ):
        """``lead``: leading (batch) indices of the global access; ``dst``: logical LDS origin
        (d0, d1); ``limits``: true extents (int or index value) of the global rows / cols where
        the tile overhangs them (cols in bytes for packed data); ``extent0``: true extent of the
        access's first index; ``k_axis``: which of the two (0: rows, 1: cols) runs along K;
        ``col_bits``: 4 or 6 where the tile's columns are the bytes of packed 4/6-bit values
        (``elem`` i8, the shape planned in bytes): column origins, given in values, are scaled."""
        self.shape, self.elem, self.src, self.lead, self.storage = shape, elem, src, lead, storage
        self.dst, self.limits, self.extent0, self.k_axis = dst, limits, extent0, k_axis
        self.col_bits = col_bits

    def _col_bytes(self, em: Emitter, c: ir.Value) -> ir.Value:
        """A column origin in values as the byte it starts (packed data; else itself)."""
        return c if self.col_bits >= 8 else em.byte_of(c, self.col_bits)

    @property
    def chunk_type(self) -> ir.VectorType:
        return vector_type([self.shape.v], self.elem)

    def _row(self, em: Emitter, q: ir.Value) -> ir.Value:
        """Tile row of the q-th row in thread order (see _store_row_order): q = g*p + h goes to
        row (p % d) + d*h + (p // d)*d*g."""
        g, d = self.shape.row_group, self.shape.row_step
        if d == 1:
            return q
        h, p = em.rem(q, g), em.div(q, g)
        return em.add(em.rem(p, d), em.mul(h, d), em.mul(em.div(p, d), d * g))

    def _item(self, em: Emitter, tid: ir.Value, i: int):
        """(row, col) in the tile of thread ``tid``'s item ``i``, clamped to a valid item.

        Direct copies walk a row's chunks fastest (a wave reads contiguous bytes). Transposing
        copies walk the K blocks fastest: neighbouring lanes then store to neighbouring dwords
        of one LDS row (column-chunk-fastest would put them rows apart, in one bank), and the
        lanes of one column chunk still read whole 32-byte sectors together.
        """
        s = self.shape
        item = em.add(tid, i * s.threads)
        if (i + 1) * s.threads > s.total:
            item = em.min_index(item, s.total - 1)
        if s.transposed:
            blocks = s.rows // s.kb
            row = em.mul(em.rem(item, blocks), s.kb)
            col = em.mul(em.div(item, blocks), s.v)
        else:
            row = self._row(em, em.div(item, s.per_row))
            col = em.mul(em.rem(item, s.per_row), s.v)
        return row, col

    def loads(self, em: Emitter, tid: ir.Value, g0: ir.Value, g1: ir.Value) -> list[ir.Value]:
        """Global loads of this thread's chunks of the tile whose origin is (g0, g1)."""
        em = em.named(f"copy.{self.shape.operand}.global_load")
        g1 = self._col_bytes(em, g1)
        out = []
        for i in range(self.shape.rounds):
            row, col = self._item(em, tid, i)
            for j in range(self.shape.kb):
                idx = self.lead + [em.add(g0, row, j), em.add(g1, col)]
                out.append(
                    em.bounded_global_load(
                        self.src,
                        idx,
                        self.chunk_type,
                        [None] * len(self.lead) + list(self.limits),
                        extent0=self.extent0,
                    )
                )
        return out

    def async_copies(
        self,
        em: Emitter,
        tid: ir.Value,
        g0: ir.Value,
        g1: ir.Value,
        slot: ir.Value,
        tile_valid: ir.Value | None,
        whole_k: bool = False,
    ) -> list[ir.Value]:
        """One ``nvgpu.device_async_copy`` per chunk of this thread: global tile (g0, g1) into
        ring slot ``slot``, no registers in between. A chunk outside the tensor, or of a tile
        past the last (``tile_valid`` false), copies 0 source elements from a clamped address:
        cp.async zero-fills the chunk and reads nothing. ``whole_k``: the tile lies within K
        (the ring's main loop), so only the other axis is checked and only its index clamped:
        the K index, and with it the address, stays affine in the loop's induction variable. A
        last round that not every thread has an item in is guarded (scf.if): a clamped item
        would copy over another thread's chunk. The copies carry ``mmaflow.ring``. Returns the
        tokens of the unguarded copies (a commit group takes every copy the thread issued,
        guarded ones included)."""
        s = self.shape
        em = em.named(f"copy.{s.operand}.async")
        d0, d1 = self.dst
        tokens = []
        for i in range(s.rounds):
            c_em = em
            if (i + 1) * s.threads > s.total:
                c_em = em.if_then(em.lt(em.add(tid, i * s.threads), s.total))
            row, col = self._item(c_em, tid, i)
            idx = self.lead + [c_em.add(g0, row), c_em.add(g1, col)]
            limits = list(self.limits)
            zeroed = None
            if whole_k:
                limits[self.k_axis] = None
                zeroed = [len(self.lead) + 1 - self.k_axis]
            valid = c_em.in_bounds(idx, [None] * len(self.lead) + limits)
            if tile_valid is not None:
                valid = tile_valid if valid is None else c_em.and_(valid, tile_valid)
            token = c_em.async_copy(
                self.src, idx, self.storage, [slot, c_em.add(d0, row), c_em.add(d1, col)], s.v, valid, zeroed
            )
            attrs.mark(defining_op(token), attrs.RING)
            if c_em is em:
                tokens.append(token)
        return tokens

    def stores(self, em: Emitter, tid: ir.Value, values: list[ir.Value], slot: ir.Value | None = None) -> None:
        """LDS stores of the chunks ``loads`` returned; ``slot``: the LDS ring slot they go to
        (the stores then carry ``mmaflow.ring``: the ring's own barrier orders them)."""
        s = self.shape
        em = em.named(f"copy.{s.operand}.lds_store")
        d0, d1 = self.dst
        d1 = self._col_bytes(em, d1)
        lead = [] if slot is None else [slot]

        def store(s_em: Emitter, val: ir.Value, idx: list) -> None:
            op = s_em.lds_store(val, self.storage, lead + idx)
            if slot is not None:
                attrs.mark(op, attrs.RING)

        kb_t = vector_type([s.kb], self.elem)
        for i in range(s.rounds):
            s_em = em
            if (i + 1) * s.threads > s.total:  # the clamped items must not store
                s_em = em.if_then(em.lt(em.add(tid, i * s.threads), s.total))
            row, col = self._item(s_em, tid, i)
            chunk = values[i * s.kb : (i + 1) * s.kb]
            if not s.transposed:
                store(s_em, chunk[0], [s_em.add(d0, row), s_em.add(d1, col)])
                continue
            bits_of = []  # the swizzle's bits, lane values (mask & 2^b) computed once per item
            if s.swizzle:
                pos = s_em.rem(s_em.div(s_em.add(tid, i * s.threads), s.rows // s.kb), len(s.swizzle))
                mask = s_em.table(list(s.swizzle), pos)
                bits_of = [
                    (1 << b, s_em.and_(mask, s_em.const(1 << b)))
                    for b in range(s.v.bit_length())
                    if any(m & (1 << b) for m in s.swizzle)
                ]
            for x in range(s.v):
                vec = s_em.from_elements(kb_t, [s_em.extract(ch, x) for ch in chunk])
                at = x
                if s.swizzle:  # column x ^ mask = x + sum over the mask's bits of +-bit (by x's bit)
                    at = s_em.const(x)
                    for bit, val in bits_of:
                        at = s_em.sub(at, val) if x & bit else s_em.add(at, val)
                    for m in sorted(set(s.swizzle) - {0}):  # and that column's elements, chosen per lane
                        cand = s_em.from_elements(kb_t, [s_em.extract(ch, x ^ m) for ch in chunk])
                        vec = s_em.select(s_em.eq(mask, m), cand, vec)
                store(s_em, vec, [s_em.add(d1, col, at), s_em.add(d0, row)])
