"""Random inputs, numpy references and dtype-justified tolerances for matmul checks.

Tolerances are worst-case rounding bounds, not fudge factors. With unit roundoff u of the
accumulation type, any order of K fused or unfused multiply-adds satisfies

    |computed_ij - exact_ij| <= K * u * (|A| @ |B|)_ij          (gamma_K, Higham 3.1)

so that bound (plus one rounding u*|exact| when the result is stored in a narrower type than it
was accumulated in) is the tolerance: u = 2^-24 for f32 accumulators, 2^-11 for f16, 2^-8 for
bf16. Inputs are generated in their storage type (f16, bf16, fp8 are exact in float64), so the
reference sees exactly the values the kernel multiplies. Integer matmuls must match exactly,
with the 32-bit wraparound of the hardware's accumulators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np

DTYPES = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i8": np.dtype(np.int8),
    "i32": np.dtype(np.int32),
    "f8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu),  # MX block scales
}
UNIT_ROUNDOFF = {"f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}
# xf32 (gfx942's reduced-precision f32 MFMA) keeps 10 mantissa bits: 2^-11 rounding to nearest, 2^-10
# truncating. The ISA guide does not say which its conversion does; the tolerance takes the larger.
XF32_INPUT_ROUNDOFF = 2.0**-10


def random_matrix(
    rng: np.random.Generator, shape, dtype: str, *, unsigned: bool = False, small_integers: bool = False
) -> np.ndarray:
    """Random data in the storage type.

    ``small_integers``: values in {-2, ..., 2}; every product and every partial sum of a K <= 256
    dot product is then an integer of magnitude <= 1024, exact in f16, bf16 (<= 256 for K <= 64
    with {-1, 0, 1}), f32 and the fp8 types: the result must match exactly, so a
    single misplaced element is caught no matter how large K is.
    """
    dt = DTYPES[dtype]
    if dtype == "f8E8M0FNU":  # block scales: powers of two 2^-8 .. 2^8 (codes 119 .. 135), never NaN
        return rng.integers(119, 136, shape).astype(np.uint8).view(dt)
    if dtype == "i8":
        if unsigned:
            return rng.integers(0, 256, shape).astype(np.uint8).view(np.int8)
        return rng.integers(-128, 128, shape).astype(np.int8)
    if small_integers:
        lim = 1 if dtype == "bf16" else 2
        return rng.integers(-lim, lim + 1, shape).astype(np.float64).astype(dt)
    scale = 2.0 if dtype.startswith("f8") else 1.0
    return rng.uniform(-scale, scale, shape).astype(dt)


def exact_integer_limit(out_type: str) -> int:
    """Largest integer magnitude the output/accumulator type holds exactly."""
    return {"f64": 2**53, "f32": 2**24, "f16": 2**11, "bf16": 2**8, "i32": 2**31}[out_type]


def as_exact(a: np.ndarray, *, unsigned: bool = False) -> np.ndarray:
    """Values as float64 (floats) or int64 (integers) without loss."""
    if a.dtype == np.int8:
        return (a.view(np.uint8) if unsigned else a).astype(np.int64)
    return a.astype(np.float64)


def matmul_reference(
    a: np.ndarray,
    b: np.ndarray,
    out_type: str,
    *,
    acc_type: str | None = None,
    unsigned_a: bool = False,
    unsigned_b: bool = False,
    fp8_k_tile: int = 0,
    input_roundoff: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(reference, per-element tolerance) for C = A @ B (batched over leading axes);
    ``fp8_k_tile``: the result of Hopper's fp8 wgmma kernel promoting every K tile of that many
    k, whose tolerance also holds the tensor cores' fp8 accumulation (``fp8_tensor_core_bound``);
    ``input_roundoff``: an instruction that rounds A and B first (xf32) errs in each product by at
    most (1 + u)^2 - 1 of it."""
    a64, b64 = as_exact(a, unsigned=unsigned_a), as_exact(b, unsigned=unsigned_b)
    ref = a64 @ b64
    if out_type == "i32":
        wrapped = ((ref + 2**31) % 2**32 - 2**31).astype(np.int64)
        return wrapped, np.zeros_like(wrapped, dtype=np.float64)
    acc_type = acc_type or out_type
    k = a.shape[-1]
    bound = np.abs(a64) @ np.abs(b64)
    tol = k * UNIT_ROUNDOFF[acc_type] * bound
    if acc_type == "f64":  # (the float64 reference's own sum errs by as much again)
        tol = 2 * tol
    if out_type != acc_type:
        tol = tol + UNIT_ROUNDOFF[out_type] * np.abs(ref)
    if fp8_k_tile:
        tol = tol + fp8_tensor_core_bound(a, b, fp8_k_tile)
    if input_roundoff:
        tol = tol + (2 * input_roundoff + input_roundoff**2) * bound
    # The stored result itself is rounded once to the output type.
    tol = tol + UNIT_ROUNDOFF[out_type] * np.abs(ref) + np.finfo(np.float32).tiny
    return ref, tol


