"""`mmaflow bench`: time mmaflow against IREE's default pipeline (and torch.matmul) on a GPU.

Two halves, so compiling and timing can happen on different machines:

    prepare  compile, for each size, the matmul module with mmaflow and with IREE's default
             pipeline; write the .vmfb files and manifest.json into a directory
    run      on the machine with the GPU: load each module through IREE's runtime, check its
             result against a float64 reference (tolerance from runtime.numerics), time it
             (warm-up, then the median of synchronous calls), time torch.matmul the same way
             (CUDA events) when torch sees the GPU; write results.csv, results.json, tflops.png

    mmaflow bench --target sm_80 --sizes 1024,4096 --device cuda          # both halves here
    mmaflow bench --target sm_90a --dtype e4m3 --sizes 4096,8192 --prepare-only DIR   # fp8: A @ B^T vs torch._scaled_mm
    mmaflow bench --target sm_80 --sizes 1024,4096 --prepare-only DIR     # compile only
    mmaflow bench --target sm_80 --checks --prepare-only DIR               # dtypes and variants, numpy-checked
    mmaflow bench --target sm_80 --variants --prepare-only DIR             # variants at 4096^3, to time
    mmaflow bench --attention --target sm_90a,sm_80 --prepare-only DIR     # attention vs IREE and torch SDPA
    python -m mmaflow.runtime.bench --from-dir DIR --driver cuda --out OUT  # run only
    python -m mmaflow.runtime.bench --from-dir DIR --driver cuda --out OUT --time-checks 20
    python -m mmaflow.runtime.bench --from-dir DIR --driver cuda --out OUT --kernel-time   # + ncu

``--kernel-time`` adds each module's and torch.matmul's kernel-only time (Nsight Compute, median
of PROFILED_CALLS calls after a warm-up one; ``runtime/ncu.py``) beside the synchronous figure:
a synchronous IREE call adds 0.17 ms (1024-2048) to 1 ms (8192) of host time to its kernel.

``--suite NAME`` (``runtime/suite_bench.py``, manifest kind "suite"): the GEMMs of real models
(``runtime/suites.py``: llama3-8b, llama3-70b-tp8, mistral-7b, gpt2, bert-base, vit-b16, decode,
prefill, all, smoke), each row built with mmaflow and IREE's default, and timed against torch's
best of torch.matmul, torch.mm / bmm (f32 out) and F.linear (B stored N x K); ``--dtype f16,bf16``
picks the dtypes. The run half prints per row mmaflow's speed against both, the geomeans and the
worst rows (summary.json):

    mmaflow bench --suite llama3-8b --target sm_90a --dtype f16,bf16 --prepare-only DIR
    python -m mmaflow.runtime.bench --from-dir DIR --driver cuda --out OUT --kernel-time

``--attention`` (``runtime/attention_bench.py``, manifest kind "attention"): mmaflow's
flash-attention kernel against IREE default's attention dispatch and torch's
scaled_dot_product_attention, the same prepare and run halves and options. ``--weight-only``
(``runtime/weight_only_bench.py``, kind "weight_only"): the int4 weight-only decode kernel against
IREE's default, mmaflow's f16-weight decode kernel, torch ``F.linear`` and torch's int4 kernel.

fp8 (``--dtype e4m3`` / ``e5m2``, i.e. f8E4M3FN / f8E5M2 -> f32): the module is A (M x K) @ B^T
with B stored N x K, the form the wgmma kernel takes (fp8 wgmma reads K-major operands only) and
the one torch._scaled_mm wants (B column-major: ``b_nk.t()``); torch's side is
``torch._scaled_mm(a, b_nk.t(), scale_a=1, scale_b=1, out_dtype=torch.float32)`` on the same
bytes, with and without ``use_fast_accum`` (``torch_recipes``), checked against the same float64
reference. The arrays are ml_dtypes' float8_e4m3fn /
float8_e5m2, which iree.runtime takes as they are (HAL element types FLOAT_8_E4M3_FN /
FLOAT_8_E5M2) and torch reads through their bytes. IREE's default pipeline cannot build an fp8
matmul for CUDA (3.13: "LLVM Translation failed for operation: builtin.unrealized_conversion_cast"
from vector<..xi8> to vector<..xf8E4M3FN>): such an entry is kept in the manifest as "not built"
with IREE's first error line, and the run half prints it.

The run half imports no IREE compiler code (only iree.runtime, numpy, optionally torch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from mmaflow.runtime.bench_common import (
    MANIFEST,
    PROFILED_CALLS,
    TORCH,
    TORCH_FP8,
    config_line,
    cuda_event_times,
    first_error,
    iree_default,
    kernel_time_of,
    profile_calls,
    reference_check,
    to_torch,
    torch_cuda,
    write_rows,
)
from mmaflow.runtime.modules import matmul_module, matmul_source

# fp8 by torch's short names (torch.float8_e4m3fn, torch.float8_e5m2) -> MLIR's element types
FP8 = {"e4m3": "f8E4M3FN", "e5m2": "f8E5M2"}


# ---- prepare (needs the compiler) -------------------------------------------------------------


def prepare(target: str, sizes: list[int], dtype: str, out_dir: Path, overrides: dict | None = None) -> dict:
    from iree.compiler import CompilerToolError, compile_str

    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions
    from mmaflow.compiler.target.targets import get_target

    t = get_target(target)
    out_dir.mkdir(parents=True, exist_ok=True)
    in_t = FP8.get(dtype, dtype)
    out_t = "f32" if dtype != "i8" else "i32"
    b_t = in_t in TORCH_FP8  # fp8: B stored N x K (wgmma's K-major B, torch._scaled_mm's column-major B)
    entries = []
    for size in sizes:
        src = (
            matmul_module(size, size, size, in_t, out_t, transpose_b=True)
            if b_t
            else matmul_source(size, size, size, in_t, out_t)
        )
        res = compile_module(
            src, t.name, options=CodegenOptions(overrides=overrides or {}), source_name=f"matmul_{size}.mlir"
        )
        mine = out_dir / f"mmaflow_{t.name}_{size}.vmfb"
        mine.write_bytes(res.vmfb)
        entries.append(
            {"size": size, "variant": "mmaflow", "file": mine.name, "target": t.name, "config": config_line(res.log)}
        )
        base_flags, base_target = iree_default(t)
        base = out_dir / f"iree_{t.name}_{size}.vmfb"
        entry = {
            "size": size,
            "variant": "iree-default",
            "file": base.name,
            "target": base_target,
            "config": "IREE default pipeline",
        }
        try:
            base.write_bytes(compile_str(src, extra_args=base_flags))
        except CompilerToolError as e:  # (IREE 3.13 builds no fp8 matmul for CUDA)
            entry.update(file=None, not_built=first_error(str(e)))
            print(f"bench: IREE default at {size}: not built: {entry['not_built']}", file=sys.stderr)
        entries.append(entry)
    manifest = {
        "target": t.name,
        "driver": t.iree_device,
        "a_type": in_t,
        "c_type": out_t,
        "b_transposed": b_t,
        "function": "matmul",
        "entries": entries,
        "prepared": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


CHECK_SHAPES = [(512, 512, 512), (384, 640, 256)]


def _case(
    name: str, source: str, inputs: list, *, a_t=False, b_t=False, acc="f32", out=None, epilogue=None, torch_eager=None
) -> dict:
    """A hardware check: the module, its inputs (shape, type) and what numpy compares it with
    (inputs 0 and 1 are A and B, any further ones the epilogue's). ``torch_eager``: a
    TORCH_EAGER recipe doing the same work in torch, timed beside the case."""
    return {
        "name": name,
        "source": source,
        "inputs": [{"shape": list(s), "type": t} for s, t in inputs],
        "a_transposed": a_t,
        "b_transposed": b_t,
        "acc": acc,
        "out": out or acc,
        "epilogue": epilogue,
        "torch_eager": torch_eager,
    }


# The same work in torch eager, from the case's inputs on the GPU (f16 tensors): what a user would
# write without a compiler. addmm folds the bias into cuBLAS's epilogue; gelu is a kernel of its own.
TORCH_EAGER = {
    "addmm_gelu": (
        "torch.nn.functional.gelu(torch.addmm(bias, A, B)), f16",
        lambda torch, a, b, bias: torch.nn.functional.gelu(torch.addmm(bias, a, b)),
    ),
}


def _torch_eager_args(torch, ins: list[np.ndarray]) -> list:
    """The case's inputs on the GPU as torch would hold them: f16 (A and B are; an f32 epilogue
    input is converted here, outside the timed calls)."""
    return [torch.from_numpy(x).cuda().half() for x in ins]


def profile_torch_eager(manifest_dir: Path, index: int) -> None:
    """For Nsight Compute: one warm-up call, then PROFILED_CALLS calls of case ``index``'s torch recipe."""
    import torch

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    e = manifest["checks"][index]
    fn = TORCH_EAGER[e["torch_eager"]][1]
    args = _torch_eager_args(torch, _check_inputs(e, index))
    for _ in range(1 + PROFILED_CALLS):
        fn(torch, *args)
        torch.cuda.synchronize()


