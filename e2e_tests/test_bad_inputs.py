"""Bad inputs a new user tries, CLI and API alike: each gives a clear error naming the problem and
a non-zero exit before any work is done (never a traceback, a signal or reinterpreted bytes), or
the right result where the input is legal (K = 0, unit dimensions, a unit batch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mmaflow.compiler.core.errors import ConfigError, InputError
from mmaflow.runtime import compile_module, matmul, run_module
from mmaflow.runtime.modules import dynamic_module, matmul_module, matmul_source
from mmaflow.runtime.numerics import compare


def _mmaflow(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "mmaflow.compiler.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def _clean_failure(r, *needles):
    assert r.returncode not in (0, 70) and r.returncode > 0, (r.returncode, r.stderr)  # 70: internal error
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


@pytest.fixture(scope="module")
def f16_art():
    return compile_module(matmul_source(32, 48, 64, "f16", "f32"), "gfx942", lower=False)


# ---- wrong arrays: never reinterpreted ---------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.astype(np.float32),
        lambda a: a.astype(np.float64),
        lambda a: a.astype(ml_dtypes.bfloat16),
        lambda a: a.astype(np.int8),
    ],
    ids=["f32", "f64", "bf16", "i8"],
)
def test_run_module_rejects_other_dtypes(f16_art, make):
    a = np.ones((32, 64), np.float16)
    b = np.ones((64, 48), np.float16)
    with pytest.raises(InputError, match=r"A is \w+, the module takes f16"):
        run_module(f16_art, [make(a), b], device="sim")


def test_run_module_rejects_lists_shapes_and_counts(f16_art):
    a, b = np.ones((32, 64), np.float16), np.ones((64, 48), np.float16)
    with pytest.raises(InputError, match="A must be a numpy array of float16"):
        run_module(f16_art, [a.tolist(), b], device="sim")
    with pytest.raises(InputError, match="inputs must be a list"):
        run_module(f16_art, a, device="sim")
    with pytest.raises(InputError, match="2 arrays, 1 given"):
        run_module(f16_art, [a], device="sim")
    with pytest.raises(InputError, match="the module's m is 32, the inputs give 16"):
        run_module(f16_art, [a[:16], b], device="sim")
    with pytest.raises(InputError, match="A has K = 64, B has K = 32"):
        run_module(f16_art, [a, b[:32]], device="sim")


def test_matmul_rejects_lists_and_unsupported_out_dtype():
    a = np.ones((16, 16), np.float16)
    with pytest.raises(InputError, match="A must be a numpy array, got list"):
        matmul(a.tolist(), a, target="gfx942", device="sim")
    with pytest.raises(InputError, match="out_dtype 'f64' with f16 inputs: mmaflow stores f32 or f16"):
        matmul(a, a, target="gfx942", device="sim", out_dtype="f64")
    with pytest.raises(InputError, match="out_dtype 'f16' with i8 inputs"):
        matmul(a.astype(np.int8), a.astype(np.int8), target="gfx942", device="sim", out_dtype="f16")


def test_matmul_names_what_to_pass_instead_of_f32_or_i32_arrays():
    """numpy's default arrays (float32, int32): no instruction multiplies them; the error says what
    mmaflow multiplies and how to convert, not a sentence cut short."""
    from mmaflow.compiler.core.errors import UnsupportedError

    for dtype, convert, acc in ((np.float32, "np.float16", "f32"), (np.int32, "np.int8", "i32")):
        a = np.ones((16, 16), dtype)
        with pytest.raises(UnsupportedError) as e:
            matmul(a, a, target="gfx942", device="sim")
        text = str(e.value)
        assert text.startswith(
            f"mmaflow has no matrix instruction for {np.dtype(dtype)} inputs; it multiplies f16, bf16, i8, "
        ), text
        assert f"a.astype({convert})" in text and f"accumulates and returns in {acc}" in text, text
        assert not text.rstrip().endswith("stores"), text


# ---- K = 0, M = 0 --------------------------------------------------------------------------------
def test_matmul_k0_is_zeros():
    c = matmul(np.ones((16, 0), np.float16), np.ones((0, 24), np.float16), target="gfx942", device="sim")
    assert c.shape == (16, 24) and c.dtype == np.float32 and not c.any()
    c = matmul(np.ones((5, 0), np.int8), np.ones((0, 7), np.int8), target="sm_80", device="sim")
    assert c.shape == (5, 7) and c.dtype == np.int32 and not c.any()
    c = matmul(np.ones((0, 8), np.float16), np.ones((8, 3), np.float16), target="gfx1100", device="sim")
    assert c.shape == (0, 3)


def test_module_with_k0_is_refused_before_iree_runs(tmp_path):
    """IREE 3.13 dies of SIGFPE on a zero-sized contraction; in-process that would kill the
    caller. The error names the op and the file."""
    src = tmp_path / "k0.mlir"
    src.write_text(matmul_source(16, 16, 0, "f16", "f32"))
    for cmd in (
        ("run", str(src), "--target", "gfx942", "--device", "sim"),
        ("compile", str(src), "--target", "sm_80", "-o", str(tmp_path / "x.vmfb")),
    ):
        _clean_failure(_mmaflow(*cmd), "k0.mlir:", "linalg.matmul has a zero-sized operand (tensor<16x0xf16>)")
    with pytest.raises(InputError, match="my.mlir:.*zero-sized operand"):
        compile_module(src.read_text(), "gfx942", lower=False, source_name="my.mlir")


@pytest.mark.exhaustive
def test_dynamic_m0_and_k0_at_run_time(tmp_path):
    """Run-time sizes of 0 are legal: no workgroups (M = 0) or an all-zero result (K = 0)."""
    src = tmp_path / "dyn.mlir"
    src.write_text(dynamic_module(n=64))
    for dims in ("m=0,k=64", "m=40,k=0"):
        for target in ("gfx942", "sm_80"):
            r = _mmaflow("run", str(src), "--target", target, "--device", "sim", "--dims", dims)
            assert r.returncode == 0 and "PASS" in r.stdout, (dims, target, r.stdout, r.stderr)


@pytest.mark.exhaustive
def test_run_estimates_a_dynamic_module_from_its_run_time_sizes(tmp_path):
    """The lane executor's time estimate of a dynamic module: from --dims' sizes (not 4096 for
    every dynamic dimension: 'about 1145 s' for a 0.2 s run), and never printed before an error
    (--dims missing)."""
    src = tmp_path / "dyn.mlir"
    src.write_text(dynamic_module())
    r = _mmaflow("run", str(src), "--target", "gfx942", "--device", "sim", "--dims", "m=64,n=64,k=64")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    assert "needs about" not in r.stderr, r.stderr
    r = _mmaflow("run", str(src), "--target", "gfx942", "--device", "sim")
    _clean_failure(r, "mmaflow: error: the module has dynamic m, n, k: give the run-time sizes with --dims")
    assert "needs about" not in r.stderr, r.stderr
    from mmaflow.runtime.model_check import EXECUTOR_MACS_PER_SECOND, estimate_seconds

    (exe,) = compile_module(dynamic_module(), "gfx942", lower=False).executables
    assert estimate_seconds(exe, 0, {"m": 64, "n": 32, "k": 16}) == 64 * 32 * 16 / EXECUTOR_MACS_PER_SECOND


def test_run_refuses_a_module_with_nothing_taken(tmp_path):
    """Nothing for the lane executor to check: refused as `mmaflow compile` refuses it, not
    'PASS: 0 of 0 checks passed' with exit 0."""
    src = Path(__file__).parent.parent / "lit_tests" / "Inputs" / "elementwise.mlir"
    r = _mmaflow("run", str(src), "--target", "gfx942", "--device", "sim")
    _clean_failure(r, f"mmaflow: error: no matmul-like contraction that mmaflow compiles in {src} (add_dispatch_0: ")
    assert r.returncode == 2 and "PASS" not in r.stdout, r.stdout
    assert [line for line in r.stderr.splitlines() if line.startswith("mmaflow")] == [
        line for line in r.stderr.splitlines() if line.startswith("mmaflow: error:")
    ], r.stderr


# ---- config --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"foo": 1},
            "unknown config key 'foo'; valid keys: cluster, copy, intrinsic, lds_pad, persistent, producer, raster, split_k, stages, tile",
        ),
        ({"raster": 0}, "raster must be 1 to 64 (tile rows per workgroup group), got 0"),
        ({"tile_m": 64.0}, "tile_m=64.0 is a float: give an integer"),
        ({"tile_m": True}, "tile_m=True is a bool"),
        ({"tile": "64x64"}, "config value 'tile=64x64' is malformed"),
        ([1, 2], "config must be a dict {key: value} or a list of 'KEY=VALUE' strings, got list"),
        ("tile_m=64", "got str"),
    ],
)
def test_api_config_errors(config, message):
    with pytest.raises(ConfigError) as e:
        compile_module(matmul_source(64, 64, 64, "f16", "f32"), "gfx942", config=config, lower=False)
    assert message in str(e.value)


def test_api_config_accepts_strings_like_the_cli():
    art = compile_module(
        matmul_source(64, 64, 64, "f16", "f32"), "gfx942", lower=False, config={"tile_m": "32", "waves": "1x2"}
    )
    cfg = art.executables[0].facts.config
    assert (cfg.tile_m, cfg.waves_m, cfg.waves_n) == (32, 1, 2)
    a = np.ones((32, 32), np.float16)
    assert (matmul(a, a, target="gfx942", device="sim", config=["tile=32x32x32"]) == 32).all()
    with pytest.raises(ConfigError, match="unknown config key 'tiles'"):
        matmul(a, a, target="gfx942", device="sim", config={"tiles": 1})


# ---- files and options ---------------------------------------------------------------------------
def test_output_and_dump_dir_checked_before_compiling(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(64, 64, 64, "f16", "f32"))
    r = _mmaflow("compile", str(src), "--target", "gfx942", "-o", str(tmp_path / "missing" / "x.vmfb"))
    _clean_failure(r, "directory", "does not exist")
    assert "taken" not in r.stderr  # refused before the compile
    _clean_failure(_mmaflow("compile", str(src), "--target", "gfx942", "-o", str(tmp_path)), "is a directory")
    blocker = tmp_path / "file"
    blocker.write_text("")
    _clean_failure(
        _mmaflow("compile", str(src), "--target", "gfx942", "--dump-dir", str(blocker / "d")),
        "--dump-dir",
        "cannot be written",
    )


def test_dump_dir_alone_keeps_every_stage_and_stdout_stays_quiet(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(64, 64, 64, "f16", "f32"))
    d = tmp_path / "dumps"
    r = _mmaflow("compile", str(src), "--target", "gfx942", "--dump-dir", str(d), "-o", str(tmp_path / "x.vmfb"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and f"written to {d}" in r.stderr
    names = sorted(p.name for p in d.iterdir())
    assert "matmul_dispatch_0.05-distribute.mlir" in names and "iree" in names and "after-all.mlir" in names
    assert "// distribute: " in (d / "matmul_dispatch_0.05-distribute.mlir").read_text()  # the plan


@pytest.mark.parametrize(
    "args, message",
    [
        (("--seed", "-1"), "argument --seed: must be an integer >= 0, got -1"),
        (("--seed", "x"), "argument --seed: not an integer"),
        (("--sample", "-3"), "argument --sample: must be an integer >= 0"),
    ],
)
def test_run_option_values(tmp_path, args, message):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(64, 64, 64, "f16", "f32"))
    r = _mmaflow("run", str(src), "--target", "gfx942", "--device", "sim", *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_broken_pipe_is_quiet():
    p = subprocess.run(
        f"{sys.executable} -m mmaflow.compiler.cli layout gfx1100 --intrinsic WMMA_F32_16x16x16_F16 | head -1",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert p.stdout.startswith("WMMA_F32_16x16x16_F16") and "Error" not in p.stderr, p.stderr


def test_every_option_has_help():
    from mmaflow.compiler.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, sp in sub.choices.items():
        for action in sp._actions:
            if action.dest != "help":
                assert action.help, f"mmaflow {name} {action.option_strings or action.dest} has no --help text"


# ---- spills, local-task, messages ---------------------------------------------------------------------
@pytest.mark.exhaustive
def test_spilling_config_warns(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(256, 256, 256, "f16", "f32"))
    r = _mmaflow(
        "compile",
        str(src),
        "--target",
        "gfx1100",
        "--config",
        "tile=128x128x32",
        "--config",
        "waves=1x1",
        "-o",
        str(tmp_path / "x.vmfb"),
    )
    assert r.returncode == 0, r.stderr
    assert "mmaflow: warning: matmul_dispatch_0 spills" in r.stderr and "waves=MxN" in r.stderr


def test_local_task_says_whose_numbers(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(32, 32, 32, "f16", "f32"))
    r = _mmaflow("run", str(src), "--target", "gfx942", "--device", "local-task")
    assert r.returncode == 0, r.stderr
    assert "IREE's llvm-cpu pipeline on local-task (not mmaflow's kernel)" in r.stdout
    assert "mmaflow's kernel does not run" in r.stderr and "mmaflow: taken" not in r.stderr


def test_fallback_line_once_per_process(capsys):
    from mmaflow.runtime.iree_runner import device_present

    if device_present("hip")[0]:
        pytest.skip("a HIP device is present")
    a = np.ones((16, 16), np.float16)
    matmul(a, a, target="gfx1100")
    matmul(a, a, target="gfx1100")
    assert capsys.readouterr().err.count("running on the lane executor instead") <= 1


# ---- contractions IREE reshapes ------------------------------------------------------------------
@pytest.mark.parametrize(
    "m, n, k, in_t, out_t, kw",
    [
        (1, 64, 64, "f16", "f32", {}),  # vector-matrix: M dropped
        (64, 1, 64, "f16", "f32", {}),  # matrix-vector: N dropped
        (64, 64, 1, "f16", "f32", {}),  # outer product: K dropped, fill folded into a*b + 0
        (48, 40, 1, "i8", "i32", {"unsigned": True}),  # ... and integer a*b with the + 0 folded away (u8: RDNA)
        (1, 64, 64, "i8", "i32", {"unsigned": True}),
        (1, 64, 64, "f16", "f32", {"transpose_a": True}),
        (1, 48, 64, "f16", "f32", {"batch": 3}),
    ],
)
def test_unit_dimension_generics_are_taken(m, n, k, in_t, out_t, kw):
    target = "gfx1100"
    src = matmul_module(m, n, k, in_t, out_t, generic=True, **kw)
    art = compile_module(src, target, lower=False)
    assert len(art.executables) == 1, art.log
    rng = np.random.default_rng(7)
    lead = (kw["batch"],) if kw.get("batch") else ()
    a_shape = lead + ((k, m) if kw.get("transpose_a") else (m, k))
    if in_t == "i8":
        a = rng.integers(0, 256, a_shape).astype(np.uint8).view(np.int8)
        b = rng.integers(0, 256, lead + (k, n)).astype(np.uint8).view(np.int8)
    else:
        a = rng.uniform(-1, 1, a_shape).astype(np.float16)
        b = rng.uniform(-1, 1, lead + (k, n)).astype(np.float16)
    out, _ = run_module(art, [a, b], device="sim")
    a_l = np.swapaxes(a, -1, -2) if kw.get("transpose_a") else a
    if in_t == "i8":
        ref = a_l.view(np.uint8).astype(np.int64) @ b.view(np.uint8).astype(np.int64)
        np.testing.assert_array_equal(out, ref)
    else:
        ref = a_l.astype(np.float64) @ b.astype(np.float64)
        bound = k * 2.0**-24 * (np.abs(a_l.astype(np.float64)) @ np.abs(b.astype(np.float64))) + 2.0**-24 * np.abs(ref)
        assert out.shape == ref.shape and (np.abs(out - ref) <= bound + 1e-30).all()


def test_generic_unit_batch_keeps_its_shape():
    art = compile_module(matmul_module(32, 40, 48, generic=True, batch=1), "gfx942", lower=False)
    a = np.ones((1, 32, 48), np.float16)
    b = np.ones((1, 48, 40), np.float16)
    out, _ = run_module(art, [a, b], device="sim")
    assert out.shape == (1, 32, 40) and (out == 48).all()
    with pytest.raises(InputError, match=r"A has shape \(32, 48\); the function's argument 0 is 1x32x48"):
        run_module(art, [a[0], b[0]], device="sim")


# ---- the numerics verdict --------------------------------------------------------------------------
def test_compare_nan_reference_must_be_matched():
    ref = np.array([1.0, np.nan, np.inf])
    tol = np.full(3, 1e-3)
    assert not compare(np.array([1.0, 2.0, np.inf], np.float32), ref, tol).passed  # finite where NaN expected
    assert not compare(np.array([1.0, np.nan, 5.0], np.float32), ref, tol).passed
    assert compare(np.array([1.0, np.nan, np.inf], np.float32), ref, tol).passed
    bad = compare(np.array([np.nan, np.nan, np.inf], np.float32), ref, tol)
    assert not bad.passed and bad.max_abs_err == np.inf and "1 non-finite where the reference is finite" in bad.detail
    assert "max |err| inf" in bad.line()


def test_compare_line_states_the_verdicts_figure():
    ok = compare(np.array([1.0005, 2.0], np.float32), np.array([1.0, 2.0]), np.array([1e-3, 1e-3]))
    assert ok.passed and "max |err| / tolerance = 0.5" in ok.line() and "(must be <= 1)" in ok.line()
    no = compare(np.array([1.01, 2.0], np.float32), np.array([1.0, 2.0]), np.array([1e-3, 1e-3]))
    assert not no.passed and no.line().startswith("FAIL: max |err| / tolerance = 10")


# ---- the CLI's own facts: version, exit codes, messages ----------------------------------------------
def test_version_and_the_exit_code_table_in_help():
    from importlib.metadata import version

    from mmaflow.compiler.core.errors import ConfigError, DeviceFault, Exit, UnsupportedError

    r = _mmaflow("--version")
    assert r.returncode == 0 and r.stdout == f"mmaflow {version('mmaflow')}\n", r.stdout + r.stderr
    help_text = _mmaflow("--help").stdout
    for code in Exit:  # every code, once, in the help's table
        assert help_text.count(f"\n  {code.value:>3}  {code.name.lower().replace('_', ' ')}: ") == 1, code
    assert (
        (InputError.exit_code, UnsupportedError.exit_code, ConfigError.exit_code, DeviceFault.exit_code)
        == (Exit.INPUT, Exit.UNSUPPORTED, Exit.CONFIG, Exit.DEVICE)
        == (2, 3, 4, 8)
    )


def test_report_html_output_errors_name_html(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(64, 64, 64, "f16", "f32"))
    r = _mmaflow("report", str(src), "--target", "gfx942", "--html", str(tmp_path))
    _clean_failure(r, f"mmaflow: error: --html {tmp_path} is a directory; give the .html file to write")
    r = _mmaflow("report", str(src), "--target", "gfx942", "--html", str(tmp_path / "no" / "r.html"))
    _clean_failure(
        r, f"mmaflow: error: --html {tmp_path / 'no' / 'r.html'}: directory {tmp_path / 'no'} does not exist"
    )


def test_plural():
    from mmaflow.compiler.core.errors import plural

    assert [plural(n, "dispatch") for n in (0, 1, 2)] == ["0 dispatches", "1 dispatch", "2 dispatches"]
    assert plural(1, "kernel") == "1 kernel" and plural(3, "kernel") == "3 kernels"


@pytest.mark.exhaustive
def test_verify_names_the_target_a_vmfb_was_built_for(tmp_path):
    """A .vmfb built for another GPU: `mmaflow verify` names the one it was built for (read from
    its executables) instead of 'differs (N bytes...)'; the right target verifies it."""
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(64, 64, 64, "f16", "f32"))
    for built, asked in (("gfx942", "gfx1100"), ("sm_80", "sm_90a")):
        out = tmp_path / f"{built}.vmfb"
        assert _mmaflow("compile", str(src), "--target", built, "-o", str(out)).returncode == 0
        r = _mmaflow("verify", str(out), "--source", str(src), "--target", asked)
        _clean_failure(r, f"mmaflow: error: {out} was built for {built}, not {asked}", f"--target {built}")
        assert r.returncode == 6 and "differs" not in r.stderr, r.stderr
        r = _mmaflow("verify", str(out), "--source", str(src), "--target", built)
        assert r.returncode == 0 and "verified kernels for 1 dispatch (" in r.stdout, r.stdout + r.stderr


def test_a_tile_k_the_instruction_cannot_take_names_the_one_that_can():
    from mmaflow.compiler.core.errors import ConfigError
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.registry import resolve
    from mmaflow.compiler.target.targets import get_target

    problem = Contraction(256, 256, 256, 1, "f16", "f16", "f32")
    with pytest.raises(
        ConfigError,
        match=r"tile_k=8 must be a multiple of MFMA_F32_16x16x16_F16's K=16; "
        r"MFMA_F32_32x32x8_F16 fits it \(--config intrinsic=MFMA_F32_32x32x8_F16\)",
    ):
        resolve(get_target("gfx942"), problem, {"tile_k": 8})
    with pytest.raises(ConfigError, match="no gfx942 wave64 instruction for this problem has a K dividing 4"):
        resolve(get_target("gfx942"), problem, {"tile_k": 4})


def test_nvidia_configs_are_described_in_nvidia_words():
    from mmaflow.compiler.core.config import KernelConfig

    wg = KernelConfig("WGMMA_F32_64x256x16_F16", 32, 128, 256, 64, 8, 1, 0, stages=4).describe()
    assert wg.startswith("WGMMA_F32_64x256x16_F16, tile 128x256x64, 2 MMA warpgroups (warpgroup tile 64x256)")
    assert "wave" not in wg and "4-stage shared-memory ring" in wg
    mma = KernelConfig("MMA_SYNC_F32_16x8x16_F16", 32, 256, 128, 32, 4, 2, 8).describe()
    assert "warps 4x2 (warp tile 64x64)" in mma and "wave" not in mma
    amd = KernelConfig("WMMA_F32_16x16x16_F16", 32, 128, 128, 32, 2, 4, 8, stages=2).describe()
    assert amd.startswith("WMMA_F32_16x16x16_F16 wave32") and "waves 2x4" in amd and "2-stage LDS ring" in amd
