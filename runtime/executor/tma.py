"""The lane executor's Hopper TMA: tensor maps built on the device, mbarriers, and
``cp.async.bulk.tensor`` (what ``--config copy=tma`` kernels use; ``compiler/kernels/wgmma/tma.py`` emits them).

A second, independent model of the hardware (it imports nothing from the compiler), from the
PTX ISA [PTX 8.3: "tensormap.replace", "Tensor-map", "cp.async.bulk.tensor", "mbarrier",
"Memory consistency model: proxies"] and the H200 probe (docs/HOPPER.md, "TMA probe"):

- **Addresses.** Global memory gets addresses: binding b's buffer starts at ``(b + 1) << 40``
  (``memref.extract_aligned_pointer_as_index`` of a binding subspan gives that base; the subspan's
  offset is ``memref.extract_strided_metadata``'s, as IREE's lowering addresses it), module globals
  (``memref.global`` / ``get_global``) at ``GLOBALS << 40`` and up. Shared memory addresses are the
  executor's LDS byte addresses. ``llvm.inttoptr`` / ``addrspacecast`` carry the integer.
- **Tensor maps** are structured records, not bytes: the hardware's 128-byte encoding is opaque
  (the probe found the device-built map equal to the driver's except the address and bytes 64-79),
  so ``tensormap.replace`` on a ``.shared::cta`` map sets a field of the record kept for that
  address. The first replace needs the 128 bytes there to be zero (a map built from zero bytes, as
  the probe's ``zero`` variant), and every field the copy uses must have been set: global_address,
  rank (zero-based), box_dim / global_dim / element_stride per dimension, global_stride per
  dimension but the innermost (bytes), elemtype, interleave_layout, swizzle_mode, fill_mode. A
  generic write to the map's bytes after that invalidates it. ``tensormap.cp_fenceproxy`` (inline
  PTX, warp 0 converged) copies the record to its global address with release semantics; a thread
  may use a global map for a bulk copy only after its own ``fence.proxy.acquire`` of that map
  since the map was last written. Two workgroups running together writing one global map address
  is an error (the per-SM slots must not be shared by co-resident blocks).
- **mbarriers** (per workgroup, by shared address): ``mbarrier.init`` (count), then
  ``fence.mbarrier_init`` and a barrier before another thread uses it; ``arrive.expect_tx`` counts
  an arrival and adds expected bytes; a bulk copy adds its box bytes as completed (when it lands).
  ``try_wait.parity P`` is true at once when the current phase's parity is not P (the phase P
  names completed); otherwise the phase completes here when every arrival came and the copies
  issued on it deliver exactly the expected bytes: then (and only then) those copies land. A wait
  that cannot complete is an error: the workgroup's threads run in lockstep, so nobody else will
  arrive (no hang).
- **cp.async.bulk.tensor** (2-D to 5-D, tile mode): the box's elements at the coordinates
  (innermost first), out-of-bounds ones zero (fill_mode zero), row after row of box[0] elements;
  the 128B swizzle is the hardware's address rule, byte address a stored at
  ``a ^ (((a >> 7) & 7) << 4)`` (16-byte chunk c of 128-byte row r at chunk ``c ^ (r % 8)``); the
  destination 128-byte aligned. The bytes are in flight from the issue until a wait completes the
  phase: any generic access or wgmma read of them before is an error (``in_flight``), as is a
  bulk copy into bytes a still-pending wgmma reads. TMA writes go through the async proxy, as
  wgmma reads: they need no ``fence.proxy.async`` (they are not "unfenced").
- **Clusters** [PTX ISA 8.x: "Cluster of cooperative thread arrays", "mapa", "barrier.cluster",
  "mbarrier" (remote arrive), "cp.async.bulk.tensor" (.multicast::cluster), "ld" / "st" (the
  .shared::cluster state space); CUDA guide "Thread Block Clusters", "Distributed Shared
  Memory"]. The function's ``nvvm.cluster_dim`` (cx, cy, cz) groups the grid (which must
  divide by it); workgroup (x, y, z) is rank (x % cx) + cx * ((y % cy) + cy * (z % cz)) of
  cluster (x // cx, y // cy, z // cz) (``%cluster_ctarank``, ``%cluster_nctarank``, the
  ``%cluster_ctaid`` / ``%clusterid`` registers). A batch runs whole clusters (a sample grows to
  them: ``executor.whole_clusters``); ``State.peers`` gives the row of each rank. ``nvvm.mapa``
  of shared address a and rank r gives ``CLUSTER_TAG | r << 24 | a`` (a shared address cast to
  ``!llvm.ptr<7>`` names the own CTA). ``mbarrier.arrive`` on another CTA's address arrives on
  that CTA's mbarrier, carrying what the thread knows of every CTA's wgmma completions
  (``wgmma``: knowledge per cluster rank and warpgroup). The scope qualifier is not
  told apart: a ``.release.cta`` arrive on a peer's mbarrier (CUTLASS's ``ClusterBarrier::arrive``,
  and mmaflow's) orders like a ``.cluster`` one here, which the PTX memory model's scopes do not
  strictly promise. A multicast bulk copy lands the box at its CTA-relative destination in every CTA
  of the mask, each joining that CTA's mbarrier at the mbar operand's CTA-relative address (the
  tx bytes may come before that CTA's own expect_tx), with every check above per destination;
  mask bits outside the cluster are an error. Another CTA may arrive on or copy into an mbarrier
  only after its init was fenced and a barrier.cluster completed. ``barrier.cluster.arrive`` /
  ``wait``: the barrier completes when every thread of every CTA of the cluster arrived (a wait
  that can never complete is an error; inside a warp-role split it is refused); it orders what
  came before as a CTA barrier does, across the cluster (so only arithmetic may come between a
  thread's arrive and its wait: other work there is refused, not modelled). A CTA exits only after a barrier.cluster
  completed after every remote arrival on it / multicast into it / load or store of its shared
  memory. **Distributed shared memory**: ``llvm.load`` / ``llvm.store`` of a scalar or 1-D
  vector (any element type the executor has) through ``!llvm.ptr<3>`` (ld/st.shared::cta, the
  own CTA) or ``!llvm.ptr<7>`` (ld/st.shared::cluster: a mapa'd address reads or writes the
  shared memory of its rank's CTA, an untagged one the own CTA's); not atomic. The bytes lie in
  one workgroup allocation of that CTA, aligned to the op's ``alignment`` (else the type's size
  rounded up to a power of two), not in flight (an async copy no wait covered). Ordering: the
  accesses of one CTA's threads (to its own shared memory or to a peer's) as any LDS access
  (epochs: ``ops.race_check``, races in ``Stats.races``); across CTAs
  only a completed barrier.cluster orders (a CTA barrier, which the rows of a batch pass in
  lockstep, does not): per CTA and element the executor keeps the cluster phase (barrier.cluster
  completed so far; kept where the kernel has a shared::cluster load or store) and CTA rank of
  the last write (a generic store, local or remote; an async
  copy's landing counts as the owner's) and of the reads in that phase, and refuses at once
  (``ops.cluster_order_check``) a read of an element another CTA wrote in the current phase and
  a write of one another CTA read or wrote in it. So a CTA publishes its shared memory to the
  cluster with a barrier.cluster after its stores, and must not overwrite what a peer reads
  (nor exit) before a barrier.cluster after the peer's reads. Ordering DSMEM accesses across
  CTAs through mbarriers (a remote arrive, a multicast's complete_tx) is not modelled: refused
  as a race; a peer's read before a bulk copy lands into the same bytes is not checked. Not
  modelled: ``barrier.cluster.arrive.relaxed``, relaxed arrives, atomics and ``ld.shared::cluster``
  through generic pointers, ``cp.async.bulk`` (non-tensor) between CTAs, a bulk tensor copy to
  another CTA's (mapa'd) destination or mbarrier (refused).
"""

from __future__ import annotations

import re

import numpy as np
from iree.compiler import ir