def fp8_tensor_core_reference(
    a: np.ndarray, b: np.ndarray, k_tile: int, *, promote: bool = True, split: int = 1
) -> np.ndarray:
    """C = A @ B (batched over leading axes) as Hopper's fp8 wgmma kernel computes it: K zero-padded
    to whole K tiles of ``k_tile`` (the kernel runs every wgmma of its last tile on zero-filled
    chunks, and even an all-zero wgmma cuts the accumulator to 14 bits), chunks of
    ``isa.FP8_CHUNK`` = 32 consecutive k (one m64nNk32 each) accumulated through the *measured*
    fp8 accumulator (``isa.fp8_accumulate``: addends cut to 14 bits below the largest).
    ``promote``: each K tile into a fresh partial, then added to an f32 accumulator with one f32
    rounding (the kernel's per-K-tile promotion, as cuBLAS / CUTLASS's ``GmmaFP8Accumulation``);
    False: every chunk accumulates into the one accumulator. Returns float32. (The bound of
    ``matmul_reference`` says how far a result may be from exact; this says what the kernel's
    arithmetic gives, bit for bit on the ISA model.) ``split``: the K tiles in that many equal
    shares (split-K), each computed so from zero, the shares' float32 results then added in order
    (the split-K kernel's reduction: rank 0's partial, plus rank 1's, ...)."""
    if split == 1:
        return _by_rows(_fp8_tensor_core_reference, a, b, k_tile, promote)
    k = a.shape[-1]
    tiles = -(-k // k_tile)
    if tiles % split:
        raise ValueError(f"{tiles} K tiles of {k_tile} do not split into {split} equal shares")
    width = tiles // split * k_tile
    out = None
    for s in range(split):
        ks = slice(s * width, min((s + 1) * width, k))
        part = _by_rows(_fp8_tensor_core_reference, a[..., ks], b[..., ks, :], k_tile, promote)
        out = part if out is None else (out + part).astype(np.float32)
    return out


def _fp8_tensor_core_reference(a: np.ndarray, b: np.ndarray, k_tile: int, promote: bool) -> np.ndarray:
    return _fp8_tensor_core(a, b, k_tile, promote)[0]


def _fp8_tensor_core(a: np.ndarray, b: np.ndarray, k_tile: int, promote: bool, *, bound: bool = False):
    """(the kernel's result as float32, and with ``bound`` ``fp8_tensor_core_bound``'s terms or None)."""
    from mmaflow.runtime.isa import FP8_ACCUMULATOR_BITS
    from mmaflow.runtime.isa.wgmma import FP8_CHUNK, fp8_accumulate

    a64, b64 = as_exact(a), as_exact(b)
    if k_tile <= 0 or k_tile % FP8_CHUNK:
        raise ValueError(f"a K tile of {k_tile}: must be whole chunks of {FP8_CHUNK}")
    k = a64.shape[-1]
    pad = -k % k_tile
    a64 = np.concatenate([a64, np.zeros(a64.shape[:-1] + (pad,))], axis=-1)
    b64 = np.concatenate([b64, np.zeros(b64.shape[:-2] + (pad, b64.shape[-1]))], axis=-2)
    shape = np.broadcast_shapes(a64.shape[:-2], b64.shape[:-2]) + (a64.shape[-2], b64.shape[-1])
    acc = np.zeros(shape, np.float32)
    part = np.zeros(shape, np.float64)
    tol = np.zeros(shape, np.float64) if bound else None
    u32 = UNIT_ROUNDOFF["f32"]
    for k0 in range(0, k + pad, FP8_CHUNK):
        ks = slice(k0, k0 + FP8_CHUNK)
        prods = a64[..., :, None, ks] * np.swapaxes(b64[..., ks, :], -1, -2)[..., None, :, :]
        if bound:  # each of the FP8_CHUNK + 1 addends loses < 2q, q = 2^(E - bits) of the largest
            _, e = np.frexp(np.maximum(np.abs(part), np.abs(prods).max(axis=-1)))
            tol += (FP8_CHUNK + 1) * np.ldexp(2.0, e - FP8_ACCUMULATOR_BITS)
        part = fp8_accumulate(part, prods).astype(np.float32).astype(np.float64)
        if bound:
            tol += u32 * np.abs(part)
        if promote and (k0 + FP8_CHUNK) % k_tile == 0:
            acc = (acc + part.astype(np.float32)).astype(np.float32)
            if bound:
                tol += u32 * np.abs(acc).astype(np.float64)
            part = np.zeros(shape, np.float64)
    return (acc if promote else part.astype(np.float32)), tol


@dataclass(frozen=True)
class EpilogueReference:
    """A fused epilogue in numpy, for checking: ``fn(acc, *inputs)`` maps the exact accumulator
    (float64, the output's shape) and the epilogue's extra inputs (float64, their own shapes, in
    the order the dispatch reads them) to the stored value.

    Tolerance: the accumulator's rounding bound times ``lipschitz`` (the largest |d out/d acc|:
    1 for bias/relu, |s| for a scale by s, 1.13 for gelu), plus ``ops`` roundings of f32 arithmetic
    on values up to |acc| + sum |inputs| + 1 (each op, or a math library call good to a few ulp,
    counts as one or more), plus the final rounding to the stored type.
    """

    fn: Callable
    lipschitz: float = 1.0
    ops: int = 2


def epilogue_reference(
    acc: np.ndarray, acc_tol: np.ndarray, inputs: list[np.ndarray], epi: EpilogueReference, stored_type: str
) -> tuple[np.ndarray, np.ndarray]:
    """(expected, tolerance) of the stored output after ``epi``."""
    ins64 = [as_exact(x) for x in inputs]
    expected = np.asarray(epi.fn(acc.astype(np.float64), *ins64), np.float64)
    magnitude = np.abs(acc) + 1.0
    for x in ins64:
        magnitude = magnitude + np.max(np.abs(x)) if x.size else magnitude
    tol = epi.lipschitz * acc_tol + epi.ops * UNIT_ROUNDOFF["f32"] * magnitude
    if stored_type in UNIT_ROUNDOFF:
        tol = tol + UNIT_ROUNDOFF[stored_type] * np.abs(expected)
    elif stored_type == "i32":
        tol = tol + 1.0  # a float epilogue converted to an integer (fptosi truncates): off by one at most
    return expected, tol + np.finfo(np.float32).tiny


@dataclass
class Check:
    passed: bool
    max_abs_err: float  # inf where a non-finite value differs from the reference
    max_rel_err: float
    max_tol: float
    worst_index: tuple
    unwritten: int
    nonfinite: int  # non-finite outputs where the reference is finite
    detail: str
    worst_ratio: float = 0.0  # max over elements of |err| / its tolerance: the verdict's figure (<= 1 passes)

    def line(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        return (
            f"{status}: max |err| / tolerance = {self.worst_ratio:.3g} (must be <= 1); max |err| "
            f"{self.max_abs_err:.3e}, max rel err {self.max_rel_err:.3e}; {self.detail}"
        )


def compare(
    out: np.ndarray, ref: np.ndarray, tol: np.ndarray, *, written: np.ndarray | None = None, out_type: str = "f32"
) -> Check:
    """Elementwise |out - ref| <= tol. A non-finite reference (NaN or inf in the inputs) must be
    matched exactly (NaN by NaN); a non-finite output where the reference is finite fails."""
    if out.size == 0:  # an empty output (a dynamic size of 0): nothing to be wrong
        return Check(True, 0.0, 0.0, 0.0, (), 0, 0, "empty output")
    out64 = out.astype(np.float64) if out_type != "i32" else out.astype(np.int64)
    ref = np.asarray(ref, dtype=np.float64 if out_type != "i32" else np.int64)
    tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), ref.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(out64) & np.isfinite(ref)
        same = (out64 == ref) | (np.isnan(out64) & np.isnan(ref))
        err = np.where(finite, np.abs(out64 - ref), np.where(same, 0.0, np.inf))
    nonfinite = int((~np.isfinite(out64) & np.isfinite(ref)).sum()) if out_type != "i32" else 0
    ref_nonfinite = int((~np.isfinite(ref)).sum()) if out_type != "i32" else 0
    unwritten = int((~written).sum()) if written is not None else 0
    bad = err > tol
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / tol)
    worst = np.unravel_index(int(np.argmax(ratio)), err.shape)
    rel = np.where(np.isfinite(ref), err / np.maximum(np.abs(np.where(np.isfinite(ref), ref, 1.0)), 1e-30), err)
    passed = not bad.any() and unwritten == 0
    detail = f"{int(bad.sum())} of {out.size} elements outside tolerance"
    if unwritten:
        detail += f", {unwritten} elements never written"
    if nonfinite:
        detail += f", {nonfinite} non-finite where the reference is finite"
    if ref_nonfinite:
        detail += f", {ref_nonfinite} non-finite reference values (must match exactly)"
    if bad.any():
        detail += (
            f"; worst at {tuple(int(i) for i in worst)}: got {out64[worst]}, expected {ref[worst]}, "
            f"tolerance {tol[worst]:.3e}"
        )
    return Check(
        passed,
        float(err.max()),
        float(rel.max()),
        float(tol.max()),
        tuple(int(i) for i in worst),
        unwritten,
        nonfinite,
        detail,
        float(ratio.max()),
    )


