"""The `mmaflow` command line.

    mmaflow compile IN.mlir --target T -o OUT.vmfb [--dump-dir D] [--dump-after STAGE] [--config K=V]
    mmaflow flags --target T [--config K=V]        flags that make stock iree-compile use mmaflow
    mmaflow layout TARGET [--intrinsic N] [--operand A|B|C] [--convert C:A] [--json]
    mmaflow opt IN.mlir [--from S] [--to S] [--target T]   run pipeline stages on hal.executable IR
    mmaflow report IN.mlir --target T [--json] [--baseline iree]
    mmaflow run IN.mlir --target T [--device auto|hip|cuda|sim|local-task]
    mmaflow bench --target T [--sizes ...] [--device ...]

Every error is one line (what and where) and a non-zero exit; --debug shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from mmaflow.compiler.core.errors import EXIT_HELP, Exit, InputError, MmaflowError


def _read_input(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    if not p.exists():
        raise InputError(f"input file not found: {path}")
    if p.is_dir():
        raise InputError(f"input is a directory, not an MLIR file: {path}")
    try:
        return p.read_text()
    except UnicodeDecodeError:
        raise InputError(f"input is not a text MLIR file: {path}") from None


def _options(args, target: str | None = None):
    from mmaflow.compiler.core.config import parse_overrides
    from mmaflow.compiler.pipeline.results import CodegenOptions

    dump_dir = getattr(args, "dump_dir", None)
    dump_after = getattr(args, "dump_after", None) or ("all" if dump_dir else None)  # a dump dir gets everything
    return CodegenOptions(
        target=target,
        overrides=parse_overrides(args.config or []),
        dump_after=dump_after,
        dump_dir=Path(dump_dir) if dump_dir else None,
    )


def _check_output(path: str | None, flag: str = "-o", what: str = ".vmfb") -> None:
    """-o (or ``flag``): a file in an existing directory, checked before any work is done."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{flag} {path} is a directory; give the {what} file to write")
    if not p.parent.is_dir():
        raise InputError(f"{flag} {path}: directory {p.parent} does not exist")
    if (p.exists() and not os.access(p, os.W_OK)) or not os.access(p.parent, os.W_OK):
        raise InputError(f"{flag} {path} is not writable")


def _check_dump_dir(path: str | None) -> None:
    """--dump-dir: created (with parents) and writable, checked before any work is done."""
    if path is None:
        return
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / ".mmaflow-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise InputError(f"--dump-dir {path} cannot be written: {e.strerror or e}") from None


def _check_dump_after(value: str | None) -> None:
    if value is None:
        return
    from mmaflow.compiler.pipeline.pipeline import DUMP_POINTS

    if value not in DUMP_POINTS + ["all"]:
        raise InputError(f"unknown stage {value!r} for --dump-after; stages: {', '.join(DUMP_POINTS)}, all")


# ---------------------------------------------------------------------------------------------
def cmd_compile(args) -> int:
    from mmaflow.compiler.target.targets import get_target

    get_target(args.target)
    _check_dump_after(args.dump_after)
    _check_output(args.output)
    _check_dump_dir(args.dump_dir)
    from mmaflow.compiler.driver.codegen_client import server_enabled, start_server

    if server_enabled():
        start_server()  # before IREE's bindings are imported here: the server's imports overlap them
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.verify import compiled

    source = _read_input(args.input)
    dump_dir = Path(args.dump_dir) if args.dump_dir else None
    options = _options(args, args.target)
    result = compile_module(
        source,
        args.target,
        options=options,
        source_name=args.input,
        dump_dir=dump_dir,
        extra_flags=args.iree_flag or [],
    )
    for line in result.log:
        print(line, file=sys.stderr)
    if args.output:
        Path(args.output).write_bytes(result.vmfb)
    _emit_dumps(args, result)
    for exe in result.taken:
        rep = result.reports[exe.name]
        line = compiled(rep, result.isa_text[exe.name], exe.facts)
        print(f"mmaflow: verified {exe.name}: {line}, {_registers(rep)}", file=sys.stderr)
    return 0


def _registers(rep) -> str:
    """Register use of a verified kernel, from the .rocmasm's metadata on AMD. PTX registers are
    virtual: ptxas assigns them, and `mmaflow report` runs it (about 0.2 s a kernel, so compile
    leaves it out)."""
    if rep.isa != "amdgcn":
        return "registers: see mmaflow report (ptxas)"
    agprs = f", {rep.agprs} AGPRs" if rep.agprs else ""
    return (
        f"{rep.vgprs} VGPRs, {rep.sgprs} SGPRs{agprs}, {rep.vgpr_spills} VGPR / {rep.sgpr_spills} SGPR "
        f"spills, {rep.lds_bytes} bytes LDS, {rep.waves_per_simd} waves/SIMD"
    )


