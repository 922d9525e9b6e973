"""Flash attention on AMD matrix cores (docs/kernels/flash_attention.md): CDNA MFMA (gfx942, gfx950), RDNA4 WMMA
(gfx1201), RDNA3 WMMA wave32 (gfx1100). The plan checks and the bindings are
``kernels/attention/nvidia.py``'s; this module holds what differs: the plan's AMD part and the kernel.

Which way round. ``convert.attention_plans`` prices P's C -> A move for S = Q K^T and for
S^T = K Q^T (docs/kernels/flash_attention.md, "AMD"): on these targets S = Q K^T needs 8-32
``ds_bpermute_b32`` (MFMA, RDNA4) or 64 (RDNA3) per 16 x 16 P tile, S^T = K Q^T none on MFMA
and RDNA4 and 4 ``v_permlanex16_b32`` (no LDS pipe) on RDNA3. So the kernel computes S^T. With S^T
in C's layout a lane holds keys along rows and one query column. Two ways on from there:

(a) O = P V, P as the A operand (the planned C^T -> A move), O's C layout holding queries along
    rows: every tile's alpha rescale and the final 1 / l need the per-query statistics moved
    across lanes (a lane holds one query in S^T but four in O's C layout on MFMA: a gather per
    tile, ``ds_bpermute`` there);
(b) O^T = V^T P^T, P^T as the B operand, V^T as the A operand: on every target here B's layout is
    A's transposed (checked in the plan), so the planned C^T -> A move, read as C -> B, gives P^T's
    B operand with the same instructions; and O^T's C layout is S^T's, so each lane holds the
    same query in both: alpha and l stay in the lane, no cross-lane move but the softmax's
    reductions. V^T's A fragments read V's tile K-innermost when V is stored transposed in LDS.

The kernel does (b). V's 16-byte global chunks (8 head-dim values of one key) are written to
LDS as 8 16-bit stores down a column of the [head dim][keys + pad] tile, each key at the column
of the hardware K slot that will hold it (``convert.hardware_keys``: the codegen K order and
any planned renaming; RDNA4's hardware K order is permuted), so V^T's fragments are plain runs;
a wave's lanes take consecutive keys, so each store writes along one LDS row. V stored head dim
outer (keys innermost: ``v_transposed``) arrives as chunks of 8 keys of one head-dim row
(``nvidia._Kernel.load_vt``), stored along V^T's rows whole (RDNA4: element by element, to its
permuted key columns).

LDS without bank conflicts (the executor's model): rows are padded by 8 elements, or by 4 where
the A fragment reads would conflict at 8 (``read_conflicts``: gfx942's 32 banks; K's 16-byte
chunks are then stored as two 8-byte halves), and the K copy's thread order is chosen per bank
phase (``k_copy_order``).

Work split and steps, per workgroup: BLOCK_M = 64 queries of one batch entry, four waves of
``intr.n`` = 16 queries each; grid (ceil(M / 64), batch, 1). Per wave:

1. Q^T as S^T's B operand (rows: head dim, cols: queries), loaded once from global memory
   (runs along the head dim: 64-bit ``buffer_load`` on MFMA), kept for the whole key loop;
   queries past M read 0 (the raw buffer's bounds check).
2. Key loop over tiles of BLOCK_N = 64 keys (causal: those at or below the block's last query):
   barrier; K ([key][head dim + pad]) and V^T ([head dim][key + pad]) stored to LDS from
   registers; barrier. The registers hold 128-bit ``amdgpu.raw_buffer_load`` chunks (keys past
   K2 read 0) loaded during the previous tile (``prefetch``: issued after the second barrier,
   in flight during the math), or, RDNA at head dim 128 (short of VGPRs), between the barriers.
   An additive mask is read from global memory after S^T's instructions (read earlier it
   stays live across S^T: RDNA3 at head dim 128 then spills); a boolean i1 mask likewise, as
   bytes, each turned into 0 / -inf right away (``nvidia._Kernel.mask_value``).
3. S^T = K Q^T: BLOCK_N / 16 row blocks x head dim / 16 K steps, K's A fragments read from LDS
   as runs along the head dim, one row block at a time (RDNA's replicated fragments are large).
4. Online softmax in f32 on S^T's C layout, as the mma.sync kernel does it with rows and
   columns exchanged: scale * log2(e) folded, ``rocdl.exp2`` (one ``v_exp_f32``), keys past
   K2 and (causal) past the query -inf in a wave-uniform branch; per query the lane's own max,
   then across the lanes holding the same column (C's row lane dims: ``gpu.shuffle xor``);
   alpha and P; the lane's partial sum l; O^T scaled by alpha, all in the lane.
5. P^T (C, f32) -> B operand (16-bit): ``convert_emit.emit_register_route`` of the planned
   route: in-lane on MFMA and RDNA4, 4 ``rocdl.permlanex16`` + selects on RDNA3.
6. O^T += V^T P^T: head dim / 16 accumulators, BLOCK_N / 16 instructions each.
7. After the loop: l summed across the column's lanes, O^T / l, converted, stored from the C
   layout (runs along the head dim); queries past M are not stored.

The -inf guards (a masked row never makes a NaN, a row masked everywhere gives 0 / 0 as the
reference) are the mma.sync kernel's, see its docstring.
"""

