"""Execute one wgmma.mma_async on a warpgroup's registers and a workgroup's shared memory.

    wgmma.mma_async.sync.aligned.m64nNkK.f32.atype.btype  d, a-desc|a, b-desc, scale-d, ..., imm-trans-a, imm-trans-b

[PTX-WG] 9.7.15.5.2: D = A * B + D when scale-d is 1, D = A * B when it is 0. A is M x K, from
registers (per-thread fragments, ``tables.WGMMA``) or from shared memory through a descriptor; B
is K x N, always from shared memory. imm-trans-a / imm-trans-b select the MN-major layout of a
shared-memory operand (0: K-major) and exist only for .f16/.bf16; a register A has no transpose.
imm-scale-a / imm-scale-b (1 or -1) negate an input. (The asynchrony itself, fences and
commit/wait groups, is not modelled: this is the arithmetic of one instruction once its operands
are visible.)

Numerics as ``execute.py``: inputs widened exactly, products and sums in float64, one rounding
to f32. Registers have shape (128, slots): one warpgroup.
"""

from __future__ import annotations

import numpy as np

from .execute import IsaError, _check_dtype, _gather, np_dtype, placement
from .smem_matrix import decode_descriptor, read_operand
from .tables import WGMMA


def execute_wgmma(key: str, c_regs: np.ndarray, b_desc: int, smem: np.ndarray, *, a_regs: np.ndarray | None = None,
                  a_desc: int | None = None, trans_a: bool = False, trans_b: bool = False,
                  scale_d: bool = True, scale_a: int = 1, scale_b: int = 1) -> np.ndarray:
    """D registers of one wgmma.mma_async (shaped like ``c_regs``)."""
    try:
        instr = WGMMA[key]
    except KeyError:
        raise IsaError(f"the ISA model has no wgmma instruction {key!r}") from None
    if scale_a not in (1, -1) or scale_b not in (1, -1):
        raise IsaError(f"{key}: imm-scale-a/imm-scale-b are 1 or -1, got {scale_a}, {scale_b}")
    if (a_regs is None) == (a_desc is None):
        raise IsaError(f"{key}: A comes from registers or from a descriptor, give exactly one")
    if (trans_a or trans_b) and not instr.transposable:
        raise IsaError(f"{key}: imm-trans-a/imm-trans-b exist only for .f16/.bf16 inputs")
    if trans_a and a_regs is not None:
        raise IsaError(f"{key}: imm-trans-a applies to a shared-memory A only")
    _check_dtype(instr, "C", c_regs, instr.c_type)
    if a_regs is not None:
        _check_dtype(instr, "A", a_regs, instr.a_type)
        a = _gather(instr, "A", a_regs, (instr.m, instr.k))
    else:
        a = read_operand(smem, decode_descriptor(a_desc), k_major=not trans_a, dtype=np_dtype(instr.a_type),
                         rows=instr.m, cols=instr.k, mn_axis=0)
    b = read_operand(smem, decode_descriptor(b_desc), k_major=not trans_b, dtype=np_dtype(instr.b_type),
                     rows=instr.k, cols=instr.n, mn_axis=1)
    c = _gather(instr, "C", c_regs, (instr.m, instr.n))
    d = (scale_a * a.astype(np.float64)) @ (scale_b * b.astype(np.float64))
    if scale_d:
        d += c.astype(np.float64)
    p = placement(instr, "C")
    out = c_regs.copy()
    out[..., p.lanes, p.slots] = d.astype(c_regs.dtype)[p.rows, p.cols]
    return out