def _emit_dumps(args, result) -> None:
    """--dump-after S prints the dumps of S (all: every stage) to stdout; with --dump-dir they go
    to files there instead (every stage when --dump-after is not given), named on stderr."""
    stage = args.dump_after or ("all" if args.dump_dir else None)
    if stage is None:
        return
    chunks = []
    if stage in ("front", "all") and result.front_text:
        chunks.append(result.front_text)
    for exe in result.taken:
        for name, text in exe.run.dumps.items():
            if stage in (name, "all"):
                chunks.append(f"// mmaflow: {exe.name} after {name}\n{text}")
    if stage in ("isa", "all"):
        for name, text in result.isa_text.items():
            chunks.append(f"// mmaflow: {name} ISA\n{text}")
    out = "\n// -----\n".join(chunks)
    if args.dump_dir:
        Path(args.dump_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.dump_dir) / f"after-{stage}.mlir").write_text(out)
        print(
            f"mmaflow: dumps after {stage} written to {args.dump_dir} (per stage and executable, "
            f"IREE's in {Path(args.dump_dir) / 'iree'}; all of them in after-{stage}.mlir)",
            file=sys.stderr,
        )
        return
    print(out)


def _codegen_tool() -> list[str]:
    """How iree-compile starts this installation's hook tool: ``env PYTHON -I -S
    .../codegen_client.py``. IREE looks a tool up by bare name (next to its own library, then on
    PATH; an absolute path is not found), and ``env`` is on every PATH; the client is the standard
    library only, and -I -S skip site-packages, halving the start-up IREE pays per executable
    (``codegen_client``). The console script ``mmaflow-codegen`` is the same tool, slower to start."""
    from mmaflow.compiler.driver import codegen_client

    tool = ["env", sys.executable, "-I", "-S", codegen_client.__file__]
    spaced = [part for part in tool if any(c.isspace() for c in part)]
    if spaced:
        raise InputError(
            f"iree-compile splits its hook command at spaces, and {spaced[0]!r} has one",
            hint="install mmaflow (and its virtual environment) under a path without spaces",
        )
    return tool


def cmd_flags(args) -> int:
    from mmaflow.compiler.core.config import parse_overrides
    from mmaflow.compiler.target.targets import get_target

    target = get_target(args.target)
    parse_overrides(args.config or [])  # a bad override is an error now, not in every tool process
    tool = _codegen_tool()
    from mmaflow.compiler.driver.codegen_client import server_enabled, share_stderr_appending, start_server

    if server_enabled():
        start_server()  # the codegen server imports while iree-compile runs its front phases
    share_stderr_appending()  # a log file shared with iree-compile: the hook's lines are not overwritten
    if target.retarget_variant:
        tool.append(f"--target={target.name}")
    for item in args.config or []:
        tool.append(f"--config={item}")
    flags = target.iree_flags()
    hook = "--iree-hal-preprocess-executables-with=" + " ".join(tool)
    # The hook command has spaces: a command substitution would split it, so hand IREE a
    # response file (iree-compile expands @FILE) holding the quoted flag.
    rsp = Path(args.rsp) if args.rsp else _rsp_path(hook)
    rsp.parent.mkdir(parents=True, exist_ok=True)
    rsp.write_text(shlex.quote(hook) + "\n")
    print(" ".join(flags + [f"@{rsp}"]))
    return 0


def _rsp_path(hook: str) -> Path:
    import hashlib
    import os

    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mmaflow" / "flags"
    return base / (hashlib.sha256(hook.encode()).hexdigest()[:16] + ".rsp")


