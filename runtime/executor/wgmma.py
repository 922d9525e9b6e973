"""The lane executor's Hopper warpgroup MMA: ``nvvm.wgmma.*``, ``nvvm.fence.proxy`` and the few
``llvm.*`` ops that carry a wgmma accumulator (an ``!llvm.struct`` of f32).

The arithmetic is the ISA model's (``runtime/isa/wgmma.execute_wgmma``): per workgroup and per
warpgroup (128 consecutive threads) the 128 threads' accumulator registers are gathered, the two
64-bit matrix descriptors (uniform over the warpgroup) address the workgroup's shared memory as
one byte array (every ``memref.alloc`` at the byte address the executor packs it at, which is
what ``memref.extract_aligned_pointer_as_index`` returns; its handler is ``tma.py``'s, which
also gives global memory addresses).

The asynchrony is modelled conservatively, so that an ordering bug fails loudly instead of
reading plausible numbers [PTX-WG 9.7.15.6, "wgmma.fence", "commit_group", "wait_group"; PTX
memory model, "async proxy"]:

- a wgmma joins the open group; ``commit.group`` closes it; ``wait.group N`` completes every
  committed group but the newest N. Its result (and the shared memory it reads) is pending
  until then: ``llvm.extractvalue`` / ``insertvalue`` of a pending accumulator is an error
  ("read before wgmma.wait_group"), and so is a shared-memory write (a store, an async copy's
  issue or landing) to bytes a pending wgmma reads. Chaining a pending accumulator into the next
  wgmma is allowed (the PTX ISA's exception for the same accumulator and shape).
- a wgmma whose accumulator was produced or touched by anything but a pending wgmma needs a
  ``wgmma.fence`` executed since that value was made.
- shared-memory bytes written through the generic proxy (stores, landed cp.async copies) must
  be made visible to the async proxy by ``nvvm.fence.proxy`` (async.shared) before a wgmma reads
  them; bytes any thread stored since the last barrier are a race (the wgmma reads for all
  four warps); bytes an async copy is still writing are an error.
- a write of shared-memory bytes (a store, a cp.async, a bulk tensor copy) that another
  warpgroup's completed wgmma read needs that completion ordered before it: a barrier since the
  other warpgroup's ``wait_group`` covered the read (a thread's own warpgroup's wait orders its own);
  the warpgroups mostly run in lockstep here (as tasks only where named barriers split them), so
  without this a missing barrier would read right numbers.
  What a thread knows is kept per (cluster rank, warpgroup) and travels through mbarrier phases
  (``tma.Barrier``), across the CTAs of a cluster too: a multicast bulk copy into a peer
  CTA's bytes its wgmma read is ordered by a phase carrying that wait_group, or a barrier.cluster
  since (a CTA barrier orders nothing for another CTA).
- the kernel must not end with wgmma groups uncommitted or unwaited.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
from iree.compiler import ir

from mmaflow.runtime.executor.core import ExecutorError, op_loc, per_lane
from mmaflow.runtime.isa import IsaError
from mmaflow.runtime.isa.smem_matrix import decode_descriptor, operand_address
from mmaflow.runtime.isa.tables import WGMMA_PTX_TYPES, wgmma_key
from mmaflow.runtime.isa.wgmma import execute_wgmma

WARPGROUP = 128
_F32_STRUCT = re.compile(r"^!llvm\.struct<\((f32(, f32)*)\)>$")


class Group:
    """One wgmma group: open, committed, done; and which shared-memory bytes its wgmmas read."""

    def __init__(self, shape: tuple[int, int]):
        self.state = "open"
        self.reads = np.zeros(shape, bool)  # (workgroup row, byte)
        self.wreads: list = []  # (workgroup row, warpgroup, byte addresses) per wgmma


class Accumulator:
    """A wgmma accumulator struct value: (lanes or 1, fields) f32; ``groups``: per warpgroup, the
    wgmma group that writes its lanes (empty: made by llvm.* ops); ``fence_seq``: per warpgroup,
    the wgmma.fence count at its making."""

    def __init__(self, data: np.ndarray, groups: dict[int, Group], fence_seq: np.ndarray):
        self.data, self.groups, self.fence_seq = data, groups, fence_seq

    def pending_in(self, w: int) -> bool:
        g = self.groups.get(w)
        return g is not None and g.state != "done"

    @property
    def pending(self) -> bool:
        return any(g.state != "done" for g in self.groups.values())

    def state(self) -> str:
        return next((g.state for g in self.groups.values() if g.state != "done"), "done")


class WarpgroupState:
    """Per executor ``State``: per warpgroup (wgmma groups and fences are each warpgroup's own,
    as the warpgroups run as separate tasks where named barriers order them) the fence count and
    the open and committed groups; and which bytes of shared memory generic-proxy writes left
    unfenced."""

    def __init__(self, st):
        self.bytes = max(st.lds_offset, 16)
        self.W = max(1, st.T // WARPGROUP)
        self.fences = np.zeros(self.W, np.int64)
        self.open = [Group((st.G, self.bytes)) for _ in range(self.W)]
        self.committed: list[list[Group]] = [[] for _ in range(self.W)]
        self.unfenced = np.zeros((st.G, self.bytes), bool)
        # Happens-before of wgmma reads and later writes of the same bytes: ``clock`` counts
        # completed groups; ``done_time`` / ``done_epoch`` [row, warpgroup, byte]: when the last
        # group of that warpgroup reading the byte completed, and the barrier epoch then (a
        # barrier since orders it for every thread of the workgroup); ``known`` [lane, cluster
        # rank, warpgroup]: the latest completion of the groups of that warpgroup of the CTA of
        # that rank in the lane's cluster ordered before the lane's next instruction (its own
        # warpgroup's wait_group; what mbarrier phases carried, from peer CTAs too). Without
        # clusters the rank is always 0. With clusters, ``done_cluster`` [row, warpgroup, byte]:
        # the row's barrier.cluster count at that completion (a CTA barrier orders nothing for
        # another CTA's threads; a barrier.cluster since does).
        self.R = st.cluster_n
        self.clock = 0
        self.done_time = np.zeros((st.G, self.W, self.bytes), np.int32)
        self.done_epoch = np.full((st.G, self.W, self.bytes), -1, np.int32)
        self.done_cluster = np.full((st.G, self.W, self.bytes), -1, np.int32) if self.R > 1 else None
        self.known = np.zeros((st.L, self.R, self.W), np.int32)

    def groups(self) -> list[Group]:
        """Every warpgroup's open and committed groups."""
        return [g for w in range(self.W) for g in [self.open[w]] + self.committed[w]]

    def fit(self, st) -> None:
        """Grow the byte masks if allocations appeared after the first wgmma op."""
        if st.lds_offset > self.bytes:
            pad = ((0, 0), (0, st.lds_offset - self.bytes))
            self.unfenced = np.pad(self.unfenced, pad)
            for g in self.groups():
                g.reads = np.pad(g.reads, pad)
            pad3 = ((0, 0), (0, 0), (0, st.lds_offset - self.bytes))
            self.done_time = np.pad(self.done_time, pad3)
            self.done_epoch = np.pad(self.done_epoch, pad3, constant_values=-1)
            if self.done_cluster is not None:
                self.done_cluster = np.pad(self.done_cluster, pad3, constant_values=-1)
            self.bytes = st.lds_offset


