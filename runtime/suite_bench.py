"""`mmaflow bench --suite NAME`: the GEMMs of real models (``runtime/suites.py``) with mmaflow,
IREE's default pipeline and torch, each result checked against float64; manifest kind "suite".

The halves of ``bench``: ``prepare`` (here, with the compiler) builds each row's module once per
distinct source (a dynamic-M module serves every M of its N, K, order and dtype) with mmaflow and
with IREE's default flags (``bench_common.iree_default``); a side that cannot build it is kept as
"not built" with the first error line. ``run`` (on the GPU machine: iree.runtime, numpy, torch)
checks every build's result (``bench_common.reference_check``), times it (median of synchronous
calls; with ``kernel``, Nsight Compute's kernel-only time through ``python -m
mmaflow.runtime.bench --profile-one FILE ROW``), times torch's recipes for the row (``torch_recipes``)
and prints per row mmaflow's speed against the best torch recipe and against IREE's default, their
geomeans and the worst rows. Imports no IREE compiler code outside ``prepare``.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from mmaflow.runtime.bench_common import (
    MANIFEST,
    PROFILED_CALLS,
    build_marker,
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
from mmaflow.runtime.modules import dynamic_module, matmul_module
from mmaflow.runtime.suites import Row, matching

VARIANTS = ("mmaflow", "iree-default")


def source(row: Row) -> str:
    """The row's module: ``matmul`` of A (batch x M x K) and B (K x N, or N x K for "nk") -> f32."""
    nk = row.b_layout == "nk"
    if row.dynamic:
        return dynamic_module(m=None, n=row.n, k=row.k, in_type=row.dtype, transpose_b=nk)
    return matmul_module(row.m, row.n, row.k, row.dtype, "f32", transpose_b=nk, batch=row.batch)


# ---- prepare (needs the compiler) -------------------------------------------------------------