def cmd_layout(args) -> int:
    from mmaflow.compiler.core.errors import UnsupportedError
    from mmaflow.compiler.target.intrinsics import TYPE_BITS
    from mmaflow.compiler.target.targets import get_target

    target = get_target(args.target)
    if args.convert:
        return _layout_convert(args, target)
    if not args.intrinsic and not args.operand:
        items = target.intrinsics()
        warpgroup = target.warpgroup_intrinsics()
        if args.json:

            def record(i, **extra) -> dict:
                base = {"name": i.name, "m": i.m, "n": i.n, "k": i.k, "a": i.a_type, "b": i.b_type, "c": i.c_type}
                return {**base, **extra, "op": i.op, "isa": i.mnemonic}

            out = {
                "target": target.name,
                "intrinsics": [record(i, wave_size=i.wave_size) for i in items],
            }
            if target.scaled_intrinsics():
                out["scaled_intrinsics"] = [
                    {**record(i, scale_block=i.scale_block), "codegen": "block-scaled matmuls (MXFP)"}
                    for i in target.scaled_intrinsics()
                ]
            if warpgroup:
                out["warpgroup_intrinsics"] = [
                    {
                        **record(i, family=i.family, wave_size=i.wave_size),
                        "codegen": False,
                        "shared_majors": [m.value for m in i.majors],
                    }
                    for i in warpgroup
                ]
            print(json.dumps(out, indent=1))
        else:
            print(f"{target.name}: {target.description}")
            for i in items:
                print("  " + i.describe())
            if target.scaled_intrinsics():
                print("block-scaled (one E8M0 scale a lane for A and for B; what MXFP matmuls take, not plain ones):")
                for i in target.scaled_intrinsics():
                    print("  " + i.describe())
            if warpgroup:
                print(
                    "warpgroup MMA (128 threads; the warpgroup kernel: the heuristic's choice on sm_90a where it fits, "
                    "or --config intrinsic=NAME; fp8 needs K-major A and B; any N = 8..256 step 8 with --intrinsic):"
                )
                for i in warpgroup:
                    print("  " + i.describe())
        return 0
    if args.intrinsic:
        intr = target.layout_intrinsic(args.intrinsic)
    else:  # --operand alone: the target's first instruction (f16 x f16 -> f32), named in the output
        intr = target.intrinsics()[0]
        if not args.json:
            others = ", ".join(i.name for i in target.intrinsics()[1:])
            print(
                f"{target.name}: --intrinsic not given: {intr.name}, the target's first instruction "
                f"(--intrinsic NAME for another: {others})"
            )
    if intr.family == "wgmma":
        return _layout_warpgroup(args, target, intr)
    operands = [args.operand] if args.operand else ["A", "B", "C"]
    for op in operands:
        if op not in ("A", "B", "C"):
            raise UnsupportedError(f"unknown operand {op!r}; valid choices: A, B, C")
    if args.json:
        out = [_register_layout_json(target, intr, op) for op in operands]
        print(json.dumps(out[0] if len(out) == 1 else out))
        return 0
    print(intr.describe())
    for op in operands:
        lay = intr.operand(op)
        print()
        print(lay.describe())
        print(lay.vgpr_view(TYPE_BITS[intr.element_type(op)], max_lanes=args.lanes))
    return 0


def _register_layout_json(target, intr, op: str) -> dict:
    """`mmaflow layout --json`'s record of one operand held in registers."""
    lay = intr.operand(op)
    return {
        "target": target.name,
        "intrinsic": intr.name,
        "operand": op,
        "rows": lay.rows,
        "cols": lay.cols,
        "lanes": intr.wave_size,
        "elements": lay.to_elements(),
    }


def _layout_warpgroup(args, target, intr) -> int:
    """A warpgroup MMA: A and C as batch-lane-vector layouts over 128 threads, B (and A's
    shared-memory form) as the descriptor-addressed tiles it may be read from."""
    from mmaflow.compiler.target.intrinsics import TYPE_BITS
    from mmaflow.compiler.target.smem_layout import Swizzle

    operands = [args.operand] if args.operand else ["A", "B", "C"]

    def shared(op):
        return [intr.shared_layout(op, major, swizzle) for major in intr.majors for swizzle in Swizzle]

    if args.json:
        out = []
        for op in operands:
            if op == "B":
                out.append(
                    {
                        "target": target.name,
                        "intrinsic": intr.name,
                        "operand": op,
                        "shared_memory": True,
                        "rows": intr.k,
                        "cols": intr.n,
                        "layouts": [
                            {
                                "major": s.major.value,
                                "swizzle": s.swizzle.value,
                                "mn": s.mn,
                                "k": s.k,
                                "element_bits": s.element_bits,
                                "lbo": s.strides()[0],
                                "sbo": s.strides()[1],
                                "descriptor_mode": s.swizzle.descriptor_code,
                                "alignment": s.alignment,
                            }
                            for s in shared(op)
                        ],
                    }
                )
                continue
            out.append(_register_layout_json(target, intr, op))
        print(json.dumps(out[0] if len(out) == 1 else out))
        return 0
    print(intr.describe())
    for op in operands:
        print()
        if op == "B":
            print(
                f"operand B: {intr.k}x{intr.n}, read from shared memory through a matrix descriptor (stored as "
                f"N x K tiles; K-major = imm-trans-b 0). The smallest tile per major order and swizzle mode, "
                f"and its first atom (cells: the logical 16-byte chunk each stored chunk holds):"
            )
            for s in shared(op):
                print("  " + s.describe())
                print("    " + s.atom_view().replace("\n", "\n    "))
            continue
        lay = intr.operand(op)
        if op == "A":
            print("operand A from registers (the RS form; from shared memory it is an M x K tile like B's):")
        print(lay.describe())
        print(lay.vgpr_view(TYPE_BITS[intr.element_type(op)], max_lanes=args.lanes))
    return 0


