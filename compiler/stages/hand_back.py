"""Stage `hand-back`: make the distributed function something IREE lowers without re-codegen.

- ``translation_info = #iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline
  workgroup_size = [T, 1, 1] subgroup_size = W>``: IREE skips its codegen pipelines and only lowers
  to ROCDL/NVVM -> HSACO/PTX. Without workgroup_size IREE compiles but silently drops barriers.
- ``iree_codegen.dispatch_config @<export>`` yielding the grid (N/tile_n, M/tile_m, batch), next to
  the function: how IREE learns the workgroup count of a no_pipeline dispatch. Its block takes
  the device and the dispatch's workload: dynamic sizes are ceil-divided by their tiles there.
- targets IREE 3.13 cannot describe (sm_90a) get the variant's target attribute rewritten.
"""

from __future__ import annotations

import math

from iree.compiler import ir

from ..errors import CodegenError
from ..mlir import ops_named, parent_named, parse_module, str_attr
from ..targets import Target
from .configure import read_config, read_problem, read_target

NAME = "hand-back"

# IREE 3.13's description of sm_80 with the architecture and PTX version of Hopper: the variant
# IREE makes for --iree-cuda-target=sm_90a has no target_info at all.
SM90A_TARGET = (
    '#hal.executable.target<"cuda", "cuda-nvptx-fb", {iree_codegen.target_info = #iree_gpu.target<'
    'arch = "sm_90a", features = "+ptx80", wgp = <compute = fp64|fp32|fp16|int64|int32|int16|int8, '
    'storage = b64|b32|b16|b8, subgroup = shuffle|arithmetic, dot = dp4xi8toi32, '
    'mma = [<NV_MMA_SYNC_F32_16x8x16_F16>, <NV_MMA_SYNC_F16_16x8x16_F16>, <NV_MMA_SYNC_F32_16x8x16_BF16>], '
    'subgroup_size_choices = [32], max_workgroup_sizes = [1024, 1024, 1024], '
    'max_thread_count_per_workgroup = 1024, max_workgroup_memory_bytes = 232448, '
    'max_workgroup_counts = [2147483647, 65535, 65535]>>}>')


def retarget_variant(variant: ir.Operation, target: Target) -> None:
    """Give a variant the target attribute our target needs (no-op for targets IREE knows)."""
    if not target.retarget_variant:
        return
    if target.name != "sm_90a":
        raise CodegenError(f"no variant rewrite is defined for {target.name}", stage=NAME)
    with variant.context:
        variant.attributes["target"] = ir.Attribute.parse(SM90A_TARGET)


def grid(func: ir.Operation) -> tuple[int, int, int]:
    """The static grid (N/tile_n, M/tile_m, batch); raises for a dynamic problem."""
    cfg, problem = read_config(func), read_problem(func)
    if problem.is_dynamic:
        raise CodegenError("a dynamic problem has no static grid", stage=NAME)
    return (math.ceil(problem.n / cfg.tile_n), math.ceil(problem.m / cfg.tile_m), problem.batch)


def grid_region(func: ir.Operation, workload_args: int) -> str:
    """The body of ``iree_codegen.dispatch_config``: the grid from constants and, for dynamic
    sizes, from the dispatch's workload (``%w<ordinal>``, ceil-divided by the tile)."""
    cfg, problem = read_config(func), read_problem(func)
    args = ", ".join(["%device: !hal.device"] + [f"%w{i}: index" for i in range(workload_args)])
    lines = [f"^bb0({args}):"]
    for axis, dim, tile in (("x", "n", cfg.tile_n), ("y", "m", cfg.tile_m), ("z", "batch", 1)):
        dyn = problem.dynamic_dim(dim)
        if dyn is None:
            lines.append(f"  %{axis} = arith.constant {math.ceil(getattr(problem, dim) / tile)} : index")
            continue
        if dyn.ordinal >= workload_args:
            raise CodegenError(f"{dim} is workload value {dyn.ordinal}, the export has {workload_args}", stage=NAME)
        lines += [f"  %{axis}_tile = arith.constant {tile} : index",
                  f"  %{axis} = arith.ceildivui %w{dyn.ordinal}, %{axis}_tile : index"]
    lines.append("  iree_codegen.yield %x, %y, %z : index, index, index")
    return "\n".join(lines)


def hand_back(func: ir.Operation) -> None:
    cfg, target = read_config(func), read_target(func)
    ctx = func.context
    with ctx:
        func.attributes["translation_info"] = ir.Attribute.parse(
            f"#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline "
            f"workgroup_size = [{cfg.workgroup_size}, 1, 1] subgroup_size = {cfg.wave_size}>")
    inner = func.parent
    name = str_attr(func, "sym_name")
    for old in ops_named(inner, "iree_codegen.dispatch_config"):
        old.erase()
    variant = parent_named(func, "hal.executable.variant")
    exports = [e for e in ops_named(variant, "hal.executable.export") if str_attr(e, "sym_name") == name]
    if len(exports) != 1:
        raise CodegenError(f"expected one hal.executable.export @{name}, found {len(exports)}", stage=NAME)
    workload_args = len(exports[0].regions[0].blocks[0].arguments) - 1  # after the device
    snippet = parse_module(f"iree_codegen.dispatch_config @{name} {{\n{grid_region(func, workload_args)}\n}}",
                           ctx, source="<dispatch_config>")
    op = [o.operation for o in snippet.body.operations][0]
    ir.InsertionPoint(inner.regions[0].blocks[0]).insert(op.detach_from_parent())
    retarget_variant(variant, target)
