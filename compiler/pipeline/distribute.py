"""Stage `distribute`: rewrite the script's workgroup/wave-level vector IR into per-lane code.

The family whose instruction the config names plans the kernel as frozen data and rewrites the
IR in place (``kernels.registry.distribute``): the mma.sync / WMMA / MFMA matmul kernel
(``kernels/common/contraction.py``) or the Hopper warpgroup kernel (``kernels/wgmma/rewrite.py``).
What the final ISA must show is recorded on the function (``mmaflow.expect``) for verify.
"""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.target.targets import read_target

NAME = "distribute"


def distribute(module: ir.Module, func: ir.Operation):
    """Distribute ``func`` in place; return the plan it followed (its notes go to the log)."""
    return registry.distribute(module, func, read_target(func), attrs.read_config(func))
