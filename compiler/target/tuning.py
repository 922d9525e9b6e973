"""The measured tuning tables: per target, the config that ran fastest for a class of shapes.

``mmaflow tune`` (``runtime/tune.py``) builds candidate configs of real models' GEMMs, times them
kernel-only on a GPU and writes the fastest per shape class; the tables ship here as data
(``tuned/<target>.json``), each with the GPU, the commit and the command that measured it. The
kernel registry consults a table before the families' heuristics and seeds (``registry.choose``);
`mmaflow compile` logs which entry chose a config and `mmaflow report` says why.

A **shape class** is what one measured shape stands for: the same operand types and storage
orders (A M x K or K x M, B K x N or N x K), batched or not, and M, N, K each in the same power-of-
two bucket (``(p / 2, p]``): a table entry measured at 128 x 4096 x 4096 serves every M of 65-128,
N of 2049-4096, K of 2049-4096. Only static problems are looked up: a dynamic size's stand-in says
nothing about the size that runs. An entry's ``config`` is a set of ``--config`` overrides the
families resolve against the actual problem (tiles fit the problem as a user's would); ``{}`` means
the heuristic's own config measured fastest. The suites' GEMMs are timed without a fused epilogue;
a dispatch with one (bias, activation, a cast) takes its GEMM's entry, as it takes the heuristic's
config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mmaflow.compiler.core.errors import ToolchainError
from mmaflow.compiler.core.problem import Contraction

TABLE_DIR = Path(__file__).parent / "tuned"
FORMAT = 1  # the table file's format version


def bucket(size: int) -> int:
    """The power of two p with size in (p / 2, p]: the bucket's upper bound."""
    return 1 << max(0, int(size) - 1).bit_length()


@dataclass(frozen=True)
class ShapeClass:
    types: str  # "f16xf16->f32" (A, B, accumulator)
    a: str  # "mk" (M x K) or "km"
    b: str  # "kn" or "nk" (nn.Linear's weight)
    batched: bool
    m: int  # each a bucket's upper bound (``bucket``)
    n: int
    k: int

    def key(self) -> str:
        lead = "batched " if self.batched else ""
        return f"{lead}{self.types} A:{self.a} B:{self.b} M<={self.m} N<={self.n} K<={self.k}"

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def shape_class(problem: Contraction) -> ShapeClass | None:
    """The class of a static problem, None for a dynamic one (not looked up)."""
    if problem.is_dynamic or None in (problem.m, problem.n, problem.k):
        return None
    return ShapeClass(
        types=f"{problem.a_type}x{problem.b_type}->{problem.c_type}" + (" scaled" if problem.scales else ""),
        a="km" if problem.a_transposed else "mk",
        b="nk" if problem.b_transposed else "kn",
        batched=problem.batched and (problem.batch or 1) > 1,
        m=bucket(problem.m),
        n=bucket(problem.n),
        k=bucket(problem.k),
    )


@dataclass(frozen=True)
class Entry:
    cls: ShapeClass
    config: dict  # --config overrides; {}: the heuristic's own config was the fastest
    shape: tuple  # (batch, m, n, k) measured
    us: float  # the chosen config's kernel-only time there, microseconds (median)
    heuristic_us: float  # the heuristic's config, same run
    heuristic: str  # the heuristic's config, as its plan describes it
    chosen: str  # the chosen config, as its plan describes it
    candidates: int  # configs timed (each checked against float64 first)
    run: str  # one line: the GPU, commit, date and suite rows of the `mmaflow tune` run that measured it

    def to_dict(self) -> dict:
        return {
            "class": self.cls.to_dict(),
            "config": self.config,
            "shape": list(self.shape),
            "us": self.us,
            "heuristic_us": self.heuristic_us,
            "heuristic": self.heuristic,
            "chosen": self.chosen,
            "candidates": self.candidates,
            "run": self.run,
        }

    @staticmethod
    def from_dict(d: dict) -> "Entry":
        return Entry(
            ShapeClass(**d["class"]),
            dict(d["config"]),
            tuple(d["shape"]),
            float(d["us"]),
            float(d["heuristic_us"]),
            str(d["heuristic"]),
            str(d["chosen"]),
            int(d["candidates"]),
            str(d["run"]),
        )

    def summary(self, measured: bool = True) -> str:
        """One line; ``measured=False`` (a static table's entry): the times are estimates."""
        b, m, n, k = self.shape
        at = f"{b}x{m}x{n}x{k}" if b > 1 else f"{m}x{n}x{k}"
        how, of = ("measured", "fastest") if measured else ("estimated (unmeasured)", "lowest estimate")
        if not self.config:
            return f"the heuristic's config {how} {of} of {self.candidates} at {at} ({self.us:.2f} us)"
        cfg = " ".join(f"{k}={v}" for k, v in sorted(self.config.items()))
        return (
            f"{cfg}: {how} {self.us:.2f} us at {at} against the heuristic's {self.heuristic_us:.2f} us "
            f"({self.heuristic_us / self.us:.2f}x; {of} of {self.candidates})"
        )


@dataclass(frozen=True)
class Table:
    target: str
    gpu: str  # the GPU(s) it was timed on
    measured: bool  # False: AMD's static choice (``runtime/static_cost.py``), its times estimates
    provenance: str  # one line: the runs its entries come from (each entry names its own)
    command: str  # the commands that reproduce it
    entries: tuple  # Entry

    def lookup(self, problem: Contraction) -> Entry | None:
        cls = shape_class(problem)
        return next((e for e in self.entries if e.cls == cls), None) if cls is not None else None

    def source(self, entry: Entry) -> str:
        """Which entry chose a config, for the compile log and `mmaflow report`."""
        return f"tuning table {self.target} ({entry.run}), entry {entry.cls.key()}: {entry.summary(self.measured)}"

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "target": self.target,
            "gpu": self.gpu,
            "measured": self.measured,
            "provenance": self.provenance,
            "command": self.command,
            "entries": [e.to_dict() for e in self.entries],
        }

    @staticmethod
    def from_dict(d: dict) -> "Table":
        if d.get("format") != FORMAT:
            raise ValueError(f"format {d.get('format')!r}, this mmaflow reads format {FORMAT}")
        entries = tuple(Entry.from_dict(e) for e in d["entries"])
        keys = [e.cls for e in entries]
        if len(set(keys)) != len(keys):
            raise ValueError("two entries for one shape class")
        if not d["provenance"] or "\n" in d["provenance"]:
            raise ValueError("a table needs a one-line provenance")
        if any(not e.run or "\n" in e.run for e in entries):
            raise ValueError("every entry needs the one-line provenance of its run")
        return Table(d["target"], d["gpu"], bool(d["measured"]), d["provenance"], d["command"], entries)


def table_path(target_name: str) -> Path:
    return TABLE_DIR / f"{target_name}.json"


@cache
def table(target_name: str) -> Table | None:
    """The shipped table of a target, None where there is none. A table that does not read is a
    broken installation: an error, never a silent heuristic."""
    path = table_path(target_name)
    if not path.exists():
        return None
    try:
        t = Table.from_dict(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as e:
        raise ToolchainError(f"the tuning table {path} does not read: {e}") from None
    if t.target != target_name:
        raise ToolchainError(f"the tuning table {path} is for {t.target}, not {target_name}")
    return t
