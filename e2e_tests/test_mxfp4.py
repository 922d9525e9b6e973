"""MXFP4 (and MXFP6, MXFP8) matmuls on gfx950: IREE's scaled-matmul form (fp4 A [M, K/32, 32] and B [N, K/32, 32],
E8M0 scales [M, K/32] and [N, K/32], ``arith.scaling_extf`` of each) compiled to the block-scaled
MFMA (``amdgpu.scaled_mfma`` -> ``v_mfma_scale_f32_16x16x128_f8f6f4``).

`select` takes the form in both input orders IREE writes, `normalize` turns it into the plain fp4
A @ B^T the script tiles and moves the scales' bindings to the prologue, `distribute` loads each
lane's A and B scale for every instruction (its row or column, and its 32-value block of the K
step) and issues the scaled MFMA. Each case runs every workgroup on the lane executor against the
reference interpreter's evaluation of the dispatch as IREE formed it (``arith.scaling_extf`` as
x * 2^(e - 127)), sentinel bytes around every tensor, random fp4 bytes and scales 2^-8 .. 2^8:
within the f32 accumulation bound. The final ISA is ``lit_tests/isa/packed_operands.test``'s."""

from __future__ import annotations

import pytest
from conftest import swap_scale_buffers

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.kernels.common import contraction
from mmaflow.runtime.model_check import check_executable
from mmaflow.runtime.modules import scaled_module


def _run(source: str, intrinsic: str = "MFMA_SCALE_F32_16x16x128_F4E2M1FN"):
    (exe,) = codegen_module(source, "gfx950").taken
    assert exe.facts.config.intrinsic == intrinsic, exe.facts.config.intrinsic
    assert exe.facts.problem.scales is not None and exe.facts.problem.scales.block == 32
    (check,) = check_executable(exe)
    return exe, check


@pytest.mark.parametrize(
    "m,n,k,kw",
    [
        (256, 192, 512, {}),  # IREE's operand order (A, B, A-scales, B-scales); a 2-stage ring
        (128, 128, 256, {"order": "asbs"}),  # (A, A-scales, B, B-scales)
        (96, 160, 320, {}),  # partial M and N tiles; K = 320: 10 blocks, the last K tile partial
        (80, 128, 256, {"offsets": True}),  # A and B's scales in one transient binding, at an offset
    ],
    ids=["ab", "asbs", "partial", "offsets"],
)
def test_mxfp4_on_the_executor(m, n, k, kw):
    exe, check = _run(scaled_module(m, n, k, **kw))
    assert check.passed, check.detail
    assert not check.stats.races, check.stats.races[:3]
    p = exe.facts.problem
    assert (p.m, p.n, p.k, p.a_type, p.b_type) == (m, n, k, "f4E2M1FN", "f4E2M1FN")
    if kw.get("offsets"):
        assert p.scales.b.binding == p.a.binding and p.scales.b.offset == m * k // 2, (p.a, p.scales)


@pytest.mark.parametrize(
    "a,b,intrinsic",
    [
        ("f8E4M3FN", "f8E4M3FN", "MFMA_SCALE_F32_16x16x128_F8E4M3FN"),
        ("f8E4M3FN", "f8E5M2", "MFMA_SCALE_F32_16x16x128_F8E4M3FN_F8E5M2"),
        ("f6E2M3FN", "f6E3M2FN", "MFMA_SCALE_F32_16x16x128_F6E2M3FN_F6E3M2FN"),
        ("f6E3M2FN", "f4E2M1FN", "MFMA_SCALE_F32_16x16x128_F6E3M2FN_F4E2M1FN"),
    ],
    ids=["e4m3", "e4m3xe5m2", "e2m3xe3m2", "e3m2xe2m1"],
)
def test_mxfp8_and_mxfp6_on_the_executor(a, b, intrinsic):
    """MXFP8: the same kernel with 8-bit data, whose scaled records read each lane's 32 values as
    one block through their codegen K order (a lane's two 16-value halves made consecutive).
    MXFP6 (alone or against fp4): 24 bytes a lane's block."""
    exe, check = _run(scaled_module(128, 96, 320, a_type=a, b_type=b), intrinsic)
    assert exe.facts.problem.scales is not None and check.passed, check.detail


def test_scales_are_what_is_checked(monkeypatch):
    """The kernel with A's and B's scale buffers exchanged (each lane then reads the other
    operand's scale of the same position) fails the same check."""
    swap_scale_buffers(monkeypatch, contraction.Rewriter, "_block_scales")
    _, check = _run(scaled_module(80, 64, 256))  # (M past the decode kernel's 64: the tiled kernel)
    assert not check.passed and "outside the bound" in check.detail, check.line()


def test_other_targets_and_formats_are_refused():
    """No block-scaled instruction but on gfx950 (one line, naming what the target has); a pair of
    different widths (fp8 x fp4) is catalogued, not compiled (left to IREE with the reason)."""
    with pytest.raises(UnsupportedError, match="no block-scaled matrix instruction on gfx942 computes f4E2M1FN"):
        codegen_module(scaled_module(64, 64, 256), "gfx942")
    narrow_b = scaled_module(64, 64, 96, b_type="f6E2M3FN")  # A's 48-byte rows fit; B's 72-byte ones do not
    res = codegen_module(narrow_b, "gfx950", require_matmul=False)
    assert not res.taken and any(
        "operand B (f6E2M3FN): K = 96 is not a whole number of 16-byte chunks (64 f6E2M3FN values)" in x
        for x in res.log
    ), res.log
    mixed = scaled_module(64, 64, 256, a_type="f8E4M3FN")
    res = codegen_module(mixed, "gfx950", require_matmul=False)
    assert not res.taken
    assert any("8-bit x 4/6-bit pairs share no K order" in x for x in res.log), res.log