from mmaflow.runtime.executor.core import (
    ExecutorError,
    MemRef,
    np_dtype,
    op_loc,
    per_lane,
    role_progress,
    run_block,
    wait_or_fail,
)
from mmaflow.runtime.executor.ops import race_check, remote_lane
from mmaflow.runtime.executor.wgmma import lds_write_check, ordered_after_reads, warpgroup_state

GLOBAL_SHIFT = 40
GLOBALS = 0x100  # module globals start at GLOBALS << 40
MAP_BYTES = 128
ELEM_BYTES = {
    "u8": 1,
    "u16": 2,
    "u32": 4,
    "s32": 4,
    "u64": 8,
    "s64": 8,
    "f16": 2,
    "f32": 4,
    "f64": 8,
    "bf16": 2,
    "f32_ftz": 4,
    "tf32": 4,
    "tf32_ftz": 4,
}
REQUIRED = ("global_address", "rank", "elemtype", "interleave_layout", "swizzle_mode", "fill_mode")
CP_FENCEPROXY = (
    "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;"
)
# nvvm.mapa's shared::cluster addresses: CLUSTER_TAG | rank << RANK_SHIFT | the CTA-relative shared
# address (above every shared address, below every global one); a shared::cta address cast to
# !llvm.ptr<7> (llvm.addrspacecast) stays untagged: the thread's own CTA.
CLUSTER_TAG = 1 << 36
RANK_SHIFT = 24


def swizzle_128b(addr: np.ndarray) -> np.ndarray:
    """Where the 128B swizzle stores shared byte address ``addr``: bits 4-6 (the 16-byte chunk of
    a 128-byte row) XOR bits 7-9 (the row within 1024 bytes) [PTX ISA, "Tensor-map", swizzle
    modes; the probe's image on the H200: chunk c of box row r at chunk c ^ (r % 8)]."""
    return addr ^ (((addr >> 7) & 7) << 4)


def binding_base(binding: int) -> int:
    return (binding + 1) << GLOBAL_SHIFT


class TmaState:
    """Per executor ``State``: shared-memory maps, mbarriers, acquires."""

    def __init__(self):
        self.smaps: dict = {}  # (row, shared address) -> {"fields": {...}, "bytes": snapshot}
        self.bars: dict = {}  # (row, shared address) -> Barrier
        self.acquired: dict = {}  # (lane, global address) -> map version
        # rows a peer CTA arrived on or multicast into: row -> (its barrier.cluster count then,
        # the peer's rank, what it did, the op)
        self.remote: dict = {}


class Barrier:
    def __init__(self, count: int, lane: int, epoch: int):
        self.count, self.pending, self.expected, self.phase = count, count, 0, 0
        self.copies: list = []  # (mem, row, byte addresses, bytes) waiting to land
        self.lane, self.epoch, self.fenced = lane, epoch, False
        self.fence_cluster = 0  # the row's barrier.cluster count at its fence.mbarrier_init
        # Happens-before through the mbarrier: what the current phase's arrivals knew of each
        # warpgroup's wgmma completions (``wgmma.WarpgroupState.known``), and per
        # completed phase what it carries to the threads that observe it.
        self.release = None
        self.carried: dict = {}

    def arrive(self, st, lane: int) -> None:
        wg = getattr(st, "wgmma", None)
        if wg is not None:
            k = wg.known[lane]
            self.release = k.copy() if self.release is None else np.maximum(self.release, k)

    def complete(self) -> None:
        """The current phase completes: its arrivals' knowledge is carried to its observers."""
        self.carried[self.phase] = self.release
        self.carried.pop(self.phase - 2, None)
        self.release = None
        self.phase += 1
        self.pending, self.expected = self.count, 0

    def observe(self, st, lane: int) -> None:
        """``lane`` saw the last completed phase: it knows what that phase's arrivals knew."""
        k = self.carried.get(self.phase - 1)
        wg = getattr(st, "wgmma", None)
        if k is not None and wg is not None:
            wg.known[lane] = np.maximum(wg.known[lane], k)

    @property
    def delivered(self) -> int:
        return sum(len(c[3]) for c in self.copies)


def _tma(st) -> TmaState:
    t = getattr(st, "tma", None)
    if t is None:
        t = st.tma = TmaState()
    return t


def _maps(k) -> dict:
    """Global tensor maps of this kernel run, by global address: (fields, version, batch row)."""
    if not hasattr(k, "tma_gmaps"):
        k.tma_gmaps = {}
    return k.tma_gmaps


def _lds_at(st, addr: int, n: int, op) -> MemRef:
    for mem in st.lds.values():
        lo, hi = mem.base, mem.base + mem.numel * mem.elem_bytes
        if lo <= addr and addr + n <= hi:
            return mem
    raise ExecutorError(f"{op_loc(op)}: shared-memory bytes {addr}..{addr + n - 1} are in no workgroup allocation")


def _active_lanes(st):
    return np.nonzero(st.active())[0]


def _vals(st, vid):
    return np.asarray(per_lane(st.env[vid], st.L)).astype(np.int64)


# ---- addresses ------------------------------------------------------------------------------------


def _h_extract_pointer(k, op):
    (src,), (out,) = k._ins(op), k._outs(op)

    def run(st):
        mem = st.env[src]
        if mem.space == "lds":
            base = mem.base
        elif getattr(mem, "binding", None) is not None:
            base = binding_base(mem.binding)  # IREE: the aligned pointer is the binding's; the offset is the memref's
        elif getattr(mem, "address", None) is not None:
            base = mem.address
        else:
            raise ExecutorError(f"{op_loc(op)}: no address for {mem.name}")
        st.env[out] = np.asarray([base], np.int64)

    return run


def _h_strided_metadata(k, op):
    (src,) = k._ins(op)
    outs = k._outs(op)

    def run(st):
        mem = st.env[src]
        rank = len(mem.shape)
        if len(outs) != 2 + 2 * rank:
            raise ExecutorError(f"{op_loc(op)}: {len(outs)} results for a rank-{rank} memref")
        offset = getattr(mem, "start", 0) // mem.elem_bytes if mem.space != "lds" else 0
        st.env[outs[0]] = mem
        st.env[outs[1]] = np.asarray([offset], np.int64)
        for i in range(rank):
            st.env[outs[2 + i]] = np.asarray([mem.shape[i]], np.int64)
            st.env[outs[2 + rank + i]] = np.asarray([mem.strides[i]], np.int64)

    return run


