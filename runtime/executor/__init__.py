"""The CPU lane executor: run one distributed dispatch function with numpy, every lane at once.

All lanes of a batch of workgroups execute in lockstep; each SSA value is a numpy array whose
leading axis is the lane: size L (one row per lane) or size 1 (the same for every lane --
constants, loop counters -- broadcast by numpy). Matrix instructions go through the independent ISA model
(``mmaflow.runtime.isa``), never through the compiler's layout model.

Checked while running (an error names the op and its location):
- unsupported ops; LDS and non-buffer global accesses out of bounds; matrix ops or barriers
  under divergent control flow; non-uniform loop bounds;
- races: an LDS read of data another lane wrote, or an LDS write over data another lane read or
  wrote, with no barrier in between (collected in ``Stats.races``); across the CTAs of a cluster
  (distributed shared memory), the same with no barrier.cluster in between (an error: tma.py,
  "Clusters").

Measured: LDS bank conflicts (per access, split into <= 16-byte pieces; a piece's lanes are
served in phases of (banks * 4 / bytes) lanes; a phase costs as many cycles as the most distinct
dwords any bank receives; allocations are packed in declaration order, 16-byte aligned), and the
width of every global access.

Thread block clusters (a function's ``nvvm.cluster_dim``): a batch holds whole clusters, a sample
grows to them (``whole_clusters``); ``State.peers`` / ``row_rank`` relate the rows of a cluster
(the cluster ops are tma.py's, "Clusters").

Bindings are byte buffers; a subspan addresses its tensor as IREE's lowering does (the memref
layout's offset, or the byte-offset operand when that is dynamic), and the executor records which
bytes of each binding the kernel stored. ``amdgpu.raw_buffer_load/store`` follow the buffer
bounds check: elements whose linear offset is outside the subspan's memref read 0 / are not
written.

The package: ``core`` (the machine: ``State``, ``MemRef``, ``Stats``, ``run_block``, the warp
``Roles``), the handler modules that build on it -- ``ops`` (the generic ops), ``wgmma``
(Hopper warpgroup MMA) and ``tma`` (Hopper TMA, mbarriers, clusters) -- each with its table of
op handlers and its end-of-batch check, and this module, which assembles the one table
(``HANDLERS``) and runs kernels with it (``Kernel``). Imports go one way: core <- ops, wgmma,
tma <- here (``tma`` and ``ops`` use ``wgmma``'s ordering checks, ``tma`` ``ops``' race checks).
"""

from __future__ import annotations

import numpy as np
from iree.compiler import ir

from mmaflow.runtime.executor import ops, tma, wgmma
from mmaflow.runtime.executor.core import (
    LDS_BANKS,
    ExecutorError,
    FuncReturn,
    MemRef,
    Roles,
    State,
    Stats,
    cluster_coordinates,
    cluster_shape,
    lds_banks,
    np_dtype,
    op_loc,
    role_progress,
    run_block,
    whole_clusters,
)

__all__ = [
    "HANDLERS",
    "END_CHECKS",
    "Kernel",
    "ExecutorError",
    "LDS_BANKS",
    "MemRef",
    "Roles",
    "State",
    "Stats",
    "cluster_coordinates",
    "cluster_shape",
    "lds_banks",
    "np_dtype",
    "role_progress",
    "whole_clusters",
]


def _assemble(*tables: dict) -> dict:
    """One op table from the handler modules' tables, in order; an op that two of them claim is
    an error here (no module silently replaces another's handler)."""
    out: dict = {}
    for table in tables:
        both = sorted(table.keys() & out.keys())
        if both:
            raise ValueError(f"the lane executor's handler tables both claim {', '.join(both)}")
        out.update(table)
    return out


# op name -> handler(kernel, op) -> run(state): the generic ops, Hopper warpgroup MMA (nvvm.wgmma.*,
# nvvm.fence.proxy, the accumulator's llvm.* ops), Hopper TMA (tensor maps, mbarriers,
# cp.async.bulk.tensor, clusters; global addresses).
HANDLERS = _assemble(ops.HANDLERS, wgmma.HANDLERS, tma.HANDLERS)

# What must hold when a batch of workgroups ends (each raises ExecutorError otherwise), in this order.
END_CHECKS = (ops.end_check, wgmma.end_check, tma.end_check)


