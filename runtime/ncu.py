"""Kernel-only time with Nsight Compute: one ``ncu`` run over a child process that makes
``calls`` identical calls, then the calls told apart by repetition.

IREE launches kernels from its own queue thread, out of reach of an NVTX range on the calling
thread, so the kernels of one call are found as the longest block of kernel names that the last
``calls`` blocks repeat exactly (a module's initializer kernels may come first). Each call's time
is the sum of its kernels' ``gpu__time_duration``; clocks and caches are left alone
(``--clock-control none --cache-control none``), as the synchronous timers see them.

Used by `mmaflow bench` (single matmuls, ``runtime/bench.py``) and `mmaflow bench --models`
(``runtime/model_bench.py``).
"""

from __future__ import annotations

import csv
import io
import shutil
import statistics
import subprocess
from dataclasses import dataclass

METRIC = "gpu__time_duration.sum"
_SCALE_MS = {
    "ns": 1e-6,
    "nsecond": 1e-6,
    "us": 1e-3,
    "usecond": 1e-3,
    "ms": 1.0,
    "msecond": 1.0,
    "s": 1e3,
    "second": 1e3,
}


class NcuError(RuntimeError):
    """ncu is missing, failed, or its kernels do not form repeated calls."""


@dataclass(frozen=True)
class KernelTime:
    ms: float  # median over the profiled calls of the per-call sum
    calls: list[float]  # per profiled call, ms
    kernels: tuple[str, ...]  # one call's kernel names, in launch order
    per_kernel: tuple[float, ...] = ()  # each of those kernels' median ms over the profiled calls

    def as_dict(self) -> dict:
        return {
            "kernel_ms": round(self.ms, 5),
            "kernel_calls_ms": [round(x, 5) for x in self.calls],
            "kernels": list(self.kernels),
            "per_kernel_ms": [round(x, 5) for x in self.per_kernel],
        }


def per_call(names: list[str], calls: int) -> int:
    """How many of the last kernels are one call: the longest P whose last ``calls`` blocks of P
    kernel names repeat exactly."""
    for p in range(len(names) // calls, 0, -1):
        blocks = [names[len(names) - (i + 1) * p : len(names) - i * p] for i in range(calls)]
        if all(b == blocks[0] for b in blocks):
            return p
    raise NcuError(
        f"the {calls} profiled calls do not repeat the same kernels ({len(names)} kernels: "
        f"{', '.join(dict.fromkeys(names))})"
    )


def parse_csv(text: str) -> list[tuple[str, float]]:
    """(kernel name, ms) per profiled kernel from ``ncu --csv`` output (the program's own output
    may come first)."""
    at = text.find('"ID"')
    if at < 0:
        return []
    out = []
    for row in csv.DictReader(io.StringIO(text[at:])):
        if row.get("Metric Name") != METRIC:
            continue
        unit = row["Metric Unit"]
        if unit not in _SCALE_MS:
            raise NcuError(f"ncu reported {METRIC} in an unknown unit {unit!r}")
        out.append((row["Kernel Name"], float(row["Metric Value"].replace(",", "")) * _SCALE_MS[unit]))
    return out


def profile(child: list[str], what: str) -> list[tuple[str, float]]:
    """(kernel name, ms) of every kernel ``child`` launches, from one ncu run over it."""
    if shutil.which("ncu") is None:
        raise NcuError("Nsight Compute (ncu) is not on PATH: kernel-only timing needs it")
    cmd = ["ncu", "--metrics", METRIC, "--clock-control", "none", "--cache-control", "none", "--csv", *child]
    r = subprocess.run(cmd, capture_output=True, text=True)
    kernels = parse_csv(r.stdout)
    if r.returncode != 0 or not kernels:
        raise NcuError(f"ncu on {what} gave no kernels (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return kernels


def _last_calls(kernels: list[tuple[str, float]], calls: int) -> KernelTime:
    """The ``KernelTime`` of the last ``calls`` identical calls of a kernel stream."""
    p = per_call([k for k, _ in kernels], calls)
    last = kernels[len(kernels) - p * calls :]
    per = [sum(ms for _, ms in last[i * p : (i + 1) * p]) for i in range(calls)]
    each = tuple(statistics.median(last[i * p + j][1] for i in range(calls)) for j in range(p))
    return KernelTime(statistics.median(per), per, tuple(k for k, _ in last[:p]), each)


def kernel_time(child: list[str], calls: int, what: str) -> KernelTime:
    """Run ``child`` (a command making ``calls`` identical calls last) under ncu; the kernel-only
    time of one call."""
    return _last_calls(profile(child, what), calls)


MARKER = "mmaflow_marker"  # the marker module's function: its kernel names start with it


def kernel_times(child: list[str], items: int, calls: int, what: str) -> list[KernelTime]:
    """One ncu run over ``child``, which for each of ``items`` launches the marker module's kernel
    (``MARKER``), then makes ``calls`` identical calls last (after any warm-up): the kernel-only time
    of one call of each item, the kernel stream split at the markers (one process for a whole
    suite instead of one per build)."""
    return split_at_markers(profile(child, what), items, calls, what)


def split_at_markers(kernels: list[tuple[str, float]], items: int, calls: int, what: str) -> list[KernelTime]:
    """Per item, the ``KernelTime`` of its last ``calls`` calls: the (name, ms) stream cut at each
    marker kernel (the markers themselves dropped; anything before the first is not an item's)."""
    segments: list[list[tuple[str, float]]] = []
    for name, ms in kernels:
        if name.startswith(MARKER):
            segments.append([])
        elif segments:
            segments[-1].append((name, ms))
    if len(segments) != items:
        raise NcuError(f"ncu on {what}: {len(segments)} marker kernels for {items} items")
    return [_last_calls(seg, calls) for seg in segments]
