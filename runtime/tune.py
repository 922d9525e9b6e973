"""`mmaflow tune`: time candidate configs of real models' GEMMs on a GPU, kernel-only, and write the
fastest per shape class into the target's tuning table (``compiler/target/tuning.py``).

Three steps, as `mmaflow bench`'s halves (the GPU machine needs no compiler):

    prepare  (compiler)  every static row of a suite (``runtime/suites.py``) for each target: the
                         heuristic's build, then each family's candidates (``registry.candidates``:
                         --config overrides), each resolved and validated, one build per distinct
                         config that ptxas assembles without spills; manifest kind "tune"
    run      (GPU)       every build's output checked on sampled rows against float64 (a failing
                         build never makes a table), then one Nsight Compute process over a child
                         that makes 1 + PROFILED_CALLS calls of each build, the marker module's kernel
                         between builds splitting the stream (``ncu.kernel_times``, as `bench
                         --suite`), in ROUNDS rounds over all builds (alternate rounds in reverse
                         order), each build's time the median of its rounds'; tune_results.json
    table    (anywhere)  per (target, shape class), the candidate with the least kernel time summed
                         over the class's rows (every row of the class timed for it); an entry keeps
                         ``{}`` where the heuristic's own config is within NOISE of it

    mmaflow tune --suite llama3-8b --target sm_90a,sm_80 --dtype f16 --rows REGEX --prepare-only DIR
    python -m mmaflow.runtime.tune --from-dir DIR --out OUT            # on the GPU machine
    mmaflow tune --results OUT/tune_results.json                       # writes compiler/target/tuned/
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mmaflow.runtime.bench_common import MANIFEST, PROFILED_CALLS, f32_tolerance, torch_cuda

RESULTS = "tune_results.json"
NOISE = 0.03  # a candidate must beat the heuristic's config by more than this to replace it
# Rounds over all builds: one round measured q_proj at M 128 on the H200 (128x4096x4096, 64x64 tiles)
# at 17.0 us in one run and 26.4 in the next (25.1 in `bench --suite`), where the clocks float
# (ncu --clock-control none); the median of rounds in alternating order damps both the drift
# and the position in the run.
ROUNDS = 3


# ---- prepare (needs the compiler) -------------------------------------------------------------


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _static_rows(suite_name: str, dtypes: list[str], rows: str | None) -> list:
    from mmaflow.compiler.core.errors import InputError
    from mmaflow.runtime.suites import matching

    try:
        picked = matching(suite_name, tuple(dtypes), rows)
    except ValueError as e:
        raise InputError(str(e)) from None
    static = [r for r in picked if not r.dynamic]
    if not static:
        raise InputError(
            f"suite {suite_name} has no static rows in {','.join(dtypes)}"
            + (f" matching {rows!r}" if rows else "")
            + " (the tuning table holds static shape classes)"
        )
    return static


def _builds(t, row, stem: str) -> tuple[list | None, list[str]]:
    """A row's builds for target ``t``: [(overrides, CompileResult)], the heuristic's own config
    first (``{}``; not a table entry this tool may have written), then each family candidate
    (``registry.candidates``) that resolves to a distinct config and builds; and the refused
    candidates, one line each. None for a row mmaflow leaves to IREE (nothing to tune)."""
    from mmaflow.compiler.core.errors import MmaflowError
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.kernels import registry
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions
    from mmaflow.runtime.suite_bench import source

    src = source(row)
    base = compile_module(src, t.name, options=CodegenOptions(tuned=False), source_name=stem)
    if len(base.taken) != 1:
        why = next((line for line in base.log if "left" in line), "no dispatch taken")
        print(f"tune: {t.name} {row.name}: not tuned: {why}", flush=True)
        return None, []
    problem = base.taken[0].facts.problem
    builds, skipped = [({}, base)], []
    seen = {registry.resolve(t, problem, {})[0]}
    for over in registry.candidates(t, problem):
        try:
            cfg, _ = registry.resolve(t, problem, over)
        except MmaflowError as e:
            skipped.append(f"{over}: {str(e).splitlines()[0]}")
            continue
        if cfg in seen:
            continue
        seen.add(cfg)
        try:
            res = compile_module(src, t.name, options=CodegenOptions(overrides=over), source_name=stem)
        except MmaflowError as e:  # a config the families accept but the kernel cannot build
            skipped.append(f"{over}: {str(e).splitlines()[0]}")
            continue
        builds.append((over, res))
    return builds, skipped


def _without_spills(t, builds: list, refused: list[str]) -> list:
    """The builds whose PTX ptxas assembles without spilling (the heuristic's own, first, kept whatever
    it does: the baseline); each refused one a line in ``refused``. All of them where there is no ptxas
    (``prepare`` says so once)."""
    from mmaflow.compiler.report import ptxas_info, ptxas_path

    if ptxas_path() is None:
        return builds
    kept = builds[:1]
    for over, res in builds[1:]:
        (exe,) = res.taken
        info = ptxas_info(res.isa_text[exe.name], t.iree_arch, exe.facts.config.workgroup_size)
        if info.get("vgpr_spills"):
            refused.append(f"{over}: spills {info['vgpr_spills']} bytes (ptxas)")
            continue
        kept.append((over, res))
    return kept


def _row_entry(t, row, base) -> dict:
    from mmaflow.compiler.target import tuning

    return {
        "name": row.name,
        "target": t.name,
        **{f: getattr(row, f) for f in ("m", "n", "k", "batch", "dtype", "b_layout")},
        "class": tuning.shape_class(base.taken[0].facts.problem).to_dict(),
    }


def prepare(targets: list[str], suite_name: str, dtypes: list[str], out_dir: Path, rows: str | None) -> dict:
    """Build every candidate of every static row matching ``rows``; write the manifest."""

    from mmaflow.compiler.core.errors import InputError, ToolchainError
    from mmaflow.compiler.report import ptxas_path
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.runtime.bench_common import build_marker, config_line

    static = _static_rows(suite_name, dtypes, rows)
    chosen = [get_target(name) for name in targets]
    other = [t.name for t in chosen if t.is_amd]
    if other:
        raise InputError(
            f"mmaflow tune times kernels on an NVIDIA GPU through CUDA; {', '.join(other)} cannot be timed here: "
            f"`mmaflow tune --suite NAME --target {','.join(other)}` makes their tables statically"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    if ptxas_path() is None:
        print("tune: no ptxas (pip install -e '.[test]'): candidates are not screened for spills", flush=True)
    start, entries, built = time.perf_counter(), [], 0
    for t in chosen:
        for row in static:
            stem = f"{t.name}_{len(entries)}"
            builds, skipped = _builds(t, row, stem)
            if builds is None:
                continue
            builds = _without_spills(t, builds, skipped)
            cands = []
            for i, (over, res) in enumerate(builds):
                cand = {"config": over, "file": f"{stem}_{'h' if i == 0 else i}.vmfb", "describe": config_line(res.log)}
                (out_dir / cand["file"]).write_bytes(res.vmfb)
                cands.append(cand)
            built += len(cands)
            print(f"tune: {t.name} {row.name}: {len(cands)} builds ({len(skipped)} candidates refused)", flush=True)
            entries.append(_row_entry(t, row, builds[0][1]) | {"candidates": cands, "refused": skipped})
    marker = build_marker(chosen[0], out_dir)
    if marker is None:
        raise ToolchainError("mmaflow tune needs the marker module that splits its one ncu run; it did not build")
    manifest = {
        "kind": "tune",
        "marker": marker,
        "suite": suite_name,
        "targets": targets,
        "rows_regex": rows,
        "dtypes": dtypes,
        "commit": _git_commit(),
        "function": "matmul",
        "rows": entries,
        "builds": built,
        "prepare_s": round(time.perf_counter() - start, 1),
        "prepared": time.strftime("%Y-%m-%d"),
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


# ---- run (iree.runtime, numpy, torch; under Nsight Compute) -----------------------------------


CHECK_ROWS = 64  # rows of each output checked against float64 (every column; the last row among them)


def check_builds(manifest_dir: Path, driver: str = "cuda") -> dict:
    """{file: (verdict, max relative error)}: each build's output on CHECK_ROWS rows (the first,
    the last and random ones; every column) against a float64 reference and the f32-accumulation
    bound (``bench_common.reference_check``'s), computed once per row of the suite."""
    import iree.runtime as rt

    from mmaflow.runtime import numerics
    from mmaflow.runtime.suite_bench import inputs

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    config = rt.Config(driver)
    out = {}
    for i, row in enumerate(manifest["rows"]):
        a, b = inputs(row, i)
        b_kn = np.swapaxes(b, -1, -2) if row["b_layout"] == "nk" else b
        rng = np.random.default_rng(i)
        m = a.shape[-2]
        rows = np.unique(np.concatenate([[0, m - 1], rng.choice(m, size=min(CHECK_ROWS, m), replace=False)]))
        a64, b64 = a[..., rows, :].astype(np.float64), b_kn.astype(np.float64)
        ref, bound = a64 @ b64, np.abs(a64) @ np.abs(b64)
        tol = f32_tolerance(a.shape[-1], ref, bound)
        da, db = rt.asdevicearray(config.device, a), rt.asdevicearray(config.device, b)
        for c in row["candidates"]:
            ctx = rt.SystemContext(config=config)
            ctx.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, (manifest_dir / c["file"]).read_bytes()))
            res = np.asarray(ctx.modules.module[manifest["function"]](da, db).to_host())[..., rows, :]
            chk = numerics.compare(res.astype(np.float64), ref, tol, out_type="f32")
            out[c["file"]] = ("PASS" if chk.passed else "FAIL", float(chk.max_rel_err))
            del ctx
    return out


