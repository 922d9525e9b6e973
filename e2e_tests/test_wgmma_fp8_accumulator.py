"""The fp8 wgmma accumulator of the ISA model (``runtime/isa/wgmma.fp8_accumulate``), as measured
on the H200 (2026-11-26; the numbers in ``runtime/isa/wgmma.py``'s docstring and docs/kernels/hopper_wgmma.md):
per m64nNk32 instruction, every addend (the input accumulator and the 32 exact products) is cut
toward zero to a multiple of q = 2^(E - 14), E the frexp exponent of the largest magnitude among
them, and the cut addends are summed exactly. Hand-computed cases, a scalar rendering of the
model (``fp8_model``, written apart from the vectorized one) on random data, and the reference
of the kernel's arithmetic (``numerics.fp8_tensor_core_reference``) against it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmaflow.runtime import numerics
from mmaflow.runtime.isa import FP8_ACCUMULATOR_BITS, FP8_CHUNK, fp8_accumulate


def _one(acc: float, products: list[float]) -> float:
    """The model for one output element, in scalar Python (math.frexp / math.trunc)."""
    top = max([abs(acc)] + [abs(p) for p in products])
    if top == 0:
        return 0.0
    q = 2.0 ** (math.frexp(top)[1] - 14)
    return math.trunc(acc / q) * q + sum(math.trunc(p / q) * q for p in products)


def fp8_model(a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """D of one m64nNk32 fp8 wgmma (A 64 x 32, B 32 x N, C 64 x N f32 or None for scale-d 0),
    element by element through ``_one``; float32."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = _one(0.0 if c is None else float(c[i, j]), list(a64[i] * b64[:, j]))
    return out


def _acc(acc, products):
    return float(fp8_accumulate(np.float64(acc), np.asarray(products, np.float64)))


def test_constants_are_the_measured_ones():
    """The model's constants are the best fit recorded from the H200 (e2e_tests/data/fp8_accumulation_h200.log):
    the line of the fit log with the most bit-identical outputs names chunk 32, F 14."""
    import re
    from pathlib import Path

    log = (Path(__file__).parent / "data" / "fp8_accumulation_h200.log").read_text()
    fits = [
        (float(m.group(3)), int(m.group(1)), int(m.group(2)))
        for m in re.finditer(r"chunk (\d+) F (\d+) rz acc_cut True: equal +([\d.]+)%", log)
    ]
    best = max(fits)
    assert best[0] > 90 and (best[2], best[1]) == (FP8_ACCUMULATOR_BITS, FP8_CHUNK), fits


def test_products_below_the_accumulators_grain_vanish():
    # acc = 2^10: E = 11, q = 2^-3; 32 products of 2^-4 each are cut to 0 (exact: 1026)
    assert _acc(2.0**10, [2.0**-4] * 32) == 2.0**10
    # ... and products of 2^-3 are kept whole: 1024 + 4
    assert _acc(2.0**10, [2.0**-3] * 32) == 2.0**10 + 4


def test_a_tiny_product_against_an_accumulator_of_one_is_cut():
    # acc = 1: E = 1, q = 2^-13: 2^-20 is cut, 2^-13 kept
    assert _acc(1.0, [2.0**-20] + [0.0] * 31) == 1.0
    assert _acc(1.0, [2.0**-13] + [0.0] * 31) == 1.0 + 2.0**-13


def test_the_accumulator_itself_is_cut_to_14_bits():
    # acc = 1 + 2^-14 (in f32 exactly): q = 2^-13, so the 2^-14 goes; the largest addend keeps
    # 14 bits (1 + 2^-13 stays)
    assert _acc(1.0 + 2.0**-14, [0.0] * 32) == 1.0
    assert _acc(1.0 + 2.0**-13, [0.0] * 32) == 1.0 + 2.0**-13
    # a product larger than the accumulator sets the grain: acc = 1 + 2^-12, product 4 (E = 3, q = 2^-11)
    assert _acc(1.0 + 2.0**-12, [4.0] + [0.0] * 31) == 5.0


