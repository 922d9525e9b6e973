"""Flash attention on Hopper warpgroup MMA (sm_90a; docs/kernels/flash_attention.md, "Hopper: wgmma"):
O = softmax(Q K^T * scale + mask) V with both products on ``wgmma.mma_async``: Q, K and V read from
shared memory through matrix descriptors, P from registers (the register-A form).

Work split. One workgroup per (block of 64 W queries, batch entry): grid (ceil(M / 64 W), B, 1),
W = 1 or 2 warpgroups of 128 threads (2 when the 128-query blocks still give every SM a workgroup,
else 1), warpgroup w owning queries 64 w .. 64 w + 63 of the block (one m64 instruction row).
Shared memory (one allocation, its address rounded up to 1024 at run time; every tile
128B-swizzled, ``SmemLayout``):

    Q      64 W x d    K-major (A of S = Q K^T)             copied once
    K[S]   n x d       K-major (B of S: B = K^T, K = d)     a ring: two cp.async slots, or S TMA ones
    V[S]   n x d       MN-major (B of O += P V: K = keys)   a ring, V as stored

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

Producer (``producer``: the default at head dim 128, ``PRODUCER_BY_HEAD_DIM``). A third warpgroup,
W, copies Q, K and V by TMA (``_AttentionRing``), and the computing warpgroups never meet at a CTA
barrier: each runs its own loop as fast as its tiles land, so one's softmax runs while another's
wgmmas do. Shared memory gains three tensor maps (Q, K, V: the head dim innermost, then the rows,
then the batch dims, whatever the storage order) and mbarriers: Q's, and per slot a "full" (one
arrival, the producer's, expecting the tile's bytes) and an "empty" (every computing thread's).
V's tile is laid K-atoms fastest (``SmemLayout.k_atoms_fastest``) so that each 64-column atom of
either tile is one box of 64 columns x rows. The producer's one issuing thread acquires the maps,
copies Q, then per key tile t waits for slot t % S's "empty" phase t / S - 1 (the first S pass),
expects the tile's bytes on its "full" mbarrier and issues K's and V's boxes; keys past K2 and
queries past M read 0 (zero fill). The computing warpgroups wait for Q, then per tile for its
"full" phase (parity (t / S) % 2) instead of steps 1-2, and after P V's wait every thread arrives on
"empty". ``setmaxnreg``: the producer drops to PRODUCER_REGISTERS, the computing warpgroups take
the rest of the launch pool (``common.tma.consumer_share``). The maps live in per-SM slots of a
module global, so the allocation is padded to ``ONE_BLOCK_PER_SM`` (``kernels/common/tma.py``).
The grid is persistent (``workers``: one workgroup an SM, ``PERSISTENT``): both roles loop over
the workgroup's blocks of queries (every workers-th), the ring's count running on across them, so
the producer copies the next block's Q and first tiles while the computing warpgroups finish this
one; Q's tile is refilled once every computing thread arrived on Q's "empty" mbarrier after its
last S (the maps are built once a workgroup, not once a block). The count divides the blocks
(``persistent_workers``), so every workgroup's loop runs as many times. H200, head dim 128:
1.05-1.09x the grid of one workgroup a block.

Ping-pong (``pingpong``: the producer form's two computing warpgroups, FlashAttention-3's
schedule). The warpgroups take turns at the tensor cores through two named barriers (ids 1 and
2, one each, counting both warpgroups' 256 threads): a warpgroup waits for its turn
(``bar.sync`` on its own) before P V, issues P V and then the next tile's S, and hands the turn
over (``bar.arrive`` on the other's) once S is issued; its softmax then runs while the other's
P V and S do. Warpgroup 0 arrives on its own barrier once at the start (the first turn is
its); each block starts with a wait and ends with a hand-over. Both warpgroups loop over the same
key tiles (the block's), so every wait meets its hand-over; the last hand-over of the kernel has
no one waiting for it. The barriers order only when each warpgroup issues: the data is ordered by
the ring's mbarriers as before.

The lane executor (``runtime/executor/wgmma.py``) models every piece: the descriptors, the
register-A form, the groups and their waits, the fences, and that a wgmma's shared-memory reads are
ordered before the next write of the same bytes. IREE 3.13's ``nvvm.wgmma.mma_async`` takes A by
descriptor only, so P V is written as ``llvm.inline_asm`` (``pv_wgmma``), the one form of it the
executor models. In the cp.async form the two warpgroups meet at the one barrier of each tile.
The executor runs each warpgroup of a ping-pong as its own task (``runtime/executor/ops.py``,
"named barriers"), so a left-out turn deadlocks there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import arith, hal, llvm, nvvm, scf

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.kernels.common.descriptors import (
    ALIGN,
    CHUNK_BYTES,
    shared_start,
    swizzled_offset,
    wgmma_attributes,
)
from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.kernels.common.tma import (
    MAP_BYTES,
    MAP_SLOTS,
    ONE_BLOCK_PER_SM,
    PRODUCER_REGISTERS,
    TmaEmitter,
    consumer_share,
)
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
ATTENTION_MAPS = "mmaflow_attention_maps"  # the module global of the per-SM map slots (Q, K, V)
# A producer warpgroup by head dim (H200, f16, seq 2048 / 4096, one A/B run; docs/PERFORMANCE.md, "Flash attention"):
# at 128 0.530 / 0.972 ms against the cp.async form's 0.619 / 1.158; at 64 slower, 0.870 / 1.636 against 0.704 / 1.357.
PRODUCER_BY_HEAD_DIM = {64: False, 128: True}
PRODUCER_STAGES = {64: 4, 128: 2}  # the producer's ring slots per head dim (shared memory bounds 128 to 2-3)
# FlashAttention-3's ping-pong of the two computing warpgroups (named barriers; "Ping-pong" in the module
# docstring). H200, f16, head dim 128, against the same kernel without, one run: seq 8192 1.834 -> 1.743 ms,
# causal 0.999 -> 0.947; seq 2048 0.493 -> 0.492 (bf16 0.487 -> 0.492).
PINGPONG = True
PERSISTENT = True  # the producer form's grid: one workgroup an SM, looping over blocks
MAP_RANK = 5  # a tensor map's dimensions at most: head dim, rows and up to three batch dims


@dataclass(frozen=True)
class HopperAttentionPlan:
    """The wgmma kernel's plan: the instructions, tiles and shared-memory layout, as data."""

    v_transposed = False  # (not a field: its TMA boxes read V head dim innermost, ``plan_flash_attention``)
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
    stages: int = 2  # K and V: ring slots (cp.async: two)
    transposed: bool = False  # (S = Q K^T, as the mma.sync kernel)
    producer: bool = False  # a producer warpgroup copies Q, K and V by TMA ("Producer" in the module docstring)
    copy_note: str = ""  # why the producer was not taken, where it was asked for
    workers: int = 0  # (producer) a persistent grid of this many workgroups, each looping over blocks; 0: one a block
    causal_rows: int = 0  # causal query positions restart every this many rows (GQA folded); 0: position = row
    pingpong: bool = False  # (producer, two warpgroups) the warpgroups take turns at the tensor cores

    @property
    def wave_size(self) -> int:
        return 32  # the softmax's shuffles are per warp

    @property
    def workgroup_size(self) -> int:
        return (self.warpgroups + self.producer) * WARPGROUP

    @property
    def block_m(self) -> int:
        return self.warpgroups * WARPGROUP // 2

    @property
    def grid(self) -> tuple[int, int, int]:
        if self.workers:
            return (self.workers, 1, 1)
        return (math.ceil(self.m / self.block_m), self.batch, 1)

    @property
    def items(self) -> int:
        """Blocks of queries (of one batch entry each) the grid computes."""
        return math.ceil(self.m / self.block_m) * self.batch

    @property
    def key_tiles(self) -> int:
        return math.ceil(self.k2 / self.block_n)

    @property
    def barriers_per_tile(self) -> int:
        return 0 if self.producer else 1  # (the producer's roles meet at mbarriers only)

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
        # With TMA copies each 64-column atom's key lines are contiguous: one box per atom.
        return SmemLayout(Major.MN, Swizzle.B128, 16, self.head_dim, self.block_n, k_atoms_fastest=self.producer)

    @property
    def offsets(self) -> dict[str, int]:
        """Byte offsets from the 1024-aligned base: Q, K slot 0, V slot 0 (the slots follow at
        their tile's size); with a producer the three tensor maps, Q's mbarrier, the slots' "full"
        and "empty" mbarriers; and the end."""
        q, k, v = self.q_layout.bytes, self.k_layout.bytes, self.v_layout.bytes
        out = {"Q": 0, "K": q, "V": q + self.stages * k, "end": q + self.stages * (k + v)}
        if self.producer:
            maps = -(-out["end"] // MAP_BYTES) * MAP_BYTES
            bars = maps + 3 * MAP_BYTES
            out.update(maps=maps, q_full=bars, q_empty=bars + 8, full=bars + 16, empty=bars + 16 + 8 * self.stages)
            out["end"] = bars + 16 + 16 * self.stages
        return out

    @property
    def lds_bytes(self) -> int:
        used = self.offsets["end"] + ALIGN
        return max(used, ONE_BLOCK_PER_SM) if self.producer else used  # (per-SM map slots: one block an SM)

    @property
    def tx_bytes(self) -> dict[str, int]:
        """Bytes the TMA boxes of Q and of one key tile (K and V) deliver."""
        return {"Q": self.q_layout.bytes, "KV": self.k_layout.bytes + self.v_layout.bytes}

    def describe(self) -> str:
        mask = "" if not self.mask else ", boolean i1 mask" if self.mask == "i1" else f", additive {self.mask} mask"
        return (
            f"flash attention {self.elem} (wgmma): batch {self.batch}, {self.m} queries x {self.k2} keys, head dim "
            f"{self.head_dim}, scale {self.scale:g}{causal_words(self)}{mask}; "
            f"{self.intrinsic.name} (S) and {self.pv_intrinsic.name} (P V), grid {self.grid}, "
            f"{self.workgroup_size} threads ({self.warpgroups} warpgroup(s) of 64 queries"
            f"{' and a producer' if self.producer else ''}), "
            f"{self.key_tiles} key tiles of {self.block_n}, {self.lds_bytes} shared bytes: Q, "
            + (
                f"{self.stages}-slot TMA rings of K and V filled by a producer warpgroup (mbarriers)"
                if self.producer
                else "two-slot cp.async rings of K and V"
            )
            + " (128B-swizzled, descriptors); P in registers (register-A wgmma)"
            + (f"; persistent: {self.workers} workgroups loop over {self.items} blocks" if self.workers else "")
            + ("; the warpgroups ping-pong (named barriers)" if self.pingpong else "")
            + (f"; {self.copy_note}" if self.copy_note else "")
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


def causal_words(plan) -> str:
    """How a plan's describe() names its causal masking ("" when not causal)."""
    if not plan.causal:
        return ""
    return f", causal (positions restart every {plan.causal_rows} rows)" if plan.causal_rows else ", causal"


def persistent_workers(items: int, cap: int) -> int:
    """A persistent grid's workgroups for ``items`` blocks: the most, at most ``cap``, that divide
    them (every workgroup loops over items / workers blocks: the loop's bounds are uniform), where
    that takes no more rounds than ``cap`` workgroups would (ceil(items / cap)); 0 where none does
    (the grid stays one workgroup a block)."""
    rounds = -(-items // cap)
    for w in range(min(cap, items), 0, -1):
        if items % w == 0:
            return w if items // w == rounds else 0
    return 0


def plan_hopper(
    tgt,
    attn,
    *,
    causal: bool,
    mask: str | None,
    block_n: int | None = None,
    warpgroups: int | None = None,
    producer: bool | None = None,
    stages: int | None = None,
    persistent: bool | int | None = None,
    causal_rows: int = 0,
    pingpong: bool | None = None,
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
    asked, note = producer, ""
    if producer is None:
        producer = PRODUCER_BY_HEAD_DIM[attn.k1]
    if producer and len(attn.batch) > MAP_RANK - 2:
        note = f"cp.async copies: {len(attn.batch)} batch dims, a tensor map has at most {MAP_RANK - 2}"
        if asked:
            raise UnsupportedError(f"producer: {note}")
        producer = False
    if stages is None:
        stages = PRODUCER_STAGES[attn.k1] if producer else 2
    if not producer and stages != 2:
        raise UnsupportedError(
            f"stages = {stages}: without a producer the wgmma attention kernel has a two-slot cp.async ring"
        )
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
        stages,
        producer=producer,
        copy_note=note,
        causal_rows=causal_rows,
    )
    if persistent is not None and not isinstance(persistent, bool) and persistent < 1:
        raise UnsupportedError(f"persistent = {persistent}: a persistent grid has at least one workgroup")
    if persistent and not producer:
        raise UnsupportedError("persistent: the workgroups loop over blocks in the producer form only (producer=True)")
    if producer and (PERSISTENT if persistent is None else persistent):
        # (an int: at most that many workgroups; the tests' way to give each several blocks)
        cap = tgt.compute_units if persistent is None or persistent is True else int(persistent)
        workers = persistent_workers(plan.items, cap)
        why = f"no count of at most {cap} workgroups divides the {plan.items} blocks in as few rounds"
        if not workers and persistent:
            raise UnsupportedError(f"persistent: {why}")
        plan = dataclasses.replace(
            plan, workers=workers, copy_note=plan.copy_note or ("" if workers else f"a workgroup a block: {why}")
        )
    if pingpong is None:
        pingpong = PINGPONG and producer and warpgroups == 2
    if pingpong and not (producer and warpgroups == 2):
        raise UnsupportedError("pingpong: two computing warpgroups take turns in the producer form only")
    plan = dataclasses.replace(plan, pingpong=pingpong)
    if producer and not 2 <= stages <= 8:
        raise UnsupportedError(f"stages = {stages}: the producer's TMA ring takes 2 to 8 slots")
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
    # groups P V's wait leaves running (1: its own); _pv_asm_edit rewrites P V's assembly text;
    # _turns_left_out names ping-pong barriers not emitted ("first", "wait", "handover", "last": ``_turn``);
    # _release_q_unwaited releases Q's tile between the block's last S and its wait.
    _slot_skew = 0
    _p_fence = True
    _p_rotate = 0
    _pv_pending = 0
    _pv_asm_edit = None
    _turns_left_out: frozenset = frozenset()
    _release_q_unwaited = False  # Q's tile released before the block's last S is waited for

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

    def _proxy_fence(self, em: Emitter) -> None:
        self._op(
            em,
            "nvvm.fence.proxy",
            attributes={"kind": "#nvvm.proxy_kind<async.shared>", "space": "#nvvm.shared_space<cta>"},
        )

    def _wgmma_chain(self, em, intr, acc, a_desc, a_lay, a_steps, b_desc, b_lay, zero_first: bool, issued=None):
        """``wgmma.fence``, one wgmma per K step (descriptors advanced by each step's static
        offset), ``commit_group``, ``issued(em)`` if given, ``wait_group 0``; returns the accumulator."""
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
        if issued is not None:
            issued(em)
        with em.loc:
            group = ir.IntegerAttr.get(self.i64, 0)
        self._op(em, "nvvm.wgmma.wait.group.sync.aligned", [], [], {"group": group})
        return acc

    def _turn(self, em, which: str) -> None:
        """The ping-pong's named barriers, one per computing warpgroup (ids 1 and 2; 0 is the CTA
        barrier), each counting both warpgroups' 256 threads. ``which``: "first" (warpgroup 0
        arrives on its own, so that its first wait passes), "wait" (for this warpgroup's turn:
        ``bar.sync`` on its own), "handover" (after its S is issued) and "last" (after its last
        P V): ``bar.arrive`` on the other's."""
        if which in self._turns_left_out:
            return
        whose, wait = {"first": ("own", False), "wait": ("own", True)}.get(which, ("other", False))
        i32 = ir.IntegerType.get_signless(32)
        em = em.named("pingpong")
        bid = em.add(self.wg, 1) if whose == "own" else em.sub(em.const(2), self.wg)
        with em.loc, em.ip:
            bid = arith.IndexCastOp(i32, bid).result
            n = arith.ConstantOp(i32, 2 * WARPGROUP).result
            if wait:
                nvvm.BarrierOp(barrierId=bid, numberOfThreads=n, aligned=True)
            else:
                nvvm.BarrierArriveOp(n, barrierId=bid, aligned=True)

    # ---- the kernel --------------------------------------------------------------------------------
    def build(self, q_mem, k_mem, v_mem, o_mem, mask_mem=None) -> None:
        p, em, b = self.p, self.em, self.b
        d, n = p.head_dim, p.block_n
        tid = em.thread_id()
        with em.loc, em.ip:
            x, y = hal.interface_workgroup_id(0), hal.interface_workgroup_id(1)
        wg, lane128 = em.div(tid, WARPGROUP), em.rem(tid, WARPGROUP)
        self.tid, self.wg = tid, wg

        smem = em.named("smem").alloc_lds([p.lds_bytes // 2], self.t)
        address, pad, start = shared_start(em.named("smem"), smem)
        self.smem, self.pad_e, self.address = smem, em.div(pad, 2), address
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

        self.mems = {"K": k_mem, "V": v_mem}
        if p.producer:
            self.build_specialized(em, x, y, q_mem, k_mem, v_mem, o_mem, mask_mem)
            return
        q0 = self.block_of(em, self._heavy_first(em, x), y)  # grid (blocks, batch): a block of queries a workgroup
        batch, q_base, tiles = self.batch, self.q_base, self.tiles
        # Q and key tile 0, one group.
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

    def block_of(self, em: Emitter, block, batch_lin) -> ir.Value:
        """Block ``block`` of queries of batch entry ``batch_lin`` (linear): sets ``batch``,
        ``q_base`` and ``tiles`` for the emitters that follow; returns the block's first query."""
        p, n = self.p, self.p.block_n
        q0 = em.mul(block, p.block_m)
        self.batch = self.b.batch_index(em, batch_lin)
        self.q_base = em.add(q0, em.mul(self.wg, WARPGROUP // 2))
        tiles = em.const(p.key_tiles)
        if p.causal:  # tiles holding a key <= this block's last query
            tiles = self.b.causal_tiles(em, q0, p.block_m, n, tiles)
        self.tiles = tiles
        return q0

    def item(self, em: Emitter, item) -> ir.Value:
        """``block_of`` work item ``item`` (blocks of one batch entry consecutive)."""
        blocks = math.ceil(self.p.m / self.p.block_m)
        return self.block_of(em, self._heavy_first(em, em.rem(item, blocks)), em.div(item, blocks))

    def _heavy_first(self, em: Emitter, block) -> ir.Value:
        """Causal: a batch entry's blocks of queries last to first, so the longest (most key tiles) start
        first and the short ones fill the tail (FlashAttention-2's order); else ``block``."""
        if not self.p.causal:
            return block
        return em.sub(em.const(math.ceil(self.p.m / self.p.block_m) - 1), block)

    def _items(self, em: Emitter, first, step: int, name: str):
        """This workgroup's work items: a persistent grid's loop over j < items / workers (the same
        count in every workgroup: ``persistent_workers``), item first + j * step, carrying the
        ring's count; else the one item, straight. (loop or None, the Emitter of its body, the
        item, j, the ring's count before it)."""
        if not self.p.workers:
            return None, em, first, em.const(0), em.const(0)
        with em.loc, em.ip:
            loop = scf.ForOp(em.const(0), em.const(self.p.items // step), em.const(1), [em.const(0)])
        body = em.at(ir.InsertionPoint(loop.body)).named(name)
        j = loop.induction_variable
        mine = first
        if self.p.causal:
            # Causal blocks cost their diagonal: odd rounds run backwards, so a workgroup's short blocks pair with
            # long ones (blocks of a batch entry consecutive; where the workers are a multiple of them, every
            # workgroup would otherwise get the same block of each).
            odd = body.eq(body.rem(j, 2), 1)
            mine = body.select(odd, body.sub(body.const(step - 1), first), first)
        return loop, body, body.add(mine, body.mul(j, step)), j, loop.inner_iter_args[0]

    def build_specialized(self, em: Emitter, x, y, q_mem, k_mem, v_mem, o_mem, mask_mem) -> None:
        """The producer form ("Producer" in the module docstring): the maps and mbarriers, then the
        roles: warpgroups 0 .. W-1 compute (their loop as the cp.async form's, waiting on each
        tile's "full" mbarrier and releasing its slot on "empty"), warpgroup W copies. Both loop
        over this workgroup's work items (blocks of queries: one, or with ``workers`` every
        workers-th), the ring's count running on across them; Q's tile is refilled once every
        computing thread arrived on Q's "empty" mbarrier after its last S."""
        p, b = self.p, self.b
        d, r = p.head_dim, len(self.rows)
        ring = self.ring = _AttentionRing(self, em)
        ring.setup(em, [q_mem, k_mem, v_mem])
        first = em.add(x, em.mul(y, p.grid[0]))  # this workgroup's first item (x, y: its ids)
        step = p.grid[0] * p.grid[1]
        consumer = em.lt(self.tid, p.warpgroups * WARPGROUP)
        with em.loc, em.ip:
            role = scf.IfOp(consumer, [], has_else=True)
        mma = em.at(ir.InsertionPoint(role.then_block)).named("consumer")
        with mma.loc, mma.ip:
            nvvm.SetMaxRegisterOp(consumer_share(p.warpgroups, PRODUCER_REGISTERS), "increase")
        if p.pingpong:  # warpgroup 0 takes the first turn
            self._turn(mma.if_then(mma.eq(self.wg, 0)), "first")
        items, it, item, j, base = self._items(mma, first, step, "consumer")
        self.item(it, item)
        ring.wait_q(it, j)
        if p.pingpong:
            self._turn(it, "wait")
        b.em = it
        neg_inf, zero = b.fconst(-math.inf), b.fconst(0.0)
        o_t = ir.VectorType.get([d // 2], self.f32)
        init = [neg_inf] * r + [zero] * r + [it.zero_vector(o_t)]
        with it.loc, it.ip:
            loop = scf.ForOp(it.const(0), self.tiles, it.const(1), init)
        body = it.at(ir.InsertionPoint(loop.body))
        carried = list(loop.inner_iter_args)
        kt = loop.induction_variable
        out = self.step(body, kt, carried[:r], carried[r : 2 * r], carried[2 * r], mask_mem, body.add(base, kt))
        with body.loc, body.ip:
            scf.YieldOp(out)
        if p.pingpong:
            self._turn(it, "last")
        res = list(loop.results)
        self.store(it, res[r : 2 * r], res[2 * r], self.batch, self.q_base, it.rem(self.tid, WARPGROUP), o_mem)
        b.em = self.em
        if items is not None:
            with it.loc, it.ip:
                scf.YieldOp([it.add(base, self.tiles)])
        with mma.loc, mma.ip:
            scf.YieldOp([])
        prod = em.at(ir.InsertionPoint(role.else_block)).named("producer")
        with prod.loc, prod.ip:
            nvvm.SetMaxRegisterOp(PRODUCER_REGISTERS, "decrease")
        one = prod.if_then(prod.eq(self.tid, p.warpgroups * WARPGROUP))
        ring.acquire_maps(one, ring.gmaps)
        pitems, pit, item, j, base = self._items(one, first, step, "producer")
        q0 = self.item(pit, item)
        ring.produce(pit, q0, j, base)
        if pitems is not None:
            with pit.loc, pit.ip:
                scf.YieldOp([pit.add(base, self.tiles)])
        with prod.loc, prod.ip:
            scf.YieldOp([])

    def scores(self, em: Emitter, kt, last=None) -> ir.Value:
        """S = Q K^T of the tile in ring slot ``kt`` % stages, waited for; where ``last`` (an i1:
        the block's last tile), Q's tile released after the wait (the producer form)."""
        p = self.p
        s_em = em.named("s")
        k_desc = self._add64(s_em, self.desc["K"], s_em.mul(s_em.rem(kt, p.stages), p.k_layout.bytes >> 4))
        undef = self._op(s_em, "llvm.mlir.undef", [], [self._struct_t(p.block_n)]).result
        q_steps = p.head_dim // 16

        def issued(e):
            if p.pingpong:
                self._turn(e, "handover")
            if last is not None and self._release_q_unwaited:
                self.ring.release_q(e.if_then(last))

        acc = self._wgmma_chain(
            s_em, p.intrinsic, undef, self.desc["Q"], p.q_layout, q_steps, k_desc, p.k_layout, True, issued
        )
        if last is not None and not self._release_q_unwaited:
            self.ring.release_q(s_em.if_then(last))
        return acc

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

    def step(self, em: Emitter, kt, m_old, l_old, o_old, mask_mem, ring_n=None) -> list:
        """Key tile ``kt``: steps 1-5 of the module's docstring; returns m, l and O. ``ring_n``: the
        producer form's ring count of the tile (slot and phase; default ``kt``)."""
        ring_n = kt if ring_n is None else ring_n
        p, b = self.p, self.b
        n = p.block_n
        intr = p.intrinsic
        c = intr.c
        batch, q_base = self.batch, self.q_base
        lane128 = em.rem(self.tid, WARPGROUP)
        key0 = em.mul(kt, n)
        mask_vals = self.load_mask(em, mask_mem, batch, q_base, key0, lane128) if p.mask else None
        if p.producer:  # tile kt's K and V landed (its "full" phase)
            self.ring.wait_full(em, ring_n)
        else:
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
        # (the producer form: the block's last S waited for, Q's tile is free for the next block's)
        s_acc = self.scores(em, ring_n, em.eq(em.add(kt, 1), self.tiles) if p.producer else None)
        slot = em.rem(ring_n, p.stages)
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
        (scores,) = b.mask_keys(sm, [scores], key0, warp_q, sm.add(q_base, c_row), sm.add(key0, c_col), n, q_span=16)
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
        if p.pingpong:
            self._turn(pv, "wait")
        o_new = self.pv_wgmma(pv, probs, o_scaled, v_desc)
        if p.producer:  # this warpgroup's wgmmas on the slot completed: the producer may refill it
            self.ring.release(pv, ring_n)
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
        t_ptx = intr.ptx_type("A")
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


class _AttentionRing(TmaEmitter):
    """The producer form's copies (``HopperKernel.build_specialized``): three tensor maps (Q, K,
    V: the head dim innermost, then the rows, then the batch dims), one box of 64 head-dim
    columns x rows per 64-column atom, box j at j x rows x 128 bytes of the tile (where
    ``SmemLayout`` puts atom j: ``test_producer_boxes_are_the_layouts_atoms``), Q's mbarrier and
    each slot's "full" and "empty" mbarriers."""

    # Mutation hooks (e2e_tests/test_flash_attention_hopper.py): the producer skips its wait for
    # the slot's release / a warpgroup never releases; the consumers wait on the wrong parity.
    _skip_empty_wait = False
    _skip_release = False
    _flip_parity = False

    def __init__(self, kernel: "HopperKernel", em: Emitter):
        super().__init__()
        self.k, self.p = kernel, kernel.p
        self.base = self.to64(em, kernel.address)

    def bar(self, em, name: str, slot=None):
        off = self.p.offsets[name]
        addr = self.add64(em, self.base, off)
        if slot is not None:
            addr = self.add64(em, addr, self.to64(em, em.mul(slot, 8)))
        return self.ptr(em, addr, 3)

    def setup(self, em, mems: list) -> None:
        """Thread 0: the maps (tensormap.replace on zero bytes) and the mbarriers (Q's: one
        arrival; "full": one, the producer's; "empty": every computing thread's); barrier; warp 0
        publishes the maps to this SM's slot; barrier. The producer acquires them (``produce``)."""
        p, k = self.p, self.k
        maps_sh = [self.add64(em, self.base, p.offsets["maps"] + MAP_BYTES * i) for i in range(3)]
        gslot, smid = self.sm_slot(em, self.maps_global(k.b.fn.operation, em, ATTENTION_MAPS, 3), 3)
        self.gmaps = [self.add64(em, gslot, MAP_BYTES * i) for i in range(3)]
        t0 = em.if_then(em.eq(k.tid, 0))
        with t0.loc, t0.ip:
            self._trap_unless(t0, arith.CmpIOp(arith.CmpIPredicate.ult, smid, self.c32(t0, MAP_SLOTS)).result)
        self.zero_maps(t0, maps_sh[0], 3)
        nb = len(k.b.bdims)
        for w, (mem, msh, rows) in enumerate(zip(mems, maps_sh, (p.block_m, p.block_n, p.block_n))):
            order = list(k.b.orders[w])
            dims = [order.index(nb + 1), order.index(nb)] + [order.index(i) for i in reversed(range(nb))]
            self.build_map(t0, mem, p.elem, (64, rows), "QKV"[w], self.ptr(t0, msh, 3), order=dims)
        with t0.loc, t0.ip:
            nvvm.MBarrierInitOp(self.bar(t0, "q_full"), self.c32(t0, 1))
            nvvm.MBarrierInitOp(self.bar(t0, "q_empty"), self.c32(t0, p.warpgroups * WARPGROUP))
            for s in range(p.stages):
                nvvm.MBarrierInitOp(self.bar(t0, "full", t0.const(s)), self.c32(t0, 1))
                nvvm.MBarrierInitOp(self.bar(t0, "empty", t0.const(s)), self.c32(t0, p.warpgroups * WARPGROUP))
            nvvm.FenceMbarrierInitOp()
        em.barrier()
        self.publish_maps(em.if_then(em.lt(k.tid, 32)), self.gmaps, maps_sh)
        em.barrier()

    def _copy(self, em, which: int, dst_off, row, bar) -> None:
        """Tensor ``which`` (0 Q, 1 K, 2 V)'s box rows from ``row`` into shared offset ``dst_off``
        (an index value): one box per 64-column atom, box j at j x rows x 128 bytes."""
        k, p = self.k, self.p
        rows = p.block_m if which == 0 else p.block_n
        for j in range(p.head_dim // 64):
            dst = self.ptr(em, self.add64(em, self.base, self.to64(em, em.add(dst_off, j * rows * 128))), 7)
            coords = [self.c32(em, 64 * j), self.to32(em, row)] + [self.to32(em, v) for v in reversed(k.batch)]
            with em.loc, em.ip:
                nvvm.CpAsyncBulkTensorGlobalToSharedClusterOp(
                    dst, self.ptr(em, self.gmaps[which], "generic"), coords, bar, []
                )

    def produce(self, em, q0, j, base) -> None:
        """The producer's issuing thread, for its ``j``-th work item (block from query ``q0``),
        whose tiles are the ring's ``base`` .. : Q once Q's "empty" phase j - 1 completed (the
        first passes), on Q's "full" mbarrier; then per key tile t (ring count n = base + t): wait
        for slot n % S's release ("empty" phase n / S - 1: the first S pass), expect the tile's
        bytes on its "full" mbarrier, and issue K's and V's boxes."""
        p, k = self.p, self.k
        if not self._skip_empty_wait:
            self.wait_phase(em, self.bar(em, "q_empty"), em.rem(em.add(j, 1), 2))
        with em.loc, em.ip:
            nvvm.MBarrierArriveExpectTxOp(self.bar(em, "q_full"), self.c32(em, p.tx_bytes["Q"]))
        self._copy(em, 0, em.const(p.offsets["Q"]), q0, self.bar(em, "q_full"))
        with em.loc, em.ip:
            loop = scf.ForOp(em.const(0), k.tiles, em.const(1), [])
        pe = em.at(ir.InsertionPoint(loop.body))
        t = loop.induction_variable
        n = pe.add(base, t)
        S = p.stages
        slot = pe.rem(n, S)
        if not self._skip_empty_wait:
            self.wait_phase(pe, self.bar(pe, "empty", slot), pe.rem(pe.add(pe.div(n, S), 1), 2))
        full = self.bar(pe, "full", slot)
        with pe.loc, pe.ip:
            nvvm.MBarrierArriveExpectTxOp(full, self.c32(pe, p.tx_bytes["KV"]))
        key0 = pe.mul(t, p.block_n)
        self._copy(pe, 1, pe.add(p.offsets["K"], pe.mul(slot, p.k_layout.bytes)), key0, full)
        self._copy(pe, 2, pe.add(p.offsets["V"], pe.mul(slot, p.v_layout.bytes)), key0, full)
        with pe.loc, pe.ip:
            scf.YieldOp([])

    def wait_q(self, em, j) -> None:
        """The computing warpgroups, at their ``j``-th work item: its Q landed (phase j)."""
        self.wait_phase(em, self.bar(em, "q_full"), em.rem(j, 2))

    def release_q(self, em) -> None:
        """Every computing thread, after its warpgroup's last S of the item was waited for."""
        if self._skip_release:
            return
        with em.loc, em.ip:
            nvvm.MBarrierArriveOp(self.bar(em, "q_empty"))

    def wait_full(self, em, kt) -> None:
        S = self.p.stages
        parity = em.rem(em.div(kt, S), 2)
        if self._flip_parity:
            parity = em.rem(em.add(parity, 1), 2)
        self.wait_phase(em, self.bar(em, "full", em.rem(kt, S)), parity)

    def release(self, em, kt) -> None:
        """Every thread of the computing warpgroups, after its warpgroup's wgmma.wait_group covered
        tile kt's wgmmas: one arrival on the slot's "empty" mbarrier (counting all of them). One
        arrival per warpgroup, by its thread 0 under a branch, made ptxas spill 8 bytes at head dim
        128 with two warpgroups."""
        if self._skip_release:
            return
        with em.loc, em.ip:
            nvvm.MBarrierArriveOp(self.bar(em, "empty", em.rem(kt, self.p.stages)))