def ordered_after_reads(st, op, g: int, lane: int, addr: np.ndarray, what: str, row: int | None = None) -> None:
    """``_check_ordered`` for one write (a bulk tensor copy) of bytes ``addr`` by ``lane`` of
    workgroup row ``g`` into the shared memory of row ``row`` (default ``g``; another CTA of the
    cluster for a multicast copy)."""
    wg = getattr(st, "wgmma", None)
    if wg is not None:
        addr = addr[addr < wg.bytes]
        _check_ordered(st, wg, op, np.array([g if row is None else row]), np.array([lane]), addr[None, :], what)


def _check_ordered(st, wg, op, rows: np.ndarray, lanes: np.ndarray, span: np.ndarray, what: str) -> None:
    """Writes of shared-memory bytes ``span`` (writes, bytes) by ``lanes`` into the shared memory
    of workgroup rows ``rows`` (writes,): an error where some warpgroup's completed wgmma read a
    byte and nothing orders that completion before the write -- a barrier since (its epoch; for
    a write into another CTA of the cluster only a barrier.cluster since), or what the writing
    lane knows of that CTA's warpgroup (``known``: its own warpgroup's wait_group, or what an
    mbarrier phase it observed carried)."""
    if not span.size:
        return
    r = rows[:, None]
    ranks = st.row_rank[rows]
    remote = rows != st.wg_local[lanes]
    for w in range(wg.W):
        unordered = wg.done_epoch[r, w, span] == st.epoch
        if remote.any():
            since = wg.done_cluster[r, w, span] == st.cluster_count[rows][:, None]
            unordered = np.where(remote[:, None], since, unordered)
        need = np.where(unordered, wg.done_time[r, w, span], 0)
        bad = need.max(axis=1) > wg.known[lanes, ranks, w]
        if bad.any():
            i = int(np.argmax(bad))
            b = int(span[i, int(np.argmax(need[i]))])
            if remote[i]:
                raise ExecutorError(
                    f"{op_loc(op)}: {what} by thread {int(lanes[i]) % st.T} of workgroup row "
                    f"{int(st.wg_local[lanes[i]])} into shared-memory byte {b} of cluster rank "
                    f"{int(ranks[i])} (row {int(rows[i])}), which that CTA's warpgroup {w}'s "
                    f"wgmma.mma_async read, with nothing ordering that read's completion before it "
                    f"(no mbarrier phase carrying its wgmma.wait_group, no barrier.cluster since)"
                )
            raise ExecutorError(
                f"{op_loc(op)}: {what} by thread {int(lanes[i]) % st.T} into shared-memory byte {b}, "
                f"which warpgroup {w}'s wgmma.mma_async read, with nothing ordering that read's "
                f"completion before it (no barrier since its wgmma.wait_group)"
            )


