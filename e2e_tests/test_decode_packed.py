"""The decode kernel (``compiler/kernels/decode/``) streaming 4/6-bit and block-scaled operands:
gfx950's f8f6f4 MFMA (fp4, fp6, fp8 x fp4), its block-scaled MFMA (MXFP4 / MXFP6 / MXFP8, MXFP4 at
M = 1 in the form IREE leaves when it drops the unit dimension), RDNA3's and RDNA4's iu4 WMMA.

B's runs are loaded as bytes from the i8 memref the packed binding becomes, 16 bytes a load, and
bit-cast to the instruction's type right before it; A likewise, one run per instruction; each
lane's E8M0 scales are byte loads of its row / column and the MX block its values come from.
Each case runs every workgroup on the lane executor against the reference interpreter's
evaluation of the dispatch as IREE formed it, sentinel bytes around every tensor: exact for the
unscaled formats (small-integer products, exact in f32), within the f32 accumulation bound for
the scaled ones (scales 2^-8 .. 2^8). The final ISA of MXFP4 at M = 1 is
``lit_tests/isa/packed_operands.test``'s."""

from __future__ import annotations

import pytest
from conftest import swap_scale_buffers

from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.kernels.decode import plan as decode_plan
from mmaflow.compiler.kernels.decode import rewrite
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.model_check import check_executable
from mmaflow.runtime.modules import packed_module, scaled_module

_LONG = pytest.mark.exhaustive


def _decode(source: str, target: str, intrinsic: str):
    (exe,) = codegen_module(source, target).taken
    cfg = exe.facts.config
    assert cfg.intrinsic == intrinsic and cfg.waves_k > 1, cfg.describe()  # the decode kernel, not the tiled one
    (check,) = check_executable(exe)
    return exe, check


@pytest.mark.parametrize(
    "target,m,n,a,b,kw,intrinsic,run_bytes",
    [
        # 3 workgroups, the last 8 columns past N; a lane's B run per chunk: one instruction's 32 fp4
        ("gfx950", 4, 40, "f4E2M1FN", None, {}, "MFMA_F32_16x16x128_F4E2M1FN", 16),
        ("gfx950", 1, 32, "f4E2M1FN", None, {}, "MFMA_F32_16x16x128_F4E2M1FN", 16),  # M = 1 (IREE's matvec)
        ("gfx950", 16, 32, "f8E4M3FN", "f4E2M1FN", {}, "MFMA_F32_16x16x128_F8E4M3FN_F4E2M1FN", 16),
        ("gfx950", 3, 32, "f6E2M3FN", None, {}, "MFMA_F32_16x16x128_F6E2M3FN", 48),  # two instructions' 24 bytes
        ("gfx950", 8, 32, "f4E2M1FN", None, {"offsets": True}, "MFMA_F32_16x16x128_F4E2M1FN", 16),  # B at an offset
        ("gfx1100", 4, 32, "i4", None, {}, "WMMA_I32_16x16x16_I4", 16),  # two instructions' 16 i4
        ("gfx1100", 16, 32, "i4", None, {"unsigned": True}, "WMMA_I32_16x16x16_U4", 16),
        ("gfx1201", 4, 32, "i4", None, {}, "WMMA_I32_16x16x32_I4", 16),
    ],
    ids=["fp4", "fp4-m1", "fp8xfp4", "fp6", "fp4-offsets", "iu4-rdna3", "u4-rdna3", "iu4-rdna4"],
)
def test_packed_operands_are_exact(target, m, n, a, b, kw, intrinsic, run_bytes):
    exe, check = _decode(packed_module(m, n, 2048, a, b, **kw), target, intrinsic)
    assert check.passed and check.max_abs_err == 0, check.line()
    assert not check.stats.races, check.stats.races[:3]
    lines = exe.run.headers["distribute"]
    assert any(x.startswith("B: straight to registers") and f"({run_bytes} bytes), no LDS" in x for x in lines), lines


@pytest.mark.parametrize(
    "m,a,b",
    [(16, "f4E2M1FN", "f8E5M2"), (1, "f8E4M3FN", "f6E2M3FN")],
    ids=["fp4xbf8-m16", "fp8xfp6-m1"],
)
def test_mixed_widths_the_kernel_cannot_read_go_to_the_tiled_kernel(m, a, b):
    """A 4/6-bit A against 8-bit B (and the reverse) on 16x16x128: in the chunk's K order A's positions
    are not affine in the lane, so the decode kernel declines with the reason and the tiled kernel
    computes it (random bf8 / fp8 data: within the f32 bound)."""
    (exe,) = codegen_module(packed_module(m, 32, 1024, a, b), "gfx950").taken
    assert exe.facts.config.waves_k <= 1, exe.facts.config.describe()
    reasons = registry.explain(get_target("gfx950"), exe.facts.problem)
    assert any("not the decode kernel" in x and "not affine in the lane" in x for x in reasons), reasons
    (check,) = check_executable(exe)
    assert check.passed, check.line()


