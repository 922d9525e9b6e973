"""The lane executor's machine: what every handler module builds on.

The kernel's error (``ExecutorError``), the numpy types of MLIR's element types, an op's
location for messages, the counters (``Stats``), memrefs (``MemRef``), the state of a batch of
workgroups running together (``State``) and its thread block clusters, running a compiled block
(``run_block``) and the warp roles (``Roles``: the two sides of a divergent ``scf.if`` that wait
on mbarriers). It imports no handler module: the handler modules (``ops``, ``wgmma``, ``tma``)
import it, and the package (``__init__``) assembles their tables into ``Kernel``'s.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from iree.compiler import ir

from mmaflow.compiler.core.errors import Exit, MmaflowError
from mmaflow.compiler.core.mlir import file_location, typed_location

LDS_BANKS = {"gfx11": 64, "gfx12": 64, "gfx942": 32, "gfx950": 64, "sm_": 32}


class ExecutorError(MmaflowError):
    """The lane executor cannot run the kernel (an unsupported op, a missing input) or the
    kernel misbehaves in a way it refuses to model (out-of-bounds LDS)."""

    exit_code = Exit.CHECKER


def lds_banks(arch: str) -> int:
    for prefix, n in LDS_BANKS.items():
        if arch.startswith(prefix):
            return n
    raise ExecutorError(f"no LDS bank model for {arch}")


_DTYPES = {
    "f32": np.float32,
    "f16": np.float16,
    "f64": np.float64,
    "bf16": ml_dtypes.bfloat16,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,  # MX block scales (2^(e-127), 0xFF NaN)
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "index": np.int64,
}


def np_dtype(t: ir.Type) -> np.dtype:
    try:
        return np.dtype(_DTYPES[str(t)])
    except KeyError:
        raise ExecutorError(f"the executor has no numpy type for {t}") from None


def op_loc(op) -> str:
    """'<generated piece> at file:line:col' (mmaflow names the ops it generates), or the op name."""
    loc = typed_location(op.location)
    at = file_location(op.location)
    where = f"{at.filename}:{at.start_line}:{at.start_col}" if at is not None else ""
    if isinstance(loc, ir.NameLoc) and loc.name_str.startswith("mmaflow."):
        return f"{loc.name_str} ({op.name}){' at ' + where if where else ''}"
    return where or op.name


@dataclass
class Stats:
    lds_access_pieces: int = 0
    lds_ideal_cycles: int = 0
    lds_cycles: int = 0
    global_loads: Counter = field(default_factory=Counter)  # bytes per lane -> wave-instructions
    global_stores: Counter = field(default_factory=Counter)
    barriers: int = 0
    named_arrivals: int = 0  # threads arriving at named barriers (bar.sync / bar.arrive with an id)
    matrix_ops: int = 0
    cross_lane_ops: int = 0  # wave-instructions that read another lane's register (v_permlanex16, shfl)
    async_copy_bytes: int = 0  # landed in LDS through nvgpu.device_async_copy (zero fills included)
    races: list = field(default_factory=list)
    lds_conflicts_by_op: Counter = field(default_factory=Counter)  # op -> conflict cycles
    lds_pieces_by_op: Counter = field(default_factory=Counter)  # op -> access pieces (conflict-free cycles)
    seconds: float = 0.0  # wall time of the run (set by the caller that timed it)

    @property
    def lds_conflict_cycles(self) -> int:
        return self.lds_cycles - self.lds_ideal_cycles

    def to_dict(self) -> dict:
        return {
            "lds_access_pieces": self.lds_access_pieces,
            "lds_ideal_cycles": self.lds_ideal_cycles,
            "lds_cycles": self.lds_cycles,
            "lds_conflict_cycles": self.lds_conflict_cycles,
            "global_loads_by_bytes": dict(sorted(self.global_loads.items())),
            "global_stores_by_bytes": dict(sorted(self.global_stores.items())),
            "barriers": self.barriers,
            "named_arrivals": self.named_arrivals,
            "matrix_ops": self.matrix_ops,
            "cross_lane_ops": self.cross_lane_ops,
            "async_copy_bytes": self.async_copy_bytes,
            "races": self.races[:20],
            "lds_conflicts_by_op": dict(self.lds_conflicts_by_op.most_common(10)),
            "lds_pieces_by_op": dict(self.lds_pieces_by_op.most_common(20)),
            "seconds": round(self.seconds, 3),
        }


class MemRef:
    """A memref value: flat storage plus shape; LDS storage has one row per workgroup."""

    def __init__(self, data: np.ndarray, shape, space: str, name: str, base: int = 0):
        self.data, self.shape, self.space, self.name, self.base = data, tuple(shape), space, name, base
        self.strides = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
        self.numel = int(np.prod(shape)) if shape else 1
        self.elem_bytes = data.dtype.itemsize
        self.written: np.ndarray | None = None  # global memory: (element, byte) stored (a view of the binding's mask)

    def linear(self, idx: list) -> np.ndarray:
        out = 0
        for i, s in zip(idx, self.strides):
            out = out + np.asarray(i, dtype=np.int64) * s
        return np.asarray(out, dtype=np.int64)


class FuncReturn(Exception):
    """``func.return``: ends the kernel's run of a batch (``Kernel.run`` catches it)."""


