"""Math functions a fused epilogue evaluates cheaper than IREE would lower them (NVIDIA).

``math.erf`` (GELU's erf form, the MLP epilogue of GPT-2 and BERT): IREE 3.13's NVVM lowering
expands it with MLIR's rational approximation (three intervals of degree-4 P / Q, about 2.5e-7
absolute error): per element one IEEE division (``div.rn.f32``, a multi-instruction sequence with
a slow path) and 21 ``selp`` (the PTX of the 4096^3 bias + gelu matmul: 128 ``div.rn.f32`` and
2688 ``selp.f32`` per thread, the kernel 85% of the plain matmul's speed on the H100).
Here instead, branch-free, both pieces evaluated and one selected (``emit_erf``):

    |x| <  1   erf(x)  = x * P(x^2)                 P of degree 5
    |x| >= 1   erf(|x|) = 1 - 2^R(t), t = min(|x|, 4)   R of degree 7, fit to log2 erfc(t) on [1, 4]
    sign       erf(-x) = -erf(x)

with 2^R as ``nvvm.ex2`` (PTX ``ex2.approx.ftz.f32``, one MUFU instruction, relative error below
2^-22) and every polynomial by Horner in ``math.fma``: 23 PTX instructions per element (12 fma, 2
mul, 2 selp, 2 setp, abs, min, ex2, sub, neg), no division. Clamping at 4 is exact in f32:
erfc(4) = 1.5e-8 is below half an ulp of 1, so 1 - erfc(t) rounds to 1 for every t >= 4. NaN
propagates through the small piece, which the unordered ``|x| < 1`` selects (the clamp alone would
not keep it: IREE lowers ``arith.minimumf`` on sm_90a to PTX ``min.f32``, which returns the other
operand), +-inf give +-1.

Accuracy, evaluated in f32 as emitted against ``math.erf`` in float64 (``erf_reference_f32``
mirrors the op sequence with a correctly rounded 2^x; ``e2e_tests/test_fast_math.py`` checks it
on a dense grid): absolute error at most 1.2e-7 on that grid, 1.33e-7 on every f32 with |x| <= 6
(the same on an H100 with its ex2.approx, swept over those f32 values on the device),
plus ex2.approx's relative error (below 2^-22) on erfc <= 0.16, i.e. at most 4e-8 more (IREE's own
approximation: 2.5e-7),
relative error at most 1.8e-7 for |x| < 1 (where erf is small) — the same absolute-error class as what IREE emits, far
below the 16-bit outputs' rounding (2^-11 relative) these epilogues store.

``1 + erf(u)`` (GELU as torch and iree-turbine export it, ``x * 0.5 * (1 + erf(x / sqrt(2)))``):
an ``arith.addf`` of the f32 constant 1.0 (scalar or splat) and a ``math.erf`` that nothing else
uses (``one_plus_erf``) is evaluated whole, as erfc(-u), in one piece (``emit_one_plus_erf``):

    e          = 2^R(|u|)           R of degree 10, fit to log2 erfc(t) on [0, C], C = 3.9375
    1 + erf(u) = u < 0 ? e : 2 - e

no second polynomial, no x*x, no two-way select, no add. Past the clamp C the exponent is
FLUSH * (C - |u|) instead, at most -1024 from the first f32 above C on (one fma and a minimum:
``min(R(|u|), 2^32 * (C - |u|))``; R(|u|) itself is never used there and may overflow), and 2 to
that power is exactly 0: 1 + erf(u) is exactly 0 for u < -C, what f32 ``1 + erf(u)`` gives there
(erf(u) rounds to -1 once erfc(|u|) < 2^-25, from |u| = 3.9192 on), and exactly 2 for u > C
(2 - erfc(C) rounds to 2). Between -C and -3.9192 the result is erfc(|u|) (about 3e-8) where
f32 ``1 + erf(u)`` already gives 0: more accurate, but a GELU stored as f16 can hold one subnormal
(-6e-8) there where torch's f32 arithmetic stores -0. Near u = 0, e = 2^R(|u|) with R(0) = 1.4e-8
and ex2.approx may leave 1 + erf one ulp on the other side of 1. u = -inf gives 0 (so
gelu(-inf) = -inf * 0 = NaN, as torch computes it), +inf gives 2; NaN propagates (R and the flush
exponent are then both NaN, which either lowering of ``arith.minimumf`` keeps). 17 PTX
instructions per element (abs, 11 fma, min, ex2, setp, sub, selp) where the erf above and the add
took 24: the sm_90a bias + gelu -> f16 4096^3 kernel has 3363 PTX instructions per thread instead
of 4259, all 896 fewer in its epilogue (fma.rn.f32 1536 -> 1408, mul.rn.f32 640 -> 384, selp.f32
256 -> 128, ex2 128 either way; ptxas: 168 registers, no spills), and is 1.9% faster on an H100
(docs/PERFORMANCE.md, Variants and fused epilogues).

Its accuracy, evaluated in f32 as emitted (``one_plus_erf_reference_f32``, correctly rounded 2^x)
against 1 + erf(u) in float64 on every f32 u with 2^-24 <= |u| <= 6: absolute error at most
1.27e-7 (1.17e-7 on the test's grid), the class of the erf above (1.33e-7), plus ex2.approx's
relative error times e, here on e up to 1 (u near 0) where the two-piece erf used ex2 only on
erfc <= 0.16: by ex2.approx's specified 2^-22, 3.4e-7 at worst. Measured, the same sweep on an
H100 with ``ex2.approx.ftz.f32`` (the device sweep above): 1.92e-7, where the erf above plus the
f32 add of 1 gives 1.87e-7 (IREE's erf alone: 2.5e-7). For u < 0 the result is erfc(|u|) itself,
not 1 minus something: relative error at most 3.45e-6 (the same on the H100) down to u = -C (erfc(C) =
2.6e-8), where 1 + (two-piece erf) cancels (relative error 1e-3 at u = -3, 0.04 at -3.5, 0.7 at
-3.9, and 1 from -3.9192 on, where it is 0).

Coefficients: a minimax fit by iteratively reweighted least squares on 4000 Chebyshev nodes in
float64 (P relative to erf(x)/x on x in (0, 1], R absolute to log2 erfc on [1, 4]; the one-piece R
to log2 erfc on [0, C] with weight erfc(t) + 0.01: the absolute error of e where erfc >= 0.01, the
relative error below), rounded to f32; ``fit_coefficients()`` and ``fit_one_plus_erf()`` reproduce
them.

``math.exp`` (SwiGLU's silu, x / (1 + exp(-x)), the MLP epilogue of Llama-family models): IREE 3.13
expands it with MLIR's polynomial (Cephes' expf: clamps, a Cody-Waite reduction, a degree-6
polynomial, 2^k by exponent bits), 24 PTX instructions an element, relative error up to 3.15e-7
(its op sequence mirrored in f32 on a dense grid). Here (``emit_exp``), 10:

    t = x * LOG2E                       (rounded)
    c = (fma(x, LOG2E, -t) + x * LOG2E_LO) * LN2     the product's rounding error, exact by the fma
    exp(x) = 2^t * 2^c = fma(2^t, c, 2^t)            |c| <= 2^-17 where 2^t is finite: 2^c = 1 + c to 2^-36

with 2^t as ``nvvm.ex2``; where |t| >= 128 (or t is NaN) 2^t is the result as it stands (+inf, 0,
NaN), so exp(+inf) is not inf * 0. Relative error at most 1.19e-7 (one ulp) with a correctly
rounded 2^t (``exp_reference_f32``), plus ex2.approx's 2^-22: 3.6e-7, IREE's class. Results below
2^-126 flush to 0 (``.ftz``: exp(x) for x < -87.34, where f32 exp is subnormal).

An op on f16 or bf16 (iree-turbine's f16 Llama MLP computes silu in f16) is extended to f32,
expanded and truncated, as IREE's lowering evaluates it.

``arith.divf`` on f16 or bf16 (silu's 1 / (1 + exp(-x)) in the same MLP): IREE extends both to f32
and divides with ``div.rn.f32`` (``rcp.rn.f32`` for 1 / b), whose SASS branches to a slow path on
every element (Nsight Compute on TinyLlama's up projection with its ``silu(gate) * up`` epilogue,
H200: two more branches an element than the plain matmul's; the kernel 4.8 us longer). Here
(``emit_divide``), branch-free, the same bits (that kernel: no branch in its epilogue's SASS, 1.9 us
less in f16, ``docs/PERFORMANCE.md``, "Whole models"):

    r0 = rcp.approx.f32(b)                 (``arith.divf 1, b`` with ``afn``; subnormals kept)
    r  = fma(r0, fma(-b, r0, 1), r0)       one Newton step; r0 where it is NaN (b 0 or +-inf)
    q0 = a * r,  q = fma(fma(-b, q0, a), r, q0)     the residual's correction (Markstein)
                                          q0 where the residual is 0 or q not finite

and truncated to the 16-bit type: f32 division correctly rounded, then rounded to f16 / bf16,
which is the 16-bit quotient correctly rounded (24 >= 2 x 11 + 2 bits: rounding twice is
innocuous), what IREE's lowering gives, bit for bit. bf16 reaches f32's exponent range, where
1 / b overflows (|b| < 2^-128) or is subnormal: a divisor past 2^+-64 and its dividend are first
scaled by 2^-+64 (exact where the quotient is a bf16 value). 1 / b (the dividend the constant 1)
is r0 alone, truncated: rcp.approx is within one f32 ulp of 1 / b (PTX ISA), so it is the
correctly rounded value or a neighbour, and each of the three rounds to the same 16-bit value for
every f16 and every bf16 b (checked for each; an exact f16 reciprocal lies at least 2^-23 relative
from a rounding boundary). Checked in numpy (``divide_reference_f32``, fma rounded once, the reciprocal
correctly rounded and one ulp off each way; ``e2e_tests/test_fast_math.py``): 1 / b for every
f16 and bf16 b, which covers every value rcp.approx may return; a / b for every divisor against
sampled dividends and every dividend against sampled divisors, zeros, infinities and NaN
included, bit for bit against f32 division rounded to the type. f32 division keeps IREE's
lowering.

AMD targets keep ``math.erf``, ``math.exp``, ``arith.divf`` and the add as they are: ROCDL lowers
them to the device library.
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
ERF_LARGE = (
    -0.0010797529,
    -1.6244124,
    -0.9219503,
    -0.14911042,
    0.032660622,
    -0.0049646627,
    0.00045904904,
    -1.925337e-05,
)
SPLIT, CLAMP = 1.0, 4.0
# 1 + erf(u) = erfc(-u) in one piece (emit_one_plus_erf): log2 erfc(t) = R(t) on 0 <= t <= ERFC_CLAMP,
# lowest degree first; fit weight erfc(t) + ERFC_FIT_FLOOR
ONE_PLUS_ERF = (
    1.3775092e-08,
    -1.6279083,
    -0.9184277,
    -0.1483846,
    0.02790448,
    -0.00012737406,
    -0.0021571845,
    0.00083531893,
    -0.00016914032,
    1.8722505e-05,
    -8.9088604e-07,
)
ERFC_CLAMP, ERFC_FIT_FLOOR = 3.9375, 0.01
# Past ERFC_CLAMP the exponent is FLUSH * (ERFC_CLAMP - |u|) <= -1024: 2^that flushes to 0
FLUSH = 2.0**32


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
        signed = arith.SelectOp(
            arith.CmpFOp(arith.CmpFPredicate.OLT, x, _f32(em, x.type, 0.0)).result, arith.NegFOp(large).result, large
        ).result
        # unordered: a NaN selects the small piece, which keeps it (the clamp's min.f32 may not)
        is_small = arith.CmpFOp(arith.CmpFPredicate.ULT, ax, _f32(em, x.type, SPLIT)).result
        return arith.SelectOp(is_small, small, signed).result


def emit_one_plus_erf(em, u: ir.Value) -> ir.Value:
    """1 + erf(u) = erfc(-u) of an f32 scalar or vector in one piece, as above."""
    with em.loc, em.ip:
        au = math_d.AbsFOp(u).result
        r = _horner(em, ONE_PLUS_ERF, au)
        past = math_d.FmaOp(au, _f32(em, u.type, -FLUSH), _f32(em, u.type, FLUSH * ERFC_CLAMP)).result
        r = arith.MinimumFOp(r, past).result
    e = _exp2(em, r)
    with em.loc, em.ip:
        negative = arith.CmpFOp(arith.CmpFPredicate.OLT, u, _f32(em, u.type, 0.0)).result
        return arith.SelectOp(negative, e, arith.SubFOp(_f32(em, u.type, 2.0), e).result).result


def is_one(value: ir.Value, elem: str = "f32") -> bool:
    """Whether ``value`` is an ``arith.constant`` exactly 1.0 of element type ``elem``, scalar or splat."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return False
    attr = owner.operation.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        return str(attr.type) == elem and attr.value == 1.0
    if isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat:
        one = ir.FloatAttr(attr.get_splat_value())
        return str(one.type) == elem and one.value == 1.0
    return False


