"""Flash attention on Hopper warpgroup MMA (sm_90a; docs/kernels/flash_attention.md, "Hopper: wgmma"):
O = softmax(Q K^T * scale + mask) V with both products on ``wgmma.mma_async``: Q, K and V read from
shared memory through matrix descriptors, P from registers (the register-A form).

Work split. One workgroup per (block of 64 W queries, batch entry): grid (ceil(M / 64 W), B, 1),
W = 1 or 2 warpgroups of 128 threads (2 when the 128-query blocks still give every SM a workgroup,
else 1), warpgroup w owning queries 64 w .. 64 w + 63 of the block (one m64 instruction row).
Shared memory (one allocation, its address rounded up to 1024 at run time; every tile
128B-swizzled, ``SmemLayout``):

    Q      64 W x d    K-major (A of S = Q K^T)             copied once
    K[2]   n x d       K-major (B of S: B = K^T, K = d)     a two-slot cp.async ring
    V[2]   n x d       MN-major (B of O += P V: K = keys)   a two-slot ring, V as stored

with n = ``block_n`` keys per tile (``BLOCK_N``: 64 at head dim 64, 128 at 128). Per key tile t:

1. ``cp.async.wait_group 0`` (tile t, this thread's chunks), ``fence.proxy.async.shared::cta``
   (cp.async writes through the generic proxy, wgmma reads through the async one), barrier: tile t
   published to both warpgroups, and every warpgroup's wgmmas of tile t - 1 completed (each waited
   for them before this barrier), so slot (t + 1) % 2 is free;
2. the copies of tile t + 1 into that slot (zero-filled past K2 and past the loop), one group;
3. S = Q K^T: d / 16 wgmma m64 n k16, the first with scale-d 0; commit; wait 0;
4. the online softmax on S's accumulator layout (``WarpgroupIntrinsic.c``: per warp, mma.sync's
   C layout repeated along N; a lane holds two rows, shared with the lanes xor 1 and 2), in f32 with
   exp2 (``ex2.approx.ftz``) and log2(e) folded into the scale, keys past K2 / past the query (causal)
   set to -inf in a warp-uniform branch taken by the tiles that hold them, an additive or boolean
   mask read from global memory at each lane's elements; O's accumulator scaled by alpha;
5. O += P V: n / 16 wgmma m64 d k16, A = P from registers: per K step four .b32 registers, each
   two of S's own accumulator elements converted to the inputs' type (``p_in_lane``: in-lane, no
   shuffle), B = V MN-major (imm-trans 1); ``wgmma.fence`` before, commit, wait 0.

After the loop: l summed across the row's lanes, O / l, converted and stored from the accumulator
layout, two columns per store; rows past M are not stored.

The lane executor (``runtime/executor/wgmma.py``) models every piece: the descriptors, the
register-A form, the groups and their waits, the fences, and that a wgmma's shared-memory reads are
ordered before the next write of the same bytes. IREE 3.13's ``nvvm.wgmma.mma_async`` takes A by
descriptor only, so P V is written as ``llvm.inline_asm`` (``pv_wgmma``), the one form of it the
executor models. The two warpgroups meet at the one barrier of each tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import arith, hal, llvm, scf

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.kernels.common.descriptors import (
    ALIGN,
    CHUNK_BYTES,
    shared_start,
    swizzled_offset,
    wgmma_attributes,
)
from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.target.intrinsics import WarpgroupIntrinsic
from mmaflow.compiler.target.layout import COL, ROW
from mmaflow.compiler.target.smem_layout import Major, SmemLayout, Swizzle

WARPGROUP = 128  # threads; each warpgroup owns 64 queries (one m64 instruction row)
BLOCK_NS = (64, 128)  # keys per tile
# Keys per tile, per head dim: 64 at head dim 64 (65 KB of shared memory with two warpgroups,
# 1.43 against 1.63 ms with 128-key tiles at seq 8192 on the H200), 128 at head dim 128 (193 KB,
# one CTA per SM; 2.37 against 2.69 ms with 64-key tiles).
BLOCK_N = {64: 64, 128: 128}
SMEM_LIMIT = 227 * 1024  # sm_90's shared memory per block
LOG2E = 1.4426950408889634
_INTRINSIC = "WGMMA_F32_64x{n}x16_{t}"


@dataclass(frozen=True)
class HopperAttentionPlan:
    """The wgmma kernel's plan: the instructions, tiles and shared-memory layout, as data."""

    target: str
    intrinsic: WarpgroupIntrinsic  # S = Q K^T: m64 n(block_n) k16
    pv_intrinsic: WarpgroupIntrinsic  # O += P V: m64 n(head dim) k16
    batch: int
    m: int
    k2: int
    head_dim: int
    elem: str
    scale: float
    causal: bool
    block_n: int = 128
    warpgroups: int = 2  # 64 queries each: a workgroup's block is 64 * warpgroups queries
    batch_dims: tuple[int, ...] = ()
    mask: str | None = None
    stages: int = 2  # K and V: a two-slot cp.async ring
    transposed: bool = False  # (S = Q K^T, as the mma.sync kernel)

    @property
    def wave_size(self) -> int:
        return 32  # the softmax's shuffles are per warp

    @property
    def workgroup_size(self) -> int:
        return self.warpgroups * WARPGROUP

    @property
    def block_m(self) -> int:
        return self.warpgroups * WARPGROUP // 2

    @property
    def grid(self) -> tuple[int, int, int]:
        return (math.ceil(self.m / self.block_m), self.batch, 1)

    @property
    def key_tiles(self) -> int:
        return math.ceil(self.k2 / self.block_n)

    @property
    def barriers_per_tile(self) -> int:
        return 1

    @property
    def p_fragments(self) -> tuple[tuple[int, ...], ...]:
        """P's register-A fragments, in-lane (``p_in_lane``): per K step of P V, the S elements
        of its A registers in their order."""
        return p_in_lane(self.intrinsic, self.pv_intrinsic)

    # ---- shared memory ---------------------------------------------------------------------------
    @property
    def q_layout(self) -> SmemLayout:
        return SmemLayout(Major.K, Swizzle.B128, 16, self.block_m, self.head_dim)

    @property
    def k_layout(self) -> SmemLayout:
        return SmemLayout(Major.K, Swizzle.B128, 16, self.block_n, self.head_dim)

    @property
    def v_layout(self) -> SmemLayout:
        return SmemLayout(Major.MN, Swizzle.B128, 16, self.head_dim, self.block_n)

    @property
    def offsets(self) -> dict[str, int]:
        """Byte offsets from the 1024-aligned base: Q, K slot 0, V slot 0 (the slots follow at
        their tile's size), and the end."""
        q, k, v = self.q_layout.bytes, self.k_layout.bytes, self.v_layout.bytes
        return {"Q": 0, "K": q, "V": q + self.stages * k, "end": q + self.stages * (k + v)}

    @property
    def lds_bytes(self) -> int:
        return self.offsets["end"] + ALIGN

    def describe(self) -> str:
        mask = "" if not self.mask else ", boolean i1 mask" if self.mask == "i1" else f", additive {self.mask} mask"
        return (
            f"flash attention {self.elem} (wgmma): batch {self.batch}, {self.m} queries x {self.k2} keys, head dim "
            f"{self.head_dim}, scale {self.scale:g}{', causal' if self.causal else ''}{mask}; "
            f"{self.intrinsic.name} (S) and {self.pv_intrinsic.name} (P V), grid {self.grid}, "
            f"{self.workgroup_size} threads ({self.warpgroups} warpgroup(s) of 64 queries), "
            f"{self.key_tiles} key tiles of {self.block_n}, {self.lds_bytes} shared bytes: Q, two-slot cp.async "
            f"rings of K and V (128B-swizzled, descriptors); P in registers (register-A wgmma)"
        )