from __future__ import annotations

import math

from iree.compiler import ir
from iree.compiler.dialects import arith, gpu, hal, rocdl, scf, vector

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.kernels.common.convert_emit import emit_register_route
from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.kernels.common.fragments import FragmentLoader, FragmentPlan, LaneIndex
from mmaflow.compiler.target.convert import attention_conversion, hardware_keys
from mmaflow.compiler.target.intrinsics import Intrinsic
from mmaflow.compiler.target.layout import COL, ROW, Layout, Run
from mmaflow.compiler.target.targets import Target

BLOCK_M = 64  # queries per workgroup
BLOCK_N = 64  # keys per iteration
WARPS = 4  # waves per workgroup
PADS = (8, 4)  # candidate elements after each LDS row: 16 bytes (rows 16-byte aligned), else 8


def pick_intrinsic(tgt: Target, elem: str) -> Intrinsic:
    """The target's 16 x 16 ``elem`` -> f32 instruction at its default wave size with the
    smallest K (16 everywhere here: one query column per lane, and one P tile per S^T
    instruction); UnsupportedError when it has none."""
    found = [
        i
        for i in tgt.intrinsics(tgt.default_wave_size)
        if i.a_type == elem and i.b_type == elem and i.c_type == "f32" and i.m == i.n == 16
    ]
    if not found:
        raise UnsupportedError(
            f"{tgt.name} has no 16 x 16 {elem} -> f32 matrix instruction at wave"
            f"{tgt.default_wave_size} for the AMD flash-attention kernel"
        )
    return min(found, key=lambda i: i.k)


def _mirrors(a: Layout, b: Layout) -> bool:
    """Whether B's layout is A's transposed: every lane's element e of B is (k, n) where A's is (n, k)."""
    if a.elements != b.elements or a.wave_size != b.wave_size or a.op_vector_length != b.op_vector_length:
        return False
    return all(
        b.coords(lane, e) == a.coords(lane, e)[::-1] and b.op_index(e) == a.op_index(e)
        for lane in range(a.wave_size)
        for e in range(a.elements)
    )