def warpgroup_state(st) -> WarpgroupState:
    wg = getattr(st, "wgmma", None)
    if wg is None:
        wg = st.wgmma = WarpgroupState(st)
    wg.fit(st)
    return wg


def _byte_span(mem, elems: np.ndarray) -> np.ndarray:
    """Byte addresses (..., elem_bytes) of LDS elements ``elems`` of ``mem``."""
    e = mem.elem_bytes
    return mem.base + np.asarray(elems, np.int64)[..., None] * e + np.arange(e)


# ---- hooks the executor calls on shared-memory writes -----------------------------------------


def lds_write_check(st, op, mem, elems: np.ndarray, act: np.ndarray, *, lands: bool, rows=None) -> None:
    """A generic-proxy write of LDS elements ``elems`` (L, n) of ``mem`` by the active lanes,
    into their own workgroup rows' shared memory or that of ``rows`` (L,) (another CTA of the
    cluster: a shared::cluster store): an error where a pending wgmma reads those bytes, or where
    another warpgroup's completed wgmma read them with no barrier since (``_check_ordered``);
    where the data lands (a store, or an async copy's completion) the bytes become unfenced for
    the async proxy."""
    if not getattr(st.k, "uses_wgmma", False):
        return
    wg = warpgroup_state(st)
    rows = np.broadcast_to((st.wg_local if rows is None else rows)[:, None], elems.shape)[act]
    span = _byte_span(mem, elems[act])  # (writes, bytes)
    r = np.broadcast_to(rows[:, None], span.shape)
    for g in wg.groups():
        hit = g.reads[r, span]
        if hit.any():
            i = np.argwhere(hit)[0]
            raise ExecutorError(
                f"{op_loc(op)}: writes shared-memory byte {int(span[i[0], i[1]])} ({mem.name}) that a "
                f"wgmma.mma_async still reads (its group is {g.state}: no wgmma.wait_group "
                f"covers it)"
            )
    lanes = np.broadcast_to(np.arange(st.L)[:, None], elems.shape)[act]
    _check_ordered(st, wg, op, rows, lanes, span, f"a write of {mem.name}")
    if lands:
        wg.unfenced[r, span] = True


# ---- handlers ----------------------------------------------------------------------------------


def _struct_fields(t, op) -> int:
    m = _F32_STRUCT.match(str(t))
    if not m:
        raise ExecutorError(f"{op_loc(op)}: the executor models !llvm.struct of f32 (wgmma accumulators), not {t}")
    return m.group(1).count("f32")


def _h_llvm_value(fill: float):
    def handler(k, op):
        (out,) = k._outs(op)
        n = _struct_fields(op.results[0].type, op)

        def run(st):
            st.env[out] = Accumulator(np.full((1, n), fill, np.float32), {}, warpgroup_state(st).fences.copy())

        return run

    return handler


def _position(op) -> int:
    pos = list(ir.DenseI64ArrayAttr(op.attributes["position"]))
    if len(pos) != 1:
        raise ExecutorError(f"{op_loc(op)}: only one-level struct positions are modelled, not {pos}")
    return pos[0]


def _ready(st, acc, op) -> Accumulator:
    if not isinstance(acc, Accumulator):
        raise ExecutorError(f"{op_loc(op)}: operand is not a wgmma accumulator struct")
    if acc.pending:
        raise ExecutorError(
            f"{op_loc(op)}: reads a wgmma accumulator before wgmma.wait_group covers the wgmma "
            f"that writes it (its group is {acc.state()})"
        )
    return acc


