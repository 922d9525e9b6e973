"""Stage `barriers`: place workgroup barriers from the LDS accesses of distributed code.

A barrier is needed where one thread may read LDS another thread wrote (read after write) or
overwrite LDS another thread may still read (write after read). The stage walks the function in
program order with two flags, "LDS written since the last barrier" and "LDS read since the last
barrier", and inserts a barrier before an access that conflicts with a pending one. Loops are
walked twice, the second time entering with what the loop body leaves pending, so the
write-after-read hazard across iterations (next K tile's stores vs this tile's loads) is seen.
The K loop of a matmul gets two barriers per iteration: before the stores, and between stores
and loads.

An LDS ring (``stages`` > 1) is ordered by `distribute` itself: its ring slots are indexed at
run time, beyond this analysis, and it needs one barrier per K tile where this analysis would
place two. Its writes (NVIDIA's async copies, AMD's LDS stores), slot reads and barrier carry
``mmaflow.ring``; this stage skips the first two (and lets the barrier count as one).

AMD: ``amdgpu.lds_barrier`` (an LDS-only fence plus s_barrier; ``gpu.barrier`` would also
invalidate the vector L0 cache). NVIDIA: ``gpu.barrier`` (bar.sync).
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir

from mmaflow.compiler.core.attrs import RING
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import location_of
from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.target.targets import read_target

NAME = "barriers"
BARRIER_OPS = ("amdgpu.lds_barrier", "gpu.barrier")
_READS = ("vector.load", "memref.load", "nvgpu.ldmatrix")
_WRITES = ("vector.store", "memref.store")
_ASYNC_COPY = "nvgpu.device_async_copy"


@dataclass(frozen=True)
class Pending:
    writes: bool = False
    reads: bool = False

    def merge(self, other: "Pending") -> "Pending":
        return Pending(self.writes or other.writes, self.reads or other.reads)


def _lds_access(op: ir.Operation) -> str | None:
    if RING in op.attributes:  # ordered by the ring's own barrier (distribute)
        return None
    if op.name in _READS or op.name == _ASYNC_COPY:  # (an async copy's first operand is its LDS destination)
        mem = op.operands[0]
    elif op.name in _WRITES:
        mem = op.operands[1]
    else:
        return None
    space = ir.MemRefType(mem.type).memory_space
    if space is None or "workgroup" not in str(space):
        return None
    return "read" if op.name in _READS else "write"  # an async copy counts as a write at its issue


class Placer:
    def __init__(self, vendor: str):
        self.vendor = vendor
        self.inserted = 0

    def _barrier_before(self, op: ir.Operation) -> None:
        prev = _previous(op)
        if prev is not None and prev.name in BARRIER_OPS:
            return
        Emitter(ir.InsertionPoint(op), op.location, self.vendor).named("barrier").barrier()
        self.inserted += 1

    def block(self, block, state: Pending) -> Pending:
        for op in [o.operation for o in block.operations]:
            state = self.op(op, state)
        return state

    def op(self, op: ir.Operation, state: Pending) -> Pending:
        if op.name in BARRIER_OPS:
            return Pending()
        kind = _lds_access(op)
        if kind == "write":
            if state.reads:
                self._barrier_before(op)
                state = Pending()
            return Pending(True, state.reads)
        if kind == "read":
            if state.writes:
                self._barrier_before(op)
                state = Pending()
            return Pending(state.writes, True)
        if op.name == "scf.for":
            body = op.regions[0].blocks[0]
            first_exit = self.block(body, state)
            second_exit = self.block(body, state.merge(first_exit))
            return state.merge(second_exit)  # the loop may run zero times
        if op.name == "scf.if":
            # Lanes may disagree on the condition: a barrier inside would hang or be skipped, so
            # the barrier a branch needs goes before the scf.if, and a branch that needs one of
            # its own is refused.
            kinds = {_lds_access(o) for o in _nested(op)} - {None}
            if ("write" in kinds and state.reads) or ("read" in kinds and state.writes):
                self._barrier_before(op)
                state = Pending()
            merged = state
            for r in op.regions:
                if len(r.blocks):
                    inner = Placer(self.vendor)
                    merged = merged.merge(inner.block(r.blocks[0], state))
                    if inner.inserted:
                        raise CodegenError(
                            "an LDS hazard inside divergent control flow (scf.if) needs a barrier "
                            "that cannot be placed there",
                            stage=NAME,
                            location=location_of(op),
                        )
            return merged
        if RING in op.attributes and not any(_lds_access(o) for o in _nested(op)):
            return state  # the TMA ring's mbarrier wait loop (scf.while): no LDS access of its own
        if len(op.regions):
            raise CodegenError(f"cannot place barriers across {op.name}", stage=NAME, location=location_of(op))
        return state


def _nested(op: ir.Operation):
    for r in op.regions:
        for blk in r.blocks:
            for o in blk.operations:
                yield o.operation
                yield from _nested(o.operation)


def _previous(op: ir.Operation) -> ir.Operation | None:
    block_ops = [o.operation for o in op.block.operations]
    i = block_ops.index(op)
    return block_ops[i - 1] if i > 0 else None


def place_barriers(func: ir.Operation) -> int:
    """Insert the barriers ``func`` needs; return how many were inserted."""
    vendor = read_target(func).vendor
    placer = Placer(vendor)
    with func.context, ir.Location.unknown():
        placer.block(func.regions[0].blocks[0], Pending())
    return placer.inserted
