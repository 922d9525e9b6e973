"""`mmaflow bench --compile-time`: what mmaflow adds to a whole model's compile.

For each module and target, three builds, interleaved and repeated (this machine's timings
wander by half a second from run to run, so each figure is a median):

    plain     iree-compile IN.mlir <target flags>                      (IREE alone)
    stock     iree-compile IN.mlir $(mmaflow flags --target T)         (the preprocess hook)
    mmaflow   mmaflow compile IN.mlir --target T                       (in-process, ISA verified)

Wall-clock seconds of the whole command, as a user waits for it; the ratios to plain are the
figures that matter. Both the median and the best of the runs are reported: on a shared machine
the best run is the steadier estimate of what a build costs, the median what a user meets.
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _commands(module: Path, target: str, out: Path) -> dict[str, list[str]]:
    from mmaflow.compiler.targets import get_target
    t = get_target(target)
    flags = subprocess.run([_bin("mmaflow"), "flags", "--target", target], check=True, capture_output=True,
                           text=True).stdout.split()
    return {
        "plain": [_bin("iree-compile"), str(module), *t.iree_flags(t.baseline_arch), "-o", str(out / "plain.vmfb")],
        "stock": [_bin("iree-compile"), str(module), *flags, "-o", str(out / "stock.vmfb")],
        "mmaflow": [_bin("mmaflow"), "compile", str(module), "--target", target, "-o", str(out / "mmaflow.vmfb")],
    }


def measure(modules: list[Path], targets: list[str], repeat: int = 5) -> list[dict]:
    rows = []
    for module in modules:
        for target in targets:
            with tempfile.TemporaryDirectory() as d:
                cmds = _commands(module, target, Path(d))
                times: dict[str, list[float]] = {k: [] for k in cmds}
                for _ in range(repeat):
                    for name, cmd in cmds.items():  # interleaved: drifts hit every build alike
                        start = time.perf_counter()
                        r = subprocess.run(cmd, capture_output=True, text=True)
                        times[name].append(time.perf_counter() - start)
                        if r.returncode != 0:
                            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{r.stderr[-2000:]}")
                same = (Path(d) / "stock.vmfb").read_bytes() == (Path(d) / "mmaflow.vmfb").read_bytes()
            med = {k: statistics.median(v) for k, v in times.items()}
            best = {k: min(v) for k, v in times.items()}
            rows.append({"module": module.name, "target": target, "repeat": repeat,
                         **{f"{k}_s": round(v, 2) for k, v in med.items()},
                         **{f"{k}_best_s": round(v, 2) for k, v in best.items()},
                         "stock_over_plain": round(med["stock"] / med["plain"], 2),
                         "mmaflow_over_plain": round(med["mmaflow"] / med["plain"], 2),
                         "stock_over_plain_best": round(best["stock"] / best["plain"], 2),
                         "mmaflow_over_plain_best": round(best["mmaflow"] / best["plain"], 2),
                         "stock_equals_mmaflow": same,
                         "all_s": {k: [round(x, 2) for x in v] for k, v in times.items()}})
            r = rows[-1]
            print(f"{module.name:24} {target:8} median: plain {r['plain_s']:5.2f} s, stock {r['stock_s']:5.2f} s "
                  f"({r['stock_over_plain']:.2f}x), mmaflow compile {r['mmaflow_s']:5.2f} s "
                  f"({r['mmaflow_over_plain']:.2f}x) | best: {r['plain_best_s']:.2f} / {r['stock_best_s']:.2f} "
                  f"({r['stock_over_plain_best']:.2f}x) / {r['mmaflow_best_s']:.2f} s "
                  f"({r['mmaflow_over_plain_best']:.2f}x) | same .vmfb: {same}", flush=True)
    return rows


def compile_time_command(args) -> int:
    modules = [Path(m) for m in args.compile_time]
    targets = [t.strip() for t in (args.target or "").split(",") if t.strip()]
    rows = measure(modules, targets, args.repeat)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compile_time.json").write_text(json.dumps(rows, indent=1))
    worst = max(max(r["stock_over_plain"], r["mmaflow_over_plain"]) for r in rows)
    worst_best = max(max(r["stock_over_plain_best"], r["mmaflow_over_plain_best"]) for r in rows)
    print(f"bench: worst ratio to plain iree-compile: {worst:.2f}x (medians), {worst_best:.2f}x (best runs)")
    return 0