def _h_extractvalue(k, op):
    (src,), (out,) = k._ins(op), k._outs(op)
    _struct_fields(op.operands[0].type, op)
    i = _position(op)

    def run(st):
        acc = _ready(st, st.env[src], op)
        st.env[out] = acc.data[:, i].copy()

    return run


def _h_insertvalue(k, op):
    (cont, val), (out,) = k._ins(op), k._outs(op)
    _struct_fields(op.results[0].type, op)
    i = _position(op)

    def run(st):
        acc = _ready(st, st.env[cont], op)
        v = np.asarray(st.env[val], np.float32).reshape(-1)
        data = np.array(per_lane(acc.data, st.L) if v.shape[0] != acc.data.shape[0] else acc.data)
        data[:, i] = v
        st.env[out] = Accumulator(data, {}, warpgroup_state(st).fences.copy())

    return run


def _h_fence_proxy(k, op):
    kind = str(op.attributes["kind"]) if "kind" in op.attributes else ""
    if "async.shared" not in kind:
        raise ExecutorError(f"{op_loc(op)}: only nvvm.fence.proxy async.shared is modelled, not {kind or 'generic'}")

    def run(st):
        if st.mask is not None and not st.mask.all():
            raise ExecutorError(f"{op_loc(op)}: fence.proxy under divergent control flow")
        # Conservative: a fence makes every thread's earlier generic writes visible to the async
        # proxy only after the barrier that follows it in the kernel; the race check below still
        # demands that barrier for bytes another warpgroup wrote.
        warpgroup_state(st).unfenced[:] = False

    return run


