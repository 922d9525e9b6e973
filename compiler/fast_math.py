"""Math functions a fused epilogue evaluates cheaper than IREE would lower them (NVIDIA).

``math.erf`` (GELU's erf form, the MLP epilogue of GPT-2 and BERT): IREE 3.13's NVVM lowering
expands it with MLIR's rational approximation (three intervals of degree-4 P / Q, about 2.5e-7
absolute error): per element one IEEE division (``div.rn.f32``, a multi-instruction sequence with
a slow path) and 21 ``selp`` (the PTX of the 4096^3 bias + gelu matmul: 128 ``div.rn.f32`` and
2688 ``selp.f32`` per thread, the kernel 85% of the plain matmul's speed on the H100, run 10).
Here instead, branch-free, both pieces evaluated and one selected:

    |x| <  1   erf(x)  = x * P(x^2)                 P of degree 5
    |x| >= 1   erf(|x|) = 1 - 2^R(t), t = min(|x|, 4)   R of degree 7, fit to log2 erfc(t) on [1, 4]
    sign       erf(-x) = -erf(x)

with 2^R as ``nvvm.ex2`` (PTX ``ex2.approx.ftz.f32``, one MUFU instruction, relative error below
2^-22) and every polynomial by Horner in ``math.fma``: about 20 instructions per element, no
division. Clamping at 4 is exact in f32: erfc(4) = 1.5e-8 is below half an ulp of 1, so
1 - erfc(t) rounds to 1 for every t >= 4. NaN propagates (``arith.minimumf`` keeps it), +-inf
give +-1.

Accuracy, evaluated in f32 as emitted against ``math.erf`` in float64 (``erf_reference_f32``
mirrors the op sequence with a correctly rounded 2^x; ``e2e_tests/test_fast_math.py`` checks it
on a dense grid): absolute error at most 1.2e-7 everywhere, plus ex2.approx's relative error
(below 2^-22) on erfc <= 0.16, i.e. at most 4e-8 more (IREE's own approximation: 2.5e-7),
relative error at most 1.8e-7 for |x| < 1 (where erf is small) — the same absolute-error class as what IREE emits, far
below the 16-bit outputs' rounding (2^-11 relative) these epilogues store.

Coefficients: a minimax fit by iteratively reweighted least squares on 4000 Chebyshev nodes in
float64 (P relative to erf(x)/x on x in (0, 1], R absolute to log2 erfc on [1, 4]), rounded to
f32; ``fit_coefficients()`` reproduces them.

AMD targets keep ``math.erf`` as it is: ROCDL lowers it to the device library's ``erf``.
"""

from __future__ import annotations

import math

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, nvvm
from iree.compiler.dialects import math as math_d

# erf(x) / x = P(x^2) on |x| < 1, lowest degree first
ERF_SMALL = (1.1283791, -0.37612328, 0.11280184, -0.026711404, 0.004917644, -0.00056317553)
# log2 erfc(t) = R(t) on 1 <= t <= 4, lowest degree first
ERF_LARGE = (-0.0010797529, -1.6244124, -0.9219503, -0.14911042, 0.032660622, -0.0049646627,
             0.00045904904, -1.925337e-05)
SPLIT, CLAMP = 1.0, 4.0


def _f32(em, vtype: ir.Type, value: float) -> ir.Value:
    with em.loc, em.ip:
        if isinstance(vtype, ir.VectorType):
            return em.splat_const(vtype, ir.FloatAttr.get(vtype.element_type, value))
        return arith.ConstantOp(vtype, ir.FloatAttr.get(vtype, value)).result


def _horner(em, coeffs: tuple, x: ir.Value) -> ir.Value:
    acc = _f32(em, x.type, coeffs[-1])
    with em.loc, em.ip:
        for c in reversed(coeffs[:-1]):
            acc = math_d.FmaOp(acc, x, _f32(em, x.type, c)).result
    return acc