def _of_f32(t: ir.Type) -> bool:
    """f32, or a vector of f32."""
    return str(ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t) == "f32"


def one_plus_erf(op: ir.Operation) -> ir.Operation | None:
    """The ``math.erf`` of ``op`` when ``op`` is ``arith.addf`` of it and the f32 constant 1.0
    (either order) and nothing else uses the erf: the pair ``emit_one_plus_erf`` replaces."""
    if op.name != "arith.addf":
        return None
    for one, other in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        erf = other.owner
        if (
            is_one(one)
            and not isinstance(erf, ir.Block)
            and erf.operation.name == "math.erf"
            and _of_f32(other.type)
            and len(list(other.uses)) == 1
        ):
            return erf.operation
    return None


# exp(x) = 2^t * 2^c: t = x * LOG2E rounded, c = (the product's rounding error, exact by one fma,
# plus x * LOG2E_LO) * LN2, |c| <= 2^-17 where 2^t is finite, so 2^c = 1 + c to 2^-36
LOG2E, LOG2E_LO, LN2 = 1.4426950216293335, 1.925963033500011e-08, 0.6931471824645996
# |t| at or past this: 2^t is +inf or flushed to 0 (or t is NaN) and is the result as it stands
EXP_FINITE = 128.0


def emit_exp(em, x: ir.Value) -> ir.Value:
    """exp(x) of an f32 scalar or vector, as in the module docstring ("math.exp")."""
    with em.loc, em.ip:
        t = arith.MulFOp(x, _f32(em, x.type, LOG2E)).result
        r = math_d.FmaOp(x, _f32(em, x.type, LOG2E), arith.NegFOp(t).result).result
        r = math_d.FmaOp(x, _f32(em, x.type, LOG2E_LO), r).result
        c = arith.MulFOp(r, _f32(em, x.type, LN2)).result
    e = _exp2(em, t)
    with em.loc, em.ip:
        corrected = math_d.FmaOp(e, c, e).result
        finite = arith.CmpFOp(arith.CmpFPredicate.OLT, math_d.AbsFOp(t).result, _f32(em, x.type, EXP_FINITE)).result
        return arith.SelectOp(finite, corrected, e).result