def check_cases(target) -> list[dict]:
    """Every dtype pair the target has (two shapes each), then the matmul variants: transposed,
    batch, unaligned, fused epilogues, dynamic shapes (one kernel run at several sizes)."""
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.common.tiles import matching_intrinsics
    from mmaflow.runtime.modules import EPILOGUES, dynamic_module, epilogue_module, matmul_module

    cases = []
    pairs = sorted({(i.a_type, i.c_type) for i in target.intrinsics() if i.a_type == i.b_type and not i.unsigned_a})
    for a_t, c_t in pairs:
        if not matching_intrinsics(target, Contraction(16, 16, 16, 1, a_t, a_t, c_t)):
            continue
        for m, n, k in CHECK_SHAPES:
            cases.append(
                _case(
                    f"{a_t}->{c_t} {m}x{n}x{k}",
                    matmul_source(m, n, k, a_t, c_t),
                    [((m, k), a_t), ((k, n), a_t)],
                    acc=c_t,
                )
            )
    f16 = "f16"
    cases.append(
        _case(
            "A^T B^T 512x384x256",
            matmul_module(512, 384, 256, transpose_a=True, transpose_b=True),
            [((256, 512), f16), ((384, 256), f16)],
            a_t=True,
            b_t=True,
        )
    )
    cases.append(
        _case(
            "batch 4x256x128x192", matmul_module(256, 128, 192, batch=4), [((4, 256, 192), f16), ((4, 192, 128), f16)]
        )
    )
    for m, n, k in ((1000, 1000, 1000), (17, 33, 65), (1, 4096, 4096)):
        cases.append(_case(f"unaligned {m}x{n}x{k}", matmul_source(m, n, k), [((m, k), f16), ((k, n), f16)]))
    for name in ("bias_n_relu_f16", "gelu_erf", "bias_n_gelu_f16", "erf_scaled"):
        spec = EPILOGUES[name]
        extra = [((1024,), t) for t, _ in spec.get("inputs", [])]
        cases.append(
            _case(
                f"epilogue {name} 1024x1024x512",
                epilogue_module(1024, 1024, 512, **spec),
                [((1024, 512), f16), ((512, 1024), f16)] + extra,
                out=spec["out_type"],
                epilogue=name,
            )
        )
    if any(i.a_type == "i8" for i in target.intrinsics()):
        spec = EPILOGUES["dequant_n"]
        cases.append(
            _case(
                "epilogue dequant_n i8 512x256x1024",
                epilogue_module(512, 256, 1024, "i8", "i32", **spec),
                [((512, 1024), "i8"), ((1024, 256), "i8"), ((256,), "f32")],
                acc="i32",
                out="f32",
                epilogue="dequant_n",
            )
        )
    dyn = dynamic_module()
    for m, n, k in ((1000, 700, 300), (1, 1, 1), (4096, 4096, 4096)):
        cases.append(_case(f"dynamic (no hint) at {m}x{n}x{k}", dyn, [((m, k), f16), ((k, n), f16)]))
    hinted = dynamic_module(divisors=dict(m=16, n=32, k=64))
    for m, n, k in ((4096, 4096, 4096), (208, 96, 320)):
        cases.append(_case(f"dynamic (m%16, n%32, k%64) at {m}x{n}x{k}", hinted, [((m, k), f16), ((k, n), f16)]))
    rows = dynamic_module(m=None, n=4096, k=4096)
    for m in (77, 2048):
        cases.append(_case(f"dynamic rows at {m}x4096x4096", rows, [((m, 4096), f16), ((4096, 4096), f16)]))
    return cases


