"""The user-facing run path: the Python API, `mmaflow run`, real devices when present.

GPU tests skip with the driver's own reason where IREE sees no device (CI has no GPU; the H100
runs are recorded in docs/PERFORMANCE.md with their commands)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import matmul_module

from mmaflow.compiler.core.errors import InputError
from mmaflow.runtime import compile_module, matmul, run_module
from mmaflow.runtime.iree_runner import device_present

EXAMPLE = Path(__file__).parent.parent / "examples" / "matmul_256_f16.mlir"


def _mmaflow(*args):
    return subprocess.run([sys.executable, "-m", "mmaflow.compiler.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942", "sm_80"])
def test_matmul_api_on_executor(target):
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (64, 96)).astype(np.float16)
    b = rng.uniform(-1, 1, (96, 128)).astype(np.float16)
    c = matmul(a, b, target=target, device="sim")
    assert c.shape == (64, 128) and c.dtype == np.float32
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = 96 * 2.0**-24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + 2.0**-24 * np.abs(ref)
    assert (np.abs(c - ref) <= bound).all()


def test_matmul_api_int8_and_errors():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (32, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    c = matmul(a, b, target="gfx1201", device="sim")
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    with pytest.raises(Exception, match="matmul needs"):
        matmul(a, a, target="gfx1201", device="sim")
    with pytest.raises(Exception, match="no matrix instruction for float64"):
        matmul(a.astype(np.float64), b.astype(np.float64), target="gfx1201", device="sim")


def test_compile_module_and_run_module():
    art = compile_module(EXAMPLE.read_text(), "gfx950")
    assert art.vmfb and art.reports  # lowered through IREE and verified
    assert art.reports["mm_dispatch_0"].counts["matrix"] > 0
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (256, 256)).astype(np.float16)
    b = rng.uniform(-1, 1, (256, 256)).astype(np.float16)
    out, stats = run_module(art, [a, b], device="sim")
    assert stats.matrix_ops > 0 and not stats.races
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


@pytest.mark.exhaustive
def test_run_cli_sim_passes_and_reports_counters():
    r = _mmaflow("run", str(EXAMPLE), "--target", "gfx1201", "--device", "sim", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    (d,) = rep["dispatches"]
    assert d["taken"] and d["passed"] and rep["device"] == "sim", d
    assert d["workgroups"] == d["grid_size"]  # the whole grid ran
    assert list(d["counters"]["global_loads_by_bytes"]) == ["16"]  # only 128-bit global loads
    assert d["counters"]["races"] == []
    r = _mmaflow("run", str(EXAMPLE), "--target", "gfx1201", "--device", "sim")
    assert r.returncode == 0 and "PASS mm_dispatch_0" in r.stdout and "inputs and sentinel bytes unchanged" in r.stdout
    assert "LDS: " in r.stdout and "bank-conflict cycles" in r.stdout, r.stdout


DYNAMIC = Path(__file__).resolve().parents[1] / "lit_tests" / "Inputs" / "matmul_dynamic_nohint_f16.mlir"


@pytest.mark.exhaustive
def test_run_cli_dynamic_module_needs_and_uses_dims():
    r = _mmaflow("run", str(DYNAMIC), "--target", "gfx942", "--device", "sim")
    assert r.returncode == 2 and "give the run-time sizes with --dims m=SIZE,n=SIZE,k=SIZE" in r.stderr, r.stderr
    r = _mmaflow("run", str(DYNAMIC), "--target", "gfx942", "--device", "sim", "--dims", "m=100,n=70,k=33", "--json")
    assert r.returncode == 0, r.stderr
    (d,) = json.loads(r.stdout)["dispatches"]
    assert d["passed"] and d["workgroups"] == d["grid_size"] == 1, d
    r = _mmaflow("run", str(EXAMPLE), "--target", "gfx942", "--device", "sim", "--dims", "m=4")
    assert r.returncode == 2 and "--dims gives m, which the module has static" in r.stderr, r.stderr


def test_run_module_dynamic_sizes_from_the_inputs():
    from mmaflow.runtime.modules import dynamic_module

    art = compile_module(dynamic_module(), "sm_80", lower=False)
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (50, 70)).astype(np.float16)
    b = rng.uniform(-1, 1, (70, 30)).astype(np.float16)
    out, _ = run_module(art, [a, b], device="sim")
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)
    with pytest.raises(InputError, match="A has K = 70, B has K = 71"):
        run_module(art, [a, rng.uniform(-1, 1, (71, 30)).astype(np.float16)], device="sim")


def test_run_cli_local_task_reference():
    r = _mmaflow("run", str(EXAMPLE), "--target", "gfx1100", "--device", "local-task")
    assert r.returncode == 0, r.stderr
    assert "PASS" in r.stdout


def test_run_cli_auto_falls_back_loudly():
    ok, _ = device_present("hip")
    if ok:
        pytest.skip("a HIP device is present: auto runs on it")
    r = _mmaflow("run", str(EXAMPLE), "--target", "gfx942")
    assert r.returncode == 0, r.stderr
    assert "running on the lane executor instead (--device sim)" in r.stderr


def test_run_cli_rejects_wrong_driver():
    r = _mmaflow("run", str(EXAMPLE), "--target", "gfx942", "--device", "cuda")
    assert r.returncode != 0 and "gfx942 code runs on the hip driver, not cuda" in r.stderr


@pytest.mark.hip
def test_hip_device():
    ok, why = device_present("hip")
    if not ok:
        pytest.skip(f"no AMD GPU: {why}")
    for target in ("gfx1100", "gfx1201", "gfx942", "gfx950"):
        r = _mmaflow("run", str(EXAMPLE), "--target", target, "--device", "hip")
        if "is not" in r.stderr and "device" in r.stderr:
            continue  # a GPU of another architecture
        assert r.returncode == 0, r.stderr


@pytest.mark.cuda
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_cuda_device(target):
    ok, why = device_present("cuda")
    if not ok:
        pytest.skip(f"no NVIDIA GPU: {why}")
    r = _mmaflow("run", str(EXAMPLE), "--target", target, "--device", "cuda")
    assert r.returncode == 0, r.stderr + r.stdout


def test_bench_prepare_only(tmp_path):
    r = _mmaflow("bench", "--target", "sm_80", "--sizes", "128", "--prepare-only", str(tmp_path))
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert {e["variant"] for e in man["entries"]} == {"mmaflow", "iree-default"}
    assert all((tmp_path / e["file"]).stat().st_size > 0 for e in man["entries"])


def test_bench_without_gpu_says_how_to_proceed(tmp_path):
    ok, _ = device_present("cuda")
    if ok:
        pytest.skip("a CUDA device is present")
    r = _mmaflow("bench", "--target", "sm_80", "--sizes", "128", "--out", str(tmp_path))
    assert r.returncode != 0
    assert "--prepare-only" in r.stderr and "python -m mmaflow.runtime.bench --from-dir" in r.stderr


def test_matmul_module_helper_is_valid_mlir():
    from mmaflow.compiler.core.mlir import new_context, parse_module

    parse_module(matmul_module(32, 32, 32, "i8", "i32", unsigned=True, transpose_b=True, batch=2), new_context())


def test_sim_checks_every_dispatch_of_a_module():
    """A module of several dispatches: the taken one checked, the other listed with the reason."""
    src = Path(__file__).parent.parent / "lit_tests" / "Inputs" / "matmul_then_add.mlir"
    r = _mmaflow("run", str(src), "--target", "gfx1100", "--device", "sim")
    assert r.returncode == 0, r.stderr
    assert "PASS mm_add_dispatch_0" in r.stdout and "left  mm_add_dispatch_1: no matmul-like contraction" in r.stdout
    assert "mmaflow run: PASS: 1 of 1 checks passed, 1 dispatch left to IREE" in r.stdout, r.stdout


def test_run_module_with_epilogue_inputs():
    from mmaflow.runtime.modules import EPILOGUES, epilogue_module

    art = compile_module(epilogue_module(64, 96, 64, **EPILOGUES["bias_n_relu_f16"]), "gfx942", lower=False)
    rng = np.random.default_rng(6)
    a = rng.uniform(-1, 1, (64, 64)).astype(np.float16)
    b = rng.uniform(-1, 1, (64, 96)).astype(np.float16)
    bias = rng.uniform(-1, 1, 96).astype(np.float32)
    out, stats = run_module(art, [a, b, bias], device="sim")
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    assert out.dtype == np.float16 and not stats.races
    # f16 output: its one rounding (2^-11 relative) dominates the f32 accumulation error at K = 64
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-3, atol=2e-3)
    with pytest.raises(InputError, match="the module takes A, B, epilogue input 0: 3 arrays, 2 given"):
        run_module(art, [a, b], device="sim")


def test_run_cli_epilogue_module(tmp_path):
    """The lane executor checks a fused epilogue against IREE's own dispatch IR; the single-matmul
    GPU/CPU path says how to check one instead."""
    from mmaflow.runtime.modules import EPILOGUES, epilogue_module

    src = tmp_path / "mm_bias.mlir"
    src.write_text(epilogue_module(64, 64, 64, **EPILOGUES["bias_n_relu_f16"]))
    r = _mmaflow("run", str(src), "--target", "gfx942", "--device", "sim")
    assert r.returncode == 0 and "PASS matmul_dispatch_0" in r.stdout, r.stdout + r.stderr
    r = _mmaflow("run", str(src), "--target", "gfx942", "--device", "local-task")
    assert r.returncode == 2 and "call mmaflow.runtime.run_module with all its inputs" in r.stderr, r.stderr


def test_bench_cases_name_their_references_and_torch_recipes():
    """Every --checks / --variants case's epilogue has a numpy reference and a module spelling, and
    a torch-eager comparison names a recipe bench knows (they meet only on the GPU machine)."""
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.runtime.bench import TORCH_EAGER, check_cases, perf_cases
    from mmaflow.runtime.modules import EPILOGUES
    from mmaflow.runtime.numerics import EPILOGUE_REFERENCES

    t = get_target("sm_80")
    cases = check_cases(t) + perf_cases(t)
    for c in cases:
        if c["epilogue"]:
            assert c["epilogue"] in EPILOGUE_REFERENCES and c["epilogue"] in EPILOGUES, c["name"]
        if c["torch_eager"]:
            assert c["torch_eager"] in TORCH_EAGER, c["name"]
    assert any(c["torch_eager"] == "addmm_gelu" and c["epilogue"] == "bias_n_gelu_f16" for c in perf_cases(t))


def test_bench_checks_build_with_config_and_list_the_cases_it_cannot_configure(tmp_path, monkeypatch, capsys):
    """`bench --checks --config ...` builds every case with the overrides (it once ignored them and
    built the heuristic's kernels); a case they cannot configure is named with the refusal, in the
    manifest and on stderr, never built some other way."""
    from mmaflow.runtime import bench
    from mmaflow.runtime.modules import matmul_source

    cases = [
        bench._case("f16->f32 128x256x64", matmul_source(128, 256, 64), [((128, 64), "f16"), ((64, 256), "f16")]),
        bench._case(
            "bf16->f32 128x256x64", matmul_source(128, 256, 64, "bf16"), [((128, 64), "bf16"), ((64, 256), "bf16")]
        ),
    ]
    monkeypatch.setattr(bench, "check_cases", lambda t: [dict(c) for c in cases])
    m = bench.prepare_checks("sm_90a", tmp_path, overrides={"intrinsic": "WGMMA_F32_64x128x16_F16"})
    assert [e["name"] for e in m["checks"]] == ["f16->f32 128x256x64"]
    assert m["overrides"] == {"intrinsic": "WGMMA_F32_64x128x16_F16"}
    assert m["not_built"] == [
        {
            "name": "bf16->f32 128x256x64",
            "reason": "[configure] intrinsic WGMMA_F32_64x128x16_F16 computes f16xf16->f32, "
            "the matmul is bf16xbf16->f32",
        }
    ]
    assert "bf16->f32 128x256x64: not built with --config" in capsys.readouterr().err
    plain = bench.prepare_checks("sm_90a", tmp_path / "plain")  # no overrides: 128 x 256 is below wgmma's rule
    assert (tmp_path / m["checks"][0]["file"]).read_bytes() != (
        tmp_path / "plain" / plain["checks"][0]["file"]
    ).read_bytes()
    monkeypatch.setattr(bench, "check_cases", lambda t: [dict(cases[1])])
    with pytest.raises(InputError, match="configures none of the check cases"):
        bench.prepare_checks("sm_90a", tmp_path / "none", overrides={"intrinsic": "WGMMA_F32_64x128x16_F16"})


def test_bench_times_cublas_with_f32_out_beside_f16_out(tmp_path, monkeypatch):
    """The f16 rows' torch side (a numpy stand-in for torch; the GPU machine has torch 2.11):
    torch.matmul (16-bit out, cuBLAS's fastest) and torch.mm(out_dtype=float32), cuBLAS computing
    what the module computes, whose result is checked against the float64 reference; a torch
    without out_dtype (TypeError) reports that row as not run instead of failing the bench."""
    from conftest import FakeTensor as T
    from conftest import compile_for_cpu, fake_cuda_torch, run_builds_on_cpu

    from mmaflow.runtime.bench import run

    calls = []

    def mm(a, b, *, out_dtype=None):
        if has_out_dtype is False:
            raise TypeError("mm() got an unexpected keyword argument 'out_dtype'")
        calls.append(out_dtype)
        return T((a.x.astype(np.float64) @ b.x.astype(np.float64)).astype(np.float32))

    fake = fake_cuda_torch(float32="float32", from_numpy=T, mm=mm, matmul=lambda a, b: T(a.x @ b.x))

    run_builds_on_cpu(monkeypatch)
    monkeypatch.setitem(sys.modules, "torch", fake)
    (tmp_path / "cpu.vmfb").write_bytes(compile_for_cpu(matmul_module(64, 64, 64, "f16", "f32")))
    man = {
        "target": "llvm-cpu",
        "driver": "cuda",
        "a_type": "f16",
        "c_type": "f32",
        "function": "matmul",
        "entries": [{"size": 64, "variant": "mmaflow", "file": "cpu.vmfb", "target": "host", "config": "cpu"}],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    for has_out_dtype in (True, False):
        calls.clear()
        rows = run(tmp_path, "cuda", tmp_path / "out", repeat=2, warmup=1)
        assert rows[0]["check"] == "PASS", rows
        assert [r["variant"] for r in rows[1:]] == ["torch.matmul (f16 out)", "torch.mm (f16 -> f32 out)"]
        if has_out_dtype:
            assert calls and set(calls) == {"float32"}
            assert rows[2]["file"] == "torch-f32-out" and rows[2]["detail"].startswith("torch vs float64: PASS")
        else:
            assert rows[2]["check"] == "not run" and "out_dtype" in rows[2]["detail"], rows


def test_a_kernel_fault_is_a_device_error_and_bench_leaves_at_once(tmp_path, monkeypatch, capsys):
    """A call that faults on the device (the IREE runtime's RuntimeError, as the H100 gave it in
    docs/PERFORMANCE.md) becomes a DeviceError naming the driver, the function and the
    CUDA error; `python -m mmaflow.runtime.bench` prints it without a traceback and exits with
    its code through os._exit, past IREE's teardown of the faulted context (which hung)."""
    from mmaflow.compiler.core.errors import DeviceError, DeviceFault
    from mmaflow.runtime import bench
    from mmaflow.runtime.iree_runner import CompiledModule

    fault = (
        "Error invoking function: c/runtime/src/iree/hal/drivers/cuda/cuda_device.c:190: ABORTED; CUDA error "
        "'CUDA_ERROR_LAUNCH_FAILED' (719): unspecified launch failure; while invoking native function "
        "hal.fence.await; while calling variadic import;\n[ 0] bytecode module@1:412 -"
    )

    class Faulting(CompiledModule):
        def __init__(self):  # (no device here: only what a call needs)
            self.driver = "cuda"

        def function(self, name=None):
            def call(*args):
                raise RuntimeError(fault)

            return call

        def upload(self, array):
            return array

    mod = Faulting()
    for attempt in (
        lambda: mod("matmul", np.zeros((2, 2), np.float16)),
        lambda: mod.time("matmul", np.zeros((2, 2), np.float16), repeat=2),
    ):
        with pytest.raises(DeviceFault) as e:
            attempt()
        assert e.value.exit_code == 8
        assert "calling matmul on the cuda device failed: Error invoking function" in str(e.value)
        assert "CUDA_ERROR_LAUNCH_FAILED" in str(e.value) and "bytecode module" not in str(e.value)

    fault, kept = "Error invoking function: INVALID_ARGUMENT; input 0 shape mismatch", fault
    with pytest.raises(DeviceError) as e:  # not a fault: said, without the fault's hint or flag
        mod("matmul", np.zeros((2, 2), np.float16))
    assert not isinstance(e.value, DeviceFault) and e.value.hint is None and "INVALID_ARGUMENT" in str(e.value)
    fault = kept

    def run_prepared(*args, **kwargs):
        mod("matmul", np.zeros((2, 2), np.float16))

    exits = []

    def _exit(code):
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(bench, "run_prepared", run_prepared)
    monkeypatch.setattr(bench.os, "_exit", _exit)
    with pytest.raises(SystemExit):
        bench.main(["--from-dir", str(tmp_path), "--out", str(tmp_path / "o")])
    assert exits == [8]
    err = capsys.readouterr().err
    assert err.startswith("bench: error: calling matmul on the cuda device failed") and "Traceback" not in err
    assert "hint: a kernel fault leaves the device context unusable" in err


def test_executor_progress_ticks_every_k_iteration_within_a_batch():
    """A grid that fits one executor batch (256^3 on gfx942: 4 workgroups, 8 K-loop iterations)
    still shows progress as it runs: a tick per K-loop iteration, in fractions of the batch,
    never going back, ending at the whole grid (the bundled 1024^3 example is one batch too)."""
    from mmaflow.compiler.driver.bridge import codegen_module
    from mmaflow.runtime.model_check import check_executable

    (exe,) = codegen_module(EXAMPLE.read_text(), "gfx942").taken
    ticks = []
    (check,) = check_executable(exe, progress=lambda done, total: ticks.append((done, total)))
    assert check.passed, check.detail
    assert check.workgroups == 4 and exe.facts.config.tile_k == 32
    assert [t for _, t in ticks] == [4] * len(ticks)
    done = [d for d, _ in ticks]
    assert done[:8] == [4 * i / 8 for i in range(1, 9)], ticks  # 8 K-loop iterations of 32
    assert done == sorted(done) and done[-1] == 4, ticks


def test_progress_on_a_terminal_is_throttled_and_off_elsewhere(monkeypatch):
    """The ticks reach a terminal at most every PROGRESS_SECONDS (and the last always); a file or
    pipe gets no progress lines at all."""
    import io

    from mmaflow.runtime import cli as run_cli

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert run_cli._progress("d", io.StringIO()) is None
    clock = [100.0]
    monkeypatch.setattr("time.perf_counter", lambda: clock[0])
    out = Tty()
    show = run_cli._progress("d", out)
    for i in range(1, 65):  # 64 ticks 1/8 s apart: a line every 4th (0.5 s), the last one among them
        clock[0] += 0.125
        show(i / 8, 8)
    show(8, 8)  # the batch's own report of the same count: not shown twice
    lines = out.getvalue().split("\r")[1:]
    assert run_cli.PROGRESS_SECONDS == 0.5 and len(lines) == 16, lines
    assert lines[0].startswith("  d: 6% of 8 workgroups, 0 s spent, 8 s left") and lines[-1].startswith(
        "  d: 100% of 8"
    ), lines
    assert lines[-1].endswith("\n") and not any(line.endswith("\n") for line in lines[:-1]), lines
