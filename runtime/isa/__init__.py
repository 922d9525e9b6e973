"""The independent ISA model: matrix-instruction semantics from the vendors' ISA documents.

Never import ``mmaflow.compiler`` from here: this package is the ground truth the compiler's
layout model is checked against.
"""

from .execute import IsaError, execute, np_dtype, placement
from .tables import INSTRUCTIONS, IsaInstruction

__all__ = ["INSTRUCTIONS", "IsaError", "IsaInstruction", "execute", "np_dtype", "placement"]