def _erf(x):
    import math

    return np.vectorize(math.erf)(x)


# The numpy side of runtime.modules.EPILOGUES (independent of how the module spells them).
EPILOGUE_REFERENCES = {
    "bias_n_relu_f16": EpilogueReference(lambda acc, b: np.maximum(acc + b[..., None, :], 0), 1.0, 2),
    "gelu_erf": EpilogueReference(lambda acc: 0.5 * acc * (1 + _erf(acc * 0.7071067812)), 1.13, 8),
    "bias_n_gelu_f16": EpilogueReference(
        lambda acc, b: 0.5 * (acc + b[..., None, :]) * (1 + _erf((acc + b[..., None, :]) * 0.7071067812)), 1.13, 10
    ),
    "dequant_n": EpilogueReference(lambda acc, s: acc * s[..., None, :], 1.0, 2),
    # silu's slope is at most 1.1, the f16 input at most 1 in magnitude (random_matrix)
    "silu_mul_f16": EpilogueReference(lambda acc, u: acc / (1 + np.exp(-acc)) * u, 1.1, 10),
    # computed in f16: six f16 roundings (2^13 f32 unit roundoffs each) before the stored one
    "silu_mul_f16math": EpilogueReference(lambda acc, u: acc / (1 + np.exp(-acc)) * u, 1.1, 6 * 2**13),
    # bf16: 2^16 f32 unit roundoffs each; the reciprocal form one f16 rounding more
    "silu_mul_bf16math": EpilogueReference(lambda acc, u: acc / (1 + np.exp(-acc)) * u, 1.1, 6 * 2**16),
    "silu_mul_f16recip": EpilogueReference(lambda acc, u: acc / (1 + np.exp(-acc)) * u, 1.1, 7 * 2**13),
    "erf_scaled": EpilogueReference(lambda acc: _erf(acc * 0.125), 1.13 * 0.125, 4),
}


