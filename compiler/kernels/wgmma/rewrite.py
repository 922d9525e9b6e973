"""`distribute` for the warpgroup-MMA kernel (``--config intrinsic=WGMMA_...`` on sm_90a): the
rewrite of a ``wgmma.plan.WgmmaPlan``.

Called by ``distribute.distribute`` after ``match`` when the config's intrinsic is a warpgroup MMA;
everything up to the K loop (prologue, rastered workgroup ids, retyped bindings) and the epilogue's
stores are the mma.sync kernel's (``Rewriter``). What differs is emitted at the NVVM level, the
form that lowers through IREE 3.13's hand-back route (docs/kernels/hopper_wgmma.md; the nvgpu.warpgroup ops do
not):

    %smem  = memref.alloc : plan.smem_bytes (A tile, B tile, 1024 B of slack)
    %base  = extract_aligned_pointer_as_index %smem, rounded up to 1024
    %dA/dB = ((%base & 0x3FFFF) >> 4) + (tile offset >> 4) | LBO/SBO/swizzle fields   (i64)
    %acc0  = llvm.mlir.zero : !llvm.struct<(f32 x N/2)>
    scf.for K tiles iter_args(%acc):
        gpu.barrier                                   (the previous tile's wgmmas are done)
        vector.load global 16 bytes -> vector.store %smem at SmemLayout.offset (per chunk)
        nvvm.fence.proxy async.shared::cta; gpu.barrier
        nvvm.wgmma.fence.aligned
        %acc = nvvm.wgmma.mma_async %dA + step, %dB + step, %acc   (x K steps)
        nvvm.wgmma.commit.group.sync.aligned; nvvm.wgmma.wait.group.sync.aligned 0
    accumulator -> vector<N/2 x f32> -> the epilogue's stores (per warp: ``warp_c_layout``)

That is ``stages`` = 1. With ``stages`` = 2..8 the copies fill a ring of slots by cp.async and
the loop keeps ``wgmma_lag`` groups running (``WgmmaRewriter._ring_loop``):

    prologue: cp.async tiles 0 .. A-1 -> slots; commit each
    scf.for tiles (main: copying; drain: empty groups) iter_args(%acc):
        cp.async.wait_group A-1; nvvm.fence.proxy async.shared::cta; gpu.barrier
        nvvm.wgmma.fence.aligned; wgmma.mma_async x K steps on slot t % S; commit
        cp.async tile t+A -> slot (t+A) % S; commit; nvvm.wgmma.wait.group.sync.aligned L
    wgmma.wait 0; cp.async.wait 0

fp8 (``WgmmaPlan.promotes``): Hopper's fp8 wgmma keeps 14 bits of its sum (runtime/isa/wgmma.py,
measured), so each K tile's wgmmas accumulate into a fresh partial (the first with scale-d 0, an
``llvm.mlir.undef`` input) and after the tile's ``wait.group 0`` the partial is added to the f32
accumulator, a ``vector<N/2 x f32>`` iter_arg (``_promote_partial``); ``fp8_pair_tiles``: two K
tiles per iteration, wait 1 then 0 (``_pair_loop``).

Partial tiles: every chunk is bounded where the operand's tiles overhang its true extent (zeros
in, as the mma.sync kernel's copies); the epilogue's stores are bounded likewise. Dynamic sizes:
the extents are the prologue's values (``Rewriter.sizes``), the K loops run ``_k_tiles`` =
ceil(K / tile_k) tiles of the run-time K, and the ring's prologue copies only tiles below it.

The stores, copies, groups and barriers carry ``mmaflow.ring``: their order is this stage's (the
`barriers` stage cannot see the wgmma's shared-memory reads).
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, hal, llvm, nvvm, scf

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.mlir import clone_into, defining_op, ops_named
from mmaflow.compiler.kernels.common.contraction import (
    KLoop,
    Match,
    Rewriter,
    _fail,
    _transfer_parts,
    raster_tile,
    workgroup_id_ops,
)
from mmaflow.compiler.kernels.common.descriptors import shared_start, swizzled_offset, wgmma_attributes
from mmaflow.compiler.kernels.common.emit import Emitter, vector_type
from mmaflow.compiler.kernels.common.fragments import LaneIndex
from mmaflow.compiler.kernels.wgmma.plan import CHUNK_BYTES, PARTIAL_CHUNK, WgmmaOperand, WgmmaPlan
from mmaflow.compiler.kernels.wgmma.tma import TmaRing


class WgmmaRewriter(Rewriter):
    """Rewrites one matched dispatch into the warpgroup-MMA kernel of ``plan``."""

    plan: WgmmaPlan

    def __init__(self, func: ir.Operation, m: Match, plan: WgmmaPlan, mem_extents: dict):
        super().__init__(func, m, plan, mem_extents)

    # ---- small emitters ----------------------------------------------------------------------------
    def _op(self, em: Emitter, name: str, operands=(), results=(), attributes=None) -> ir.Operation:
        return em.create(name, operands, results, attributes)

    @staticmethod
    def _i64(em: Emitter, value: int) -> ir.Value:
        with em.loc, em.ip:
            return arith.ConstantOp(ir.IntegerType.get_signless(64), value).result

    # ---- the kernel --------------------------------------------------------------------------------
    def run(self) -> None:
        m, plan = self.m, self.plan
        self.kernel_prologue()
        top = self.top
        self.rank = self._split_workgroups() if plan.split_k > 1 else None
        tid = top.thread_id()
        i64 = ir.IntegerType.get_signless(64)
        shared, starts = [], []  # per allocation: (memref, its 1024-byte pad in elements), descriptor start field
        for i in range(plan.allocations):  # one; two (A's slots, B's slots) for mixed element types
            elem = ir.MemRefType(m.operands[i].alloc.type).element_type
            ebytes = plan.operands[i].smem.element_bytes
            smem = top.alloc_lds([plan.allocation_bytes(i) // ebytes], elem)
            # The allocation's address rounded up to 1024 (IREE aligns dynamic shared memory to 16 only).
            address, pad, start = shared_start(top, smem)
            shared.append((smem, top.div(pad, ebytes)))
            if i == 0:  # (split-K's partial sums go over the first allocation's slots)
                self._smem_address = address
            starts.append(start)
        warpgroup = top.div(tid, 128)
        desc = {}
        for op_plan in plan.operands:
            name = op_plan.name
            d0 = plan.descriptor(name, 0, 0)
            fields = d0.encode()  # start (tile offset >> 4) | LBO | SBO | swizzle mode, for base 0
            with top.loc, top.ip:
                d = arith.AddIOp(starts[op_plan.allocation], self._i64(top, fields)).result  # no carry: < 2^18
                if name == "A" and plan.warpgroups > 1:
                    step = arith.IndexCastOp(i64, top.mul(warpgroup, plan.a_warpgroup_step >> 4)).result
                    d = arith.AddIOp(d, step).result
            desc[name] = d
        n_fields = plan.intrinsic.n // 2
        struct_t = ir.Type.parse("!llvm.struct<(" + ", ".join(["f32"] * n_fields) + ")>")
        self.promote = plan.promotes and self._fp8_promotion
        if self.promote:  # the f32 accumulator as a vector (the epilogue's form); partials are structs
            vec_t = vector_type([n_fields], ir.F32Type.get())
            with top.loc, top.ip:
                acc0 = arith.ConstantOp(
                    vec_t, ir.DenseElementsAttr.get_splat(vec_t, ir.FloatAttr.get(ir.F32Type.get(), 0.0))
                ).result
            # the first wgmma of a K tile has scale-d 0: its input accumulator is not read (undef)
            self.fresh = self._op(top, "llvm.mlir.undef", [], [struct_t]).result
        else:
            acc0 = self._op(top, "llvm.mlir.zero", [], [struct_t]).result
        if plan.tma is not None:  # the ring filled by TMA (--config copy=tma; f16/bf16): compiler/kernels/wgmma/tma.py
            ring = TmaRing(self)
            loop = ring.loop(tid, shared, desc, acc0, struct_t)
            acc = loop.op.results[0]
        elif plan.pipelined:
            loop, acc = self._ring_loop(tid, shared, desc, acc0, struct_t)
        else:
            loop, acc = self._k_loop(tid, shared, desc, acc0, struct_t)
        # The accumulator, as the epilogue's per-warp vector (field i = vector element i).
        w = self.m.out_write
        em = Emitter(ir.InsertionPoint(w), w.location, self.vendor).named("epilogue")
        if self.promote:
            vec = acc
        else:
            vals = [
                self._op(
                    em, "llvm.extractvalue", [acc], [ir.F32Type.get()], {"position": ir.DenseI64ArrayAttr.get([i])}
                ).result
                for i in range(n_fields)
            ]
            vec = em.from_elements(vector_type([n_fields], ir.F32Type.get()), vals)
        lay = plan.epilogue.layout
        lanes = LaneIndex(top, top.rem(tid, plan.wave_size), plan.wave_size)
        assert lay.batch == (1, 1) and lay.op_vector_length == n_fields
        if plan.split_k > 1:  # the cluster's partial sums added; each row stored by one rank
            vec = self._reduce_split_k(em, tid, vec)
        self._store_accumulators([vec], lanes)
        self._erase_old()
        if plan.tma is not None and plan.tma.specialized:  # the producer warpgroup stores nothing
            ring.guard_epilogue(loop.op)
            self.tile_j, self.roles = ring.tile_j, loop.op.operation
        if plan.persistent:
            self._persist()
        if plan.tma is not None and plan.tma.cluster > 1:  # no peer may multicast or arrive into an exited one
            term = [o.operation for o in self.func.regions[0].blocks[0].operations][-1]
            ring.cluster_barrier(
                Emitter(ir.InsertionPoint(term), term.location, self.vendor).named("wgmma.tma.cluster"), at_exit=True
            )
            attrs.write_cluster_dim(self.func, (plan.tma.cluster, 1, 1))
        if plan.split_k > 1:
            attrs.write_cluster_dim(self.func, (plan.split_k, 1, 1))

    def _k_loop(self, tid, shared: list, desc: dict, acc0, struct_t) -> tuple[KLoop, ir.Value]:
        plan = self.plan
        old = self.m.loop
        old_body = old.regions[0].blocks[0]
        old_iv = list(old_body.arguments)[0]
        lb, step = old.operands[0], old.operands[2]
        pre = Emitter(ir.InsertionPoint(old), old.location, self.vendor).named("wgmma")
        kt = self._k_tiles(pre)  # static K: the script's bounds; dynamic: whole tiles covering K
        if plan.split_k > 1:  # this workgroup's share of the K tiles
            lb = self.k_first(pre, lb)
            ub = pre.add(lb, kt * plan.tile_k)
        else:
            ub = old.operands[1] if isinstance(kt, int) else pre.add(lb, pre.mul(kt, plan.tile_k))
        with self.m.loop.location, ir.InsertionPoint(self.m.loop):
            loop = scf.ForOp(lb, ub, step, [acc0])
        body = loop.body
        em = Emitter(ir.InsertionPoint(body), self.m.loop.location, self.vendor).named("wgmma")
        iv = loop.induction_variable
        attrs.mark(em.barrier(), attrs.RING)
        for opd, op_plan in zip(self.m.operands, plan.operands):
            self._copy_tile(em, opd, op_plan, old_body, old_iv, iv, tid, *shared[op_plan.allocation])
        self._op(
            em,
            "nvvm.fence.proxy",
            [],
            [],
            {"kind": "#nvvm.proxy_kind<async.shared>", "space": "#nvvm.shared_space<cta>"},
        )
        attrs.mark(em.barrier(), attrs.RING)
        carried = loop.inner_iter_args[0]
        acc = self._wgmmas(em, desc, self.fresh if self.promote else carried, struct_t, None, fresh=self.promote)
        self._op(em, "nvvm.wgmma.commit.group.sync.aligned")
        with em.loc:
            group = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
        self._op(em, "nvvm.wgmma.wait.group.sync.aligned", [], [], {"group": group})
        if self.promote:  # the tile's partial, complete after wait 0, into the f32 accumulator
            acc = self._promote_partial(em, carried, acc)
        with em.loc, em.ip:
            scf.YieldOp([acc])
        return KLoop(loop, [], [], None), loop.results[0]

    def _promote_partial(self, em: Emitter, acc: ir.Value, partial: ir.Value) -> ir.Value:
        """acc + partial: the f32 accumulator (a vector<N/2 x f32>) plus a K tile's fp8 partial
        (an !llvm.struct of N/2 f32, its wgmma group waited for), one f32 add per field."""
        n = self.plan.intrinsic.n // 2
        vals = [
            self._op(
                em, "llvm.extractvalue", [partial], [ir.F32Type.get()], {"position": ir.DenseI64ArrayAttr.get([i])}
            ).result
            for i in range(n)
        ]
        vec = em.from_elements(vector_type([n], ir.F32Type.get()), vals)
        with em.loc, em.ip:
            return arith.AddFOp(acc, vec).result

    def k_first(self, em: Emitter, lb: ir.Value) -> ir.Value:
        """The K origin of this workgroup's first K tile: the script's lower bound, plus with
        split-K its rank's share, rank * ``plan.k_tiles`` K tiles on."""
        if self.plan.split_k == 1:
            return lb
        rank = self.rank if self._split_k_share else em.const(0)
        return em.add(lb, em.mul(rank, self.plan.k_tiles * self.plan.tile_k))

    # Mutation hooks for the tests (e2e_tests/test_split_k.py): False leaves out the cluster barrier
    # before the peers' partials are read / after (so a peer may exit while read); _split_k_share
    # False gives every rank rank 0's K tiles.
    _split_k_syncs = (True, True)
    _split_k_share = True
    _split_k_spread = True  # False: rank 0 reduces and stores every row (the others idle)

    def _split_workgroups(self) -> ir.Value:
        """Split-K: the grid has ``split_k`` workgroups per output tile along x (a cluster of
        (split_k, 1, 1)); every use of the workgroup id x and count x (the tile column, the
        raster) takes them divided by ``split_k``. Returns the workgroup's rank, id x % split_k
        (its ``%cluster_ctarank``: the cluster spans x)."""
        s = self.plan.split_k
        for name in ("hal.interface.workgroup.id", "hal.interface.workgroup.count"):
            for op in ops_named(self.func, name):
                if ir.IntegerAttr(op.attributes["dimension"]).value != 0:
                    continue
                em = Emitter(ir.InsertionPoint.after(op), op.location, self.vendor).named("wgmma.split_k")
                q = em.div(op.result, s)
                op.result.replace_all_uses_except(q, defining_op(q))
        em = self.top.named("wgmma.split_k")
        with em.loc, em.ip:
            x = hal.interface_workgroup_id(0)
        return em.rem(x, s)

    def _reduce_split_k(self, em: Emitter, tid: ir.Value, vec: ir.Value) -> ir.Value:
        """The split-K cluster's reduction, after every warpgroup's last ``wgmma.wait_group 0``
        (``WgmmaPlan.split_k``; the kernel's exit is ordered by the second cluster barrier):

            barrier                                  (no warpgroup reads a slot any more)
            st.shared [base + (c * T + t) * 16] <- partial chunk c  (c < N/8: 4 f32 each)
            barrier.cluster.arrive; barrier.cluster.wait          (every CTA's partial stored)
            warp w of rank w % S (its rows' owner):
                sum_c = ld.shared::cluster(mapa(addr_c, 0)) + ... (mapa(addr_c, S - 1)), in rank order
            barrier.cluster.arrive; barrier.cluster.wait          (no peer exits while read)
            the owners: the epilogue of their sums                (``scf.if``: the old write moved in)

        Each rank reduces and stores the rows of its warps (warp w's 16 rows of each 64 belong to
        rank w % S; with more ranks than warps the last ones own none), so the S CTAs share the
        distributed shared-memory reads and the stores. Every element's sum has one order, rank
        0's partial then ranks 1, 2, ... (the owner's own read back from its shared memory), so
        every run gives the same bits. Returns the sums (the owners' values; the others' are
        not stored)."""
        plan = self.plan
        s, threads, n = plan.split_k, plan.warpgroups * 128, plan.intrinsic.n // 2
        per = PARTIAL_CHUNK // 4
        chunk_t = vector_type([per], ir.F32Type.get())
        i64 = ir.IntegerType.get_signless(64)
        p3 = ir.Type.parse("!llvm.ptr<3>")
        p7 = ir.Type.parse("!llvm.ptr<7>")
        red = em.named("wgmma.split_k")
        attrs.mark(red.barrier(), attrs.RING)
        ptrs = []
        for c in range(n // per):
            addr = red.add(self._smem_address, red.mul(red.add(tid, c * threads), PARTIAL_CHUNK))
            with red.loc, red.ip:
                ptr = llvm.IntToPtrOp(p3, arith.IndexCastOp(i64, addr).result).result
                llvm.StoreOp(red.extract_slice(vec, c * per, per), ptr)
            ptrs.append(ptr)
        if self._split_k_syncs[0]:
            red.cluster_sync()
        owner = red.eq(red.rem(red.div(tid, 32), s), self.rank) if self._split_k_spread else red.eq(self.rank, 0)
        with red.loc, red.ip:
            first = scf.IfOp(owner, [vec.type], has_else=True)
        inside = red.at(ir.InsertionPoint(first.then_block))
        sums = []
        for ptr in ptrs:
            acc = None
            for r in range(s):
                with inside.loc, inside.ip:
                    peer = arith.ConstantOp(ir.IntegerType.get_signless(32), r).result
                    part = llvm.LoadOp(chunk_t, nvvm.MapaOp(p7, ptr, peer).result).result
                    acc = part if acc is None else arith.AddFOp(acc, part).result
            sums.append(acc)
        with inside.loc, inside.ip:
            scf.YieldOp([inside.concat(sums)])
        with red.loc, ir.InsertionPoint(first.else_block):
            scf.YieldOp([vec])
        if self._split_k_syncs[1]:
            red.cluster_sync()
        with red.loc, red.ip:
            store = scf.IfOp(owner)
        with red.loc, ir.InsertionPoint(store.then_block):
            y = scf.YieldOp([])
        self.m.out_write.move_before(y)  # the epilogue's stores are emitted at the old write
        return first.results[0]

    def _k_tiles(self, em: Emitter):
        """The K tiles: an int for a static K (the script's loop, ``plan.k_tiles``: with split-K this
        workgroup's share), else as many
        as cover the run-time K, ceil(K / tile_k), an index value (the last one partial unless K
        is promised whole tiles; its chunks past K are zero-filled). A dynamic K of 0 gives no K
        tile: the loops are empty and the accumulator stays 0."""
        if self.plan.k_tiles is not None:
            return self.plan.k_tiles
        tk = self.plan.tile_k
        return em.div(em.add(self.sizes["k"], tk - 1), tk)

    def _wgmmas(self, em: Emitter, desc: dict, acc, struct_t, slot, fresh: bool = False):
        """``wgmma.fence``, then the K tile's wgmmas on the shared tiles of ``slot`` (None: the
        only slot); returns the accumulator. ``fresh``: the first wgmma has scale-d 0 (D = A * B,
        ``acc`` not read): the tile's fp8 partial starts from zero."""
        plan = self.plan
        self._op(em, "nvvm.wgmma.fence.aligned")
        intr = plan.intrinsic
        if slot is not None:  # the slot's descriptors: start field + slot * slot stride / 16
            with em.loc, em.ip:
                i64 = ir.IntegerType.get_signless(64)
                shifts = {}  # by slot stride (one: the slot; A's and B's rings apart for mixed types)
                for o in plan.operands:
                    if o.slot_stride not in shifts:
                        shifts[o.slot_stride] = arith.IndexCastOp(i64, em.mul(slot, o.slot_stride >> 4)).result
                desc = {o.name: arith.AddIOp(desc[o.name], shifts[o.slot_stride]).result for o in plan.operands}
        a0, b0 = plan.descriptor("A", 0, 0).start_address, plan.descriptor("B", 0, 0).start_address
        mma_attrs = wgmma_attributes(intr, plan.a.k_innermost, plan.b.k_innermost)
        zero_attrs = wgmma_attributes(intr, plan.a.k_innermost, plan.b.k_innermost, zero_d=True)
        for s in range(plan.k_steps):
            ops = []
            for name, first in (("A", a0), ("B", b0)):
                delta = (plan.descriptor(name, 0, s).start_address - first) >> 4
                if delta:
                    with em.loc, em.ip:
                        ops.append(arith.AddIOp(desc[name], self._i64(em, delta)).result)
                else:
                    ops.append(desc[name])
            step_attrs = zero_attrs if fresh and s == 0 else mma_attrs
            acc = self._op(em, "nvvm.wgmma.mma_async", [acc] + ops, [struct_t], step_attrs).result
        return acc

    def _wgmma_wait(self, em: Emitter, pending: int) -> None:
        with em.loc:
            group = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pending)
        self._op(em, "nvvm.wgmma.wait.group.sync.aligned", [], [], {"group": group})

    def _proxy_fence(self, em: Emitter) -> None:
        self._op(
            em,
            "nvvm.fence.proxy",
            [],
            [],
            {"kind": "#nvvm.proxy_kind<async.shared>", "space": "#nvvm.shared_space<cta>"},
        )

    # Mutation hook for the tests (e2e_tests/test_wgmma_kernel.py): copy tile t + copy_ahead into
    # the slot of tile t + copy_ahead + _slot_skew, i.e. reuse a slot _slot_skew stages too early.
    _slot_skew = 0
    # Mutation hook for the tests (e2e_tests/test_wgmma_fp8.py): False emits the fp8 kernel without
    # promotion (every wgmma accumulating straight into the one accumulator, as first measured on
    # the H200), to show that the executor's model of the fp8 accumulator fails it.
    _fp8_promotion = True

    def _ring_loop(self, tid, shared: list, desc: dict, acc0, struct_t) -> tuple[KLoop, ir.Value]:
        """The K loop over a ring of S = ``plan.stages`` shared-memory slots (tile t in slot
        t % S), filled by cp.async (16 bytes per copy, at ``SmemLayout.offset`` in the slot), with
        A = ``plan.copy_ahead`` tiles copied ahead and L = ``plan.wgmma_lag`` wgmma groups left
        running (K is whole tiles: ``wgmma_plan`` refuses the rest):

            prologue: copy tiles 0 .. A-1 into slots 0 .. A-1, one commit group each (a tile
                      past K: an empty group, so that the wait counts hold)
            tile t:   cp.async.wait_group A-1 (tile t landed, for this thread's copies)
                      fence.proxy.async.shared::cta
                      barrier
                      wgmma.fence; K steps of wgmma.mma_async on slot t % S; commit_group
                      copy tile t+A into slot (t+A) % S (the drain loop: an empty group)
                      wgmma.wait_group L
            after:    wgmma.wait_group 0; cp.async.wait_group 0

        Why the fence: wgmma.mma_async reads its shared-memory operands through the async proxy
        (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions":
        wgmma's shared-memory accesses are async-proxy operations, and "accessing the same memory
        location across multiple proxies needs a cross-proxy fence. For the async proxy,
        fence.proxy.async should be used to synchronize memory between generic proxy and the
        async proxy"); a non-bulk cp.async writes shared memory through the generic proxy (the
        PTX memory model puts only the bulk copies, cp.async.bulk*, and tensor-map/wgmma accesses
        in the async proxy), and its writes are this thread's only once cp.async.wait_group
        covers them. So each thread fences after its wait, and the barrier then publishes every
        thread's fenced bytes to both warpgroups.

        Why the slot is free: the copy at tile t writes the slot of tile t+A-S = t-1-L. Every
        warpgroup passed ``wgmma.wait_group L`` at the end of tile t-1 -- which completes the
        group of tile t-1-L -- before the barrier of tile t, and the copy is issued after that
        barrier. One barrier per K tile serves both: tile t published, slot t-1-L free."""
        plan = self.plan
        S, A, L = plan.stages, plan.copy_ahead, plan.wgmma_lag
        old = self.m.loop
        old_body = old.regions[0].blocks[0]
        old_iv = list(old_body.arguments)[0]
        pre = Emitter(ir.InsertionPoint(old), old.location, self.vendor).named("wgmma.ring")
        lb = self.k_first(pre, old.operands[0])
        kt = self._k_tiles(pre)  # an int, or an index value (dynamic K)
        step_k = plan.tile_k

        def origin(em: Emitter, tile) -> ir.Value:
            """The K origin of tile ``tile`` (an int or an index value)."""
            return em.add(lb, step_k * tile) if isinstance(tile, int) else em.add(lb, em.mul(tile, step_k))

        def issue(em: Emitter, tile, slot, tile_valid=None) -> None:
            """cp.async of tile ``tile`` into ``slot`` (None: nothing to copy), one commit group;
            ``tile_valid`` (an i1): false when the tile lies past a dynamic K (zero-filled, nothing read)."""
            tokens = []
            if tile is not None:
                for opd, op_plan in zip(self.m.operands, plan.operands):
                    tokens += self._copy_tile(
                        em,
                        opd,
                        op_plan,
                        old_body,
                        old_iv,
                        origin(em, tile),
                        tid,
                        *shared[op_plan.allocation],
                        slot=slot,
                        tile_valid=tile_valid,
                    )
            group = em.async_group(tokens)
            attrs.mark(defining_op(group), attrs.RING)
            if em is pre:  # nvgpu.device_async_wait's token operand (the hardware counts groups)
                self._group = group

        pairs = self.promote and L == 1  # fp8_pair_tiles: two tiles per iteration (``_pair_loop``)
        block = old.operation.block
        start = _position(block, old)
        for t in range(A):
            if isinstance(kt, int) and not pairs:
                issue(pre, t if t < kt else None, pre.const(t % S))
            elif isinstance(kt, int):  # pairs: a tile past K is zero-filled (it may be the pair's second)
                issue(pre, t, pre.const(t % S), None if t < kt else self._false(pre))
            else:  # the prologue's tiles may lie past a dynamic K (down to K = 0)
                issue(pre, t, pre.const(t % S), pre.lt(pre.const(t), kt))
        # the prologue's copies (index computations, cp.async, commits): a persistent grid issues
        # them for the next tile before this one's epilogue (``_persist``)
        self._ring_prologue = [o.operation for o in block.operations][start : _position(block, old)]
        if pairs:
            return self._pair_loop(pre, old, kt, issue, desc, acc0, struct_t)
        if isinstance(kt, int):
            main_tiles, kt_v = pre.const(max(kt - A, 0)), pre.const(kt)
        else:
            main_tiles, kt_v = pre.select(pre.lt(pre.const(A), kt), pre.sub(kt, pre.const(A)), pre.const(0)), kt
        bounds = [(pre.const(0), main_tiles, True), (main_tiles, kt_v, False)]
        # fp8 (``plan.promotes``) with L = 0: the iter_arg is the f32 accumulator, each tile's
        # partial is added after its wait_group 0 (L = 1, ``fp8_pair_tiles``: ``_pair_loop``)
        state = [acc0]
        last = None
        for first, end, copies in bounds:
            with old.location, ir.InsertionPoint(old):
                loop = scf.ForOp(first, end, pre.const(1), state)
            em = Emitter(ir.InsertionPoint(loop.body), old.location, self.vendor).named(
                "wgmma.ring" if copies else "wgmma.ring.drain"
            )
            t = loop.induction_variable
            em.async_wait(self._group, A - 1)
            self._proxy_fence(em)
            attrs.mark(em.barrier(), attrs.RING)
            args = list(loop.inner_iter_args)
            out = self._wgmmas(
                em, desc, self.fresh if self.promote else args[0], struct_t, em.rem(t, S), fresh=self.promote
            )
            self._op(em, "nvvm.wgmma.commit.group.sync.aligned")
            if copies:
                issue(em, em.add(t, A), em.rem(em.add(t, A + self._slot_skew), S))
            else:
                issue(em, None, None)
            self._wgmma_wait(em, L)
            if self.promote:  # wait_group 0: this tile's partial into the f32 accumulator
                yields = [self._promote_partial(em, args[0], out)]
            else:
                yields = [out]
            with em.loc, em.ip:
                scf.YieldOp(yields)
            state = list(loop.results)
            last = loop
        after = Emitter(ir.InsertionPoint.after(last.operation), old.location, self.vendor).named("wgmma.ring")
        self._wgmma_wait(after, 0)
        after.async_wait(self._group, 0)
        self._ring_last = last.operation  # (a persistent grid's prefetch goes after its two waits)
        return KLoop(last, [], [], None), state[0]

    @staticmethod
    def _false(em: Emitter) -> ir.Value:
        with em.loc, em.ip:
            return arith.ConstantOp(ir.IntegerType.get_signless(1), 0).result

    def _pair_loop(self, pre: Emitter, old, kt, issue, desc: dict, acc0, struct_t) -> tuple[KLoop, ir.Value]:
        """fp8 promotion with one wgmma group left running inside a pair of K tiles
        (``WgmmaPlan.fp8_pair_tiles``): two tiles per iteration, each into its own partial
        (fresh registers, scale-d 0 first), the second tile's wgmmas issued while the first's run:

            tile 2i:   cp.async.wait_group A-1; fence.proxy; barrier; wgmma x K steps -> P; commit;
                       cp.async tile 2i+A (zero-filled past K); wait_group 1
            tile 2i+1: the same -> Q; commit; cp.async tile 2i+1+A; wait_group 0;
                       acc += P; acc += Q                        (f32 adds, in tile order)

        Why not wait_group 1 in both tiles (a partial carried across the back edge, added after the
        next tile's wait): ptxas 12.9 then reports the wgmmas serialized (C7514) -- it does not
        credit a wait_group 1 at the top of the loop body with completing the group issued at its
        bottom (checked: either wait at 0 removes the warning) -- and a one-tile loop carrying the
        previous partial also makes PTX movs of a running group's registers at the loop head
        (C7517, an injected wait). So the pipeline drains once per pair instead of once per tile.

        The loop runs ceil(K tiles / 2) pairs; with an odd count the last pair's second tile lies
        past K: its slot was zero-filled (the prologue's and the loop's copies past K copy 0
        bytes), its partial is exactly 0 and adding it changes nothing."""
        plan = self.plan
        S, A = plan.stages, plan.copy_ahead
        kt_v = pre.const(kt) if isinstance(kt, int) else kt
        n_pairs = pre.const((kt + 1) // 2) if isinstance(kt, int) else pre.div(pre.add(kt, 1), 2)
        with old.location, ir.InsertionPoint(old):
            loop = scf.ForOp(pre.const(0), n_pairs, pre.const(1), [acc0])
        em = Emitter(ir.InsertionPoint(loop.body), old.location, self.vendor).named("wgmma.ring")
        parts = []
        for half in (0, 1):
            t = em.add(em.mul(loop.induction_variable, 2), half)
            em.async_wait(self._group, A - 1)
            self._proxy_fence(em)
            attrs.mark(em.barrier(), attrs.RING)
            parts.append(self._wgmmas(em, desc, self.fresh, struct_t, em.rem(t, S), fresh=True))
            self._op(em, "nvvm.wgmma.commit.group.sync.aligned")
            nxt = em.add(t, A)
            issue(em, nxt, em.rem(em.add(t, A + self._slot_skew), S), em.lt(nxt, kt_v))
            self._wgmma_wait(em, 1 - half)
        acc = loop.inner_iter_args[0]
        for part in parts:
            acc = self._promote_partial(em, acc, part)
        with em.loc, em.ip:
            scf.YieldOp([acc])
        after = Emitter(ir.InsertionPoint.after(loop.operation), old.location, self.vendor).named("wgmma.ring")
        self._wgmma_wait(after, 0)
        after.async_wait(self._group, 0)
        return KLoop(loop, [], [], None), loop.results[0]

    def _copy_tile(
        self,
        em: Emitter,
        opd,
        op_plan: WgmmaOperand,
        old_body,
        old_iv,
        iv,
        tid,
        smem,
        pad_elems,
        slot=None,
        tile_valid=None,
    ) -> list:
        """This thread's 16-byte chunks of the operand's global tile (K origin ``iv``) into its
        shared tile, each at ``SmemLayout.offset`` of its first element (a chunk never straddles a
        swizzled chunk): 128-bit loads and stores (``slot`` None: the one-stage kernel), or one
        cp.async per chunk into ring slot ``slot`` (returns their tokens)."""
        src_mem, src_idx, vt = _transfer_parts(opd.copy_read)
        if tuple(vt.shape[-2:]) != (op_plan.rows, op_plan.cols):
            raise ValueError(
                f"{opd.name}: the script's tile is {list(vt.shape)}, the plan's {op_plan.rows}x{op_plan.cols}"
            )
        src = self._global(src_mem)
        ext = self.mem_extents[src_mem][1]
        limits = tuple(self._limits(ext)[-2:])  # true extents where tiles overhang (partial tiles)
        lead = self._clone_slice(src_idx[:-2], old_body, {old_iv: iv}, em.ip)
        g0, g1 = self._clone_slice(src_idx[-2:], old_body, {old_iv: iv}, em.ip)
        lay = op_plan.smem
        per_chunk = CHUNK_BYTES // lay.element_bytes
        chunk_t = vector_type([per_chunk], ir.MemRefType(smem.type).element_type)
        chunks_per_row = op_plan.cols // per_chunk
        threads = self.plan.workgroup_size
        base = op_plan.offset // lay.element_bytes
        if slot is not None:
            base = em.add(base, em.mul(slot, op_plan.slot_stride // lay.element_bytes))
        tokens = []
        for i in range(op_plan.chunks_per_thread):
            c = em.add(tid, threads * i)
            row = em.div(c, chunks_per_row)
            col = em.mul(em.rem(c, chunks_per_row), per_chunk)
            gidx = lead + [em.add(g0, row), em.add(g1, col)]
            mn, k = (row, col) if op_plan.k_innermost else (col, row)
            off = self._offset(em, lay, mn, k)  # bytes from the tile base
            idx = em.add(pad_elems, base, em.div(off, lay.element_bytes))
            if slot is None:  # (reads 0 past a true extent)
                val = em.bounded_global_load(src, gidx, chunk_t, [None] * len(lead) + list(limits))
                attrs.mark(em.lds_store(val, smem, [idx]), attrs.RING)
            else:  # past a true extent: 0 source bytes, the 16 bytes zero-filled
                valid = em.in_bounds(gidx[-2:], limits)
                if tile_valid is not None:
                    valid = tile_valid if valid is None else em.and_(tile_valid, valid)
                token = em.async_copy(src, gidx, smem, [idx], per_chunk, valid, bypass_l1=True)  # cp.async.cg
                attrs.mark(defining_op(token), attrs.RING)
                tokens.append(token)
        return tokens

    def _offset(self, em: Emitter, lay, mn, k):
        """``SmemLayout.offset(mn, k)`` as index arithmetic, for a chunk-aligned element."""
        return swizzled_offset(em, lay, mn, k)

    # ---- the persistent grid ---------------------------------------------------------------------

    # Mutation hook for the tests (e2e_tests/test_persistent.py): prefetch tile j + _prefetch_tile
    # (1: the next one) before tile j's epilogue.
    _prefetch_tile = 1
    _prefetch_barrier = True  # False: the next tile's copies without the barrier before them
    _walk_items = True  # False: every tile in batch item 0 (a batch's tiles not walked)

    def _persist(self) -> None:
        """Turn the one-tile kernel into a loop over ``plan.persistent`` output tiles (``W``), run
        by tiles / W workgroups (hand-back's grid):

            (setup: thread id, shared memory, descriptors, ...: before the loop)
            ring prologue for tile lin                         (cp.async tiles 0..A-1, commits)
            scf.for j < W:
                (row, col) = raster(lin + j * G)                (G = tiles / W; lin = workgroup id x; clusters
                                                                of c: (q, col) = raster((lin + j * G) / c) over
                                                                the pairs' grid, row = c * q + (lin + j * G) % c)
                everything that depended on the workgroup ids: the ring's K loops, their waits
                barrier                                        (every warpgroup's wgmmas are done)
                if j + 1 < W: ring prologue for tile lin + (j+1) * G     (into slots 0..A-1)
                epilogue of tile lin + j * G                   (registers -> global, while they land)

        The next tile's copies are the ring prologue's ops cloned with the next tile's indices;
        after the barrier no wgmma reads any slot, so their slots are free. Every workgroup runs
        W tiles (``persistent_refusal``: W divides the tile count), so the loop is uniform."""
        plan = self.plan
        block = self.func.regions[0].blocks[0]
        ops = [o.operation for o in block.operations]
        term = ops[-1]
        olds = workgroup_id_ops(self.func)  # (z: the batch item, from the tile index as x and y)
        ids = {o.result for d in (0, 1, 2) for o in olds[d]}
        dep: set = set(ids)

        def depends(op) -> bool:
            if any(v in dep for v in op.operands):
                return True
            for region in op.regions:
                for b in region.blocks:
                    for inner in b.operations:
                        if depends(inner.operation):
                            return True
            return False

        # Moved into the loop: what depends on the ids, and every op with effects after the first
        # such (the warp-specialized kernel: after the role split; its setup runs once).
        specialized = plan.tma is not None and plan.tma.specialized
        moved, seen = [], False
        for op in ops[:-1]:
            d = depends(op)
            if d:
                dep.update(op.results)
            if d or (seen and not _pure(op)):
                moved.append(op)
            seen = seen or (op == self.roles if specialized else d)
        if not moved:
            raise _fail("the kernel does not depend on the workgroup ids")
        prologue = [] if specialized else list(self._ring_prologue)
        gx, gy = plan.tile_grid
        grid = gx * gy * plan.batch // plan.persistent
        top = Emitter(ir.InsertionPoint(term), term.location, self.vendor).named("persistent")
        with top.loc, top.ip:
            lin = hal.interface_workgroup_id(0)
            loop = scf.ForOp(top.const(0), top.const(plan.persistent), top.const(1))
        j = loop.induction_variable
        with top.loc, ir.InsertionPoint(loop.body):
            y = scf.YieldOp([])
        for op in moved:
            op.move_before(y)
        head = Emitter(ir.InsertionPoint(moved[0]), term.location, self.vendor).named("persistent")
        tile = head.add(lin, head.mul(j, grid))
        item = None
        if plan.batch > 1:  # batch item tile / (gx * gy), its tiles in the raster's order
            item, tile = head.div(tile, gx * gy), head.rem(tile, gx * gy)
            item = item if self._walk_items else head.const(0)
        c = plan.tma.cluster if plan.tma is not None else 1
        if c > 1:  # the workgroups of a cluster (lin c * p + r) on tile rows c * q + r of one tile column
            q, col = raster_tile(head, head.div(tile, c), gx, gy // c, plan.raster)
            row = head.add(head.mul(q, c), head.rem(tile, c))
        else:
            row, col = raster_tile(head, tile, gx, gy, plan.raster)
        if olds[2] and item is None:  # (a batch of one: item 0)
            item = head.const(0)
        for dim, new in ((0, col), (1, row), (2, item)):
            for op in olds[dim]:
                op.result.replace_all_uses_with(new)
                op.erase()
        if specialized:  # the roles' ring count runs on across tiles (TmaRing.specialized)
            placeholder = defining_op(self.tile_j)
            self.tile_j.replace_all_uses_with(j)
            placeholder.erase()
            self._roles_outside(loop.operation)
            return
        # the ring prologue: once before the loop for j = 0, and in the loop for j + 1
        body = loop.body
        slice_ = _backward_slice(prologue, body)
        first = Emitter(ir.InsertionPoint(loop.operation), term.location, self.vendor).named("persistent")
        zero = first.const(0)
        pre_map = clone_into(slice_ + prologue, first.ip, {j: zero})
        end = [o.operation for o in body.operations][_position(body, self._ring_last) + 3]  # after its two waits
        at = Emitter(ir.InsertionPoint(end), term.location, self.vendor).named("persistent.prefetch")
        nxt = at.add(j, 1)
        fetched = nxt if self._prefetch_tile == 1 else at.add(j, self._prefetch_tile)
        inside = at.if_then(at.lt(nxt, at.const(plan.persistent)))
        if self._prefetch_barrier:
            attrs.mark(inside.barrier(), attrs.RING)
        clone_into(slice_ + prologue, inside.ip, {j: fetched})
        self._group.replace_all_uses_with(pre_map[self._group])
        for op in reversed(prologue + slice_):  # (a constant the prologue made may serve others too)
            if not any(list(r.uses) for r in op.results):
                op.erase()

    def _roles_outside(self, loop: ir.Operation) -> None:
        """The warp-specialized persistent kernel: from

            scf.for j { ...; scf.if mma { setmaxnreg.inc; K loop } else { setmaxnreg.dec; copies }
                        scf.if mma { epilogue } }

        to ``scf.if mma { setmaxnreg.inc; scf.for j { ...; K loop; epilogue } } else {
        setmaxnreg.dec; scf.for j { ...; copies } }``: each role loops over the tiles on its own
        (the producer runs on into the next tile while the MMA warpgroups store this one), and
        setmaxnreg stays at its role's start, where ptxas can size the role's registers (inside
        the loop it cannot: it spills and serializes the wgmmas)."""
        body = list(loop.regions[0].blocks[0].operations)
        at = _position(loop.regions[0].blocks[0], self.roles)
        roles = body[at].operation
        guard = body[at + 1].operation
        assert guard.name == "scf.if" and len(guard.regions[1].blocks) == 0, guard.name
        top = Emitter(ir.InsertionPoint(loop), loop.location, self.vendor).named("wgmma.tma.roles")
        with top.loc, top.ip:
            outer = scf.IfOp(roles.operands[0], [], has_else=True)
        for side, block in ((0, outer.then_block), (1, outer.else_block)):
            with top.loc, ir.InsertionPoint(block):
                y = scf.YieldOp([])
            first = list(roles.regions[side].blocks[0].operations)[0].operation
            assert first.name == "nvvm.setmaxregister", first.name
            first.clone(ir.InsertionPoint(y))
            copy = loop.clone(ir.InsertionPoint(y))
            ops = list(copy.regions[0].blocks[0].operations)
            r, g = ops[at].operation, ops[at + 1].operation
            if side == 0:
                _inline(g, 0)
            else:
                g.erase()
            _inline(r, side, skip_first=True)
        loop.erase()


def _inline(op: ir.Operation, side: int, skip_first: bool = False) -> None:
    """Replace the scf.if ``op`` by the ops of its region ``side`` (without the first op if
    ``skip_first``), its results by what that region yields."""
    ops = [o.operation for o in op.regions[side].blocks[0].operations]
    term = ops[-1]
    for o in ops[1 if skip_first else 0 : -1]:
        o.move_before(op)
    for old, new in zip(op.results, list(term.operands)):
        old.replace_all_uses_with(new)
    op.erase()


def _position(block: ir.Block, op) -> int:
    """The index of ``op`` in ``block``."""
    target = op.operation if hasattr(op, "operation") else op
    for i, o in enumerate(block.operations):
        if o.operation == target:
            return i
    raise ValueError("op not in block")


_PURE = (
    "arith.",
    "affine.apply",
    "index.",
    "hal.interface.binding.subspan",
    "hal.interface.constant.load",
    "util.assume.int",
    "memref.subview",
    "memref.expand_shape",
    "memref.collapse_shape",
    "memref.cast",
    "memref.reinterpret_cast",
    "memref.extract_strided_metadata",
    "memref.extract_aligned_pointer_as_index",
    "memref.assume_alignment",
    "gpu.thread_id",
    "llvm.mlir.undef",
    "llvm.mlir.zero",
)


def _pure(op) -> bool:
    """An op with no effects and no regions (it may stay before a persistent loop)."""
    return not len(op.regions) and op.name.startswith(_PURE)


def _backward_slice(ops: list, body: ir.Block) -> list:
    """The ops of ``body`` (not in ``ops``) whose results ``ops`` use, transitively, in body order."""
    chosen: list = []
    members = set()
    stack = [v for op in ops for v in op.operands]
    own = {r for op in ops for r in op.results}
    while stack:
        v = stack.pop()
        if v in own or v in members:
            continue
        op = defining_op(v)
        if op is None or op.block != body:
            continue
        if len(op.regions):
            raise _fail(f"a persistent ring prologue depends on {op.name}, an op with regions", op)
        members.update(op.results)
        chosen.append(op)
        stack.extend(op.operands)
    return [o.operation for o in body.operations if any(o.operation == c for c in chosen)]


def distribute_warpgroup(func: ir.Operation, m: Match, plan: WgmmaPlan, mem_extents: dict) -> None:
    WgmmaRewriter(func, m, plan, mem_extents).run()