def perf_cases(target) -> list[dict]:
    """The matmul variants at 4096-class sizes, for timing with `--time-checks` (each still
    checked against numpy): static, unaligned, transposed, fused epilogue, dynamic."""
    from mmaflow.runtime.modules import EPILOGUES, dynamic_module, epilogue_module, matmul_module

    f16, s = "f16", 4096
    ab = [((s, s), f16), ((s, s), f16)]
    spec = EPILOGUES["bias_n_relu_f16"]
    return [
        _case("static 4096^3", matmul_source(s, s, s), ab),
        _case("unaligned 4000^3", matmul_source(4000, 4000, 4000), [((4000, 4000), f16)] * 2),
        _case("B^T 4096^3", matmul_module(s, s, s, transpose_b=True), ab, b_t=True),
        _case(
            "bias+relu -> f16 4096^3",
            epilogue_module(s, s, s, **spec),
            ab + [((s,), "f32")],
            out="f16",
            epilogue="bias_n_relu_f16",
        ),
        _case(
            "bias+gelu -> f16 4096^3",
            epilogue_module(s, s, s, **EPILOGUES["bias_n_gelu_f16"]),
            ab + [((s,), "f32")],
            out="f16",
            epilogue="bias_n_gelu_f16",
            torch_eager="addmm_gelu",
        ),
        _case("dynamic, divisibility promised, at 4096^3", dynamic_module(divisors=dict(m=16, n=32, k=64)), ab),
        _case("dynamic rows (static N, K) at 4096^3", dynamic_module(m=None, n=s, k=s), ab),
        _case("dynamic, no promise, at 4096^3", dynamic_module(), ab),
    ]


