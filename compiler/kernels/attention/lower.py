"""The flash-attention family's lowering: an attention dispatch select took becomes the flash-attention
kernel (``compiler/kernels/attention/nvidia.py``: mma.sync on NVIDIA; ``kernels/attention/amd.py``: MFMA /
WMMA on AMD), handed back to IREE.

Input: the dispatch function select tagged ``mmaflow.dispatch``, ``mmaflow.target`` and ``mmaflow.attention``.
``nvidia.rewrite_dispatch`` plans the kernel for the target and replaces the function (same name, Q, K, V, O at the
bindings and byte offsets IREE gave them); the pipeline's hand-back (``hand_back.install`` with the plan's constant
grid) hands it back. The new function carries select's attributes again, and ``mmaflow.attention_expect``
(``attrs.AttentionExpectations``): what verify demands of its PTX or .rocmasm.
"""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import ops_named, str_attr
from mmaflow.compiler.kernels.attention.hopper import HopperAttentionPlan
from mmaflow.compiler.kernels.attention.nvidia import FlashAttentionPlan, rewrite_dispatch
from mmaflow.compiler.target.targets import read_target

NAME = "build"  # the pipeline stage that runs it


def expectations(plan: FlashAttentionPlan | HopperAttentionPlan) -> attrs.AttentionExpectations:
    """What the lowered kernel shows per warp and key tile: S = Q K^T is (keys / n) x (head dim / k)
    mma.sync, O += P V (head dim / n) x (keys / k); sm_90a's wgmma kernel: head dim / 16 + keys / 16
    wgmma; AMD: S^T = K Q^T (keys / m) x (head dim / k),
    O^T += V^T P^T (head dim / m) x (keys / k)."""
    intr = plan.intrinsic
    if isinstance(plan, HopperAttentionPlan):  # per warpgroup: S's head dim / 16 K steps, P V's keys / 16
        per_tile = plan.head_dim // intr.k + plan.block_n // intr.k
    else:
        rows = intr.m if plan.transposed else intr.n  # the instruction dim the keys (S) and head dim (O) take
        keys = plan.tile_keys  # (decode: each warp its share of a tile)
        per_tile = (keys // rows) * (plan.head_dim // intr.k) + (plan.head_dim // rows) * (keys // intr.k)
    return attrs.AttentionExpectations(
        mma_per_key_tile=per_tile,
        key_tiles=plan.key_tiles,
        async_copies=plan.stages > 1 and not getattr(plan, "producer", False),
        tma_copies=getattr(plan, "producer", False),
        barriers_per_key_tile=plan.barriers_per_tile,
        instruction="wgmma.mma_async" if isinstance(plan, HopperAttentionPlan) else "mma.sync",
    )


def lower_attention(func: ir.Operation) -> tuple[ir.Operation, FlashAttentionPlan]:
    """Replace the tagged attention dispatch ``func`` by the kernel; returns the new function and the
    plan (its grid, workgroup and wave size, for the hand-back)."""
    target, record = read_target(func), attrs.read_attention(func)
    name, inner = str_attr(func, "sym_name"), func.parent
    plan = rewrite_dispatch(func, target=target.name)
    found = [f for f in ops_named(inner, "func.func") if str_attr(f, "sym_name") == name]
    if len(found) != 1:
        raise CodegenError(f"expected the kernel @{name} once after the rewrite, found {len(found)}", stage=NAME)
    kernel = found[0]
    attrs.mark(kernel, attrs.DISPATCH)
    attrs.write_target(kernel, target)
    attrs.write_attention(kernel, record)
    attrs.write_attention_expect(kernel, expectations(plan))
    return kernel, plan