def prepare(
    target: str, name: str, dtypes: list[str], out_dir: Path, overrides: dict | None = None, rows: str | None = None
) -> dict:
    """Build suite ``name``'s rows (those whose name ``rows``, a regular expression, matches) with
    mmaflow and IREE's default for ``target``; write the modules and the manifest."""
    from iree.compiler import CompilerToolError, compile_str

    from mmaflow.compiler.core.errors import InputError, MmaflowError
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions
    from mmaflow.compiler.target.targets import get_target

    t = get_target(target)
    try:
        rows = matching(name, tuple(dtypes), rows)
    except ValueError as e:
        raise InputError(str(e)) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    base_flags, base_target = iree_default(t)
    builds: dict[str, dict] = {}
    entries = []
    start = time.perf_counter()
    for i, row in enumerate(rows):
        src = source(row)
        if src not in builds:
            stem = f"{t.name}_{len(builds)}"
            mine = {"target": t.name, "file": f"mmaflow_{stem}.vmfb"}
            try:
                res = compile_module(src, t.name, options=CodegenOptions(overrides=overrides or {}), source_name=stem)
                (out_dir / mine["file"]).write_bytes(res.vmfb)
                mine["config"] = config_line(res.log)
            except MmaflowError as e:
                mine.update(file=None, not_built=str(e).splitlines()[0][:400])
            base = {"target": base_target, "file": f"iree_{stem}.vmfb", "config": "IREE default pipeline"}
            try:
                (out_dir / base["file"]).write_bytes(compile_str(src, extra_args=base_flags))
            except CompilerToolError as e:
                base.update(file=None, not_built=first_error(str(e)))
            builds[src] = {"mmaflow": mine, "iree-default": base}
            for v, b in builds[src].items():
                if b.get("not_built"):
                    print(f"bench: {row.name}: {v} not built: {b['not_built']}", file=sys.stderr)
        entries.append(
            {
                "name": row.name,
                "uses": list(row.uses),
                **{f: getattr(row, f) for f in ("m", "n", "k", "batch", "dtype", "b_layout", "dynamic")},
                "builds": builds[src],
            }
        )
    marker = build_marker(t, out_dir)  # (None: one ncu run per build)
    manifest = {
        "kind": "suite",
        "marker": marker,
        "suite": name,
        "target": t.name,
        "driver": t.iree_device,
        "function": "matmul",
        "c_type": "f32",
        "rows": entries,
        "modules": 2 * len(builds),
        "prepare_s": round(time.perf_counter() - start, 1),
        "prepared": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


# ---- run (iree.runtime, numpy, optional torch) ------------------------------------------------


def inputs(row: dict, index: int) -> tuple[np.ndarray, np.ndarray]:
    """A ((batch x) M x K) and B as the module takes it (K x N, or N x K for "nk"): uniform in
    [-1, 1), rounded to the row's dtype (the reference multiplies the rounded values)."""
    from mmaflow.runtime.numerics import DTYPES

    rng = np.random.default_rng(index)
    lead = (row["batch"],) if row["batch"] else ()
    b_shape = (row["n"], row["k"]) if row["b_layout"] == "nk" else (row["k"], row["n"])
    return tuple(
        (rng.random(lead + s, dtype=np.float32) * 2 - 1).astype(DTYPES[row["dtype"]])
        for s in ((row["m"], row["k"]), b_shape)
    )


def torch_recipes(row: dict) -> dict:
    """{row key: (label, fn(torch, a, b), f32 out)} of what torch runs for the row, on the inputs
    as the module takes them: torch.matmul (16-bit out, cuBLAS's fastest), torch.mm / torch.bmm
    with out_dtype=float32 (what the module computes; torch >= 2.8, else "not run"), and for B
    stored N x K torch.nn.functional.linear (nn.Linear's call on its weight)."""
    nk, batched = row["b_layout"] == "nk", bool(row["batch"])

    def kn(b):
        return b.transpose(-1, -2) if nk else b

    mm = "bmm" if batched else "mm"
    out = {
        "torch": ("torch.matmul (16-bit out)", lambda torch, a, b: torch.matmul(a, kn(b)), False),
        "torch-f32-out": (
            f"torch.{mm} (f32 out)",
            lambda torch, a, b: getattr(torch, mm)(a, kn(b), out_dtype=torch.float32),
            True,
        ),
    }
    if nk:
        out["torch-linear"] = (
            "torch.nn.functional.linear",
            lambda torch, a, b: torch.nn.functional.linear(a, b),
            False,
        )
    return out


def kernel_times_of(manifest_dir: Path, items: list, driver: str, out_dir: Path) -> list[dict]:
    """Kernel-only times of ``items`` ((file or torch recipe key, row)), in one Nsight Compute run
    over ``python -m mmaflow.runtime.bench --profile-many``: each item's calls follow a marker kernel."""
    from mmaflow.runtime.ncu import kernel_times

    out_dir.mkdir(parents=True, exist_ok=True)
    listing = out_dir / "kernel_items.json"
    listing.write_text(json.dumps(items))
    child = [sys.executable, "-m", "mmaflow.runtime.bench", "--from-dir", str(manifest_dir), "--driver", driver]
    child += ["--out", "-", "--profile-many", str(listing)]
    times = kernel_times(child, len(items), PROFILED_CALLS, f"{len(items)} suite builds")
    listing.unlink()
    return [t.as_dict() for t in times]


def profile_many(manifest_dir: Path, listing: Path, driver: str) -> None:
    """For ``kernel_times_of``: per item of ``listing``, the marker module's call, then
    ``profile_one``'s calls."""
    from mmaflow.runtime.iree_runner import CompiledModule
    from mmaflow.runtime.ncu import MARKER

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    marker = CompiledModule((manifest_dir / manifest["marker"]).read_bytes(), driver)
    fn = marker.function(MARKER)
    x = marker.upload(np.ones(4, np.float32))
    for file, row in json.loads(listing.read_text()):
        fn(x).to_host()
        profile_one(manifest_dir, file, row, driver)


def profile_one(manifest_dir: Path, file: str, index: int, driver: str) -> None:
    """``profile_calls`` of row ``index`` with one build (or one torch recipe, by its key)."""
    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    row = manifest["rows"][index]
    recipes = torch_recipes(row)
    fn = recipes[file][1] if file in recipes else None
    profile_calls(manifest_dir, "torch" if fn else file, driver, manifest["function"], list(inputs(row, index)), fn)


def _result(row: dict, index: int, variant: str, target: str, **fields) -> dict:
    keep = ("m", "n", "k", "batch", "dtype", "b_layout", "dynamic")
    return {"row": index, "name": row["name"], **{f: row[f] for f in keep}, "variant": variant, "target": target} | {
        "ms": float("nan"),
        "tflops": float("nan"),
        "check": "-",
        "max_rel_err": float("nan"),
        "detail": "",
        "config": "",
        "file": None,
        **fields,
    }


def run(manifest_dir: Path, driver: str, out_dir: Path, *, repeat: int = 20, warmup: int = 5, kernel: bool = False):
    """Check and time every row's builds and torch recipes; ``kernel``: kernel-only times too."""
    from mmaflow.runtime.iree_runner import CompiledModule

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    torch = torch_cuda() if driver == "cuda" else None
    results, modules = [], {}
    for i, row in enumerate(manifest["rows"]):
        a, b = inputs(row, i)
        b_kn = np.swapaxes(b, -1, -2) if row["b_layout"] == "nk" else b
        flop = 2.0 * max(row["batch"], 1) * row["m"] * row["n"] * row["k"]
        for variant in VARIANTS:
            build = row["builds"][variant]
            if build.get("not_built"):
                results.append(_result(row, i, variant, build["target"], check="not built", detail=build["not_built"]))
                print(f"bench: {row['name']}: {variant} not built: {build['not_built']}", flush=True)
                continue
            if build["file"] not in modules:
                modules[build["file"]] = CompiledModule((manifest_dir / build["file"]).read_bytes(), driver)
            mod = modules[build["file"]]
            chk = reference_check(a, b_kn, mod(manifest["function"], a, b), torch)
            t = statistics.median(mod.time(manifest["function"], a, b, warmup=warmup, repeat=repeat))
            results.append(
                _result(
                    row,
                    i,
                    variant,
                    build["target"],
                    ms=t * 1e3,
                    tflops=flop / t / 1e12,
                    check=chk["verdict"],
                    max_rel_err=chk["max_rel_err"],
                    detail=chk["detail"],
                    config=build["config"],
                    file=build["file"],
                )
            )
        for key, (label, fn, f32_out) in torch_recipes(row).items() if torch is not None else ():
            ta, tb = to_torch(torch, a), to_torch(torch, b)
            check, detail = "-", ""
            try:
                res = fn(torch, ta, tb)
                if f32_out:  # the module's own output type: the same reference and bound
                    chk = reference_check(a, b_kn, res.float().cpu().numpy(), torch)
                    check, detail = chk["verdict"], f"torch vs float64: {chk['detail']}"
            except (RuntimeError, ValueError, AttributeError, TypeError) as err:  # e.g. no out_dtype
                why = str(err).splitlines()[0][:300]
                results.append(_result(row, i, label, torch.cuda.get_device_name(), check="not run", detail=why))
                print(f"bench: {row['name']}: {label} not run: {why}", flush=True)
                continue
            t = statistics.median(cuda_event_times(torch, lambda: fn(torch, ta, tb), warmup, repeat))
            results.append(
                _result(
                    row,
                    i,
                    label,
                    torch.cuda.get_device_name(),
                    ms=t * 1e3,
                    tflops=flop / t / 1e12,
                    check=check,
                    detail=detail,
                    config=f"torch {torch.__version__}",
                    file=key,
                )
            )
        print(f"bench: {row['name']}: {' '.join(_cell(r) for r in results if r['row'] == i)}", flush=True)
    if kernel:  # after all synchronous timing
        timed = [r for r in results if r["file"] is not None]
        if manifest.get("marker"):  # one ncu run for all, split at the marker kernels
            times = kernel_times_of(manifest_dir, [(r["file"], r["row"]) for r in timed], driver, out_dir)
        else:  # a manifest without the marker: one ncu run per build
            times = [kernel_time_of(manifest_dir, r["file"], r["row"], driver) for r in timed]
        for r, k in zip(timed, times):
            flop = 2.0 * max(r["batch"], 1) * r["m"] * r["n"] * r["k"]
            r.update(k, kernel_tflops=flop / (k["kernel_ms"] * 1e-3) / 1e12)
            print(f"bench: {r['name']}: {r['variant']} {k['kernel_ms']:.4f} ms kernel-only", flush=True)
    write_rows(results, out_dir, manifest)
    summary = summarize(results)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return results


def _cell(r: dict) -> str:
    return f"[{r['variant']}: {r['ms']:.4f} ms {r['check']}]"


def _time(r: dict) -> float:
    """Kernel-only time where measured, else the call time (ms); NaN for a row not built or run."""
    return r.get("kernel_ms", r["ms"])


def summarize(results: list[dict]) -> dict:
    """Per suite row: mmaflow's time, IREE default's, the best torch recipe's (fastest that ran),
    and the speed ratios ``x_torch`` = best torch time / mmaflow time and ``x_iree`` = IREE time /
    mmaflow time (above 1: mmaflow is faster); their geomeans over the rows where both ran."""
    per = []
    for i in dict.fromkeys(r["row"] for r in results):
        rs = [r for r in results if r["row"] == i]
        by = {r["variant"]: r for r in rs}
        mine = _time(by["mmaflow"])
        torch_rows = [r for r in rs if r["variant"] not in VARIANTS and not math.isnan(_time(r))]
        best = min(torch_rows, key=_time, default=None)
        iree = _time(by["iree-default"])
        per.append(
            {
                "row": i,
                "name": rs[0]["name"],
                "mmaflow_ms": mine,
                "mmaflow_check": by["mmaflow"]["check"],
                "iree_ms": iree,
                "torch_ms": _time(best) if best else float("nan"),
                "torch_best": best["variant"] if best else "",
                "x_torch": (_time(best) / mine) if best else float("nan"),
                "x_iree": iree / mine,
                "kernel_only": "kernel_ms" in by["mmaflow"],
            }
        )

    def geomean(key):
        xs = [p[key] for p in per if p[key] > 0 and not math.isnan(p[key])]
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")

    return {
        "rows": per,
        "geomean_x_torch": geomean("x_torch"),
        "geomean_x_iree": geomean("x_iree"),
        "failed": [r["name"] + f" ({r['variant']})" for r in results if r["check"] == "FAIL"],
        "not_built": [r["name"] + f" ({r['variant']})" for r in results if r["check"] == "not built"],
    }


def print_table(results: list[dict], worst: int = 10) -> None:
    s = summarize(results)
    which = "kernel-only" if any(p["kernel_only"] for p in s["rows"]) else "call"
    print(f"{which} ms; x torch = best torch / mmaflow, x IREE = IREE default / mmaflow (above 1: mmaflow faster)")
    print(f"{'row':<64} {'mmaflow':>9} {'IREE':>9} {'torch':>9} {'x torch':>8} {'x IREE':>7} check  best torch")
    for p in s["rows"]:
        print(
            f"{p['name'][:64]:<64} {p['mmaflow_ms']:>9.4f} {p['iree_ms']:>9.4f} {p['torch_ms']:>9.4f} "
            f"{p['x_torch']:>8.2f} {p['x_iree']:>7.2f} {p['mmaflow_check']:<6} {p['torch_best']}"
        )
    print(f"geomean over {len(s['rows'])} rows: x torch {s['geomean_x_torch']:.3f}, x IREE {s['geomean_x_iree']:.3f}")
    ranked = sorted((p for p in s["rows"] if not math.isnan(p["x_torch"])), key=lambda p: p["x_torch"])
    print(f"worst {min(worst, len(ranked))} rows against torch:")
    for p in ranked[:worst]:
        print(f"  {p['x_torch']:.2f}x  {p['name']} (best torch: {p['torch_best']})")
    for what in ("failed", "not_built"):
        if s[what]:
            print(f"{what.replace('_', ' ')}: {', '.join(s[what])}")
