"""The copy family, as the registry sees it (``kernels/family.py``): a direct family, its kernel
built without the transform script, for the dispatches IREE forms to copy a slice it cannot copy
by DMA (``slow_memcpy``)."""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.copy import CopyDispatch
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import str_attr
from mmaflow.compiler.kernels.copy.kernel import CopyPlan, claims, match_copy, plan_copy, rewrite_dispatch
from mmaflow.compiler.target.targets import read_target

NAME = "build"  # the pipeline stage that lowers it


def expectations(plan: CopyPlan) -> attrs.Expectations:
    """What verify demands of the lowered kernel: global loads of the plan's width."""
    return attrs.Expectations(global_load_bits=8 * plan.width, k_tiles=0, mma_per_k_tile=0)


class CopyFamily:
    name = "copy"
    title = "the copy kernel"

    def claims(self, func: ir.Operation) -> bool:
        """Whether ``func`` is a copy: one dispatch-tensor load stored by one store, nothing computed."""
        return claims(func)

    def plan(self, record: CopyDispatch, target) -> CopyPlan:
        return plan_copy(record, target)

    def placements(self, func: ir.Operation) -> CopyDispatch:
        """The dispatch's record (``UnsupportedError``: a copy the kernel does not take)."""
        return match_copy(func).record

    def lower(self, func: ir.Operation) -> tuple[ir.Operation, CopyPlan]:
        """The kernel in place of the tagged copy dispatch ``func``; returns it and the plan."""
        target, record = read_target(func), attrs.read_direct(func, "copy")
        plan = rewrite_dispatch(func, target.name)
        if plan.record != record:
            raise CodegenError(f"@{str_attr(func, 'sym_name')}: the copy changed between select and build", stage=NAME)
        attrs.write_expect(func, expectations(plan))
        return func, plan


FAMILY = CopyFamily()