def emit_divide(em, a: ir.Value | None, b: ir.Value, wide: bool) -> ir.Value:
    """a / b (``a`` None: 1 / b) of f32 scalars or vectors extended from f16 or bf16, branch-free,
    as in the module docstring ("arith.divf"); ``wide``: bf16's exponent range (a and b scaled)."""
    afn = ir.Attribute.parse("#arith.fastmath<afn>")
    one = _f32(em, b.type, 1.0)
    with em.loc, em.ip:
        if wide and a is not None:
            ab = math_d.AbsFOp(b).result
            big = arith.CmpFOp(arith.CmpFPredicate.OGE, ab, _f32(em, b.type, DIVIDE_SCALE)).result
            small = arith.CmpFOp(arith.CmpFPredicate.OLT, ab, _f32(em, b.type, 1.0 / DIVIDE_SCALE)).result
            up = arith.SelectOp(small, _f32(em, b.type, DIVIDE_SCALE), one).result
            scale = arith.SelectOp(big, _f32(em, b.type, 1.0 / DIVIDE_SCALE), up).result
            a, b = arith.MulFOp(a, scale).result, arith.MulFOp(b, scale).result
        r0 = arith.DivFOp(one, b, fastmath=afn).result  # rcp.approx.f32
        if a is None:  # within one f32 ulp: the 16-bit reciprocal it rounds to is the right one
            return r0
        nb = arith.NegFOp(b).result
        r1 = math_d.FmaOp(r0, math_d.FmaOp(nb, r0, one).result, r0).result
        # b = 0 or +-inf: the residual is NaN and r0 (+-inf, +-0) the quotient; b NaN: both NaN
        r = arith.SelectOp(arith.CmpFOp(arith.CmpFPredicate.UNO, r1, r1).result, r0, r1).result
        q0 = arith.MulFOp(a, r).result
        res = math_d.FmaOp(nb, q0, a).result
        q1 = math_d.FmaOp(res, r, q0).result
        # q0 where the residual is 0 (q0 exact, a signed zero included) or q1 not finite (a or b 0,
        # +-inf or NaN, or a / b past f32: q0 +-inf, the residual NaN or infinite)
        corrected = arith.AndIOp(
            arith.CmpFOp(arith.CmpFPredicate.ONE, math_d.AbsFOp(q1).result, _f32(em, b.type, math.inf)).result,
            arith.CmpFOp(arith.CmpFPredicate.UNE, res, _f32(em, b.type, 0.0)).result,
        ).result
        return arith.SelectOp(corrected, q1, q0).result