def p_in_lane(s_intr: WarpgroupIntrinsic, pv_intr: WarpgroupIntrinsic) -> tuple[tuple[int, ...], ...]:
    """Where each register of P V's A operand finds its probability in S's accumulator: per K step
    t of P V (keys 16 t .. 16 t + 15), the S element index of each A element in A's register order.
    The layouts decide (``Layout.coords``), lane by lane: every lane must hold, for each A element at
    (row, key), the S element at (row, 16 t + key) itself. UnsupportedError where a lane would need
    another lane's value (a cross-lane conversion this kernel does not emit)."""
    c, a = s_intr.c, pv_intr.a
    lanes = range(c.wave_size)
    s_at = [{c.coords(lane, e): e for e in range(c.elements)} for lane in lanes]
    steps = []
    for t in range(s_intr.n // pv_intr.k):
        order = [None] * a.elements
        for j in range(a.elements):
            found = {s_at[lane].get((r, col + pv_intr.k * t)) for lane in lanes for r, col in [a.coords(lane, j)]}
            if len(found) != 1 or None in found:
                raise UnsupportedError(
                    f"{pv_intr.name}'s A element {j} is not in-lane with {s_intr.name}'s accumulator at key step {t}"
                )
            order[a.op_index(j)] = found.pop()
        steps.append(tuple(order))
    return tuple(steps)


def plan_hopper(
    tgt, attn, *, causal: bool, mask: str | None, block_n: int | None = None, warpgroups: int | None = None
) -> HopperAttentionPlan:
    """The wgmma kernel's plan for a checked attention (``nvidia.plan_flash_attention`` checked
    types, head dims, scale and sizes); UnsupportedError naming why it cannot be built. By default
    two warpgroups (128 queries) a workgroup when that still makes a workgroup per SM, else one
    (GPT-2's 24 x 256 queries: 96 workgroups of 64 queries, not 48 of 128)."""
    block_n = BLOCK_N[attn.k1] if block_n is None else block_n
    if warpgroups is None:
        blocks = math.ceil(attn.m / WARPGROUP) * math.prod(attn.batch)  # of 128 queries (two warpgroups' 64)
        warpgroups = 2 if blocks >= tgt.compute_units else 1
    if warpgroups not in (1, 2):
        raise UnsupportedError(
            f"warpgroups = {warpgroups}: the wgmma attention kernel takes one or two warpgroups (64 queries each)"
        )
    if block_n not in BLOCK_NS:
        raise UnsupportedError(f"block_n = {block_n}: the wgmma attention kernel takes tiles of {BLOCK_NS} keys")
    t = attn.q_type.upper()
    s_intr = tgt.intrinsic(_INTRINSIC.format(n=block_n, t=t))
    pv_intr = tgt.intrinsic(_INTRINSIC.format(n=attn.k1, t=t))
    plan = HopperAttentionPlan(
        tgt.name,
        s_intr,
        pv_intr,
        math.prod(attn.batch),
        attn.m,
        attn.k2,
        attn.k1,
        attn.q_type,
        float(attn.scale),
        causal,
        block_n,
        warpgroups,
        tuple(attn.batch),
        mask,
    )
    if plan.lds_bytes > SMEM_LIMIT:
        raise UnsupportedError(f"{attn.describe()}: {plan.lds_bytes} bytes of shared memory, sm_90a has {SMEM_LIMIT}")
    return plan


class HopperKernel:
    """Builds the wgmma kernel body (``nvidia._Kernel`` provides addressing, masks and the softmax's
    scalar helpers); one instance per emission."""

    # Mutation hooks for the tests (e2e_tests/test_flash_attention_hopper.py): _slot_skew copies the
    # next tile into the slot of tile + 1 + _slot_skew (1: the slot this tile's wgmmas read);
    # _p_fence False leaves out the wgmma.fence between P's registers and the P V wgmma;
    # _p_rotate feeds each K step of P V the next step's probabilities; _pv_pending is the number of
    # groups P V's wait leaves running (1: its own); _pv_asm_edit rewrites P V's assembly text.
    _slot_skew = 0
    _p_fence = True
    _p_rotate = 0
    _pv_pending = 0
    _pv_asm_edit = None

    def __init__(self, base):
        self.b = base
        self.p, self.em = base.p, base.em
        self.t, self.f32 = base.t, base.f32
        self.i64 = ir.IntegerType.get_signless(64)
        self.rows, self.row_of = base.rows, base.row_of  # the accumulator's rows a lane holds (S's C layout)

    # ---- small emitters ----------------------------------------------------------------------------
    def _op(self, em: Emitter, name: str, operands=(), results=(), attributes=None) -> ir.Operation:
        return em.create(name, operands, results, attributes)

    def _i64(self, em: Emitter, value: int) -> ir.Value:
        with em.loc, em.ip:
            return arith.ConstantOp(self.i64, value).result

    def _add64(self, em: Emitter, a: ir.Value, b) -> ir.Value:
        """a + b, i64; b an int or an index value."""
        with em.loc, em.ip:
            b = self._i64(em, b) if isinstance(b, int) else arith.IndexCastOp(self.i64, b).result
            return arith.AddIOp(a, b).result

    def _struct_t(self, n: int) -> ir.Type:
        return ir.Type.parse("!llvm.struct<(" + ", ".join(["f32"] * (n // 2)) + ")>")

    def _fields(self, em: Emitter, acc: ir.Value, n: int) -> list[ir.Value]:
        return [
            self._op(em, "llvm.extractvalue", [acc], [self.f32], {"position": ir.DenseI64ArrayAttr.get([i])}).result
            for i in range(n // 2)
        ]

    def _struct(self, em: Emitter, values: list[ir.Value], n: int) -> ir.Value:
        st = self._op(em, "llvm.mlir.undef", [], [self._struct_t(n)]).result
        for i, v in enumerate(values):
            st = self._op(
                em, "llvm.insertvalue", [st, v], [st.type], {"position": ir.DenseI64ArrayAttr.get([i])}
            ).result
        return st

    def _proxy_fence(self, em: Emitter) -> None:
        self._op(
            em,
            "nvvm.fence.proxy",
            attributes={"kind": "#nvvm.proxy_kind<async.shared>", "space": "#nvvm.shared_space<cta>"},
        )

    def _wgmma_chain(self, em, intr, acc, a_desc, a_lay, a_steps, b_desc, b_lay, zero_first: bool):
        """``wgmma.fence``, one wgmma per K step (descriptors advanced by each step's static
        offset), ``commit_group``, ``wait_group 0``; returns the accumulator."""
        self._op(em, "nvvm.wgmma.fence.aligned")
        a_k, b_k = a_lay.major is Major.K, b_lay.major is Major.K
        base_a = a_lay.descriptor(0, 0, 0, 64, 16).start_address
        base_b = b_lay.descriptor(0, 0, 0, intr.n, 16).start_address
        for s in range(a_steps):
            da = (a_lay.descriptor(0, 0, 16 * s, 64, 16).start_address - base_a) >> 4
            db = (b_lay.descriptor(0, 0, 16 * s, intr.n, 16).start_address - base_b) >> 4
            ops = [
                self._add64(em, a_desc, da) if da else a_desc,
                self._add64(em, b_desc, db) if db else b_desc,
            ]
            acc = self._op(
                em,
                "nvvm.wgmma.mma_async",
                [acc] + ops,
                [self._struct_t(intr.n)],
                wgmma_attributes(intr, a_k, b_k, zero_d=zero_first and s == 0),
            ).result
        self._op(em, "nvvm.wgmma.commit.group.sync.aligned")
        with em.loc:
            group = ir.IntegerAttr.get(self.i64, 0)
        self._op(em, "nvvm.wgmma.wait.group.sync.aligned", [], [], {"group": group})
        return acc

    # ---- the kernel --------------------------------------------------------------------------------
    def build(self, q_mem, k_mem, v_mem, o_mem, mask_mem=None) -> None:
        p, em, b = self.p, self.em, self.b
        d, n = p.head_dim, p.block_n
        tid = em.thread_id()
        with em.loc, em.ip:
            block, batch_y = hal.interface_workgroup_id(0), hal.interface_workgroup_id(1)
        batch = b.batch_index(em, batch_y)
        wg, lane128 = em.div(tid, WARPGROUP), em.rem(tid, WARPGROUP)
        q0 = em.mul(block, p.block_m)
        q_base = em.add(q0, em.mul(wg, WARPGROUP // 2))  # the warpgroup's first query

        smem = em.named("smem").alloc_lds([p.lds_bytes // 2], self.t)
        _, pad, start = shared_start(em.named("smem"), smem)
        self.smem, self.pad_e = smem, em.div(pad, 2)
        off = p.offsets
        # Descriptors (i64) of each operand's first instruction: base field + the tile's encoded fields.
        enc = {
            "Q": p.q_layout.descriptor(off["Q"], 0, 0, 64, 16).encode(),
            "K": p.k_layout.descriptor(off["K"], 0, 0, n, 16).encode(),
            "V": p.v_layout.descriptor(off["V"], 0, 0, d, 16).encode(),
        }
        with em.loc, em.ip:
            desc = {k: arith.AddIOp(start, self._i64(em, v)).result for k, v in enc.items()}  # no carry: < 2^18
        if p.warpgroups > 1:  # warpgroup 1's rows of Q
            q_step = p.q_layout.linear_offset(WARPGROUP // 2, 0)
            desc["Q"] = self._add64(em, desc["Q"], em.mul(wg, q_step >> 4))
        self.desc = desc

        # Q and key tile 0, one group.
        tiles = em.const(p.key_tiles)
        if p.causal:  # tiles holding a key <= this block's last query
            tiles = em.min_index(em.div(em.add(q0, p.block_m + n - 1), n), tiles)
        self.tiles = tiles
        self.mems = {"K": k_mem, "V": v_mem}
        self.batch, self.tid, self.wg, self.q_base = batch, tid, wg, q_base
        tokens = self.copy_q(em.named("copy_q"), q_mem, batch, q0, tid)
        tokens += self.copy_tile(em, "K", em.const(0), em.const(0), None)
        tokens += self.copy_tile(em, "V", em.const(0), em.const(0), None)
        self.group = em.async_group(tokens)

        neg_inf, zero = b.fconst(-math.inf), b.fconst(0.0)
        r = len(self.rows)
        o_t = ir.VectorType.get([d // 2], self.f32)
        with em.loc, em.ip:
            loop = scf.ForOp(em.const(0), tiles, em.const(1), [neg_inf] * r + [zero] * r + [em.zero_vector(o_t)])
        body = em.at(ir.InsertionPoint(loop.body))
        carried = list(loop.inner_iter_args)
        out = self.step(body, loop.induction_variable, carried[:r], carried[r : 2 * r], carried[2 * r], mask_mem)
        with body.loc, body.ip:
            scf.YieldOp(out)
        em.async_wait(self.group, 0)  # the last iteration's (empty) prefetch
        res = list(loop.results)
        self.store(em, res[r : 2 * r], res[2 * r], batch, q_base, lane128, o_mem)

    def scores(self, em: Emitter, kt) -> ir.Value:
        """S = Q K^T of key tile ``kt`` (its K in slot kt % 2), waited for."""
        p = self.p
        s_em = em.named("s")
        k_desc = self._add64(s_em, self.desc["K"], s_em.mul(s_em.rem(kt, 2), p.k_layout.bytes >> 4))
        undef = self._op(s_em, "llvm.mlir.undef", [], [self._struct_t(p.block_n)]).result
        q_steps = p.head_dim // 16
        return self._wgmma_chain(
            s_em, p.intrinsic, undef, self.desc["Q"], p.q_layout, q_steps, k_desc, p.k_layout, zero_first=True
        )

    def _smem_index(self, em: Emitter, byte_offset) -> ir.Value:
        """The allocation's element index of a byte offset from the aligned base."""
        return em.add(self.pad_e, em.div(byte_offset, 2))

    def copy_q(self, em: Emitter, q_mem, batch, q0, tid) -> list:
        """The block's 64 W x d queries into Q's tile by cp.async (16 bytes a chunk); rows past M
        zero-filled without a read."""
        p, b = self.p, self.b
        per_chunk = CHUNK_BYTES // 2
        per_row = p.head_dim // per_chunk
        tokens = []
        for i in range(p.block_m * per_row // p.workgroup_size):
            cid = em.add(tid, i * p.workgroup_size)
            row, col = em.div(cid, per_row), em.mul(em.rem(cid, per_row), per_chunk)
            query = em.add(q0, row)
            ok = em.lt(query, p.m) if p.m % p.block_m else None
            dst = self._smem_index(em, em.add(p.offsets["Q"], swizzled_offset(em, p.q_layout, row, col)))
            src = b.at(0, batch, query, col)
            tokens.append(em.async_copy(q_mem, src, self.smem, [dst], per_chunk, ok, bypass_l1=True))
        return tokens

    def copy_tile(self, em: Emitter, what: str, kt, slot, valid) -> list:
        """Key tile ``kt`` of K or V (``what``) into its ring slot ``slot`` by cp.async; keys past
        K2, and all where ``valid`` (an i1, or None) is false, zero-filled without a read. Returns
        the copies' tokens."""
        p, b = self.p, self.b
        n = p.block_n
        per_chunk = CHUNK_BYTES // 2
        per_row = p.head_dim // per_chunk
        lay = p.k_layout if what == "K" else p.v_layout
        c_em = em.named(f"copy_{what.lower()}")
        key0 = c_em.mul(kt, n)
        base = c_em.add(p.offsets[what], c_em.mul(slot, lay.bytes))
        tokens = []
        for i in range(n * per_row // p.workgroup_size):
            cid = c_em.add(self.tid, i * p.workgroup_size)
            row, col = c_em.div(cid, per_row), c_em.mul(c_em.rem(cid, per_row), per_chunk)
            key = c_em.add(key0, row)
            ok = c_em.lt(key, p.k2) if p.k2 % n else None
            if valid is not None:
                ok = valid if ok is None else c_em.and_(ok, valid)
            # K: M/N = key, K = head dim; V (MN-major): M/N = head dim, K = key.
            at = swizzled_offset(c_em, lay, row, col) if what == "K" else swizzled_offset(c_em, lay, col, row)
            dst = self._smem_index(c_em, c_em.add(base, at))
            src = b.at(1 if what == "K" else 2, self.batch, key, col)
            tokens.append(c_em.async_copy(self.mems[what], src, self.smem, [dst], per_chunk, ok, bypass_l1=True))
        return tokens

    def step(self, em: Emitter, kt, m_old, l_old, o_old, mask_mem) -> list:
        """Key tile ``kt``: steps 1-5 of the module's docstring; returns m, l and O."""
        p, b = self.p, self.b
        n = p.block_n
        intr = p.intrinsic
        c = intr.c
        batch, q_base = self.batch, self.q_base
        lane128 = em.rem(self.tid, WARPGROUP)
        key0 = em.mul(kt, n)
        mask_vals = self.load_mask(em, mask_mem, batch, q_base, key0, lane128) if p.mask else None
        # 1. Tile kt landed and published; every warpgroup's wgmmas of tile kt - 1 are complete.
        em.async_wait(self.group, 0)
        self._proxy_fence(em)
        em.barrier()
        # 2. Tile kt + 1 into the other slots (zero-filled past the loop).
        nxt = em.add(kt, 1)
        ok = em.lt(nxt, self.tiles)
        into = em.rem(em.add(nxt, self._slot_skew), 2)
        tokens = self.copy_tile(em, "K", nxt, into, ok) + self.copy_tile(em, "V", nxt, into, ok)
        em.async_group(tokens)
        # 3. S = Q K^T.
        s_acc = self.scores(em, kt)
        slot = em.rem(kt, 2)
        # 4. Online softmax on the accumulator layout.
        sm = em.named("softmax")
        b.em = sm
        c_row, c_col = sm.lane_part(c, lane128, ROW), sm.lane_part(c, lane128, COL)
        factor = b.fconst(p.scale * LOG2E)
        log2e = b.fconst(LOG2E) if p.mask else None
        scores = []
        for e, s in enumerate(self._fields(sm, s_acc, n)):
            s = b.f(arith.MulFOp, s, factor)
            if mask_vals is not None:
                with sm.loc, sm.ip:
                    mv = arith.ExtFOp(self.f32, mask_vals[e]).result
                s = b.f(arith.AddFOp, s, b.f(arith.MulFOp, mv, log2e))
            scores.append(s)
        warp_q = sm.add(q_base, sm.mul(sm.div(lane128, 32), 16))  # this warp's first query
        (scores,) = b.mask_keys(sm, [scores], key0, warp_q, sm.add(q_base, c_row), sm.add(key0, c_col), n)
        m_new, m_sub, alpha = b.online_max(b.by_row([[scores]]), m_old)
        probs = [b.exp2(b.f(arith.SubFOp, s, m_sub[self.row_of[e]])) for e, s in enumerate(scores)]
        l_new = b.running_sums(b.by_row([[probs]]), l_old, alpha)
        o_c = p.pv_intrinsic.c
        o_rows = [self.rows.index(r) for r, _ in o_c.element_offsets()]
        alpha_vec = sm.from_elements(o_old.type, [alpha[o_rows[e]] for e in range(o_c.elements)])
        o_scaled = b.f(arith.MulFOp, o_old, alpha_vec)
        # 5. O += P V, P in registers: the register-A wgmma (``pv_wgmma``).
        pv = em.named("pv")
        b.em = pv
        v_desc = self._add64(pv, self.desc["V"], pv.mul(slot, p.v_layout.bytes >> 4))
        o_new = self.pv_wgmma(pv, probs, o_scaled, v_desc)
        b.em = self.em
        return m_new + l_new + [o_new]

    def pv_wgmma(self, em: Emitter, probs: list[ir.Value], o: ir.Value, v_desc: ir.Value) -> ir.Value:
        """O += P V with A = P from registers, waited for; returns O (a vector of the accumulator's
        fields). IREE 3.13's ``nvvm.wgmma.mma_async`` takes A by descriptor only, so the K steps are
        one ``llvm.inline_asm`` (the form ``runtime/executor/wgmma.py`` models): per step, four .b32
        registers of P (``HopperAttentionPlan.p_fragments``: S's own elements, converted to the
        inputs' type two by two) and V's descriptor advanced to the step's keys; O's fields tied
        in and out. A ``wgmma.fence`` orders the registers' writes before it."""
        p = self.p
        intr, lay = p.pv_intrinsic, p.v_layout
        steps = len(p.p_fragments)
        i32 = ir.IntegerType.get_signless(32)
        regs_t = ir.VectorType.get([4], i32)
        half_t = ir.VectorType.get([8], self.f32)
        a_regs = []
        for t in range(steps):
            frag = p.p_fragments[(t + self._p_rotate) % steps]
            packed = em.bitcast(em.convert(em.from_elements(half_t, [probs[e] for e in frag]), self.t), regs_t)
            a_regs += [em.extract(packed, i) for i in range(4)]
        base = lay.descriptor(0, 0, 0, intr.n, 16).start_address
        descs = []
        for t in range(steps):
            step = (lay.descriptor(0, 0, 16 * t, intr.n, 16).start_address - base) >> 4
            descs.append(self._add64(em, v_desc, step) if step else v_desc)
        f = intr.n // 2
        c_fields = [em.extract(o, i) for i in range(f)]
        with em.loc, em.ip:
            one = arith.ConstantOp(i32, 1).result
        if self._p_fence:
            self._op(em, "nvvm.wgmma.fence.aligned")
        t_ptx = {"f16": "f16", "bf16": "bf16"}[p.elem]
        outs = ", ".join(f"${i}" for i in range(f))
        lines = []
        for t in range(steps):
            a = ", ".join(f"${f + 4 * t + i}" for i in range(4))
            lines.append(
                f"wgmma.mma_async.sync.aligned.m64n{intr.n}k16.f32.{t_ptx}.{t_ptx} "
                f"{{{outs}}}, {{{a}}}, ${f + 4 * steps + t}, p, 1, 1, 1;"
            )
        code = "{ .reg .pred p; setp.ne.b32 p, $%d, 0;\n%s\n}" % (f + 5 * steps, "\n".join(lines))
        if self._pv_asm_edit is not None:
            code = self._pv_asm_edit(code)
        constraints = ",".join(["=f"] * f + ["r"] * (4 * steps) + ["l"] * steps + ["r"] + [str(i) for i in range(f)])
        with em.loc, em.ip:
            acc = llvm.InlineAsmOp(
                self._struct_t(intr.n), a_regs + descs + [one] + c_fields, code, constraints, has_side_effects=True
            ).result
        self._op(em, "nvvm.wgmma.commit.group.sync.aligned")
        with em.loc:
            group = ir.IntegerAttr.get(self.i64, self._pv_pending)
        self._op(em, "nvvm.wgmma.wait.group.sync.aligned", [], [], {"group": group})
        return em.from_elements(o.type, self._fields(em, acc, intr.n))

    def load_mask(self, em: Emitter, mask_mem, batch, q_base, key0, lane128) -> list[ir.Value]:
        """The mask at this lane's S elements of the tile (16-bit additive values; an i1 mask's
        bytes turned into 0 / -inf), straight from global memory; queries past M and keys past K2
        read 0 (those scores are never stored or are -inf). With the keys innermost and K2 even,
        each run of two keys is one load."""
        p, b, c = self.p, self.b, self.p.intrinsic.c
        em = em.named("load_mask")
        row0 = em.add(q_base, em.lane_part(c, lane128, ROW))
        col0 = em.add(key0, em.lane_part(c, lane128, COL))
        pairs = b.mask_order[-1] == len(b.bdims) + 1 and p.k2 % 2 == 0
        runs = c.runs(COL) if pairs else None
        bounds = b.mask_bounds()
        vals = [None] * c.elements
        if runs is None:
            for e, (ro, co) in enumerate(c.element_offsets()):
                idx = b.mask_at(batch, em.add(row0, ro), em.add(col0, co))
                v = em.bounded_global_load(mask_mem, idx, ir.VectorType.get([1], b.mask_t), bounds)
                vals[e] = b.mask_value(em, v, 0)
            return vals
        for run in runs:
            idx = b.mask_at(batch, em.add(row0, run.row), em.add(col0, run.col))
            v = em.bounded_global_load(mask_mem, idx, ir.VectorType.get([run.length], b.mask_t), bounds)
            for i in range(run.length):
                vals[run.first + i] = b.mask_value(em, v, i)
        return vals

    def store(self, em: Emitter, l_lane, o, batch, q_base, lane128, o_mem) -> None:
        """O / l, converted, stored from the accumulator layout; rows past M dropped."""
        p, b = self.p, self.b
        em = em.named("store_o")
        b.em = em
        c = p.pv_intrinsic.c
        c_row, c_col = em.lane_part(c, lane128, ROW), em.lane_part(c, lane128, COL)
        inv = [b.f(arith.DivFOp, b.fconst(1.0), b.row_reduce(l, arith.AddFOp)) for l in l_lane]
        rows = [self.rows.index(r) for r, _ in c.element_offsets()]
        inv_vec = em.from_elements(o.type, [inv[rows[e]] for e in range(c.elements)])
        out = em.convert(b.f(arith.MulFOp, o, inv_vec), self.t)
        row0 = em.add(q_base, c_row)
        for run in c.runs(COL):
            piece = em.extract_slice(out, c.op_index(run.first), run.length)
            idx = b.at(3, batch, em.add(row0, run.row), em.add(c_col, run.col))
            em.bounded_global_store(piece, o_mem, idx, b.bounds(3, p.m if p.m % p.block_m else None))
