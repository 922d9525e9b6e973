"""4- and 6-bit operands in the matmul kernel: gfx950's f8f6f4 MFMA reading fp4 (E2M1) and fp6
(E2M3, E3M2), alone or against each other or fp8, RDNA3's iu4 WMMA, signed and unsigned, wave32
and wave64, and RDNA4's (16x16x32 and 16x16x16).

The data reaches the dispatch as IREE passes it: fp4 as bytes bit-cast inside the dispatch
(``tensor<MxK/2xi8>`` -> ``tensor<MxKxf4E2M1FN>``), i4 as a binding IREE packs two to a byte.
`normalize` folds the bitcast into the binding's type; the kernel moves whole bytes (i8 global
and LDS memrefs, 16-byte loads: 32 values) and bit-casts each lane's fragment just before the
instruction. Each case runs every workgroup on the lane executor against the reference
interpreter's evaluation of the dispatch as IREE formed it, sentinel bytes around every tensor,
on random bytes (every fp4 and i4 code). fp4 products are multiples of 1/4 of magnitude at most
36, so for K <= 2^16 every partial sum is exact in f32: the result must match exactly, and the
tests say so (``max_abs_err == 0``; fp8 operands against fp4 are random E4M3 / E5M2 values in
[-2, 2], exact for E4M3 at these K, within the f32 bound for E5M2; fp6's products are multiples of
2^-6 (E2M3) or 2^-5 (E3M2 x fp4) below 2^8, exact in f32 at these K too). The instructions' lane layouts against the independent ISA
model are ``test_layout_model.py``'s; the final ISA (format codes, neg_lo signedness, 16-byte
loads, no spills) is ``lit_tests/isa/packed_operands.test``'s."""

from __future__ import annotations

import pytest

from mmaflow.compiler.core.errors import ConfigError, InputError
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.runtime.model_check import check_executable
from mmaflow.runtime.modules import packed_module

FP4, E4M3, E5M2, F6, BF6 = "f4E2M1FN", "f8E4M3FN", "f8E5M2", "f6E2M3FN", "f6E3M2FN"


def _check(source: str, target: str, overrides: dict | None = None, *, intrinsic: str):
    (exe,) = codegen_module(source, target, options=CodegenOptions(overrides=dict(overrides or {}))).taken
    assert exe.facts.config.intrinsic == intrinsic, exe.facts.config.intrinsic
    checks = check_executable(exe)
    for check in checks:
        assert check.passed, check.detail
        assert not check.stats.races, check.stats.races[:3]
    return exe, checks


