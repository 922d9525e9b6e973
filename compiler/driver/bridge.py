"""The IREE bridge: compile a whole module with mmaflow's codegen on its matmul dispatches.

In-process, through IREE's compiler API (``iree.compiler.api``, phases set through ctypes):

    front   invocation 1: parse, run to the end of global-optimization; quantized weights unpacked
            by shifts and masks given IREE's dequant-matmul form (``packed_weights.py``); then on to
            the end of the executable-sources phase; the host program
            read for GQA broadcasts an attention can read through (``gqa_broadcasts.py``: the
            attention rewritten, the broadcasts removed) and attention masks that are provably
            causal (``causal_masks.py``)
    codegen every hal.executable goes through ``pipeline.codegen_executable_text`` -- the very
            function the `mmaflow-codegen` hook tool runs inside iree-compile -- as text, the
            way IREE hands executables to the tool, so both routes produce the same executable
    lower   invocation 2: resume from executable-sources, produce the .vmfb, dump the ISA
    verify  every dispatch we took must be ours in the ISA (``verify.check_kernel``)

We enter at executable-sources (not executable-configurations) because that is where the
preprocess hook sees executables: one input form for both routes. IREE keeps a function's own
translation_info during configuration, so our no_pipeline handback survives to lowering.
"""

from __future__ import annotations

import ctypes
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from iree.compiler import ir
from iree.compiler.api import ctypes_dl as api

from mmaflow.compiler.core.errors import CodegenError, InputError, ToolchainError, VerificationError
from mmaflow.compiler.core.mlir import file_location, new_context, ops_named, parse_module, print_op, str_attr, walk
from mmaflow.compiler.driver import causal_masks, gqa_broadcasts, packed_weights
from mmaflow.compiler.driver.codegen_client import server_enabled, start_server
from mmaflow.compiler.driver.codegen_tool import codegen_many
from mmaflow.compiler.driver.vmfb import export_shared_bytes
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.pipeline.results import CodegenOptions, ExecutableResult
from mmaflow.compiler.target.isa import (
    IsaReport,
    extract_kernel,
    join_kernels,
    parse_isa,
    split_kernels,
)
from mmaflow.compiler.target.targets import Target, get_target
from mmaflow.compiler.verify import check_kernel

_DIAG_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p)
_SEVERITY = {0: "note", 1: "warning", 2: "error", 3: "remark"}


class _Invocation:
    """An IREE invocation whose diagnostics are collected instead of printed."""

    def __init__(self, session: api.Session):
        self.inv = session.invocation()
        self.diagnostics: list[str] = []
        lib = api._dylib
        lib.ireeCompilerInvocationEnableCallbackDiagnostics.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            _DIAG_CB,
            ctypes.c_void_p,
        ]
        lib.ireeCompilerInvocationSetCompileToPhase.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.ireeCompilerInvocationSetCompileFromPhase.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

        def on_diag(severity, message, size, _):
            self.diagnostics.append(f"{_SEVERITY.get(severity, '?')}: {message[:size].decode(errors='replace')}")

        self._cb = _DIAG_CB(on_diag)  # keep alive
        lib.ireeCompilerInvocationEnableCallbackDiagnostics(self.inv._inv_p, 0, self._cb, None)

    def phases(self, *, to: str | None = None, start: str | None = None) -> None:
        lib = api._dylib
        if to:
            lib.ireeCompilerInvocationSetCompileToPhase(self.inv._inv_p, to.encode())
        if start:
            lib.ireeCompilerInvocationSetCompileFromPhase(self.inv._inv_p, start.encode())

    def fail(self, what: str) -> ToolchainError:
        errors = [d for d in self.diagnostics if d.startswith("error")] or self.diagnostics
        return ToolchainError(f"IREE failed to {what}:\n  " + "\n  ".join(errors[:10] or ["(no diagnostics)"]))


def run_phases(
    session: api.Session, source, *, to: str | None = None, start: str | None = None, name: str = "input.mlir"
):
    """One IREE invocation of ``session``: ``source`` (MLIR text, parsed as ``name``; or a module,
    imported) from after phase ``start`` to the end of phase ``to``; the module it leaves.
    InputError where the text does not parse, ToolchainError where a phase fails."""
    inv = _Invocation(session)
    if isinstance(source, str):
        if not inv.inv.parse_source(api.Source.wrap_buffer(session, source.encode(), buffer_name=name)):
            raise InputError(f"IREE could not parse {name}:\n  " + "\n  ".join(inv.diagnostics[:5]))
    else:
        inv.inv.import_module(source)
    inv.phases(start=start, to=to)
    if not inv.inv.execute():
        raise inv.fail(f"compile {name} to {to}" if to else f"compile {name}")
    return inv.inv.export_module()


