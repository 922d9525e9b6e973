"""The decode family, as the registry sees it (``kernels/family.py``): M that fits two instruction row
tiles, B streamed once from global memory into registers, K split across the workgroup's waves
(docs/kernels/decode.md)."""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.core.quantized import WeightOnlyMatmul
from mmaflow.compiler.kernels.common.contraction import finalize, operand_facts, output_extents, prepare
from mmaflow.compiler.kernels.common.plan import plan_kernel
from mmaflow.compiler.kernels.decode.heuristic import decode_config, lds_bytes, reach, tuning_candidates
from mmaflow.compiler.kernels.decode.plan import plan_decode
from mmaflow.compiler.kernels.decode.rewrite import DecodeRewriter
from mmaflow.compiler.kernels.decode.weight_only import (
    claims,
    lone_dequantization,
    lower_weight_only,
    match_weight_only,
    plan_weight_only,
)
from mmaflow.compiler.target.seeds import WEIGHT_ONLY_AMD, WEIGHT_ONLY_NVIDIA
from mmaflow.compiler.target.targets import Vendor, read_target


class DecodeFamily:
    name = "decode"
    title = "the decode kernel"

    def sole(self, target, problem: Contraction) -> bool:
        return False  # (the tiled kernel computes every type pair it does)

    def refusal(self, target, problem: Contraction) -> str | None:
        return None

    def require(self, target, problem: Contraction) -> None:
        return None  # (the tiled kernel names the instructions)

    def owns(self, intrinsic, cfg: KernelConfig | None = None) -> bool:
        return cfg is not None and cfg.waves_k > 1

    def configure(self, target, problem: Contraction, overrides: dict, why: list):
        return decode_config(target, problem, overrides, why)

    def explain(self, target, problem: Contraction, overrides: dict, why: list) -> bool:
        return decode_config(target, problem, overrides, why) is not None

    def distribute(self, module: ir.Module, func: ir.Operation):
        target, cfg, problem = read_target(func), attrs.read_config(func), attrs.read_problem(func)
        with module.context, ir.Location.unknown():
            m, mem_extents = prepare(func, target.intrinsic(cfg.intrinsic), cfg, target, problem)
            a, b = operand_facts(m, mem_extents)
            # The stores are the tiled kernel's wave 0's: its epilogue plan, for the same tile.
            tiled = plan_kernel(problem, cfg, target, a, b, output_extents(m, mem_extents))
            plan = plan_decode(problem, cfg, target, tiled.epilogue)
            DecodeRewriter(func, m, plan, mem_extents).run()
            finalize(module, func, plan)
        return plan

    def small_m(self, target, problem: Contraction) -> int:
        """The largest M it takes for ``problem`` were M static (0: none; ``heuristic.reach``)."""
        return reach(target, problem)

    def shared_bytes(self, cfg: KernelConfig, intrinsic, problem: Contraction, target) -> int:
        return lds_bytes(cfg, target)

    def grid(self, cfg: KernelConfig, problem: Contraction):
        return None  # one workgroup per tile of columns (tile_m holds all of M)

    def min_ptx_version(self, cfg: KernelConfig) -> int:
        return 0

    def candidates(self, target, problem: Contraction) -> list[dict]:
        return tuning_candidates(target, problem)

    def fit(self, target, problem: Contraction, overrides: dict, measured: tuple):
        return None  # (its configs hold no count of the problem's tiles)


FAMILY = DecodeFamily()


class WeightOnlyFamily:
    """The weight-only decode kernel (``weight_only.py``): a direct family, built without the
    transform script, for a dequantization feeding a decode-sized matmul in one dispatch."""

    name = "weight-only"
    title = "the weight-only decode kernel"

    def claims(self, func: ir.Operation) -> bool:
        """Whether ``func`` is a dequantization feeding a contraction (this family's form at all)."""
        return claims(func)

    def lone_dequantization(self, func: ir.Operation) -> str | None:
        """``"i8 -> f16"`` for a dispatch holding a dequantization without the matmul reading it."""
        return lone_dequantization(func)

    def plan(self, record, target):
        return plan_weight_only(record, target)

    def max_rows(self, target) -> int:
        """The most rows (static M) the kernel takes on ``target``: the front reads a quantized matmul per group
        only up to them (``driver/packed_weights.py``), past them the tiled kernels take it apart."""
        return (WEIGHT_ONLY_NVIDIA if target.vendor is Vendor.NVIDIA else WEIGHT_ONLY_AMD).max_rows.value

    def placements(self, func: ir.Operation) -> WeightOnlyMatmul:
        """The dispatch's record (``UnsupportedError``: not this form, or not one the kernel takes)."""
        return match_weight_only(func).record

    def lower(self, func: ir.Operation) -> tuple:
        return lower_weight_only(func)


WEIGHT_ONLY = WeightOnlyFamily()