def batch_ticks(progress, first: int, size: int, total: int):
    """``State.tick`` for a batch of ``size`` workgroups after ``first``: ``progress`` with the
    workgroups done counted in fractions, by the share of an outermost loop's iterations done
    (the K loop), never going back: a shorter loop after it (a pipeline's drain) does not count."""
    seen = [0, 0.0]  # the most iterations of an outermost loop so far, the share reported

    def tick(share: float, iterations: int) -> None:
        if iterations < seen[0]:
            return
        seen[0] = iterations
        if share > seen[1]:
            seen[1] = share
            progress(first + size * share, total)

    return tick


class Kernel:
    """A dispatch function compiled to Python closures, ready to run over its grid."""

    def __init__(
        self,
        func: ir.Operation,
        *,
        arch: str,
        grid: tuple[int, int, int],
        workgroup_size: int,
        wave_size: int,
        constants: list[int] | None = None,
    ):
        self.func, self.arch, self.grid = func, arch, grid
        self.constants = list(constants or [])  # push constants (i32), for dynamic sizes
        self.workgroup_size, self.wave_size = workgroup_size, wave_size
        self.cluster = cluster_shape(func)  # thread block clusters (tma.py, "Clusters")
        self.banks = lds_banks(arch)
        self.ids: dict = {}
        self.stats = Stats()
        self.op_names: dict = {}  # op -> op_loc(op), for the per-op LDS counters
        self.body = self._compile_block(func.regions[0].blocks[0])

    # ---- compilation ------------------------------------------------------------------------
    def _id(self, value) -> int:
        if value not in self.ids:
            self.ids[value] = len(self.ids)
        return self.ids[value]

    def _compile_block(self, block) -> list:
        return [self._compile(o.operation) for o in block.operations]

    def _compile(self, op: ir.Operation):
        name = op.name
        handler = HANDLERS.get(name)
        if handler is None:
            raise ExecutorError(f"{op_loc(op)}: the lane executor does not support {name}")
        return handler(self, op)

    def _ins(self, op):
        return [self._id(v) for v in op.operands]

    def _outs(self, op):
        return [self._id(v) for v in op.results]

    # ---- running ----------------------------------------------------------------------------
    def run(
        self, bindings: dict[int, np.ndarray], *, max_lanes: int = 1 << 14, workgroups=None, progress=None
    ) -> Stats:
        """Run every workgroup of the grid, or only the linear ids in ``workgroups`` (a sample:
        each workgroup computes its own output tile). ``progress(done, total)`` is called after
        each batch, and within one after each iteration of its outermost loop (the K loop; ``done``
        then counts the batch's workgroups in fractions, ``batch_ticks``). With thread block
        clusters (``nvvm.cluster_dim``) a sample grows to the whole
        clusters its ids belong to (``whole_clusters``; ``self.ran`` lists what ran), and a batch
        holds whole clusters."""
        self.bindings = bindings
        self.written: dict[int, np.ndarray] = {}  # binding -> which of its bytes the kernel stored
        total = self.grid[0] * self.grid[1] * self.grid[2]
        n = int(np.prod(self.cluster))
        if any(g % c for g, c in zip(self.grid, self.cluster)):
            raise ExecutorError(
                f"the grid {tuple(self.grid)} does not divide by the cluster shape {self.cluster} (nvvm.cluster_dim)"
            )
        ids = np.arange(total, dtype=np.int64) if workgroups is None else np.asarray(sorted(set(workgroups)), np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= total):
            raise ExecutorError(f"workgroup ids outside the grid of {total}")
        if n > 1:
            ids = np.asarray(whole_clusters(ids, self.grid, self.cluster), np.int64)
        self.ran = ids.tolist()
        per = max(1, max_lanes // self.workgroup_size)
        per = max(n, per // n * n)  # whole clusters per batch
        for first in range(0, len(ids), per):
            st = State(self, ids[first : first + per])
            if progress is not None:
                st.tick = batch_ticks(progress, first, len(st.wg_local) // self.workgroup_size, len(ids))
            try:
                run_block(self.body, st)
            except FuncReturn:
                pass
            for check in END_CHECKS:
                check(st)
            if progress is not None:
                progress(min(first + per, len(ids)), len(ids))
        return self.stats