def measure_order(manifest: dict) -> list[tuple[int, str]]:
    """(row index, build file) in the order the child measures them: ROUNDS rounds over every
    build, the odd rounds in reverse."""
    once = [(i, c["file"]) for i, r in enumerate(manifest["rows"]) for c in r["candidates"]]
    return [x for k in range(ROUNDS) for x in (once if k % 2 == 0 else once[::-1])]


def _child(manifest_dir: Path, driver: str) -> None:
    """Under ncu, per build in ``measure_order``: the marker module's kernel, then 1 + PROFILED_CALLS
    calls, each waited for (``ncu.kernel_times`` keeps the last PROFILED_CALLS). Inputs are made and
    uploaded once per row, on one device, for all of its builds and rounds."""
    import iree.runtime as rt

    from mmaflow.runtime.ncu import MARKER
    from mmaflow.runtime.suite_bench import inputs

    manifest = json.loads((manifest_dir / MANIFEST).read_text())
    config = rt.Config(driver)

    def load(file: str, function: str):
        ctx = rt.SystemContext(config=config)
        ctx.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, (manifest_dir / file).read_bytes()))
        return ctx, ctx.modules.module[function]

    marker_ctx, marker = load(manifest["marker"], MARKER)  # (the context lives as long as its function is called)
    x = rt.asdevicearray(config.device, np.ones(4, np.float32))
    uploaded = {}  # row -> its inputs on the device (made once, kept for every round)
    for i, file in measure_order(manifest):
        if i not in uploaded:
            a, b = inputs(manifest["rows"][i], i)
            uploaded[i] = rt.asdevicearray(config.device, a), rt.asdevicearray(config.device, b)
        ctx, fn = load(file, manifest["function"])
        marker(x).to_host()
        for _ in range(1 + PROFILED_CALLS):
            fn(*uploaded[i]).to_host()
        del fn, ctx