# Expansions by op name, for the NVIDIA epilogue (epilogue.Epilogue.apply); the pair 1 + erf(u)
# (``one_plus_erf``) is expanded whole by ``emit_one_plus_erf`` instead. An op on f16 or bf16 is
# evaluated as IREE's lowering evaluates it: extended to f32, expanded, truncated.
NVIDIA_EXPANSIONS = {"math.erf": emit_erf, "math.exp": emit_exp}


def _fma_f32(a, b, c) -> np.ndarray:
    """``math.fma`` in f32, rounded once: the product is exact in float64, the sum rounded to odd
    there (TwoSum gives its error; 53 bits >= 2 x 24 + 2), then to f32."""
    a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b
        s = p + c
        v = s - p
        e = (p - (s - v)) + (c - v)
        odd = (e != 0) & (s.view(np.int64) & 1 == 0) & np.isfinite(s)
        return np.where(odd, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s).astype(np.float32)


def _horner_f32(coeffs: tuple, v: np.ndarray) -> np.ndarray:
    """``_horner``'s fma chain in f32 (lowest degree first)."""
    acc = np.full_like(v, np.float32(coeffs[-1]))
    for c in reversed(coeffs[:-1]):
        acc = _fma_f32(acc, v, np.float32(c))
    return acc


# ``arith.minimumf`` propagates NaN, but IREE 3.13 lowers it to PTX ``min.f32`` on sm_90a, which
# returns the other operand when one is NaN (sm_80: ``min.NaN.f32``, which propagates). The
# references take the weaker one by default: both forms must keep NaN either way.
MIN_DROPS_NAN, MIN_KEEPS_NAN = np.fmin, np.minimum


