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

    def fit(self, target, problem: Contraction, overrides: dict, measured: tuple):
        """A persistent grid's tiles per workgroup (``persistent``) were measured at another tile
        count (a batch of another size in the same class): keep the measured workgroup count, so
        that the grid stays as many waves. W, from the fewest tiles a workgroup that keep within
        that count, must divide the tiles and leave at least 3/4 of it; else one tile a workgroup."""
        if "persistent" not in overrides or not overrides["persistent"]:
            return None
        base = {key: v for key, v in overrides.items() if key != "persistent"}
        chosen = self.configure(target, problem, base, [])  # (the tiles; validated once fitted)
        if not chosen:
            return None
        cfg, measured_w = chosen[0], int(overrides["persistent"])
        batch, m, n, k = measured
        at = output_tiles(cfg, Contraction(m, n, k, batch, problem.a_type, problem.b_type, problem.c_type))
        tiles = output_tiles(cfg, problem)
        if tiles == at:
            return None
        workgroups = max(1, at // measured_w)
        fitted = dict(base)
        w = max(2, -(-tiles // workgroups))
        while tiles % w and tiles // w >= 3 * workgroups / 4:
            w += 1
        if tiles <= workgroups:
            grid = f"one tile per workgroup ({tiles} workgroups)"
        elif not tiles % w and tiles // w >= 3 * workgroups / 4:
            fitted["persistent"] = w
            grid = f"{tiles // w} workgroups of {w} tiles"
        else:
            grid = (
                f"one tile per workgroup: no whole number of the {tiles} tiles a workgroup keeps {workgroups} "
                "workgroups or 3/4 of them"
            )
        return fitted, (
            f"persistent={measured_w} measured at {at} tiles ({workgroups} workgroups) fitted to {tiles} tiles: {grid}"
        )


FAMILY = WgmmaFamily()
