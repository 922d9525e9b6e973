"""The flash-attention family, as the registry sees it (``kernels/family.py``): a direct family,
its kernel built without the transform script."""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.kernels.attention.lower import lower_attention
from mmaflow.compiler.kernels.attention.nvidia import attention_placements, key_lengths, plan_flash_attention


class FlashAttentionFamily:
    name = "flash-attention"
    title = "the flash-attention kernel"

    def plan(self, record, target):
        """The plan of a taken dispatch's record (``AttentionDispatch``) or of what it computes
        (``Attention``: select plans before the record exists)."""
        return plan_flash_attention(getattr(record, "attention", record), target=target.name)

    def placements(self, op: ir.Operation) -> tuple:
        return attention_placements(op)

    def key_lengths(self, op: ir.Operation) -> dict:
        return key_lengths(op)

    def lower(self, func: ir.Operation) -> tuple:
        return lower_attention(func)


FAMILY = FlashAttentionFamily()