def plan_parts(tgt: Target, elem: str, head_dim: int):
    """The AMD kernel's instruction, P's conversion, K's and V^T's fragment plans and V's key
    order in LDS (the LDS column of each key of a P tile); UnsupportedError naming why not."""
    family = tgt.family.value
    intr = pick_intrinsic(tgt, elem)
    if intr.m != 16 or intr.n != 16 or intr.m * WARPS != BLOCK_M or BLOCK_N % intr.m or head_dim % intr.m:
        raise UnsupportedError(f"{intr.name}: the AMD kernel takes 16 x 16 instructions, one query column per lane")
    if not _mirrors(intr.a, intr.b):
        raise UnsupportedError(
            f"{intr.name}: B's layout is not A's transposed; P^T cannot enter O^T = V^T P^T as "
            f"the planned C^T -> A registers"
        )
    conv = attention_conversion(intr, transposed=True, vendor=tgt.vendor.value, family=family)
    plan = conv.plan
    if plan.chosen != "registers":
        raise UnsupportedError(
            f"{intr.name}: P's planned conversion is an LDS round trip; the kernel emits register routes only"
        )
    if any(p.op != "rocdl.permlanex16" for p in plan.registers.permutes):
        ops = sorted({p.op for p in plan.registers.permutes})
        raise UnsupportedError(
            f"{intr.name}: P's conversion needs {ops}; the kernel emits in-lane moves and rocdl.permlanex16 only"
        )
    if conv.source_batch != (1, 1) or conv.dest_batch != (1, 1):
        raise UnsupportedError(
            f"{intr.name}: P tiles of {conv.source_batch} S^T and {conv.dest_batch} B "
            f"instructions; the kernel converts one instruction's tile at a time"
        )
    keys = hardware_keys(conv)  # the key hardware K slot c of P's B operand holds
    column = tuple(keys.index(kk) for kk in range(len(keys)))  # the slot (V^T's LDS column) of each key
    k_frags = FragmentPlan.plan(
        intr.a.compose(BLOCK_N // intr.m, head_dim // intr.k), COL, 16, intr.a_shape, allow_ldmatrix=False
    )
    v_frags = FragmentPlan.plan(
        intr.a.compose(head_dim // intr.m, BLOCK_N // intr.k), COL, 16, intr.a_shape, allow_ldmatrix=False
    )
    pad = next(
        (p for p in PADS if all(read_conflicts(intr.a, tgt.lds_banks, cols + p) == 1 for cols in (head_dim, BLOCK_N))),
        PADS[0],
    )
    # The next tile's K and V chunks held in registers during this one (2 x head dim x 64 x 2
    # bytes over the workgroup: 16 VGPRs a lane on MFMA's 256 threads at head dim 64, 32 at 128;
    # 32 / 64 on WMMA's 128), except where the kernel already needs about all 256 VGPRs (RDNA at
    # head dim 128, measured in the final ISA: docs/kernels/flash_attention.md, "AMD").
    prefetch = not (intr.wave_size == 32 and head_dim == 128)
    return intr, conv, k_frags, v_frags, column, pad, k_copy_order(tgt.lds_banks, head_dim, head_dim + pad), prefetch


def k_copy_order(banks: int, head_dim: int, row: int) -> tuple[int, int, int]:
    """How the K copy's consecutive threads take 16-byte chunks: (group, rows, spacing): groups
    of ``group`` threads take consecutive chunks of one row; a bank phase's ``rows`` groups take
    rows ``spacing`` apart; chosen so that a phase's LDS stores hit every bank at most once
    (rows not 16-byte aligned are stored in 8-byte halves, 16 threads a phase)."""
    chunks = head_dim // 8
    store = 16 if row % 8 == 0 else 8  # bytes per LDS store
    per_phase = banks * 4 // store
    group = min(per_phase, chunks, 8 if store == 8 else chunks)  # halves: 8 chunks span 128 bytes
    rows = per_phase // group
    for spacing in (1, 2, 4, 8, 16, 32):
        if rows * spacing > BLOCK_N:
            break
        dwords = [
            ((j * spacing * row + c * 8) * 2 + h) // 4
            for j in range(rows)
            for c in range(group)
            for h in range(0, store, 4)
        ]
        per_bank = {}
        for dw in set(dwords):
            per_bank[dw % banks] = per_bank.get(dw % banks, 0) + 1
        if max(per_bank.values()) == 1:
            return group, rows, spacing
    return chunks, 1, 1


def read_conflicts(a: Layout, banks: int, row: int) -> int:
    """The worst bank degree of one A fragment read (each lane's first run, 16-bit elements) from
    a tile whose rows are ``row`` elements apart: lanes served in phases of banks * 4 / access
    bytes, a phase costing the most distinct dwords one bank receives (the executor's model).
    K's and V^T's fragment reads are these, at every K step and row block."""
    run = a.runs(COL)[0]
    size = run.length * 2
    per_phase = max(1, banks * 4 // max(size, 4))
    worst = 1
    for first in range(0, a.wave_size, per_phase):
        dwords = set()
        for lane in range(first, min(first + per_phase, a.wave_size)):
            r, c = a.coords(lane, run.first)
            start = (r * row + c) * 2
            dwords |= {(start + b) // 4 for b in range(0, size, 4)}
        per_bank = {}
        for dw in dwords:
            per_bank[dw % banks] = per_bank.get(dw % banks, 0) + 1
        worst = max(worst, max(per_bank.values()))
    return worst


def lds_bytes(head_dim: int, pad: int) -> int:
    """K's [key][head dim + pad] and V^T's [head dim][key + pad] tiles, 16-bit."""
    return (BLOCK_N * (head_dim + pad) + head_dim * (BLOCK_N + pad)) * 2


def _col_sharers(layout: Layout) -> list[int]:
    """Lane XOR masks reaching every lane that holds the same columns: the row lane dims' bits."""
    masks = []
    for _, div, size, axis, _ in layout.lane_terms():
        if axis == ROW:
            assert size & (size - 1) == 0, "lane dims are powers of two"
            masks += [div << b for b in range(size.bit_length() - 1)]
    return masks


class AmdKernel:
    """Builds the AMD kernel body (``nvidia._Kernel`` provides addressing and helpers);
    one instance per emission."""

    def __init__(self, base):
        self.b = base  # nvidia._Kernel: plan, emitter, orders, address helpers
        self.p, self.em, self.intr = base.p, base.em, base.p.intrinsic
        self.t, self.f32, self.c_t = base.t, base.f32, base.c_t
        c = self.intr.c
        self.cols = sorted({co for _, co in c.element_offsets()})  # query offsets a lane holds per instruction
        self.col_of = [self.cols.index(co) for _, co in c.element_offsets()]

    # ---- helpers --------------------------------------------------------------------------------
    def fconst(self, value: float) -> ir.Value:
        with self.em.loc, self.em.ip:
            return arith.ConstantOp(self.f32, ir.FloatAttr.get(self.f32, value)).result

    def f(self, op, *args) -> ir.Value:
        with self.em.loc, self.em.ip:
            return op(*args).result

    def exp2(self, x: ir.Value) -> ir.Value:
        """2^x as ``rocdl.exp2`` (``llvm.amdgcn.exp2``: one ``v_exp_f32``, denormal results
        flushed to 0, as NVIDIA's ex2.approx.ftz). ``math.exp2`` lowers to ``llvm.exp2.f32``,
        which LLVM wraps in a range fix-up for denormal results: v_cmp, 2 v_cndmask, v_add,
        v_exp_f32, v_ldexp per score (measured on gfx942). The flushed values (below 2^-126)
        are far under P's 16-bit rounding."""
        with self.em.loc, self.em.ip:
            return rocdl.exp2(self.f32, x)

    def col_reduce(self, value: ir.Value, op) -> ir.Value:
        for mask in _col_sharers(self.intr.c):
            with self.em.loc, self.em.ip:
                off = arith.ConstantOp(ir.IntegerType.get_signless(32), mask).result
                width = arith.ConstantOp(ir.IntegerType.get_signless(32), self.p.wave_size).result
                other = gpu.ShuffleOp(value, off, width, gpu.ShuffleMode.XOR).results[0]
            value = self.f(op, value, other)
        return value

    def element_at(self, pos: int) -> int:
        c = self.intr.c
        return next(e for e in range(c.elements) if c.op_index(e) == pos)

    def per_element(self, values: list[ir.Value]) -> ir.Value:
        """A C-shaped vector holding, at each element, its query column's value."""
        c = self.intr.c
        return self.em.from_elements(
            self.c_t, [values[self.col_of[self.element_at(i)]] for i in range(c.op_vector_length)]
        )

    # ---- the kernel ---------------------------------------------------------------------------
    def build(self, q_mem, k_mem, v_mem, o_mem, mask_mem=None) -> None:
        p, em, intr, b = self.p, self.em, self.intr, self.b
        d = p.head_dim
        tid = em.thread_id()
        with em.loc, em.ip:
            block, batch_y = hal.interface_workgroup_id(0), hal.interface_workgroup_id(1)
        batch = b.batch_index(em, batch_y)
        wave, lane = em.div(tid, p.wave_size), em.rem(tid, p.wave_size)
        q_base = em.add(em.mul(block, BLOCK_M), em.mul(wave, intr.n))  # the wave's first query

        # 1. Q^T in B fragments (rows: head dim, cols: queries), for the whole loop.
        bl = intr.b
        b_row, b_col = em.lane_part(bl, lane, ROW), em.lane_part(bl, lane, COL)
        q_col0 = em.add(q_base, b_col)
        self._q = []
        for kk in range(d // intr.k):
            frag = em.zero_vector(ir.VectorType.get([bl.op_vector_length], self.t))
            for run in _widest(bl.runs(ROW), ROW):
                idx = b.at(0, batch, em.add(q_col0, run.col), em.add(b_row, kk * intr.k + run.row))
                part = em.bounded_global_load(
                    q_mem, idx, ir.VectorType.get([run.length], self.t), b.bounds(0, p.m if p.m % BLOCK_M else None)
                )
                frag = em.insert_slice(part, frag, bl.op_index(run.first))
            self._q.append(em.shape_cast(frag, intr.b_shape))

        k_lds = em.named("lds_k").alloc_lds([BLOCK_N, d + p.lds_pad], self.t)
        vt_lds = em.named("lds_vt").alloc_lds([d, BLOCK_N + p.lds_pad], self.t)

        neg_inf, zero = self.fconst(-math.inf), self.fconst(0.0)
        n_o = d // intr.m
        q_cols = len(self.cols)
        inits = [neg_inf] * q_cols + [zero] * q_cols + [em.zero_vector(self.c_t)] * n_o
        self.k_at, self.v_at = self.chunk_coords(em, tid)
        if p.v_transposed:  # V stored head dim outer: its chunks are 8 keys of one head-dim row
            self.b.vt_aligned = self.b.vt_rows_aligned(em, v_mem)
        if p.prefetch:  # tile 0's K and V chunks in registers before the loop
            inits += self.load_tile(em, (k_mem, v_mem), batch, em.const(0))
        tiles = self.b.key_tiles(em)
        if p.causal:  # tiles holding a key <= this block's last query
            tiles = self.b.causal_tiles(em, em.mul(block, BLOCK_M), BLOCK_M, BLOCK_N, tiles)
        with em.loc, em.ip:
            loop = scf.ForOp(em.const(0), tiles, em.const(1), inits)
        lanes = LaneIndex(em.at(ir.InsertionPoint(loop.operation)), lane, p.wave_size)
        self.k_loader = FragmentLoader(p.k_fragments, k_lds, self.t, lanes)
        self.v_loader = FragmentLoader(p.v_fragments, vt_lds, self.t, lanes)
        body = em.at(ir.InsertionPoint(loop.body))
        self.em = body
        carried = list(loop.inner_iter_args)
        r, o_end = q_cols, 2 * q_cols + n_o
        m_new, l_new, o_new, fetched = self.step(
            loop.induction_variable,
            carried[:r],
            carried[r : 2 * r],
            carried[2 * r : o_end],
            carried[o_end:],
            batch,
            q_base,
            lane,
            (k_mem, v_mem),
            k_lds,
            vt_lds,
            mask_mem,
        )
        with body.loc, body.ip:
            scf.YieldOp(m_new + l_new + o_new + fetched)
        self.em = em
        results = list(loop.results)
        self.store(results[r : 2 * r], results[2 * r : o_end], batch, q_base, lane, o_mem)

    def chunk_coords(self, em: Emitter, tid) -> tuple[list, list]:
        """This thread's 16-byte chunks of a tile, (row, col) each: K's (``k_copy_order``: each bank
        phase's stores conflict-free) and V's (consecutive lanes take consecutive keys of one
        head-dim chunk, so each 16-bit store of a wave writes along one V^T row; K's order would
        put them 8 rows apart, in one bank). Computed once, before the key loop."""
        p = self.p
        chunks_per_row = p.head_dim // 8
        total = BLOCK_N * chunks_per_row
        assert total % p.workgroup_size == 0
        group, rows, spacing = p.k_copy
        k_at, v_at = [], []
        for i in range(total // p.workgroup_size):
            cid = em.add(tid, i * p.workgroup_size)
            j, q = em.rem(em.div(cid, group), rows), em.div(cid, group * rows)
            block, t = (
                em.div(em.div(q, chunks_per_row // group), spacing),
                em.rem(em.div(q, chunks_per_row // group), spacing),
            )
            row = em.add(em.mul(block, rows * spacing), em.mul(j, spacing), t)
            k_at.append((row, em.mul(em.add(em.mul(em.rem(q, chunks_per_row // group), group), em.rem(cid, group)), 8)))
            if p.v_transposed:  # (head-dim row, first key): consecutive lanes along one V^T row
                v_at.append((em.div(cid, BLOCK_N // 8), em.mul(em.rem(cid, BLOCK_N // 8), 8)))
            else:
                v_at.append((em.rem(cid, BLOCK_N), em.mul(em.div(cid, BLOCK_N), 8)))
        return k_at, v_at

    def load_tile(self, em: Emitter, mems, batch, key0) -> list[ir.Value]:
        """This thread's chunks of K's and V's tile at ``key0`` (``amdgpu.raw_buffer_load``, 128-bit;
        keys past K2 read 0), K's first."""
        b = self.b
        vt = ir.VectorType.get([8], self.t)
        out = []
        for which, mem, coords, what in ((1, mems[0], self.k_at, "copy_k"), (2, mems[1], self.v_at, "copy_v")):
            c_em = em.named(what)
            if which == 2 and self.p.v_transposed:  # (head-dim row, first key) chunks, along the keys
                out += [b.load_vt(c_em, mem, batch, c_em.add(key0, key), hd) for hd, key in coords]
                continue
            for row, col in coords:
                out.append(
                    c_em.bounded_global_load(
                        mem,
                        b.at(which, batch, c_em.add(key0, row), col),
                        vt,
                        b.bounds(which, b.key_bound()),
                    )
                )
        return out

    def store_tile(self, em: Emitter, values: list[ir.Value], k_lds, vt_lds) -> None:
        """The chunks ``load_tile`` read into LDS: K's whole where its rows are 16-byte aligned (pad
        8), else as two 8-byte halves; V's as 16-bit stores down V^T's columns, each key at the
        column of the hardware K slot that holds it."""
        p = self.p
        split = 1 if (p.head_dim + p.lds_pad) % 8 == 0 else 2
        n = len(self.k_at)
        k_em, v_em = em.named("copy_k"), em.named("copy_v")
        for (row, col), val in zip(self.k_at, values[:n]):
            part = 8 // split
            for h in range(split):
                piece = val if split == 1 else k_em.extract_slice(val, h * part, part)
                k_em.lds_store(piece, k_lds, [row, k_em.add(col, h * part)])
        group = len(p.v_columns)
        identity = p.v_columns == tuple(range(group))

        def column(key):  # the LDS column of the tile's key ``key``: the hardware K slot that holds it
            if identity:
                return key
            return v_em.add(v_em.mul(v_em.div(key, group), group), v_em.table(list(p.v_columns), v_em.rem(key, group)))

        if p.v_transposed:  # 8 keys of one head-dim row: along a V^T row, whole where the columns are the keys
            vsplit = 1 if (BLOCK_N + p.lds_pad) % 8 == 0 else 2  # (V^T's rows 16-byte aligned, or 8)
            part = 8 // vsplit
            for (hd, key), val in zip(self.v_at, values[n:]):
                if identity:
                    for h in range(vsplit):
                        piece = val if vsplit == 1 else v_em.extract_slice(val, h * part, part)
                        v_em.lds_store(piece, vt_lds, [hd, v_em.add(key, h * part)])
                else:
                    for e in range(8):
                        v_em.lds_store(v_em.extract_slice(val, e, 1), vt_lds, [hd, column(v_em.add(key, e))])
            return
        for (row, col), val in zip(self.v_at, values[n:]):
            at = column(row)
            for e in range(8):
                v_em.lds_store(v_em.extract_slice(val, e, 1), vt_lds, [v_em.add(col, e), at])

    def load_mask(self, em: Emitter, mask_mem, batch, q_base, key0, lane) -> list[list[ir.Value]]:
        """The additive mask at this lane's S^T elements of tile ``key0`` ([row block][C element],
        16-bit scalars), from global memory; runs along the keys when they are innermost and K2
        is even, else one load per element. Out-of-range queries and keys read 0."""
        intr, c, b = self.intr, self.intr.c, self.b
        em = em.named("load_mask")
        key_lane = em.add(key0, em.lane_part(c, lane, ROW))
        query_lane = em.add(q_base, em.lane_part(c, lane, COL))
        runs = (
            _widest(c.runs(ROW), ROW)
            if b.mask_order[-1] == len(b.bdims) + 1 and b.keys_even()
            else [Run(e, 1, ro, co) for e, (ro, co) in enumerate(c.element_offsets())]
        )
        bounds = b.mask_bounds()
        out = []
        for j in range(BLOCK_N // intr.m):
            vals = [None] * c.elements
            for run in runs:
                idx = b.mask_at(batch, em.add(query_lane, run.col), em.add(key_lane, j * intr.m + run.row))
                v = em.bounded_global_load(mask_mem, idx, ir.VectorType.get([run.length], b.mask_t), bounds)
                for i in range(run.length):
                    vals[run.first + i] = b.mask_value(em, v, i)
            out.append(vals)
        return out

    def step(self, kt, m_old, l_old, o_old, held, batch, q_base, lane, mems, k_lds, vt_lds, mask_mem):
        p, em, intr = self.p, self.em, self.intr
        d = p.head_dim
        key0 = em.mul(kt, BLOCK_N)
        # 2. K and V^T tiles into LDS (the barrier first: the previous tile's reads are done):
        # prefetched, the chunks loaded during the previous tile (``held``), and the next tile's
        # loads issued after the second barrier, in flight during this tile's math (past the
        # last tile they read keys past K2 or another batch entry's, unused); else loaded here.
        em.barrier()
        chunks = held if p.prefetch else self.load_tile(em, mems, batch, key0)
        self.store_tile(em, chunks, k_lds, vt_lds)
        em.barrier()
        fetched = self.load_tile(em, mems, batch, em.add(key0, BLOCK_N)) if p.prefetch else []

        # 3. S^T = K Q^T: A = K (rows: keys, cols: head dim) from K's LDS rows.
        c = intr.c
        n_s, k_steps = BLOCK_N // intr.m, d // intr.k
        origin = {ROW: em.const(0), COL: em.const(0)}
        s_acc = []
        for j in range(n_s):  # one 16-key row block's fragments at a time (RDNA3's are 8 VGPRs each)
            frags = self.k_loader.load_each(em, origin, [(j, kk) for kk in range(k_steps)])
            acc = em.zero_vector(self.c_t)
            for kk in range(k_steps):
                acc = em.mma(intr, frags[kk], self._q[kk], acc)
            s_acc.append(acc)

        # The additive mask's elements for this tile, read after S^T's instructions are issued (read
        # before the copies, as the mma.sync kernel does, they stay live across S^T: RDNA3 at head
        # dim 128 then spills).
        mask_vals = self.load_mask(em, mask_mem, batch, q_base, key0, lane) if p.mask else None

        # 4. Online softmax on S^T's C layout (keys along rows, the lane's query along columns).
        sm = em.named("softmax")
        self.em = sm
        c_row, c_col = sm.lane_part(c, lane, ROW), sm.lane_part(c, lane, COL)
        factor = self.fconst(p.scale * 1.4426950408889634)
        log2e = self.fconst(1.4426950408889634) if p.mask else None
        neg_inf = self.fconst(-math.inf)
        scores = []
        for j, acc in enumerate(s_acc):
            row = []
            for e in range(c.elements):
                pos = c.op_index(e)
                with sm.loc, sm.ip:
                    s = vector.ExtractOp(acc, static_position=_op_pos(self.c_t, pos), dynamic_position=[]).result
                s = self.f(arith.MulFOp, s, factor)
                if mask_vals is not None:
                    with sm.loc, sm.ip:
                        mv = arith.ExtFOp(self.f32, mask_vals[j][e]).result
                    s = self.f(arith.AddFOp, s, self.f(arith.MulFOp, mv, log2e))
                row.append(s)
            scores.append(row)
        if self.b.key_bound() is not None or p.causal:  # (S^T: keys on C's rows, queries on its columns)
            scores = self.b.mask_keys(
                sm,
                scores,
                key0,
                q_base,
                sm.add(key0, c_row),
                sm.add(q_base, c_col),
                BLOCK_N,
                keys_on_rows=True,
                q_span=intr.n,  # (the wave's queries)
            )
        m_new, m_sub, alpha = [], [], []
        for ci in range(len(self.cols)):
            mine = [s for inst in scores for e, s in enumerate(inst) if self.col_of[e] == ci]
            mx = mine[0]
            for s in mine[1:]:
                mx = self.f(arith.MaximumFOp, mx, s)
            mx = self.col_reduce(mx, arith.MaximumFOp)
            mn = self.f(arith.MaximumFOp, m_old[ci], mx)
            m_new.append(mn)
            sub = mn
            if p.mask:  # a query whose every key so far is masked: subtract 0, not -inf
                with sm.loc, sm.ip:
                    dead = arith.CmpFOp(arith.CmpFPredicate.OEQ, mn, neg_inf).result
                sub = sm.select(dead, self.fconst(0.0), mn)
            m_sub.append(sub)
            alpha.append(self.exp2(self.f(arith.SubFOp, m_old[ci], sub)))
        probs = [
            [self.exp2(self.f(arith.SubFOp, s, m_sub[self.col_of[e]])) for e, s in enumerate(inst)] for inst in scores
        ]
        l_new = []
        for ci in range(len(self.cols)):
            acc = self.f(arith.MulFOp, l_old[ci], alpha[ci])
            for inst in probs:
                for e, pv in enumerate(inst):
                    if self.col_of[e] == ci:
                        acc = self.f(arith.AddFOp, acc, pv)
            l_new.append(acc)
        alpha_vec = self.per_element(alpha)
        o_scaled = [self.f(arith.MulFOp, o, alpha_vec) for o in o_old]

        # 5. P^T (C, f32) -> B operands (16-bit): the planned register route, one per key block.
        conv = em.named("convert_p")
        self.em = conv
        plan = p.conversion.plan
        per_src = plan.source.elements
        src_vec = ir.VectorType.get([per_src], self.f32)
        p_frags = []
        for inst in probs:
            source = conv.from_elements(src_vec, [inst[self.element_at(i)] for i in range(per_src)])
            with conv.loc, conv.ip:
                (op,) = emit_register_route(plan, [source], lane, elem_type=self.t)
            p_frags.append(conv.shape_cast(op, intr.b_shape))

        # 6. O^T += V^T P^T: A = V^T (rows: head dim, cols: keys) from V^T's LDS rows.
        pv = em.named("pv")
        self.em = pv
        n_g = len(p_frags)
        o_new = []
        for i, o in enumerate(o_scaled):  # one 16-row head-dim block's fragments at a time
            vfr = self.v_loader.load_each(pv, origin, [(i, g) for g in range(n_g)])
            for g, pb in enumerate(p_frags):
                o = pv.mma(intr, vfr[g], pb, o)
            o_new.append(o)
        self.em = em
        return m_new, l_new, o_new, fetched

    def store(self, l_lane, o_acc, batch, q_base, lane, o_mem) -> None:
        """7. O^T / l, converted, stored from the C layout (runs along the head dim); queries past
        M dropped."""
        p, intr, b = self.p, self.intr, self.b
        em = self.em.named("store_o")
        self.em = em
        c = intr.c
        c_row, c_col = em.lane_part(c, lane, ROW), em.lane_part(c, lane, COL)
        inv = [self.f(arith.DivFOp, self.fconst(1.0), self.col_reduce(l, arith.AddFOp)) for l in l_lane]
        inv_vec = self.per_element(inv)
        query0 = em.add(q_base, c_col)
        for i, o in enumerate(o_acc):
            out = em.convert(em.shape_cast(self.f(arith.MulFOp, o, inv_vec), [c.op_vector_length]), self.t)
            for run in _widest(c.runs(ROW), ROW):
                piece = em.extract_slice(out, c.op_index(run.first), run.length)
                idx = b.at(3, batch, em.add(query0, run.col), em.add(c_row, i * intr.m + run.row))
                em.bounded_global_store(piece, o_mem, idx, b.bounds(3, p.m if p.m % BLOCK_M else None))


def _widest(runs: list[Run], axis: str, most: int = 128 // 16) -> list[Run]:
    """Runs along ``axis`` cut to at most ``most`` 16-bit elements: one buffer instruction moves
    128 bits at most (RDNA3's A/B fragments hold 16 consecutive K)."""
    out = []
    for run in runs:
        for at in range(0, run.length, most):
            row, col = (run.row + at, run.col) if axis == ROW else (run.row, run.col + at)
            out.append(Run(run.first + at, min(most, run.length - at), row, col))
    return out


def _op_pos(vtype: ir.VectorType, flat: int) -> list[int]:
    pos = []
    for dim in reversed(list(vtype.shape)):
        flat, r = divmod(flat, dim)
        pos.append(r)
    return pos[::-1]
