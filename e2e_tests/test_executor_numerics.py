"""mmaflow's kernels, run on the CPU lane executor, against numpy: every target, every dtype pair
the distribution supports, square and non-square shapes.

Two checks per case: random data with the rounding-bound tolerance of runtime.numerics, and
small-integer data whose products and sums are exact in the output type, compared exactly (a
single misplaced element fails it, however large the tolerance of the first check).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DTYPES, TARGETS, dynamic_module, epilogue_module, matmul_module, simulate, spread

SQUARE = [64, 128, 256]
NON_SQUARE = [(64, 128, 32), (256, 64, 96), (128, 256, 64)]


def _id(target, overrides):
    return target + ("-w64" if overrides.get("wave_size") == 64 else "")


CASES = []
for target, ov in TARGETS:
    for j, (a_t, c_t) in enumerate(DTYPES[target]):
        # 8-bit inputs stage K in chunks of 64; keep K a multiple of it.
        kq = 64 if a_t.startswith(("i8", "f8")) else 32
        shapes = [(s, s, max(s, kq)) for s in SQUARE] + [(m, n, max(kq, (k // kq) * kq)) for m, n, k in NON_SQUARE]
        for i, (m, n, k) in enumerate(shapes):
            # Default set: f16 -> f32 in the smallest and largest square and a non-square shape on
            # every target, every other dtype in one non-square shape (which one rotating with the
            # dtype); the other shapes with `-m exhaustive`.
            main = (a_t, c_t) == ("f16", "f32")
            marks = () if (main and i in (0, 2, 4)) or (not main and i == 3 + j % 3) else pytest.mark.exhaustive
            CASES.append(
                pytest.param(
                    target, ov, a_t, c_t, m, n, k, marks=marks, id=f"{_id(target, ov)}-{a_t}-{c_t}-{m}x{n}x{k}"
                )
            )


@pytest.mark.parametrize("target,overrides,a_type,c_type,m,n,k", CASES)
def test_matmul_on_executor(target, overrides, a_type, c_type, m, n, k):
    src = matmul_module(m, n, k, a_type, c_type)
    r = simulate(src, target, overrides, seed=m + n + k)
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]
    exact = simulate(src, target, overrides, seed=1, exact=True)
    assert exact.check.passed, exact.check.line()
    assert exact.stats.matrix_ops > 0 and exact.stats.barriers > 0


# AMD's LDS ring (--config stages=2..4): the copies of one stage (raw buffer loads, bounds,
# transposing stores) into `stages` slots, one barrier per K tile. Every AMD target and wave
# size at stages 2 and 3, the same checks as above: K of 64 (2 tiles: fewer than a 3-stage ring
# fills before the loop), 96 (3 tiles: slots wrap) and 8-bit inputs (64-deep K tiles).
AMD_TARGETS = [(t, ov) for t, ov in TARGETS if not t.startswith("sm_")]
EIGHT_BIT = {
    "gfx1100": ("i8", "i32"),
    "gfx1201": ("f8E4M3FN", "f32"),
    "gfx942": ("f8E4M3FNUZ", "f32"),
    "gfx950": ("i8", "i32"),
}
RING_CASES = [
    pytest.param(target, ov, stages, a_t, c_t, m, n, k, id=f"{_id(target, ov)}-s{stages}-{a_t}-{m}x{n}x{k}")
    for target, ov in AMD_TARGETS
    for stages in (2, 3)
    for a_t, c_t, (m, n, k) in [
        ("f16", "f32", (64, 64, 64)),
        ("f16", "f32", (256, 64, 96)),
        EIGHT_BIT[target] + ((64, 128, 192),),
    ]
]


@pytest.mark.parametrize("target,overrides,stages,a_type,c_type,m,n,k", RING_CASES)
def test_amd_ring_on_executor(target, overrides, stages, a_type, c_type, m, n, k):
    src = matmul_module(m, n, k, a_type, c_type)
    ov = dict(overrides, stages=stages)
    r = simulate(src, target, ov, seed=m + n + k)
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]
    exact = simulate(src, target, ov, seed=1, exact=True)
    assert exact.check.passed, exact.check.line()
    k_tiles = -(-k // (64 if a_type.startswith(("i8", "f8")) else 32))
    assert exact.stats.barriers == 1 + k_tiles  # the prologue's and one per K tile


# The ring with everything a kernel's edges carry: partial tiles on every edge (the raw buffer
# bounds check zero-fills), both operands transposed in a batch, dynamic sizes down to K = 0 and
# with divisibility promises, a fused epilogue.
def _ring_variant(name):
    from mmaflow.runtime.numerics import EpilogueReference

    if name == "unaligned":
        return [(matmul_module(45, 71, 83), {}, None)]
    if name == "AtBt-batch":
        return [(matmul_module(33, 47, 70, transpose_a=True, transpose_b=True, batch=2), {}, None)]
    if name == "dynamic":
        src = dynamic_module()
        return [(src, dict(m=17, n=33, k=65), None), (src, dict(m=5, n=6, k=0), None), (src, dict(m=1, n=1, k=1), None)]
    if name == "dynamic-promised":
        src = dynamic_module(divisors=dict(m=16, n=32, k=64))
        return [(src, dict(m=48, n=96, k=192), None)]
    if name == "bias-relu-f16":
        ref = EpilogueReference(lambda acc, b: np.maximum(acc + b[None, :], 0), 1.0, 1)
        src = epilogue_module(
            33,
            47,
            70,
            out_type="f16",
            inputs=[("f32", ("n",))],
            body="%t = arith.addf %acc, %x0 : f32\n%z = arith.maximumf %t, %zero : f32\n"
            "%res = arith.truncf %z : f32 to f16",
        )
        return [(src, None, ref)]
    raise KeyError(name)


# Each variant on two of the eight (target, stages) pairs in the default set, every pair in some
# variant; all forty with `-m exhaustive` (``conftest.spread``).
@pytest.mark.parametrize(
    "variant,target,stages",
    spread(
        ["unaligned", "AtBt-batch", "dynamic", "dynamic-promised", "bias-relu-f16"],
        [(t, s) for t in ("gfx1100", "gfx1201", "gfx942", "gfx950") for s in (2, 3)],
        2,
    ),
)
def test_amd_ring_variants(variant, target, stages):
    for src, sizes, ref in _ring_variant(variant):
        for exact in (False, True):
            r = simulate(src, target, {"stages": stages}, seed=3 + exact, exact=exact, sizes=sizes, epilogue=ref)
            assert r.check.passed, (sizes, r.check.line())
            assert not r.stats.races, r.stats.races[:3]


@pytest.mark.parametrize("target", ["gfx1201", "gfx942"])
def test_amd_ring_four_stages(target):
    """stages=4: three K tiles in flight in registers, the K loop unrolled by 3 with a remainder
    loop (5 static K tiles: one unrolled iteration and 2 left; dynamic K: any count, 0 included)."""
    for src, sizes in [
        (matmul_module(128, 64, 160), None),
        (dynamic_module(), dict(m=40, n=24, k=200)),
        (dynamic_module(), dict(m=5, n=6, k=0)),
    ]:
        r = simulate(src, target, {"stages": 4}, seed=2, exact=True, sizes=sizes)
        assert r.check.passed, (sizes, r.check.line())
        assert not r.stats.races, r.stats.races[:3]
