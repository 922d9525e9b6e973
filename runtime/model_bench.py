"""`mmaflow bench --models`: whole exported models on a GPU, three builds each, against torch.

    prepare (here)   every corpus model (e2e_tests/models) built three ways for CUDA:
                       mmaflow_sm_80   mmaflow compile --target sm_80
                       mmaflow_sm_90a  mmaflow compile --target sm_90a
                       iree_sm_80      plain iree-compile (IREE's own codegen; IREE 3.13 has no sm_90)
                     each mmaflow build checked with `mmaflow verify` (PTX in the file); manifest.json.
                     The stock route (iree-compile $(mmaflow flags)) hands IREE the same executables
                     (test_models.py), except where only `mmaflow compile` sees what it needs: a causal
                     mask proven through the host program (gpt2_sdpa), dense_resource constants in an
                     executable (llama_mlp_wq, which the hook receives without their data)
    run (GPU)        per model: the parameters (numpy-seeded, e2e_tests/models/definitions.py) written
                     as an .irpa, the float32 torch CPU reference from the same rounded weights and
                     inputs, each build run through IREE's CUDA runtime and compared with it, then
                     timed: warm-up, median of 20 synchronous calls (inputs already on the GPU), and
                     torch CUDA eager (the same module in the same dtype) timed the same way

    mmaflow bench --models --prepare-only DIR
    python3 -m mmaflow.runtime.model_bench --from-dir DIR --out OUT      # on the GPU machine

The error bound: a build of mmaflow is in IREE default's class when its relative error
||out - ref|| / ||ref|| is at most twice IREE default's and every output is finite.
``--kernel-time`` then runs Nsight Compute once per build on one call (after a warm-up call) inside
an NVTX range: the kernel-only time is the sum of that call's kernel durations.

The run half imports no IREE compiler code (iree.runtime, numpy, torch only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / "e2e_tests" / "models"
BUILDS = ("mmaflow_sm_80", "mmaflow_sm_90a", "iree_sm_80")
ERROR_CLASS = 2.0  # mmaflow's relative error may be at most this times IREE default's


def prepare(out_dir: Path, models: list[str] | None = None) -> dict:
    """Build every corpus model three ways and verify the mmaflow builds."""
    from mmaflow.compiler.core.errors import ToolchainError

    manifest = json.loads((MODELS_DIR / "manifest.json").read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    entries = []
    for key, entry in manifest["entries"].items():
        if models and entry["model"] not in models:
            continue
        src = MODELS_DIR / entry["file"]
        builds = {}
        for build in BUILDS:
            out = out_dir / f"{key}.{build}.vmfb"
            target = build.split("_", 1)[1]
            start = time.perf_counter()
            if build.startswith("mmaflow"):
                route = "mmaflow compile"
                cmd = [str(bindir / "mmaflow"), "compile", str(src), "--target", target, "-o", str(out)]
            else:
                route = "iree-compile"
                flags = ["--iree-hal-target-device=cuda", f"--iree-cuda-target={target}"]
                cmd = [str(bindir / "iree-compile"), str(src), *flags, "-o", str(out)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise ToolchainError(f"{key} {build}: {route} failed:\n{r.stderr[-3000:]}")
            builds[build] = {
                "file": out.name,
                "route": route,
                "compile_s": round(time.perf_counter() - start, 2),
                "log": [line for line in r.stderr.splitlines() if line.startswith("mmaflow:")],
            }
            if build.startswith("mmaflow"):
                v = subprocess.run(
                    [str(bindir / "mmaflow"), "verify", str(out), "--source", str(src), "--target", target],
                    capture_output=True,
                    text=True,
                )
                if v.returncode != 0:
                    raise ToolchainError(f"{key} {build}: mmaflow verify failed:\n{v.stderr[-3000:]}")
                builds[build]["verify"] = v.stdout.strip()
            print(f"bench: {key} {build}: {builds[build]['compile_s']} s", flush=True)
        entries.append(
            {
                "key": key,
                **{k: entry[k] for k in ("model", "dtype", "seed", "function", "inputs", "outputs")},
                "builds": builds,
            }
        )
    result = {"kind": "models", "entries": entries}
    (out_dir / "manifest.json").write_text(json.dumps(result, indent=1))
    return result


# ---- the GPU half ------------------------------------------------------------------------------------
def _definitions():
    sys.path.insert(0, str(MODELS_DIR))
    import definitions
    import runner

    return definitions, runner


def _irpa(definitions, name: str, dtype: str, seed: int, path: Path) -> None:
    import iree.runtime as rt

    index = rt.ParameterIndex()
    for key, arr in definitions.parameter_arrays(name, dtype, seed).items():
        meta = {"type": "Tensor", "dtype": {"f16": "float16", "bf16": "bfloat16"}[dtype], "shape": list(arr.shape)}
        index.add_buffer(
            key, np.ascontiguousarray(arr).reshape(-1).view(np.uint8), metadata="PYTORCH:" + json.dumps(meta)
        )
    index.create_archive_file(str(path))


class _Loaded:
    """A .vmfb loaded on the GPU with its parameters, its function ready to call."""

    def __init__(self, vmfb: Path, irpa: Path, function: str, driver: str):
        import iree.runtime as rt

        self.rt = rt
        self.config = rt.Config(driver)
        index = rt.ParameterIndex()
        index.load(str(irpa))
        params = rt.create_io_parameters_module(self.config.vm_instance, index.create_provider(scope="model"))
        module = rt.VmModule.mmap(self.config.vm_instance, str(vmfb))
        self.ctx = rt.SystemContext(vm_modules=[params, module], config=self.config)
        self.fn = self.ctx.modules[module.name][function]

    def device_inputs(self, inputs):
        return [self.rt.asdevicearray(self.config.device, x) for x in inputs]

    def __call__(self, inputs):
        out = self.fn(*inputs)
        return out[0] if isinstance(out, (list, tuple)) else out


def _median_ms(fn, *, warmup: int = 5, repeat: int = 20, sync=None) -> float:
    deadline = time.perf_counter() + 0.3
    n = 0
    while n < warmup or time.perf_counter() < deadline:  # leave the idle clocks
        fn()
        if sync:
            sync()
        n += 1
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


SCRATCH = Path("/tmp/mmaflow-model-bench")  # parameters and inputs, written once per machine


def run(
    from_dir: Path, out_dir: Path, *, driver: str = "cuda", repeat: int = 20, only: list[str] | None = None
) -> list[dict]:
    definitions, runner = _definitions()
    manifest = json.loads((from_dir / "manifest.json").read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    rows = []
    import torch

    cuda = torch.cuda.is_available()
    for entry in manifest["entries"]:
        if only and entry["key"] not in only:
            continue
        name, dtype, seed = entry["model"], entry["dtype"], entry["seed"]
        irpa = SCRATCH / f"{entry['key']}.irpa"
        if not irpa.exists():
            _irpa(definitions, name, dtype, seed, irpa)
        inputs = [
            x.astype(runner.np_dtype(dtype))
            for x in [t.float().numpy() for t in definitions.example_inputs(name, dtype, seed)]
        ]
        for i, x in enumerate(inputs):  # float32 on disk (.npy has no bf16), exact in the dtype
            np.save(SCRATCH / f"{entry['key']}.input{i}.npy", x.astype(np.float32))
        ref = definitions.reference(name, dtype, seed)
        row = {"key": entry["key"], "model": name, "dtype": dtype}
        for build in BUILDS:
            loaded = _Loaded(from_dir / entry["builds"][build]["file"], irpa, entry["function"], driver)
            dev = loaded.device_inputs(inputs)
            out = np.asarray(loaded(dev).to_host()).astype(np.float32)
            err = runner.errors(out, ref)
            row[build] = {**err, "ms": round(_median_ms(lambda: loaded(dev), repeat=repeat), 3)}
        if cuda:
            model, tin = definitions.build(name, dtype, seed)
            model = model.cuda()
            tin = [t.cuda() for t in tin]
            with torch.no_grad():
                tout = model(*tin).float().cpu().numpy()
                row["torch_eager"] = {
                    **runner.errors(tout, ref),
                    "ms": round(_median_ms(lambda: model(*tin), repeat=repeat, sync=torch.cuda.synchronize), 3),
                }
        base = row["iree_sm_80"]["rel_l2"]
        for build in ("mmaflow_sm_80", "mmaflow_sm_90a"):
            r = row[build]
            r["in_iree_class"] = bool(r["finite"] and r["rel_l2"] <= ERROR_CLASS * base)
        rows.append(row)
        print(_line(row), flush=True)
    (out_dir / "models.json").write_text(json.dumps(rows, indent=1))
    return rows


PROFILED_CALLS = 3


def profile_one(from_dir: Path, key: str, build: str, driver: str = "cuda") -> None:
    """For Nsight Compute: PROFILED_CALLS identical calls (parameters and inputs from ``run``'s
    scratch files, written here on a fresh machine). IREE launches kernels from its own queue
    thread, out of reach of an NVTX range on this one: the calls are told apart by repetition."""
    manifest = json.loads((from_dir / "manifest.json").read_text())
    (entry,) = [e for e in manifest["entries"] if e["key"] == key]
    if not (SCRATCH / f"{key}.irpa").exists() or not (SCRATCH / f"{key}.input0.npy").exists():
        definitions, runner = _definitions()  # a fresh machine: write what run() would have
        SCRATCH.mkdir(parents=True, exist_ok=True)
        _irpa(definitions, entry["model"], entry["dtype"], entry["seed"], SCRATCH / f"{key}.irpa")
        for i, t in enumerate(definitions.example_inputs(entry["model"], entry["dtype"], entry["seed"])):
            np.save(SCRATCH / f"{key}.input{i}.npy", t.float().numpy())
    if build == TORCH:
        _profile_torch(entry)
        return
    sys.path.insert(0, str(MODELS_DIR))
    import runner

    inputs, i = [], 0
    while (SCRATCH / f"{key}.input{i}.npy").exists():
        inputs.append(np.load(SCRATCH / f"{key}.input{i}.npy").astype(runner.np_dtype(entry["dtype"])))
        i += 1
    loaded = _Loaded(from_dir / entry["builds"][build]["file"], SCRATCH / f"{key}.irpa", entry["function"], driver)
    dev = loaded.device_inputs(inputs)
    for _ in range(PROFILED_CALLS):
        loaded(dev).to_host()


TORCH = "torch_eager"


def _profile_torch(entry: dict) -> None:
    """torch CUDA eager, the same module in the same dtype: one warm-up call (cuBLAS picks its
    kernels), then PROFILED_CALLS identical calls."""
    import torch

    definitions, _ = _definitions()
    model, tin = definitions.build(entry["model"], entry["dtype"], entry["seed"])
    model = model.cuda()
    tin = [t.cuda() for t in tin]
    with torch.no_grad():
        for _ in range(1 + PROFILED_CALLS):
            model(*tin)
            torch.cuda.synchronize()


def kernel_times(from_dir: Path, out_dir: Path, only: list[str] | None = None) -> dict:
    """Kernel-only time of one call of every build and of torch eager: Nsight Compute's
    gpu__time_duration summed over the kernels of the last of ``profile_one``'s identical calls
    (one ncu run per build, ``runtime/ncu.py``)."""
    from mmaflow.runtime.ncu import kernel_time

    manifest = json.loads((from_dir / "manifest.json").read_text())
    result = {}
    for entry in manifest["entries"]:
        if only and entry["key"] not in only:
            continue
        for build in BUILDS + (TORCH,):
            child = [
                sys.executable,
                "-m",
                "mmaflow.runtime.model_bench",
                "--from-dir",
                str(from_dir),
                "--out",
                str(out_dir),
                "--profile-one",
                entry["key"],
                build,
            ]
            kt = kernel_time(child, PROFILED_CALLS, f"{entry['key']} {build}")
            # the last call, as before the shared helper (one call's kernels summed)
            result.setdefault(entry["key"], {})[build] = {
                "kernel_ms": round(kt.calls[-1], 4),
                "kernels": len(kt.kernels),
                # where the time goes: each kernel of the call, launch order, median over the calls
                "per_kernel": [[name, round(ms, 5)] for name, ms in zip(kt.kernels, kt.per_kernel, strict=True)],
            }
            print(
                f"bench: {entry['key']} {build}: {len(kt.kernels)} kernels, {kt.calls[-1]:.4f} ms kernel-only",
                flush=True,
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "kernel_times.json").write_text(json.dumps(result, indent=1))
    return result


def _line(row: dict) -> str:
    parts = [f"{row['key']:24}"]
    for build in BUILDS + ("torch_eager",):
        if build in row:
            r = row[build]
            ok = "" if "in_iree_class" not in r else (" ok" if r["in_iree_class"] else " OUT OF CLASS")
            parts.append(f"{build} {r['ms']:.3f} ms rel {r['rel_l2']:.2e} max {r['max_abs']:.2e}{ok}")
    return " | ".join(parts)


def markdown_table(run_dir: Path, kernel_dirs: list[Path]) -> str:
    """docs/PERFORMANCE.md's two model tables from a run's models.json and the kernel_times.json of
    --kernel-time runs: the errors against the float32 reference, then kernel-only time with the
    synchronous call time beside it, for every build and torch eager."""
    rows = json.loads((run_dir / "models.json").read_text())
    kernel: dict = {}
    for d in kernel_dirs:
        for key, builds in json.loads((d / "kernel_times.json").read_text()).items():
            kernel.setdefault(key, {}).update(builds)
    builds = BUILDS + (TORCH,)
    names = ["mmaflow sm_80", "mmaflow sm_90a", "IREE default (sm_80)", "torch eager"]
    errors = ["| model | " + " | ".join(names) + " | in IREE's class |", "|---" * (len(names) + 2) + "|"]
    times = ["| model | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for r in rows:
        k = kernel.get(r["key"], {})
        ok = all(r[b]["in_iree_class"] for b in BUILDS[:2])
        errors.append(
            f"| {r['key']} | "
            + " | ".join(f"{r[b]['rel_l2']:.2e}" if b in r else "-" for b in builds)
            + f" | {'yes' if ok else 'NO'} |"
        )
        times.append(
            f"| {r['key']} | "
            + " | ".join(
                (f"{k[b]['kernel_ms']:.3f}" if b in k else "-") + f" ({r[b]['ms']:.3f})" if b in r else "-"
                for b in builds
            )
            + " |"
        )
    return "\n".join(errors) + "\n\n" + "\n".join(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mmaflow.runtime.model_bench")
    p.add_argument("--from-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--driver", default="cuda")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--only", action="append", help="model key(s), e.g. gpt2_block_f16")
    p.add_argument(
        "--kernel-time",
        action="store_true",
        help="instead of the checked, timed run: kernel-only time of each build (Nsight Compute on PATH)",
    )
    p.add_argument("--profile-one", nargs=2, metavar=("KEY", "BUILD"), help=argparse.SUPPRESS)
    p.add_argument(
        "--table",
        nargs="+",
        metavar="KERNEL_DIR",
        help="print docs/PERFORMANCE.md's model table from --out's models.json and these --kernel-time outputs",
    )
    args = p.parse_args(argv)
    if args.table:
        print(markdown_table(Path(args.out), [Path(d) for d in args.table]))
        return 0
    if args.profile_one:
        profile_one(Path(args.from_dir), *args.profile_one, driver=args.driver)
        return 0
    if args.kernel_time:
        kernel_times(Path(args.from_dir), Path(args.out), only=args.only)
        return 0
    rows = run(Path(args.from_dir), Path(args.out), driver=args.driver, repeat=args.repeat, only=args.only)
    bad = [r["key"] for r in rows for b in ("mmaflow_sm_80", "mmaflow_sm_90a") if not r[b]["in_iree_class"]]
    if bad:
        print(f"bench: out of IREE default's error class: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
