"""What both benchmark modules use: ``bench`` (single matmuls, the checks, the command) and
``attention_bench`` (``--attention``). The manifest's file name, iree-compile's flags for IREE's
default pipeline, torch on the GPU (CUDA-event timing, arrays as torch tensors), the calls Nsight
Compute profiles and the kernel-only time of one module, and results.csv / results.json.

Imported by both, importing neither: ``bench`` -> ``attention_bench`` -> here, ``bench`` -> here.
Like the run half of ``bench``, nothing here imports IREE compiler code.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from mmaflow.runtime.isa import FP8_ACCUMULATOR_BITS as FP8_ACC_BITS
from mmaflow.runtime.isa import FP8_CHUNK as FP8_ACC_STEP

MANIFEST = "manifest.json"
TORCH = "torch"  # the "file" of torch's rows: what --profile-one and kernel_time_of call for torch
PROFILED_CALLS = 5
# fp8 MLIR element types -> torch's dtype names
TORCH_FP8 = {"f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2"}


def iree_default(t) -> tuple[list[str], str]:
    """The iree-compile flags of IREE's own pipeline for target ``t``, and the target it compiles
    for. IREE 3.13 cannot configure sm_90a, so its default pipeline is measured with sm_80 code
    (which runs on Hopper)."""
    if t.retarget_variant:
        return ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"], "sm_80"
    return t.iree_flags(), t.name


MARKER_FILE = "marker.vmfb"


def build_marker(t, out_dir: Path) -> str | None:
    """Write the marker module (``modules.marker_module``, IREE's default flags for target ``t``)
    into ``out_dir``: the kernel a one-process Nsight Compute run splits its builds at
    (``ncu.kernel_times``). Its file name, or None (with the reason printed) where it does not build."""
    from iree.compiler import CompilerToolError, compile_str

    from mmaflow.runtime.modules import marker_module

    flags, _ = iree_default(t)
    try:
        (out_dir / MARKER_FILE).write_bytes(compile_str(marker_module(), extra_args=flags))
    except CompilerToolError as e:
        print(f"bench: the marker module did not build ({first_error(str(e))})", file=sys.stderr)
        return None
    return MARKER_FILE


def f32_tolerance(k: int, ref: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Per element, the error a K-long f32 accumulation may make: ``k`` roundings of the sums'
    magnitude bound ``bound`` (sum of |a||b|) plus the rounding of the result ``ref``."""
    from mmaflow.runtime import numerics

    return k * numerics.UNIT_ROUNDOFF["f32"] * bound + numerics.UNIT_ROUNDOFF["f32"] * np.abs(ref)


def config_line(log: list[str]) -> str:
    """The kernel's configuration from a compile log's ``mmaflow: config NAME: ...`` line."""
    lines = [line for line in log if "config" in line]
    return lines[0].split(": ", 2)[-1] if lines else ""


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def cuda_event_times(torch, call, warmup: int, repeat: int) -> list[float]:
    """Seconds per ``call()`` by CUDA events, ``repeat`` times, after at least ``warmup`` calls
    and 0.3 s of them (so the GPU leaves its idle clocks)."""
    start, done = time.perf_counter(), 0
    while done < warmup or time.perf_counter() - start < 0.3:
        call()
        torch.cuda.synchronize()
        done += 1
    out = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        call()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / 1e3)
    return out


def np_fp8() -> dict:
    from mmaflow.runtime.numerics import DTYPES

    return {t: DTYPES[t] for t in TORCH_FP8}


def to_torch(torch, x: np.ndarray):
    """A CUDA tensor of ``x`` (bf16 through float32: torch reads no ml_dtypes arrays; exact; fp8
    through its bytes: ml_dtypes' float8_e4m3fn / float8_e5m2 and torch's are the same OCP
    encodings)."""
    if x.dtype == np.float16:
        return torch.from_numpy(x).cuda()
    fp8 = {np.dtype(v): TORCH_FP8[k] for k, v in np_fp8().items()}.get(x.dtype)
    if fp8 is not None:
        return torch.from_numpy(np.ascontiguousarray(x).view(np.uint8)).cuda().view(getattr(torch, fp8))
    return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).cuda()


def profile_calls(
    manifest_dir: Path, file: str, driver: str, function: str, inputs: list[np.ndarray], torch_fn=None
) -> None:
    """For Nsight Compute (``runtime/ncu.py``): one warm-up call, then PROFILED_CALLS identical
    calls of one prepared module (or of ``torch_fn(torch, *inputs)`` when ``file`` is TORCH),
    inputs already on the GPU, each call waited for."""
    if file == TORCH:
        import torch

        args = [to_torch(torch, x) for x in inputs]
        for _ in range(1 + PROFILED_CALLS):
            torch_fn(torch, *args)
            torch.cuda.synchronize()
        return
    from mmaflow.runtime.iree_runner import CompiledModule

    mod = CompiledModule((manifest_dir / file).read_bytes(), driver)
    fn = mod.function(function)
    dev = [mod.upload(x) for x in inputs]
    for _ in range(1 + PROFILED_CALLS):
        fn(*dev).to_host()