def _h_get_global(k, op):
    (out,) = k._outs(op)
    name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
    mt = ir.MemRefType(op.results[0].type)
    dt = np_dtype(mt.element_type)
    shape = list(mt.shape)

    def run(st):
        globs = k.__dict__.setdefault("module_globals", {})
        if name not in globs:
            nbytes = int(np.prod(shape)) * dt.itemsize
            address = (GLOBALS << GLOBAL_SHIFT) + sum(-(-m.numel * m.elem_bytes // 4096) * 4096 for m in globs.values())
            mem = MemRef(np.zeros(int(np.prod(shape)), dt), shape, "global", f"@{name}")
            mem.address, mem.written = address, None
            assert nbytes
            globs[name] = mem
        st.env[out] = globs[name]

    return run


def _h_passthrough(k, op):
    (src,), (out,) = k._ins(op), k._outs(op)

    def run(st):
        st.env[out] = st.env[src]

    return run


def _h_smid(k, op):
    """%smid: the workgroup's row among those the executor runs together (distinct per resident
    workgroup, as distinct SMs are for blocks that cannot share one)."""
    (out,) = k._outs(op)

    def run(st):
        st.env[out] = st.wg_local.astype(np.int32)

    return run


def _h_trap(k, op):
    def run(st):
        if st.active().any():
            raise ExecutorError(f"{op_loc(op)}: llvm.intr.trap executed (the kernel's own check failed)")

    return run


# ---- generic loads and stores through pointers: ld / st .shared::cta and .shared::cluster ------------


def _access_type(t, op) -> tuple[np.dtype, int, tuple]:
    """(element dtype, elements, vector shape) of a scalar or 1-D vector loaded or stored."""
    if isinstance(t, ir.VectorType):
        if len(t.shape) != 1:
            raise ExecutorError(f"{op_loc(op)}: {op.name} of {t}: the executor models scalars and 1-D vectors")
        return np_dtype(t.element_type), int(t.shape[0]), tuple(t.shape)
    return np_dtype(t), 1, ()


def _shared_pointer(k, op, ptr) -> bool:
    """Whether ``op``'s pointer ``ptr`` is a shared::cluster one (!llvm.ptr<7>: ``nvvm.mapa``'s);
    !llvm.ptr<3> is shared::cta; anything else is refused. Refuses atomic orderings."""
    space = str(ptr.type)
    if space not in ("!llvm.ptr<3>", "!llvm.ptr<7>"):
        raise ExecutorError(
            f"{op_loc(op)}: {op.name} is modelled through shared-memory pointers (!llvm.ptr<3>, "
            f"or !llvm.ptr<7> of the cluster) only, not {space}"
        )
    if "ordering" in op.attributes and ir.IntegerAttr(op.attributes["ordering"]).value != 0:
        raise ExecutorError(f"{op_loc(op)}: an atomic {op.name} (an ordering other than not_atomic) is not modelled")
    if space == "!llvm.ptr<7>":
        k.uses_dsmem = True  # (LDS allocations then keep cluster_order_check's record)
        return True
    return False


def _alignment(op, nbytes: int) -> int:
    """The alignment the access needs: the op's ``alignment``, else the type's (its size rounded
    up to a power of two: LLVM's for scalars and vectors; PTX's vector ld/st need it)."""
    if "alignment" in op.attributes:
        return int(ir.IntegerAttr(op.attributes["alignment"]).value)
    return 1 << (nbytes - 1).bit_length()


def _shared_targets(st, op, ptr_id, cluster_ptr: bool, nbytes: int, align: int, verb: str):
    """Where each active lane's access of ``nbytes`` bytes goes: (lanes, workgroup rows of the
    lanes, target rows, CTA-relative shared addresses, [(allocation, which lanes)]). A
    shared::cluster address names the row of its rank (``_cluster_target``); the bytes must lie
    inside one workgroup allocation of that CTA and be aligned to ``align``."""
    lanes = _active_lanes(st)
    v = _vals(st, ptr_id)[lanes]
    g = st.wg_local[lanes]
    rows, a = g.copy(), v.copy()
    if cluster_ptr:
        tagged = (v & CLUSTER_TAG) != 0
        rank = (v >> RANK_SHIFT) & 0xFF
        junk = (v & ~(CLUSTER_TAG | (0xFF << RANK_SHIFT) | ((1 << RANK_SHIFT) - 1))) != 0
        bad = junk | (tagged & (rank >= st.cluster_n))
        if bad.any():
            i = int(np.argmax(bad))
            raise ExecutorError(
                f"{op_loc(op)}: thread {lanes[i] % st.T} of workgroup row {g[i]} (cluster rank "
                f"{st.rank[lanes[i]]}) {verb} {int(v[i]):#x}, not a shared::cluster address of its "
                f"cluster of {st.cluster_n}"
            )
        rows = np.where(tagged, st.peers[g, np.where(tagged, rank, 0)], g)
        a = np.where(tagged, v & ((1 << RANK_SHIFT) - 1), v)
    mems = list(st.lds.values())
    lo = np.asarray([m.base for m in mems], np.int64)
    hi = np.asarray([m.base + m.numel * m.elem_bytes for m in mems], np.int64)
    which = np.searchsorted(lo, a, side="right") - 1
    inside = (which >= 0) & (a + nbytes <= hi[np.clip(which, 0, None)] if mems else False)
    misaligned = inside & (a % align != 0)
    if not np.all(inside) or misaligned.any():
        i = int(np.argmax(~inside | misaligned))
        where = (
            f"{op_loc(op)}: thread {lanes[i] % st.T} of workgroup row {g[i]} (cluster rank "
            f"{st.rank[lanes[i]]}) {verb} shared-memory bytes {a[i]}..{a[i] + nbytes - 1} of cluster "
            f"rank {st.row_rank[rows[i]]} (workgroup row {rows[i]})"
        )
        if not inside[i]:
            raise ExecutorError(f"{where}, which lie in no workgroup allocation (out of bounds)")
        raise ExecutorError(f"{where}, not {align}-byte aligned")
    return lanes, g, rows, a, [(mems[i], which == i) for i in np.unique(which).tolist()]


def _shared_access(k, st, op, ptr_id, cluster_ptr: bool, dt: np.dtype, n: int, values=None):
    """A load (``values`` None: returns (L, n), zeros in inactive lanes) or store of ``n``
    elements of ``dt`` per active lane through a shared pointer, with every check of an LDS
    access: in-flight async copies, races within the CTA (``ops.race_check``, epochs) and across
    the cluster (``cluster_order_check``), wgmma reads of stored bytes (``lds_write_check``); an
    access to another CTA's shared memory stamps that CTA, which must not exit before a
    barrier.cluster after it (``end_check``)."""
    write = values is not None
    verb = "stores to" if write else "loads from"
    nbytes = dt.itemsize * n
    lanes, g, rows, a, where = _shared_targets(st, op, ptr_id, cluster_ptr, nbytes, _alignment(op, nbytes), verb)
    out = None if write else np.zeros((st.L, n), dt)
    if write:
        values = np.asarray(per_lane(np.asarray(values), st.L)).astype(dt).reshape(st.L, n)
    for mem, sel in where:
        ln, gg, rw, rel = lanes[sel], g[sel], rows[sel], a[sel] - mem.base
        eb = mem.elem_bytes
        cols = sorted(set(range(0, nbytes, eb)) | {nbytes - 1})
        el = (rel[:, None] + np.asarray(cols)[None, :]) // eb  # every element the bytes touch
        flying = st.in_flight.get(id(mem))
        if flying is not None and flying[rw[:, None], el].any():
            i = int(np.argwhere(flying[rw[:, None], el])[0][0])
            raise ExecutorError(
                f"{op_loc(op)}: thread {ln[i] % st.T} of workgroup row {gg[i]} (cluster rank "
                f"{st.rank[ln[i]]}) {verb} shared-memory byte {rel[i] + mem.base} of cluster rank "
                f"{st.row_rank[rw[i]]} (workgroup row {rw[i]}) while an async copy to it is in flight "
                f"(no wait covers the copy)"
            )
        # (L, m) views for the checks that take every lane: the other lanes inactive
        act = np.zeros((st.L, el.shape[1]), bool)
        act[ln] = True
        elems = np.zeros((st.L, el.shape[1]), np.int64)
        elems[ln] = el
        target = st.wg_local.copy()
        target[ln] = rw
        remote = rw != gg
        who = st.tid.copy()
        who[ln[remote]] = remote_lane(st, ln[remote])
        race_check(k, st, op, mem, elems, act, write, rows=target, lanes=who)
        bytes_ = mem.data.view(np.uint8).reshape(st.G, -1)
        at = rel[:, None] + np.arange(nbytes)[None, :]
        if write:
            lds_write_check(st, op, mem, elems, act, lands=True, rows=target)
            bytes_[rw[:, None], at] = values[ln].view(np.uint8).reshape(len(ln), nbytes)
        else:
            out[ln] = bytes_[rw[:, None], at].copy().view(dt).reshape(len(ln), n)
        for row in np.unique(rw[remote]).tolist():
            i = int(np.argmax(remote & (rw == row)))
            what = f"{'store to' if write else 'load from'} its shared memory at {int(a[sel][i])}"
            _stamp_remote(st, op, int(gg[i]), row, what)
    if write:
        t = _tma(st)
        for (row, m), rec in list(t.smaps.items()):
            if ((rows == row) & (a < m + MAP_BYTES) & (a + nbytes > m)).any():
                del t.smaps[(row, m)]  # a generic write over a map invalidates it
    return out


def _h_llvm_load(k, op):
    """``llvm.load`` of a scalar or 1-D vector through a shared pointer: ``ld.shared::cta``
    (!llvm.ptr<3>), or ``ld.shared::cluster`` (!llvm.ptr<7>: an ``nvvm.mapa`` address reads the
    shared memory of that rank's CTA) [PTX ISA, "ld": state spaces; CUDA guide "Distributed
    Shared Memory"]."""
    (ptr_id,), (out,) = k._ins(op), k._outs(op)
    cluster_ptr = _shared_pointer(k, op, op.operands[0])
    dt, n, shape = _access_type(op.results[0].type, op)

    def run(st):
        st.env[out] = _shared_access(k, st, op, ptr_id, cluster_ptr, dt, n).reshape((st.L,) + shape)

    return run


def _h_llvm_store(k, op):
    """``llvm.store`` of a scalar or 1-D vector through a shared pointer: ``st.shared::cta``
    (!llvm.ptr<3>; the kernel zeroes its tensor maps with it: a write over a map invalidates it),
    or ``st.shared::cluster`` (!llvm.ptr<7>: into the shared memory of an ``nvvm.mapa`` address's
    CTA) [PTX ISA, "st"]."""
    val_id, ptr_id = k._ins(op)
    cluster_ptr = _shared_pointer(k, op, op.operands[1])
    dt, n, _ = _access_type(op.operands[0].type, op)

    def run(st):
        _shared_access(k, st, op, ptr_id, cluster_ptr, dt, n, values=st.env[val_id])

    return run


# ---- tensor maps ------------------------------------------------------------------------------------


def _enum_word(attr) -> str:
    m = re.search(r"<([a-z0-9_]+)>\s*$", str(attr))
    if not m:
        raise ExecutorError(f"cannot read {attr}")
    return m.group(1)


def _h_tensormap_replace(k, op):
    ins = k._ins(op)
    field = _enum_word(op.attributes["field"])
    ordinal = ir.IntegerAttr(op.attributes["ord"]).value if "ord" in op.attributes else None
    attr_value = _enum_word(op.attributes["new_value_attr"]) if "new_value_attr" in op.attributes else None
    if str(op.operands[0].type) != "!llvm.ptr<3>":
        raise ExecutorError(f"{op_loc(op)}: tensormap.replace is modelled on .shared::cta maps only")

    def run(st):
        addrs = _vals(st, ins[0])
        vals = _vals(st, ins[1]) if len(ins) > 1 else None
        t = _tma(st)
        seen = {}
        for lane in _active_lanes(st):
            g, a = int(st.wg_local[lane]), int(addrs[lane])
            v = attr_value if vals is None else int(vals[lane])
            if seen.setdefault((g, a), v) != v:
                raise ExecutorError(
                    f"{op_loc(op)}: threads of one workgroup replace {field} of one map with different values"
                )
            if a % 64:
                raise ExecutorError(f"{op_loc(op)}: a tensor map at shared address {a}, not 64-byte aligned")
            rec = t.smaps.get((g, a))
            if rec is None:
                mem = _lds_at(st, a, MAP_BYTES, op)
                raw = mem.data[g].view(np.uint8)[a - mem.base : a - mem.base + MAP_BYTES]
                if raw.any():
                    raise ExecutorError(
                        f"{op_loc(op)}: tensormap.replace on a map whose 128 bytes are not zero; the "
                        f"executor models maps built from zero bytes"
                    )
                rec = t.smaps[(g, a)] = {"fields": {}}
            rec["fields"][field if ordinal is None else (field, ordinal)] = v

    return run


def _h_inline_ptx(k, op):
    code = ir.StringAttr(op.attributes["ptxCode"]).value
    if code.strip() != CP_FENCEPROXY:
        raise ExecutorError(f"{op_loc(op)}: inline PTX {code!r} is not modelled (only {CP_FENCEPROXY!r})")
    ins = k._ins(op)

    def run(st):
        gaddr, saddr = _vals(st, ins[0]), _vals(st, ins[1])
        act = st.active()
        t, maps = _tma(st), _maps(k)
        written = {}
        for g in range(st.G):
            lanes = np.arange(st.T) + g * st.T
            on = act[lanes]
            if not on.any():
                continue
            warp = on[:32]
            if not warp.all() or on[32:].any():
                raise ExecutorError(
                    f"{op_loc(op)}: tensormap.cp_fenceproxy ... .sync.aligned needs exactly one whole warp converged"
                )
            ga, sa = set(gaddr[lanes[:32]].tolist()), set(saddr[lanes[:32]].tolist())
            if len(ga) != 1 or len(sa) != 1:
                raise ExecutorError(f"{op_loc(op)}: the warp's threads name different maps")
            ga, sa = ga.pop(), sa.pop()
            rec = t.smaps.get((g, sa))
            if rec is None:
                raise ExecutorError(
                    f"{op_loc(op)}: copies shared address {sa}, which holds no tensor map built by tensormap.replace"
                )
            if ga % 64:
                raise ExecutorError(f"{op_loc(op)}: a global tensor map at {ga:#x}, not 64-byte aligned")
            if ga in written:
                raise ExecutorError(
                    f"{op_loc(op)}: workgroups running together (rows {written[ga]} and {g}) write one "
                    f"global tensor map at {ga:#x}"
                )
            written[ga] = g
            old = maps.get(ga)
            maps[ga] = (dict(rec["fields"]), (old[1] + 1) if old else 1)

    return run


def _h_fence_acquire(k, op):
    ins = k._ins(op)
    (addr,) = ins[:1]

    def run(st):
        addrs = _vals(st, addr)
        t, maps = _tma(st), _maps(k)
        for lane in _active_lanes(st):
            a = int(addrs[lane])
            t.acquired[(int(lane), a)] = maps[a][1] if a in maps else 0

    return run


# ---- mbarriers ----------------------------------------------------------------------------------------


def _bar(st, op, g, a, lane, what) -> Barrier:
    b = _tma(st).bars.get((g, a))
    if b is None:
        raise ExecutorError(f"{op_loc(op)}: {what} on shared address {a}, where no mbarrier.init ran")
    if lane != b.lane and (not b.fenced or st.epoch <= b.epoch):
        raise ExecutorError(
            f"{op_loc(op)}: {what} by thread {lane % st.T} on an mbarrier another thread initialised with "
            f"no fence.mbarrier_init and barrier since"
        )
    return b


def _h_mbarrier_init(k, op):
    ins = k._ins(op)

    def run(st):
        addrs, counts = _vals(st, ins[0]), _vals(st, ins[1])
        t = _tma(st)
        done = set()
        for lane in _active_lanes(st):
            g, a = int(st.wg_local[lane]), int(addrs[lane])
            if (g, a) in done:
                raise ExecutorError(f"{op_loc(op)}: two threads initialise the mbarrier at {a}")
            if a % 8:
                raise ExecutorError(f"{op_loc(op)}: an mbarrier at {a}, not 8-byte aligned")
            _lds_at(st, a, 8, op)
            done.add((g, a))
            t.bars[(g, a)] = Barrier(int(counts[lane]), int(lane), st.epoch)

    return run


def _h_fence_mbarrier_init(k, op):
    def run(st):
        act = st.active()
        for (row, _), b in _tma(st).bars.items():
            if act[b.lane]:
                if not b.fenced:
                    b.fence_cluster = int(st.cluster_count[row])
                b.fenced = True

    return run


def _remote_bar(st, op, g: int, row: int, a: int, lane: int, what: str) -> Barrier:
    """The mbarrier at CTA-relative address ``a`` of row ``row``, another CTA of the cluster of
    ``lane`` (workgroup row ``g``): it must have been initialised, fenced (fence.mbarrier_init),
    and a barrier.cluster must have completed since [PTX ISA, "mbarrier": an mbarrier object
    is usable by other CTAs of the cluster once its initialisation is visible to them]."""
    b = _tma(st).bars.get((row, a))
    r = int(st.row_rank[row])
    if b is None:
        raise ExecutorError(
            f"{op_loc(op)}: {what} by thread {lane % st.T} of workgroup row {g} on shared address {a} "
            f"of CTA {r} of its cluster, where no mbarrier.init ran"
        )
    if not b.fenced or st.cluster_count[row] <= b.fence_cluster:
        raise ExecutorError(
            f"{op_loc(op)}: {what} by thread {lane % st.T} of workgroup row {g} on an mbarrier CTA {r} "
            f"initialised with no {'' if b.fenced else 'fence.mbarrier_init and '}cluster barrier "
            f"since (its init must be made visible to the cluster: fence.mbarrier_init, then "
            f"barrier.cluster.arrive and wait by every thread of the cluster)"
        )
    return b


def _stamp_remote(st, op, g: int, row: int, what: str) -> None:
    """Row ``g`` did ``what`` to row ``row``, another CTA of its cluster: ``row`` must not exit
    before a barrier.cluster completes after it (``end_check``)."""
    _tma(st).remote[row] = (int(st.cluster_count[row]), int(st.row_rank[g]), what, op_loc(op))


def _cluster_target(st, g: int, v: int) -> tuple[int, int]:
    """(row, CTA-relative shared address) that address ``v`` names for a thread of row ``g``:
    an ``nvvm.mapa`` address names CTA rank r of g's cluster (``CLUSTER_TAG``), any other its
    own CTA."""
    if v & CLUSTER_TAG:
        return int(st.peers[g, (v >> RANK_SHIFT) & 0xFF]), v & ((1 << RANK_SHIFT) - 1)
    return g, v


def _arrive(st, op, b: Barrier, a: int, lane: int) -> None:
    b.pending -= 1
    if b.pending < 0:
        raise ExecutorError(f"{op_loc(op)}: more arrivals on the mbarrier at {a} than its count {b.count} in one phase")
    b.arrive(st, lane)
    role_progress(st)
    if b.pending == 0 and b.expected == 0 and not b.copies:  # no transaction bytes: the last arrival completes it
        b.complete()


def _arrive_handler(expect_tx: bool):
    """``mbarrier.arrive.expect_tx`` (the thread's transaction bytes, then its arrival) or
    ``mbarrier.arrive`` (no bytes): one arrival per active thread. On a shared::cluster address
    (``!llvm.ptr<7>``, from ``nvvm.mapa``) of another CTA of the cluster: an arrival on that CTA's
    mbarrier, carrying what the thread knows (``Barrier.arrive``)."""
    what = "mbarrier.arrive.expect_tx" if expect_tx else "mbarrier.arrive"

    def handler(k, op):
        ins = k._ins(op)
        outs = k._outs(op)
        if len(ins) != (2 if expect_tx else 1):
            raise ExecutorError(f"{op_loc(op)}: {what} with a count is not modelled")
        if "relaxed" in op.attributes and str(op.attributes["relaxed"]) != "false":
            raise ExecutorError(f"{op_loc(op)}: {what} relaxed (no release semantics) is not modelled")
        cluster_ptr = str(op.operands[0].type) == "!llvm.ptr<7>"

        def run(st):
            addrs = _vals(st, ins[0])
            tx = _vals(st, ins[1]) if expect_tx else None
            for lane in _active_lanes(st):
                g, a = int(st.wg_local[lane]), int(addrs[lane])
                row = g
                if cluster_ptr:
                    row, a = _cluster_target(st, g, a)
                if row == g:
                    b = _bar(st, op, g, a, int(lane), what)
                else:
                    b = _remote_bar(st, op, g, row, a, int(lane), f"remote {what}")
                    _stamp_remote(st, op, g, row, f"arrive on its mbarrier at {a}")
                if expect_tx:
                    b.expected += int(tx[lane])
                _arrive(st, op, b, a, int(lane))
            for o in outs:
                st.env[o] = np.zeros(1, np.int64)

        return run

    return handler


def _land(k, st, op, b: Barrier) -> None:
    for mem, g, addr, data in b.copies:
        rel = addr - mem.base
        _pending_reads(st, op, g, addr, "lands")
        mem.data[g].view(np.uint8)[rel] = data
        elems = np.unique(rel // mem.elem_bytes)
        st.in_flight[id(mem)][g, elems] = False
        order = st.dsmem.get(id(mem))
        if order is not None:  # landed: the CTA's own write (its wait orders it for itself only)
            order[0][g, elems] = st.cluster_count[g]
            order[1][g, elems] = st.row_rank[g]
        k.stats.async_copy_bytes += len(addr)
    b.copies = []
    if getattr(k, "uses_wgmma", False):
        warpgroup_state(st)  # (keeps the wgmma byte masks sized)


def _h_try_wait(k, op):
    ins = k._ins(op)
    outs = k._outs(op)
    if len(outs) != 1:
        raise ExecutorError(f"{op_loc(op)}: mbarrier.try_wait is modelled with its i1 result")

    def run(st):
        addrs, parity = _vals(st, ins[0]), _vals(st, ins[1])
        while not _waited(k, st, op, addrs, parity):
            pass
        st.env[outs[0]] = np.ones(1, bool)

    return run


def _waited(k, st, op, addrs, parity) -> bool:
    """Every active lane's phase completed (True); or, in a warp role (``executor.Roles``), one
    cannot yet: the other role ran meanwhile (False: test again)."""
    done = set()
    for lane in _active_lanes(st):
        g, a, p = int(st.wg_local[lane]), int(addrs[lane]), int(parity[lane]) & 1
        b = _bar(st, op, g, a, int(lane), "mbarrier.try_wait")
        if (g, a, p) in done or b.phase % 2 != p:
            b.observe(st, int(lane))
            continue  # the phase of parity p completed
        if b.pending == 0 and b.delivered == b.expected:
            _land(k, st, op, b)
            b.complete()
            b.observe(st, int(lane))
            done.add((g, a, p))
            continue
        roles = getattr(st, "roles", None)
        why = (
            f"{op_loc(op)}: thread {lane % st.T} of workgroup row {g} waits for phase parity {p} of the mbarrier at "
            f"{a}, which {'can never' if roles is None else 'cannot yet'} complete: {b.pending} of {b.count} "
            f"arrivals missing, {b.expected} bytes expected, {b.delivered} issued on it"
        )
        wait_or_fail(st, why, "every thread of the workgroup is waiting")
        return False
    return True


# ---- bulk tensor copies --------------------------------------------------------------------------------


def _pending_reads(st, op, g, addr: np.ndarray, what: str) -> None:
    wg = getattr(st, "wgmma", None)
    if wg is None:
        return
    inside = addr[addr < wg.bytes]
    for grp in wg.groups():
        hit = grp.reads[g, inside]
        if hit.any():
            raise ExecutorError(
                f"{op_loc(op)}: a bulk tensor copy {what} into shared-memory byte "
                f"{int(inside[np.argmax(hit)])} that a wgmma.mma_async still reads (its group is "
                f"{grp.state}: no wgmma.wait_group covers it)"
            )


def tma_box(k, fields: dict, coords: list[int], op) -> np.ndarray:
    """The box's bytes, row after row of box[0] elements, out-of-bounds elements zero."""
    missing = [f for f in REQUIRED if f not in fields]
    rank = fields.get("rank", -1) + 1
    for d in range(rank):
        missing += [f"{f}[{d}]" for f in ("box_dim", "global_dim", "element_stride") if (f, d) not in fields]
        if d:
            missing += [f"global_stride[{d - 1}]"] if ("global_stride", d - 1) not in fields else []
    if missing:
        raise ExecutorError(f"{op_loc(op)}: the tensor map never had {', '.join(missing)} set")
    if not 2 <= rank <= 5 or len(coords) != rank:
        raise ExecutorError(f"{op_loc(op)}: a rank-{rank} map used with {len(coords)} coordinates")
    if fields["interleave_layout"] != "no_interleave" or fields["fill_mode"] != "zero":
        raise ExecutorError(f"{op_loc(op)}: only non-interleaved, zero-filled maps are modelled")
    esize = ELEM_BYTES[fields["elemtype"]]
    dims = [fields[("global_dim", d)] for d in range(rank)]
    box = [fields[("box_dim", d)] for d in range(rank)]
    strides = [esize] + [fields[("global_stride", d)] for d in range(rank - 1)]
    if any(fields[("element_stride", d)] != 1 for d in range(rank)):
        raise ExecutorError(f"{op_loc(op)}: element strides other than 1 are not modelled")
    if any(b < 1 or b > 256 for b in box) or any(s % 16 or s >= 1 << 40 for s in strides[1:]):
        raise ExecutorError(
            f"{op_loc(op)}: box {box} / strides {strides[1:]}: box dims are 1..256, strides multiples of 16 below 2^40"
        )
    addr = fields["global_address"]
    if addr % 16:
        raise ExecutorError(f"{op_loc(op)}: the map's global address {addr:#x} is not 16-byte aligned")
    binding = (addr >> GLOBAL_SHIFT) - 1
    buf = k.bindings.get(binding)
    if buf is None or binding < 0:
        raise ExecutorError(f"{op_loc(op)}: the map's global address {addr:#x} is in no binding")
    raw = buf.reshape(-1).view(np.uint8)
    off = addr - binding_base(binding)
    j = np.indices(box[::-1]).reshape(rank, -1)[::-1]  # (rank, elements), dimension 0 fastest
    x = j + np.asarray(coords, np.int64)[:, None]
    ok = np.all((x >= 0) & (x < np.asarray(dims)[:, None]), axis=0)
    byte = off + (x * np.asarray(strides, np.int64)[:, None]).sum(axis=0)
    if ok.any() and (byte[ok].min() < 0 or byte[ok].max() + esize > raw.size):
        raise ExecutorError(
            f"{op_loc(op)}: the map's tensor reaches byte {int(byte[ok].max()) + esize} of binding "
            f"{binding}, which holds {raw.size}"
        )
    out = np.zeros((j.shape[1], esize), np.uint8)
    idx = byte[ok][:, None] + np.arange(esize)
    out[ok] = raw[idx]
    return out.reshape(-1)


def _h_bulk_tensor(k, op):
    """``cp.async.bulk.tensor.shared::cluster.global`` (tile mode): the box lands at the
    destination of the issuing CTA, or, with ``multicast_mask``, at the same CTA-relative
    destination of every CTA of the cluster whose rank bit is set, each CTA's mbarrier at the
    mbar operand's CTA-relative address receiving its bytes [PTX ISA, "cp.async.bulk.tensor":
    .multicast::cluster]. A destination or mbarrier named by ``nvvm.mapa`` (another CTA's) is
    refused: not modelled."""
    ins = k._ins(op)
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    # operands: dstMem, tmaDescriptor, coordinates, mbar, im2colOffsets, multicastMask, l2CacheHint, predicate
    rest = seg[4:] + [0] * (8 - len(seg))
    if rest[0] or any(rest[2:]):
        raise ExecutorError(f"{op_loc(op)}: im2col, cache hints and predicates are not modelled")
    dst_id, map_id = ins[0], ins[1]
    coord_ids = ins[2 : 2 + seg[2]]
    bar_id = ins[2 + seg[2]]
    mask_id = ins[3 + seg[2] + rest[0]] if rest[1] else None

    def run(st):
        dsts, maps_at, bars = _vals(st, dst_id), _vals(st, map_id), _vals(st, bar_id)
        masks = _vals(st, mask_id) & 0xFFFF if mask_id is not None else None
        coords = [_vals(st, c) for c in coord_ids]
        t, maps = _tma(st), _maps(k)
        for lane in _active_lanes(st):
            g, dst, m = int(st.wg_local[lane]), int(dsts[lane]), int(maps_at[lane])
            if (dst | int(bars[lane])) & CLUSTER_TAG:  # (the PTX ISA's rules for a peer's address there: not modelled)
                raise ExecutorError(
                    f"{op_loc(op)}: thread {lane % st.T} of workgroup row {g} gives cp.async.bulk.tensor a "
                    f"mapa'd (another CTA's) shared::cluster destination or mbarrier: the executor "
                    f"models the CTA's own, multicast by the mask"
                )
            if masks is None:
                rows = [g]
            else:
                mask = int(masks[lane])
                if mask >> st.cluster_n or not mask:
                    raise ExecutorError(
                        f"{op_loc(op)}: thread {lane % st.T} of workgroup row {g} multicasts a bulk "
                        f"tensor copy to CTA mask {mask:#06x}, "
                        f"{'no CTA' if not mask else 'bits outside'} its cluster of {st.cluster_n}"
                    )
                rows = [int(st.peers[g, r]) for r in range(st.cluster_n) if mask >> r & 1]
            if m not in maps:
                raise ExecutorError(f"{op_loc(op)}: no tensor map at global address {m:#x}")
            fields, version = maps[m]
            if t.acquired.get((int(lane), m)) != version:
                raise ExecutorError(
                    f"{op_loc(op)}: thread {lane % st.T} uses the tensor map at {m:#x} with no "
                    f"fence.proxy.tensormap acquire of it since it was written"
                )
            if fields.get("swizzle_mode") not in ("b128",):
                raise ExecutorError(f"{op_loc(op)}: swizzle {fields.get('swizzle_mode')} is not modelled (128B only)")
            data = tma_box(k, fields, [int(c[lane]) for c in coords], op)
            esize = ELEM_BYTES[fields["elemtype"]]
            if fields[("box_dim", 0)] * esize != 128:
                raise ExecutorError(f"{op_loc(op)}: the 128B swizzle is modelled for 128-byte box rows")
            if dst % 128:
                raise ExecutorError(f"{op_loc(op)}: a bulk tensor copy to shared address {dst}, not 128-byte aligned")
            lin = dst + np.arange(data.size, dtype=np.int64)
            addr = swizzle_128b(lin)
            mem = _lds_at(st, dst, data.size, op)
            elems = np.unique((addr - mem.base) // mem.elem_bytes)
            flying = st.in_flight.setdefault(id(mem), np.zeros((st.G, mem.numel), bool))
            bar_a = int(bars[lane])
            for row in rows:
                what = (
                    "a bulk tensor copy"
                    if row == g
                    else f"a multicast bulk tensor copy into CTA {int(st.row_rank[row])} of the cluster"
                )
                if row == g:
                    b = _bar(st, op, g, bar_a, int(lane), "cp.async.bulk.tensor")
                else:
                    b = _remote_bar(
                        st,
                        op,
                        g,
                        row,
                        bar_a,
                        int(lane),
                        f"{'a multicast' if masks is not None else 'a'} cp.async.bulk.tensor",
                    )
                if flying[row, elems].any():
                    raise ExecutorError(
                        f"{op_loc(op)}: {what} into shared memory another copy still writes"
                        + ("" if row == g else f" (workgroup row {row})")
                    )
                _pending_reads(st, op, row, addr, "is issued")
                ordered_after_reads(st, op, g, int(lane), addr, what, row=row)
                flying[row, elems] = True
                b.copies.append((mem, row, addr, data))
                if row != g:
                    _stamp_remote(st, op, g, row, f"multicast into its shared memory at {dst}")
            role_progress(st)

    return run


# ---- setmaxnreg ------------------------------------------------------------------------------------

SM_REGISTERS = 65536  # per SM (compute capability 9.0)


def launch_registers(threads: int) -> int:
    """Per-thread registers a workgroup of ``threads`` holds at launch: the SM's share (65536 /
    threads, in multiples of 8), which ptxas (with .maxntid and .minnctapersm 1, as IREE's CUDA
    kernels carry them) gives a kernel where some warpgroup raises its count to at least that
    (ptxas 12.9 -v: 168 for 384 threads with an .inc to 232, 96 for 640 with an .inc to 104). A
    kernel whose counts all stay below it gets a count ptxas chooses (154 for 384 threads with
    an .inc to 104; 160 with an .inc to 160): not modelled, such an .inc is refused."""
    return min(256, SM_REGISTERS // threads) // 8 * 8


def _h_setmaxnreg(k, op):
    """``setmaxnreg.{inc,dec}.sync.aligned.u32 N`` (PTX ISA "setmaxnreg"): N in 24..256, a
    multiple of 8, executed by whole warpgroups; an .inc raises, a .dec lowers the warpgroup's
    count. The registers come from the CTA's pool (what it got at launch, ``launch_registers``
    per thread): an .inc blocks until the pool has them, so the final counts, the warpgroups that
    set none at the launch count, must sum within the pool (checked at the end, ``end_check``:
    in which order the roles run is not the hardware's); a sum beyond the SM's registers is
    refused at once."""
    n = ir.IntegerAttr(op.attributes["regCount"]).value
    action = str(op.attributes["action"])

    def run(st):
        if not 24 <= n <= 256 or n % 8:
            raise ExecutorError(f"{op_loc(op)}: setmaxnreg {n}: the count must be 24 to 256, a multiple of 8")
        act = st.active().reshape(st.G, st.T // 128, 128) if st.T % 128 == 0 else None
        if act is None or not np.all(act.all(axis=2) == act.any(axis=2)):
            raise ExecutorError(f"{op_loc(op)}: setmaxnreg by part of a warpgroup (it is .sync.aligned per warpgroup)")
        whole = act.all(axis=2)
        if not np.all(whole == whole[0]):
            raise ExecutorError(f"{op_loc(op)}: setmaxnreg by different warpgroups in different workgroups")
        regs = getattr(st, "setmaxnreg", None)
        if regs is None:
            regs = st.setmaxnreg = np.zeros(st.T // 128, np.int64)
        was = np.where(regs[whole[0]] > 0, regs[whole[0]], launch_registers(st.T))
        if ("increase" in action and np.any(was > n)) or ("decrease" in action and np.any(was < n)):
            inc = "increase" in action
            raise ExecutorError(
                f"{op_loc(op)}: setmaxnreg.{'inc' if inc else 'dec'} {n} from "
                f"{sorted(set(map(int, was)))} registers per thread: an .inc raises the count, a .dec "
                f"lowers it (at launch every thread has the SM's share, {launch_registers(st.T)} for "
                f"{st.T} threads" + ("; a kernel that raises no count to it is not modelled)" if inc else ")")
            )
        regs[whole[0]] = n
        if int(regs.sum()) * 128 > SM_REGISTERS:
            raise ExecutorError(
                f"{op_loc(op)}: setmaxnreg: the warpgroups ask for {list(map(int, regs))} registers per "
                f"thread, {int(regs.sum()) * 128} in all, more than the SM's {SM_REGISTERS}"
            )

    return run


# ---- scf.while (the mbarrier wait loop) --------------------------------------------------------------


def _h_while(k, op):
    inits = k._ins(op)
    outs = k._outs(op)
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    b_args = [k._id(a) for a in before.arguments]
    a_args = [k._id(a) for a in after.arguments]
    b_body, a_body = k._compile_block(before), k._compile_block(after)
    cond_op = [o.operation for o in before.operations][-1]
    cond_ins = k._ins(cond_op)
    yields = k._ins([o.operation for o in after.operations][-1])

    def run(st):
        carried = [st.env[i] for i in inits]
        for _ in range(1 << 20):
            for a, v in zip(b_args, carried):
                st.env[a] = v
            run_block(b_body[:-1], st)
            c = (
                np.asarray(st.env[cond_ins[0]])[st.active()]
                if np.asarray(st.env[cond_ins[0]]).shape[0] > 1
                else np.asarray(st.env[cond_ins[0]])
            )
            vals = [st.env[i] for i in cond_ins[1:]]
            if c.size and not np.all(c == c.flat[0]):
                raise ExecutorError(f"{op_loc(op)}: scf.while condition differs between threads")
            if not c.size or not bool(c.flat[0]):
                break
            for a, v in zip(a_args, vals):
                st.env[a] = v
            run_block(a_body[:-1], st)
            carried = [st.env[y] for y in yields]
        else:
            raise ExecutorError(f"{op_loc(op)}: scf.while ran 2^20 iterations")
        for o, v in zip(outs, vals):
            st.env[o] = v

    return run


# ---- thread block clusters -------------------------------------------------------------------------


def _sreg(value):
    """A special register read: ``value(k, st)`` per lane (L,) or uniform (1,)."""

    def handler(k, op):
        (out,) = k._outs(op)
        dt = np_dtype(op.results[0].type)

        def run(st):
            st.env[out] = np.asarray(value(k, st), np.int64).astype(dt)

        return run

    return handler


def _h_mapa(k, op):
    """``mapa.shared::cluster`` (PTX ISA "mapa"): the shared::cluster address of shared::cta
    address ``a`` in the CTA of rank ``r`` of the thread's cluster (``CLUSTER_TAG``)."""
    (a_id, r_id), (out,) = k._ins(op), k._outs(op)
    if str(op.operands[0].type) != "!llvm.ptr<3>":
        raise ExecutorError(f"{op_loc(op)}: nvvm.mapa is modelled on shared::cta addresses (!llvm.ptr<3>) only")

    def run(st):
        a, r, act = _vals(st, a_id), _vals(st, r_id), st.active()
        bad = act & ((r < 0) | (r >= st.cluster_n))
        if bad.any():
            lane = int(np.argmax(bad))
            raise ExecutorError(
                f"{op_loc(op)}: nvvm.mapa by thread {lane % st.T} of workgroup row "
                f"{int(st.wg_local[lane])} names CTA rank {int(r[lane])} of a cluster of "
                f"{st.cluster_n}"
            )
        bad = act & ((a < 0) | (a >= 1 << RANK_SHIFT))
        if bad.any():
            lane = int(np.argmax(bad))
            raise ExecutorError(f"{op_loc(op)}: nvvm.mapa of {int(a[lane]):#x}, not a shared::cta address")
        st.env[out] = np.where(act, CLUSTER_TAG | (r << RANK_SHIFT) | a, 0)

    return run


def _cluster_barrier_checks(st, op, what: str, aligned: bool) -> np.ndarray:
    if getattr(st, "roles", None) is not None:
        raise ExecutorError(
            f"{op_loc(op)}: {what} inside a warp-role split (executor.Roles) is not modelled: it "
            f"belongs outside the roles' scf.if"
        )
    act = st.active()
    w = st.k.wave_size
    if aligned and st.L % w == 0:
        warps = act.reshape(-1, w)
        if not np.all(warps.all(axis=1) == warps.any(axis=1)):
            lane = int(np.argmax(np.repeat(warps.any(axis=1) & ~warps.all(axis=1), w)))
            raise ExecutorError(
                f"{op_loc(op)}: {what}.aligned by part of a warp (thread {lane % st.T} of workgroup "
                f"row {int(st.wg_local[lane])}'s)"
            )
    return act


_PURE_PREFIXES = ("arith.", "index.", "scf.yield", "llvm.mlir.constant")


def _only_pure_until_wait(op) -> None:
    """Refuse work between a ``barrier.cluster.arrive`` and the ``wait`` that follows it (in its
    block, or after the ``scf.if`` it sits in; not across a loop's back edge): the model completes the barrier at
    the last arrival, so a memory operation there would count as ordered before the barrier,
    which the hardware does not promise (only what precedes the arrive is released)."""
    cur = op
    while cur is not None:
        block_ops = [o.operation for o in cur.block.operations]
        i = block_ops.index(cur)
        for o in block_ops[i + 1 :]:
            if o.name in ("nvvm.cluster.wait", "nvvm.cluster.arrive"):  # (arriving twice: refused as it runs)
                return
            if o.name == "func.return":
                break
            if not o.name.startswith(_PURE_PREFIXES):
                raise ExecutorError(
                    f"{op_loc(o)}: {o.name} between barrier.cluster.arrive ({op_loc(op)}) and its wait: "
                    f"work between a split arrive and wait is not modelled (the executor would count "
                    f"it as ordered before the barrier)"
                )
        parent = cur.block.owner
        parent = getattr(parent, "operation", parent)
        cur = parent if parent is not None and parent.name == "scf.if" else None
    raise ExecutorError(f"{op_loc(op)}: barrier.cluster.arrive with no barrier.cluster.wait after it in its region")


def _h_cluster_arrive(k, op):
    """``barrier.cluster.arrive`` (PTX ISA "barrier.cluster"; release): the thread's arrival.
    When every thread of every CTA of a cluster has arrived the barrier completes: their waits
    may return, and it orders what came before as a CTA barrier does (the executor's epoch),
    across the cluster's CTAs too (``State.cluster_count``). Nothing but arithmetic may come
    between the arrive and its wait (``_only_pure_until_wait``)."""
    aligned = "aligned" in op.attributes
    _only_pure_until_wait(op)

    def run(st):
        act = _cluster_barrier_checks(st, op, "barrier.cluster.arrive", aligned)
        again = act & (st.cluster_arrived | st.cluster_ready)
        if again.any():
            lane = int(np.argmax(again))
            raise ExecutorError(
                f"{op_loc(op)}: thread {lane % st.T} of workgroup row {int(st.wg_local[lane])} arrives "
                f"at barrier.cluster again before its barrier.cluster.wait"
            )
        st.cluster_arrived[act] = True
        rows = st.cluster_arrived.reshape(st.G, st.T).all(axis=1)
        whole = rows[st.peers].all(axis=1)  # per row: every thread of its cluster arrived
        if not whole.any():
            return
        if not whole.all():
            raise ExecutorError(
                f"{op_loc(op)}: barrier.cluster completes for the clusters of workgroup rows "
                f"{np.nonzero(whole)[0].tolist()} and not for rows {np.nonzero(~whole)[0].tolist()} "
                f"run with them: workgroup-dependent barrier.cluster is not modelled"
            )
        st.cluster_arrived[:] = False
        st.cluster_ready[:] = True
        st.cluster_count += 1
        st.epoch += 1
        k.stats.barriers += 1

    return run


def _h_cluster_wait(k, op):
    """``barrier.cluster.wait`` (acquire): returns once the barrier the thread arrived at
    completed. The threads run in lockstep: one whose cluster has threads that never arrived
    waits forever (an error, as a divergent CTA barrier)."""
    aligned = "aligned" in op.attributes

    def run(st):
        act = _cluster_barrier_checks(st, op, "barrier.cluster.wait", aligned)
        stuck = act & st.cluster_arrived
        if stuck.any():
            lane = int(np.argmax(stuck))
            g = int(st.wg_local[lane])
            missing = ~st.cluster_arrived.reshape(st.G, st.T)[st.peers[g]]  # (cluster ranks, threads)
            r, t = (int(x) for x in np.argwhere(missing)[0])
            raise ExecutorError(
                f"{op_loc(op)}: thread {lane % st.T} of workgroup row {g} waits at barrier.cluster, "
                f"which can never complete: {int(missing.sum())} threads of its cluster never arrived "
                f"(thread {t} of CTA {r}, workgroup row {int(st.peers[g, r])}, first)"
            )
        never = act & ~st.cluster_ready
        if never.any():
            lane = int(np.argmax(never))
            raise ExecutorError(
                f"{op_loc(op)}: thread {lane % st.T} of workgroup row {int(st.wg_local[lane])} waits at "
                f"barrier.cluster with no barrier.cluster.arrive before"
            )
        st.cluster_ready[act] = False

    return run


def end_check(st) -> None:
    """At the end of a workgroup batch: the warpgroups' final setmaxnreg counts (those that set
    none at the launch count) within the workgroup's register pool; no bulk copy left in flight;
    and no CTA exits while a peer of its cluster may still arrive on its mbarriers or multicast
    into it: a barrier.cluster must have completed after each such operation [CUDA guide,
    "Distributed Shared Memory": a block must not exit before the cluster's remote accesses to
    its shared memory are done]."""
    regs = getattr(st, "setmaxnreg", None)
    if regs is not None:
        per = launch_registers(st.T)
        final = np.where(regs > 0, regs, per)
        if int(final.sum()) * 128 > st.T * per:
            raise ExecutorError(
                f"setmaxnreg: the warpgroups end at {list(map(int, final))} registers per thread, "
                f"{int(final.sum()) * 128} in all, more than the workgroup's pool of {st.T * per} "
                f"({st.T} threads x {per} at launch): an .inc would wait for registers forever"
            )
    t = getattr(st, "tma", None)
    if t is not None and any(b.copies for b in t.bars.values()):
        raise ExecutorError("the kernel ends with bulk tensor copies (cp.async.bulk.tensor) no mbarrier wait covered")
    for row, (stamp, rank, what, where) in sorted((t.remote if t is not None else {}).items()):
        if st.cluster_count[row] <= stamp:
            raise ExecutorError(
                f"workgroup row {row} (cluster rank {int(st.row_rank[row])}) exits while CTA {rank} of "
                f"its cluster may still {what} ({where}): no barrier.cluster after it"
            )


HANDLERS = {
    "memref.extract_aligned_pointer_as_index": _h_extract_pointer,
    "memref.extract_strided_metadata": _h_strided_metadata,
    "memref.get_global": _h_get_global,
    "llvm.inttoptr": _h_passthrough,
    "llvm.addrspacecast": _h_passthrough,
    "llvm.ptrtoint": _h_passthrough,
    "llvm.load": _h_llvm_load,
    "llvm.store": _h_llvm_store,
    "llvm.intr.trap": _h_trap,
    "nvvm.read.ptx.sreg.smid": _h_smid,
    "nvvm.tensormap.replace": _h_tensormap_replace,
    "nvvm.inline_ptx": _h_inline_ptx,
    "nvvm.fence.proxy.acquire": _h_fence_acquire,  # (a release: only cp_fenceproxy's, which the model checks)
    "nvvm.mbarrier.init": _h_mbarrier_init,
    "nvvm.fence.mbarrier.init": _h_fence_mbarrier_init,
    "nvvm.mbarrier.arrive.expect_tx": _arrive_handler(True),
    "nvvm.mbarrier.try_wait": _h_try_wait,
    "nvvm.mbarrier.arrive": _arrive_handler(False),
    "nvvm.setmaxregister": _h_setmaxnreg,
    "nvvm.cp.async.bulk.tensor.shared.cluster.global": _h_bulk_tensor,
    "nvvm.mapa": _h_mapa,
    "nvvm.cluster.arrive": _h_cluster_arrive,
    "nvvm.cluster.wait": _h_cluster_wait,
    "nvvm.read.ptx.sreg.cluster.ctarank": _sreg(lambda k, st: st.rank),
    "nvvm.read.ptx.sreg.cluster.nctarank": _sreg(lambda k, st: [int(np.prod(k.cluster))]),
    **{
        f"nvvm.read.ptx.sreg.cluster.ctaid.{x}": _sreg(lambda k, st, d=d: st.wg_id[d] % k.cluster[d])
        for d, x in enumerate("xyz")
    },
    **{f"nvvm.read.ptx.sreg.cluster.nctaid.{x}": _sreg(lambda k, st, d=d: [k.cluster[d]]) for d, x in enumerate("xyz")},
    **{
        f"nvvm.read.ptx.sreg.clusterid.{x}": _sreg(lambda k, st, d=d: st.wg_id[d] // k.cluster[d])
        for d, x in enumerate("xyz")
    },
    **{
        f"nvvm.read.ptx.sreg.nclusterid.{x}": _sreg(lambda k, st, d=d: [k.grid[d] // k.cluster[d]])
        for d, x in enumerate("xyz")
    },
    "scf.while": _h_while,
    "scf.condition": lambda k, op: lambda st: None,
}
