"""`mmaflow bench`: time mmaflow against IREE's default pipeline (and torch.matmul) on a GPU.

Two halves, so compiling and timing can happen on different machines:

    prepare  compile, for each size, the matmul module with mmaflow and with IREE's default
             pipeline; write the .vmfb files and manifest.json into a directory
    run      on the machine with the GPU: load each module through IREE's runtime, check its
             result against a float64 reference (tolerance from runtime.numerics), time it
             (warm-up, then the median of synchronous calls), time torch.matmul the same way
             (CUDA events) when torch sees the GPU; write results.csv, results.json, tflops.png

    mmaflow bench --target sm_80 --sizes 1024,4096 --device cuda          # both halves here
    mmaflow bench --target sm_80 --sizes 1024,4096 --prepare-only DIR     # compile only
    mmaflow bench --target sm_80 --checks --prepare-only DIR               # every dtype pair, numpy-checked
    python -m mmaflow.runtime.bench --from-dir DIR --driver cuda --out OUT  # run only

The run half imports no IREE compiler code (only iree.runtime, numpy, optionally torch).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

MANIFEST = "manifest.json"


def matmul_source(m: int, n: int, k: int, in_type: str = "f16", out_type: str = "f32") -> str:
    zero = "0" if out_type.startswith("i") else "0.0"
    return (f"func.func @matmul(%a: tensor<{m}x{k}x{in_type}>, %b: tensor<{k}x{n}x{in_type}>) -> tensor<{m}x{n}x{out_type}> {{\n"
            f"  %zero = arith.constant {zero} : {out_type}\n"
            f"  %empty = tensor.empty() : tensor<{m}x{n}x{out_type}>\n"
            f"  %acc = linalg.fill ins(%zero : {out_type}) outs(%empty : tensor<{m}x{n}x{out_type}>) -> tensor<{m}x{n}x{out_type}>\n"
            f"  %c = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{in_type}>, tensor<{k}x{n}x{in_type}>) "
            f"outs(%acc : tensor<{m}x{n}x{out_type}>) -> tensor<{m}x{n}x{out_type}>\n"
            f"  return %c : tensor<{m}x{n}x{out_type}>\n}}\n")


# ---- prepare (needs the compiler) -------------------------------------------------------------

def prepare(target: str, sizes: list[int], dtype: str, out_dir: Path, overrides: dict | None = None) -> dict:
    from iree.compiler import compile_str

    from mmaflow.compiler.bridge import compile_module
    from mmaflow.compiler.pipeline import CodegenOptions
    from mmaflow.compiler.targets import get_target

    t = get_target(target)
    out_dir.mkdir(parents=True, exist_ok=True)
    in_t, out_t = dtype, "f32" if dtype != "i8" else "i32"
    entries = []
    for size in sizes:
        src = matmul_source(size, size, size, in_t, out_t)
        res = compile_module(src, t.name, options=CodegenOptions(overrides=overrides or {}),
                             source_name=f"matmul_{size}.mlir")
        cfg_line = [line for line in res.log if "config" in line]
        mine = out_dir / f"mmaflow_{t.name}_{size}.vmfb"
        mine.write_bytes(res.vmfb)
        entries.append({"size": size, "variant": "mmaflow", "file": mine.name, "target": t.name,
                        "config": cfg_line[0].split(": ", 2)[-1] if cfg_line else ""})
        # IREE's own pipeline on the same module. IREE 3.13 cannot configure sm_90a, so its
        # default pipeline is measured with sm_80 code (which runs on Hopper).
        base_flags = t.iree_flags() if not t.retarget_variant else ["--iree-hal-target-device=cuda",
                                                                      "--iree-cuda-target=sm_80"]
        base = out_dir / f"iree_{t.name}_{size}.vmfb"
        base.write_bytes(compile_str(src, extra_args=base_flags))
        entries.append({"size": size, "variant": "iree-default", "file": base.name,
                        "target": "sm_80" if t.retarget_variant else t.name, "config": "IREE default pipeline"})
    manifest = {"target": t.name, "driver": t.iree_device, "a_type": in_t, "c_type": out_t,
                "function": "matmul", "entries": entries, "prepared": time.strftime("%Y-%m-%d %H:%M:%S")}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


CHECK_SHAPES = [(512, 512, 512), (384, 640, 256)]


def prepare_checks(target: str, out_dir: Path) -> dict:
    """Compile one module per dtype pair the target supports (two shapes each) for a hardware
    numerics check: `run` compares them with numpy on the host."""
    from mmaflow.compiler.bridge import compile_module
    from mmaflow.compiler.config import matching_intrinsics
    from mmaflow.compiler.problem import Contraction
    from mmaflow.compiler.targets import get_target
    t = get_target(target)
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = sorted({(i.a_type, i.c_type) for i in t.intrinsics() if i.a_type == i.b_type and not i.unsigned_a})
    entries = []
    for a_t, c_t in pairs:
        if not matching_intrinsics(t, Contraction(16, 16, 16, 1, a_t, a_t, c_t)):
            continue
        for m, n, k in CHECK_SHAPES:
            res = compile_module(matmul_source(m, n, k, a_t, c_t), t.name, source_name=f"check_{a_t}_{c_t}.mlir")
            name = f"check_{t.name}_{a_t}_{c_t}_{m}x{n}x{k}.vmfb"
            (out_dir / name).write_bytes(res.vmfb)
            entries.append({"m": m, "n": n, "k": k, "a_type": a_t, "c_type": c_t, "file": name})
    manifest = {"target": t.name, "driver": t.iree_device, "function": "matmul", "checks": entries}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def run_checks(manifest_dir: Path, driver: str, out_dir: Path) -> list[dict]:
    """Every prepared dtype/shape module on the device, against numpy (random data, tolerances
    of runtime.numerics; integer results exactly)."""
    from mmaflow.runtime import numerics
    from mmaflow.runtime.iree_runner import CompiledModule
    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    rows = []
    for e in manifest["checks"]:
        rng = np.random.default_rng(e["m"] + e["n"] + e["k"])
        a = numerics.random_matrix(rng, (e["m"], e["k"]), e["a_type"])
        b = numerics.random_matrix(rng, (e["k"], e["n"]), e["a_type"])
        out = CompiledModule((manifest_dir / e["file"]).read_bytes(), driver)(manifest["function"], a, b)
        ref, tol = numerics.matmul_reference(a, b, e["c_type"])
        chk = numerics.compare(np.asarray(out), ref, tol, out_type=e["c_type"])
        rows.append({**e, "check": "PASS" if chk.passed else "FAIL", "max_abs_err": chk.max_abs_err,
                     "detail": chk.detail})
        print(f"check {manifest['target']} {e['a_type']}->{e['c_type']} {e['m']}x{e['n']}x{e['k']}: {chk.line()}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "checks.json").write_text(json.dumps(rows, indent=1))
    return rows


# ---- run (iree.runtime, numpy, optional torch) ------------------------------------------------

def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _reference_check(a: np.ndarray, b: np.ndarray, out: np.ndarray, torch) -> dict:
    """Check every element against a float64 reference (on the GPU with torch when possible)."""
    from mmaflow.runtime import numerics
    k = a.shape[1]
    if torch is not None:
        ta, tb = torch.from_numpy(a.astype(np.float64)).cuda(), torch.from_numpy(b.astype(np.float64)).cuda()
        ref = (ta @ tb).cpu().numpy()
        bound = (ta.abs() @ tb.abs()).cpu().numpy()
    else:  # exact check of a row sample on the host
        rows = np.random.default_rng(1).choice(a.shape[0], size=min(64, a.shape[0]), replace=False)
        a, out = a[rows], out[rows]
        ref = a.astype(np.float64) @ b.astype(np.float64)
        bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    tol = k * numerics.UNIT_ROUNDOFF["f32"] * bound + numerics.UNIT_ROUNDOFF["f32"] * np.abs(ref)
    chk = numerics.compare(out.astype(np.float64), ref, tol, out_type="f32")
    return {"pass": chk.passed, "max_abs_err": chk.max_abs_err, "max_rel_err": chk.max_rel_err, "detail": chk.detail}


def _time_torch(torch, a: np.ndarray, b: np.ndarray, warmup: int, repeat: int) -> list[float]:
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    start = time.perf_counter()
    done = 0
    while done < warmup or time.perf_counter() - start < 0.3:  # leave the idle clocks
        torch.matmul(ta, tb)
        torch.cuda.synchronize()
        done += 1
    out = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(ta, tb)
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / 1e3)
    return out


def run(manifest_dir: Path, driver: str, out_dir: Path, *, repeat: int = 20, warmup: int = 5) -> list[dict]:
    from mmaflow.runtime.iree_runner import CompiledModule
    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    torch = _torch_cuda() if driver == "cuda" else None
    rows = []
    sizes = sorted({e["size"] for e in manifest["entries"]})
    rng = np.random.default_rng(0)
    for size in sizes:
        a = rng.uniform(-1, 1, (size, size)).astype(np.float16)
        b = rng.uniform(-1, 1, (size, size)).astype(np.float16)
        flop = 2.0 * size ** 3
        for e in [x for x in manifest["entries"] if x["size"] == size]:
            mod = CompiledModule((manifest_dir / e["file"]).read_bytes(), driver)
            out = mod(manifest["function"], a, b)
            check = _reference_check(a, b, out, torch)
            times = mod.time(manifest["function"], a, b, warmup=warmup, repeat=repeat)
            t = statistics.median(times)
            rows.append({"size": size, "variant": e["variant"], "target": e["target"], "ms": t * 1e3,
                         "tflops": flop / t / 1e12, "check": "PASS" if check["pass"] else "FAIL",
                         "max_rel_err": check["max_rel_err"], "detail": check["detail"], "config": e["config"]})
            del mod
        if torch is not None:
            times = _time_torch(torch, a, b, warmup, repeat)
            t = statistics.median(times)
            rows.append({"size": size, "variant": "torch.matmul (f16 out)", "target": torch.cuda.get_device_name(),
                         "ms": t * 1e3, "tflops": flop / t / 1e12, "check": "-", "max_rel_err": float("nan"),
                         "detail": "", "config": f"torch {torch.__version__}"})
    write_results(rows, out_dir, manifest)
    return rows


def write_results(rows: list[dict], out_dir: Path, manifest: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    (out_dir / "results.json").write_text(json.dumps({"manifest": manifest, "rows": rows}, indent=1))
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
    print(f"{'size':>6} {'variant':<24} {'target':<10} {'ms':>9} {'TFLOP/s':>9} check")
    for r in rows:
        print(f"{r['size']:>6} {r['variant']:<24} {r['target'][:10]:<10} {r['ms']:>9.4f} {r['tflops']:>9.2f} {r['check']}")


def bench_command(args) -> int:
    """Entry point of `mmaflow bench`."""
    from mmaflow.compiler.config import parse_overrides
    from mmaflow.compiler.errors import DeviceError, InputError
    from mmaflow.compiler.targets import get_target
    from mmaflow.runtime.iree_runner import device_present

    target = get_target(args.target)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        raise InputError(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
    if args.dtype != "f16":
        raise InputError("bench measures f16 x f16 -> f32 matmuls")
    out = Path(args.out)
    prep_dir = Path(args.prepare_only) if args.prepare_only else out / "modules"
    if args.checks:
        prepare_checks(target.name, prep_dir)
    else:
        prepare(target.name, sizes, args.dtype, prep_dir, parse_overrides(args.config or []))
    if args.prepare_only:
        print(f"bench: modules and manifest written to {prep_dir}")
        return 0
    driver = target.iree_device if args.device == "auto" else args.device
    ok, why = device_present(driver)
    if not ok:
        raise DeviceError(f"cannot time on {driver}: {why}",
                          hint=f"compile here with --prepare-only DIR, then run "
                               f"`python -m mmaflow.runtime.bench --from-dir DIR --driver {driver}` on the GPU machine")
    if args.checks:
        rows = run_checks(prep_dir, driver, out)
    else:
        rows = run(prep_dir, driver, out, repeat=args.repeat)
        print_table(rows)
    return 0 if all(r["check"] != "FAIL" for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mmaflow.runtime.bench", description="run prepared benchmark modules")
    p.add_argument("--from-dir", required=True)
    p.add_argument("--driver", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args(argv)
    manifest = json.loads((Path(args.from_dir) / MANIFEST).read_text())
    if "checks" in manifest:
        rows = run_checks(Path(args.from_dir), args.driver, Path(args.out))
    else:
        rows = run(Path(args.from_dir), args.driver, Path(args.out), repeat=args.repeat)
        print_table(rows)
    return 0 if all(r["check"] != "FAIL" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