def erf_reference_f32(x: np.ndarray, minimum=MIN_DROPS_NAN) -> np.ndarray:
    """``emit_erf``'s op sequence in numpy f32 (fma rounded once, ex2 correctly rounded), for the
    accuracy check; ``minimum``: how ``arith.minimumf`` treats NaN."""
    x = np.asarray(x, np.float32)
    f = np.float32
    ax = np.abs(x)
    with np.errstate(over="ignore", invalid="ignore"):  # the unused piece may overflow, as on the GPU
        small = (x * _horner_f32(ERF_SMALL, (x * x).astype(f))).astype(f)
        t = minimum(ax, f(CLAMP))
    erfc = np.exp2(_horner_f32(ERF_LARGE, t).astype(np.float64)).astype(f)
    large = (f(1.0) - erfc).astype(f)
    signed = np.where(x < 0, -large, large)
    return np.where(~(ax >= f(SPLIT)), small, signed).astype(f)


def exp_reference_f32(x: np.ndarray) -> np.ndarray:
    """``emit_exp``'s op sequence in numpy f32 (fma rounded once, ex2 correctly rounded and, as
    ``ex2.approx.ftz``, flushing results below 2^-126 to 0), for the accuracy check."""
    x = np.asarray(x, np.float32)
    f = np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        t = (x * f(LOG2E)).astype(f)
        r = _fma_f32(x, f(LOG2E), -t)
        r = _fma_f32(x, f(LOG2E_LO), r)
        c = (r * f(LN2)).astype(f)
        e = np.exp2(t.astype(np.float64))
        e = np.where(e < 2.0**-126, 0.0, e).astype(f)
        corrected = _fma_f32(e, c, e)
    return np.where(np.abs(t) < f(EXP_FINITE), corrected, e).astype(f)


# bf16 divisors past 2^+-64 and their dividends are scaled by 2^-+64 first (emit_divide)
DIVIDE_SCALE = 2.0**64