ROW_BLOCK = 64  # rows of A per step of the fp8 models: (rows, N, FP8_CHUNK) float64 products at once


def _by_rows(fn, a: np.ndarray, b: np.ndarray, *args) -> np.ndarray:
    """``fn(a, b, *args)`` over blocks of ``ROW_BLOCK`` rows of A (axis -2), concatenated: the
    fp8 models hold every product of a chunk in memory, which a 4096^2 output would make 4 GB."""
    m = a.shape[-2]
    if m <= ROW_BLOCK:
        return fn(a, b, *args)
    return np.concatenate([fn(a[..., i : i + ROW_BLOCK, :], b, *args) for i in range(0, m, ROW_BLOCK)], axis=-2)


def fp8_tensor_core_bound(a: np.ndarray, b: np.ndarray, k_tile: int) -> np.ndarray:
    """How far Hopper's fp8 wgmma kernel (per-K-tile promotion, ``fp8_tensor_core_reference``)
    may be from the exact product, per element, beside the f32 bound: in each m64nNk32
    instruction the FP8_CHUNK + 1 addends are cut toward zero to multiples of q = 2^(E - bits), E
    the exponent of the largest of them (measured, ``runtime/isa/wgmma.py``), so they lose less
    than (FP8_CHUNK + 1) q; E is taken from the modelled partial sums, and q doubled for a
    hardware partial that crosses a power of two the model's does not; plus one f32 rounding of
    each partial and of each promotion. For a result on a GPU, whose bits the model predicts on
    only some outputs (measured on the H200, docs/kernels/hopper_wgmma.md); the lane executor's are compared with the
    model itself."""
    return _by_rows(lambda a_, b_: _fp8_tensor_core(a_, b_, k_tile, True, bound=True)[1], a, b)