def test_signs_truncate_toward_zero():
    # q = 2^-13 (largest 1): -3 * 2^-15 = -0.375 q truncates to 0 (floor would give -q)
    assert _acc(1.0, [-3 * 2.0**-15] + [0.0] * 31) == 1.0
    assert _acc(1.0, [3 * 2.0**-15] + [0.0] * 31) == 1.0
    # a negative accumulator: -(1 + 2^-14) -> -1, not -(1 + 2^-13)
    assert _acc(-(1.0 + 2.0**-14), [0.0] * 32) == -1.0
    # symmetric: negating every addend negates the result
    rng = np.random.default_rng(0)
    p = rng.uniform(-1, 1, (100, 32))
    c = rng.uniform(-8, 8, 100)
    assert np.array_equal(fp8_accumulate(-c, -p), -fp8_accumulate(c, p))


def test_zero_and_exact_cases():
    assert _acc(0.0, [0.0] * 32) == 0.0
    # integers below 2^14 are multiples of every q <= 1: exact (the kernels' exact-integer tests)
    assert _acc(100.0, list(range(-16, 16))) == 100.0 + sum(range(-16, 16))


def test_vectorized_matches_the_scalar_rendering():
    rng = np.random.default_rng(1)
    for scale in (1.0, 2.0**-10, 2.0**6):
        acc = rng.uniform(-50, 50, 200) * scale
        p = rng.standard_normal((200, 32)) * rng.choice([1e-4, 1.0, 30.0], (200, 1)) * scale
        got = fp8_accumulate(acc, p)
        want = np.array([_one(float(x), list(row)) for x, row in zip(acc, p)])
        assert np.array_equal(got, want)


def test_kernel_reference_promotes_per_k_tile():
    """``fp8_tensor_core_reference``: with promotion, each K tile's 4 chunks are one partial added
    in f32; without, the accumulator runs through every chunk, which cuts it ever coarser as it
    grows (the unpromoted kernel's error, H200: max 0.557 at 4096^3)."""
    rng = np.random.default_rng(2)
    t = numerics.DTYPES["f8E4M3FN"]
    a = rng.uniform(-2, 2, (8, 1024)).astype(np.float32).astype(t)
    b = rng.uniform(-2, 2, (1024, 16)).astype(np.float32).astype(t)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = np.zeros((8, 16), np.float32)
    for k0 in range(0, 1024, 128):
        part = np.zeros((8, 16))
        for c0 in range(k0, k0 + 128, 32):
            part = fp8_accumulate(part, a64[:, None, c0 : c0 + 32] * b64[c0 : c0 + 32].T[None])
        want = want + part.astype(np.float32)
    assert np.array_equal(numerics.fp8_tensor_core_reference(a, b, 128), want)
    exact = a64 @ b64
    plain = numerics.fp8_tensor_core_reference(a, b, 128, promote=False)
    assert np.abs(plain - exact).max() > 4 * np.abs(want - exact).max()


def test_kernel_reference_runs_the_zero_filled_chunks():
    """The kernel's last K tile runs all 4 wgmmas, those past K on zero-filled chunks, and each
    cuts the accumulator to 14 bits again: 1 + 1 + 2^-13 in the first chunk (q = 2^-13, kept:
    2 + 2^-13) is cut to 2 by the next, all-zero one (q = 2^-12)."""

    def ab(k):
        a, b = np.zeros((1, k), np.float32), np.zeros((k, 1), np.float32)
        a[0, :3], b[:3, 0] = (1.0, 1.0, 2.0**-7), (1.0, 1.0, 2.0**-6)
        return a, b

    two = numerics.fp8_tensor_core_reference(*ab(32), 32)[0, 0]
    assert two == 2.0 + 2.0**-13
    assert numerics.fp8_tensor_core_reference(*ab(32), 128)[0, 0] == 2.0  # 3 zero chunks follow
    assert numerics.fp8_tensor_core_reference(*ab(48), 128)[0, 0] == 2.0
    with pytest.raises(ValueError, match="whole chunks of 32"):
        numerics.fp8_tensor_core_reference(*ab(48), 48)