def prepare_checks(target: str, out_dir: Path, *, perf: bool = False, overrides: dict | None = None) -> dict:
    """Compile every check_cases() module (perf_cases() with ``perf``), once per distinct source,
    for a hardware check: `run_checks` compares the results with numpy on the host.

    With ``overrides`` (``--config``) every case is built with them; a case they cannot configure
    (another dtype than the intrinsic's, a dynamic size for the warpgroup kernel) is not built:
    its refusal is printed here and kept in the manifest's ``not_built``, which `run_checks`
    prints again, so a partial check never reads as a whole one."""
    from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions
    from mmaflow.compiler.target.targets import get_target

    t = get_target(target)
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    refused: dict[str, str] = {}
    entries, not_built = [], []
    for case in perf_cases(t) if perf else check_cases(t):
        src = case.pop("source")
        if src not in files and src not in refused:
            name = f"check_{t.name}_{len(files)}.vmfb"
            try:
                res = compile_module(
                    src, t.name, options=CodegenOptions(overrides=overrides or {}), source_name=f"{name}.mlir"
                )
            except (ConfigError, UnsupportedError) as e:
                if not overrides:
                    raise
                refused[src] = str(e)
            else:
                files[src] = name
                (out_dir / name).write_bytes(res.vmfb)
        if src in refused:
            not_built.append({"name": case["name"], "reason": refused[src]})
            print(f"bench: check {case['name']}: not built with --config: {refused[src]}", file=sys.stderr)
            continue
        entries.append({**case, "file": files[src]})
    if not entries:
        from mmaflow.compiler.core.errors import InputError

        raise InputError(f"--config {overrides} configures none of the check cases")
    manifest = {
        "target": t.name,
        "driver": t.iree_device,
        "function": "matmul",
        "checks": entries,
        "overrides": overrides or {},
        "not_built": not_built,
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def _check_inputs(e: dict, i: int) -> list[np.ndarray]:
    from mmaflow.runtime import numerics

    rng = np.random.default_rng(i)
    return [numerics.random_matrix(rng, tuple(x["shape"]), x["type"]) for x in e["inputs"]]


def profile_check(manifest_dir: Path, index: int, driver: str) -> None:
    """For Nsight Compute: one warm-up call, then PROFILED_CALLS calls of check case ``index``."""
    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    e = manifest["checks"][index]
    profile_calls(manifest_dir, e["file"], driver, manifest["function"], _check_inputs(e, index))


def run_checks(manifest_dir: Path, driver: str, out_dir: Path, *, repeat: int = 0, kernel: bool = False) -> list[dict]:
    """Every prepared check on the device, against numpy (random data, tolerances of
    runtime.numerics; integer results exactly). ``repeat`` > 0 also times each case (median of
    that many synchronous calls after a warm-up) and reports TFLOP/s; ``kernel`` adds the
    kernel-only time (Nsight Compute)."""
    from mmaflow.runtime import numerics
    from mmaflow.runtime.iree_runner import CompiledModule

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    rows, modules = [], {}
    for i, e in enumerate(manifest["checks"]):
        ins = _check_inputs(e, i)
        if e["file"] not in modules:
            modules[e["file"]] = CompiledModule((manifest_dir / e["file"]).read_bytes(), driver)
        out = modules[e["file"]](manifest["function"], *ins)
        a = np.swapaxes(ins[0], -1, -2) if e["a_transposed"] else ins[0]
        b = np.swapaxes(ins[1], -1, -2) if e["b_transposed"] else ins[1]
        ref, tol = numerics.matmul_reference(a, b, e["acc"])
        if e["epilogue"]:
            ref, tol = numerics.epilogue_reference(
                ref, tol, ins[2:], numerics.EPILOGUE_REFERENCES[e["epilogue"]], e["out"]
            )
        chk = numerics.compare(np.asarray(out), ref, tol, out_type=e["out"])
        row = {
            "name": e["name"],
            "file": e["file"],
            "check": "PASS" if chk.passed else "FAIL",
            "max_abs_err": chk.max_abs_err,
            "detail": chk.detail,
        }
        timing = ""
        if repeat:
            t = statistics.median(modules[e["file"]].time(manifest["function"], *ins, repeat=repeat))
            flop = 2.0 * np.prod(a.shape[:-1], dtype=np.float64) * b.shape[-1] * a.shape[-1]
            row.update(ms=t * 1e3, tflops=flop / t / 1e12)
            timing = f" [{t * 1e3:.3f} ms, {flop / t / 1e12:.1f} TFLOP/s]"
        if kernel:
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
                "--profile-check",
                str(i),
            ]
            flop = 2.0 * np.prod(a.shape[:-1], dtype=np.float64) * b.shape[-1] * a.shape[-1]
            k = kernel_time(child, PROFILED_CALLS, e["name"]).as_dict()
            row.update(k, kernel_tflops=flop / (k["kernel_ms"] * 1e-3) / 1e12)
            timing += f" [kernel-only {k['kernel_ms']:.4f} ms, {row['kernel_tflops']:.1f} TFLOP/s]"
        if repeat and e.get("torch_eager"):
            timing += _time_torch_eager(manifest_dir, i, e, ins, row, repeat=repeat, kernel=kernel)
        rows.append(row)
        print(f"check {manifest['target']} {e['name']}: {chk.line()}{timing}", flush=True)
    for nb in manifest.get("not_built", []):
        print(
            f"check {manifest['target']} {nb['name']}: NOT BUILT with --config "
            f"{manifest.get('overrides')}: {nb['reason']}",
            flush=True,
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "checks.json").write_text(json.dumps(rows, indent=1))
    return rows