class State:
    def __init__(self, kernel, workgroups: np.ndarray):
        """The lanes of ``workgroups`` (linear workgroup ids) of ``kernel`` (a ``Kernel``), run
        together; with thread block clusters (``Kernel.cluster``) they must be whole clusters."""
        k = kernel
        self.k = k
        self.G, self.T = len(workgroups), k.workgroup_size
        self.L = self.G * k.workgroup_size
        lanes = np.arange(self.L, dtype=np.int64)
        self.tid = lanes % self.T
        self.wg_local = lanes // self.T
        wg = np.asarray(workgroups, np.int64)[self.wg_local]
        gx, gy, _ = k.grid
        self.wg_id = (wg % gx, (wg // gx) % gy, wg // (gx * gy))
        # Thread block clusters: each row's rank in its cluster, ``peers[g, r]`` the row of rank r
        # of row g's cluster, ``rank`` per lane, and per row how many barrier.cluster completed.
        cluster_ids, ranks = cluster_coordinates(np.asarray(workgroups, np.int64), k.grid, k.cluster)
        self.cluster_n = int(np.prod(k.cluster))
        self.row_rank = ranks
        self.rank = ranks[self.wg_local]
        self.peers = np.full((self.G, self.cluster_n), -1, np.int64)
        rows_of = {}
        for g, (c, r) in enumerate(zip(cluster_ids.tolist(), ranks.tolist())):
            rows_of.setdefault(c, {})[r] = g
        for g, c in enumerate(cluster_ids.tolist()):
            for r, row in rows_of[c].items():
                self.peers[g, r] = row
        if (self.peers < 0).any():
            g = int(np.argwhere(self.peers < 0)[0][0])
            raise ExecutorError(
                f"workgroup {int(workgroups[g])} runs without the rest of its cluster of "
                f"{self.cluster_n} (a batch holds whole clusters)"
            )
        self.cluster_count = np.zeros(self.G, np.int64)
        self.cluster_arrived = np.zeros(self.L, bool)  # arrived at the current barrier.cluster
        self.cluster_ready = np.zeros(self.L, bool)  # its barrier.cluster completed, not yet waited for
        self.env: dict = {}
        self.named_barriers: dict = {}  # id -> ops._NamedBarrier
        self.mask = None  # None: all lanes active
        self.epoch = 0
        self.lds: dict = {}
        self.lds_offset = 0
        self.race_meta: dict = {}
        # distributed shared memory (tma.py, "Clusters"), for kernels with shared::cluster loads or
        # stores (``Kernel.uses_dsmem``): per LDS memref, the cluster phase and CTA rank of each
        # element's last write and of its reads (``ops.cluster_order_check``)
        self.dsmem: dict = {}
        # cp.async (nvgpu.device_async_copy): copies issued but not committed, committed groups
        # (oldest first), and per LDS memref which elements a copy in flight will still write
        self.async_open: list = []
        self.async_groups: list = []
        self.in_flight: dict = {}
        # progress within a batch (``Kernel.run``): called with the share of an outermost loop's
        # iterations done, after each of them; ``loop_depth`` tells the outermost loops apart
        self.tick = None
        self.loop_depth = 0

    def active(self) -> np.ndarray:
        return np.ones(self.L, bool) if self.mask is None else self.mask


def per_lane(v, L: int) -> np.ndarray:
    """Broadcast a value (leading axis 1 or L) to one row per lane."""
    v = np.asarray(v)
    return v if v.shape[0] == L else np.broadcast_to(v, (L,) + v.shape[1:])


def cluster_shape(func: ir.Operation) -> tuple[int, int, int]:
    """The thread block cluster shape of a dispatch function: its ``nvvm.cluster_dim``
    (``array<i32: cx, cy, cz>``); absent: (1, 1, 1), no clusters."""
    if "nvvm.cluster_dim" not in func.attributes:
        return (1, 1, 1)
    attr = func.attributes["nvvm.cluster_dim"]
    try:
        dims = [int(d) for d in ir.DenseI32ArrayAttr(attr)]
    except (TypeError, ValueError):
        raise ExecutorError(f"nvvm.cluster_dim = {attr}: expected array<i32: x, y, z>") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ExecutorError(f"nvvm.cluster_dim = {attr}: one to three positive sizes")
    return tuple(dims + [1] * (3 - len(dims)))


def cluster_coordinates(ids: np.ndarray, grid: tuple, cluster: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(linear cluster id, rank in the cluster) of linear workgroup ids: workgroup (x, y, z) is
    rank (x % cx) + cx * ((y % cy) + cy * (z % cz)) of cluster (x // cx, y // cy, z // cz)
    [PTX ISA, "Cluster of cooperative thread arrays"; %cluster_ctarank]."""
    gx, gy, _ = grid
    cx, cy, cz = cluster
    x, y, z = ids % gx, (ids // gx) % gy, ids // (gx * gy)
    rank = (x % cx) + cx * ((y % cy) + cy * (z % cz))
    cid = (x // cx) + (gx // cx) * ((y // cy) + (gy // cy) * (z // cz))
    return cid, rank


def whole_clusters(ids, grid: tuple, cluster: tuple) -> list[int]:
    """The linear workgroup ids of every cluster that one of ``ids`` belongs to, cluster after
    cluster (rank order within each): what ``Kernel.run`` runs for a sample ``ids``. Without
    clusters, ``ids`` sorted."""
    ids = np.asarray(sorted(set(int(i) for i in ids)), np.int64)
    if int(np.prod(cluster)) == 1 or not ids.size:
        return ids.tolist()
    every = np.arange(int(np.prod(grid)), dtype=np.int64)
    cid, rank = cluster_coordinates(every, grid, cluster)
    taken = np.isin(cid, cluster_coordinates(ids, grid, cluster)[0])
    order = np.lexsort((rank[taken], cid[taken]))  # by cluster, then rank
    return every[taken][order].tolist()


def run_block(body: list, st: State):
    for fn in body:
        fn(st)


# -- warp roles: the two sides of a divergent scf.if that wait on mbarriers run as tasks ------------
#
# A warp-specialized kernel splits its threads by role (``scf.if tid < P``: the MMA warpgroups;
# else the producer warpgroup) and the roles wait on each other's mbarrier arrivals, so neither
# side can run to its end before the other starts, as the executor runs a divergent if's sides
# otherwise. Where a divergent scf.if has an else side and ``mbarrier.try_wait`` on some side,
# each side runs as a task under its own lane mask; one task runs at a time, and a task whose
# wait cannot complete hands the turn to the other (``Roles.blocked``), as a warp waiting on an
# mbarrier lets the others run. Both waiting with nothing arrived since: the kernel deadlocks
# (error). Shared memory, mbarriers and wgmma groups are one machine state; each task sees it
# through a ``_RoleView`` with its own mask.
#
# A side that uses named barriers (``bar.sync`` / ``bar.arrive`` with an id: FlashAttention-3's
# ping-pong of two warpgroups) runs as one task per warpgroup, each with its own values
# (``_Scope``): the warpgroups meet only where the kernel makes them meet.


class _Scope(dict):
    """A task's values: its own, then (read only) those made before the split."""

    def __init__(self, outer: dict):
        super().__init__()
        self.outer = outer

    def __missing__(self, key):
        return self.outer[key]


class _Abort(Exception):
    """Raised in a task's thread when another task failed."""


class _RoleView:
    """A task's view of a ``State``: its own lane mask, everything else shared."""

    def __init__(self, st: "State", mask: np.ndarray, roles: "Roles", index: int, scoped: bool = False):
        self.__dict__.update(_st=st, mask=mask, roles=roles, role=index)
        if scoped:
            self.__dict__["env"] = _Scope(st.env)

    def __getattr__(self, name):
        return getattr(self.__dict__["_st"], name)

    def __setattr__(self, name, value):
        if name in ("mask", "roles", "role") or (name == "env" and "env" in self.__dict__):
            self.__dict__[name] = value
        else:
            setattr(self.__dict__["_st"], name, value)

    def active(self) -> np.ndarray:
        return np.ones(self._st.L, bool) if self.mask is None else self.mask


class Roles:
    """Cooperative tasks, one per side of a role split; ``progress`` counts the events that can
    let a waiting task go on (arrivals, copies issued), stamped on each wait that hands over."""

    def __init__(self, n: int):
        self.cv = threading.Condition()
        self.turn = 0
        self.done = [False] * n
        self.stamp = [None] * n  # the progress count when the task last handed over (None: running)
        self.why = [""] * n  # what the task waited for when it last handed over
        self.progress = 0
        self.error: BaseException | None = None

    def _next(self, me: int, runnable: bool = False) -> int | None:
        """The next task after ``me`` not done (``runnable``: nor waiting with nothing arrived
        since it handed over)."""
        n = len(self.done)
        for i in range(1, n + 1):
            j = (me + i) % n
            if not self.done[j] and j != me and not (runnable and self.stamp[j] == self.progress):
                return j
        return None

    def blocked(self, st, what: str) -> None:
        """Task ``st.role`` cannot go on (``what``): run another task until something arrived,
        then return (the caller tests again); an error if no task can go on."""
        me = st.role
        with self.cv:
            self.stamp[me], self.why[me] = self.progress, what
            nxt = self._next(me, runnable=True)
            if nxt is None:
                others = [self.why[j] for j in range(len(self.done)) if j != me and not self.done[j]]
                raise ExecutorError(
                    f"{what}, and "
                    + (f"so does every other warp role ({'; '.join(others)})" if others else "no other warp role runs")
                    + ": the kernel deadlocks"
                )
            self.turn = nxt
            self.cv.notify_all()
            self._wait_turn(me)
            self.stamp[me] = None

    def _wait_turn(self, me: int) -> None:
        while self.turn != me and self.error is None:
            self.cv.wait()
        if self.error is not None:
            raise _Abort()

    def run(self, st: "State", sides: list, scoped: tuple[int, ...] = ()) -> None:
        """Run ``sides`` ((mask, body), ...) as tasks, the first first; re-raise a task's error.
        The tasks in ``scoped`` keep their values to themselves (several tasks of one body)."""
        views = [_RoleView(st, mask, self, i, i in scoped) for i, (mask, _) in enumerate(sides)]

        def task(i):
            try:
                with self.cv:
                    self._wait_turn(i)
                run_block(sides[i][1], views[i])
            except _Abort:
                return
            except FuncReturn:
                err = ExecutorError("func.return inside one warp role's scf.if side")
                with self.cv:
                    self.error = self.error or err
                    self.cv.notify_all()
                return
            except BaseException as e:  # noqa: BLE001 -- handed to the caller's thread
                with self.cv:
                    self.error = self.error or e
                    self.cv.notify_all()
                return
            with self.cv:
                self.done[i] = True
                nxt = self._next(i)
                if nxt is not None:
                    self.turn = nxt
                self.cv.notify_all()

        threads = [threading.Thread(target=task, args=(i,), daemon=True) for i in range(len(sides))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error


def wait_or_fail(st, why: str, alone: str) -> None:
    """The active lanes cannot go on (``why``): in a warp role, let the others run until something
    arrived (the caller tests again); outside one nothing else runs, so the kernel deadlocks
    (``alone`` says why none can arrive)."""
    roles = getattr(st, "roles", None)
    if roles is None:
        raise ExecutorError(f"{why} ({alone})")
    roles.blocked(st, why)


def role_progress(st) -> None:
    """Something happened that a waiting warp role may be waiting for."""
    roles = getattr(st, "roles", None)
    if roles is not None:
        roles.progress += 1