@pytest.mark.parametrize(
    "m,n,a,b,intrinsic",
    [
        (1, 48, "f4E2M1FN", "f4E2M1FN", "MFMA_SCALE_F32_16x16x128_F4E2M1FN"),  # IREE drops M = 1
        (4, 40, "f4E2M1FN", "f4E2M1FN", "MFMA_SCALE_F32_16x16x128_F4E2M1FN"),  # B's rows and scales past N: 0
        (16, 32, "f8E4M3FN", "f8E4M3FN", "MFMA_SCALE_F32_16x16x128_F8E4M3FN"),  # a lane's two 16-value halves
        (24, 64, "f8E5M2", "f8E4M3FN", "MFMA_SCALE_F32_32x32x64_F8E5M2_F8E4M3FN"),  # 32-row instruction
        (40, 32, "f4E2M1FN", "f4E2M1FN", "MFMA_SCALE_F32_32x32x64_F4E2M1FN"),  # two 32-row tiles, rows past M
        (3, 32, "f6E2M3FN", "f6E3M2FN", "MFMA_SCALE_F32_16x16x128_F6E2M3FN_F6E3M2FN"),
        (5, 32, "f6E3M2FN", "f4E2M1FN", "MFMA_SCALE_F32_16x16x128_F6E3M2FN_F4E2M1FN"),
    ],
    ids=["mxfp4-m1", "mxfp4", "mxfp8", "mxfp8-32x32", "mxfp4-2tiles", "mxfp6", "mxfp6xfp4"],
)
def test_block_scaled_operands(m, n, a, b, intrinsic):
    exe, check = _decode(scaled_module(m, n, 2048, a_type=a, b_type=b), "gfx950", intrinsic)
    assert check.passed, check.line()
    assert not check.stats.races, check.stats.races[:3]
    assert exe.facts.problem.scales is not None and exe.facts.problem.m == m


@pytest.mark.parametrize(
    "target,source,intrinsic",
    [
        ("gfx950", scaled_module(4, 40, 2048), "MFMA_SCALE_F32_16x16x128_F4E2M1FN"),
        ("gfx1100", packed_module(4, 32, 2048, "i4"), "WMMA_I32_16x16x16_I4"),
    ],
    ids=["mxfp4", "iu4-rdna3"],
)
def test_loads_issued_a_tile_ahead(monkeypatch, target, source, intrinsic):
    """``--config stages=2`` on packed and block-scaled operands: the next K tile's byte runs and
    E8M0 scales loaded before the current tile's instructions, carried in registers; same check.
    The loop mutated to compute on the loads it has just issued instead of the carried ones fails it."""
    opts = CodegenOptions(overrides={"stages": 2, "waves_k": 2})
    (exe,) = codegen_module(source, target, options=opts).taken
    cfg = exe.facts.config
    assert cfg.intrinsic == intrinsic and cfg.stages == 2 and 2048 // cfg.tile_k // cfg.waves_k >= 2, cfg.describe()
    assert any("issued before" in x for x in exe.run.headers["distribute"])
    (check,) = check_executable(exe)
    assert check.passed, check.line()
    assert not check.stats.races, check.stats.races[:3]
    monkeypatch.setattr(rewrite.DecodeRewriter, "_prefetch_carried", False)
    (bad,) = codegen_module(source, target, options=opts).taken
    assert bad.text != exe.text
    (check,) = check_executable(bad)
    assert not check.passed, check.line()


def test_the_scales_are_what_is_checked(monkeypatch):
    """A and B's scale buffers exchanged (each lane reads the other operand's scale of its
    position) fails the same check, by far."""
    swap_scale_buffers(monkeypatch, rewrite.DecodeRewriter, "_scales")
    _, check = _decode(scaled_module(16, 32, 2048), "gfx950", "MFMA_SCALE_F32_16x16x128_F4E2M1FN")
    assert not check.passed and "outside the bound" in check.detail, check.line()


@pytest.mark.parametrize(
    "operand,src,intrinsic",
    [
        ("B", scaled_module(4, 32, 2048), "MFMA_SCALE_F32_16x16x128_F4E2M1FN"),
        # (MXFP6: two instructions a chunk, A's blocks at 0 and 32)
        (
            "A",
            scaled_module(3, 32, 2048, a_type="f6E2M3FN", b_type="f6E3M2FN"),
            "MFMA_SCALE_F32_16x16x128_F6E2M3FN_F6E3M2FN",
        ),
    ],
    ids=["B", "A"],
)
def test_a_misplaced_block_is_caught(monkeypatch, operand, src, intrinsic):
    """One operand's scales read one MX block further on (the block of the next lane group) fail."""
    real = decode_plan.plan_scale_blocks

    def shifted(*args):
        blocks = dict(zip("AB", real(*args)))
        blocks[operand] = tuple(x + 32 for x in blocks[operand])
        return blocks["A"], blocks["B"]

    monkeypatch.setattr(decode_plan, "plan_scale_blocks", shifted)
    _, check = _decode(src, "gfx950", intrinsic)
    assert not check.passed and "outside the bound" in check.detail, check.line()


def test_an_operand_sliced_from_the_wrong_bytes_is_caught(monkeypatch):
    """fp6 runs hold two instructions' bytes (24 each): B's second instruction fed the first's
    bytes fails."""
    real = rewrite.DecodeRewriter._packed_b
    monkeypatch.setattr(rewrite.DecodeRewriter, "_packed_b", lambda self, em, pieces, j: real(self, em, pieces, 0))
    _, check = _decode(packed_module(3, 32, 2048, "f6E2M3FN"), "gfx950", "MFMA_F32_16x16x128_F6E2M3FN")
    assert not check.passed, check.line()


def test_the_plan_says_what_it_streams():
    """MXFP4 at M = 1: the unit dimension restored, the decode plan's lines (``mmaflow report``)
    name B's 16 bytes a lane straight to registers and the block scales."""
    (exe,) = codegen_module(scaled_module(1, 4096, 4096), "gfx950").taken
    log = "\n".join(exe.log)
    assert "4 waves splitting K" in log and "the unit dimension IREE dropped (M = 1) restored" in log, log
    lines = exe.run.headers["distribute"]
    assert "B: straight to registers, 32 elements per lane, column and chunk (16 bytes), no LDS" in lines, lines
    assert any(x.startswith("block scales: per instruction") for x in lines), lines
