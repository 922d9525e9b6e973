"""The mmaflow pipeline, stage by stage. Read this file first.

Whole module (``driver/bridge.py``):
    front        iree-compile to the executable-sources phase (one hal.executable per dispatch)
    <per executable, below>
    lower        IREE resumes from executable-sources: ROCDL/NVVM -> HSACO/PTX -> .vmfb
    verify       every taken dispatch is ours in the output (ISA mnemonics, barriers, no fallback)

Per executable: ``STAGES`` below, in order (options in and results out are ``pipeline/results.py``).
The same function serves `mmaflow compile` and the `mmaflow-codegen` tool that iree-compile runs
through --iree-hal-preprocess-executables-with. Kernels are reached only through
``kernels/registry.py``: which family takes a dispatch, configures it and emits it.
"""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import InputError
from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module, print_op, str_attr
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.pipeline import barriers, configure, distribute, hand_back, normalize, script, select, version
from mmaflow.compiler.pipeline.results import CodegenOptions, DispatchFacts, ExecutableResult
from mmaflow.compiler.pipeline.runner import Stage, Unit, print_versions, run_stages
from mmaflow.compiler.target.targets import get_target, read_target

__all__ = [
    "CodegenOptions",
    "DispatchFacts",
    "ExecutableResult",
    "STAGES",
    "codegen_executable",
    "codegen_executable_text",
]


def _route(module: ir.Module) -> str:
    """Which stages a dispatch goes through after select: "direct" for a dispatch a direct family
    builds (select tagged it ``mmaflow.attention`` or ``mmaflow.weight_only``), else "script"."""
    func = attrs.dispatch_func(module.operation)
    return "direct" if func is not None and attrs.direct_kind(func) else "script"


def _select(unit: Unit) -> None:
    decisions = select.select(unit.module, unit.options.target)
    unit.log += [d.line() for d in decisions]
    if not any(d.taken for d in decisions):
        unit.stopped = decisions[0].reason if decisions else "no variant"
    unit.route = _route(unit.module)


def _build(unit: Unit) -> None:
    func = _func(unit)
    family = registry.direct_family(attrs.direct_kind(func))
    target = read_target(func)
    kernel, plan = family.lower(func)
    hand_back.install(
        kernel,
        target,
        workgroup_size=plan.workgroup_size,
        subgroup_size=plan.wave_size,
        grid=hand_back.constant_grid(plan.grid),
    )
    unit.log.append(f"mmaflow: config {unit.name}: {plan.describe()}")
    if unit.options.overrides:  # they configure the module's matmul kernels; say that this one is not
        unit.log.append(
            f"mmaflow: note {unit.name}: --config {', '.join(sorted(unit.options.overrides))} "
            f"applies to matmul dispatches; {family.title} has no config"
        )
    unit.dump_header = [plan.describe()]


def _func(unit: Unit) -> ir.Operation:
    return attrs.dispatch_func(unit.module.operation)


def _modules(unit: Unit) -> list[ir.Module]:
    """The unit's module and, for a versioned dispatch, its other versions' copies."""
    return [unit.module, *unit.versions]


def _version(unit: Unit) -> None:
    func = _func(unit)
    why: list[str] = []
    plan = version.plan_version(read_target(func), attrs.read_problem(func), unit.options.overrides, why)
    unit.log += [f"mmaflow: note {unit.name}: not versioned: {w}" for w in why]
    if plan is not None:
        unit.versions = [version.fork(unit.module, plan)]
        unit.dump_header = [plan.describe()]
        if plan.note:
            unit.log.append(f"mmaflow: note {unit.name}: versioned: {plan.note}")


def _configure(unit: Unit) -> None:
    chosen = [
        configure.configure(attrs.dispatch_func(m.operation), unit.options.overrides, unit.options.tuned)
        for m in _modules(unit)
    ]
    cfgs = [c for c, _ in chosen]
    if unit.versions:
        when = attrs.read_version(attrs.dispatch_func(unit.versions[0].operation)).condition
        unit.log.append(
            f"mmaflow: config {unit.name}: versioned on {when}: {cfgs[1].describe()} | else {cfgs[0].describe()}"
        )
    else:
        unit.log.append(f"mmaflow: config {unit.name}: {cfgs[0].describe()}")
    for m, (_, source) in zip(_modules(unit), chosen):
        unit.log.append(f"mmaflow: note {unit.name}: {_prefix(unit, m)}config chosen by {source}")


def _prefix(unit: Unit, module: ir.Module) -> str:
    """A versioned dispatch's log lines say which version they are about."""
    if module is unit.module:
        return "else: " if unit.versions else ""
    return f"{attrs.read_version(attrs.dispatch_func(module.operation)).condition}: "


def _normalize(unit: Unit) -> None:
    for m in _modules(unit):
        for what in normalize.normalize(m, attrs.dispatch_func(m.operation)):
            unit.log.append(f"mmaflow: normalized {unit.name}: {_prefix(unit, m)}{what}")


def _script(unit: Unit) -> None:
    for m in _modules(unit):
        script.run_script(m, attrs.dispatch_func(m.operation))


