"""Stage `hand-back`: make the distributed function something IREE lowers without re-codegen.

- ``translation_info = #iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline
  workgroup_size = [T, 1, 1] subgroup_size = W>``: IREE skips its codegen pipelines and only lowers
  to ROCDL/NVVM -> HSACO/PTX. Without workgroup_size IREE compiles but silently drops barriers.
- ``iree_codegen.dispatch_config @<export>`` yielding the grid (N/tile_n, M/tile_m, batch), next to
  the function: how IREE learns the workgroup count of a no_pipeline dispatch. Its block takes
  the device and the dispatch's workload: dynamic sizes are ceil-divided by their tiles there.
- NVIDIA: ``nvvm.minctasm = 1`` (``.minnctapersm 1``): ptxas may use up to 255 registers
  instead of aiming at 2 blocks per SM by itself (ptxas 12.9 for sm_90a spilled a 128x128-tile
  kernel at 128 registers).
- targets IREE 3.13 cannot describe (sm_90a) get the variant's target attribute rewritten.
"""

from __future__ import annotations

import math
from dataclasses import replace

from iree.compiler import ir
from iree.compiler.dialects import arith, iree_codegen

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import ops_named, parent_named, str_attr
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.target.targets import Target, Vendor, read_target

NAME = "hand-back"


def retarget_variant(variant: ir.Operation, target: Target) -> None:
    """Give a variant the target attribute our target needs (no-op for targets IREE knows)."""
    if target.variant_target is None:
        return
    with variant.context:
        variant.attributes["target"] = ir.Attribute.parse(target.variant_target)


def _grid(block: ir.Block, func: ir.Operation, workload_args: int) -> None:
    """The body of ``iree_codegen.dispatch_config``: the grid from constants and, for dynamic
    sizes, from the dispatch's workload (block arguments after the device), ceil-divided by the
    tile."""
    cfg, problem = attrs.read_config(func), attrs.read_problem(func)
    workload = list(block.arguments)[1:]
    out = []
    with func.context, func.location, ir.InsertionPoint(block):
        index = ir.IndexType.get()
        own = registry.grid(read_target(func), cfg, problem)
        if own is not None:  # the family's own grid (the warpgroup kernel's persistent one)
            iree_codegen.YieldOp([arith.ConstantOp(index, v).result for v in own])
            return
        for dim, tile in (("n", cfg.tile_n), ("m", cfg.tile_m), ("batch", 1)):
            dyn = problem.dynamic_dim(dim)
            if dyn is None:
                out.append(arith.ConstantOp(index, math.ceil(getattr(problem, dim) / tile)).result)
                continue
            if dyn.ordinal >= workload_args:
                raise CodegenError(f"{dim} is workload value {dyn.ordinal}, the export has {workload_args}", stage=NAME)
            out.append(arith.CeilDivUIOp(workload[dyn.ordinal], arith.ConstantOp(index, tile).result).result)
        iree_codegen.YieldOp(out)


def _target_of(func: ir.Operation) -> Target:
    """The target the function's kernels need: the PTX version its kernels' families need (its
    own config's or a version's; the warpgroup kernel's TMA ring: 8.3 for tensormap.replace)."""
    target = read_target(func)
    need = max(
        registry.min_ptx_version(target, c)
        for c in [attrs.read_config(func)] + [v.config for v in attrs.read_versions(func)]
    )
    if need:
        target = replace(target, ptx_version=max(target.ptx_version, need))
    return target


def hand_back(func: ir.Operation) -> None:
    cfg = attrs.read_config(func)
    install(
        func,
        _target_of(func),
        workgroup_size=cfg.workgroup_size,
        subgroup_size=cfg.wave_size,
        grid=lambda block, workload_args: _grid(block, func, workload_args),
    )


def retarget(func: ir.Operation) -> None:
    """After ``version.merge``: the variant's target for the joined kernels (a fast version with a
    TMA ring raises the PTX version of the whole dispatch)."""
    retarget_variant(parent_named(func, "hal.executable.variant"), _target_of(func))


def constant_grid(grid: tuple[int, int, int]):
    """A ``grid`` argument for ``install``: the dispatch_config yields these constants."""

    def fill(block: ir.Block, workload_args: int) -> None:
        with ir.InsertionPoint(block):
            index = ir.IndexType.get()
            iree_codegen.YieldOp([arith.ConstantOp(index, g).result for g in grid])

    return fill


def install(func: ir.Operation, target: Target, *, workgroup_size: int, subgroup_size: int, grid) -> None:
    """What IREE needs to lower ``func`` as it is: translation_info, the dispatch_config next to
    it (``grid(block, workload_args)`` fills its body), NVIDIA's minctasm, the variant's target.
    ``hand_back`` calls it for the distributed matmul; a hand-built kernel (the flash-attention
    kernel, ``compiler/kernels/attention/nvidia.py``) with ``constant_grid``."""
    with func.context, func.location:
        func.attributes["translation_info"] = iree_codegen.TranslationInfoAttr.get(
            iree_codegen.NoPipelineAttr.get(), workgroup_size=[workgroup_size, 1, 1], subgroup_size=subgroup_size
        )
    inner = func.parent
    name = str_attr(func, "sym_name")
    for old in ops_named(inner, "iree_codegen.dispatch_config"):
        old.erase()
    variant = parent_named(func, "hal.executable.variant")
    exports = [e for e in ops_named(variant, "hal.executable.export") if str_attr(e, "sym_name") == name]
    if len(exports) != 1:
        raise CodegenError(f"expected one hal.executable.export @{name}, found {len(exports)}", stage=NAME)
    count_args = list(exports[0].regions[0].blocks[0].arguments)  # the device, then the workload
    with func.context, func.location, ir.InsertionPoint(inner.regions[0].blocks[0]):
        config = iree_codegen.DispatchConfigOp(name)
    with func.context, func.location:
        block = config.regions[0].blocks.append(*[a.type for a in count_args])
        grid(block, len(count_args) - 1)
    if target.vendor is Vendor.NVIDIA:
        with func.context:
            func.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)
    retarget_variant(variant, target)