def _layout_convert(args, target) -> int:
    """--convert C:A: attention's P from the accumulator layout to the next instruction's A,
    for each way of computing S, with the cheaper plan marked (``compiler/target/convert.py``)."""
    from mmaflow.compiler.core.errors import UnsupportedError
    from mmaflow.compiler.target.convert import attention_plans, best, describe, to_json
    from mmaflow.compiler.target.intrinsics import TYPE_BITS

    if args.convert != "C:A":
        raise UnsupportedError(
            f"--convert {args.convert}: only C:A (attention's P, accumulator -> A operand) is planned"
        )
    if args.operand:
        raise UnsupportedError("--operand and --convert do not go together: a conversion involves two operands")
    if args.intrinsic:
        intrinsics = [target.intrinsic(args.intrinsic)]
        if intrinsics[0].family == "wgmma":
            raise UnsupportedError(
                f"{args.intrinsic} is a warpgroup MMA (wgmma): --convert C:A plans conversions "
                f"between warp-level layouts; a wgmma's A comes from shared memory in mmaflow's "
                f"kernel (no register conversion is planned for it yet)"
            )
    else:  # the f16 ones; bf16 twins share their layouts (--intrinsic shows one)
        intrinsics = [i for i in target.intrinsics() if i.a_type == "f16" and i.c_type == "f32"]
    plans = []
    for intr in intrinsics:
        if TYPE_BITS[intr.a_type] != 16 or TYPE_BITS[intr.c_type] != 32:
            raise UnsupportedError(
                f"{intr.name} is {intr.a_type} -> {intr.c_type}; --convert C:A plans a 32-bit "
                f"accumulator into a 16-bit A operand (f16, bf16)"
            )
        conversions = attention_plans(intr, vendor=target.vendor.value, family=target.family.value)
        plans.append((conversions, best(conversions)))
    if args.json:
        print(
            json.dumps(
                {
                    "target": target.name,
                    "convert": "C:A",
                    "plans": [
                        {
                            "intrinsic": cs[0].intrinsic.name,
                            "chosen": chosen.how,
                            "candidates": [to_json(c) for c in cs],
                        }
                        for cs, chosen in plans
                    ],
                }
            )
        )
        return 0
    print(
        f"{target.name}: P = softmax(S) from the accumulator (C) to the A operand of P V (* = chosen; counts per wave)"
    )
    for cs, chosen in plans:
        print()
        print(describe(cs, chosen))
    return 0


def cmd_opt(args) -> int:
    from iree.compiler import ir

    from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module, print_op, str_attr
    from mmaflow.compiler.pipeline.pipeline import STAGE_NAMES, codegen_executable, stages_from
    from mmaflow.compiler.pipeline.runner import print_versions, split_versions

    for s in (args.from_stage, args.to_stage):
        if s is not None and s not in STAGE_NAMES:
            raise InputError(f"unknown stage {s!r}; stages: {', '.join(STAGE_NAMES)}")
    text = _read_input(args.input)
    chunks = text.split("\n// -----\n") if args.split_input_file else [text]
    outs = []
    for i, chunk in enumerate(chunks):
        ctx = new_context()
        try:
            chunk, version_texts = split_versions(chunk)  # a dispatch after stage `version`: its copies
            module = parse_module(chunk, ctx, source=args.input)
            versions = [parse_module(t, ctx, source=args.input) for t in version_texts]
            exes = ops_named(module.operation, "hal.executable")
            if len(exes) != 1:
                raise InputError(f"expected one hal.executable, found {len(exes)}", location=args.input)
            whole = module if len([o for o in module.body.operations]) > 1 else None
            if whole is not None:  # a whole module: run on its executable, print the whole module
                module = ir.Module.create(exes[0].location)
                exes[0].clone(ir.InsertionPoint(module.body))
            exe_name = str_attr(exes[0], "sym_name")
            res = codegen_executable(
                module, exe_name, _options(args, args.target), stages_from(args.from_stage, args.to_stage), versions
            )
            for line in res.log:
                print(line, file=sys.stderr)
            last = list(res.run.timings)[-1] if res.run.timings else None
            header = "".join(f"// {last}: {line}\n" for line in res.run.headers.get(last, []))
            if whole is not None:
                (new_exe,) = ops_named(module.operation, "hal.executable")
                ir.InsertionPoint(exes[0]).insert(new_exe.detach_from_parent())
                exes[0].erase()
                module = whole
            outs.append(header + print_op(module) + print_versions(res.versions))
        except MmaflowError as e:
            if not args.split_input_file:
                raise
            print(f"mmaflow: error: {e}", file=sys.stderr)
            outs.append(f"// error: {e}")
    print("\n// -----\n".join(outs))
    return 0