@pytest.mark.parametrize(
    "m,n,k,kw,overrides,intrinsic",
    [
        # whole tiles, a K loop of 4 steps
        (256, 128, 512, {}, {}, "MFMA_F32_16x16x128_F4E2M1FN"),
        # partial M and N tiles, K = 320: the last K tile bounded (its bytes past K read as 0)
        (96, 160, 320, {}, {}, "MFMA_F32_16x16x128_F4E2M1FN"),
        # the 32x32x64 instruction, by name
        (128, 128, 256, {}, {"intrinsic": "MFMA_F32_32x32x64_F4E2M1FN"}, "MFMA_F32_32x32x64_F4E2M1FN"),
        # A and B computed by a dispatch of their own: one binding, B at a non-zero byte offset
        (80, 64, 256, {"offsets": True}, {}, "MFMA_F32_16x16x128_F4E2M1FN"),  # (M past the decode kernel's 64)
        # fp8 (E4M3, loaded as is) x fp4 (bytes)
        (128, 96, 256, {"b_type": FP4, "a_type": E4M3}, {}, "MFMA_F32_16x16x128_F8E4M3FN_F4E2M1FN"),
        # fp4 (bytes) x bf8 (E5M2, loaded as is): random bf8 data, within the f32 bound
        (64, 96, 256, {"b_type": E5M2}, {}, "MFMA_F32_16x16x128_F4E2M1FN_F8E5M2"),
        # fp6: 24 bytes a lane's run, rows of 3K/4 bytes copied in 16-byte chunks that split values
        (128, 128, 256, {"a_type": F6, "b_type": F6}, {}, "MFMA_F32_16x16x128_F6E2M3FN"),
        (96, 160, 320, {"a_type": BF6, "b_type": FP4}, {}, "MFMA_F32_16x16x128_F6E3M2FN_F4E2M1FN"),
        # fp6 on 32x32x64: the K tile a whole number of the instruction's K and of fp6's 48-byte chunk
        (
            128,
            128,
            256,
            {"a_type": F6, "b_type": F6},
            {"intrinsic": "MFMA_F32_32x32x64_F6E2M3FN"},
            "MFMA_F32_32x32x64_F6E2M3FN",
        ),
    ],
    ids=["whole", "partial", "32x32x64", "offsets", "fp8xfp4", "fp4xbf8", "fp6", "bf6xfp4", "fp6-32x32x64"],
)
def test_fp4_and_fp6_on_gfx950(m, n, k, kw, overrides, intrinsic):
    kw = dict(kw)
    a_type = kw.pop("a_type", FP4)
    exe, checks = _check(packed_module(m, n, k, a_type, **kw), "gfx950", overrides, intrinsic=intrinsic)
    assert (exe.facts.problem.a_type, exe.facts.problem.b_type) == (a_type, kw.get("b_type", FP4))
    if kw.get("offsets"):
        p = exe.facts.problem
        assert p.a.binding == p.b.binding and p.b.offset == m * k // 2, (p.a, p.b)
    if E5M2 not in (a_type, kw.get("b_type")):
        # exact: see the module docstring. fp8 E4M3 x fp4 too: the random E4M3 data (in [-2, 2],
        # multiples of 2^-9) times fp4 (multiples of 1/2) are multiples of 2^-10 below 2^4, so
        # sums of K <= 2^10 of them are exact in f32. (bf8's 2^-16 steps allow no such K.)
        for check in checks:
            assert check.max_abs_err == 0.0, check.line()


@pytest.mark.parametrize(
    "unsigned,wave,offsets",
    [(False, 32, False), (True, 32, True), (True, 64, False)],
    ids=["signed-wave32", "unsigned-wave32-offsets", "unsigned-wave64"],
)
def test_i4_on_gfx1100(unsigned, wave, offsets):
    name = f"WMMA_I32_16x16x16_{'U4' if unsigned else 'I4'}{'_W64' if wave == 64 else ''}"
    exe, _ = _check(
        packed_module(128, 96, 256, "i4", unsigned=unsigned, offsets=offsets),
        "gfx1100",
        {"wave_size": wave} if wave == 64 else None,
        intrinsic=name,
    )
    assert exe.facts.problem.unsigned_a is unsigned and exe.facts.problem.unsigned_b is unsigned


@pytest.mark.parametrize(
    "unsigned,overrides,name",
    [(False, {}, "WMMA_I32_16x16x32_I4"), (True, {"intrinsic": "WMMA_I32_16x16x16_U4"}, "WMMA_I32_16x16x16_U4")],
    ids=["signed-16x16x32", "unsigned-16x16x16"],
)
def test_i4_on_gfx1201(unsigned, overrides, name):
    """RDNA4's iu4 WMMA: 16x16x32 by default (twice 16x16x16's K in the same cycles), 16x16x16 by
    name; lanes 0-15 hold the first half of K, lanes 16-31 the second (AMD's calculator)."""
    exe, _ = _check(packed_module(96, 128, 256, "i4", unsigned=unsigned), "gfx1201", overrides, intrinsic=name)
    assert exe.facts.problem.unsigned_a is unsigned


