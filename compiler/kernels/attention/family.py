"""The flash-attention family, as the registry sees it (``kernels/family.py``): a direct family,
its kernel built without the transform script."""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.kernels.attention.lower import lower_attention
from mmaflow.compiler.kernels.attention.nvidia import attention_placements, plan_flash_attention


class FlashAttentionFamily:
    name = "flash-attention"
    title = "the flash-attention kernel"

    def plan(self, record, target):
        return plan_flash_attention(record, target=target.name)

    def placements(self, op: ir.Operation) -> tuple:
        return attention_placements(op)

    def lower(self, func: ir.Operation) -> tuple:
        return lower_attention(func)


FAMILY = FlashAttentionFamily()
