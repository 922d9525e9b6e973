"""One runner for every stage: ordering, dumps (--dump-after), timing and error context.

Stages are plain functions ``fn(unit) -> None`` that mutate ``unit.module`` in place (see
``pipeline/pipeline.py``). The runner owns everything around them, once:

- ``dump_after``: the IR printed after the named stage (or every stage with "all"), kept in
  ``result.dumps`` and written to ``dump_dir`` as ``<executable>.<NN>-<stage>.mlir``; what
  the stage put in ``unit.dump_header`` (distribute: its plan) comes first, as comments;
- timing: seconds per stage in ``result.timings``;
- errors: an ``MmaflowError`` gets the stage name; any other exception becomes a
  ``CodegenError`` naming the stage, with the IR it failed on written next to the dumps.
- verification: the IR is verified after each stage; a stage that breaks it is reported.
"""

from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from iree.compiler import ir

from mmaflow.compiler.core.errors import CodegenError, MmaflowError
from mmaflow.compiler.core.mlir import print_op

# Between a module and each of its versions' copies in printed IR (dumps, `mmaflow opt`), which
# `split_versions` reads back: stages resume from the text of a versioned dispatch too.
VERSION_SEPARATOR = "// ----- mmaflow version"


def print_versions(versions: list) -> str:
    """The versions' copies (stage `version`) printed after their module, each after a separator."""
    return "".join(f"\n{VERSION_SEPARATOR} {i}\n" + print_op(v) for i, v in enumerate(versions, 1))


def split_versions(text: str) -> tuple[str, list[str]]:
    """A module's text and its versions' texts, as ``print_versions`` separated them."""
    parts = re.split(rf"^{re.escape(VERSION_SEPARATOR)} \d+$", text, flags=re.M)
    return parts[0], parts[1:]


@dataclass(frozen=True)
class Stage:
    name: str
    fn: Callable
    summary: str
    route: str | None = None  # None: every dispatch; else only a unit of this route ("script", "direct")


@dataclass
class Unit:
    """What flows through the per-executable stages."""

    name: str  # hal.executable symbol
    module: ir.Module  # a module holding that one hal.executable
    options: object  # CodegenOptions
    log: list[str] = field(default_factory=list)
    stopped: str | None = None  # set by a stage to end the pipeline early (with the reason)
    route: str = "script"  # which routed stages run (set from the IR, and by select)
    dump_header: list[str] = field(default_factory=list)  # set by a stage: printed as comments above its dump
    # A versioned dispatch's other kernels (stage `version`): each a copy of ``module`` that the
    # stages up to hand-back treat alike, joined into ``module`` by hand-back.
    versions: list = field(default_factory=list)


@dataclass
class RunResult:
    dumps: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    headers: dict[str, list[str]] = field(default_factory=dict)  # stage -> its unit.dump_header, when it set one


def run_stages(
    stages: list[Stage], unit: Unit, *, dump_after: str | None = None, dump_dir: Path | None = None
) -> RunResult:
    result = RunResult()
    index = -1  # the stages this unit runs, numbered in order (the dump files' NN)
    for stage in stages:
        if stage.route is not None and stage.route != unit.route:
            continue
        index += 1
        start = time.perf_counter()
        unit.dump_header = []
        try:
            stage.fn(unit)
        except MmaflowError as e:
            e.stage = e.stage or stage.name
            _save_failure(unit, stage, dump_dir)
            raise
        except Exception as e:  # a bug: keep the IR and the traceback, name the stage
            path = _save_failure(unit, stage, dump_dir)
            raise CodegenError(
                f"internal error in stage '{stage.name}' on {unit.name}: {type(e).__name__}: {e}",
                stage=stage.name,
                hint=(f"IR before the failure: {path}; " if path else "") + "rerun with --debug for the traceback",
            ) from e
        result.timings[stage.name] = time.perf_counter() - start
        if unit.dump_header:
            result.headers[stage.name] = list(unit.dump_header)
        if not all(m.operation.verify() for m in [unit.module, *unit.versions]):
            raise CodegenError(f"stage '{stage.name}' produced invalid IR for {unit.name}", stage=stage.name)
        if dump_after in (stage.name, "all"):
            text = "".join(f"// {stage.name}: {line}\n" for line in unit.dump_header) + print_op(unit.module)
            text += print_versions(unit.versions)
            result.dumps[stage.name] = text
            if dump_dir is not None:
                dump_dir.mkdir(parents=True, exist_ok=True)
                (dump_dir / f"{unit.name}.{index:02d}-{stage.name}.mlir").write_text(text)
        if unit.stopped:
            break
    return result


def _save_failure(unit: Unit, stage: Stage, dump_dir: Path | None) -> Path | None:
    if dump_dir is None:
        return None
    dump_dir.mkdir(parents=True, exist_ok=True)
    path = dump_dir / f"{unit.name}.failed-{stage.name}.mlir"
    try:
        path.write_text(print_op(unit.module) + "\n// " + "\n// ".join(traceback.format_exc().splitlines()))
    except Exception:  # the IR itself may be unprintable; keep the traceback at least
        path.write_text("// IR unprintable\n// " + "\n// ".join(traceback.format_exc().splitlines()))
    return path
