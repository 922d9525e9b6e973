"""The house as docs/ARCHITECTURE.md describes it, checked: the import contracts of pyproject.toml
(`lint-imports`), no import cycle among mmaflow's modules (function-level imports included), the
stage table against the pipeline's own list, and no session history cited in the product's code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from mmaflow.compiler.kernels import registry
from mmaflow.compiler.pipeline.pipeline import STAGES
from mmaflow.compiler.target.seeds import Seed, SeedTable

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles():
    graph = grimp.build_graph("mmaflow.compiler", "mmaflow.runtime", cache_dir=None)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_stage_table_matches_the_pipeline():
    """docs/ARCHITECTURE.md's stage table lists the pipeline's stages, in order, with their routes."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    rows = re.findall(r"^\| `([a-z-]+)` \| (\w+) \|", text, re.M)
    assert rows == [(s.name, s.route or "all") for s in STAGES]


def test_every_family_is_registered_once():
    names = [f.name for f in registry.families()]
    assert len(names) == len(set(names)) and {"matmul", "wgmma", "flash-attention"} <= set(names)


def test_seed_needs_its_provenance():
    with pytest.raises(ValueError, match="provenance"):
        Seed(4, "")

    from dataclasses import dataclass

    bare = dataclass(frozen=True)(type("Bare", (SeedTable,), {"__annotations__": {"x": Seed}}))
    with pytest.raises(TypeError, match="not a Seed"):
        bare(x=4)


_HISTORY = re.compile(r"\b(run|session|issue)s? \d+\b|BENCHMARKS(\.md)?\b|\bthe seed\b", re.I)


def test_no_history_cited_in_the_product():
    """Code cites documents and measurements, not the sessions that made them."""
    hits = []
    for folder in ("compiler", "runtime", "transform_scripts"):
        for path in sorted((REPO / folder).rglob("*.py")) + sorted((REPO / folder).rglob("*.mlir")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if _HISTORY.search(line):
                    hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert hits == [], "\n".join(hits[:40])


def test_performance_page_is_short_and_cites_commands():
    """docs/PERFORMANCE.md is a current-numbers page (at most 300 lines), not a lab notebook: every
    measured section names the `mmaflow bench` command that reproduces it."""
    text = (REPO / "docs" / "PERFORMANCE.md").read_text()
    assert len(text.splitlines()) <= 300
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0]
        if title.startswith(("Tried", "How to measure")):
            continue
        assert re.search(r"mmaflow (bench|report|run)|mmaflow\.runtime\.(bench|model_bench)", section), title


def test_the_registry_says_when_no_family_takes_a_problem(monkeypatch):
    from mmaflow.compiler.core.errors import UnsupportedError
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.target.targets import get_target

    monkeypatch.setattr(registry, "CONTRACTION", (registry.WGMMA,))  # the warpgroup family alone declines gfx942
    with pytest.raises(UnsupportedError, match="no kernel family configures .* on gfx942"):
        registry.resolve(get_target("gfx942"), Contraction(256, 256, 256, 1, "f16", "f16", "f32"))