def _time_torch_eager(manifest_dir: Path, i: int, e: dict, ins: list, row: dict, *, repeat: int, kernel: bool) -> str:
    """Time case ``i``'s torch recipe beside it (CUDA events, median of ``repeat``; with
    ``kernel``, Nsight Compute's kernel-only time of all its kernels per call)."""
    torch = torch_cuda()
    if torch is None:
        raise RuntimeError(f"{e['name']}: the torch eager comparison needs torch with CUDA")
    what, fn = TORCH_EAGER[e["torch_eager"]]
    args = _torch_eager_args(torch, ins)
    times = cuda_event_times(torch, lambda: fn(torch, *args), 5, repeat)
    row.update(torch_eager=what, torch_eager_ms=statistics.median(times) * 1e3)
    out = f" [torch eager ({what}): {row['torch_eager_ms']:.3f} ms"
    if kernel:
        from mmaflow.runtime.ncu import kernel_time

        child = [
            sys.executable,
            "-m",
            "mmaflow.runtime.bench",
            "--from-dir",
            str(manifest_dir),
            "--driver",
            "cuda",
            "--out",
            "-",
            "--profile-torch-eager",
            str(i),
        ]
        k = kernel_time(child, PROFILED_CALLS, f"torch eager for {e['name']}").as_dict()
        row.update(torch_eager_kernel_ms=k["kernel_ms"], torch_eager_kernels=k["kernels"])
        out += (
            f", kernel-only {k['kernel_ms']:.4f} ms in {len(k['kernels'])} kernels; "
            f"mmaflow is {k['kernel_ms'] / row['kernel_ms']:.2f}x its speed"
        )
    return out + "]"


# ---- run (iree.runtime, numpy, optional torch) ------------------------------------------------


def torch_recipes(a_type: str) -> dict:
    """What torch times beside the modules, on the inputs as ``to_torch`` holds them: {row key
    (the row's "file"): (label, fn(torch, a, b))}. f16/bf16: torch.matmul (cuBLAS). fp8:
    torch._scaled_mm with unit scales, f32 out, B column-major (``b`` is stored N x K, as the
    module's, so ``b.t()``: no copy), with cuBLASLt's default accumulation (partial sums promoted
    to full f32, as mmaflow's fp8 kernel promotes per K tile) and with ``use_fast_accum``
    (accumulation in the tensor cores only, as mmaflow's first fp8 kernel did)."""
    if a_type not in TORCH_FP8:
        # cuBLAS computing what the module computes (f32 out), beside its fastest form (16-bit out):
        # torch.mm's out_dtype (torch >= 2.8); a torch without it reports the row as not run.
        return {
            TORCH: (f"torch.matmul ({a_type} out)", lambda torch, a, b: torch.matmul(a, b)),
            f"{TORCH}-f32-out": (
                f"torch.mm ({a_type} -> f32 out)",
                lambda torch, a, b: torch.mm(a, b, out_dtype=torch.float32),
            ),
        }
    ones = []

    def scaled_mm(fast: bool):
        def fn(torch, a, b_nk):
            if not ones:  # made once, on the device: no host-to-device copy per timed call
                ones.append(torch.tensor(1.0, device="cuda"))
            return torch._scaled_mm(
                a, b_nk.t(), scale_a=ones[0], scale_b=ones[0], out_dtype=torch.float32, use_fast_accum=fast
            )

        return fn

    short = {v: k for k, v in FP8.items()}[a_type]
    return {
        TORCH: (f"torch._scaled_mm ({short}, f32 out)", scaled_mm(False)),
        f"{TORCH}-fast-accum": (f"torch._scaled_mm ({short}, f32 out, fast accum)", scaled_mm(True)),
    }


def _time_torch(torch, a: np.ndarray, b: np.ndarray, warmup: int, repeat: int, fn=None) -> list[float]:
    ta, tb = to_torch(torch, a), to_torch(torch, b)
    fn = fn or (lambda torch, x, y: torch.matmul(x, y))
    return cuda_event_times(torch, lambda: fn(torch, ta, tb), warmup, repeat)


TIMED_DTYPES = ("f16", "bf16", *FP8)


def _inputs(size: int, dtype: str = "f16") -> tuple[np.ndarray, np.ndarray]:
    """A and B of a timed matmul: uniform in [-1, 1), rounded to ``dtype`` (f16, bf16, fp8; the
    reference multiplies the rounded values). For fp8 B is the N x K matrix the module takes."""
    from mmaflow.runtime.numerics import DTYPES

    rng = np.random.default_rng(size)
    return tuple(rng.uniform(-1, 1, (size, size)).astype(np.float32).astype(DTYPES[dtype]) for _ in range(2))


def profile_one(manifest_dir: Path, file: str, size: int, driver: str) -> None:
    """``profile_calls`` of one prepared module at ``size`` (or of torch.matmul: ``file`` "torch")."""
    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    recipes = torch_recipes(manifest["a_type"])
    profile_calls(
        manifest_dir,
        TORCH if file in recipes else file,
        driver,
        manifest["function"],
        list(_inputs(size, manifest["a_type"])),
        recipes[file][1] if file in recipes else None,
    )


