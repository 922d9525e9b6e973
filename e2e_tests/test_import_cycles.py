"""No import cycle touches runtime/: among the modules of compiler/ and runtime/ (top-level and
function-level imports alike), no strongly connected component of size > 1 holds a runtime
module. (Cycles among compiler modules alone are the compiler's own layering, not checked here.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent


def import_graph() -> dict[str, set[str]]:
    """Module -> the mmaflow modules it imports (``compiler/x/y.py`` is ``mmaflow.compiler.x.y``,
    a package its ``__init__``; relative imports resolved; ``from pkg import mod`` names ``mod``)."""
    mods = {}
    for top in ("compiler", "runtime"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = ["mmaflow", top, *path.relative_to(ROOT / top).with_suffix("").parts]
            is_pkg = parts[-1] == "__init__"
            mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {m: set() for m in mods}
    for m, (path, is_pkg) in mods.items():
        pkg = m if is_pkg else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = pkg
                for _ in range(max(node.level - 1, 0)):
                    base = base.rpartition(".")[0]
                mod = (base + ("." + node.module if node.module else "")) if node.level else node.module or ""
                names = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            else:
                continue
            graph[m] |= {t for t in map(known, names) if t and t != m}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of size > 1 (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on.discard(comp[-1])
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_touches_the_runtime():
    bad = [c for c in cycles(import_graph()) if any(m.startswith("mmaflow.runtime") for m in c)]
    assert not bad, bad


def test_the_isa_model_imports_nothing_of_the_compiler():
    graph = import_graph()
    isa = {m: sorted(d for d in deps if d.startswith("mmaflow.compiler"))
           for m, deps in graph.items() if m.startswith("mmaflow.runtime.isa")}
    assert len(isa) > 1 and not any(isa.values()), isa


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "mmaflow.runtime.attention_bench" in graph["mmaflow.runtime.bench"]  # inside bench_command
    assert "mmaflow.runtime.report_html" in graph["mmaflow.compiler.report"]  # inside report_command
    assert graph["mmaflow.runtime.executor"] >= {"mmaflow.runtime.executor.ops", "mmaflow.runtime.executor.wgmma",
                                                 "mmaflow.runtime.executor.tma", "mmaflow.runtime.executor.core"}
