"""Fused epilogues: elementwise consumers of the matmul in the same dispatch, applied in registers
before the store, on every target, on the lane executor against numpy.

Each case is a module (matmul + one elementwise linalg.generic that IREE fuses into the matmul's
dispatch) and its numpy reference with the epilogue's error amplification (numerics.
EpilogueReference). Cases whose epilogue is exact on small integers (bias, relu, casts, scales by
powers of two) are also run on small-integer data and compared exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ALL_TARGETS, epilogue_module, handed_back, simulate, spread

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.runtime.modules import EPILOGUES
from mmaflow.runtime.numerics import EPILOGUE_REFERENCES, EpilogueReference

RELU_BIAS_F16 = """
%t = arith.addf %acc, %x0 : f32
%z = arith.maximumf %t, %zero : f32
%res = arith.truncf %z : f32 to f16"""

GELU_TANH = """
%c0_5 = arith.constant 0.5 : f32
%c1 = arith.constant 1.0 : f32
%ck = arith.constant 0.7978845608 : f32
%cc = arith.constant 0.044715 : f32
%x2 = arith.mulf %acc, %acc : f32
%x3 = arith.mulf %x2, %acc : f32
%p = arith.mulf %cc, %x3 : f32
%s = arith.addf %acc, %p : f32
%u = arith.mulf %ck, %s : f32
%th = math.tanh %u : f32
%one_plus = arith.addf %c1, %th : f32
%h = arith.mulf %c0_5, %acc : f32
%res = arith.mulf %h, %one_plus : f32"""

GELU_ERF = """
%c0_5 = arith.constant 0.5 : f32
%c1 = arith.constant 1.0 : f32
%rs2 = arith.constant 0.7071067812 : f32
%u = arith.mulf %acc, %rs2 : f32
%er = math.erf %u : f32
%one_plus = arith.addf %c1, %er : f32
%h = arith.mulf %c0_5, %acc : f32
%res = arith.mulf %h, %one_plus : f32"""


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


_erf = np.vectorize(math.erf)


def _gelu_erf(x):
    return 0.5 * x * (1 + _erf(x * 0.7071067812))


# name -> (module keyword arguments, reference, exact on small integers)
CASES = {
    # bias over columns + relu, f32 accumulator stored as f16
    "bias_n-relu-f16": (
        dict(out_type="f16", inputs=[("f32", ("n",))], body=RELU_BIAS_F16),
        EpilogueReference(lambda acc, b: np.maximum(acc + b[None, :], 0), 1.0, 2),
        True,
    ),
    # bias over rows (one value per row, broadcast along the run)
    "bias_m": (
        dict(out_type="f32", inputs=[("f32", ("m",))], body="%res = arith.addf %acc, %x0 : f32"),
        EpilogueReference(lambda acc, b: acc + b[:, None], 1.0, 1),
        True,
    ),
    # f32 accumulator, f16 output: the cast alone
    "cast-f16": (
        dict(out_type="f16", body="%res = arith.truncf %acc : f32 to f16"),
        EpilogueReference(lambda acc: acc, 1.0, 0),
        True,
    ),
    # scale by a constant, stored as bf16
    "scale-bf16": (
        dict(
            out_type="bf16",
            body="%s = arith.constant 0.125 : f32\n%v = arith.mulf %acc, %s : f32\n"
            "%res = arith.truncf %v : f32 to bf16",
        ),
        EpilogueReference(lambda acc: acc * 0.125, 0.125, 1),
        True,
    ),
    # residual add (an M x N f16 tensor, widened), stored as f16
    "residual-f16": (
        dict(
            out_type="f16",
            inputs=[("f16", ("m", "n"))],
            body="%w = arith.extf %x0 : f16 to f32\n%v = arith.addf %acc, %w : f32\n"
            "%res = arith.truncf %v : f32 to f16",
        ),
        EpilogueReference(lambda acc, r: acc + r, 1.0, 1),
        True,
    ),
    # a transposed residual (N x M): one load per element
    "residual_T": (
        dict(out_type="f32", inputs=[("f32", ("n", "m"))], body="%res = arith.subf %acc, %x0 : f32"),
        EpilogueReference(lambda acc, r: acc - r.T, 1.0, 1),
        True,
    ),
    # gelu, tanh approximation and erf form (math dialect in registers)
    "gelu_tanh": (dict(out_type="f32", body=GELU_TANH), EpilogueReference(_gelu_tanh, 1.13, 12), False),
    "gelu_erf": (dict(out_type="f32", body=GELU_ERF), EpilogueReference(_gelu_erf, 1.13, 8), False),
    # bias + erf gelu stored as f16: the module `mmaflow bench --variants` times against torch eager
    "bias_n-gelu-f16": (
        EPILOGUES["bias_n_gelu_f16"],
        EpilogueReference(lambda acc, b: _gelu_erf(acc + b[None, :]), 1.13, 10),
        False,
    ),
    # SwiGLU: silu(gate) * up, up an M x N f16 input; in f32, and in f16 as iree-turbine exports it
    "silu_mul-f16": (EPILOGUES["silu_mul_f16"], EPILOGUE_REFERENCES["silu_mul_f16"], False),
    "silu_mul-f16math": (EPILOGUES["silu_mul_f16math"], EPILOGUE_REFERENCES["silu_mul_f16math"], False),
    "silu_mul-bf16math": (EPILOGUES["silu_mul_bf16math"], EPILOGUE_REFERENCES["silu_mul_bf16math"], False),
    "silu_mul-f16recip": (EPILOGUES["silu_mul_f16recip"], EPILOGUE_REFERENCES["silu_mul_f16recip"], False),
    # two inputs: per-column scale and per-row shift
    "scale_n-shift_m": (
        dict(
            out_type="f32",
            inputs=[("f32", ("n",)), ("f32", ("m",))],
            body="%v = arith.mulf %acc, %x0 : f32\n%res = arith.addf %v, %x1 : f32",
        ),
        EpilogueReference(lambda acc, s, t: acc * s[None, :] + t[:, None], 1.0, 2),
        True,
    ),
}


def _module(name, m=64, n=96, k=64, **extra):
    kw, _, _ = CASES[name]
    return epilogue_module(m, n, k, **{**kw, **extra})


# Each epilogue on three targets in the default set (every target on about half of them), every
# epilogue on every target with `-m exhaustive` (``conftest.spread``).
@pytest.mark.parametrize("name,target", spread(list(CASES), ALL_TARGETS, 3))
def test_epilogue(target, name):
    _, ref, exact = CASES[name]
    src = _module(name)
    r = simulate(src, target, seed=3, epilogue=ref)
    assert r.check.passed, r.check.line()
    assert not r.stats.races
    if exact:
        e = simulate(src, target, seed=4, exact=True, epilogue=ref)
        assert e.check.passed, e.check.line()


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_epilogue_unaligned(target):
    """Partial tiles: the epilogue's input loads are bounded like the matmul's."""
    src = _module("scale_n-shift_m", m=45, n=71, k=40)
    r = simulate(src, target, seed=5, epilogue=CASES["scale_n-shift_m"][1])
    assert r.check.passed, r.check.line()
    src = _module("bias_n-relu-f16", m=33, n=47, k=70)
    e = simulate(src, target, seed=6, exact=True, epilogue=CASES["bias_n-relu-f16"][1])
    assert e.check.passed, e.check.line()


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_epilogue_batch(target):
    """Batch matmul with a per-batch scale and a per-(batch, column) bias."""
    src = epilogue_module(
        32,
        64,
        32,
        out_type="f32",
        batch=3,
        inputs=[("f32", ("b",)), ("f32", ("b", "n"))],
        body="%v = arith.mulf %acc, %x0 : f32\n%res = arith.addf %v, %x1 : f32",
    )
    ref = EpilogueReference(lambda acc, s, b: acc * s[:, None, None] + b[:, None, :], 1.0, 2)
    r = simulate(src, target, seed=7, epilogue=ref)
    assert r.check.passed, r.check.line()


@pytest.mark.parametrize("target", ["gfx1100", "gfx1201", "gfx942", "gfx950", "sm_80", "sm_90a"])
def test_int8_dequantize(target):
    """i8 x i8 -> i32, then a per-column f32 scale: the quantized-linear epilogue."""
    src = epilogue_module(
        64,
        64,
        128,
        "i8",
        "i32",
        out_type="f32",
        inputs=[("f32", ("n",))],
        body="%fl = arith.sitofp %acc : i32 to f32\n%res = arith.mulf %fl, %x0 : f32",
    )
    ref = EpilogueReference(lambda acc, s: acc * s[None, :], 1.0, 2)
    r = simulate(src, target, seed=8, epilogue=ref)
    assert r.check.passed, r.check.line()


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_epilogue_compiles_to_isa(target):
    """The whole way down: verify finds our kernel; the math ops lower on every target."""
    for name in ("bias_n-relu-f16", "gelu_erf", "gelu_tanh"):
        res = compile_module(_module(name), target)
        (exe,) = res.taken
        assert res.reports[exe.name].counts.get("matrix", 0) > 0


@pytest.mark.parametrize("name", ["scale-bf16", "silu_mul-bf16math"])
def test_bf16_truncation_is_one_conversion_on_nvidia(name):
    """An epilogue's f32 -> bf16 ``arith.truncf`` is ``llvm.fptrunc`` on NVIDIA (one
    cvt.rn.bf16x2.f32 a pair; IREE 3.13 expands the arith op into integer rounding, about seven
    instructions an element); AMD keeps the arith op. Its numerics: ``test_epilogue`` (exact for
    scale-bf16) on every target."""
    for target in ("sm_80", "sm_90a", "gfx942"):
        lines = handed_back(_module(name), target).splitlines()
        truncs = [x for x in lines if "= arith.truncf " in x and "bf16" in x.rsplit(" to ", 1)[-1]]
        fptruncs = [x for x in lines if "= llvm.fptrunc " in x and "bf16" in x.rsplit(" to ", 1)[-1]]
        if target.startswith("sm_"):
            assert fptruncs and not truncs, (name, target)
        else:
            assert truncs and not fptruncs, (name, target)


def test_epilogue_needs_its_reference():
    from mmaflow.compiler.core.errors import MmaflowError

    with pytest.raises(MmaflowError, match="fused epilogue .*numpy reference"):
        simulate(_module("bias_m"), "gfx942")


@pytest.mark.parametrize(
    "body,why",
    [
        (
            "%i = linalg.index 0 : index\n%c = arith.index_cast %i : index to i32\n%fl = arith.sitofp %c : i32 to f32\n"
            "%res = arith.addf %acc, %fl : f32",
            "depends on the element's position",
        ),
        ("%res = arith.addf %o, %acc : f32", "reads an uninitialized tensor"),
    ],
)
def test_unsupported_epilogue_is_a_clear_error(body, why):
    src = epilogue_module(64, 64, 64, out_type="f32", body=body)
    with pytest.raises(UnsupportedError, match=why):
        codegen_module(src, "gfx942")


def test_matmul_result_also_returned_stays_unfused():
    """The module returns the matmul and its relu: IREE makes two dispatches; mmaflow takes the
    matmul, the relu stays with IREE (and the matmul has no epilogue)."""
    src = epilogue_module(64, 64, 64, out_type="f32", body="%res = arith.maximumf %acc, %zero : f32")
    src = src.replace(") -> tensor<64x64xf32> {", ") -> (tensor<64x64xf32>, tensor<64x64xf32>) {", 1)
    src = src.replace("return %res_t : tensor<64x64xf32>", "return %r, %res_t : tensor<64x64xf32>, tensor<64x64xf32>")
    res = codegen_module(src, "sm_80")
    assert len(res.executables) == 2 and len(res.taken) == 1
    assert any("left  matmul_dispatch_1: no matmul-like contraction" in line for line in res.log), res.log
    assert not any("epilogue" in line for line in res.log), res.log


def test_bench_epilogue_reference_agrees_with_this_file():
    """The reference `mmaflow bench --checks/--variants` uses on the GPU for bias + gelu
    (runtime.numerics) against this file's, on random data: the same values and bounds."""
    rng = np.random.default_rng(11)
    acc, bias = rng.normal(0, 8, (7, 9)), rng.uniform(-1, 1, 9)
    ours = CASES["bias_n-gelu-f16"][1]
    bench = EPILOGUE_REFERENCES["bias_n_gelu_f16"]
    np.testing.assert_allclose(bench.fn(acc, bias), ours.fn(acc, bias), rtol=1e-15, atol=1e-15)
    assert (bench.lipschitz, bench.ops) == (ours.lipschitz, ours.ops)
