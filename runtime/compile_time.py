"""`mmaflow bench --compile-time`: what mmaflow adds to a whole model's compile.

For each module and target, five builds, interleaved and repeated (this machine's timings
wander by half a second from run to run, so each figure is a median):

    plain         iree-compile IN.mlir <target flags>                        (IREE alone)
    stock_cold    iree-compile IN.mlir $(mmaflow flags --target T), as a shell runs it, with no
                  codegen server running (the first build after a while: `mmaflow flags` starts it)
    stock         the same with the server left by the previous build (successive builds)
    mmaflow_cold  mmaflow compile IN.mlir --target T, no server running      (in-process, ISA verified)
    mmaflow       the same with the server running

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


def _stop_server() -> None:
    subprocess.run([_bin("mmaflow-codegen"), "--stop"], check=True, capture_output=True)


def _commands(module: Path, target: str, out: Path) -> dict[str, tuple[list[str], bool]]:
    """name -> (command, whether the codegen server is stopped before it)."""
    from mmaflow.compiler.target.targets import get_target

    t = get_target(target)
    stock = [
        "sh",
        "-c",
        f"{shlex.quote(_bin('iree-compile'))} {shlex.quote(str(module))} "
        f"$({shlex.quote(_bin('mmaflow'))} flags --target {target}) -o {shlex.quote(str(out / 'stock.vmfb'))}",
    ]
    mmaflow = [_bin("mmaflow"), "compile", str(module), "--target", target, "-o", str(out / "mmaflow.vmfb")]
    return {
        "plain": (
            [_bin("iree-compile"), str(module), *t.iree_flags(t.baseline_arch), "-o", str(out / "plain.vmfb")],
            False,
        ),
        "stock_cold": (stock, True),
        "stock": (stock, False),
        "mmaflow_cold": (mmaflow, True),
        "mmaflow": (mmaflow, False),
    }


def measure(modules: list[Path], targets: list[str], repeat: int = 5) -> list[dict]:
    rows = []
    for module in modules:
        for target in targets:
            with tempfile.TemporaryDirectory() as d:
                cmds = _commands(module, target, Path(d))
                times: dict[str, list[float]] = {k: [] for k in cmds}
                for _ in range(repeat):
                    for name, (cmd, cold) in cmds.items():  # interleaved: drifts hit every build alike
                        if cold:
                            _stop_server()
                            time.sleep(0.5)  # let it go
                        start = time.perf_counter()
                        r = subprocess.run(cmd, capture_output=True, text=True)
                        times[name].append(time.perf_counter() - start)
                        if r.returncode != 0:
                            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{r.stderr[-2000:]}")
                same = (Path(d) / "stock.vmfb").read_bytes() == (Path(d) / "mmaflow.vmfb").read_bytes()
            med = {k: statistics.median(v) for k, v in times.items()}
            best = {k: min(v) for k, v in times.items()}
            rows.append(
                {
                    "module": module.name,
                    "target": target,
                    "repeat": repeat,
                    **{f"{k}_s": round(v, 2) for k, v in med.items()},
                    **{f"{k}_best_s": round(v, 2) for k, v in best.items()},
                    **{f"{k}_over_plain": round(med[k] / med["plain"], 2) for k in cmds if k != "plain"},
                    **{f"{k}_over_plain_best": round(best[k] / best["plain"], 2) for k in cmds if k != "plain"},
                    "stock_equals_mmaflow": same,
                    "all_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
                }
            )
            r = rows[-1]
            ratios = ", ".join(f"{k} {r[k + '_s']:.2f} s ({r[k + '_over_plain']:.2f}x)" for k in cmds if k != "plain")
            best_ratios = " / ".join(f"{r[k + '_over_plain_best']:.2f}x" for k in cmds if k != "plain")
            print(
                f"{module.name:22} {target:8} median: plain {r['plain_s']:.2f} s, {ratios} | best: {best_ratios}"
                f" | same .vmfb: {same}",
                flush=True,
            )
    return rows


def compile_time_command(args) -> int:
    modules = [Path(m) for m in args.compile_time]
    targets = [t.strip() for t in (args.target or "").split(",") if t.strip()]
    rows = measure(modules, targets, args.repeat)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compile_time.json").write_text(json.dumps(rows, indent=1))
    kinds = ("stock_cold", "stock", "mmaflow_cold", "mmaflow")
    worst = max(r[f"{k}_over_plain"] for r in rows for k in kinds)
    worst_best = max(r[f"{k}_over_plain_best"] for r in rows for k in kinds)
    print(f"bench: worst ratio to plain iree-compile: {worst:.2f}x (medians), {worst_best:.2f}x (best runs)")
    return 0
