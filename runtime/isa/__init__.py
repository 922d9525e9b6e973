"""The independent ISA model: matrix-instruction semantics from the vendors' ISA documents.

Never import ``mmaflow.compiler`` from here: this package is the ground truth the compiler's
layout model is checked against.
"""

from mmaflow.runtime.isa.execute import IsaError, execute, np_dtype, placement
from mmaflow.runtime.isa.smem_matrix import Descriptor, decode_descriptor, encode_descriptor, operand_address
from mmaflow.runtime.isa.tables import INSTRUCTIONS, WGMMA, IsaInstruction, WgmmaInstruction, wgmma_key
from mmaflow.runtime.isa.wgmma import FP8_ACCUMULATOR_BITS, FP8_CHUNK, execute_wgmma, fp8_accumulate

__all__ = [
    "INSTRUCTIONS",
    "WGMMA",
    "Descriptor",
    "IsaError",
    "IsaInstruction",
    "WgmmaInstruction",
    "decode_descriptor",
    "encode_descriptor",
    "FP8_ACCUMULATOR_BITS",
    "FP8_CHUNK",
    "execute",
    "execute_wgmma",
    "fp8_accumulate",
    "np_dtype",
    "operand_address",
    "placement",
    "wgmma_key",
]
