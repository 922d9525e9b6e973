"""`mmaflow report --html`: the page is parsed for its sections and numbers, which must agree
with `mmaflow report --json` and the layout model."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.modules import matmul_source


class Page(HTMLParser):
    """Sections by id, the cells of every table (with their attributes), the ISA spans."""

    def __init__(self):
        super().__init__()
        self.sections, self.cells, self.spans, self.tags = [], [], [], []
        self._cell = None
        self._span = None
        self._pre = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "section":
            self.sections.append(a.get("id"))
        if tag in ("td", "th"):
            self._cell = [a, ""]
        if tag == "pre":
            self._pre = a.get("id")
        if tag == "span" and a.get("class"):
            self._span = [a["class"], "", self._pre]

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append(tuple(self._cell))
            self._cell = None
        if tag == "pre":
            self._pre = None
        if tag == "span" and self._span is not None:
            self.spans.append(tuple(self._span))
            self._span = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data
        if self._span is not None:
            self._span[1] += data


def _mmaflow(*args):
    return subprocess.run([sys.executable, "-m", "mmaflow.compiler.cli", *args], capture_output=True, text=True)


def _html(tmp_path, m: int, n: int, k: int, target: str):
    """(the source, the page's text, the parsed page) of `mmaflow report --html` on an M x N x K f16 matmul."""
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(m, n, k, "f16", "f32"))
    out = tmp_path / "r.html"
    r = _mmaflow("report", str(src), "--target", target, "--html", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    page = Page()
    page.feed(text)
    return src, text, page


@pytest.mark.exhaustive
@pytest.mark.parametrize("target, mnemonic", [("gfx942", "v_mfma_f32_16x16x16"), ("sm_80", "mma.sync")])
def test_html_report_sections_and_numbers(tmp_path, target, mnemonic):
    src, text, page = _html(tmp_path, 256, 256, 256, target)
    assert "<script" not in text and "http://" not in text and "https://" not in text  # self-contained
    k = "matmul_dispatch_0"
    assert page.sections == ["how-to-read"] + [
        f"{k}-{s}" for s in ("config", "layouts", "lds", "resources", "mix", "kloop")
    ]
    # Registers and LDS agree with the JSON report.
    js = json.loads(_mmaflow("report", str(src), "--target", target, "--json").stdout)
    mine = next(iter(js["mmaflow"].values()))
    by_key = {a["data-key"]: v for a, v in page.cells if "data-key" in a}
    for key in ("vgprs", "lds_bytes", "vgpr_spills", "waves_per_simd"):
        assert by_key[key] == ("-" if mine[key] is None else str(mine[key])), key
    # The register grids: every (register slot, lane) cell of A, B and C, titled with its element.
    intr = get_target(target).intrinsic(_config_intrinsic(text))
    titled = [a["title"] for a, _ in page.cells if a.get("title", "").startswith("lane ")]
    expected = sum(intr.operand(op).elements * intr.wave_size for op in "ABC")
    assert len(titled) == expected
    # The executor's LDS table, and the K loop with its matrix instructions marked.
    rows = [v for a, v in page.cells if v.startswith("mmaflow.")]
    assert any(".lds_store" in v or ".async" in v for v in rows) and any("fragment" in v for v in rows)
    ours = [(cls, v) for cls, v, pre in page.spans if pre == f"{k}-kloop-mmaflow"]
    assert sum(1 for cls, v in ours if cls == "mma" and mnemonic in v) == mine["loop_counts"]["matrix"]
    assert any(cls in ("wait", "bar") for cls, _ in ours)
    assert any(pre == f"{k}-kloop-iree" and cls == "mma" for cls, _, pre in page.spans)
    assert "Why this config" in text and "K staged 32 deep" in text and "IREE default" in text


def _config_intrinsic(text: str) -> str:
    import re

    return re.search(r"<td class=\"l\">config</td><td class=\"l\">(\w+)", text).group(1)


def test_html_and_json_are_exclusive(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_source(64, 64, 64, "f16", "f32"))
    r = _mmaflow("report", str(src), "--target", "gfx942", "--html", str(tmp_path / "x.html"), "--json")
    assert r.returncode == 2 and "choose one" in r.stderr


@pytest.mark.exhaustive
def test_html_report_says_when_k_is_unrolled_shows_every_lane_and_how_to_read(tmp_path):
    """100x200x64 on gfx942: IREE unrolls K (its one loop is a store loop, no matrix instruction),
    so the page says so instead of listing that loop as "the K loop"; the register grids show all
    64 lanes in blocks that fit the page (no sideways scrolling); a how-to-read section first."""
    src, text, page = _html(tmp_path, 100, 200, 64, "gfx942")
    k = "matmul_dispatch_0"
    assert page.sections[0] == "how-to-read" and "How to read this page" in text
    js = json.loads(_mmaflow("report", str(src), "--target", "gfx942", "--baseline", "iree", "--json").stdout)
    iree = next(iter(js["iree"].values()))
    assert iree["has_loop"] and not iree["loop_counts"].get("matrix"), iree  # the store loop the page must not show
    assert not any(pre == f"{k}-kloop-iree" for _, _, pre in page.spans)
    assert (
        f'<pre class="isa" id="{k}-kloop-iree">IREE unrolled K: no loop of its ISA holds matrix instructions (its '
        f"{iree['counts']['matrix']} run in straight-line code); the loop it has (" in text
    )
    assert "<th>in K loop (none: K unrolled)</th>" in text
    # every lane of the wave64 grids, in tables of at most 32 lanes
    grids = text.split('<table class="grid">')[1:]
    assert len(grids) == 3 * 2, len(grids)
    for grid in grids:
        head = grid.split("</tr>", 1)[0]
        assert 0 < head.count("<th>") <= 32, head
    lanes = {a["title"].split(",")[0] for a, _ in page.cells if a.get("title", "").startswith("lane ")}
    assert lanes == {f"lane {i}" for i in range(64)}


def test_html_report_of_a_wgmma_kernel_says_b_has_no_register_layout(tmp_path):
    """sm_90a's warpgroup kernel reads B through a shared-memory descriptor: the page shows A's and
    C's register grids and says so for B (it raised before)."""
    _, text, page = _html(tmp_path, 1024, 1024, 1024, "sm_90a")
    assert _config_intrinsic(text).startswith("WGMMA_"), _config_intrinsic(text)
    assert "read from shared memory through a matrix descriptor: no register layout" in text
    titled = [a["title"] for a, _ in page.cells if a.get("title", "").startswith("lane ")]
    assert titled, "A's and C's register grids"