def _exp2(em, x: ir.Value) -> ir.Value:
    """2^x per element as ``nvvm.ex2`` (scalar f32: the NVVM intrinsic is scalar)."""
    vt = x.type
    if not isinstance(vt, ir.VectorType):
        with em.loc, em.ip:
            return nvvm.Ex2Op(x, ftz=True, results=[vt]).result
    f32 = vt.element_type
    elems = []
    for i in range(vt.shape[0]):
        e = em.extract(x, i)
        with em.loc, em.ip:
            elems.append(nvvm.Ex2Op(e, ftz=True, results=[f32]).result)
    return em.from_elements(vt, elems)


def emit_erf(em, x: ir.Value) -> ir.Value:
    """erf(x) of an f32 scalar or vector, as above."""
    with em.loc, em.ip:
        ax = math_d.AbsFOp(x).result
        small = arith.MulFOp(x, _horner(em, ERF_SMALL, arith.MulFOp(x, x).result)).result
        t = arith.MinimumFOp(ax, _f32(em, x.type, CLAMP)).result
    erfc = _exp2(em, _horner(em, ERF_LARGE, t))
    with em.loc, em.ip:
        large = arith.SubFOp(_f32(em, x.type, 1.0), erfc).result
        signed = arith.SelectOp(arith.CmpFOp(arith.CmpFPredicate.OLT, x, _f32(em, x.type, 0.0)).result,
                                arith.NegFOp(large).result, large).result
        is_small = arith.CmpFOp(arith.CmpFPredicate.OLT, ax, _f32(em, x.type, SPLIT)).result
        return arith.SelectOp(is_small, small, signed).result


# Expansions by op name, for the NVIDIA epilogue (epilogue.Epilogue.apply).
NVIDIA_EXPANSIONS = {"math.erf": emit_erf}


def erf_reference_f32(x: np.ndarray) -> np.ndarray:
    """``emit_erf``'s op sequence in numpy f32 (fma rounded once, ex2 correctly rounded), for the
    accuracy check."""
    x = np.asarray(x, np.float32)
    f = np.float32

    def horner(coeffs, v):
        acc = np.full_like(v, f(coeffs[-1]))
        for c in reversed(coeffs[:-1]):
            acc = (acc.astype(np.float64) * v + f(c)).astype(np.float32)  # one rounding: an fma
        return acc

    ax = np.abs(x)
    with np.errstate(over="ignore", invalid="ignore"):  # the unused piece may overflow, as on the GPU
        small = (x * horner(ERF_SMALL, (x * x).astype(f))).astype(f)
        t = np.minimum(ax, f(CLAMP))
    erfc = np.exp2(horner(ERF_LARGE, t).astype(np.float64)).astype(f)
    large = (f(1.0) - erfc).astype(f)
    signed = np.where(x < 0, -large, large)
    return np.where(ax < f(SPLIT), small, signed).astype(f)


def fit_coefficients(nodes: int = 4000, iterations: int = 30) -> tuple[tuple, tuple]:
    """Refit (ERF_SMALL, ERF_LARGE) as documented above (float64, then rounded to f32)."""
    erf = np.vectorize(math.erf)
    erfc = np.vectorize(math.erfc)

    def cheb(a, b):
        k = np.arange(nodes)
        return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * nodes))

    def minimax(f, xs, degree, weight):
        basis = np.vander(xs, degree + 1, increasing=True)
        reweight = np.ones_like(xs)
        for _ in range(iterations):
            w = weight * reweight
            c, *_ = np.linalg.lstsq(basis * w[:, None], f * w, rcond=None)
            err = np.abs((basis @ c - f) * weight)
            reweight = reweight * np.sqrt(err / err.max() + 1e-3)
        return tuple(np.float32(c).tolist())

    xs = cheb(1e-4, SPLIT)
    ratio = erf(xs) / xs
    small = minimax(ratio, xs * xs, len(ERF_SMALL) - 1, 1.0 / ratio)
    ts = cheb(SPLIT, CLAMP)
    large = minimax(np.log2(erfc(ts)), ts, len(ERF_LARGE) - 1, np.ones_like(ts))
    return small, large
