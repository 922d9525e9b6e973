"""f32 and f64 matmuls on CDNA's f32 / f64 MFMA (gfx942 and gfx950): ``v_mfma_f32_16x16x4_f32``,
``v_mfma_f32_32x32x2_f32``, ``v_mfma_f64_16x16x4_f64``; one element of A and of B per lane, which
``amdgpu.mfma`` takes as scalars.

The catalogue's layouts against the ISA model are checked with every instruction in
``test_layout_model.py``; here the kernels: numerics on the lane executor against numpy (small
integers exact at zero tolerance, random data within ``numerics.matmul_reference``'s bound: K
unit roundoffs of sum |a||b| for the kernel's f32 / f64 sum, twice that for f64, whose float64
reference errs as much), the tiled kernel (partial tiles, B stored N x K, a batch, both f32
instructions) and the decode kernel (small M, a dynamic M versioned on its size); and the final
ISA (the instruction, 128-bit global and LDS loads, no spills). RDNA and NVIDIA have neither:
refused by name. IREE demotes f64 to f32 by default (an f64 matmul arrives as f32 and runs on
the f32 MFMA); ``--iree-input-demote-f64-to-f32=false`` keeps it f64.

gfx942's xf32 MFMA (``v_mfma_f32_16x16x8_xf32``, ``32x32x4``) rounds f32 inputs to 10 mantissa
bits: taken only when a user names it (``--config intrinsic=MFMA_F32_16x16x8_XF32``), checked
within the tolerance of inputs rounded by 2^-10 (``numerics.XF32_INPUT_ROUNDOFF``)."""

from __future__ import annotations

import pytest
from conftest import dynamic_module, simulate, spread

from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.pipeline.pipeline import CodegenOptions
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.modules import epilogue_module, matmul_module
from mmaflow.runtime.numerics import EPILOGUE_REFERENCES
from mmaflow.runtime.simulate import check_matmul

I16, I32, F64 = "MFMA_F32_16x16x4_F32", "MFMA_F32_32x32x2_F32", "MFMA_F64_16x16x4_F64"
KEEP_F64 = ["--iree-input-demote-f64-to-f32=false"]

# (M, N, K, intrinsic, matmul_module keywords): whole and partial tiles, B N x K, a batch.
TILED = [
    (128, 128, 64, I16, {}),
    (96, 160, 72, I16, {"transpose_b": True}),
    (128, 128, 64, I32, {}),
    (64, 96, 40, I32, {"transpose_b": True, "batch": 2}),
]


@pytest.mark.parametrize(
    "m,n,k,intr,kw,target,exact",
    spread(
        TILED,
        [(t, e) for t in ("gfx942", "gfx950") for e in (True, False)],
        1,
        row_id=lambda r: f"{r[0]}x{r[1]}x{r[2]}-{r[3][5:14]}" + "".join(f"-{k}" for k in r[4]),
        column_id=lambda c: f"{c[0]}-{'ints' if c[1] else 'random'}",
    ),
)
def test_tiled_kernel_matches_numpy(m, n, k, intr, kw, target, exact):
    r = simulate(matmul_module(m, n, k, "f32", "f32", **kw), target, {"intrinsic": intr}, exact=exact, seed=m + k)
    assert r.config.intrinsic == intr
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]


def test_default_takes_f32_with_a_fused_epilogue():
    """No --config: the heuristic picks an f32 MFMA; bias over N and relu, f32 out."""
    body = "%t = arith.addf %acc, %x0 : f32\n%res = arith.maximumf %t, %zero : f32"
    src = epilogue_module(128, 192, 96, "f32", out_type="f32", inputs=[("f32", ("n",))], body=body)
    r = simulate(
        src, "gfx942", seed=3, epilogue=EPILOGUE_REFERENCES["bias_n_relu_f16"]
    )  # (relu(acc + b): any out type)
    assert r.config.intrinsic in (I16, I32) and r.check.passed, r.check.line()


@pytest.mark.parametrize("m", [1, 16, pytest.param(48, marks=pytest.mark.exhaustive)])
def test_decode_kernel_matches_numpy(m):
    """M up to two instruction row tiles with B N x K: the decode kernel, K split across waves."""
    r = simulate(matmul_module(m, 1024, 512, "f32", "f32", transpose_b=True), "gfx942", seed=m, sample=4)
    assert r.config.waves_k > 1 and r.check.passed, (r.config, r.check.line())


def test_dynamic_m_runs_both_versions():
    src = dynamic_module(None, 264, 512, in_type="f32", transpose_b=True)
    for m in (40, 100):
        r = simulate(src, "gfx942", sizes={"m": m}, seed=m, sample=4 if m > 64 else 0)
        assert (r.config.waves_k > 1) == (m <= 64) and r.check.passed, (m, r.config, r.check.line())


# (M, N, K, matmul_module keywords): whole and partial tiles, B N x K, 1 and 16 rows (the decode kernel)
F64_CASES = [
    (128, 128, 64, {}),
    (96, 160, 72, {"transpose_b": True}),
    (1, 512, 256, {"transpose_b": True}),
    (16, 256, 128, {"transpose_b": True}),
]


