"""What the per-executable pipeline (``pipeline/pipeline.py``) takes and returns: ``CodegenOptions`` in,
``ExecutableResult`` out, with the ``DispatchFacts`` of a taken dispatch, and their wire form (the
codegen server sends results to its clients as JSON). Light to import: ``mmaflow compile`` (the
bridge) reads results without loading the stages, which run in the codegen server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.pipeline.runner import RunResult
from mmaflow.compiler.target.targets import get_target, read_target


@dataclass(frozen=True)
class CodegenOptions:
    target: str | None = None  # None: take the target from each executable's variant
    overrides: dict = field(default_factory=dict)  # config KEY -> value (parsed)
    dump_after: str | None = None  # a stage name, or "all"
    dump_dir: Path | None = None
    tuned: bool = True  # consult the target's tuning table (False: the heuristic, as `mmaflow tune`'s baseline)


@dataclass(frozen=True)
class DispatchFacts:
    """What the stages recorded on a taken dispatch, read once from its IR (``core/attrs.py``).

    ``kind`` "matmul": ``problem`` is a ``problem.Contraction``, ``config`` a ``KernelConfig``,
    ``expect`` ``attrs.Expectations``. ``kind`` "attention": ``problem`` is an
    ``attention.AttentionDispatch``, ``config`` None (the kernel has no config), ``expect``
    ``attrs.AttentionExpectations``. ``kind`` "weight_only": ``problem`` is a
    ``quantized.WeightOnlyMatmul``, ``config`` None, ``expect`` ``attrs.Expectations``. ``kind``
    "copy": ``problem`` is a ``copy.CopyDispatch``, ``config`` None, ``expect`` ``attrs.Expectations``
    (its access width)."""

    target: object  # targets.Target
    problem: object  # problem.Contraction | attention.AttentionDispatch | quantized.WeightOnlyMatmul
    config: object | None  # config.KernelConfig (None if the pipeline stopped before configure; attention)
    expect: object | None  # attrs.Expectations | attrs.AttentionExpectations; None before distribute
    kind: str = "matmul"  # "matmul" | "attention" | "weight_only" | "copy"
    versions: tuple = ()  # a versioned matmul's other kernels (``attrs.Version``: condition, problem, config, expect)

    @property
    def is_attention(self) -> bool:
        return self.kind == "attention"

    @property
    def is_weight_only(self) -> bool:
        return self.kind == "weight_only"

    @property
    def is_copy(self) -> bool:
        return self.kind == "copy"

    @staticmethod
    def of(func: ir.Operation) -> "DispatchFacts":
        kind = attrs.direct_kind(func)
        if kind is not None:  # a direct family's: its record, no config
            attention = kind == "attention"
            name = attrs.ATTENTION_EXPECT if attention else attrs.EXPECT
            read = attrs.read_attention_expect if attention else attrs.read_expect
            return DispatchFacts(
                read_target(func),
                attrs.read_direct(func, kind),
                None,
                read(func) if name in func.attributes else None,
                kind,
            )
        return DispatchFacts(
            read_target(func),
            attrs.read_problem(func),
            attrs.read_config(func) if attrs.CONFIG in func.attributes else None,
            attrs.read_expect(func) if attrs.EXPECT in func.attributes else None,
            versions=tuple(attrs.read_versions(func)),
        )

    def to_wire(self) -> dict:
        return {
            "kind": self.kind,
            "target": self.target.name,
            "problem": self.problem.to_dict(),
            "config": self.config.to_dict() if self.config else None,
            "expect": vars(self.expect) if self.expect else None,
            "versions": [v.to_dict() for v in self.versions],
        }

    @staticmethod
    def from_wire(d: dict) -> "DispatchFacts":
        kind = d["kind"]
        if kind in attrs.DIRECT_RECORDS:
            expect = attrs.AttentionExpectations if kind == "attention" else attrs.Expectations
            return DispatchFacts(
                get_target(d["target"]),
                attrs.DIRECT_RECORDS[kind][1].from_dict(d["problem"]),
                None,
                expect(**d["expect"]) if d["expect"] else None,
                kind,
            )
        from mmaflow.compiler.core.config import KernelConfig
        from mmaflow.compiler.core.problem import Contraction

        return DispatchFacts(
            get_target(d["target"]),
            Contraction.from_dict(d["problem"]),
            KernelConfig.from_dict(d["config"]) if d["config"] else None,
            attrs.Expectations(**d["expect"]) if d["expect"] else None,
            versions=tuple(attrs.Version.from_dict(v) for v in d.get("versions", ())),
        )


@dataclass
class ExecutableResult:
    name: str
    export: str  # the hal.executable.export symbol the host dispatches (= a kernel's name in the ISA)
    text: str  # the hal.executable (module) after the pipeline
    taken: bool
    log: list[str]
    run: RunResult
    facts: DispatchFacts | None = None  # the taken dispatch's problem, config, expectations
    source: str = ""  # the hal.executable as IREE handed it over (executable-sources), when known
    versions: list = field(default_factory=list)  # in process only: a versioned dispatch's copies not yet joined

    @property
    def kernel(self) -> str:
        """The name in the ISA of the dispatch's own kernel: the export, or for a versioned
        dispatch (whose export runs its first version's kernel) the export it falls back to."""
        versioned = self.facts is not None and self.facts.versions
        return self.export + attrs.FALLBACK_SUFFIX if versioned else self.export

    def kernels(self) -> list[str]:
        """Every kernel of the dispatch in the ISA: its own, then each version's."""
        return [self.kernel] + ([v.export for v in self.facts.versions] if self.facts is not None else [])

    def to_wire(self) -> dict:
        """A JSON-able form (the codegen server sends results to its clients in it)."""
        return {
            "name": self.name,
            "export": self.export,
            "text": self.text,
            "taken": self.taken,
            "log": self.log,
            "dumps": self.run.dumps,
            "timings": self.run.timings,
            "headers": self.run.headers,
            "source": self.source,
            "facts": self.facts.to_wire() if self.facts else None,
        }

    @staticmethod
    def from_wire(d: dict) -> "ExecutableResult":
        return ExecutableResult(
            d["name"],
            d["export"],
            d["text"],
            d["taken"],
            list(d["log"]),
            RunResult(dict(d["dumps"]), dict(d["timings"]), dict(d.get("headers", {}))),
            DispatchFacts.from_wire(d["facts"]) if d["facts"] else None,
            d["source"],
        )