def lower_to_vmfb(session: api.Session, module, *, start: str) -> bytes:
    """The .vmfb of ``module`` (at the end of phase ``start``), built by ``session``."""
    back = _Invocation(session)
    back.inv.import_module(module)
    back.phases(start=start)
    if not back.inv.execute():
        raise back.fail("lower the module to a .vmfb")
    out = api.Output.open_membuffer()
    back.inv.output_vm_bytecode(out)
    return bytes(out.map_memory())


@dataclass
class CompileResult:
    vmfb: bytes
    executables: list[ExecutableResult]
    reports: dict[str, IsaReport] = field(default_factory=dict)
    isa_text: dict[str, str] = field(default_factory=dict)
    expect: dict[str, dict] = field(default_factory=dict)  # what verify checked per executable
    front_text: str = ""
    log: list[str] = field(default_factory=list)
    launch_shared: dict[str, int] = field(default_factory=dict)  # NVIDIA: kernel -> shared bytes it launches with

    @property
    def taken(self) -> list[ExecutableResult]:
        return [e for e in self.executables if e.taken]


_DUMP_FLAGS = (
    "--iree-hal-dump-executable-files-to=",
    "--iree-hal-dump-executable-intermediates-to=",
    "--iree-hal-dump-executable-binaries-to=",
)


def iree_flags(
    target: Target, dump_dir: Path, *, full_dumps: bool, extra: list[str] = ()
) -> tuple[list[str], list[Path]]:
    """IREE flags for the target plus the dumps verification reads, and the directories the ISA
    will be in.

    Intermediates (.ll, .rocmasm, .ptx) do not change the .vmfb; the full dumps
    (--iree-hal-dump-executable-files-to) point executable source locations at the dumped files,
    so they are used only when the user asks for a dump directory. A user's own dump flags (in
    ``extra``) are honoured: mmaflow adds only the dumps they leave out and reads the ISA from
    wherever IREE puts it."""
    user = {flag: Path(x.split("=", 1)[1]) for x in extra for flag in _DUMP_FLAGS if x.startswith(flag)}
    if _DUMP_FLAGS[0] in user:
        return target.iree_flags(), [user[_DUMP_FLAGS[0]]]
    if full_dumps:
        return target.iree_flags() + [f"{_DUMP_FLAGS[0]}{dump_dir}"], [dump_dir]
    # PTX counts as a binary for the CUDA target, .rocmasm as an intermediate for ROCm.
    flags = [f"{flag}{dump_dir}" for flag in _DUMP_FLAGS[1:] if flag not in user]
    return target.iree_flags() + flags, [dump_dir] + [user[f] for f in _DUMP_FLAGS[1:] if f in user]


def _prepare(source: str, target_name: str, options: CodegenOptions | None, source_name: str):
    """The target, the options with it set, and a clear error for malformed input."""
    target = get_target(target_name)
    options = replace(options or CodegenOptions(), target=target.name)
    _check_zero_sized(parse_module(source, new_context(), source=source_name), source_name)
    return target, options


def _check_zero_sized(module: ir.Module, source_name: str) -> None:
    """A linalg op on a zero-sized tensor (e.g. K = 0) stops IREE 3.13 with a division by zero
    (SIGFPE in its dispatch formation), which would kill this process: refuse it here."""
    with module.context:
        for op in walk(module.operation):
            if not op.name.startswith("linalg."):
                continue
            for v in list(op.operands) + list(op.results):
                try:
                    t = ir.RankedTensorType(v.type)
                except ValueError:
                    continue
                if any(not t.is_dynamic_dim(i) and t.shape[i] == 0 for i in range(t.rank)):
                    at = file_location(op.location)
                    where = f"{source_name}:{at.start_line}:{at.start_col}" if at is not None else source_name
                    raise InputError(
                        f"{where}: {op.name} has a zero-sized operand ({t}); IREE 3.13 "
                        "cannot compile zero-sized contractions (it stops on a division by zero)",
                        hint="an empty contraction (K = 0) is its accumulator (zeros): leave it out "
                        "of the module; mmaflow.runtime.matmul returns zeros for K = 0",
                    )


