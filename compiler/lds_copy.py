"""Global -> LDS copies of one K-tile, split into loads and stores (used by `distribute`).

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

from .emit import Emitter, vector_type


@dataclass
class CopyPlan:
    name: str
    src: ir.Value  # the global memref
    lead: list  # leading (batch) indices of the global access
    rows: int  # global tile shape (rows x cols), cols contiguous in memory
    cols: int
    elem: ir.Type
    bits: int
    storage: ir.Value  # LDS tile [non-K][K + pad]
    transposed: bool  # global rows are K (store transposed)
    threads: int
    dst: tuple  # logical LDS origin (d0, d1)
    limits: tuple = (None, None)  # true extents (int or index value) of the global rows / cols when the tile overhangs
    row_length: int = 0  # what a global row's true length (elements) is a multiple of: chunks must divide it
    extent0: object = None  # true extent of the access's first index (int or index value; None: static memref)
    banks: int = 0  # LDS banks (4 bytes each) to keep direct copies' stores conflict-free for; 0: plain row order

    def __post_init__(self):
        v = 128 // self.bits
        while self.cols % v or (self.row_length and self.row_length % v):
            v //= 2
        self.v = v
        self.per_row = self.cols // v
        if not self.transposed:
            self.kb = 1
        else:
            self.kb = 1
            for cand in (16, 8, 4, 2):
                if cand <= v and self.rows % cand == 0 and (self.rows // cand) * self.per_row >= self.threads:
                    self.kb = cand
                    break
        self.total = (self.rows // self.kb) * self.per_row  # work items: chunks (direct) or blocks
        self.rounds = math.ceil(self.total / self.threads)
        self.row_group, self.row_step = self._store_row_order()

    def _store_row_order(self) -> tuple[int, int]:
        """(g, d): the g tile rows that one phase of a direct copy's LDS stores writes (the
        lanes of a phase are ``banks * 4 / chunk bytes`` consecutive threads) are rows d apart,
        with d the smallest power of two for which their dword ranges fall in distinct banks
        (g = 1 or d = 1: plain order). With 16-byte chunks, 32 banks and 80-byte padded rows,
        rows 0 and 1 share 4 banks; rows 0 and 4 share none."""
        chunk_bytes = self.v * self.bits // 8
        if self.transposed or not self.banks or chunk_bytes < 4:
            return 1, 1
        lanes = self.banks * 4 // chunk_bytes
        if lanes % self.per_row:
            return 1, 1
        g = lanes // self.per_row
        row_bits = ir.MemRefType(self.storage.type).shape[-1] * self.bits
        stride, span = row_bits // 32, self.per_row * chunk_bytes // 4  # LDS row and one row's chunks, dwords
        if g < 2 or row_bits % 32 or g * span > self.banks:
            return 1, 1
        d = 1
        while g * d <= self.rows and self.rows % (g * d) == 0:
            used = set()
            for j in range(g):
                used.update((j * d * stride + w) % self.banks for w in range(span))
            if len(used) == g * span:
                return g, d
            d *= 2
        return 1, 1

    def _row(self, em: Emitter, q: ir.Value) -> ir.Value:
        """Tile row of the q-th row in thread order (see _store_row_order): q = g*p + h goes to
        row (p % d) + d*h + (p // d)*d*g."""
        g, d = self.row_group, self.row_step
        if d == 1:
            return q
        h, p = em.rem(q, g), em.div(q, g)
        return em.add(em.rem(p, d), em.mul(h, d), em.mul(em.div(p, d), d * g))

    @property
    def chunk_type(self) -> ir.VectorType:
        return vector_type([self.v], self.elem)

    def registers(self) -> int:
        """Vectors one thread holds between the loads and the stores."""
        return self.rounds * self.kb

    def _item(self, em: Emitter, tid: ir.Value, i: int):
        """(row, col) in the tile of thread ``tid``'s item ``i``, clamped to a valid item.

        Direct copies walk a row's chunks fastest (a wave reads contiguous bytes). Transposing
        copies walk the K blocks fastest: neighbouring lanes then store to neighbouring dwords
        of one LDS row (column-chunk-fastest would put them rows apart, in one bank), and the
        lanes of one column chunk still read whole 32-byte sectors together.
        """
        item = em.add(tid, i * self.threads)
        if (i + 1) * self.threads > self.total:
            item = em.min_index(item, self.total - 1)
        if self.transposed:
            blocks = self.rows // self.kb
            row = em.mul(em.rem(item, blocks), self.kb)
            col = em.mul(em.div(item, blocks), self.v)
        else:
            row = self._row(em, em.div(item, self.per_row))
            col = em.mul(em.rem(item, self.per_row), self.v)
        return row, col

    def loads(self, em: Emitter, tid: ir.Value, g0: ir.Value, g1: ir.Value) -> list[ir.Value]:
        """Global loads of this thread's chunks of the tile whose origin is (g0, g1)."""
        em = em.named(f"copy.{self.name}.global_load")
        out = []
        for i in range(self.rounds):
            row, col = self._item(em, tid, i)
            for j in range(self.kb):
                idx = self.lead + [em.add(g0, row, j), em.add(g1, col)]
                out.append(self._bounded_load(em, idx))
        return out

    def _bounded_load(self, em: Emitter, idx: list[ir.Value]) -> ir.Value:
        return em.bounded_global_load(self.src, idx, self.chunk_type, [None] * len(self.lead) + list(self.limits),
                                      extent0=self.extent0)

    def stores(self, em: Emitter, tid: ir.Value, values: list[ir.Value]) -> None:
        """LDS stores of the chunks ``loads`` returned."""
        em = em.named(f"copy.{self.name}.lds_store")
        d0, d1 = self.dst
        kb_t = vector_type([self.kb], self.elem)
        for i in range(self.rounds):
            s_em = em
            if (i + 1) * self.threads > self.total:  # the clamped items must not store
                s_em = em.if_then(em.lt(em.add(tid, i * self.threads), self.total))
            row, col = self._item(s_em, tid, i)
            chunk = values[i * self.kb:(i + 1) * self.kb]
            if not self.transposed:
                s_em.lds_store(chunk[0], self.storage, [s_em.add(d0, row), s_em.add(d1, col)])
                continue
            for x in range(self.v):
                vec = s_em.from_elements(kb_t, [s_em.extract(ch, x) for ch in chunk])
                s_em.lds_store(vec, self.storage, [s_em.add(d1, col, x), s_em.add(d0, row)])