def _distribute(unit: Unit) -> None:
    header = []
    for m in _modules(unit):
        plan = distribute.distribute(m, attrs.dispatch_func(m.operation))
        lines = plan.describe()
        header += [f"{_prefix(unit, m)}{line}" for line in lines] if unit.versions else lines
        for note in plan.notes:
            unit.log.append(f"mmaflow: note {unit.name}: {_prefix(unit, m)}{note}")
    unit.dump_header = header


def _barriers(unit: Unit) -> None:
    for m in _modules(unit):
        barriers.place_barriers(attrs.dispatch_func(m.operation))


def _hand_back(unit: Unit) -> None:
    for m in _modules(unit):
        hand_back.hand_back(attrs.dispatch_func(m.operation))
    for fast in unit.versions:
        version.merge(unit.module, fast)
        hand_back.retarget(attrs.dispatch_func(unit.module.operation))
    unit.versions = []


# A stage with a route runs only on dispatches of that route (``_route``): a contraction goes select,
# version ... hand-back (the script-based families); a dispatch a direct family builds (attention,
# weight-only matmuls) goes select, build.
STAGES: list[Stage] = [
    Stage(
        "select",
        _select,
        "find the matmul-like contraction, a supported attention or weight-only matmul; tag it, or leave the "
        "dispatch to IREE",
    ),
    Stage(
        "build",
        _build,
        "a direct family (flash attention, weight-only decode): plan its kernel, replace the dispatch by it, hand it "
        "back (constant grid)",
        route="direct",
    ),
    Stage(
        "version",
        _version,
        "dynamic sizes with no promise on a target whose fast kernel needs one, or a dynamic M a family "
        "specialises when small: fork a copy promising (bounding) them, joined at hand-back as an export "
        "whose condition falls back to the other kernel's",
        route="script",
    ),
    Stage(
        "configure",
        _configure,
        "ask the kernel families in order: instruction, tiles, wave grid, LDS padding (heuristic + overrides)",
        route="script",
    ),
    Stage(
        "normalize",
        _normalize,
        "canonical form: unaligned sizes rounded up to whole tiles (types only), "
        "a fused epilogue moved into a scalar function",
        route="script",
    ),
    Stage(
        "script", _script, "transform_scripts/matmul.mlir: tile, promote to LDS, vectorize, bufferize", route="script"
    ),
    Stage(
        "distribute",
        _distribute,
        "the config's family: layouts -> per-lane code (buffer loads, LDS, wmma/mfma/mma.sync/wgmma)",
        route="script",
    ),
    Stage("barriers", _barriers, "place LDS barriers from read/write hazards", route="script"),
    Stage(
        "hand-back", _hand_back, "no_pipeline translation_info, dispatch_config grid, variant target", route="script"
    ),
]
STAGE_NAMES = [s.name for s in STAGES]
# Names --dump-after accepts: the per-executable stages plus the module-level ones.
DUMP_POINTS = ["front"] + STAGE_NAMES + ["isa"]


def stages_from(first: str | None = None, last: str | None = None) -> list[Stage]:
    names = STAGE_NAMES
    i = names.index(first) if first else 0
    j = names.index(last) + 1 if last else len(names)
    return STAGES[i:j]


def codegen_executable(
    module: ir.Module,
    name: str,
    options: CodegenOptions,
    stages: list[Stage] | None = None,
    versions: list[ir.Module] | None = None,
) -> ExecutableResult:
    """Run the per-executable stages on a module that holds one hal.executable (and ``versions``,
    its versions' copies, when resuming after stage `version`: ``runner.split_versions``)."""
    unit = Unit(name, module, options, route=_route(module), versions=list(versions or []))
    run = run_stages(stages or STAGES, unit, dump_after=options.dump_after, dump_dir=options.dump_dir)
    func = attrs.dispatch_func(module.operation)
    taken = unit.stopped is None and func is not None
    if not taken and options.target:
        # A dispatch left to IREE still needs a variant IREE can compile (sm_90a); other devices'
        # variants (IREE's compile-time constant evaluation runs on the host CPU) stay as they are.
        target = get_target(options.target)
        for variant in ops_named(module.operation, "hal.executable.variant"):
            if select.variant_arch(variant)[0] == target.vendor.iree_backend:
                hand_back.retarget_variant(variant, target)
    exports = ops_named(module.operation, "hal.executable.export")
    export = str_attr(exports[0], "sym_name") if exports else name  # (versioned: the host's, ``merge`` puts it first)
    # Printed with locations: IREE keeps them, so both routes (hook tool and in-process) carry the
    # user's source locations rather than the name of a temporary file.
    return ExecutableResult(
        name,
        export,
        print_op(module, debug_info=True) + print_versions(unit.versions),
        taken,
        unit.log,
        run,
        DispatchFacts.of(func) if taken else None,
        versions=list(unit.versions),
    )


def codegen_executable_text(
    text: str, options: CodegenOptions, *, source: str = "<stdin>", ctx: ir.Context | None = None
) -> ExecutableResult:
    """``codegen_executable`` on the executable printed in ``text``, parsed into ``ctx`` (a new
    context by default; the codegen server reuses one per process)."""
    ctx = ctx or new_context()
    module = parse_module(text, ctx, source=source)
    exes = ops_named(module.operation, "hal.executable")
    if len(exes) != 1:
        raise InputError(f"expected one hal.executable, found {len(exes)}", location=source)
    res = codegen_executable(module, str_attr(exes[0], "sym_name"), options)
    res.source = text
    return res
