"""gfx950's f8f6f4 MFMA (``v_mfma_f32_16x16x128_f8f6f4`` / ``_32x32x64_f8f6f4``) in the matmul
kernel: OCP fp8 and bf8 operands, alike or mixed, on the lane executor against numpy -- small
integers (exact in both formats and in the f32 sum) at zero tolerance, random data within
``numerics.matmul_reference``'s bound -- over whole and partial tiles, a K that is not a multiple
of the instruction's 128, B stored N x K and K x N, a batch, and both sizes. The layouts against
the independent ISA model, every one of the 25 format pairs at each size, are
``test_layout_model.py``'s; the final ISA is ``lit_tests/isa/fp8_mixed.test``'s.

The format codes the final ISA carries (cbsz for A, blgp for B) are checked by verify, and that
check bites. fp4 operands (and fp8 x fp4) are ``test_packed_operands.py``'s."""

from __future__ import annotations

import pytest
from conftest import simulate

from mmaflow.compiler.core.errors import VerificationError
from mmaflow.compiler.target.targets import TARGETS
from mmaflow.compiler.verify import check_f8f6f4_formats
from mmaflow.runtime.modules import matmul_module

E4M3, E5M2 = "f8E4M3FN", "f8E5M2"
PAIRS = [(E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2), (E5M2, E4M3)]
# (M, N, K, matmul_module keywords): whole tiles, partial tiles, K = 200 (one and a half
# 128-deep instructions: the last K tile bounded), a batch with B K x N
SHAPES = [
    (128, 128, 256, {"transpose_b": True}),
    (96, 160, 384, {}),
    (64, 96, 200, {"transpose_b": True}),
    (64, 64, 256, {"batch": 2}),
]


def _suffix(a: str, b: str) -> str:
    return a.upper() if a == b else f"{a.upper()}_{b.upper()}"


# small integers for fp8 x fp8 and fp8 x bf8, random data for the other two
EXACT = {(E4M3, E4M3): True, (E4M3, E5M2): True, (E5M2, E5M2): False, (E5M2, E4M3): False}
# the default set's cases (each 2-4 s); every other pair runs in the exhaustive set
DEFAULT = {(1, E4M3, E5M2, 16), (2, E5M2, E5M2, 32)}


@pytest.mark.parametrize(
    "m,n,k,kw,a,b,size,exact",
    [
        pytest.param(
            *shape,
            a,
            b,
            size,
            EXACT[a, b],
            id=f"{shape[0]}x{shape[1]}x{shape[2]}{''.join(f'-{x}' for x in shape[3])}-{a}x{b}-{size}",
            marks=() if (i, a, b, size) in DEFAULT else pytest.mark.exhaustive,
        )
        for i, shape in enumerate(SHAPES)
        for a, b in PAIRS
        for size in (16, 32)
    ],
)
def test_matmul_on_the_executor(m, n, k, kw, a, b, size, exact):
    intr = f"MFMA_F32_{size}x{size}x{128 if size == 16 else 64}_{_suffix(a, b)}"
    # 16x16x128 is gfx950's default for OCP 8-bit operands; 32x32x64 is asked for by name
    overrides = {} if size == 16 else {"intrinsic": intr}
    r = simulate(matmul_module(m, n, k, a, "f32", b_type=b, **kw), "gfx950", overrides, exact=exact, seed=m + k)
    assert r.config.intrinsic == intr, r.config.intrinsic
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]


def test_format_codes_are_verified():
    """verify reads cbsz / blgp off every f8f6f4 line: the right codes pass (0 is not printed),
    a line whose B format is not the plan's is refused by name."""
    gfx950 = TARGETS["gfx950"]
    mixed = gfx950.intrinsic("MFMA_F32_16x16x128_F8E5M2_F8E4M3FN")  # A bf8 (1), B fp8 (0)
    ok = "\tv_mfma_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3] cbsz:1\n"
    check_f8f6f4_formats(ok, "k", mixed)
    with pytest.raises(VerificationError, match=r"formats \(1, 1\).*f8E5M2 x f8E4M3FN are \(1, 0\)"):
        check_f8f6f4_formats(ok.replace("cbsz:1", "cbsz:1 blgp:1"), "k", mixed)
    fp4 = gfx950.intrinsic("MFMA_F32_32x32x64_F4E2M1FN")
    with pytest.raises(VerificationError, match=r"formats \(0, 0\)"):
        check_f8f6f4_formats(ok.replace("16x16x128", "32x32x64").replace(" cbsz:1", ""), "k", fp4)
    check_f8f6f4_formats("\tv_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:19], v[20:23], v[0:15] cbsz:4 blgp:4\n", "k", fp4)
