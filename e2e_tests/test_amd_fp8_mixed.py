"""fp8 x bf8 and bf8 x fp8 matmuls (A and B in different 8-bit formats) on the AMD matrix cores:
RDNA4's ``v_wmma_f32_16x16x16_{fp8_bf8,bf8_fp8}`` and CDNA's ``v_mfma_f32_{16x16x32,32x32x16}_
{fp8_bf8,bf8_fp8}`` (OCP formats on gfx950, FNUZ on gfx942).

The layouts against the ISA model, and that each operand is read in its own format, are checked
with every instruction in ``test_layout_model.py``; here the kernels on the lane executor against
numpy: small integers (exact in both formats and in the f32 sum) at zero tolerance, random data
within ``numerics.matmul_reference``'s bound (K unit roundoffs of f32 over sum |a||b|; the
inputs themselves are exact in float64); whole and partial tiles, B stored N x K and K x N, a
batch, both MFMA sizes, and the decode kernel (M <= 32, B N x K). The final ISA of each target is
``lit_tests/isa/fp8_mixed.test``."""

from __future__ import annotations

import pytest
from conftest import simulate, spread

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.runtime.modules import matmul_module

E4M3, E5M2, E4M3Z, E5M2Z = "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ"
# (target, A, B): each mixed pair of each target
PAIRS = [
    ("gfx1201", E4M3, E5M2),
    ("gfx1201", E5M2, E4M3),
    ("gfx950", E4M3, E5M2),
    ("gfx950", E5M2, E4M3),
    ("gfx942", E4M3Z, E5M2Z),
    ("gfx942", E5M2Z, E4M3Z),
]
# (M, N, K, matmul_module keywords): whole and partial tiles, both storage orders of B, a batch
SHAPES = [
    (128, 128, 128, {"transpose_b": True}),
    (96, 160, 192, {}),
    (64, 96, 256, {"transpose_b": True, "batch": 2}),
    (200, 72, 128, {}),
]


def _name(t: str) -> str:
    return {E4M3: "e4m3", E5M2: "e5m2", E4M3Z: "e4m3fnuz", E5M2Z: "e5m2fnuz"}[t]


@pytest.mark.parametrize(
    "m,n,k,kw,target,a,b,exact",
    spread(
        SHAPES,
        [p + (e,) for p in PAIRS for e in (True, False)],
        3,
        row_id=lambda r: f"{r[0]}x{r[1]}x{r[2]}" + "".join(f"-{k}" for k in r[3]),
        column_id=lambda c: f"{c[0]}-{_name(c[1])}x{_name(c[2])}-{'ints' if c[3] else 'random'}",
    ),
)
def test_tiled_kernel_matches_numpy(m, n, k, kw, target, a, b, exact):
    r = simulate(matmul_module(m, n, k, a, "f32", b_type=b, **kw), target, exact=exact, seed=m + n)
    want = f"_{a.upper()}_{b.upper()}"
    assert r.config.intrinsic.endswith(want), r.config.intrinsic
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]


@pytest.mark.parametrize("target,a,b", [PAIRS[0], PAIRS[3], PAIRS[4]], ids=lambda x: str(x))
def test_the_32x32_mfma_and_the_decode_kernel(target, a, b):
    if target != "gfx1201":  # CDNA's 32x32x16 form
        intr = f"MFMA_F32_32x32x16_{a.upper()}_{b.upper()}"
        r = simulate(matmul_module(128, 128, 128, a, "f32", b_type=b), target, {"intrinsic": intr}, seed=5)
        assert r.config.intrinsic == intr and r.check.passed, r.check.line()
    # M within two row tiles, B N x K: K split across the decode kernel's waves
    r = simulate(matmul_module(8, 512, 1024, a, "f32", b_type=b, transpose_b=True), target, seed=9, sample=4)
    assert r.config.waves_k > 1 and r.check.passed, (r.config, r.check.line())


def test_pairs_a_target_lacks_are_refused_by_name():
    for target, a, b in (("gfx1100", E4M3, E5M2), ("gfx950", E5M2Z, E4M3Z), ("gfx942", E4M3, E5M2)):
        with pytest.raises(UnsupportedError, match=f"no matrix instruction on {target} computes {a} x {b} -> f32"):
            codegen_module(matmul_module(64, 64, 64, a, "f32", b_type=b), target)
    # an fp8 pair of different encodings (OCP x FNUZ) exists nowhere
    with pytest.raises(UnsupportedError, match="computes f8E4M3FN x f8E5M2FNUZ"):
        codegen_module(matmul_module(64, 64, 64, E4M3, "f32", b_type=E5M2Z), "gfx950")