def _rcp_f32(b: np.ndarray) -> np.ndarray:
    """1 / b correctly rounded to f32 (``rcp.approx.f32``'s model: the lane executor's too)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1.0 / np.asarray(b, np.float32).astype(np.float64)).astype(np.float32)


def divide_reference_f32(a: np.ndarray | None, b: np.ndarray, wide: bool, rcp=_rcp_f32) -> np.ndarray:
    """``emit_divide``'s op sequence in numpy f32 (fma rounded once); ``rcp``: the approximate
    reciprocal (the accuracy check also runs it one ulp off either way); ``a`` None: 1 / b."""
    f = np.float32
    b = np.asarray(b, f)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        if a is None:
            return rcp(b).astype(f)
        if wide:
            ab = np.abs(b)
            small = np.where(ab < f(1 / DIVIDE_SCALE), f(DIVIDE_SCALE), f(1))
            scale = np.where(ab >= f(DIVIDE_SCALE), f(1 / DIVIDE_SCALE), small)
            a, b = (np.asarray(a, f) * scale).astype(f), (b * scale).astype(f)
        r0 = rcp(b).astype(f)
        r1 = _fma_f32(r0, _fma_f32(-b, r0, f(1.0)), r0)
        r = np.where(np.isnan(r1), r0, r1).astype(f)
        a = np.asarray(a, f)
        q0 = (a * r).astype(f)
        res = _fma_f32(-b, q0, a)
        q1 = _fma_f32(res, r, q0)
    return np.where((np.abs(q1) < f(np.inf)) & (res != 0), q1, q0).astype(f)


def one_plus_erf_reference_f32(u: np.ndarray, minimum=MIN_DROPS_NAN) -> np.ndarray:
    """``emit_one_plus_erf``'s op sequence in numpy f32 (fma rounded once, ex2 correctly rounded),
    for the accuracy check; ``minimum`` as above. (ex2's flush of subnormal results needs no
    modelling: its argument is either R(|u|) >= R(ERFC_CLAMP) > -26 or at most -1024.)"""
    u = np.asarray(u, np.float32)
    f = np.float32
    au = np.abs(u)
    with np.errstate(over="ignore", invalid="ignore"):  # |u| far past the clamp: R overflows, as on the GPU
        r = minimum(_horner_f32(ONE_PLUS_ERF, au), _fma_f32(au, f(-FLUSH), f(FLUSH * ERFC_CLAMP)))
        e = np.exp2(r.astype(np.float64)).astype(f)
    return np.where(u < 0, e, (f(2.0) - e).astype(f)).astype(f)


def _chebyshev_nodes(a: float, b: float, nodes: int) -> np.ndarray:
    k = np.arange(nodes)
    return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * nodes))


def _minimax(f: np.ndarray, xs: np.ndarray, degree: int, weight: np.ndarray, iterations: int) -> tuple:
    """Coefficients (lowest degree first, rounded to f32) minimizing max |(poly(xs) - f) * weight|:
    iteratively reweighted least squares in float64."""
    basis = np.vander(xs, degree + 1, increasing=True)
    reweight = np.ones_like(xs)
    for _ in range(iterations):
        w = weight * reweight
        c, *_ = np.linalg.lstsq(basis * w[:, None], f * w, rcond=None)
        err = np.abs((basis @ c - f) * weight)
        reweight = reweight * np.sqrt(err / err.max() + 1e-3)
    return tuple(np.float32(c).tolist())


def fit_coefficients(nodes: int = 4000, iterations: int = 30) -> tuple[tuple, tuple]:
    """Refit (ERF_SMALL, ERF_LARGE) as documented above (float64, then rounded to f32)."""
    erf = np.vectorize(math.erf)
    erfc = np.vectorize(math.erfc)
    xs = _chebyshev_nodes(1e-4, SPLIT, nodes)
    ratio = erf(xs) / xs
    small = _minimax(ratio, xs * xs, len(ERF_SMALL) - 1, 1.0 / ratio, iterations)
    ts = _chebyshev_nodes(SPLIT, CLAMP, nodes)
    large = _minimax(np.log2(erfc(ts)), ts, len(ERF_LARGE) - 1, np.ones_like(ts), iterations)
    return small, large


def fit_one_plus_erf(nodes: int = 4000, iterations: int = 30) -> tuple:
    """Refit ONE_PLUS_ERF as documented above: R to log2 erfc(t) on [0, ERFC_CLAMP], weight
    erfc(t) + ERFC_FIT_FLOOR (float64, then rounded to f32)."""
    erfc = np.vectorize(math.erfc)
    ts = _chebyshev_nodes(0.0, ERFC_CLAMP, nodes)
    return _minimax(np.log2(erfc(ts)), ts, len(ONE_PLUS_ERF) - 1, erfc(ts) + ERFC_FIT_FLOOR, iterations)