def kernel_time_of(manifest_dir: Path, file: str, case: int | str, driver: str) -> dict:
    """Kernel-only time of ``file`` (or TORCH) on ``case`` (a matmul size, an attention case's
    key): Nsight Compute over ``python -m mmaflow.runtime.bench ... --profile-one FILE CASE``."""
    from mmaflow.runtime.ncu import kernel_time

    child = [
        sys.executable,
        "-m",
        "mmaflow.runtime.bench",
        "--from-dir",
        str(manifest_dir),
        "--driver",
        driver,
        "--out",
        "-",
        "--profile-one",
        file,
        str(case),
    ]
    return kernel_time(child, PROFILED_CALLS, f"{file} at {case}").as_dict()


def write_rows(rows: list[dict], out_dir: Path, manifest: dict) -> None:
    """results.csv (the columns of every row, in first-seen order) and results.json (with the manifest)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    (out_dir / "results.json").write_text(json.dumps({"manifest": manifest, "rows": rows}, indent=1))


def first_error(text: str) -> str:
    """The first ``error:`` line of a compiler's output (IREE prints megabytes of IR after it)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "error:" in line:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            op = nxt.split("see current operation:", 1)[1].strip() if "see current operation:" in nxt else ""
            return (line.strip() + (f" ({op})" if op and len(op) < 200 else ""))[:400]
    return text.strip().splitlines()[0][:400] if text.strip() else "iree-compile failed"


# Hopper's fp8 wgmma does not accumulate in full f32 (DeepSeek-V3's technical report, section
# 3.3.2; measured on the H200 and modelled in runtime/isa/wgmma.py: per m64nNk32 the accumulator
# and the FP8_CHUNK exact products are each cut toward zero to a multiple of 2^(E - bits), max <
# 2^E). So an fp8 result outside the f32 bound is checked once more against such an accumulator:
# each instruction's FP8_CHUNK + 1 addends each lose less than 2^(E - bits) <= 2^(1 - bits) *
# sum |a||b|, i.e. at most ceil(K / FP8_CHUNK) * (FP8_CHUNK + 1) * 2^(1 - bits) * sum |a||b| over
# the K loop (beside the f32 terms): an upper bound under the model. A result within it only reads
# "PASS (fp8 accumulation bound)" (a kernel without promotion); outside both, "FAIL".


def reference_check(a: np.ndarray, b: np.ndarray, out: np.ndarray, torch, *, fp8: bool = False) -> dict:
    """Check every element against a float64 reference (on the GPU with torch when possible):
    the f32-accumulation bound; for ``fp8`` inputs also the fp8 tensor-core accumulation bound
    above where that fails. ``verdict``: "PASS", "PASS (fp8 accumulation bound)" or "FAIL".
    ``a`` is (batch x) M x K, ``b`` (batch x) K x N."""
    from mmaflow.runtime import numerics

    k = a.shape[-1]
    if torch is not None:
        ta, tb = torch.from_numpy(a.astype(np.float64)).cuda(), torch.from_numpy(b.astype(np.float64)).cuda()
        ref = (ta @ tb).cpu().numpy()
        bound = (ta.abs() @ tb.abs()).cpu().numpy()
    else:  # exact check of a row sample on the host
        rows = np.random.default_rng(1).choice(a.shape[-2], size=min(64, a.shape[-2]), replace=False)
        a, out = a[..., rows, :], out[..., rows, :]
        ref = a.astype(np.float64) @ b.astype(np.float64)
        bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    tol = f32_tolerance(k, ref, bound)
    chk = numerics.compare(out.astype(np.float64), ref, tol, out_type="f32")
    res = {
        "pass": chk.passed,
        "max_abs_err": chk.max_abs_err,
        "max_rel_err": chk.max_rel_err,
        "detail": f"f32 bound: {chk.line()}" if fp8 else chk.detail,
        "verdict": "PASS" if chk.passed else "FAIL",
    }
    if fp8 and not chk.passed:
        tol8 = tol + -(-k // FP8_ACC_STEP) * (FP8_ACC_STEP + 1) * 2.0 ** (1 - FP8_ACC_BITS) * bound
        chk8 = numerics.compare(out.astype(np.float64), ref, tol8, out_type="f32")
        res["detail"] += f"; fp8 accumulation bound ({FP8_ACC_BITS} bits per k{FP8_ACC_STEP}): {chk8.line()}"
        res["pass"] = chk8.passed
        res["verdict"] = "PASS (fp8 accumulation bound)" if chk8.passed else "FAIL"
    return res
