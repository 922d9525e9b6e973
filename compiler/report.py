"""`mmaflow report`: what the final code of each matmul dispatch looks like, from its ISA.

Per dispatch: VGPRs/SGPRs/AGPRs, spills, LDS bytes, occupancy (waves per SIMD; warps per SM on
NVIDIA), and instruction counts (matrix, global loads by width, LDS loads/stores by width,
barriers, cache invalidates), for the whole kernel and inside the K loop. With
``--baseline iree`` the same module is also compiled by IREE's default pipeline and reported
side by side. NVIDIA register counts come from ``ptxas -v`` when ptxas is on PATH.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mmaflow.compiler.core.errors import ToolchainError
from mmaflow.compiler.driver.bridge import compile_module, kernel_isa, launch_shared_of
from mmaflow.compiler.driver.vmfb import export_shared_bytes
from mmaflow.compiler.target.isa import IsaReport, k_loop_global_loads, parse_ptx, parse_rocmasm, split_kernels
from mmaflow.compiler.target.limits import SM_BLOCKS, SM_REGISTERS, SM_THREADS, resident_by_shared
from mmaflow.compiler.target.targets import Target, get_target

ROWS = [
    ("vgprs", "VGPRs (NVIDIA: registers)"),
    ("sgprs", "SGPRs"),
    ("agprs", "AGPRs"),
    ("vgpr_spills", "VGPR spills (NVIDIA: spill bytes)"),
    ("sgpr_spills", "SGPR spills"),
    ("scratch_bytes", "scratch bytes"),
    ("lds_bytes", "LDS bytes"),
    ("waves_per_simd", "occupancy (waves/SIMD; NVIDIA warps/SM)"),
    ("matrix_behind_lds_wait", "K loop: matrix instrs right behind LDS wait"),
]
COUNT_ROWS = [
    "matrix",
    "global_load_b128",
    "global_load_b64",
    "global_load_b32",
    "global_load_narrow",
    "async_copy_b128",
    "async_copy_b64",
    "async_copy_b32",
    "async_wait",
    "global_store",
    "lds_load_b128",
    "lds_load_b64",
    "lds_load_b32",
    "lds_load_narrow",
    "lds_load_other",
    "lds_store_b128",
    "lds_store_b64",
    "lds_store_b32",
    "lds_store_narrow",
    "lds_store_other",
    "barrier",
    "cache_invalidate",
    "scratch",
]


def ptxas_path() -> str | None:
    """ptxas: from the ``nvidia-cuda-nvcc-cu12`` wheel (mmaflow's test extra pins it), else from
    PATH; None when neither has it."""
    try:
        import nvidia.cuda_nvcc as nvcc
    except ImportError:
        nvcc = None
    for base in getattr(nvcc, "__path__", []):
        candidate = Path(base) / "bin" / "ptxas"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("ptxas")


def ptxas_info(ptx: str, arch: str, threads: int, shared: int | None = None, shared_limit: int = 0) -> dict:
    """Registers and spills from ptxas -v, if ptxas is available ({} otherwise); of a dispatch's
    ``join_kernels`` text, its own kernel's. The occupancy is limited by registers and threads and,
    given the shared memory the kernel launches with (``shared``, of ``shared_limit`` a workgroup
    may have), by shared memory."""
    exe = ptxas_path()
    if exe is None:
        return {}
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.ptx"
        p.write_text(split_kernels(ptx)[0])
        r = subprocess.run(
            [exe, f"-arch={arch}", "-v", str(p), "-o", str(Path(d) / "k.cubin")], capture_output=True, text=True
        )
    text = r.stdout + r.stderr
    if r.returncode != 0:
        raise ToolchainError(f"ptxas failed on the PTX: {text.strip()[:500]}")
    regs = re.search(r"Used (\d+) registers", text)
    spill = re.search(r"(\d+) bytes spill stores", text)
    out = {}
    if regs:
        out["vgprs"] = int(regs.group(1))
        per_block = int(regs.group(1)) * threads
        blocks = min(SM_BLOCKS, SM_REGISTERS // max(per_block, 1), SM_THREADS // threads)
        if shared:
            blocks = min(blocks, resident_by_shared(shared, shared_limit))
        out["waves_per_simd"] = blocks * threads // 32  # warps per SM
    if spill:
        out["vgpr_spills"] = int(spill.group(1))
    return out


def launched(rep: IsaReport, res, exe, target: Target, threads: int) -> None:
    """One of our NVIDIA kernels' report as it runs (``_as_launched``), from its compile's .vmfb."""
    size = launch_shared_of(res.launch_shared, exe.kernel, target)
    _as_launched(rep, res.isa_text[exe.name], target.iree_arch, threads, size, target)


def _as_launched(rep: IsaReport, ptx: str, arch: str, threads: int, size: int, target: Target) -> None:
    """An NVIDIA kernel's report as it runs: its LDS bytes the dynamic shared memory the runtime
    launches it with (``size``, the .vmfb's export: a versioned dispatch's kernels together) where
    the PTX declares none, registers, spills and occupancy from ptxas."""
    if rep.lds_bytes is None:
        rep.lds_bytes = size
    rep.__dict__.update(ptxas_info(ptx, arch, threads, rep.lds_bytes, target.lds_bytes))


def _baseline(source: str, target: Target, source_name: str) -> dict[str, IsaReport]:
    """Compile with IREE's default pipeline; report the same dispatches."""
    from iree.compiler import compile_str

    out = {}
    with tempfile.TemporaryDirectory() as d:
        flags = target.iree_flags(target.baseline_arch)
        vmfb = compile_str(
            source,
            extra_args=flags
            + [f"--iree-hal-dump-executable-intermediates-to={d}", f"--iree-hal-dump-executable-binaries-to={d}"],
        )
        shared = {} if target.is_amd else export_shared_bytes(vmfb)
        texts = [p.read_text() for p in Path(d).glob(f"*.{target.vendor.isa_suffix}")]
        kernels = set()
        for t in texts:
            kernels |= (
                set(re.findall(r"^([\w$.]+_dispatch_\d+\w*):\s*$", t, re.M))
                if target.is_amd
                else set(re.findall(r"\.entry (\w+)\(", t))
            )
        for k in sorted(kernels):
            text = kernel_isa(Path(d), k, target)
            out[k] = parse_rocmasm(text, k, target) if target.is_amd else parse_ptx(text, k, target)
            if not target.is_amd:
                size = launch_shared_of(shared, k, target)
                _as_launched(out[k], text, target.baseline_arch, _ptx_threads(text, k), size, target)
    return out


def _ptx_threads(ptx: str, kernel: str) -> int:
    """Threads per block a PTX kernel declares (``.maxntid``, ``.reqntid``), for the occupancy estimate."""
    m = re.search(
        rf"\.entry {re.escape(kernel)}\([^{{]*?\.(?:reqntid|maxntid) (\d+)(?:, (\d+))?(?:, (\d+))?", ptx, re.S
    )
    if not m:
        raise ToolchainError(f"the PTX of {kernel} declares no .maxntid or .reqntid (threads per block)")
    n = 1
    for g in m.groups():
        n *= int(g) if g else 1
    return n


def _reasons(target, exe, overrides: dict) -> list[str]:
    """Why a dispatch's config is what it is: which source chose it (a tuning-table entry, the
    heuristic, --config) and the families' reasons (``registry.explain``); a versioned dispatch's
    versions (planned by stage `version`) first, then its other kernel's reasons."""
    from mmaflow.compiler.kernels import registry

    planned = [f"versioned (stage `version`): {v.condition}: {v.config.describe()}" for v in exe.facts.versions]
    return planned + [
        ("else: " if planned else "") + w for w in registry.explain(target, exe.facts.problem.estimate(), overrides)
    ]


def report_command(args, source: str, options) -> int:
    target = get_target(args.target)
    res = compile_module(source, target.name, options=options, source_name=args.input)
    from mmaflow.compiler.kernels import registry

    # Direct families (flash attention, the weight-only decode kernel, the copy kernel): a plan in
    # place of a config.
    planned = {
        e.name: registry.direct_family(e.facts.kind).plan(e.facts.problem, target)
        for e in res.taken
        if e.facts.kind in registry.DIRECT
    }
    mine = {}
    for exe in res.taken:
        rep = res.reports[exe.name]
        if exe.name in planned:  # a direct family: its plan in place of a config
            plan = planned[exe.name]
            if not target.is_amd:
                launched(rep, res, exe, target, plan.workgroup_size)
            if rep.lds_bytes is None:
                rep.lds_bytes = plan.lds_bytes
        elif not target.is_amd:
            launched(rep, res, exe, target, exe.facts.config.workgroup_size)
        mine[exe.export] = rep
    html_out = getattr(args, "html", None)
    base = _baseline(source, target, args.input) if args.baseline or html_out else {}
    if html_out:
        from mmaflow.runtime.report_html import write_report

        write_report(
            Path(html_out),
            target,
            args.input,
            res,
            base,
            overrides=options.overrides,
            rows=ROWS,
            count_rows=COUNT_ROWS,
            planned=planned,
        )
        from mmaflow.compiler.core.errors import plural

        print(
            f"mmaflow report: {html_out} ({plural(len(res.taken), 'kernel')}, IREE's default beside each)",
            file=sys.stderr,
        )
        return 0
    if args.json:
        print(
            json.dumps(
                {
                    "target": target.name,
                    "mmaflow": {k: v.to_dict() for k, v in mine.items()},
                    "iree": {k: v.to_dict() for k, v in base.items()},
                },
                indent=1,
            )
        )
        return 0
    for kernel, rep in mine.items():
        other = base.get(kernel)
        print(f"{kernel} on {target.name}")
        exe = next(e for e in res.taken if e.export == kernel)
        if exe.name in planned:
            print(f"  kernel: {planned[exe.name].describe()}")
        else:
            print(f"  config: {exe.facts.config.describe()}")
            for why in _reasons(target, exe, options.overrides):
                print(f"    {why}")
        for v in exe.facts.versions:  # (a kernel and export of its own; the counts below are the other's)
            print(
                f"  versioned: {v.condition}: {v.config.intrinsic} (kernel {v.export}) | else "
                f"{exe.facts.config.intrinsic} (the counts below)"
            )
        header = f"  {'':44} {'mmaflow':>12}" + (f" {'IREE default':>14}" if args.baseline else "")
        print(header)

        def row(label, a, b):
            bb = "" if not args.baseline else f" {('-' if b is None else b):>14}"
            print(f"  {label:44} {('-' if a is None else a):>12}{bb}")

        def k_loop(r):  # the loop found is a K loop only if it holds matrix instructions (else K is unrolled)
            return r is not None and bool(r.loop_counts.get("matrix", 0))

        def in_loop(r, key):
            return r.loop_counts.get(key, 0) if k_loop(r) else "-"

        for key, label in ROWS:
            a, b = getattr(rep, key), getattr(other, key) if other else None
            if key == "matrix_behind_lds_wait":
                a, b = (a if k_loop(rep) else None), (b if k_loop(other) else None)
            row(label, a, b)
        for key in COUNT_ROWS:
            a = f"{rep.counts.get(key, 0)} ({in_loop(rep, key)})"
            b = f"{other.counts.get(key, 0)} ({in_loop(other, key)})" if other else None
            if rep.counts.get(key) or (other and other.counts.get(key)):
                row(f"{key} (in K loop)", a, b)
        unrolled = [
            who
            for who, r in (("mmaflow", rep), ("IREE default", other if args.baseline else None))
            if r is not None and not k_loop(r)
        ]
        if unrolled and exe.name not in planned:  # (a copy has no K loop to speak of)
            print(f"  (in K loop) '-': {' and '.join(unrolled)} unrolled K (no loop holds matrix instructions)")
    if args.baseline and not base:
        print("  (IREE's default pipeline produced no kernel with these names)")
    return 0


# ---- `mmaflow report --suite`: every shape of a suite, per target, from its ISA ------------------


def survey_row(target: Target, row, check: int, seed: int = 0) -> dict:
    """One suite row compiled for ``target``: the taken kernel's config, registers, spills, LDS,
    occupancy and the K loop's global loads by width (full width: 128 bits), from the final ISA;
    with ``check`` > 0, ``check`` sampled workgroups run on the lane executor against numpy. A
    row mmaflow leaves to IREE or cannot build says why (``error``)."""
    from mmaflow.compiler.core.errors import MmaflowError
    from mmaflow.runtime.suite_bench import source

    out = {"row": row.name, "target": target.name}
    try:
        res = compile_module(source(row), target.name, source_name=row.name)
    except MmaflowError as e:
        return out | {"error": str(e).splitlines()[0][:300]}
    if not res.taken:
        return out | {"error": "left to IREE: " + "; ".join(res.log)[:300]}
    (exe,) = res.taken
    rep = res.reports[exe.name]
    if not target.is_amd:
        launched(rep, res, exe, target, exe.facts.config.workgroup_size)
    full, narrow = k_loop_global_loads(rep)
    out |= {
        "kernel": exe.facts.config.describe(),
        "vgprs": rep.vgprs,
        "spills": (rep.vgpr_spills or 0) + (rep.sgpr_spills or 0) + (rep.scratch_bytes or 0),
        "lds_bytes": rep.lds_bytes,
        "waves": rep.waves_per_simd,
        "loads_b128": full,
        "loads_narrower": narrow,
    }
    if check:
        from mmaflow.compiler.core.mlir import new_context, parse_module
        from mmaflow.runtime.simulate import check_matmul

        sizes = {"m": row.m} if row.dynamic else None
        try:
            r = check_matmul(parse_module(exe.text, new_context()), seed=seed, sample=check, sizes=sizes)
        except MmaflowError as e:  # (the executor refusing the kernel is the row's failure, not the survey's)
            return out | {"check": f"FAIL: {str(e).splitlines()[0][:300]}", "check_passed": False}
        out["check"] = r.check.line()
        out["check_passed"] = bool(r.check.passed and not r.stats.races)
    return out


def survey_command(args, options) -> int:
    """``mmaflow report --suite NAME --target T1,T2``: ``survey_row`` for every row and target,
    a table per target and a summary line, or JSON; exit 1 when a row fails to build, spills,
    or fails its check."""
    from mmaflow.compiler.core.errors import InputError, plural
    from mmaflow.runtime.suites import matching

    if options.overrides:
        raise InputError("--suite reports each row's own config: no --config with it")
    try:
        rows = matching(args.suite, tuple(args.dtype.split(",")), args.rows)
    except ValueError as e:
        raise InputError(str(e)) from None
    results = []
    for name in args.target.split(","):
        target = get_target(name)
        for row in rows:
            results.append(survey_row(target, row, args.check))
            if not args.json:
                _survey_line(results[-1])
    bad = [r for r in results if r.get("error") or r.get("spills") or r.get("check_passed") is False]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        narrow = sum(1 for r in results if r.get("loads_narrower"))
        checked = [r for r in results if "check" in r]
        print(
            f"survey: {plural(len(results), 'build')} ({plural(len(rows), 'row')} x "
            f"{plural(len(results) // len(rows), 'target')}): "
            f"{sum(1 for r in results if r.get('error'))} not built, {sum(1 for r in results if r.get('spills'))} "
            f"spilling, {narrow} with K-loop global loads under 128 bits"
            + (f", {sum(1 for r in checked if r['check_passed'])} of {len(checked)} checks passed" if checked else "")
        )
    return 1 if bad else 0


def _survey_line(r: dict) -> None:
    if r.get("error"):
        print(f"{r['target']:8} {r['row']:60} NOT BUILT: {r['error']}", flush=True)
        return
    check = f"  {'PASS' if r['check_passed'] else 'FAIL'}" if "check" in r else ""
    kernel = ",".join(r["kernel"].split(",")[:2])  # the instruction and the tile
    print(
        f"{r['target']:8} {r['row']:60} {kernel:52} vgprs {r['vgprs']!s:>4} spills {r['spills']} "
        f"lds {(r['lds_bytes'] or 0) / 1024:5.1f}K waves {r['waves']!s:>2} loads b128 {r['loads_b128']} "
        f"narrower {r['loads_narrower']}{check}",
        flush=True,
    )
