"""`mmaflow report IN.mlir --target T --html OUT.html`: one self-contained page per module.

Per taken dispatch, in this order (each a ``<section>`` with a stable id, so tests and people can
find it): the problem, the config and why the heuristic chose it, the kernel plan; the chosen
instruction's A, B and C register layouts as coloured grids (register and half x lane, one colour
per row of the tile, lighter by column); the LDS tiles with their bank maps and the lane
executor's conflict counts per copy and fragment op; registers, spills, LDS and occupancy; the
instruction mix; the K loop of the final ISA with matrix instructions, waits and barriers marked
(the loop holding the matrix instructions; where K is unrolled, a note saying so). First, a short
"how to read this page" section.
Every figure beside IREE's default pipeline on the same module. No scripts, no network: inline
CSS only.
"""

from __future__ import annotations

import colorsys
import html
from pathlib import Path

from mmaflow.compiler.target.intrinsics import TYPE_BITS, WarpgroupIntrinsic

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1b1b1b;max-width:1500px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:16px 0 6px} .sub{color:#555}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #d4d4d4;padding:2px 8px;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left}
table.grid td{font:10px/1.2 ui-monospace,monospace;padding:1px 2px;text-align:center;min-width:26px}
table.grid th{font:10px ui-monospace,monospace;padding:1px 3px}
table.banks td{font:10px ui-monospace,monospace;padding:1px 2px;min-width:16px;text-align:center}
td.pad{background:repeating-linear-gradient(45deg,#eee,#eee 3px,#fff 3px,#fff 6px);color:#999}
.two{display:flex;gap:24px;flex-wrap:wrap} .two>div{flex:1;min-width:420px}
pre.isa{font:11px/1.35 ui-monospace,monospace;background:#fafafa;border:1px solid #ddd;padding:6px;max-height:620px;
overflow:auto;margin:4px 0} .mma{background:#ffe08a;font-weight:600} .wait{background:#f7b7b7} .bar{background:#b7d3f7}
.glb{color:#0a6b2b} .lds{color:#6b2b9b} ul{margin:4px 0 4px 20px;padding:0} .warn{color:#a00;font-weight:600}
.legend span{display:inline-block;padding:0 6px;margin-right:6px;border:1px solid #ccc}
"""


HOW_TO_READ = """<section id="how-to-read"><h2>How to read this page</h2><ul>
<li>One part per dispatch mmaflow compiled (dispatches left to IREE are listed first). Each figure of
mmaflow's kernel stands beside IREE's default pipeline on the same module.</li>
<li><b>Problem and config</b>: the matmul, the config the heuristic chose (tile, waves or warps, the
matrix instruction) and why; the kernel plan the later stages follow.</li>
<li><b>Register layouts</b>: one table per operand of the matrix instruction; columns are lanes (in
blocks of 32), rows are registers (16-bit elements: register halves). A cell <code>r_c</code> is the
element at row r, column c of the instruction's tile that this lane holds there; one colour per tile
row, lighter along the columns; a hatched <code>-</code>: nothing there. Hover a cell for its
lane and register.</li>
<li><b>LDS tiles</b>: the first rows of each shared-memory tile, one cell per 4-byte word, labelled and
coloured by its bank; hatched cells are padding. The table below counts the accesses and
bank-conflict cycles per LDS operation, measured by the lane executor on a sampled workgroup
(0 conflict cycles: every access conflict-free).</li>
<li><b>Registers, spills, LDS, occupancy</b>: from the final ISA (NVIDIA registers from ptxas);
spills are marked red.</li>
<li><b>Instruction mix</b>: instruction counts by kind, in the whole kernel and inside the K loop.</li>
<li><b>The K loop</b>: the loop of the final ISA that holds the matrix instructions, numbered, with
matrix instructions, waits, barriers, global and LDS accesses marked. Where a compiler unrolled K
(small K) no loop holds matrix instructions: the page says so instead of showing another loop (a
store or copy loop), and the K-loop counts are "-".</li>
</ul></section>"""


def _e(x) -> str:
    return html.escape(str(x))


def _colour(row: int, rows: int, col: int, cols: int) -> str:
    """One hue per tile row, lighter along the columns."""
    h = (row * 0.61803) % 1.0
    light = 0.55 + 0.35 * (col / max(cols - 1, 1))
    r, g, b = colorsys.hls_to_rgb(h, light, 0.65)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _bank_colour(bank: int, banks: int) -> str:
    r, g, b = colorsys.hls_to_rgb(bank / banks, 0.78, 0.55)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def register_grid(layout, element_bits: int, max_lanes: int = 64, lanes_per_block: int = 32) -> str:
    """The VGPR view (registers by lanes, as AMD's matrix-core guides draw it) as tables: rows = registers (and 16-bit
    halves), columns = lanes, each cell the tile element (row_col) that lane holds there. Every lane is shown: a wave
    of 64 (or a warpgroup's 128 threads) wraps into blocks of ``lanes_per_block`` lanes, one
    table each, so the page needs no sideways scrolling."""
    lanes = list(range(min(layout.wave_size, max_lanes)))
    return "\n".join(
        _register_block(layout, element_bits, lanes[i : i + lanes_per_block])
        for i in range(0, len(lanes), lanes_per_block)
    )


def _register_block(layout, element_bits: int, lanes: list[int]) -> str:
    per_reg = max(1, 32 // element_bits)
    cells: dict = {}
    for lane in lanes:
        for e in range(layout.elements):
            cells[(layout.op_index(e), lane)] = layout.coords(lane, e)
    out = ['<table class="grid"><tr><th class="l">reg \\ lane</th>' + "".join(f"<th>{x}</th>" for x in lanes) + "</tr>"]
    for s in range(layout.op_vector_length):
        reg, part = divmod(s, per_reg)
        label = f"V{reg}" if per_reg == 1 else f"V{reg}[{part * element_bits + element_bits - 1}:{part * element_bits}]"
        row = [f'<th class="l">{label}</th>']
        for lane in lanes:
            rc = cells.get((s, lane))
            if rc is None:
                row.append('<td class="pad">-</td>')
            else:
                row.append(
                    f'<td style="background:{_colour(rc[0], layout.rows, rc[1], layout.cols)}" '
                    f'title="lane {lane}, {label}: {layout.operand}[{rc[0]}][{rc[1]}]">{rc[0]}_{rc[1]}</td>'
                )
        out.append("<tr>" + "".join(row) + "</tr>")
    return "\n".join(out) + "</table>"


def bank_map(rows: int, row_elems: int, used_elems: int, bits: int, banks: int, show_rows: int = 16) -> str:
    """The LDS tile's 4-byte words coloured by bank: rows x dwords; padding hatched."""
    dw_per_row = row_elems * bits // 32
    used_dw = used_elems * bits // 32
    out = [
        '<table class="banks"><tr><th class="l">row \\ dword</th>'
        + "".join(f"<th>{d}</th>" for d in range(dw_per_row))
        + "</tr>"
    ]
    for r in range(min(rows, show_rows)):
        tds = []
        for d in range(dw_per_row):
            bank = (r * dw_per_row + d) % banks
            cls = ' class="pad"' if d >= used_dw else ""
            style = "" if d >= used_dw else f' style="background:{_bank_colour(bank, banks)}"'
            tds.append(f'<td{cls}{style} title="row {r}, dword {d}: bank {bank}">{bank}</td>')
        out.append(f'<tr><th class="l">{r}</th>' + "".join(tds) + "</tr>")
    return "\n".join(out) + "</table>"


def _classify(line: str) -> str:
    op = line.split()[0] if line.split() else ""
    if op.startswith(("v_wmma", "v_mfma", "v_smfmac", "mma.sync", "wgmma")):
        return "mma"
    if op.startswith(("s_waitcnt", "s_wait_", "cp.async.wait", "mbarrier")):
        return "wait"
    if op.startswith(("s_barrier", "bar.sync", "barrier")):
        return "bar"
    if op.startswith(("buffer_", "global_", "ld.global", "st.global", "cp.async")):
        return "glb"
    if op.startswith(("ds_", "ld.shared", "st.shared", "ldmatrix")):
        return "lds"
    return ""


def k_loop(rep) -> list[str] | None:
    """The K loop's instructions: the loop the ISA parser found, if it holds matrix instructions.
    A compiler that unrolls K (IREE at small K) leaves no such loop; the loop found is then
    another (a store or copy loop), not a K loop."""
    if rep is None or not rep.loop_listing or not rep.loop_counts.get("matrix", 0):
        return None
    return rep.loop_listing


def unrolled_note(rep, who: str) -> str:
    """What a kernel without a K loop does instead, in words."""
    other = (
        f"; the loop it has ({len(rep.loop_listing)} instructions) holds none: a store or copy loop, not shown"
        if rep.loop_listing
        else ""
    )
    return (
        f"{who} unrolled K: no loop of its ISA holds matrix instructions (its {rep.counts.get('matrix', 0)} "
        f"run in straight-line code){other}"
    )


def isa_listing(lines: list[str], pid: str, unrolled: str | None = None) -> str:
    """The K loop's instructions, numbered, with matrix ops, waits, barriers and memory ops marked;
    ``unrolled`` says why there is none."""
    if not lines:
        return f'<pre class="isa" id="{pid}">{_e(unrolled or "(no K loop found in the ISA)")}</pre>'
    body = []
    for i, line in enumerate(lines):
        cls = _classify(line)
        text = f"{i:4d}  {_e(line)}"
        body.append(f'<span class="{cls}">{text}</span>' if cls else text)
    return f'<pre class="isa" id="{pid}">' + "\n".join(body) + "</pre>"


def _resource_table(mine, base, rows) -> str:
    out = ['<table><tr><th class="l"></th><th>mmaflow</th><th>IREE default</th></tr>']
    for key, label in rows:
        a = getattr(mine, key)
        b = getattr(base, key) if base is not None else None
        if key == "matrix_behind_lds_wait":  # a K-loop figure: none where K is unrolled
            a, b = (a if k_loop(mine) else None), (b if k_loop(base) else None)
        warn = ' class="warn"' if key.endswith("spills") and a else ""
        out.append(
            f'<tr><td class="l">{_e(label)}</td><td{warn} data-key="{key}">{_e("-" if a is None else a)}</td>'
            f"<td>{_e('-' if b is None else b)}</td></tr>"
        )
    return "\n".join(out) + "</table>"


def _mix_table(mine, base, count_rows) -> str:
    def loop_head(rep):
        return "in K loop" if rep is None or k_loop(rep) else "in K loop (none: K unrolled)"

    def in_loop(rep, key):
        return rep.loop_counts.get(key, 0) if k_loop(rep) else "-"

    out = [
        f'<table><tr><th class="l">instructions</th><th>mmaflow</th><th>{loop_head(mine)}</th>'
        f"<th>IREE default</th><th>{loop_head(base)}</th></tr>"
    ]
    for key in count_rows:
        vals = [mine.counts.get(key, 0), in_loop(mine, key)]
        vals += [base.counts.get(key, 0), in_loop(base, key)] if base is not None else ["-", "-"]
        if any(v not in (0, "-") for v in vals):
            out.append(f'<tr><td class="l">{key}</td>' + "".join(f"<td>{v}</td>" for v in vals) + "</tr>")
    return "\n".join(out) + "</table>"


def _lds_section(exe, stats, target) -> str:
    cfg, problem = exe.facts.config, exe.facts.problem
    parts = []
    for name, rows, elem in (("A", cfg.tile_m, problem.a_type), ("B", cfg.tile_n, problem.b_type)):
        bits = TYPE_BITS[elem]
        row_elems = cfg.tile_k + cfg.lds_pad
        parts.append(
            f"<h3>{name}: LDS {elem}[{rows}][{row_elems}] (K innermost, {cfg.lds_pad} elements of padding "
            f"per row), {target.lds_banks} banks of 4 bytes: the first rows</h3>"
        )
        parts.append(bank_map(rows, row_elems, cfg.tile_k, bits, target.lds_banks))
    if stats is not None:
        pieces, conflicts = stats.lds_pieces_by_op, stats.lds_conflicts_by_op
        rows = [
            '<table id="lds-ops"><tr><th class="l">LDS op (lane executor, sampled workgroup)</th>'
            "<th>accesses</th><th>conflict cycles</th></tr>"
        ]
        for op in sorted(pieces, key=lambda o: (-conflicts.get(o, 0), o)):
            rows.append(f'<tr><td class="l">{_e(op)}</td><td>{pieces[op]}</td><td>{conflicts.get(op, 0)}</td></tr>')
        rows.append(
            f'<tr><th class="l">total</th><th>{stats.lds_ideal_cycles}</th>'
            f"<th>{stats.lds_conflict_cycles}</th></tr></table>"
        )
        parts.append("".join(rows))
    return "\n".join(parts)


def render(
    target,
    source_name: str,
    compiled,
    baseline: dict,
    executor: dict,
    explain: dict,
    *,
    rows: list,
    count_rows: list,
    planned: dict | None = None,
) -> str:
    """The page. ``compiled``: bridge.CompileResult; ``baseline``: kernel -> IsaReport of IREE's
    default; ``executor``: executable -> executor Stats (or None); ``explain``: executable ->
    the config's reasons; ``rows`` ((IsaReport field, label), ...) and ``count_rows``
    (instruction classes): the tables' rows, as `mmaflow report` prints them (its ROWS and
    COUNT_ROWS); ``planned``: executable -> the plan of a direct family's kernel (flash
    attention, weight-only, copy), which has no contraction config: its plan, resources,
    instruction mix and main loop are shown."""
    planned = planned or {}
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>mmaflow report: {_e(source_name)} on "
        f"{_e(target.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>mmaflow report: {_e(source_name)} on {_e(target.name)}</h1>",
        f'<div class="sub">{_e(target.description)}; {len(compiled.taken)} of {len(compiled.executables)} '
        f"dispatches compiled by mmaflow, the rest by IREE</div>",
    ]
    out.append(HOW_TO_READ)
    left = [e for e in compiled.executables if not e.taken]
    if left:
        out.append(
            '<h2 id="left">Dispatches left to IREE</h2><ul>'
            + "".join(f"<li>{_e(e.name)}: {_e(e.log[0] if e.log else 'left')}</li>" for e in left)
            + "</ul>"
        )
    for exe in compiled.taken:
        mine = compiled.reports[exe.name]
        base = baseline.get(exe.export)
        if exe.name in planned:
            out.append(_planned_sections(exe, planned[exe.name], mine, base, rows, count_rows))
            continue
        cfg, problem = exe.facts.config, exe.facts.problem
        intr = target.intrinsic(cfg.intrinsic)
        kid = _e(exe.name)
        out.append(f'<h2 id="{kid}">{kid}</h2>')
        out.append(
            f'<section id="{kid}-config"><h3>Problem and config</h3><table>'
            f'<tr><td class="l">problem</td><td class="l">{_e(problem.describe())}</td></tr>'
            f'<tr><td class="l">config</td><td class="l">{_e(cfg.describe())}</td></tr></table>'
            "<b>Why this config</b><ul>"
            + "".join(f"<li>{_e(w)}</li>" for w in explain.get(exe.name, []))
            + '</ul><b>Kernel plan</b> (<code>compiler/kernels/common/plan.py</code>)<pre class="isa">'
            + _e("\n".join(exe.run.headers.get("distribute", [])))
            + "</pre></section>"
        )
        out.append(
            f'<section id="{kid}-layouts"><h3>Register layouts of {_e(intr.name)} ({_e(intr.mnemonic)}), '
            f'wave{intr.wave_size}</h3><div class="sub">Cells: the tile element row_col a lane holds in a '
            f"register (16-bit elements: per half); one colour per tile row, lighter along the columns.</div>"
        )
        for op in ("A", "B", "C"):
            if op == "B" and isinstance(intr, WarpgroupIntrinsic):  # (wgmma reads B through a descriptor)
                out.append(
                    f'<h3>B: {intr.k}x{intr.n}</h3><div class="sub">read from shared memory through a '
                    "matrix descriptor: no register layout (<code>smem_layout.py</code>)</div>"
                )
                continue
            lay = intr.operand(op)
            out.append(f"<h3>{op}: {lay.rows}x{lay.cols}</h3>")
            out.append(register_grid(lay, TYPE_BITS[intr.element_type(op)]))
        out.append("</section>")
        out.append(
            f'<section id="{kid}-lds"><h3>LDS tiles, banks and conflicts</h3>'
            + _lds_section(exe, executor.get(exe.name), target)
            + "</section>"
        )
        out.append(_isa_sections(kid, mine, base, rows, count_rows, "the K loop"))
    out.append("</body></html>")
    return "\n".join(out)


def _planned_sections(exe, plan, mine, base, rows, count_rows) -> str:
    """A direct family's kernel: what it computes and its plan, then the sections every kernel has."""
    kid = _e(exe.name)
    return "\n".join(
        [
            f'<h2 id="{kid}">{kid}</h2>',
            f'<section id="{kid}-plan"><h3>Problem and kernel plan</h3><table>'
            f'<tr><td class="l">problem</td><td class="l">{_e(exe.facts.problem.describe())}</td></tr>'
            f'<tr><td class="l">kernel</td><td class="l">{_e(plan.describe())}</td></tr></table></section>',
            _isa_sections(kid, mine, base, rows, count_rows, "the main loop"),
        ]
    )


def _isa_sections(kid: str, mine, base, rows, count_rows, loop: str) -> str:
    """Every kernel's sections from its final ISA: resources, instruction mix (whole kernel and
    inside ``loop``), and the loop that holds the matrix instructions, mmaflow's beside IREE's."""
    ours, theirs = k_loop(mine) or [], k_loop(base) or []
    return "\n".join(
        [
            f'<section id="{kid}-resources"><h3>Registers, spills, LDS, occupancy</h3>'
            + _resource_table(mine, base, rows)
            + "</section>",
            f'<section id="{kid}-mix"><h3>Instruction mix (whole kernel and inside {loop})</h3>'
            + _mix_table(mine, base, count_rows)
            + "</section>",
            f'<section id="{kid}-kloop"><h3>The K loop of the final ISA</h3><div class="legend">'
            '<span class="mma">matrix</span><span class="wait">wait</span><span class="bar">barrier</span>'
            '<span class="glb">global memory</span><span class="lds">LDS</span></div><div class="two">'
            f"<div><b>mmaflow</b> ({len(ours)} instructions)"
            + isa_listing(ours, f"{kid}-kloop-mmaflow", unrolled_note(mine, "mmaflow"))
            + "</div>"
            f"<div><b>IREE default</b> ({len(theirs)} instructions)"
            + isa_listing(
                theirs,
                f"{kid}-kloop-iree",
                unrolled_note(base, "IREE") if base else "(IREE's default built no such kernel)",
            )
            + "</div></div></section>",
        ]
    )


def write_report(
    path: Path,
    target,
    source_name: str,
    compiled,
    baseline: dict,
    *,
    overrides: dict,
    rows: list,
    count_rows: list,
    sample: int = 1,
    planned: dict | None = None,
) -> None:
    """Run the lane executor on ``sample`` workgroups of each taken dispatch for its LDS
    counters, gather the config's reasons, and write the page (``rows``, ``count_rows``: see
    ``render``)."""
    from mmaflow.compiler.kernels.registry import explain
    from mmaflow.runtime.model_check import check_executable

    executor, reasons = {}, {}
    planned = planned or {}
    for exe in compiled.taken:
        if exe.name in planned:  # (a direct family: no config to explain, no LDS tiles of the script's)
            continue
        reasons[exe.name] = explain(target, exe.facts.problem.estimate(), overrides)
        checks = check_executable(exe, seed=0, sample=sample)
        executor[exe.name] = checks[0].stats if checks else None
    path.write_text(
        render(
            target,
            source_name,
            compiled,
            baseline,
            executor,
            reasons,
            rows=rows,
            count_rows=count_rows,
            planned=planned,
        )
    )