def run(manifest_dir: Path, out_dir: Path, driver: str = "cuda") -> dict:
    """Time every build; write and return tune_results.json."""
    import shutil

    from mmaflow.compiler.core.errors import DeviceError, InputError
    from mmaflow.runtime.iree_runner import device_present
    from mmaflow.runtime.ncu import NcuError, kernel_times

    try:
        manifest = json.loads((manifest_dir / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{manifest_dir}: no readable {MANIFEST} ({e})") from None
    if manifest.get("kind") != "tune":
        raise InputError(f"{manifest_dir}: not a `mmaflow tune --prepare-only` directory")
    ok, why = device_present(driver)
    if not ok:
        raise DeviceError(f"mmaflow tune times kernels on a GPU: {why}")
    if shutil.which("ncu") is None:
        raise DeviceError("mmaflow tune times kernels with Nsight Compute: ncu is not on PATH")
    torch = torch_cuda()
    child = [sys.executable, "-m", "mmaflow.runtime.tune", "--child", "--from-dir", str(manifest_dir)]
    child += ["--driver", driver]
    start = time.perf_counter()
    checks = check_builds(manifest_dir, driver)
    print(f"tune: {len(checks)} builds checked ({time.perf_counter() - start:.0f} s)", flush=True)
    order = measure_order(manifest)
    try:
        times = kernel_times(child, len(order), PROFILED_CALLS, f"{ROUNDS} rounds of the builds of {manifest_dir}")
    except NcuError as e:
        raise DeviceError(str(e)) from None
    rounds: dict = {}
    for (_, f), t in zip(order, times):
        rounds.setdefault(f, []).append(round(t.ms * 1e3, 3))
    by_file = {
        f: {"verdict": checks[f][0], "max_rel_err": checks[f][1], "us": statistics.median(us), "rounds_us": us}
        for f, us in rounds.items()
    }
    rows = []
    for r in manifest["rows"]:
        rows.append({**{k: v for k, v in r.items() if k != "candidates"}, "candidates": []})
        for c in r["candidates"]:
            rows[-1]["candidates"].append({**c, **by_file[c["file"]]})
    gpu = torch.cuda.get_device_name() if torch is not None else _nvidia_smi_name()
    results = {
        "kind": "tune-results",
        "gpu": gpu,
        "commit": manifest["commit"],
        "suite": manifest["suite"],
        "rows_regex": manifest["rows_regex"],
        "dtypes": manifest["dtypes"],
        "prepared": manifest["prepared"],
        "run_s": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RESULTS).write_text(json.dumps(results, indent=1))
    for r in rows:
        ok = [c for c in r["candidates"] if c["verdict"].startswith("PASS")]
        best = min(ok, key=lambda c: c["us"]) if ok else None
        h = r["candidates"][0]
        print(
            f"{r['target']:7} {r['name']:44} heuristic {h['us']:9.2f} us  best {best['us'] if best else math.nan:9.2f}"
            f" us {json.dumps(best['config']) if best else '-'}  ({len(r['candidates']) - len(ok)} failed)"
        )
    return results


def _nvidia_smi_name() -> str:
    try:
        cmd = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "unknown NVIDIA GPU"


# ---- table (pure: results -> entries) ---------------------------------------------------------


def _run_line(results: dict) -> str:
    return (
        f"{results['gpu']}, mmaflow tune at {results['commit']}, {results['prepared']}: suite {results['suite']} "
        f"({', '.join(results['dtypes'])}; rows {results['rows_regex'] or 'all'})"
    )


def tables(results: dict | list[dict], command: str, measured: bool = True) -> dict:
    """{target: Table} from one run's results or several runs' (one GPU): per shape class, the
    candidate whose kernel time summed over the class's rows -- from every run given, so that two
    suites' shapes in one class (BERT-base's 128x768x3072 and Llama-3-8B's 128x1024x4096) decide
    together -- is least (among those every row of the class built and passed); ``{}`` where the
    heuristic's config is within NOISE of it. A failed check anywhere is an error: a table is never
    written from a run with a wrong build. ``measured=False``: the results are `static`'s
    estimates (the margin STATIC_MARGIN instead of NOISE; the table says it is unmeasured)."""
    from mmaflow.compiler.target import tuning

    runs = results if isinstance(results, list) else [results]
    gpus = {r["gpu"] for r in runs}
    if len(gpus) > 1:
        raise ValueError(f"runs on different GPUs ({', '.join(sorted(gpus))}) do not make one table")
    failed = [
        f"{r['target']} {r['name']} {json.dumps(c['config'])}: {c['verdict']}"
        for res in runs
        for r in res["rows"]
        for c in r["candidates"]
        if not c["verdict"].startswith("PASS")
    ]
    if failed:
        raise ValueError("builds failed their float64 check; no table is written:\n  " + "\n  ".join(failed))
    groups: dict = {}
    for res in runs:
        for r in res["rows"]:
            groups.setdefault((r["target"], json.dumps(r["class"], sort_keys=True)), []).append((r, _run_line(res)))
    out: dict = {}
    for (target, _), tagged in sorted(groups.items()):
        rows = [r for r, _ in tagged]
        run = "; ".join(dict.fromkeys(line for _, line in tagged))
        key = lambda c: json.dumps(c["config"], sort_keys=True)  # noqa: E731
        common = set.intersection(*({key(c) for c in r["candidates"]} for r in rows))
        total = {k: sum(next(c["us"] for c in r["candidates"] if key(c) == k) for r in rows) for k in common}
        best = min(sorted(total), key=total.get)
        heuristic = key({"config": {}})
        if total[best] >= (1 - (NOISE if measured else STATIC_MARGIN)) * total[heuristic]:
            best = heuristic
        first = max(rows, key=lambda r: r["m"] * r["n"] * r["k"] * max(r["batch"] or 1, 1))  # the shape named
        pick = next(c for c in first["candidates"] if key(c) == best)
        h = first["candidates"][0]
        entry = tuning.Entry(
            tuning.ShapeClass(**rows[0]["class"]),
            pick["config"],
            (max(first["batch"] or 1, 1), first["m"], first["n"], first["k"]),
            round(pick["us"], 2),
            round(h["us"], 2),
            h["describe"],
            pick["describe"],
            len(first["candidates"]),
            run,
        )
        out.setdefault(target, []).append(entry)
    return {
        t: tuning.Table(
            t,
            runs[0]["gpu"],
            measured,
            "; ".join(dict.fromkeys(e.run for e in entries)),
            command,
            tuple(sorted(entries, key=lambda e: e.cls.key())),
        )
        for t, entries in out.items()
    }


def write_tables(results_paths: Path | list[Path], command: str) -> list[Path]:
    """Merge the tables of one or more runs (``tables``: their rows decide each class together)
    into ``compiler/target/tuned/``: a class measured again replaces its entry, so runs whose
    shapes share a class belong in one call; each entry keeps its own runs' provenance, the
    table's lists the runs."""
    runs = []
    for path in results_paths if isinstance(results_paths, list) else [results_paths]:
        results = json.loads(path.read_text())
        if results.get("kind") != "tune-results":
            raise ValueError(f"{path}: not a `python -m mmaflow.runtime.tune` results file")
        runs.append(results)
    return _merge(tables(runs, command), command)


def _merge(new_tables: dict, command: str) -> list[Path]:
    from mmaflow.compiler.target import tuning

    written = []
    for target, new in new_tables.items():
        path = tuning.table_path(target)
        old = tuning.Table.from_dict(json.loads(path.read_text())) if path.exists() else None
        if old is not None and old.measured != new.measured:
            raise ValueError(f"{path} is {'' if old.measured else 'un'}measured; this run's table is not: not merged")
        keep = [e for e in (old.entries if old else ()) if e.cls not in {n.cls for n in new.entries}]
        entries = tuple(sorted(keep + list(new.entries), key=lambda e: e.cls.key()))
        gpus = dict.fromkeys(([old.gpu] if old and keep else []) + [new.gpu])
        merged = tuning.Table(
            target,
            ", ".join(gpus),
            new.measured,
            "; ".join(dict.fromkeys(e.run for e in entries)),
            command,
            entries,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(merged.to_dict(), indent=1) + "\n")
        written.append(path)
    tuning.table.cache_clear()
    return written


# ---- static (AMD: no GPU to time on) ----------------------------------------------------------

STATIC_RESULTS = "static_results.json"
# A candidate replaces the heuristic's config only when its estimate is this much lower: the cost
# model ranks (runtime/static_cost.py), it does not time, and a small difference is within its error.
STATIC_MARGIN = 0.10


def static(targets: list[str], suite_name: str, dtypes: list[str], rows: str | None, out_dir: Path) -> dict:
    """The static half of `mmaflow tune` for AMD targets: every candidate of every static row
    built, its final ISA read (a candidate that spills, or loads narrower than the heuristic's build
    in its K loop, is refused), workgroup 0 (a full tile) run on
    the lane executor against numpy (a build that fails or races is refused) and its counters
    turned into ``static_cost.estimate`` on the target's reference part. Writes
    ``static_results.json`` (kind "tune-results", ``us`` the estimates) into ``out_dir``."""
    from mmaflow.compiler.core.errors import InputError, MmaflowError
    from mmaflow.compiler.core.mlir import new_context, parse_module
    from mmaflow.compiler.target.chips import chip
    from mmaflow.compiler.target.isa import k_loop_global_loads
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.runtime import simulate
    from mmaflow.runtime.bench_common import config_line

    static_rows = _static_rows(suite_name, dtypes, rows)
    chosen = [get_target(name) for name in targets]
    nvidia = [t.name for t in chosen if not t.is_amd]
    if nvidia:
        raise InputError(
            f"{', '.join(nvidia)}: NVIDIA targets are timed on a GPU (--prepare-only DIR, then python -m "
            f"mmaflow.runtime.tune); the static choice is for AMD targets, one call each kind"
        )
    start, entries = time.perf_counter(), []
    for t in chosen:
        part = chip(t.name)
        for row in static_rows:
            stem = f"{t.name}_{len(entries)}"
            builds, refused = _builds(t, row, stem)
            if builds is None:
                continue
            cands, base_narrow = [], 0
            for over, res in builds:
                (exe,) = res.taken
                rep = res.reports[exe.name]
                spills = (rep.vgpr_spills or 0) + (rep.sgpr_spills or 0) + (rep.scratch_bytes or 0)
                full, narrow = k_loop_global_loads(rep)
                if not over:  # the baseline, whatever it does (what compiles without a table)
                    base_narrow = narrow
                elif spills:
                    refused.append(f"{over}: spills ({spills})")
                    continue
                elif narrow > base_narrow:  # full-width loads wherever the heuristic's build has them
                    refused.append(
                        f"{over}: {narrow} K-loop global loads under 128 bits (the heuristic's: {base_narrow})"
                    )
                    continue
                try:
                    sim = simulate.check_matmul(parse_module(exe.text, new_context()), seed=0, workgroups=[0])
                except MmaflowError as e:
                    if not over:  # no baseline to weigh the candidates against
                        raise
                    refused.append(f"{over}: the executor: {str(e).splitlines()[0]}")
                    continue
                if not sim.check.passed or sim.stats.races:
                    refused.append(f"{over}: FAIL on the executor: {sim.check.line()}")
                    if not over:  # the heuristic's own build wrong: a bug, never a table
                        raise MmaflowError(f"{t.name} {row.name}: the heuristic's build fails: {sim.check.line()}")
                    continue
                est = _estimate(part, t, exe.facts.problem, sim, rep)
                cands.append(
                    {
                        "config": over,
                        "describe": config_line(res.log),
                        "us": est.us,
                        "verdict": "PASS (executor, workgroup 0)",
                        "estimate": est.line(),
                        "bound": est.bound,
                        "vgprs": rep.vgprs,
                        "waves_per_simd": rep.waves_per_simd,
                        "lds_bytes": rep.lds_bytes,
                        "behind_lds_wait": rep.matrix_behind_lds_wait,
                        "loads_b128": full,
                        "loads_narrower": narrow,
                    }
                )
            best = min(cands, key=lambda c: c["us"])
            print(
                f"tune: {t.name} {row.name}: {len(cands)} estimated ({len(refused)} refused); heuristic "
                f"{cands[0]['us']:.2f} us, best {best['us']:.2f} us {json.dumps(best['config'])}",
                flush=True,
            )
            entries.append(_row_entry(t, row, builds[0][1]) | {"candidates": cands, "refused": refused})
    results = {
        "kind": "tune-results",
        "gpu": "; ".join(f"static estimate for {chip(t).part}" for t in targets),
        "static": True,
        "suite": suite_name,
        "targets": targets,
        "rows_regex": rows,
        "dtypes": dtypes,
        "commit": _git_commit(),
        "prepared": time.strftime("%Y-%m-%d"),
        "rows": entries,
        "static_s": round(time.perf_counter() - start, 1),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / STATIC_RESULTS).write_text(json.dumps(results, indent=1))
    return results


def _estimate(part, t, problem, sim, rep):
    from mmaflow.compiler.target.intrinsics import TYPE_BITS
    from mmaflow.runtime.static_cost import counters_of, estimate

    cfg = sim.config
    intr = t.intrinsic(cfg.intrinsic)
    k_tiles = -(-problem.k // cfg.tile_k)
    return estimate(
        part,
        a_type=problem.a_type,
        out_bits=TYPE_BITS[problem.stored_type],
        m=problem.m,
        n=problem.n,
        k=problem.k,
        batch=max(problem.batch or 1, 1),
        flops_per_matrix_op=2 * intr.m * intr.n * intr.k,
        cycles_per_matrix_op=intr.cycles,
        wave_size=cfg.wave_size,
        waves_per_workgroup=cfg.workgroup_size // cfg.wave_size,
        waves_per_simd=rep.waves_per_simd or 1,
        lds_bytes=rep.lds_bytes or 0,
        behind_lds_wait=rep.matrix_behind_lds_wait or 0,
        k_iterations=k_tiles // max(1, getattr(cfg, "waves_k", 1) or 1),
        workgroups=int(math.prod(sim.grid)),
        counters=counters_of(sim.stats, sim.workgroups, cfg.wave_size),
    )


def write_static(results: dict, command: str) -> list[Path]:
    """The static run's tables (``tables(..., measured=False)``) into ``compiler/target/tuned/``."""
    per_target = {}
    for t in results["targets"]:
        from mmaflow.compiler.target.chips import chip

        one = {
            **results,
            "gpu": f"static estimate for {chip(t).part}",
            "rows": [r for r in results["rows"] if r["target"] == t],
        }
        if one["rows"]:
            per_target.update(tables(one, command, measured=False))
    return _merge(per_target, command)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mmaflow.runtime.tune", description=__doc__.split("\n")[0])
    p.add_argument("--from-dir", type=Path, required=True, help="a `mmaflow tune --prepare-only` directory")
    p.add_argument("--out", type=Path, help="where tune_results.json goes (the run)")
    p.add_argument("--driver", default="cuda")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.from_dir, args.driver)
        return 0
    if args.out is None:
        p.error("--out is required")
    from mmaflow.compiler.core.errors import MmaflowError

    try:
        run(args.from_dir, args.out, args.driver)
    except MmaflowError as e:
        print(f"tune: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
