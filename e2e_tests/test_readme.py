"""The README stays short and its support matrix stays true: for each target and kernel, the type
pairs the README lists are exactly the instruction catalogue's."""

from __future__ import annotations

import re
from pathlib import Path

from mmaflow.compiler.target.intrinsics import all_wgmma
from mmaflow.compiler.target.targets import TARGETS, get_target

README = Path(__file__).parent.parent / "README.md"
MAX_LINES = 150
PAIR = re.compile(r"^(\w+?)(?:×(\w+))?→(\w+)$")  # `A→C` or `A×B→C`
SQUARE = re.compile(r"^\{([\w,]+)\}²→(\w+)$")  # `{X,Y,Z}²→C`: every A x B of them


def _matrix_rows() -> list[list[str]]:
    """The cells of each body row of the table under '## Support matrix'."""
    text = README.read_text().split("## Support matrix", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) > 2, "no support-matrix table under '## Support matrix'"
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header[:4] == ["Target", "Chip", "Kernel", "Matmul types"], header
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


def _listed() -> dict[tuple[str, str], set[tuple[str, str, str]]]:
    """(target, 'wgmma' or 'codegen') -> the (A, B, C) types the README lists."""
    out: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for cells in _matrix_rows():
        target = cells[0].strip("`")
        kind = "wgmma" if cells[2] == "wgmma" else "codegen"
        pairs = set()
        for item in re.findall(r"`([^`]+)`", cells[3]):
            sq = SQUARE.match(item)
            if sq:
                types = sq.group(1).split(",")
                pairs.update((a, b, sq.group(2)) for a in types for b in types)
                continue
            m = PAIR.match(item)
            assert m, f"{target}: {item!r} is not A→C or A×B→C"
            a, b, c = m.groups()
            pairs.add((a, b or a, c))
        assert (target, kind) not in out, f"{target} {kind}: two rows"
        out[(target, kind)] = pairs
    return out


def _name(t: str, unsigned: bool) -> str:
    return {"i8": "u8", "i4": "u4"}.get(t, t) if unsigned else t


def _catalogue() -> dict[tuple[str, str], set[tuple[str, str, str]]]:
    out = {}
    for name in TARGETS:
        target = get_target(name)
        out[(name, "codegen")] = {
            (_name(i.a_type, i.unsigned_a), _name(i.b_type, i.unsigned_b), i.c_type) for i in target.intrinsics()
        }
        if target.warpgroup_mma:
            out[(name, "wgmma")] = {(w.a_type, w.b_type, w.c_type) for w in all_wgmma()}
    return out


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines, at most {MAX_LINES}"


def test_support_matrix_matches_the_catalogue():
    listed, have = _listed(), _catalogue()
    assert set(listed) == set(have), f"rows: README {sorted(listed)}, catalogue {sorted(have)}"
    for key in sorted(have):
        assert listed[key] == have[key], (
            f"{key}: README lists {sorted(listed[key] - have[key])} beyond the "
            f"catalogue and misses {sorted(have[key] - listed[key])}"
        )


def test_readme_exit_codes_are_the_code_s():
    """The README's exit-code table lists exactly the codes of ``errors.Exit``."""
    from mmaflow.compiler.core.errors import Exit

    text = README.read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    listed = set()
    for row in re.findall(r"^\| ([0-9][0-9 /]*) \|", text, re.M):
        listed |= {int(c) for c in row.split("/")}
    assert listed == {int(e) for e in Exit}


def test_readme_lists_the_stages_dump_after_takes():
    """The README's ``--dump-after`` stage list is the pipeline's own (``pipeline.DUMP_POINTS``, plus ``all``)."""
    from mmaflow.compiler.pipeline.pipeline import DUMP_POINTS

    text = " ".join(README.read_text().split("Stages for `--dump-after`", 1)[1].split(". ", 1)[0].split())
    text = text.split(":", 1)[1]  # after "and `opt`:"
    assert re.findall(r"`([a-z-]+)`", text) == [*DUMP_POINTS, "all"]
