"""`mmaflow run`: compile a module, run mmaflow's kernels, check them.

Devices:
- sim: the lane executor checks every dispatch mmaflow takes, in any module (a single matmul or
  a whole exported model), with its tensors at IREE's byte offsets inside sentinel-filled
  buffers, against IREE's own dispatch IR evaluated in numpy (``runtime/model_check.py``); one
  line per dispatch, taken or left; LDS bank conflicts, access widths, barriers, races;
- hip / cuda: a single-matmul module on the GPU, against numpy;
- local-task: IREE's own CPU pipeline computes the single matmul (a reference run: not
  mmaflow's kernel, and the output says so);
- auto: the target's GPU if IREE sees one, else the lane executor, saying so.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from mmaflow.compiler.core.errors import Exit, InputError, plural
from mmaflow.runtime import numerics
from mmaflow.runtime.api import compile_module, resolve_device, run_module
from mmaflow.runtime.simulate import fp8_tensor_core


def _given_dims(text: str | None) -> dict:
    """--dims m=300,n=200 as {dim: size}."""
    sizes = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, _, value = item.partition("=")
        key = key.strip().lower()
        if key not in ("batch", "m", "n", "k", "k2") or not value.strip().isdigit():
            raise InputError(
                f"--dims takes DIM=SIZE pairs with DIM one of batch, m, n, k (an attention's key length: k2); "
                f"got {item!r}"
            )
        if key in sizes:
            raise InputError(f"--dims gives {key} twice")
        sizes[key] = int(value)
    return sizes


def _parse_dims(text: str | None, prob) -> dict:
    """--dims m=300,n=200: a size for every dynamic dimension of the problem, and only those."""
    return _dims_of([prob], _given_dims(text))[0]


def _dims_of(probs: list, sizes: dict) -> list[dict]:
    """Each problem's run-time sizes from ``sizes``, which must give every dynamic dimension of each and only
    dimensions some problem has dynamic (a model's static dispatches take none of them)."""
    dynamic = list(dict.fromkeys(d.dim for prob in probs for d in prob.dynamic))
    extra = [d for d in sizes if d not in dynamic]
    if extra:
        raise InputError(f"--dims gives {', '.join(extra)}, which the module has static (in what mmaflow takes)")
    missing = [d for d in dynamic if d not in sizes]
    if missing:
        raise InputError(
            f"the module has dynamic {', '.join(missing)}: give the run-time sizes with "
            f"--dims {','.join(f'{d}=SIZE' for d in missing)}"
        )
    return [{d.dim: sizes[d.dim] for d in prob.dynamic} for prob in probs]


def run_command(args, source: str, options, source_name: str = "input.mlir") -> int:
    device = resolve_device(args.target, args.device)
    if device == "sim":
        return _run_on_executor(args, source, options, source_name)
    art = compile_module(
        source,
        args.target,
        config=options.overrides,
        lower=device not in ("sim", "local-task"),
        source_name=source_name,
    )
    if device == "local-task":
        print(
            "mmaflow run: --device local-task: IREE's own CPU pipeline (llvm-cpu) computes the numbers below; "
            "mmaflow's kernel does not run (--device sim runs it on the lane executor)",
            file=sys.stderr,
        )
    else:
        for line in art.log:
            print(line, file=sys.stderr)
    prob = art.problem
    if prob.has_epilogue:
        raise InputError(
            "mmaflow run checks modules whose function takes (A, B) and returns C = A @ B",
            hint="for a fused epilogue, call mmaflow.runtime.run_module with all its inputs "
            "and compare with your reference",
        )
    sizes = _parse_dims(getattr(args, "dims", None), prob)
    rng = np.random.default_rng(args.seed)
    batch, m, n, k = (sizes.get(d, getattr(prob, d)) for d in ("batch", "m", "n", "k"))
    lead = (batch,) if prob.batched else ()
    a_shape = lead + ((k, m) if prob.a_transposed else (m, k))
    b_shape = lead + ((n, k) if prob.b_transposed else (k, n))
    a = numerics.random_matrix(rng, a_shape, prob.a_type, unsigned=prob.unsigned_a)
    b = numerics.random_matrix(rng, b_shape, prob.b_type, unsigned=prob.unsigned_b)
    out, stats = run_module(art, [a] if prob.same_ab else [a, b], device=device)
    a_log = np.swapaxes(a, -1, -2) if prob.a_transposed else a
    b_log = np.swapaxes(a if prob.same_ab else b, -1, -2) if prob.b_transposed else (a if prob.same_ab else b)
    cfg = art.executables[0].facts.config
    fp8 = device != "local-task" and fp8_tensor_core(cfg, prob)
    if fp8 and device == "sim":  # the executor computes the modelled fp8 arithmetic: bit for bit
        ref = numerics.fp8_tensor_core_reference(a_log, b_log, cfg.tile_k, split=cfg.split_k).astype(np.float64)
        tol = np.zeros_like(ref)
    else:
        ref, tol = numerics.matmul_reference(
            a_log,
            b_log,
            prob.c_type,
            unsigned_a=prob.unsigned_a,
            unsigned_b=prob.unsigned_b,
            fp8_k_tile=cfg.tile_k if fp8 else 0,
        )
    check = numerics.compare(np.asarray(out).reshape(ref.shape), ref, tol, out_type=prob.c_type)
    if fp8:
        check.detail += (
            " (against the modelled fp8 tensor-core arithmetic, per-K-tile promotion)"
            if device == "sim"
            else " (the bound holds Hopper's fp8 tensor-core accumulation, numerics.fp8_tensor_core_bound)"
        )
    report = {
        "target": args.target,
        "device": device,
        "problem": prob.to_dict(),
        "check": check.__dict__,
        "counters": stats.to_dict() if stats is not None else None,
    }
    if args.json:
        print(json.dumps(report, default=str, indent=1))
    else:
        dyn = f" (dynamic: {', '.join(f'{d}={v}' for d, v in sizes.items())})" if sizes else ""
        who = (
            "IREE's llvm-cpu pipeline on local-task (not mmaflow's kernel)"
            if device == "local-task"
            else f"mmaflow's {args.target} kernel on {device}"
        )
        print(f"mmaflow run: {who}: {m}x{n}x{k} {prob.a_type} -> {prob.c_type}{dyn}")
        print(f"  {check.line()}")
        if stats is not None:
            d = stats.to_dict()
            print(
                f"  lane executor: {d['seconds']:.2f} s, {d['matrix_ops']} matrix instructions (per wave), "
                f"{d['barriers']} barriers, {len(d['races'])} races"
            )
            print(
                f"  LDS: {d['lds_access_pieces']} accesses, {d['lds_conflict_cycles']} bank-conflict cycles "
                f"({d['lds_cycles']} cycles vs {d['lds_ideal_cycles']} conflict-free)"
            )
            print(
                f"  global loads by bytes per lane: {d['global_loads_by_bytes']}, stores: {d['global_stores_by_bytes']}"
            )
            for race in d["races"]:
                print(f"  race: {race}")
    failed = not check.passed or (stats is not None and stats.races)
    return Exit.FAILED if failed else Exit.OK


PROGRESS_SECONDS = 0.5  # the shortest interval between two progress lines on a terminal


def _progress(name: str, stream=None):
    """A progress callback for long executor runs: the share of the workgroups done and the time
    left, on a terminal only, rewritten in place at most every ``PROGRESS_SECONDS`` (the executor
    ticks after every K-loop iteration, ``Kernel.run``)."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return None
    import time

    start = time.perf_counter()
    shown = [start, -1.0]  # when the last line was shown, and its count

    def show(done: float, total: int) -> None:
        now = time.perf_counter()
        if done == shown[1] or (done < total and now - shown[0] < PROGRESS_SECONDS):
            return
        shown[:] = [now, done]
        spent = now - start
        left = spent / done * (total - done) if done else 0.0
        end = "\n" if done >= total else ""
        print(
            f"\r  {name}: {100 * done / total:.0f}% of {total} workgroups, {spent:.0f} s spent, {left:.0f} s left   ",
            end=end,
            file=stream,
            flush=True,
        )

    return show


def _run_on_executor(args, source: str, options, source_name: str) -> int:
    """Every dispatch of the module: taken ones checked on the lane executor, left ones listed."""
    from mmaflow.compiler.driver.bridge import codegen_module
    from mmaflow.runtime.model_check import check_executable, check_sizes, estimate_seconds

    # a module with nothing taken is refused, as `mmaflow compile` refuses it (nothing to check)
    res = codegen_module(source, args.target, options=options, source_name=source_name, require_matmul=True)
    for line in res.log:
        if not line.startswith(("mmaflow: taken", "mmaflow: left")):
            print(line, file=sys.stderr)
    sample = getattr(args, "sample", 0) or 0
    taken = res.taken
    dims = getattr(args, "dims", None)
    # each taken dispatch's run-time sizes (only those it has), checked before anything is printed or run
    per = _dims_of([exe.facts.problem for exe in taken], _given_dims(dims))
    run_sizes = {exe.name: sizes for exe, sizes in zip(taken, per)}
    for exe in taken:
        check_sizes(exe, run_sizes[exe.name])
    total_estimate = sum(estimate_seconds(e, sample, run_sizes[e.name]) for e in taken)
    if total_estimate > 60 and not sample:
        print(
            f"mmaflow run: the lane executor needs about {total_estimate:.0f} s for "
            f"{plural(len(taken), 'dispatch')}; --sample N checks N workgroups of each (corners and random ones)",
            file=sys.stderr,
        )
    report, failed = [], False
    out = (lambda *a: None) if args.json else print
    out(
        f"mmaflow run: {args.target} on the lane executor: {len(taken)} of {len(res.executables)} dispatches "
        f"taken by mmaflow"
    )
    for exe in res.executables:
        if not exe.taken:
            reason = exe.log[0].split(": ", 2)[-1] if exe.log else "left to IREE"
            out(f"  left  {exe.name}: {reason}")
            report.append({"executable": exe.name, "taken": False, "reason": reason})
            continue
        checks = check_executable(
            exe, seed=args.seed, sample=sample, sizes=run_sizes[exe.name], progress=_progress(exe.name)
        )
        for c in checks:
            failed |= not c.passed
            out(f"  taken {exe.name}: {exe.facts.problem.describe()}")
            out(f"    {c.line()}")
            d = c.stats.to_dict()
            out(
                f"    lane executor: {d['matrix_ops']} matrix instructions (per wave), {d['barriers']} barriers, "
                f"{len(d['races'])} races; LDS: {d['lds_access_pieces']} accesses, {d['lds_conflict_cycles']} "
                f"bank-conflict cycles ({d['lds_cycles']} cycles vs {d['lds_ideal_cycles']} conflict-free); "
                f"global loads by bytes per lane: {d['global_loads_by_bytes']}, "
                f"stores: {d['global_stores_by_bytes']}"
            )
            report.append(
                {
                    "executable": exe.name,
                    "taken": True,
                    "problem": exe.facts.problem.to_dict(),
                    "kind": exe.facts.kind,
                    "config": exe.facts.config.to_dict() if exe.facts.config else None,
                    "passed": c.passed,
                    "site": c.site,
                    "detail": c.detail,
                    "max_abs_err": c.max_abs_err,
                    "max_err_over_bound": c.max_err_over_bound,
                    "workgroups": c.workgroups,
                    "grid_size": c.grid_size,
                    "counters": d,
                }
            )
    verdict = "FAIL" if failed else "PASS"
    out(
        f"mmaflow run: {verdict}: {sum(1 for r in report if r.get('taken') and r['passed'])} of "
        f"{sum(1 for r in report if r.get('taken'))} checks passed, "
        f"{plural(sum(1 for r in report if not r.get('taken')), 'dispatch')} left to IREE"
    )
    if args.json:
        print(json.dumps({"target": args.target, "device": "sim", "dispatches": report}, default=str, indent=1))
    return Exit.FAILED if failed else Exit.OK