@pytest.mark.parametrize(
    "m,n,k,kw,target,exact",
    spread(
        F64_CASES,
        [(t, e) for t in ("gfx942", "gfx950") for e in (True, False)],
        1,
        row_id=lambda r: f"{r[0]}x{r[1]}x{r[2]}" + "".join(f"-{k}" for k in r[3]),
        column_id=lambda c: f"{c[0]}-{'ints' if c[1] else 'random'}",
    ),
)
def test_f64_matches_numpy(m, n, k, kw, target, exact):
    res = codegen_module(matmul_module(m, n, k, "f64", "f64", **kw), target, extra_flags=KEEP_F64)
    (exe,) = res.taken
    assert exe.facts.config.intrinsic == F64 and (exe.facts.config.waves_k > 1) == (m <= 16)
    r = check_matmul(parse_module(exe.text, new_context()), exact=exact, seed=m + n)
    assert r.check.passed, r.check.line()


def test_f64_is_demoted_to_f32_unless_kept():
    """IREE's default demotes f64 to f32 before mmaflow sees the dispatch."""
    src = matmul_module(128, 128, 64, "f64", "f64")
    (exe,) = codegen_module(src, "gfx942").taken
    assert (exe.facts.problem.a_type, exe.facts.config.intrinsic) == ("f32", I16)
    (exe,) = codegen_module(src, "gfx942", extra_flags=KEEP_F64).taken
    assert (exe.facts.problem.a_type, exe.facts.config.intrinsic) == ("f64", F64)


@pytest.mark.parametrize("target,intr,t", [("gfx942", I16, "f32"), ("gfx950", I32, "f32"), ("gfx942", F64, "f64")])
def test_final_isa(target, intr, t):
    res = compile_module(
        matmul_module(512, 512, 512, t, t),
        target,
        options=CodegenOptions(overrides={"intrinsic": intr}),
        extra_flags=KEEP_F64,
    )  # verified
    (exe,) = res.taken
    rep = res.reports[exe.name]
    mnemonic = get_target(target).intrinsic(intr).mnemonic
    assert mnemonic in res.isa_text[exe.name] and rep.loop_counts.get("matrix", 0) > 0
    assert rep.loop_counts.get("global_load_b128", 0) > 0 and rep.loop_counts.get("lds_load_b128", 0) > 0
    assert not any(rep.loop_counts.get(c) for c in ("global_load_b64", "global_load_b32", "lds_load_b32"))
    assert (rep.vgpr_spills, rep.sgpr_spills, rep.scratch_bytes) == (0, 0, 0)


@pytest.mark.parametrize("target", ["gfx1100", "gfx1201", "sm_80"])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_targets_without_the_instruction_refuse_by_name(target, t):
    with pytest.raises(UnsupportedError, match=f"no matrix instruction on {target} computes {t} x {t} -> {t}"):
        codegen_module(matmul_module(128, 128, 128, t, t), target, extra_flags=KEEP_F64)


XF16, XF32 = "MFMA_F32_16x16x8_XF32", "MFMA_F32_32x32x4_XF32"


@pytest.mark.parametrize(
    "m,n,k,kw,intr",
    [
        (128, 128, 64, {}, XF16),
        (96, 160, 72, {"transpose_b": True}, XF32),
        pytest.param(64, 96, 40, {"batch": 2}, XF16, marks=pytest.mark.exhaustive),
        (8, 512, 256, {"transpose_b": True}, XF16),  # the decode kernel
    ],
    ids=["tiled", "partial-nk", "batch", "decode"],
)
def test_xf32_when_asked_rounds_inputs_within_its_bound(m, n, k, kw, intr):
    """Asked by name, xf32 runs (tiled and decode kernels) and is right within the bound of its
    rounded inputs, and visibly less exact than the f32 instruction on the same data."""
    src = matmul_module(m, n, k, "f32", "f32", **kw)
    r = simulate(src, "gfx942", {"intrinsic": intr}, seed=k)
    assert r.config.intrinsic == intr and r.check.passed, r.check.line()
    plain = simulate(src, "gfx942", seed=k)  # the default: the f32 MFMA, never xf32
    assert not plain.config.intrinsic.endswith("XF32") and plain.check.passed
    err, err_f32 = (float(abs(x.out.astype("f8") - x.ref).max()) for x in (r, plain))
    assert err > 100 * err_f32, (err, err_f32)


def test_xf32_only_on_gfx942_and_only_f32():
    asked = CodegenOptions(overrides={"intrinsic": XF16})
    with pytest.raises(UnsupportedError, match="gfx950 has no intrinsic 'MFMA_F32_16x16x8_XF32'"):
        codegen_module(matmul_module(64, 64, 64, "f32", "f32"), "gfx950", options=asked)  # (CDNA4 dropped it)
    with pytest.raises(UnsupportedError, match="no matrix instruction on gfx1100 computes f32 x f32"):
        codegen_module(matmul_module(64, 64, 64, "f32", "f32"), "gfx1100", options=asked)
    with pytest.raises(ConfigError, match="MFMA_F32_16x16x8_XF32 computes f32xf32->f32"):
        codegen_module(matmul_module(64, 64, 64, "f16", "f32"), "gfx942", options=asked)