def _collective_warpgroups(st, op, what) -> list[int]:
    """The warpgroups that run ``what`` (a warpgroup-collective op): whole warpgroups, the same in
    every workgroup (a warp role), else an error."""
    if st.mask is None or st.mask.all():
        return list(range(max(1, st.T // WARPGROUP)))
    if st.T % WARPGROUP == 0:
        act = st.mask.reshape(st.G, st.T // WARPGROUP, WARPGROUP)
        whole = act.all(axis=2)
        if np.all(whole == act.any(axis=2)) and np.all(whole == whole[0]) and whole[0].any():
            return [int(w) for w in np.nonzero(whole[0])[0]]
    raise ExecutorError(f"{op_loc(op)}: {what} under divergent control flow (not whole warpgroups)")


def _h_wgmma_fence(k, op):
    def run(st):
        ws = _collective_warpgroups(st, op, "wgmma.fence")
        warpgroup_state(st).fences[ws] += 1

    return run


def _h_wgmma_commit(k, op):
    def run(st):
        wg = warpgroup_state(st)
        for w in _collective_warpgroups(st, op, "wgmma.commit_group"):
            wg.open[w].state = "committed"
            wg.committed[w].append(wg.open[w])
            wg.open[w] = Group((st.G, wg.bytes))

    return run


def _h_wgmma_wait(k, op):
    keep = ir.IntegerAttr(op.attributes["group"]).value

    def run(st):
        wg = warpgroup_state(st)
        waited = False
        for ww in _collective_warpgroups(st, op, "wgmma.wait_group"):
            n = max(0, len(wg.committed[ww]) - keep)
            for g in wg.committed[ww][:n]:
                g.state = "done"
                wg.clock += 1
                for row, w, read in g.wreads:
                    wg.done_time[row, w, read] = wg.clock
                    wg.done_epoch[row, w, read] = st.epoch
                    if wg.done_cluster is not None:
                        wg.done_cluster[row, w, read] = st.cluster_count[row]
            wg.committed[ww] = wg.committed[ww][n:]
            waited = waited or n > 0
        if waited:  # each thread of the waiting warpgroups knows its own warpgroup's completions
            lanes = np.nonzero(st.active())[0]
            wg.known[lanes, st.rank[lanes], st.tid[lanes] // WARPGROUP] = wg.clock

    return run


def _attr_word(op, name: str) -> str:
    m = re.search(r"<([a-z0-9]+)>\s*$", str(op.attributes[name]))
    if not m:
        raise ExecutorError(f"{op_loc(op)}: cannot read {name} = {op.attributes[name]}")
    return m.group(1)


def _smem_image(st, wg) -> np.ndarray:
    """Every workgroup row's shared memory as one byte array (G, bytes)."""
    smem = np.zeros((st.G, wg.bytes), np.uint8)
    for mem in st.lds.values():
        smem[:, mem.base : mem.base + mem.numel * mem.elem_bytes] = mem.data.reshape(st.G, -1).view(np.uint8)
    return smem


def _operand_bytes(op, desc: int, k_major: bool, ebits: int, mn: np.ndarray, kk: np.ndarray) -> np.ndarray:
    """The shared-memory byte addresses of one descriptor operand's elements."""
    try:
        addr = operand_address(decode_descriptor(desc), k_major=k_major, element_bits=ebits, mn=mn, k=kk)
    except IsaError as e:
        raise ExecutorError(f"{op_loc(op)}: {e}") from None
    return (addr[..., None] + np.arange(ebits // 8)).reshape(-1)


def _record_reads(st, op, wg, g: int, w: int, read: np.ndarray) -> None:
    """A wgmma of warpgroup ``w`` of row ``g`` reads bytes ``read``: in bounds, visible to the
    async proxy, and from now on pending in the open group."""
    if read.min() < 0 or read.max() >= wg.bytes:
        raise ExecutorError(
            f"{op_loc(op)}: a descriptor addresses shared-memory bytes "
            f"{read.min()}..{read.max()}, outside the {wg.bytes} allocated"
        )
    _check_reads(st, op, wg, g, w, read)
    wg.open[w].reads[g, read] = True
    wg.open[w].wreads.append((g, w, read))


def _uniform_descriptor(op, v, st, lanes, what) -> int:
    d = np.asarray(per_lane(v, st.L))[lanes].astype(np.uint64)
    if not np.all(d == d[0]):
        raise ExecutorError(f"{op_loc(op)}: the {what} descriptor differs between the warpgroup's threads")
    return int(d[0])


def _h_wgmma_mma(k, op):
    c_id, a_id, b_id = k._ins(op)  # (inouts, descriptorA, descriptorB)
    k.uses_wgmma = True  # shared-memory writes are tracked from the kernel's start
    (out,) = k._outs(op)
    if len(op.operands) != 3 or str(op.operands[1].type) != "i64":
        raise ExecutorError(f"{op_loc(op)}: only the descriptor form (A and B from shared memory, i64) is modelled")
    shape = {kk: int(v) for kk, v in re.findall(r"(m|n|k) = (\d+)", str(op.attributes["shape"]))}
    a_t, b_t, d_t = (_attr_word(op, f"type{x}") for x in "ABD")
    n_fields = _struct_fields(op.results[0].type, op)
    unknown = [t for t in (a_t, b_t) if t not in WGMMA_PTX_TYPES]
    if unknown:
        raise ExecutorError(
            f"{op_loc(op)}: the ISA model has no f32-accumulating wgmma on {unknown[0]} inputs "
            f"(it has {', '.join(WGMMA_PTX_TYPES)})"
        )
    key = wgmma_key(shape["n"], WGMMA_PTX_TYPES[a_t], WGMMA_PTX_TYPES[b_t], d_t)
    if shape["m"] != 64 or n_fields != shape["n"] // 2:
        raise ExecutorError(
            f"{op_loc(op)}: a m64n{shape['n']} f32 accumulator has {shape['n'] // 2} fields, not {n_fields}"
        )
    trans_a = _attr_word(op, "layoutA") == "col"  # A row-major (M x K) = K-major
    trans_b = _attr_word(op, "layoutB") == "row"  # B column-major (K x N) = K-major
    scale_d = _attr_word(op, "scaleD") == "one"
    scale = {x: (-1 if _attr_word(op, f"scale{x}") == "neg" else 1) for x in "AB"}
    ebits = 16 if a_t in ("f16", "bf16") else 8
    rows = np.arange(64)[:, None]
    kk = np.arange(shape["k"])[None, :]
    ncol = np.arange(shape["n"])[:, None]

    def run(st):
        warpgroups = _collective_warpgroups(st, op, "wgmma.mma_async")
        if st.T % WARPGROUP:
            raise ExecutorError(f"{op_loc(op)}: a workgroup of {st.T} threads is not whole warpgroups")
        wg = warpgroup_state(st)
        c = st.env[c_id]
        if not isinstance(c, Accumulator):
            raise ExecutorError(f"{op_loc(op)}: the accumulator is not an !llvm.struct value")
        if any(not c.pending_in(w) and wg.fences[w] <= c.fence_seq[w] for w in warpgroups):
            raise ExecutorError(
                f"{op_loc(op)}: wgmma.mma_async on an accumulator made or read by other "
                f"instructions with no wgmma.fence since"
            )
        smem = _smem_image(st, wg)
        cd = np.asarray(per_lane(c.data, st.L), np.float32)
        d = cd.copy()  # (the lanes of warpgroups that do not run it keep theirs)
        for g in range(st.G):
            for w in warpgroups:
                lanes = np.arange(WARPGROUP) + g * st.T + w * WARPGROUP
                da = _uniform_descriptor(op, st.env[a_id], st, lanes, "A")
                db = _uniform_descriptor(op, st.env[b_id], st, lanes, "B")
                read = np.concatenate(
                    [
                        _operand_bytes(op, da, not trans_a, ebits, rows, kk),
                        _operand_bytes(op, db, not trans_b, ebits, ncol, kk),
                    ]
                )
                _record_reads(st, op, wg, g, w, read)
                try:
                    d[lanes] = execute_wgmma(
                        key,
                        cd[lanes],
                        db,
                        smem[g],
                        a_desc=da,
                        trans_a=trans_a,
                        trans_b=trans_b,
                        scale_d=scale_d,
                        scale_a=scale["A"],
                        scale_b=scale["B"],
                    )
                except IsaError as e:
                    raise ExecutorError(f"{op_loc(op)}: {e}") from None
        k.stats.matrix_ops += st.G * len(warpgroups)
        st.env[out] = Accumulator(d, {**c.groups, **{w: wg.open[w] for w in warpgroups}}, wg.fences.copy())

    return run


# ---- the register-A form, as inline assembly --------------------------------------------------
#
# IREE 3.13's nvvm.wgmma.mma_async takes A by descriptor only, so a kernel that feeds A from
# registers (flash attention's P) writes the instruction as ``llvm.inline_asm`` (MLIR lowers
# nvvm.wgmma.mma_async to inline PTX itself). The one form modelled: a chain of K steps into one
# accumulator,
#
#     { .reg .pred p; setp.ne.b32 p, $S, 0;
#       wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T {$0, ..., $F-1}, {$a, $b, $c, $d}, $B, p, SA, SB, TB;
#       ... one line per K step ... }
#
# with constraints "=f" x F (the accumulator: the op's !llvm.struct of F f32), then the inputs: "r"
# (A's four .b32 registers per step, two 16-bit elements each, element 0 in the low half), "l"
# (B's descriptor per step), "r" (scale-d), and F inputs tied to the outputs ("0" .. "F-1": C).
# Every step reads the same accumulator registers, as the PTX ISA allows for a chain of one shape.
# [PTX-WG 9.7.15.5.2] A wgmma.fence must order the registers' writes before the instruction:
# every register input made in the asm's block must be made before a nvvm.wgmma.fence.aligned
# that precedes the asm there (checked when the kernel is loaded), and the asm must have side
# effects (so that LLVM keeps it between the fence, the commit and the wait). The check is of the
# MLIR's order: LLVM could still sink a pure input computation below the fence intrinsic, which
# ptxas answers by serializing the wgmmas (a loss of speed, not of correctness; ptxas reported no
# serialization for the attention kernels).

_RS_FORM = re.compile(r"^\{\s*\.reg \.pred p;\s*setp\.ne\.b32 p, \$(\d+), 0;(.*)\}$", re.S)
_RS_STEP = re.compile(
    r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(f16|bf16)\.(f16|bf16)\s+"
    r"\{([^}]*)\},\s*\{([^}]*)\},\s*\$(\d+),\s*p,\s*(-?1),\s*(-?1),\s*([01])$"
)


def _placeholders(text: str) -> list[int]:
    items = [x.strip() for x in text.split(",")]
    if not all(re.fullmatch(r"\$\d+", x) for x in items):
        raise ValueError(f"operand list {{{text}}} is not $N placeholders")
    return [int(x[1:]) for x in items]


def _parse_rs(op):
    """The register-A wgmma chain of an ``llvm.inline_asm``: (steps, scale input, tied inputs),
    each step (key, A's four input indices, B's input index, scale-a, scale-b, trans-b); a
    ValueError naming what is not the modelled form."""
    if "has_side_effects" not in op.attributes:
        raise ValueError("it lacks has_side_effects, so LLVM may move it past the wgmma commit and wait")
    code = ir.StringAttr(op.attributes["asm_string"]).value.strip()
    cons = ir.StringAttr(op.attributes["constraints"]).value.split(",")
    outs = [c for c in cons if c.startswith("=")]
    ins = cons[len(outs) :]
    if not outs or any(c != "=f" for c in outs) or any(c.startswith("=") for c in ins):
        raise ValueError(f"constraints {','.join(cons)!r}: the outputs must come first, all '=f'")
    f = len(outs)
    if f != _struct_fields(op.results[0].type, op) or len(ins) != len(op.operands):
        raise ValueError("the outputs are not the result struct's fields, or the inputs not the operands")
    tied = {}
    for i, c in enumerate(ins):
        if c.isdigit():
            tied[int(c)] = i
    if sorted(tied) != list(range(f)):
        raise ValueError("every accumulator output must be tied to one input (its C)")
    want = {"r": "i32", "l": "i64"}
    for i, (c, v) in enumerate(zip(ins, op.operands)):
        t = str(v.type)
        if (c in want and t != want[c]) or (c.isdigit() and t != "f32"):
            raise ValueError(f"input {i} ({c!r}) is {t}, not {want.get(c, 'f32')}")
    m = _RS_FORM.match(code)
    if not m:
        raise ValueError("not '{ .reg .pred p; setp.ne.b32 p, $S, 0; wgmma... }'")
    scale_in = int(m.group(1)) - f

    def input_of(n: int, want: str) -> int:
        i = n - f
        if not 0 <= i < len(ins) or ins[i] != want:
            raise ValueError(f"${n} is not an input with constraint {want!r}")
        return i

    input_of(int(m.group(1)), "r")
    steps = []
    for line in [x.strip() for x in m.group(2).split(";") if x.strip()]:
        sm = _RS_STEP.match(line)
        if not sm:
            raise ValueError(f"{line!r} is not a register-A wgmma of the modelled form")
        n, a_t, b_t, d_list, a_list, b_ph, sa, sb, tb = sm.groups()
        if a_t != b_t:
            raise ValueError(f"{line!r}: A and B types differ")
        if _placeholders(d_list) != list(range(f)) or f != int(n) // 2:
            raise ValueError(f"{line!r}: the accumulator must be $0 .. ${f - 1}, the asm's outputs, in order")
        a_regs = [input_of(x, "r") for x in _placeholders(a_list)]
        if len(a_regs) != 4:
            raise ValueError(f"{line!r}: a 16-bit A is four .b32 registers")
        key = wgmma_key(int(n), WGMMA_PTX_TYPES[a_t], WGMMA_PTX_TYPES[b_t], "f32")
        steps.append((key, a_t, a_regs, input_of(int(b_ph), "l"), int(sa), int(sb), tb == "1"))
    if not steps:
        raise ValueError("no wgmma in the asm")
    return steps, scale_in, [tied[j] for j in range(f)]


def _fenced_inputs(op) -> None:
    """The static wgmma.fence check of the register-A form (above)."""
    ops = [o.operation for o in op.operation.block.operations]
    at = next(i for i, o in enumerate(ops) if o == op.operation)
    fences = [i for i, o in enumerate(ops[:at]) if o.name == "nvvm.wgmma.fence.aligned"]
    if not fences:
        raise ValueError("no nvvm.wgmma.fence.aligned precedes it in its block")
    after = ops[fences[-1] + 1 : at]
    for v in op.operands:
        owner = v.owner
        if not isinstance(owner, ir.Block) and any(o == owner.operation for o in after):
            raise ValueError(f"an input is made by {owner.name} after the last wgmma.fence before it")


def h_register_a_wgmma(k, op):
    """An ``llvm.inline_asm`` that is not one of ``ops``' forms: the register-A wgmma chain."""
    try:
        steps, scale_in, tied = _parse_rs(op)
        _fenced_inputs(op)
    except ValueError as e:
        raise ExecutorError(
            f"{op_loc(op)}: llvm.inline_asm is modelled only as lop3.b32 or a register-A wgmma chain: {e}"
        ) from None
    k.uses_wgmma = True
    ins, (out,) = k._ins(op), k._outs(op)
    kk = np.arange(16)[None, :]
    ncol = {s[0]: np.arange(int(re.search(r"m64n(\d+)", s[0]).group(1)))[:, None] for s in steps}

    def run(st):
        warpgroups = _collective_warpgroups(st, op, "wgmma.mma_async")
        if st.T % WARPGROUP:
            raise ExecutorError(f"{op_loc(op)}: a workgroup of {st.T} threads is not whole warpgroups")
        wg = warpgroup_state(st)
        smem = _smem_image(st, wg)
        cd = np.stack([np.asarray(per_lane(st.env[ins[i]], st.L), np.float32).reshape(st.L) for i in tied], axis=1)
        scale = np.asarray(per_lane(st.env[ins[scale_in]], st.L)).reshape(st.L)
        d = cd.copy()
        for g in range(st.G):
            for w in warpgroups:
                lanes = np.arange(WARPGROUP) + g * st.T + w * WARPGROUP
                if not np.all(scale[lanes] == scale[lanes[0]]):
                    raise ExecutorError(f"{op_loc(op)}: scale-d differs between the warpgroup's threads")
                acc = d[lanes]
                for key, a_t, a_ids, b_id, sa, sb, tb in steps:
                    words = np.stack(
                        [np.asarray(per_lane(st.env[ins[i]], st.L)).reshape(st.L)[lanes] for i in a_ids], axis=1
                    ).astype(np.uint32)
                    halves = words.astype("<u4").view("<u2").reshape(WARPGROUP, 8)  # element 0 in the low half
                    a = halves.view(ml_dtypes.bfloat16 if a_t == "bf16" else np.float16)
                    db = _uniform_descriptor(op, st.env[ins[b_id]], st, lanes, "B")
                    _record_reads(st, op, wg, g, w, _operand_bytes(op, db, not tb, 16, ncol[key], kk))
                    try:
                        acc = execute_wgmma(
                            key,
                            acc,
                            db,
                            smem[g],
                            a_regs=a,
                            trans_b=tb,
                            scale_d=bool(scale[lanes[0]]),
                            scale_a=sa,
                            scale_b=sb,
                        )
                    except IsaError as e:
                        raise ExecutorError(f"{op_loc(op)}: {e}") from None
                d[lanes] = acc
        k.stats.matrix_ops += st.G * len(warpgroups) * len(steps)
        st.env[out] = Accumulator(d, {w: wg.open[w] for w in warpgroups}, wg.fences.copy())

    return run


def _check_reads(st, op, wg, g, w, read):
    """The bytes a wgmma of warpgroup ``w`` of workgroup row ``g`` reads: fenced for the async
    proxy, not being written by an async copy, not written by any thread since the last barrier."""
    if wg.unfenced[g, read].any():
        b = int(read[np.argmax(wg.unfenced[g, read])])
        raise ExecutorError(
            f"{op_loc(op)}: wgmma.mma_async reads shared-memory byte {b}, written through the "
            f"generic proxy with no nvvm.fence.proxy (async.shared) since"
        )
    for mem in st.lds.values():
        lo, hi = mem.base, mem.base + mem.numel * mem.elem_bytes
        inside = read[(read >= lo) & (read < hi)]
        if not inside.size:
            continue
        elems = np.unique((inside - lo) // mem.elem_bytes)
        flying = st.in_flight.get(id(mem))
        if flying is not None and flying[g, elems].any():
            e = int(elems[np.argmax(flying[g, elems])])
            raise ExecutorError(
                f"{op_loc(op)}: wgmma.mma_async reads element {e} of {mem.name} while an async copy to it is in flight"
            )
        w_lane, w_epoch = st.race_meta[id(mem)][:2]
        # The wgmma reads for the whole warpgroup: any thread's store since the last barrier
        # (its own warps' included: nothing orders the four warps' stores before the read).
        other = w_epoch[g, elems] == st.epoch
        if other.any():
            e = int(elems[np.argmax(other)])
            msg = (
                f"{op_loc(op)}: LDS race on {mem.name} element {e}: warpgroup {w}'s wgmma.mma_async reads thread "
                f"{int(w_lane[g, e])}'s write with no barrier in between"
            )
            if msg not in st.k.stats.races:
                st.k.stats.races.append(msg)


def end_check(st) -> None:
    """At the end of a workgroup batch: no wgmma left uncommitted or unwaited."""
    wg = getattr(st, "wgmma", None)
    if wg is not None and any(wg.committed[w] or wg.open[w].reads.any() for w in range(wg.W)):
        raise ExecutorError("the kernel ends with wgmma.mma_async groups it never committed or waited for")


HANDLERS = {
    "llvm.mlir.zero": _h_llvm_value(0.0),
    "llvm.mlir.undef": _h_llvm_value(np.nan),
    "llvm.extractvalue": _h_extractvalue,
    "llvm.insertvalue": _h_insertvalue,
    "nvvm.fence.proxy": _h_fence_proxy,
    "nvvm.wgmma.fence.aligned": _h_wgmma_fence,
    "nvvm.wgmma.commit.group.sync.aligned": _h_wgmma_commit,
    "nvvm.wgmma.wait.group.sync.aligned": _h_wgmma_wait,
    "nvvm.wgmma.mma_async": _h_wgmma_mma,
}
