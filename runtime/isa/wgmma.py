"""Execute one wgmma.mma_async on a warpgroup's registers and a workgroup's shared memory.

    wgmma.mma_async.sync.aligned.m64nNkK.f32.atype.btype  d, a-desc|a, b-desc, scale-d, ..., imm-trans-a, imm-trans-b

[PTX-WG] 9.7.15.5.2: D = A * B + D when scale-d is 1, D = A * B when it is 0. A is M x K, from
registers (per-thread fragments, ``tables.WGMMA``) or from shared memory through a descriptor; B
is K x N, always from shared memory. imm-trans-a / imm-trans-b select the MN-major layout of a
shared-memory operand (0: K-major) and exist only for .f16/.bf16; a register A has no transpose.
imm-scale-a / imm-scale-b (1 or -1) negate an input. (The asynchrony itself, fences and
commit/wait groups, is not modelled: this is the arithmetic of one instruction once its operands
are visible.)

Numerics. 16-bit inputs (.f16/.bf16) as ``execute.py``: inputs widened exactly, products and
sums in float64, one rounding to f32 (the f16 kernels pass the f32 bound K * 2^-24 * sum |a||b| on
the H100/H200 with max |err| / tol 0.003). 8-bit inputs (.e4m3/.e5m2) do **not** accumulate in
f32: ``fp8_accumulate`` is the accumulator the H200 was measured to keep (below). Registers have
shape (128, slots): one warpgroup.

The fp8 accumulator (measured, H200, 2026-11-26; DeepSeek-V3 technical report section 3.3.2
"Increasing Accumulation Precision" reports about 14 bits): an fp8 kernel that let every
m64nNk32 wgmma accumulate into its f32 accumulator was run at 4096^3 on uniform(-1, 1) inputs
rounded to e4m3 (``bench._inputs(4096, "f8E4M3FN")``) and its outputs (first 128 rows, 524288)
compared bit for bit with candidate models evaluated in float64. Exact f32 accumulation matched
0.013% of them; this model matched **93.13%** (the rest within 1.17e-2 absolute, mean 4.3e-5; the
kernel's own error against exact: max 0.557, mean |d| 0.0164, unbiased). Per instruction (its 32
consecutive k, in order), for every output element:

    P_j = a_j * b_j exactly (j = 1..32), acc = the input accumulator (0 when scale-d is 0)
    E   = the exponent of max(|acc|, max_j |P_j|) in frexp's convention (max < 2^E)
    q   = 2^(E - 14)
    D   = trunc(acc / q) * q + sum_j trunc(P_j / q) * q     (trunc toward zero; the sum exact)
    then rounded to f32 (a no-op: D is a multiple of q below 2^(E + 6))

i.e. every addend is aligned to the largest one and cut to 14 bits below its leading bit, then
summed exactly. Variants that matched far less: truncating only the accumulator to 13-15 bits
(<= 3%), floor instead of trunc (0%), E from the products only, chunks of 16 (13.6%), 13 or 15
bits. Not modelled (not measured): the remaining 7% of outputs (so a kernel's result on the GPU
matches this model for most outputs, not all), e5m2 and mixed inputs apart from e4m3 (assumed the
same datapath), products or sums near the f32 range limits.
"""

from __future__ import annotations

import numpy as np

from mmaflow.runtime.isa.execute import IsaError, check_dtype, gather_operand, np_dtype, placement
from mmaflow.runtime.isa.smem_matrix import decode_descriptor, read_operand
from mmaflow.runtime.isa.tables import WGMMA

# The measured fp8 accumulator: bits kept below the leading bit of the largest addend (see above).
FP8_ACCUMULATOR_BITS = 14
FP8_CHUNK = 32  # k per instruction (m64nNk32): the addends aligned together


def fp8_accumulate(acc: np.ndarray, products: np.ndarray, bits: int = FP8_ACCUMULATOR_BITS) -> np.ndarray:
    """One fp8 wgmma's accumulation as measured on the H200 (module docstring): ``acc`` (...)
    float64, ``products`` (..., k) float64 exact products; returns D (...) float64, before the
    (exact) rounding to f32. Addends are cut toward zero to multiples of 2^(E - bits), E the
    frexp exponent of the largest magnitude among them; a zero maximum gives 0."""
    acc = np.asarray(acc, np.float64)
    products = np.asarray(products, np.float64)
    top = np.maximum(np.abs(acc), np.abs(products).max(axis=-1))
    _, e = np.frexp(top)  # top < 2^e (top = 0: e = 0, and every addend is 0)
    q = np.ldexp(1.0, e - bits)
    return np.trunc(acc / q) * q + (np.trunc(products / q[..., None]) * q[..., None]).sum(axis=-1)


def execute_wgmma(
    key: str,
    c_regs: np.ndarray,
    b_desc: int,
    smem: np.ndarray,
    *,
    a_regs: np.ndarray | None = None,
    a_desc: int | None = None,
    trans_a: bool = False,
    trans_b: bool = False,
    scale_d: bool = True,
    scale_a: int = 1,
    scale_b: int = 1,
) -> np.ndarray:
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
    check_dtype(instr, "C", c_regs, instr.c_type)
    if a_regs is not None:
        check_dtype(instr, "A", a_regs, instr.a_type)
        a = gather_operand(instr, "A", a_regs, (instr.m, instr.k))
    else:
        a = read_operand(
            smem,
            decode_descriptor(a_desc),
            k_major=not trans_a,
            dtype=np_dtype(instr.a_type),
            rows=instr.m,
            cols=instr.k,
            mn_axis=0,
        )
    b = read_operand(
        smem,
        decode_descriptor(b_desc),
        k_major=not trans_b,
        dtype=np_dtype(instr.b_type),
        rows=instr.k,
        cols=instr.n,
        mn_axis=1,
    )
    c = gather_operand(instr, "C", c_regs, (instr.m, instr.n))
    a64, b64 = scale_a * a.astype(np.float64), scale_b * b.astype(np.float64)
    if instr.element_bits == 8:  # the measured fp8 accumulator (module docstring), not f32
        acc = c.astype(np.float64) if scale_d else np.zeros(c.shape)
        d = fp8_accumulate(acc, a64[:, None, :] * b64.T[None, :, :])
    else:
        d = a64 @ b64
        if scale_d:
            d += c.astype(np.float64)
    p = placement(instr, "C")
    out = c_regs.copy()
    out[..., p.lanes, p.slots] = d.astype(c_regs.dtype)[p.rows, p.cols]
    return out