def cmd_report(args) -> int:
    from mmaflow.compiler.report import report_command

    if args.html and args.json:
        raise InputError("--html and --json: choose one")
    if args.suite:
        from mmaflow.compiler.report import survey_command

        if args.input or args.html or args.baseline:
            raise InputError("--suite reports a suite's rows: no input module, --html or --baseline with it")
        return survey_command(args, _options(args, args.target.split(",")[0]))
    if args.input is None:
        raise InputError("mmaflow report needs an input module or --suite NAME")
    if args.rows or args.check or args.dtype != "f16,bf16":
        raise InputError("--rows, --dtype and --check go with --suite")
    _check_output(args.html, "--html", ".html")
    return report_command(args, _read_input(args.input), _options(args, args.target))


def cmd_run(args) -> int:
    from mmaflow.runtime.cli import run_command

    return run_command(args, _read_input(args.input), _options(args, args.target), source_name=args.input)


def cmd_verify(args) -> int:
    from mmaflow.compiler.driver.verify_file import verify_command

    return verify_command(args, _read_input(args.source))


def cmd_bench(args) -> int:
    from mmaflow.runtime.bench import bench_command

    return bench_command(args)


def cmd_tune(args) -> int:
    """`mmaflow tune`: prepare candidates, time them (here, or on a GPU machine) and write the table."""
    import tempfile

    from mmaflow.runtime import tune

    command = "mmaflow " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "mmaflow tune"
    if args.results:
        if args.suite or args.prepare_only:
            raise InputError("--results writes the table from a finished run: no --suite or --prepare-only with it")
        try:
            for path in tune.write_tables([Path(r) for r in args.results], args.command or command):
                print(f"mmaflow tune: wrote {path}", file=sys.stderr)
        except (OSError, ValueError, KeyError) as e:
            raise InputError(f"--results {' '.join(args.results)}: {e}") from None
        return 0
    if not args.suite:
        raise InputError(
            "mmaflow tune needs --suite NAME (with --prepare-only DIR on a machine without a GPU) or --results FILE..."
        )
    targets = [t for t in args.target.split(",") if t]
    dtypes = [d for d in args.dtype.split(",") if d]
    from mmaflow.compiler.target.targets import get_target

    if any(get_target(t).is_amd for t in targets):  # no AMD GPU to time on: the static choice
        if args.prepare_only:
            raise InputError("AMD targets are chosen statically, here: nothing to prepare for a GPU machine")
        res = tune.static(targets, args.suite, dtypes, args.rows, Path(args.out))
        print(f"mmaflow tune: {Path(args.out) / tune.STATIC_RESULTS} ({res['static_s']} s)", file=sys.stderr)
        for path in tune.write_static(res, command):
            print(f"mmaflow tune: wrote {path} (static choice, unmeasured)", file=sys.stderr)
        return 0
    if args.prepare_only:
        m = tune.prepare(targets, args.suite, dtypes, Path(args.prepare_only), args.rows)
        print(
            f"mmaflow tune: {m['builds']} builds of {len(m['rows'])} rows in {args.prepare_only} "
            f"({m['prepare_s']} s); on the GPU machine: python -m mmaflow.runtime.tune --from-dir DIR --out OUT",
            file=sys.stderr,
        )
        return 0
    from mmaflow.compiler.core.errors import DeviceError
    from mmaflow.runtime.iree_runner import device_present

    ok, why = device_present("cuda")  # before any build: the timing needs the GPU
    if not ok:
        raise DeviceError(
            f"mmaflow tune times kernels on a GPU: {why}",
            hint="--prepare-only DIR here, then on the GPU machine python -m mmaflow.runtime.tune --from-dir DIR "
            "--out OUT",
        )
    with tempfile.TemporaryDirectory(prefix="mmaflow-tune-") as tmp:
        tune.prepare(targets, args.suite, dtypes, Path(tmp) / "builds", args.rows)
        tune.run(Path(tmp) / "builds", Path(args.out))
    for path in tune.write_tables(Path(args.out) / tune.RESULTS, command):
        print(f"mmaflow tune: wrote {path}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------
def _count(low: int):
    """An argparse type: an integer >= low (argparse names the option in its error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value < 2**63:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def _version() -> str:
    """The installed package's version (pyproject.toml's)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mmaflow")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    from mmaflow.compiler.target.targets import TARGETS

    target_help = "one of " + ", ".join(TARGETS)
    p = argparse.ArgumentParser(
        prog="mmaflow",
        description="Matrix-core codegen for IREE matmul dispatches.",
        epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--debug", action="store_true", help="show Python tracebacks")
    p.add_argument("--version", action="version", version=f"mmaflow {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    def config_arg(sp):
        sp.add_argument(
            "--config",
            action="append",
            metavar="KEY=VALUE",
            help="override the heuristic (intrinsic, wave_size, tile=MxNxK, waves=MxN, lds_pad, ...)",
        )

    c = sub.add_parser("compile", help="compile a module to a .vmfb with mmaflow's matmul codegen")
    c.add_argument("input", help="MLIR module (a file, or - for stdin)")
    c.add_argument("--target", required=True, help=target_help)
    c.add_argument("-o", "--output", help="the .vmfb to write")
    c.add_argument(
        "--dump-dir",
        metavar="DIR",
        help="write every stage's IR (or --dump-after's), IREE's intermediates and the ISA into DIR instead of stdout",
    )
    c.add_argument(
        "--dump-after",
        metavar="STAGE",
        help="print the IR after STAGE (front, select, configure, "
        "normalize, script, distribute, barriers, hand-back, isa, all)",
    )
    c.add_argument("--iree-flag", action="append", metavar="FLAG", help="extra iree-compile flag")
    config_arg(c)
    c.set_defaults(fn=cmd_compile)

    f = sub.add_parser("flags", help="print the iree-compile flags that plug mmaflow in")
    f.add_argument("--target", required=True, help=target_help)
    f.add_argument("--rsp", metavar="FILE", help="where to write the response file when one is needed")
    config_arg(f)
    f.set_defaults(fn=cmd_flags)

    lay = sub.add_parser("layout", help="show the batch-lane-vector layout of a matrix instruction")
    lay.add_argument("target", help=target_help)
    lay.add_argument(
        "--intrinsic",
        metavar="NAME",
        help="one instruction (without it: list the target's; with "
        "--operand, that operand of the target's first instruction)",
    )
    lay.add_argument(
        "--operand",
        choices=["A", "B", "C"],
        help="only this operand's layout (without --intrinsic: "
        "of the target's first instruction, f16 x f16 -> f32, named on the first line)",
    )
    lay.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per operand: every element's lane, vector index, row and column",
    )
    lay.add_argument("--lanes", type=_count(1), help="show only the first N lanes in the VGPR view")
    lay.add_argument(
        "--convert",
        metavar="C:A",
        help="plan attention's P conversion from the accumulator (C) "
        "layout to the A operand of the next instruction: in-lane, cross-lane permutes or an LDS "
        "round trip, with costs (every f16 instruction, or --intrinsic's)",
    )
    lay.set_defaults(fn=cmd_layout)

    o = sub.add_parser("opt", help="run pipeline stages on hal.executable IR (one stage's input -> output)")
    o.add_argument("input", help="hal.executable IR (IREE's executable-sources, or a stage's output), - for stdin")
    o.add_argument("--target", help="retarget to this target (default: the executable's variant)")
    o.add_argument("--from", dest="from_stage", metavar="STAGE", help="first stage to run (default: select)")
    o.add_argument("--to", dest="to_stage", metavar="STAGE", help="last stage to run (default: hand-back)")
    o.add_argument(
        "--split-input-file",
        action="store_true",
        help="run each chunk between '// -----' lines on its own; errors are printed in place",
    )
    config_arg(o)
    o.set_defaults(fn=cmd_opt)

    r = sub.add_parser("report", help="register, LDS and instruction report of the compiled kernels")
    r.add_argument("input", nargs="?", help="MLIR module (or --suite NAME)")
    r.add_argument("--target", required=True, help=target_help + " (--suite: comma-separated)")
    r.add_argument(
        "--suite",
        metavar="NAME",
        help="instead of a module: every GEMM of a suite (runtime/suites.py), one line per row and target: "
        "the kernel, registers, spills, LDS, occupancy and the K loop's global loads by width; exit 1 "
        "if a row is not built, spills or fails its check",
    )
    r.add_argument("--rows", metavar="REGEX", help="with --suite: only the rows whose name matches")
    r.add_argument("--dtype", default="f16,bf16", help="with --suite: f16, bf16 or both (default both)")
    r.add_argument(
        "--check",
        type=_count(0),
        default=0,
        metavar="N",
        help="with --suite: also run N sampled workgroups of each kernel on the lane executor against numpy",
    )
    r.add_argument("--json", action="store_true", help="the report as JSON")
    r.add_argument(
        "--html",
        metavar="OUT.html",
        help="write a self-contained HTML page instead: config and why, "
        "register layouts, LDS banks and conflicts, resources, instruction mix, the K loop, each beside "
        "IREE's default",
    )
    r.add_argument("--baseline", choices=["iree"], help="also report IREE's own pipeline on the same input")
    config_arg(r)
    r.set_defaults(fn=cmd_report)

    ru = sub.add_parser("run", help="compile, run on a device or the lane executor, check against numpy")
    ru.add_argument("input", help="MLIR module: a single matmul, or any module with --device sim")
    ru.add_argument("--target", required=True, help=target_help)
    ru.add_argument(
        "--device",
        default="auto",
        choices=["auto", "hip", "cuda", "sim", "local-task"],
        help="auto: the target's GPU if IREE sees one, else the lane executor (sim); local-task: IREE's "
        "own CPU pipeline computes the result (a reference, not mmaflow's kernel)",
    )
    ru.add_argument("--seed", type=_count(0), default=0, help="seed of the random inputs (a non-negative integer)")
    ru.add_argument(
        "--dims", metavar="D=SIZE,...", help="run-time sizes of the module's dynamic dimensions, e.g. m=300,n=200,k=100"
    )
    ru.add_argument(
        "--sample",
        type=_count(0),
        default=0,
        metavar="N",
        help="on the lane executor, run N workgroups of each dispatch (the grid's corners and random "
        "ones) and check the tiles they own, instead of the whole grid",
    )
    ru.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    config_arg(ru)
    ru.set_defaults(fn=cmd_run)

    v = sub.add_parser(
        "verify",
        help="check that a .vmfb built with iree-compile $(mmaflow flags ...) holds mmaflow's verified kernels",
    )
    v.add_argument("vmfb", help="the .vmfb to check")
    v.add_argument("--source", required=True, help="the MLIR it was built from")
    v.add_argument("--target", required=True, help=target_help)
    v.add_argument(
        "--iree-flag",
        action="append",
        metavar="FLAG",
        help="an iree-compile flag the .vmfb was built with (besides mmaflow flags' own)",
    )
    v.set_defaults(fn=cmd_verify)

    b = sub.add_parser("bench", help="time mmaflow vs IREE's default pipeline (and torch) on a device")
    b.add_argument("--target", help="mmaflow target (a comma-separated list with --compile-time or --attention)")
    b.add_argument(
        "--sizes",
        help="square matmul sizes, comma-separated (default 1024,2048,4096); with "
        "--attention the sequence lengths (default 2048)",
    )
    b.add_argument(
        "--dtype",
        default="f16",
        help="input dtype (f16, bf16, i8, ...); with --attention f16 and/or bf16, comma-separated",
    )
    b.add_argument("--device", default="auto", help="auto, hip, cuda or sim")
    b.add_argument("--out", default="bench-results", metavar="DIR", help="where results (JSON, logs) go")
    b.add_argument("--repeat", type=_count(1), help="timed repetitions (default: 20 calls on a GPU, 5 compiles)")
    b.add_argument("--prepare-only", metavar="DIR", help="only compile the modules (and manifest) into DIR")
    b.add_argument(
        "--kernel-time",
        action="store_true",
        help="also kernel-only time (Nsight Compute's gpu__time_duration, median of 5 calls) of every "
        "module and torch.matmul (torch SDPA), beside the synchronous call time (CUDA; ncu on PATH)",
    )
    b.add_argument(
        "--checks",
        action="store_true",
        help="instead of timing: every dtype pair and matmul variant (transposed, batch, unaligned, "
        "epilogues, dynamic), checked against numpy",
    )
    b.add_argument(
        "--variants",
        action="store_true",
        help="time the matmul variants at 4096-class sizes (static, unaligned, B^T, fused epilogue, "
        "dynamic), each checked against numpy",
    )
    b.add_argument(
        "--models",
        action="store_true",
        help="the real-model corpus (e2e_tests/models): mmaflow sm_80 and sm_90a builds through the stock "
        "route, and IREE's default, for the GPU machine (with --prepare-only)",
    )
    b.add_argument(
        "--attention",
        action="store_true",
        help="attention as torch's SDPA reaches IREE (batch 2, 16 heads, --sizes sequence lengths, "
        "--head-dims, scale 1/sqrt(head dim)): mmaflow's flash-attention kernel for every --target "
        "(a comma-separated list), IREE's default and torch SDPA, each checked against float64",
    )
    b.add_argument(
        "--weight-only",
        action="store_true",
        help="int4 weight-only decode (M = --sizes, default 1,16,32; N x K 4096x4096, 14336x4096, 128256x4096; "
        "groups of 128, f16 scale and zero point): mmaflow's weight-only kernel, IREE's default, mmaflow's "
        "f16-weight decode, torch F.linear and "
        "torch's int4 kernel, each checked against float64",
    )
    b.add_argument(
        "--suite",
        metavar="NAME",
        help="the GEMMs of real models (runtime/suites.py: llama3-8b, llama3-70b-tp8, mistral-7b, gpt2, "
        "tinyllama-1.1b, bert-base, vit-b16, decode, prefill, all, smoke) with mmaflow, IREE's default and torch; "
        "--dtype f16,bf16",
    )
    b.add_argument(
        "--rows",
        metavar="REGEX",
        help="with --suite: only the rows whose name matches (e.g. 'decode.* (1|16)x\\d+x\\d+ f16 B:nk$')",
    )
    b.add_argument("--head-dims", metavar="D,..", help="with --attention: head dims, comma-separated (default 64,128)")
    b.add_argument(
        "--fa3-shapes",
        action="store_true",
        help="with --attention: the FlashAttention-3 paper's shapes, batch x seq = 16k tokens and heads x head dim "
        "= 2048 (--sizes: the sequence lengths)",
    )
    b.add_argument(
        "--causal",
        action="store_true",
        help="with --attention: causal attention, as iree-turbine exports scaled_dot_product_attention(is_causal=True) "
        "(IREE writes a mask in a dispatch of its own; mmaflow proves it causal) against torch's is_causal=True",
    )
    b.add_argument(
        "--kv-heads",
        type=int,
        metavar="N",
        help="with --attention: K and V of N heads that the query heads share in groups (GQA, torch's "
        "enable_gqa=True, in the torch dialect as iree-turbine exports it)",
    )
    b.add_argument(
        "--decode",
        metavar="B,..",
        help="with --attention: decode attention instead, a decoder step against a KV cache of a run-time length "
        "(one query per sequence, 32 query heads sharing 8 KV heads as Llama-3-8B's) at these batch sizes "
        "(--sizes: the KV lengths, default 4096,32768)",
    )
    b.add_argument(
        "--v-head-dim-outer",
        action="store_true",
        help="with --decode: V stored (batch, KV heads, head dim, keys), as IREE lays out the cache it broadcasts "
        "for a decoder step exported by iree-turbine (torch reads its own (batch, KV heads, keys, head dim))",
    )
    b.add_argument(
        "--compile-time",
        nargs="+",
        metavar="MODULE",
        help="compile time of plain iree-compile, the stock route and mmaflow compile on these modules, "
        "for every --target (median of --repeat runs)",
    )
    config_arg(b)
    b.set_defaults(fn=cmd_bench)

    tu = sub.add_parser(
        "tune",
        help="time candidate configs of a suite's GEMMs kernel-only on a GPU and write the fastest per shape "
        "class into the target's tuning table (compiler/target/tuned/); AMD targets: the lowest static estimate "
        "(final ISA and lane-executor counters, runtime/static_cost.py), unmeasured",
    )
    tu.add_argument("--suite", metavar="NAME", help="the shapes (runtime/suites.py; its static rows)")
    tu.add_argument("--rows", metavar="REGEX", help="only the suite rows whose name matches")
    tu.add_argument(
        "--target", default="sm_90a,sm_80", help="comma-separated targets, NVIDIA or AMD (default sm_90a,sm_80)"
    )
    tu.add_argument("--dtype", default="f16", help="f16, bf16 or both, comma-separated (default f16)")
    tu.add_argument("--prepare-only", metavar="DIR", help="build the candidates into DIR for the GPU machine")
    tu.add_argument("--out", default="bench-results/tune", metavar="DIR", help="where the run's results go")
    tu.add_argument(
        "--results",
        nargs="+",
        metavar="FILE",
        help="write the tables from runs' tune_results.json (python -m mmaflow.runtime.tune --from-dir DIR "
        "--out OUT); runs whose shapes share a class go together",
    )
    tu.add_argument("--command", help=argparse.SUPPRESS)  # the command a table records (the default: this one)
    tu.set_defaults(fn=cmd_tune)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except MmaflowError as e:
        if args.debug:
            raise
        print(f"mmaflow: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except BrokenPipeError:  # `mmaflow ... | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return Exit.BROKEN_PIPE
    except Exception as e:  # a bug in mmaflow: say so, briefly
        if args.debug:
            raise
        print(
            f"mmaflow: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", file=sys.stderr
        )
        return Exit.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
