"""The Hopper warpgroup-MMA matmul family, as the registry sees it (``kernels/family.py``)."""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.common.contraction import finalize, output_extents, prepare
from mmaflow.compiler.kernels.wgmma.heuristic import (
    tuning_candidates,
    warpgroup_default,
    warpgroup_only,
    warpgroup_refusal,
)
from mmaflow.compiler.kernels.wgmma.plan import output_tiles, plan_bytes, plan_wgmma, warpgroup_config
from mmaflow.compiler.kernels.wgmma.rewrite import distribute_warpgroup
from mmaflow.compiler.kernels.wgmma.tma import TMA_TARGET_PTX
from mmaflow.compiler.target.intrinsics import WarpgroupIntrinsic
from mmaflow.compiler.target.targets import read_target


class WgmmaFamily:
    name = "wgmma"
    title = "the warpgroup-MMA kernel"

    def sole(self, target, problem: Contraction) -> bool:
        return warpgroup_only(target, problem)  # fp8 on sm_90a: no mma.sync instruction computes it

    def refusal(self, target, problem: Contraction) -> str | None:
        return warpgroup_refusal(target, problem)

    def require(self, target, problem: Contraction) -> None:
        return None  # (it takes only what ``configure`` accepts; the matmul family names the instructions)

    def owns(self, intrinsic, cfg: KernelConfig | None = None) -> bool:
        return isinstance(intrinsic, WarpgroupIntrinsic)

    def configure(self, target, problem: Contraction, overrides: dict, why: list):
        """Asked for by ``--config intrinsic=WGMMA_...``: its own config; else the heuristic's choice
        (None where it declines, the reason in ``why``)."""
        name = overrides.get("intrinsic")
        if name is not None:
            intr = target.intrinsic(name)
            return (warpgroup_config(target, problem, intr, overrides), intr) if self.owns(intr) else None
        return warpgroup_default(target, problem, overrides, why)

    def explain(self, target, problem: Contraction, overrides: dict, why: list) -> bool:
        name = overrides.get("intrinsic")
        if name:
            if not self.owns(target.intrinsic(name)):
                return False
            why.append(f"{name}: as asked; the warpgroup-MMA kernel's fixed shape (kernels/wgmma/plan.py)")
            return True
        return bool(warpgroup_default(target, problem, overrides, why))

    def distribute(self, module: ir.Module, func: ir.Operation):
        target, cfg, problem = read_target(func), attrs.read_config(func), attrs.read_problem(func)
        with module.context, ir.Location.unknown():
            intr = target.intrinsic(cfg.intrinsic)
            m, mem_extents = prepare(func, intr, cfg, target, problem)
            plan = plan_wgmma(problem, cfg, target, intr, output_extents(m, mem_extents))
            distribute_warpgroup(func, m, plan, mem_extents)
            finalize(module, func, plan)
        return plan

    def shared_bytes(self, cfg: KernelConfig, intrinsic, problem: Contraction, target) -> int:
        return plan_bytes(cfg, intrinsic.a_type)

    def grid(self, cfg: KernelConfig, problem: Contraction):
        if cfg.persistent:  # the persistent grid: tiles / persistent workgroups, in x
            return output_tiles(cfg, problem) // cfg.persistent, 1, 1
        if cfg.split_k > 1:  # a cluster of split_k workgroups per tile, along x (static sizes only)
            return -(-problem.n // cfg.tile_n) * cfg.split_k, -(-problem.m // cfg.tile_m), problem.batch or 1
        return None

    def min_ptx_version(self, cfg: KernelConfig) -> int:
        return TMA_TARGET_PTX if cfg.copy is not None else 0  # tensormap.replace, fence.proxy.tensormap

    def candidates(self, target, problem: Contraction) -> list[dict]:
        return tuning_candidates(target, problem)

    def fit(self, target, problem: Contraction, cfg: KernelConfig, overrides: dict, measured: tuple):
        """A persistent grid's tiles per workgroup were measured at another tile count (a batch of
        another size in the same class): keep the measured workgroup count, so that the grid stays
        as many waves (fewer tiles a workgroup, one where they would be fewer than two)."""
        if not cfg.persistent:
            return overrides, None
        batch, m, n, k = measured
        at = output_tiles(cfg, Contraction(m, n, k, batch, problem.a_type, problem.b_type, problem.c_type))
        tiles = output_tiles(cfg, problem)
        if tiles == at:
            return overrides, None
        workgroups = max(1, at // cfg.persistent)
        w = -(-tiles // workgroups)
        while tiles % w:
            w += 1
        fitted = {key: v for key, v in overrides.items() if key != "persistent"}
        if w >= 2:
            fitted["persistent"] = w
        grid = f"{tiles // w} workgroups of {w} tiles" if w >= 2 else f"one tile per workgroup ({tiles})"
        return fitted, (
            f"persistent={cfg.persistent} measured at {at} tiles ({workgroups} workgroups) fitted to {tiles} "
            f"tiles: {grid}"
        )


FAMILY = WgmmaFamily()