def test_nibble_order_is_what_is_checked(monkeypatch):
    """Were element 0 of a byte its high nibble, the kernel (which loads whole bytes and leaves the
    order to the bitcast) would be wrong against the reference: the executor's bitcast read high
    nibble first makes the same kernel fail. fp8 x fp4, because with fp4 on both sides the swap
    permutes A's and B's K alike, which leaves every dot product as it was."""
    import numpy as np

    from mmaflow.runtime.executor import ops

    real = ops._bit_string

    def high_first(v, t):
        bits = real(v, t)
        if str(t) != "i8":
            return bits
        b = bits.reshape(bits.shape[0], -1, 2, 4)[:, :, ::-1, :]
        return np.ascontiguousarray(b).reshape(bits.shape)

    monkeypatch.setattr(ops, "_bit_string", high_first)
    (exe,) = codegen_module(packed_module(64, 64, 128, E4M3, FP4), "gfx950").taken
    (check,) = check_executable(exe)
    assert not check.passed and "outside the bound" in check.detail, check.line()


@pytest.mark.parametrize(
    "source,target,match",
    [
        (
            packed_module(64, 64, 96, F6, F6),
            "gfx950",
            r"operand A \(f6E2M3FN\): K = 96 is not a whole number of 16-byte chunks \(64 f6E2M3FN values\)",
        ),
        (
            packed_module(64, 64, 80),
            "gfx950",
            r"operand A \(f4E2M1FN\): K = 80 is not a whole number of 16-byte chunks \(32 f4E2M1FN values\)",
        ),
        (
            # B stored K x N: its bytes pack two N columns, not two K rows
            packed_module(64, 64, 128)
            .replace("%b0: tensor<64x64xi8>", "%b0: tensor<128x32xi8>")
            .replace(
                "%b0 : tensor<64x64xi8> -> tensor<64x128xf4E2M1FN>",
                "%b0 : tensor<128x32xi8> -> tensor<128x64xf4E2M1FN>",
            )
            .replace("(d0, d1, d2) -> (d1, d2)", "(d0, d1, d2) -> (d2, d1)")
            .replace(
                "tensor<64x128xf4E2M1FN>, tensor<64x128xf4E2M1FN>", "tensor<64x128xf4E2M1FN>, tensor<128x64xf4E2M1FN>"
            ),
            "gfx950",
            r"operand B \(f4E2M1FN\) is packed along N \(stored K x N\): mmaflow loads 4- and 6-bit operands "
            r"packed along K only",
        ),
        (
            packed_module(64, 96, 128)
            .replace("%a0: tensor<64x64xi8>", "%a0: tensor<?x64xi8>, %m: index")
            .replace(
                "%a0 : tensor<64x64xi8> -> tensor<64x128xf4E2M1FN>",
                "%a0 : tensor<?x64xi8>{%m} -> tensor<?x128xf4E2M1FN>{%m}",
            )
            .replace("tensor.empty() : tensor<64x96xf32>", "tensor.empty(%m) : tensor<?x96xf32>")
            .replace("tensor<64x96xf32>", "tensor<?x96xf32>")
            .replace(
                "tensor<64x128xf4E2M1FN>, tensor<96x128xf4E2M1FN>", "tensor<?x128xf4E2M1FN>, tensor<96x128xf4E2M1FN>"
            ),
            "gfx950",
            r"operand A \(f4E2M1FN\) in a matmul of dynamic sizes: mmaflow takes 4- and 6-bit operands in static",
        ),
    ],
    ids=["fp6-k-not-16-bytes", "k-not-16-bytes", "b-packed-along-n", "dynamic-m"],
)
def test_refused_with_one_line(source, target, match):
    with pytest.raises(InputError, match=match):
        codegen_module(source, target)


def test_a_padding_that_splits_bytes_or_chunks_is_refused():
    """An LDS padding that leaves a row of packed data short of a whole byte (129 fp4) or of a
    16-byte chunk (136 fp4: 68 bytes) is a config error, named."""
    for pad, row in ((1, "64.5"), (8, "68")):
        with pytest.raises(
            ConfigError, match=rf"an LDS row of A \({128 + pad} elements with lds_pad={pad}\) is {row} bytes"
        ):
            codegen_module(packed_module(64, 64, 128), "gfx950", options=CodegenOptions(overrides={"lds_pad": pad}))
