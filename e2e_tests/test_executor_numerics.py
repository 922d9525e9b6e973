"""mmaflow's kernels, run on the CPU lane executor, against numpy: every target, every dtype pair
the distribution supports, square and non-square shapes.

Two checks per case: random data with the rounding-bound tolerance of runtime.numerics, and
small-integer data whose products and sums are exact in the output type, compared exactly (a
single misplaced element fails it, however large the tolerance of the first check).
"""

from __future__ import annotations

import pytest

from conftest import matmul_module, simulate

# (target, config overrides) -- gfx1100 in wave32 and wave64.
TARGETS = [("gfx1100", {}), ("gfx1100", {"wave_size": 64}), ("gfx1201", {}), ("gfx942", {}),
           ("gfx950", {}), ("sm_80", {}), ("sm_90a", {})]

# Dtype pairs per target family (inputs, output): everything the catalogue has an instruction for.
DTYPES = {
    "gfx1100": [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("i8", "i32")],
    "gfx1201": [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("i8", "i32"),
                ("f8E4M3FN", "f32"), ("f8E5M2", "f32")],
    "gfx942": [("f16", "f32"), ("bf16", "f32"), ("i8", "i32"), ("f8E4M3FNUZ", "f32"), ("f8E5M2FNUZ", "f32")],
    "gfx950": [("f16", "f32"), ("bf16", "f32"), ("i8", "i32"), ("f8E4M3FN", "f32"), ("f8E5M2", "f32")],
    "sm_80": [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("i8", "i32")],
    "sm_90a": [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("i8", "i32")],
}

SQUARE = [64, 128, 256]
NON_SQUARE = [(64, 128, 32), (256, 64, 96), (128, 256, 64)]


def _id(target, overrides):
    return target + ("-w64" if overrides.get("wave_size") == 64 else "")


CASES = []
for target, ov in TARGETS:
    for a_t, c_t in DTYPES[target]:
        # 8-bit inputs stage K in chunks of 64; keep K a multiple of it.
        kq = 64 if a_t.startswith(("i8", "f8")) else 32
        shapes = [(s, s, max(s, kq)) for s in SQUARE] + [(m, n, max(kq, (k // kq) * kq)) for m, n, k in NON_SQUARE]
        for i, (m, n, k) in enumerate(shapes):
            # Default set: the smallest and largest square and one non-square shape of every target
            # and dtype; the other three shapes with `-m exhaustive`.
            marks = () if i in (0, 2, 4) else pytest.mark.exhaustive
            CASES.append(pytest.param(target, ov, a_t, c_t, m, n, k, marks=marks,
                                      id=f"{_id(target, ov)}-{a_t}-{c_t}-{m}x{n}x{k}"))


@pytest.mark.parametrize("target,overrides,a_type,c_type,m,n,k", CASES)
def test_matmul_on_executor(target, overrides, a_type, c_type, m, n, k):
    src = matmul_module(m, n, k, a_type, c_type)
    r = simulate(src, target, overrides, seed=m + n + k)
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]
    exact = simulate(src, target, overrides, seed=1, exact=True)
    assert exact.check.passed, exact.check.line()
    assert exact.stats.matrix_ops > 0 and exact.stats.barriers > 0

