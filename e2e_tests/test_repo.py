"""Repository invariants: the README's test command is what CI runs; no top-level `compiler` or
`runtime` package gets installed; the dependencies stay pinned."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    return [
        line.strip()
        for line in text.splitlines()
        if line.startswith("    .venv/bin/") or line.startswith("    python3 -m venv")
    ]


def test_ci_runs_the_readme_test_commands():
    """The default command (lit + pytest) and the exhaustive one, both verbatim in .ci/run, which
    treats pytest's "no tests collected" (exit 5) as a failure."""
    test_cmds = [c for c in _readme_commands() if "pytest" in c]
    assert len(test_cmds) == 2, test_cmds
    assert "lit" in test_cmds[0] and "-m exhaustive" in test_cmds[1], test_cmds
    ci = (ROOT / ".ci" / "run").read_text()
    for cmd in test_cmds:
        assert cmd in ci.splitlines(), f"the README's test command must appear verbatim in .ci/run: {cmd}"
    assert '"$status" -eq 5' in ci


def test_default_test_set_excludes_the_exhaustive_one():
    text = (ROOT / "pyproject.toml").read_text()
    assert "addopts = \"-m 'not exhaustive'\"" in text


def test_readme_install_command_uses_the_bundled_example():
    install = [c for c in _readme_commands() if c.startswith("python3 -m venv")]
    assert len(install) == 1
    example = re.search(r"(examples/\S+\.mlir)", install[0]).group(1)
    assert (ROOT / example).exists()


def test_namespaced_packages_only(tmp_path):
    """From outside the checkout, mmaflow.compiler imports and a bare `compiler` does not."""
    code = (
        "import importlib.util as u; "
        "print(u.find_spec('mmaflow.compiler') is not None, u.find_spec('compiler') is None, "
        "u.find_spec('runtime') is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"]


def test_iree_is_pinned():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"iree-base-compiler==3.13.0"' in text and '"iree-base-runtime==3.13.0"' in text


def test_spread_keeps_every_column_in_the_default_set():
    """``conftest.spread``: every (row, column) pair is a case; the default set runs each row on
    ``keep`` columns, rotating, and every column keeps one; the rest are exhaustive."""
    from conftest import spread

    params = spread([(1, 2), (3, 4), (5, 6)], ["a", "b", "c", "d", "e", "f"], 2)
    assert [p.values for p in params][:2] == [(1, 2, "a"), (1, 2, "b")] and len(params) == 18
    default = [p for p in params if not p.marks]
    assert sorted(p.values[-1] for p in default) == ["a", "b", "c", "d", "e", "f"]
    assert all(m.name == "exhaustive" for p in params if p.marks for m in p.marks)
    assert [p.id for p in default][:2] == ["1-2-a", "1-2-b"]
    with pytest.raises(ValueError, match="without a case"):
        spread([1, 2], ["a", "b", "c", "d", "e"], 2)
