"""TMA copies for the warpgroup-MMA ring (``--config copy=tma``): the tensor maps, the boxes, and
the ring loop that issues ``cp.async.bulk.tensor`` instead of 16-byte ``cp.async``.

The plan (``TmaPlan``, data, checked against ``SmemLayout`` at construction):

- **Boxes.** A tile whose global rows run along K (A of a plain matmul, B^T) is K-major in shared
  memory: row r of the M/N x 64 tile at byte ``r * 128``, 16-byte chunk c at chunk ``c ^ (r % 8)``
  (``SmemLayout(K, 128B)``, M/N atoms of 8 rows consecutive). That is exactly the image of ONE
  tensor box of {64 (K, innermost), M/N rows} with the 128-byte swizzle, so such an operand is one
  copy per K tile. A tile whose rows run along M/N (B of a plain matmul, A^T) is MN-major: atoms of
  8 K lines x 64 M/N elements, M/N atoms fastest (atom (i, j) at ``(j * mn_atoms + i) * 1024``), so
  the 8 K lines of one 64-column atom are 1024 contiguous bytes but the next 8 K lines are
  ``mn_atoms`` atoms further: one box of {64 (M/N), 8 (K)} per atom, ``mn_atoms * 8`` boxes per K
  tile (32 for N = 256). The layout (and with it the wgmma descriptors of the cp.async kernel,
  measured on the H100) stays as it is; the boxes are issued by as many threads in parallel
  (thread i issues box i of the K tile, A's boxes first).
- **Maps.** One 2-D map per operand (3-D with a batch: one more dimension, box 1; any rank up to
  5), built by thread 0 at kernel start from 128 zero bytes in shared memory with
  ``tensormap.replace``: the operand's aligned pointer plus its memref offset (IREE's binding byte
  offset: ``memref.extract_strided_metadata``, so the map addresses the bytes the memref does), its
  true sizes (innermost first) and byte strides, f16/bf16 (fp8: u8, the copy moves bytes), no
  interleave, the 128B swizzle, zero
  fill (out-of-bounds box elements read 0: partial M, N and K tiles need no masks).
  Warp 0 copies both maps to global memory with ``tensormap.cp_fenceproxy ... release.gpu``
  (inline PTX: IREE 3.13 has no NVVM op for it); after a barrier each issuing thread runs
  ``fence.proxy.tensormap::generic.acquire.gpu`` on them.
- **Where the maps live.** A module-level ``memref.global @mmaflow_tma_maps`` in the dispatch's
  inner module (IREE 3.13 lowers it to ``.global .align 128 .b8 mmaflow_tma_maps[N]`` in the PTX;
  the kernel rounds its address up to 128), one 256-byte slot (A's map, B's map) per SM, indexed
  by ``%smid``. Race-free: the kernel allocates at least ``ONE_BLOCK_PER_SM`` bytes of shared
  memory, so no two blocks that use this module's maps are resident on one SM at once; a block
  writes only its SM's slot, and waits for every bulk copy it issued before it exits, so the next
  block on that SM (which may belong to another dispatch of the same kernel, with other
  bindings) rewrites the slot only after the last use. ``%smid`` >= ``MAP_SLOTS`` traps. Caveat: the
  PTX ISA lets ``%smid`` change while a block runs (rescheduling after compute preemption); a
  block that moved keeps its first SM's slot, which a later block on that SM may rewrite. Blocks
  of one dispatch write identical maps (the per-block part is the copy's coordinates), so only two
  dispatches of this kernel running at once after such a move could clash; a per-block slot
  would close that (not done).
- **Ring.** ``stages`` slots, tile t in slot t % S, A = ``copy_ahead`` tiles ahead and L =
  ``wgmma_lag`` groups running, as the cp.async ring (``WgmmaPlan``); one mbarrier per slot,
  counting one arrival per issuing thread (each expects its own box's bytes before issuing it).
  See ``TmaRing.loop``.
- **Clusters** (``cluster=2``, warp-specialized persistent only; ``wgmma.plan.cluster_refusal``).
  The two workgroups of a cluster compute tile rows 2q and 2q + 1 of one tile column: A is each
  one's own, B's boxes are shared out (rank r issues boxes r * n/2 ..; a K-major tile is cut into
  two boxes of whole 8-row atoms) and multicast to both (``multicast::cluster``, mask 0b11). Each
  "full" mbarrier counts this workgroup's issuers; a B issuer expects its box's bytes twice (the
  peer's copy of its share lands here too, maybe before the expect: the phase cannot complete
  before this workgroup's own arrivals). The "empty" mbarriers count both workgroups' MMA
  warpgroups: each releases its own and, through ``mapa``, the peer's (``mbarrier.arrive`` on a
  ``shared::cluster`` address at the default ``.release.cta``, as CUTLASS's
  ``ClusterBarrier::arrive``; formally a cross-CTA release wants ``.cluster`` scope, measured 1.33x
  slower). ``barrier.cluster`` after the mbarriers' init and before exit. See docs/kernels/hopper_wgmma.md, Clusters.
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import arith, nvvm, scf

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.kernels.common.contraction import KLoop, _transfer_parts
from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.kernels.common.tma import (
    ADDRESS_ALIGN,
    BOX_LIMIT,
    ELEMTYPES,
    MAP_BYTES,
    MAP_SLOTS,
    ONE_BLOCK_PER_SM,
    PRODUCER_REGISTERS,
    STRIDE_LIMIT,
    TMA_TARGET_PTX,
    WAIT_LIMIT,
    WAIT_TICKS_NS,
    TmaEmitter,
    _ptr,
    consumer_share,
    launch_registers,
)
from mmaflow.compiler.target.intrinsics import FP8, TYPE_BITS
from mmaflow.compiler.target.limits import SHARED_RESERVED_PER_BLOCK
from mmaflow.compiler.target.smem_layout import Major, SmemLayout, Swizzle
from mmaflow.compiler.target.targets import Target

# The ring's slots at most (cp.async or TMA; shared memory bounds it first for tiles over 64x128). The heuristic
# and `mmaflow tune` take the deepest that fits for grids under a wave, whose long K loops a 4-slot ring leaves
# exposed to HBM's latency (kernels/wgmma/heuristic.py, _deep_ring).
MAX_STAGES = 8
MAPS_GLOBAL = "mmaflow_tma_maps"
RESERVED_PER_BLOCK = SHARED_RESERVED_PER_BLOCK


@dataclass(frozen=True)
class TmaOperand:
    """One operand's boxes per K tile: box (inner, rows) elements, innermost first; box i lands
    at ``i * box_bytes`` from the operand's tile base and starts at global coordinate
    (tile origin inner + ``inner_step`` * (i % per_row), tile origin row + ``row_step`` * (i // per_row))."""

    name: str
    k_major: bool
    box: tuple[int, int]
    boxes: int
    per_row: int  # boxes along the inner dimension (MN-major: the tile's M/N atoms)
    inner_step: int
    row_step: int
    element_bytes: int
    first_issuer: int  # thread that issues box 0
    multicast: int = 1  # clusters: the workgroups each box lands in; each issues boxes / multicast of them

    @property
    def box_bytes(self) -> int:
        return self.box[0] * self.box[1] * self.element_bytes

    @property
    def issued(self) -> int:
        """Boxes one workgroup issues per K tile (workgroup rank r: boxes r * issued ..)."""
        return self.boxes // self.multicast

    def place(self, i: int) -> tuple[int, int, int]:
        """(inner offset, row offset, shared byte offset) of box i."""
        return self.inner_step * (i % self.per_row), self.row_step * (i // self.per_row), i * self.box_bytes


def operand_boxes(name: str, smem: SmemLayout, first_issuer: int, multicast: int = 1) -> TmaOperand:
    """The boxes that fill ``smem`` (an mn x 64 tile, 128B swizzle); asserts every box's
    swizzled image is where ``SmemLayout.offset`` puts its elements. ``multicast`` > 1: the
    boxes are shared out between the workgroups of a cluster (a K-major tile is cut into that
    many boxes of whole 8-row atoms)."""
    if smem.swizzle is not Swizzle.B128:
        raise UnsupportedError(f"{name}: TMA boxes are planned for the 128B swizzle, not {smem.swizzle.value}")
    e = smem.element_bytes
    line = smem.line_elements  # 64 16-bit elements = 128 bytes
    m = multicast
    if smem.major is Major.K:
        if smem.mn % (8 * m):
            raise UnsupportedError(f"{name}: {smem.mn} K-major rows do not cut into {m} boxes of whole 8-row atoms")
        op = TmaOperand(name, True, (line, smem.mn // m), m, 1, 0, smem.mn // m, e, first_issuer, m)
    elif smem.k_atoms_fastest:  # one 64-column atom's K lines are contiguous: one box {64, K} per atom
        op = TmaOperand(name, False, (line, smem.k), smem.mn_atoms, smem.mn_atoms, line, 0, e, first_issuer, m)
    else:
        op = TmaOperand(
            name, False, (line, 8), smem.mn_atoms * (smem.k // 8), smem.mn_atoms, line, 8, e, first_issuer, m
        )
    if op.boxes % m:
        raise UnsupportedError(f"{name}: {op.boxes} boxes per K tile do not share out between {m} workgroups")
    if max(op.box) > BOX_LIMIT:
        raise UnsupportedError(f"{name}: a TMA box of {op.box[0]}x{op.box[1]} exceeds {BOX_LIMIT} per dimension")
    for i in range(op.boxes):  # box row r, element c -> byte r*128 + ((c*e//16) ^ (r%8))*16 + c*e%16
        di, dr, base = op.place(i)
        for r in range(op.box[1]):
            for c in range(0, op.box[0], 16 // e):
                mn, k = (dr + r, di + c) if op.k_major else (di + c, dr + r)
                image = base + r * 128 + (((c * e) // 16) ^ (r % 8)) * 16
                assert smem.offset(mn, k) == image, (name, i, r, c)
    return op


@dataclass(frozen=True)
class TmaPlan:
    a: TmaOperand
    b: TmaOperand
    maps_offset: int  # bytes from the aligned shared base: A's map, B's map (128 each), then the mbarriers
    stages: int
    cluster: int = 1  # workgroups per cluster: B's boxes multicast to all, each issuing its share

    @property
    def operands(self) -> tuple[TmaOperand, TmaOperand]:
        return self.a, self.b

    @property
    def issuers(self) -> int:
        """Threads of one workgroup that issue a K tile's boxes (its "full" mbarriers' count)."""
        return self.a.issued + self.b.issued

    @property
    def first_issuer(self) -> int:
        """Thread 0, or warp-specialized (``producer=1``) the producer warpgroup's first thread."""
        return self.a.first_issuer

    @property
    def specialized(self) -> bool:
        """A producer warpgroup issues the copies; the slots also have "empty" mbarriers."""
        return self.first_issuer > 0

    @property
    def tx_bytes(self) -> int:
        """Bytes one K tile's boxes deliver (out-of-bounds elements count: they are written as 0)."""
        return sum(o.boxes * o.box_bytes for o in self.operands)

    @property
    def barriers_offset(self) -> int:
        """The slots' "full" mbarriers (the K tile landed), then, warp-specialized, their "empty"
        ones (every MMA warpgroup is done with the slot)."""
        return self.maps_offset + 2 * MAP_BYTES

    @property
    def empty_offset(self) -> int:
        return self.barriers_offset + 8 * self.stages

    def describe(self) -> list[str]:
        out = []
        for o in self.operands:
            how = (
                "one box"
                if o.boxes == 1
                else f"{o.boxes} boxes (one per 64-column atom"
                + ("" if o.row_step == 0 else " and 8 K lines: the MN-major atoms are M/N-fastest")
                + ")"
            )
            who = f"issued by threads {o.first_issuer}..{o.first_issuer + o.issued - 1}"
            if o.multicast > 1:
                who += (
                    f" of each workgroup of a cluster of {o.multicast}, rank r issuing boxes r * {o.issued} .. "
                    f"r * {o.issued} + {o.issued - 1} with a multicast to all (each issuer expects its box's bytes "
                    f"x {o.multicast}: its own copy and its peers' into this workgroup)"
                )
            out.append(
                f"{o.name}: TMA {how} of {o.box[0]}x{o.box[1]} ({o.box_bytes} B, innermost first), 128B "
                f"swizzle, zero fill; {who}"
            )
        out.append(
            f"tma: maps built by thread 0 (tensormap.replace on 128 zero bytes at +{self.maps_offset}), "
            f"tensormap.cp_fenceproxy to @{MAPS_GLOBAL}[%smid], acquired by the {self.issuers} issuers; "
            f"{self.stages} mbarriers at +{self.barriers_offset} (count {self.issuers}: each issuer arrives "
            f"expecting its box's bytes), {self.tx_bytes} B per K tile"
        )
        if self.cluster > 1:
            out.append(
                f"cluster: {self.cluster} workgroups (nvvm.cluster_dim); each MMA warpgroup releases a slot on "
                f'the "empty" mbarrier of every workgroup of the cluster (mapa + a shared::cluster arrive: '
                f"count {self.cluster} x the MMA warpgroups), as every workgroup's producer writes every slot; "
                f"barrier.cluster after the mbarriers' init and before exit"
            )
        return out


def validate_tma(cfg, target: Target, problem, intr, *, fp8_pair_tiles: bool = False) -> None:
    """Refuse ``copy=tma`` where the TMA ring cannot serve, saying why (``fp8_pair_tiles``: the
    cp.async ring's variant ``WgmmaPlan.fp8_pair_tiles`` is on)."""
    if cfg.stages < 2:
        raise ConfigError(
            f"{intr.name}: copy=tma feeds a ring of 2 to {MAX_STAGES} slots; stages=1 is the synchronous kernel"
        )
    if intr.a_type not in ELEMTYPES:
        raise UnsupportedError(f"{intr.name}: TMA copies are implemented for f16/bf16/fp8 operands, not {intr.a_type}")
    if intr.b_type != intr.a_type:
        raise UnsupportedError(
            f"{intr.name}: TMA copies take A and B of one element type ({intr.a_type} x "
            f"{intr.b_type}: the kernel keeps their slots in two allocations, which the TMA ring "
            f"does not address); the cp.async ring serves this pair"
        )
    if intr.a_type in FP8 and fp8_pair_tiles:
        raise UnsupportedError(
            f"{intr.name}: fp8 pair tiles (WgmmaPlan.fp8_pair_tiles) are a cp.async-ring variant; "
            f"the TMA ring promotes each K tile after wait_group 0"
        )
    bytes_ = TYPE_BITS[intr.a_type] // 8
    for name, at in (("A", problem.a), ("B", problem.b)):
        if at.offset is not None and at.offset % ADDRESS_ALIGN:
            raise UnsupportedError(
                f"{intr.name}: {name} sits at byte offset {at.offset} of its binding; a tensor map's "
                f"global address must be {ADDRESS_ALIGN}-byte aligned (copy=tma refused)"
            )
    sizes = {"m": problem.m, "n": problem.n, "k": problem.k, "batch": problem.batch}
    for name, dims in (
        ("A", ("k", "m") if not problem.a_transposed else ("m", "k")),
        ("B", ("k", "n") if problem.b_transposed else ("n", "k")),
    ):
        inner, outer = (sizes[d] for d in dims)
        stride = None if inner is None else inner * bytes_
        if stride is not None and stride % 16:
            raise UnsupportedError(
                f"{intr.name}: {name}'s rows are {stride} bytes, not a multiple of 16 (a tensor map's strides are)"
            )
        for what, v in (("row stride", stride), ("batch stride", None if None in (stride, outer) else stride * outer)):
            if v is not None and v >= STRIDE_LIMIT:
                raise UnsupportedError(f"{intr.name}: {name}'s {what} of {v} bytes reaches 2^40 (a tensor map's limit)")
        for d in dims:
            if sizes[d] is not None and sizes[d] >= 1 << 32:
                raise UnsupportedError(f"{intr.name}: {d.upper()} = {sizes[d]} exceeds a tensor map's 2^32 elements")


def plan_tma(
    a_smem: SmemLayout,
    b_smem: SmemLayout,
    slots_bytes: int,
    stages: int,
    producer_first: int | None = None,
    cluster: int = 1,
) -> TmaPlan:
    """The boxes (issued by threads 0.., or by the producer warpgroup's from ``producer_first``);
    in clusters B's are shared out and multicast."""
    first = producer_first or 0
    a = operand_boxes("A", a_smem, first)
    b = operand_boxes("B", b_smem, first + a.issued, cluster)
    return TmaPlan(a, b, slots_bytes, stages, cluster)


# ---- the kernel ----------------------------------------------------------------------------------


class TmaRing(TmaEmitter):
    """Emits the TMA ring for a ``WgmmaRewriter`` (``rw``) whose plan has ``tma``."""

    # Mutation hooks for the tests (e2e_tests/test_tma_ring.py): wait on the other phase parity,
    # on the next slot's mbarrier, or not at all; copy into the slot _dst_slot_skew tiles later
    # (reusing a slot too early); issue without the tensormap acquire.
    _flip_parity = False
    _wait_slot_skew = 0
    _skip_wait = False
    _dst_slot_skew = 0
    _skip_acquire = False
    # Warp-specialized (``specialized``): issue without waiting for the slot's release, release
    # the slot before the wgmma.wait_group that covers its wgmmas, or never release it.
    _skip_empty_wait = False
    _release_early = False
    _skip_release = False
    _tile_local_count = False  # restart the ring count at each tile of a persistent workgroup
    # Clusters: the MMA warpgroups release only their own workgroup's slot; a multicast issuer
    # expects only its own box's bytes; no barrier.cluster after the setup, or before exit.
    # Or releases twice on its own through mapa (the counts met, the peer's slot not released).
    _release_own_only = False
    _expect_own_only = False
    _skip_setup_cluster_barrier = False
    _skip_exit_cluster_barrier = False
    _release_wrong_peer = False
    # Experiment knobs, not mutations (measured on the H200, docs/PERFORMANCE.md, Tried, did not pay): the
    # remote release's scope (None: the instruction's default, .cta; "cluster" ran 1.33x slower) and
    # try_wait's suspend-time hint (None: the system's; no change measured).
    _remote_scope = None
    _wait_ticks = WAIT_TICKS_NS

    def __init__(self, rw):
        super().__init__()
        self.rw, self.plan, self.tma = rw, rw.plan, rw.plan.tma

    def _maps_global(self) -> ir.Value:
        """memref.get_global of the module's map slots (A's map, B's map per SM)."""
        return self.maps_global(self.rw.func, self.rw.top, MAPS_GLOBAL, 2)

    def setup(self, em, tid, smem_base64, operands) -> dict:
        """Kernel start: maps in shared memory, copied to this SM's global slot, acquired;
        mbarriers initialised. ``operands``: per operand (global memref, element type name)."""
        tma = self.tma
        maps_sh = [self.add64(em, smem_base64, tma.maps_offset + MAP_BYTES * i) for i in range(2)]
        bars0 = self.add64(em, smem_base64, tma.barriers_offset)
        empty0 = self.add64(em, smem_base64, tma.empty_offset) if tma.specialized else None
        # this SM's slot in @mmaflow_tma_maps, its address rounded up to 128
        gmem = self._maps_global()
        gslot, smid = self.sm_slot(em, gmem, 2)
        gmaps = [self.add64(em, gslot, MAP_BYTES * i) for i in range(2)]
        first = em.eq(tid, 0)
        t0 = em.if_then(first)
        with t0.loc, t0.ip:
            self._trap_unless(t0, arith.CmpIOp(arith.CmpIPredicate.ult, smid, self.c32(t0, MAP_SLOTS)).result)
        self.zero_maps(t0, maps_sh[0], 2)
        for (mem, elem), o, msh in zip(operands, tma.operands, maps_sh):
            self.build_map(t0, mem, elem, o.box, o.name, self.ptr(t0, msh, 3))
        with t0.loc, t0.ip:
            for s in range(tma.stages):
                nvvm.MBarrierInitOp(self.ptr(t0, self.add64(t0, bars0, 8 * s), 3), self.c32(t0, tma.issuers))
                if empty0 is not None:  # one arrival per MMA warpgroup (of each workgroup of a cluster)
                    nvvm.MBarrierInitOp(
                        self.ptr(t0, self.add64(t0, empty0, 8 * s), 3), self.c32(t0, self.plan.warpgroups * tma.cluster)
                    )
            nvvm.FenceMbarrierInitOp()
        attrs.mark(em.barrier(), attrs.RING)
        rank = None
        if tma.cluster > 1:  # the peers' mbarriers are initialised before any multicast or remote arrive
            self.cluster_barrier(em)
            with em.loc, em.ip:
                rank = arith.IndexCastOp(em.index, nvvm.read_ptx_sreg_cluster_ctarank(results=[self.i32])).result
        self.publish_maps(em.if_then(em.lt(tid, 32)), gmaps, maps_sh)
        attrs.mark(em.barrier(), attrs.RING)
        if not self._skip_acquire:
            self.acquire_maps(em.if_then(self.is_issuer(em, tid)), gmaps)
        return {"gmaps": gmaps, "bars0": bars0, "empty0": empty0, "rank": rank}

    def cluster_barrier(self, em, at_exit: bool = False) -> None:
        """``barrier.cluster.arrive`` + ``wait`` by every thread (the default semantics: release /
        acquire at cluster scope): after the setup, and before exit (``at_exit``)."""
        if self._skip_exit_cluster_barrier if at_exit else self._skip_setup_cluster_barrier:
            return
        with em.loc, em.ip:
            nvvm.ClusterArriveOp(aligned=True)
            nvvm.ClusterWaitOp(aligned=True)

    def is_issuer(self, em, tid):
        """i1: thread ``tid`` issues one of a K tile's boxes."""
        first = self.tma.first_issuer
        inside = em.lt(tid, first + self.tma.issuers)
        return em.and_(em.lt(em.const(first - 1), tid), inside) if first else inside

    def _wait_phase(self, em, bar, parity) -> None:
        """``TmaEmitter.wait_phase``, the loop marked as the ring's."""
        attrs.mark(self.wait_phase(em, bar, parity).operation, attrs.RING)

    def bar_ptr(self, em, bars0, slot):
        """The mbarrier of ring slot ``slot`` (an index value)."""
        return self.ptr(em, self.add64(em, bars0, self.to64(em, em.mul(slot, 8))), 3)

    def issue(self, em, tid, state, smem_base64, origins, slot, valid=None) -> None:
        """K tile with per-operand global origins ``origins`` ((lead..., row, col) index values)
        into ring slot ``slot``: thread ``first_issuer + i`` arrives on the slot's mbarrier
        expecting box i's bytes (``arrive.expect_tx``), then issues box i (its complete_tx can only
        follow its own expect_tx: the tx-count never has to go negative). The mbarrier counts
        ``issuers`` arrivals per phase. ``valid`` (i1 or None): the tile exists. Clusters: B's
        issuer i of rank r issues box r * issued + i to every workgroup of the cluster and expects
        its bytes once per workgroup (the peers' boxes of its share land here; the tx-count may go
        negative, the phase still waits for this workgroup's arrivals)."""
        tma, plan = self.tma, self.plan
        dst_slot = em.rem(em.add(slot, self._dst_slot_skew), plan.stages) if self._dst_slot_skew else slot
        slot_base = self.add64(em, smem_base64, self.to64(em, em.mul(dst_slot, plan.slot_bytes)))
        bar = self.bar_ptr(em, state["bars0"], slot)
        for o, op_plan, gmap, idx in zip(tma.operands, plan.operands, state["gmaps"], origins):
            lo = o.first_issuer
            mine = em.lt(tid, lo + o.issued)
            if lo:
                mine = em.and_(mine, em.lt(em.const(lo - 1), tid))
            if valid is not None:
                mine = em.and_(mine, valid)
            e = em.if_then(mine)
            *lead, row, col = idx
            dst = self.add64(e, slot_base, op_plan.offset)
            if o.boxes > 1:  # box i = tid - first_issuer (+ the workgroup's share in a cluster)
                i = e.sub(tid, e.const(lo)) if lo else tid
                if o.multicast > 1:
                    i = e.add(i, e.mul(state["rank"], o.issued))
                col = e.add(col, e.mul(e.rem(i, o.per_row), o.inner_step))
                row = e.add(row, e.mul(e.div(i, o.per_row), o.row_step))
                dst = self.add64(e, dst, self.to64(e, e.mul(i, o.box_bytes)))
            coords = [self.to32(e, col), self.to32(e, row)] + [self.to32(e, v) for v in reversed(lead)]
            # this thread's bytes expected before its copy can complete them; multicast: also the
            # peers' boxes of its share into this workgroup (they may land before the expect: the
            # phase cannot complete before this arrival either way)
            expect = o.box_bytes * (o.multicast if not self._expect_own_only else 1)
            with e.loc, e.ip:
                nvvm.MBarrierArriveExpectTxOp(bar, self.c32(e, expect))
                mask = None
                if o.multicast > 1:
                    mask = arith.ConstantOp(ir.IntegerType.get_signless(16), (1 << o.multicast) - 1).result
                nvvm.CpAsyncBulkTensorGlobalToSharedClusterOp(
                    self.ptr(e, dst, 7), self.ptr(e, gmap, "generic"), coords, bar, [], multicastMask=mask
                )

    def wait(self, em, state, tile) -> None:
        """Every thread: wait for tile ``tile``'s mbarrier phase (slot tile % S, parity
        (tile / S) % 2) with ``mbarrier.try_wait.parity``, bounded (then trap)."""
        if self._skip_wait:
            return
        S = self.plan.stages
        slot = em.rem(em.add(tile, self._wait_slot_skew), S)
        parity = em.rem(em.div(tile, S), 2)
        if self._flip_parity:
            parity = em.rem(em.add(parity, 1), 2)
        self._wait_phase(em, self.bar_ptr(em, state["bars0"], slot), parity)

    def wait_empty(self, em, state, tile) -> None:
        """The producer's issuers, before copying tile ``tile`` into slot tile % S: wait until
        every MMA warpgroup (of every workgroup of the cluster) released tile ``tile - S`` there
        (the slot's "empty" mbarrier, phase tile / S - 1, parity (tile / S + 1) % 2). For tile < S
        that is the phase before the first, parity 1, which counts as completed: the wait passes."""
        if self._skip_empty_wait:
            return
        S = self.plan.stages
        parity = em.rem(em.add(em.div(tile, S), 1), 2)
        self._wait_phase(em, self.bar_ptr(em, state["empty0"], em.rem(tile, S)), parity)

    def release(self, em, state, tid, tile) -> None:
        """Thread 0 of each MMA warpgroup arrives on the "empty" mbarrier of tile ``tile``'s slot:
        the warpgroup's wgmmas on it are complete (its ``wgmma.wait_group`` covered them). In a
        cluster also on each peer's (``mapa``): the peers' producers multicast into this slot."""
        e = em.if_then(em.eq(em.rem(tid, 128), 0))
        bar = self.bar_ptr(e, state["empty0"], e.rem(tile, self.plan.stages))
        with e.loc, e.ip:
            nvvm.MBarrierArriveOp(bar, results=[self.i64])
        peers = self.tma.cluster - 1 if not self._release_own_only else 0
        for d in range(1, peers + 1):  # and on each peer's: its producer's multicast writes this slot too
            peer = e.rem(e.add(state["rank"], 0 if self._release_wrong_peer else d), self.tma.cluster)
            with e.loc, e.ip:
                remote = nvvm.MapaOp(_ptr(7), bar, self.to32(e, peer)).result
                scope = ir.Attribute.parse(f"#nvvm.mem_scope<{self._remote_scope}>") if self._remote_scope else None
                nvvm.MBarrierArriveOp(remote, scope=scope)

    def loop(self, tid, shared: list, desc: dict, acc0, struct_t):
        """The K loop over the ring, copies by TMA:

            kernel start: thread 0: maps (tensormap.replace), mbarrier.init x S (count: the
                          issuers), fence.mbarrier_init; barrier; warp 0: cp_fenceproxy x 2;
                          barrier; issuers: fence.proxy.tensormap acquire x 2
            prologue:     tiles 0 .. A-1 -> slots 0 .. A-1 (each issuer: arrive.expect_tx(its box's
                          bytes), cp.async.bulk.tensor ... mbarrier::complete_tx)
            tile t:       mbarrier.try_wait.parity(slot t % S, parity (t / S) % 2) loop
                          barrier
                          wgmma.fence; K steps of wgmma.mma_async on slot t % S; commit_group
                          tile t+A -> slot (t+A) % S (drain loop: nothing)
                          wgmma.wait_group L
            after:        wgmma.wait_group 0

        No ``fence.proxy.async`` between the copies and the wgmmas: both are async-proxy
        operations (PTX ISA, memory consistency model, "Proxies": cp.async.bulk* and wgmma's
        shared-memory operands are accessed through the async proxy), and the mbarrier's
        complete-tx makes the bulk copy's writes visible to the threads that observe the phase
        completion (PTX ISA, "cp.async.bulk.tensor": the mbarrier::complete_tx mechanism "signals
        the completion of the asynchronous copy"; "mbarrier.test_wait/try_wait": a successful
        wait "causes the executing thread to observe" the memory operations the phase
        completion covered) -- the thread then issues wgmma, which reads in the same proxy.

        Why the slot is free: the copy at tile t writes the slot of tile t+A-S = t-1-L. Every
        warpgroup passed ``wgmma.wait_group L`` at the end of tile t-1 -- which completes tile
        t-1-L's group -- before the barrier of tile t, and the issuers issue after that barrier
        (as the cp.async ring). That tile's mbarrier phase was waited for by every thread before
        the barrier of tile t-1-L, so re-arming it starts the next phase, whose parity the wait
        of tile t+A expects."""
        if self.tma.specialized:
            return self.specialized(tid, shared, desc, acc0, struct_t)

        rw, plan = self.rw, self.plan
        S, A, L = plan.stages, plan.copy_ahead, plan.wgmma_lag
        old, pre, base, state, kt, origins = self._prepare(tid, shared)
        for t in range(A):
            if isinstance(kt, int):
                if t < kt:
                    self.issue(pre, tid, state, base, origins(pre, t), pre.const(t % S))
            else:
                self.issue(pre, tid, state, base, origins(pre, t), pre.const(t % S), pre.lt(pre.const(t), kt))
        if isinstance(kt, int):
            main_tiles, kt_v = pre.const(max(kt - A, 0)), pre.const(kt)
        else:
            main_tiles, kt_v = pre.select(pre.lt(pre.const(A), kt), pre.sub(kt, pre.const(A)), pre.const(0)), kt
        acc, last = acc0, None
        for first, end, copies in ((pre.const(0), main_tiles, True), (main_tiles, kt_v, False)):
            with old.location, ir.InsertionPoint(old):
                loop = scf.ForOp(first, end, pre.const(1), [acc])
            em = Emitter(ir.InsertionPoint(loop.body), old.location, rw.vendor).named(
                "wgmma.tma" if copies else "wgmma.tma.drain"
            )
            t = loop.induction_variable
            self.wait(em, state, t)
            attrs.mark(em.barrier(), attrs.RING)
            acc_in = loop.inner_iter_args[0]
            out = rw._wgmmas(em, desc, rw.fresh if rw.promote else acc_in, struct_t, em.rem(t, S), fresh=rw.promote)
            rw._op(em, "nvvm.wgmma.commit.group.sync.aligned")
            if copies:
                nxt = em.add(t, A)
                self.issue(em, tid, state, base, origins(em, nxt), em.rem(nxt, S))
            rw._wgmma_wait(em, L)
            if rw.promote:  # fp8 (L = 0): this tile's partial into the f32 accumulator
                out = rw._promote_partial(em, acc_in, out)
            with em.loc, em.ip:
                scf.YieldOp([out])
            acc, last = loop.results[0], loop
        after = Emitter(ir.InsertionPoint.after(last.operation), old.location, rw.vendor).named("wgmma.tma")
        rw._wgmma_wait(after, 0)

        return KLoop(last, [], [], None)

    def _prepare(self, tid, shared: list):
        """Before the old K loop: the shared base, the maps and mbarriers (``setup``), the K tile
        count and ``origins(em, tile)``, each operand's global origin of a K tile."""
        from mmaflow.compiler.kernels.common.emit import Emitter

        rw, plan = self.rw, self.plan
        assert plan.allocations == 1 and len(shared) == 1  # (one element type: validate_tma)
        ((smem, pad_elems),) = shared
        old = rw.m.loop
        old_body = old.regions[0].blocks[0]
        old_iv = list(old_body.arguments)[0]
        pre = Emitter(ir.InsertionPoint(old), old.location, rw.vendor).named("wgmma.tma")
        lb = rw.k_first(pre, old.operands[0])  # (split-K: this workgroup's share of the K tiles)
        ptr = rw._op(pre, "memref.extract_aligned_pointer_as_index", [smem], [pre.index]).result
        base = self.to64(pre, pre.add(ptr, pre.mul(pad_elems, plan.a.smem.element_bytes)))
        srcs = []
        for opd in rw.m.operands:
            src_mem, src_idx, _ = _transfer_parts(opd.copy_read)
            srcs.append((rw._global(src_mem), src_idx))
        elems = [str(ir.MemRefType(g.type).element_type) for g, _ in srcs]
        state = self.setup(pre, tid, base, [(g, e) for (g, _), e in zip(srcs, elems)])
        kt = rw._k_tiles(pre)

        def origins(em, tile):
            k0 = em.add(lb, plan.tile_k * tile) if isinstance(tile, int) else em.add(lb, em.mul(tile, plan.tile_k))
            return [rw._clone_slice(list(idx), old_body, {old_iv: k0}, em.ip) for _, idx in srcs]

        return old, pre, base, state, kt, origins

    def specialized(self, tid, shared: list, desc: dict, acc0, struct_t):
        """The warp-specialized K loop (``producer=1``): the MMA warpgroups are threads 0 ..
        P-1, the producer warpgroup P .. P+127 (P = ``first_issuer``):

            kernel start: as ``loop`` (the issuers are producer threads); also one "empty"
                          mbarrier per slot, counting one arrival per MMA warpgroup (x the
                          cluster's workgroups)
            scf.if tid >= P (producer):
                setmaxnreg.dec PRODUCER_REGISTERS
                issuers: scf.for tile t < K tiles (ring count n = j * K tiles + t):
                    mbarrier.try_wait.parity(empty slot n % S, parity (n / S + 1) % 2)
                    arrive.expect_tx(box bytes) + cp.async.bulk.tensor K tile t -> slot n % S
            else (the MMA warpgroups):
                setmaxnreg.inc consumer_registers()
                scf.for tile t < K tiles iter_args(%acc):
                    mbarrier.try_wait.parity(full slot n % S, parity (n / S) % 2)
                    wgmma.fence; K steps of wgmma.mma_async on slot n % S; commit_group
                    wgmma.wait_group L
                    thread 0 of each warpgroup, t >= L: mbarrier.arrive(empty slot of n - L)
                wgmma.wait_group 0; the last L K tiles' slots released likewise
            the epilogue, guarded by tid < P (``guard_epilogue``)

        j is the output tile's index in a persistent workgroup (0 without one): the loop over
        tiles goes around all of this (``WgmmaRewriter._persist``), and since the roles meet at no
        barrier the producer copies the next tile's first K tiles while the MMA warpgroups run
        this one's epilogue.

        Why the slot is free when the producer copies tile t into it: its "empty" phase t / S - 1
        completed, i.e. both warpgroups arrived after tile t - S's ``wait_group`` covered its
        wgmmas (the first S tiles wait for the phase before the first, which counts as done).
        Why the data is there when the warpgroups read it: the "full" phase (as ``loop``). No CTA
        barrier follows the prologue's: the roles never meet but at the mbarriers."""

        rw, plan = self.rw, self.plan
        S, L = plan.stages, plan.wgmma_lag
        old, pre, base, state, kt, origins = self._prepare(tid, shared)
        kt_v = pre.const(kt) if isinstance(kt, int) else kt
        # The ring's K tile count n = j * K tiles + t runs on across a persistent grid's tiles (the
        # slots and phases follow n); j, the tile's index in the workgroup, is 0 until
        # ``WgmmaRewriter._persist`` puts the loop over tiles around the roles.
        self.tile_j = pre.const(0)
        P = self.tma.first_issuer
        self.consumer = pre.lt(tid, P)
        with pre.loc, pre.ip:
            role = scf.IfOp(self.consumer, [acc0.type], has_else=True)
        attrs.mark(role.operation, attrs.RING)
        # the MMA warpgroups
        mma = Emitter(ir.InsertionPoint(role.then_block), old.location, rw.vendor).named("wgmma.tma.mma")
        with mma.loc, mma.ip:
            nvvm.SetMaxRegisterOp(consumer_registers(plan.warpgroups), "increase")
        first = self._ring_start(mma, kt_v)
        with mma.loc, mma.ip:
            loop = scf.ForOp(mma.const(0), kt_v, mma.const(1), [acc0])
        em = Emitter(ir.InsertionPoint(loop.body), old.location, rw.vendor).named("wgmma.tma.mma")
        t = loop.induction_variable
        n = em.add(first, t)
        self.wait(em, state, n)
        acc_in = loop.inner_iter_args[0]
        out = rw._wgmmas(em, desc, rw.fresh if rw.promote else acc_in, struct_t, em.rem(n, S), fresh=rw.promote)
        rw._op(em, "nvvm.wgmma.commit.group.sync.aligned")
        if self._release_early:
            self.release(em, state, tid, n)
        rw._wgmma_wait(em, L)
        if not (self._skip_release or self._release_early):  # K tile n - L's wgmmas are done: its slot is free
            if L:
                done = em.sub(n, em.const(L))
                self.release(em.if_then(em.lt(em.const(L - 1), t)), state, tid, done)
            else:
                self.release(em, state, tid, n)
        if rw.promote:  # fp8 (L = 0): this tile's partial into the f32 accumulator
            out = rw._promote_partial(em, acc_in, out)
        with em.loc, em.ip:
            scf.YieldOp([out])
        rw._wgmma_wait(mma, 0)
        if L and not self._skip_release:  # the last L K tiles' slots, free after wait_group 0
            for i in range(1, L + 1):
                last = mma.add(first, mma.sub(kt_v, mma.const(i)))
                self.release(mma.if_then(mma.lt(mma.const(i - 1), kt_v)), state, tid, last)
        with mma.loc, mma.ip:
            scf.YieldOp([loop.results[0]])
        # the producer warpgroup
        prod = Emitter(ir.InsertionPoint(role.else_block), old.location, rw.vendor).named("wgmma.tma.producer")
        with prod.loc, prod.ip:
            nvvm.SetMaxRegisterOp(PRODUCER_REGISTERS, "decrease")
        iss = prod.if_then(self.is_issuer(prod, tid))
        first = self._ring_start(iss, kt_v)
        with iss.loc, iss.ip:
            ploop = scf.ForOp(iss.const(0), kt_v, iss.const(1), [])
        pe = Emitter(ir.InsertionPoint(ploop.body), old.location, rw.vendor).named("wgmma.tma.producer")
        t = ploop.induction_variable
        n = pe.add(first, t)
        self.wait_empty(pe, state, n)
        self.issue(pe, tid, state, base, origins(pe, t), pe.rem(n, S))
        with pe.loc, pe.ip:
            scf.YieldOp([])
        with prod.loc, prod.ip:
            scf.YieldOp([acc0])

        return KLoop(role, [], [], None)

    def _ring_start(self, em, kt_v):
        """The ring count of the tile's first K tile, j * K tiles (computed inside each role: the
        loop over tiles goes around them)."""
        return em.const(0) if self._tile_local_count else em.mul(self.tile_j, kt_v)

    def guard_epilogue(self, role) -> None:
        """Move what follows the role split (the epilogue) into ``scf.if tid < P``: only the MMA
        warpgroups hold accumulators."""
        block = role.operation.block
        ops = []
        seen = False
        for o in block.operations:
            if o.operation == role.operation:
                seen = True
            elif seen:
                ops.append(o.operation)
        tail, term = ops[:-1], ops[-1]
        if len(term.operands):  # (a dispatch function returns nothing)
            raise UnsupportedError("warp-specialized: the function's terminator returns values")
        with role.location, ir.InsertionPoint(term):
            guard = scf.IfOp(self.consumer)
        with ir.InsertionPoint(guard.then_block):
            y = scf.YieldOp([])
        for o in tail:
            o.move_before(y)


def consumer_registers(warpgroups: int) -> int:
    return consumer_share(warpgroups, PRODUCER_REGISTERS)


__all__ = [
    "TmaPlan",
    "TmaOperand",
    "TmaRing",
    "plan_tma",
    "validate_tma",
    "launch_registers",
    "ADDRESS_ALIGN",
    "BOX_LIMIT",
    "ELEMTYPES",
    "MAP_BYTES",
    "MAP_SLOTS",
    "ONE_BLOCK_PER_SM",
    "STRIDE_LIMIT",
    "TMA_TARGET_PTX",
    "WAIT_LIMIT",
    "WAIT_TICKS_NS",
]