def compile_module(
    source: str,
    target_name: str,
    *,
    options: CodegenOptions | None = None,
    source_name: str = "input.mlir",
    dump_dir: Path | None = None,
    extra_flags: list[str] | None = None,
    require_matmul: bool = True,
    verify: bool = True,
) -> CompileResult:
    """Compile ``source`` for ``target_name`` with mmaflow's codegen on its matmul dispatches."""
    target, options = _prepare(source, target_name, options, source_name)
    tmp = None
    if dump_dir is None:
        tmp = Path(tempfile.mkdtemp(prefix="mmaflow-"))
        isa_dir = tmp
    else:
        isa_dir = dump_dir / "iree"
    try:
        return _compile(
            source,
            target,
            options,
            source_name,
            isa_dir,
            extra_flags or [],
            require_matmul,
            verify,
            full_dumps=dump_dir is not None,
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _front_and_codegen(
    session: api.Session,
    source: str,
    source_name: str,
    options: CodegenOptions,
    result: "CompileResult",
    require_matmul: bool,
):
    """Invocation 1 to executable-sources, then every executable through the per-executable
    pipeline (as text, like the hook tool). Returns the module, with executables replaced."""
    if server_enabled():
        start_server()  # if it is not running: its imports overlap with IREE's front phase
    module = run_phases(session, source, to="global-optimization", name=source_name)
    # -- quantized weights unpacked by shifts and masks read packed, their matmuls per group
    result.log += packed_weights.fold(
        module, registry.direct_family("weight_only").max_rows(get_target(options.target))
    )
    module = run_phases(session, module, start="global-optimization", to="executable-sources", name=source_name)
    # -- the host program: GQA broadcasts read through; attention masks proven causal, stamped on the op
    # (their writers removed below)
    result.log += gqa_broadcasts.fold(module)
    proof = causal_masks.prove(module)
    result.log += proof.log
    if options.dump_after == "front":
        result.front_text = print_op(module)
    # -- codegen: every executable as text, through the hook tool's server (in parallel)
    exes = ops_named(module, "hal.executable")
    items = [(str_attr(exe, "sym_name"), print_op(exe, debug_info=True)) for exe in exes]
    for exe, res in zip(exes, codegen_many(items, options)):
        result.executables.append(res)
        result.log += res.log
        new = parse_module(res.text, session.context, source=res.name)
        (new_exe,) = ops_named(new.operation, "hal.executable")
        _keep_resources(exe, new_exe, res.name)
        ir.InsertionPoint(exe).insert(new_exe.detach_from_parent())
        exe.erase()
    # -- a proven mask's writer goes where only attention mmaflow took (causal: the mask not read) reads it
    causal = {e.name for e in result.taken if e.facts.is_attention and e.facts.problem.attention.causal}
    result.log += proof.remove(causal)
    if require_matmul and not result.taken:
        reasons = "; ".join(line.removeprefix("mmaflow: left  ") for e in result.executables for line in e.log[:1])
        raise InputError(
            f"no matmul-like contraction that mmaflow compiles in {source_name} ({reasons})",
            hint="mmaflow compiles linalg.matmul / batch_matmul (or equivalent linalg.generic) dispatches",
        )
    return module


def _resource_constants(op) -> list:
    return [
        o for o in walk(op) if o.name == "arith.constant" and str(o.attributes["value"]).startswith("dense_resource<")
    ]


def _keep_resources(old, new, name: str) -> None:
    """An executable's text carries no dense_resource data (the module's resource section is not
    printed with it), so its re-parsed constants would name blobs that do not exist (IREE's LLVM
    translation: 'resource does not exist'). They get the original constants' attributes back, in
    order; a handed-back executable that holds such constants but not the original's is refused."""
    before, after = _resource_constants(old), _resource_constants(new)
    if not after:
        return
    if len(before) != len(after):
        raise CodegenError(
            f"the handed-back executable holds {len(after)} dense_resource constants, the original "
            f"{len(before)}: their data cannot be carried over",
            location=name,
        )
    for a, b in zip(before, after):
        b.attributes["value"] = a.attributes["value"]


def codegen_module(
    source: str,
    target_name: str,
    *,
    options: CodegenOptions | None = None,
    source_name: str = "input.mlir",
    require_matmul: bool = True,
    extra_flags: list[str] | None = None,
) -> CompileResult:
    """Front and per-executable codegen only (no IREE lowering): the handed-back executables,
    e.g. for the lane executor. ``extra_flags``: iree-compile flags for the front (e.g.
    ``--iree-input-demote-f64-to-f32=false``, which keeps an f64 matmul f64)."""
    target, options = _prepare(source, target_name, options, source_name)
    session = api.Session()
    session.set_flags(*(target.iree_flags() + list(extra_flags or [])))
    result = CompileResult(b"", [])
    _front_and_codegen(session, source, source_name, options, result, require_matmul)
    return result


def _compile(
    source, target, options, source_name, isa_dir, extra_flags, require_matmul, verify, *, full_dumps: bool
) -> CompileResult:
    session = api.Session()
    flags, isa_dirs = iree_flags(target, isa_dir, full_dumps=full_dumps, extra=extra_flags)
    session.set_flags(*(flags + extra_flags))
    result = CompileResult(b"", [])
    module = _front_and_codegen(session, source, source_name, options, result, require_matmul)
    # -- lower
    result.vmfb = lower_to_vmfb(session, module, start="executable-sources")
    # -- verify
    if target.vendor.isa == "ptx":
        try:
            result.launch_shared = export_shared_bytes(result.vmfb)
        except InputError as e:  # (IREE's own output)
            raise ToolchainError(f"reading the CUDA executables IREE built: {e}") from None
        check_launch_shared(result.launch_shared, result.taken, target)
    for exe in result.taken:
        text, report = read_isa(isa_dirs, exe, target)
        result.isa_text[exe.name] = text
        result.reports[exe.name] = report
        result.expect[exe.name] = exe.facts.expect
        if verify:
            check_kernel(report, text, exe.name, exe.facts)
        if exe.facts.config is None:
            continue  # (a direct family's kernel: its check refuses spills, there is no config to trade them for)
        own = split_kernels(text)[1]
        for rep, cfg, what in [(report, exe.facts.config, exe.name)] + [
            (parse_isa(own[v.export], v.export, target), v.config, f"{exe.name} ({v.condition})")
            for v in exe.facts.versions
        ]:
            if rep.vgpr_spills or rep.sgpr_spills:
                result.log.append(
                    f"mmaflow: warning: {what} spills {rep.vgpr_spills} VGPRs and {rep.sgpr_spills} SGPRs to "
                    f"scratch memory (wave tile {cfg.wave_tile_m}x{cfg.wave_tile_n}): it runs correctly but slowly; "
                    f"more waves (--config waves=MxN) or a smaller tile avoid it"
                    + ("" if options.overrides else " (the heuristic's own config: please report it)")
                )
    return result


def launch_shared_of(shared: dict[str, int], kernel: str, target: Target) -> int:
    """The shared memory ``kernel`` launches with, from a .vmfb's CUDA exports (``vmfb.export_shared_bytes``)
    under any of its ``kernel_names``."""
    size = next((shared[n] for n in kernel_names(kernel, target) if n in shared), None)
    if size is None:
        raise VerificationError(f"the .vmfb has no CUDA export for kernel {kernel}")
    return size


def check_launch_shared(shared: dict[str, int], taken: list[ExecutableResult], target: Target) -> None:
    """Every kernel of a taken dispatch launches with shared memory a workgroup may have (IREE gives
    each export of a variant the variant's whole block: a versioned dispatch's kernels together)."""
    for exe in taken:
        for kernel in exe.kernels():
            try:
                size = launch_shared_of(shared, kernel, target)
            except VerificationError as e:
                raise VerificationError(f"{exe.name}: {e}") from None
            if size > target.lds_bytes:
                raise VerificationError(
                    f"{exe.name}: IREE launches its kernel {kernel} with {size} bytes of shared memory "
                    f"(every kernel of the dispatch's together), more than a {target.name} workgroup's "
                    f"{target.lds_bytes}"
                )


def kernel_names(export: str, target: Target) -> list[str]:
    """The names a dispatch's kernel may have in the ISA: the export's symbol, and for PTX the
    symbol as NVPTX legalizes it (characters PTX identifiers do not allow, such as the ``$`` of
    iree-turbine's ``main$async`` entry points, become ``_``)."""
    names = [export]
    if target.vendor.isa == "ptx":
        legal = "".join(c if c.isalnum() or c == "_" else "_" for c in export)
        if legal != export:
            names.append(legal)
    return names


def find_kernel(texts: list[str], kernel: str, target: Target) -> list[str]:
    """Every text of ``kernel`` (under any of its ``kernel_names``) in ``texts``, ISA files that may
    each hold several kernels (``isa.extract_kernel``): one where it is there once."""
    names = kernel_names(kernel, target)
    return [t for text in texts for t in (extract_kernel(text, n, target.vendor.isa) for n in names) if t is not None]


def kernel_isa(isa_dirs, kernel: str, target: Target) -> str:
    """The ISA of one kernel among IREE's dumps in ``isa_dirs`` (a directory or several;
    executables may be linked into one file)."""
    dirs = [isa_dirs] if isinstance(isa_dirs, Path) else list(isa_dirs)
    files = sorted({p for d in dirs for p in d.glob(f"*.{target.vendor.isa_suffix}")})
    found = find_kernel([p.read_text() for p in files], kernel, target)
    if len(found) != 1:
        raise ToolchainError(
            f"expected the ISA of kernel {kernel} once among the .{target.vendor.isa_suffix} dumps "
            f"in {', '.join(map(str, dirs))}, found it {len(found)} times"
        )
    return found[0]


def read_isa(isa_dirs, exe: ExecutableResult, target: Target) -> tuple[str, IsaReport]:
    """The dispatch's ISA (its kernel's, then each version's: ``isa.join_kernels``) and its own
    kernel's report."""
    text = kernel_isa(isa_dirs, exe.kernel, target)
    report = parse_isa(text, exe.kernel, target)
    versions = exe.kernels()[1:]
    if versions:
        text = join_kernels(text, {v: kernel_isa(isa_dirs, v, target) for v in versions}, target.vendor.isa)
    return text, report
