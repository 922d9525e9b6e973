"""The mma.sync / WMMA / MFMA matmul family, as the registry sees it (``kernels/family.py``)."""

from __future__ import annotations

from dataclasses import fields, replace

from iree.compiler import ir

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.common.contraction import distribute_matmul
from mmaflow.compiler.kernels.common.tiles import lds_bytes, require_intrinsic, validate
from mmaflow.compiler.kernels.matmul.heuristic import default_config, tuning_candidates
from mmaflow.compiler.target.intrinsics import WarpgroupIntrinsic

_KEYS = {f.name for f in fields(KernelConfig)}


class MatmulFamily:
    name = "matmul"
    title = "the mma.sync / WMMA / MFMA matmul kernel"

    def sole(self, target, problem: Contraction) -> bool:
        return False  # (every type pair it computes, it computes beside any other family)

    def refusal(self, target, problem: Contraction) -> str | None:
        return None

    def require(self, target, problem: Contraction) -> None:
        require_intrinsic(target, problem)

    def owns(self, intrinsic, cfg: KernelConfig | None = None) -> bool:
        return not isinstance(intrinsic, WarpgroupIntrinsic) and (cfg is None or cfg.waves_k == 1)

    def configure(self, target, problem: Contraction, overrides: dict, why: list):
        """The heuristic's config with the overrides applied, validated (a complete config as it is)."""
        wave = overrides.get("wave_size")
        intrinsic = overrides.get("intrinsic")
        if intrinsic is not None:
            wave = wave or target.intrinsic(intrinsic).wave_size
        if _KEYS <= set(overrides):  # a complete config: the heuristic has nothing to add
            cfg = KernelConfig(**overrides)
        else:
            cfg = replace(default_config(target, problem, wave, intrinsic), **overrides)
        return cfg, validate(cfg, target, problem)

    def explain(self, target, problem: Contraction, overrides: dict, why: list) -> bool:
        if not _KEYS <= set(overrides):
            intr = overrides.get("intrinsic")
            wave = overrides.get("wave_size") or (target.intrinsic(intr).wave_size if intr else None)
            default_config(target, problem, wave, intr, why)
        return True

    def distribute(self, module: ir.Module, func: ir.Operation):
        return distribute_matmul(module, func)

    def shared_bytes(self, cfg: KernelConfig, intrinsic, problem: Contraction, target) -> int:
        return lds_bytes(cfg, problem, target)

    def grid(self, cfg: KernelConfig, problem: Contraction):
        return None  # one workgroup per output tile

    def min_ptx_version(self, cfg: KernelConfig) -> int:
        return 0

    def candidates(self, target, problem: Contraction) -> list[dict]:
        return tuning_candidates(target, problem)

    def fit(self, target, problem: Contraction, overrides: dict, measured: tuple):
        return None  # (its configs hold no count of the problem's tiles)


FAMILY = MatmulFamily()