def run(
    manifest_dir: Path, driver: str, out_dir: Path, *, repeat: int = 20, warmup: int = 5, kernel: bool = False
) -> list[dict]:
    """Check and time every prepared module and torch.matmul. ``kernel``: also the kernel-only
    time of each (Nsight Compute, median of PROFILED_CALLS calls), beside the synchronous one."""
    from mmaflow.runtime.iree_runner import CompiledModule

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    torch = torch_cuda() if driver == "cuda" else None
    rows = []
    sizes = sorted({e["size"] for e in manifest["entries"]})
    for size in sizes:
        a, b = _inputs(size, manifest["a_type"])
        b_kn = b.T if manifest.get("b_transposed") else b  # (fp8: the module takes B as N x K)
        flop = 2.0 * size**3
        for e in [x for x in manifest["entries"] if x["size"] == size]:
            if e.get("not_built"):
                rows.append(
                    {
                        "size": size,
                        "variant": e["variant"],
                        "target": e["target"],
                        "ms": float("nan"),
                        "tflops": float("nan"),
                        "check": "not built",
                        "max_rel_err": float("nan"),
                        "detail": e["not_built"],
                        "config": e["config"],
                        "file": None,
                    }
                )
                print(f"bench: {e['variant']} {size}: not built: {e['not_built']}", flush=True)
                continue
            mod = CompiledModule((manifest_dir / e["file"]).read_bytes(), driver)
            out = mod(manifest["function"], a, b)
            check = reference_check(a, b_kn, out, torch, fp8=manifest["a_type"] in TORCH_FP8)
            times = mod.time(manifest["function"], a, b, warmup=warmup, repeat=repeat)
            t = statistics.median(times)
            rows.append(
                {
                    "size": size,
                    "variant": e["variant"],
                    "target": e["target"],
                    "ms": t * 1e3,
                    "tflops": flop / t / 1e12,
                    "check": check["verdict"],
                    "max_rel_err": check["max_rel_err"],
                    "detail": check["detail"],
                    "config": e["config"],
                    "file": e["file"],
                }
            )
            del mod
        for key, (label, fn) in torch_recipes(manifest["a_type"]).items() if torch is not None else ():
            detail = ""
            fp8 = manifest["a_type"] in TORCH_FP8
            if fp8 or key != TORCH:  # f32 out: the same reference and tolerance (not a verdict on us)
                try:
                    res = fn(torch, to_torch(torch, a), to_torch(torch, b)).float().cpu().numpy()
                # e.g. a pair cuBLASLt has no kernel for: torch 2.11 raises ValueError("Multiplication of
                # two Float8_e5m2 matrices is not supported") for e5m2 x e5m2 (H200, 2026-11-26)
                except (RuntimeError, ValueError, AttributeError, TypeError) as err:
                    rows.append(
                        {
                            "size": size,
                            "variant": label,
                            "target": torch.cuda.get_device_name(),
                            "ms": float("nan"),
                            "tflops": float("nan"),
                            "check": "not run",
                            "max_rel_err": float("nan"),
                            "detail": str(err).splitlines()[0][:300],
                            "config": f"torch {torch.__version__}",
                            "file": None,
                        }
                    )
                    print(f"bench: {label} {size}: not run: {rows[-1]['detail']}", flush=True)
                    continue
                c = reference_check(a, b_kn, res, torch, fp8=fp8)
                detail = f"torch vs float64: {c['verdict']} ({c['detail']})"
                print(f"bench: {label} {size}: {detail}", flush=True)
            times = _time_torch(torch, a, b, warmup, repeat, fn)
            t = statistics.median(times)
            rows.append(
                {
                    "size": size,
                    "variant": label,
                    "target": torch.cuda.get_device_name(),
                    "ms": t * 1e3,
                    "tflops": flop / t / 1e12,
                    "check": "-",
                    "max_rel_err": float("nan"),
                    "detail": detail,
                    "config": f"torch {torch.__version__}",
                    "file": key,
                }
            )
    if kernel:  # after all synchronous timing: each ncu run is a process of its own
        for r in rows:
            if r["file"] is None:  # not built / not run
                continue
            k = kernel_time_of(manifest_dir, r["file"], r["size"], driver)
            r.update(k, kernel_tflops=2.0 * r["size"] ** 3 / (k["kernel_ms"] * 1e-3) / 1e12)
            print(
                f"bench: {r['variant']} {r['size']}: {k['kernel_ms']:.4f} ms kernel-only "
                f"({r['kernel_tflops']:.1f} TFLOP/s; {', '.join(k['kernels'])})",
                flush=True,
            )
    write_results(rows, out_dir, manifest)
    return rows


def write_results(rows: list[dict], out_dir: Path, manifest: dict) -> None:
    write_rows(rows, out_dir, manifest)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench: matplotlib is not installed; no plot written", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for variant in dict.fromkeys(r["variant"] for r in rows):
        pts = [(r["size"], r["tflops"]) for r in rows if r["variant"] == variant]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=variant)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{manifest['a_type']} matmul, {manifest['target']}")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_dir / "tflops.png", dpi=120)


def print_table(rows: list[dict]) -> None:
    """Synchronous call time and, when measured, kernel-only time (Nsight Compute)."""
    kernel = any("kernel_ms" in r for r in rows)
    extra = f" {'kernel ms':>9} {'TFLOP/s':>9}" if kernel else ""
    print(f"{'size':>6} {'variant':<24} {'target':<10} {'call ms':>9} {'TFLOP/s':>9}{extra} check")
    for r in rows:
        k = f" {r.get('kernel_ms', float('nan')):>9.4f} {r.get('kernel_tflops', float('nan')):>9.2f}" if kernel else ""
        head = f"{r['size']:>6} {r['variant']:<24} {r['target'][:10]:<10}"
        print(f"{head} {r['ms']:>9.4f} {r['tflops']:>9.2f}{k} {r['check']}")


def positive_ints(text: str, option: str) -> list[int]:
    """A comma-separated list of positive integers (``--sizes``, ``--head-dims``), or an InputError."""
    from mmaflow.compiler.core.errors import InputError

    try:
        values = [int(s) for s in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise InputError(f"{option} must be comma-separated positive integers, got {text!r}")
    return values


MODES = ("compile_time", "models", "checks", "variants", "attention", "suite", "weight_only")


def bench_command(args) -> int:
    """Entry point of `mmaflow bench`."""
    from mmaflow.compiler.core.config import parse_overrides
    from mmaflow.compiler.core.errors import DeviceError, InputError
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.runtime.iree_runner import device_present

    modes = [m for m in MODES if getattr(args, m)]
    if len(modes) > 1:
        raise InputError("bench does one of " + ", ".join("--" + m.replace("_", "-") for m in modes) + " at a time")
    for given, name in (
        (args.head_dims, "head-dims"),
        (args.fa3_shapes, "fa3-shapes"),
        (getattr(args, "decode", None), "decode"),
        (getattr(args, "causal", False), "causal"),
        (getattr(args, "kv_heads", None), "kv-heads"),
    ):
        if given and not args.attention:
            raise InputError(f"--{name} is an option of bench --attention")
    if getattr(args, "v_head_dim_outer", False) and not getattr(args, "decode", None):
        raise InputError("--v-head-dim-outer is an option of bench --attention --decode")
    if getattr(args, "decode", None) and args.fa3_shapes:
        raise InputError("--decode and --fa3-shapes: one set of shapes at a time")
    if getattr(args, "decode", None) and getattr(args, "kv_heads", None):
        raise InputError("--decode has its own heads (32 query heads over 8 KV heads): --kv-heads is prefill's")
    if getattr(args, "decode", None) and getattr(args, "causal", False):
        raise InputError("--decode and --causal: a decoder step's one query sees every key (causal is prefill's)")
    if args.compile_time:
        from mmaflow.runtime.compile_time import compile_time_command

        if not args.target:
            raise InputError("--compile-time needs --target (one or a comma-separated list)")
        args.repeat = args.repeat or 5
        return compile_time_command(args)
    if args.models:
        from mmaflow.runtime.model_bench import prepare as prepare_models

        if not args.prepare_only:
            raise InputError(
                "bench --models compiles here and runs on the GPU machine: give --prepare-only DIR",
                hint="then `python3 -m mmaflow.runtime.model_bench --from-dir DIR --out OUT` there",
            )
        prepare_models(Path(args.prepare_only))
        print(f"bench: models, builds and manifest written to {args.prepare_only}")
        return 0
    if not args.target:
        raise InputError("bench needs --target" + (" (one or a comma-separated list)" if args.attention else ""))
    args.repeat = args.repeat or 20
    out = Path(args.out)
    prep_dir = Path(args.prepare_only) if args.prepare_only else out / "modules"
    if args.attention:
        from mmaflow.runtime import attention_bench

        if args.config:
            raise InputError("--config configures matmul kernels; the flash-attention kernel has no config")
        default_sizes = attention_bench.DEFAULT_KV if getattr(args, "decode", None) else attention_bench.DEFAULT_SEQS
        manifest = attention_bench.prepare(
            args.target.split(","),
            positive_ints(args.sizes or default_sizes, "--sizes"),
            positive_ints(args.head_dims or attention_bench.DEFAULT_HEAD_DIMS, "--head-dims"),
            args.dtype.split(","),
            prep_dir,
            fa3=args.fa3_shapes,
            decode=positive_ints(args.decode, "--decode") if getattr(args, "decode", None) else None,
            causal=getattr(args, "causal", False),
            kv_heads=getattr(args, "kv_heads", None),
            v_transposed=getattr(args, "v_head_dim_outer", False),
        )
        driver = manifest["driver"]
    elif args.weight_only:
        from mmaflow.runtime import weight_only_bench

        if args.config or "," in args.target:
            raise InputError("bench --weight-only takes one --target and no --config (the kernel has none)")
        manifest = weight_only_bench.prepare(
            args.target, positive_ints(args.sizes or weight_only_bench.DEFAULT_MS, "--sizes"), prep_dir
        )
        driver = manifest["driver"]
    elif args.suite:
        from mmaflow.runtime import suite_bench, suites

        dtypes = args.dtype.split(",")
        if args.sizes or not set(dtypes) <= set(suites.DTYPES):
            raise InputError(
                f"--suite takes its shapes from the suite and --dtype from {', '.join(suites.DTYPES)}",
                hint="suites: " + ", ".join(suites.SUITES),
            )
        manifest = suite_bench.prepare(
            args.target, args.suite, dtypes, prep_dir, parse_overrides(args.config or []), rows=args.rows
        )
        driver = manifest["driver"]
    else:
        target = get_target(args.target)
        sizes = positive_ints(args.sizes or "1024,2048,4096", "--sizes")
        args.dtype = {v: k for k, v in FP8.items()}.get(args.dtype, args.dtype)  # f8E4M3FN -> e4m3
        if args.dtype not in TIMED_DTYPES:
            raise InputError(
                f"bench times {', '.join(TIMED_DTYPES)} matmuls (-> f32), not {args.dtype}",
                hint="--checks covers every dtype pair of the target, numpy-checked",
            )
        if args.checks or args.variants:
            prepare_checks(target.name, prep_dir, perf=args.variants, overrides=parse_overrides(args.config or []))
        else:
            prepare(target.name, sizes, args.dtype, prep_dir, parse_overrides(args.config or []))
        driver = target.iree_device
    if args.prepare_only:
        print(f"bench: modules and manifest written to {prep_dir}")
        return 0
    driver = driver if args.device == "auto" else args.device
    ok, why = device_present(driver)
    if not ok:
        raise DeviceError(
            f"cannot time on {driver}: {why}",
            hint=f"compile here with --prepare-only DIR, then run "
            f"`python -m mmaflow.runtime.bench --from-dir DIR --driver {driver}` on the GPU machine",
        )
    return run_prepared(
        prep_dir,
        driver,
        out,
        repeat=args.repeat,
        time_checks=args.repeat if args.variants else 0,
        kernel=args.kernel_time,
    )


def run_prepared(manifest_dir: Path, driver: str, out_dir: Path, *, repeat: int, time_checks: int, kernel: bool) -> int:
    """Run a prepared directory by its manifest's kind; the exit status (1 if a check failed)."""
    from mmaflow.compiler.core.errors import InputError

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    kind = manifest.get("kind", "checks" if "checks" in manifest else "matmul")
    if kind == "models":
        raise InputError(
            f"{manifest_dir} holds a bench --models manifest",
            hint=f"python3 -m mmaflow.runtime.model_bench --from-dir {manifest_dir} --out OUT",
        )
    if kind == "attention":
        from mmaflow.runtime import attention_bench

        rows = attention_bench.run(manifest_dir, driver, out_dir, repeat=repeat, kernel=kernel)
        attention_bench.print_table(rows)
    elif kind == "weight_only":
        from mmaflow.runtime import weight_only_bench

        rows = weight_only_bench.run(manifest_dir, driver, out_dir, repeat=repeat, kernel=kernel)
        weight_only_bench.print_table(rows)
    elif kind == "suite":
        from mmaflow.runtime import suite_bench

        rows = suite_bench.run(manifest_dir, driver, out_dir, repeat=repeat, kernel=kernel)
        suite_bench.print_table(rows)
    elif kind == "checks":
        rows = run_checks(manifest_dir, driver, out_dir, repeat=time_checks, kernel=kernel)
    else:
        rows = run(manifest_dir, driver, out_dir, repeat=repeat, kernel=kernel)
        print_table(rows)
    return 0 if all(r["check"] != "FAIL" for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mmaflow.runtime.bench", description="run prepared benchmark modules")
    p.add_argument("--from-dir", required=True)
    p.add_argument("--driver", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument(
        "--time-checks",
        type=int,
        default=0,
        metavar="N",
        help="for a --checks manifest: also time each case (median of N calls)",
    )
    p.add_argument(
        "--kernel-time",
        action="store_true",
        help="also the kernel-only time of every module and of torch.matmul / torch SDPA (Nsight Compute on PATH)",
    )
    p.add_argument("--profile-one", nargs=2, metavar=("FILE", "CASE"), help=argparse.SUPPRESS)
    p.add_argument("--profile-many", metavar="ITEMS.json", help=argparse.SUPPRESS)
    p.add_argument("--profile-check", type=int, help=argparse.SUPPRESS)
    p.add_argument("--profile-torch-eager", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    from_dir = Path(args.from_dir)
    if args.profile_torch_eager is not None:
        profile_torch_eager(from_dir, args.profile_torch_eager)
        return 0
    if args.profile_many:  # (suite manifests: runtime/suite_bench.kernel_times_of)
        from mmaflow.runtime.suite_bench import profile_many

        profile_many(from_dir, Path(args.profile_many), args.driver)
        return 0
    if args.profile_one:
        kind = json.loads((from_dir / MANIFEST).read_text()).get("kind")
        if kind == "attention":
            from mmaflow.runtime.attention_bench import profile_one as profile_attention

            profile_attention(from_dir, *args.profile_one, args.driver)
        elif kind == "weight_only":
            from mmaflow.runtime.weight_only_bench import profile_one as profile_weight_only

            profile_weight_only(from_dir, *args.profile_one, args.driver)
        elif kind == "suite":
            from mmaflow.runtime.suite_bench import profile_one as profile_suite_row

            profile_suite_row(from_dir, args.profile_one[0], int(args.profile_one[1]), args.driver)
        else:
            profile_one(from_dir, args.profile_one[0], int(args.profile_one[1]), args.driver)
        return 0
    if args.profile_check is not None:
        profile_check(from_dir, args.profile_check, args.driver)
        return 0
    from mmaflow.compiler.core.errors import DeviceFault, MmaflowError

    try:
        return run_prepared(
            from_dir,
            args.driver,
            Path(args.out),
            repeat=args.repeat,
            time_checks=args.time_checks,
            kernel=args.kernel_time,
        )
    except MmaflowError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        if isinstance(e, DeviceFault):  # IREE's teardown of a faulted CUDA context hung past the
            sys.stdout.flush()  # error (a faulted context hung teardown for 150 s on the H100): leave without it
            sys.stderr.flush()
            os._exit(e.exit_code)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
