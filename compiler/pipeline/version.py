"""Stage `version`: one dispatch, two kernels, chosen at run time by the dynamic sizes.

A dynamic problem with no divisibility promise gets the slow kernel: on sm_90a the warpgroup
(wgmma) kernel refuses operand rows that are not whole 16-byte chunks ("A's global rows run along
K, which is dynamic and has no divisibility promise"), and mma.sync loads them 16 bits at a time
without its cp.async ring. Most run-time sizes are multiples of 8 all the same. So, as cuBLAS
picks a kernel per call, the dispatch is versioned (``plan_version``):

    if (K % 8 == 0 && N % 8 == 0) { the fast kernel: the same contraction, those promises known }
    else                          { the kernel built today }

A dynamic M (the batch of a decoder's token step) is versioned on its size instead, where a family
specialises small M (``registry.small_m``: the decode kernel, up to 32 rows):

    if (M <= 32) { the decode kernel, M bounded by 32 }   else { the kernel built today }

except on NVIDIA where the decode kernel, launched with the other kernel's shared memory beside its
own, would run one workgroup a SM while the other kernel's tiles at M <= 32 fill the SMs already
(an LM head: the warpgroup kernel alone is as fast at M 1 and faster at 16, H200).

This stage decides and forks: ``fork`` copies the executable and, in the copy, strengthens the
``util.assume.int`` promises of the promised sizes (``udiv``) and the recorded problem's divisors,
so configure ... barriers see an ordinary promised problem there. The pipeline runs those stages
on both copies (``Unit.versions``); `hand-back` joins them (``merge``) as IREE's export
specialization does (its ``iree-codegen-specialize-exports``): the fast kernel under the export
the host program dispatches, with a ``condition`` region on the workload and ``fallback`` to the
kernel built anyway, which keeps an export of its own (``<name>_else``). The host evaluates the
condition at each dispatch (IREE 3.13 lowers it; a CPU build of this shape selects by it), so
each kernel is a function of its own: its own workgroup size and registers. Not its own shared
memory on NVIDIA: IREE 3.13's NVVM lowering (``ConvertToDynamicSharedMemory``) lays the workgroup
allocations of every kernel of a variant end to end in one dynamic shared-memory block and gives
every export that block's size, so each kernel launches with the sum (``launch_shared_bytes``; a
.vmfb's exports say so: ``vmfb.cuda_exports``). The fast version's facts are recorded on the other
kernel's function as ``mmaflow.versions`` (``attrs.Version``, naming its export); verify checks
each kernel in its own ISA.

Versioned only where the promised problem gets a different kernel and, on NVIDIA, both kernels'
shared memory fits one workgroup's; static problems, promised ones and ``--config`` overrides stay
single.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from iree.compiler import ir
from iree.compiler.dialects import arith, hal

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import CodegenError, MmaflowError
from mmaflow.compiler.core.mlir import defining_op, int_assumptions, ops_named, parent_named, str_attr
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.kernels.registry import resolve
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.limits import resident_by_shared
from mmaflow.compiler.target.targets import Target, Vendor

NAME = "version"


@dataclass(frozen=True)
class VersionPlan:
    """Where the fast kernel runs: every size of ``dims`` a multiple of ``divisor``."""

    dims: tuple  # dynamic dims promised in the fast version ("k", "n", ...)
    divisor: int  # elements: one 16-byte chunk (1: none)
    fast: KernelConfig
    slow: KernelConfig
    at_most: int = 0  # the fast version's bound on each of ``dims`` (0: none)
    note: str = ""  # what versioning costs the other kernel, where it costs something

    def condition(self) -> str:
        if self.at_most:
            return " and ".join(f"{d.upper()} <= {self.at_most}" for d in self.dims)
        return " and ".join(f"{d.upper()} % {self.divisor} == 0" for d in self.dims)

    def describe(self) -> str:
        return f"versioned on {self.condition()}: {self.fast.describe()} | else {self.slow.describe()}"


def promised(problem: Contraction, dims, divisor: int) -> Contraction:
    """``problem`` with the sizes of ``dims`` promised multiples of ``divisor`` as well."""
    return replace(
        problem,
        dynamic=tuple(
            replace(d, divisor=math.lcm(d.divisor, divisor)) if d.dim in dims else d for d in problem.dynamic
        ),
    )


def bounded(problem: Contraction, dims, at_most: int) -> Contraction:
    """``problem`` with the sizes of ``dims`` bounded by ``at_most`` (a version's promise)."""
    return replace(problem, dynamic=tuple(replace(d, at_most=at_most) if d.dim in dims else d for d in problem.dynamic))


def _small_m_version(target: Target, problem: Contraction, why: list) -> VersionPlan | None:
    """M the only dynamic size, and a family that specialises M up to some bound: that family's
    kernel for M within it."""
    limit = registry.small_m(target, problem)
    if not limit or {d.dim for d in problem.dynamic} != {"m"}:
        return None
    when = f"M <= {limit}"
    try:
        slow, _ = resolve(target, problem.estimate(), None)
        fast, _ = resolve(target, bounded(problem, ("m",), limit).estimate(), None)
    except MmaflowError as e:
        why.append(f"no kernel for {when}: {e}")
        return None
    shared = _fits(target, problem, fast, slow, when, why)
    if shared is None:
        return None
    if target.vendor is not Vendor.NVIDIA:
        return VersionPlan(("m",), 1, fast, slow, at_most=limit)
    # Both launch with ``shared``: the decode kernel at one workgroup a SM (always so beside the
    # warpgroup kernel's ring) gains nothing where the other kernel's tiles at the bound fill the SMs.
    tiles = (problem.batch or 1) * math.ceil(limit / slow.tile_m) * math.ceil(problem.n / slow.tile_n)
    if resident_by_shared(shared, target.lds_bytes) == 1 and tiles >= max(1, target.compute_units):
        why.append(
            f"the decode kernel for {when} would run one workgroup a SM (launched with both kernels' {shared} "
            f"bytes of shared memory), and the other kernel's {tiles} tiles at that M fill the "
            f"{target.compute_units} SMs as it is"
        )
        return None
    return VersionPlan(("m",), 1, fast, slow, at_most=limit, note=_cost(target, problem, shared, slow, when))


def _shared(target: Target, problem: Contraction, cfg: KernelConfig) -> int:
    return registry.shared_bytes(target, cfg, target.intrinsic(cfg.intrinsic), problem)


def _cost(target: Target, problem: Contraction, shared: int, slow: KernelConfig, when: str) -> str:
    """What launching beside the version costs the other kernel on NVIDIA (workgroups a SM), or ""."""
    alone = _shared(target, problem, slow)
    together, apart = resident_by_shared(shared, target.lds_bytes), resident_by_shared(alone, target.lds_bytes)
    if target.vendor is not Vendor.NVIDIA or together >= apart:
        return ""
    return (
        f"where {when} does not hold, the other kernel launches with {shared} bytes of shared memory (its own "
        f"{alone}): room for {together} workgroup(s) a SM where it alone has room for {apart}"
    )


def launch_shared_bytes(target: Target, problem: Contraction, *configs: KernelConfig) -> int:
    """The shared memory each kernel of a dispatch holding ``configs`` launches with: on NVIDIA
    their sum (IREE 3.13 gives every export of a variant the variant's whole dynamic shared-memory
    block), on AMD each kernel's own (the largest here)."""
    sizes = [_shared(target, problem, c) for c in configs]
    return sum(sizes) if target.vendor is Vendor.NVIDIA else max(sizes)


def _fits(target: Target, problem: Contraction, fast: KernelConfig, slow: KernelConfig, when: str, why: list):
    """The shared memory both kernels launch with where it fits one workgroup's, else None (the
    reason in ``why``; on AMD each kernel has its own, which fits by itself)."""
    both = launch_shared_bytes(target, problem, fast, slow)
    if both > target.lds_bytes:
        why.append(
            f"the kernel for {when} and the other need {both} bytes of shared memory together, "
            f"more than {target.name}'s {target.lds_bytes} (IREE launches each with the sum)"
        )
        return None
    return both


def plan_version(
    target: Target, problem: Contraction, overrides: dict | None, why: list | None = None
) -> VersionPlan | None:
    """The versioning of ``problem``, or None where it stays one kernel: no warpgroup MMA on the
    target, a static problem, --config overrides, no dynamic row dimension short of whole
    16-byte chunks, or the promises buy the same kernel. Where a
    row dimension lacks the promise but versioning is still declined, the reason goes to ``why``
    (the pipeline logs it as a note)."""
    why = why if why is not None else []
    if overrides or not problem.is_dynamic:
        return None
    small = _small_m_version(target, problem, why)
    if small is not None or not target.warpgroup_mma:
        return small
    bits = max(TYPE_BITS[problem.a_type], TYPE_BITS[problem.b_type])
    divisor = 128 // bits
    # The dims the operands' global rows run along (A: K unless transposed; B: N unless transposed).
    rows = ("m" if problem.a_transposed else "k", "k" if problem.b_transposed else "n")
    dims = tuple(d.dim for d in problem.dynamic if d.dim in rows and d.divisor % divisor)
    dims = tuple(sorted(dims, key="knm".index))
    if not dims:
        return None
    when = " and ".join(f"{d.upper()} % {divisor} == 0" for d in dims)
    try:
        slow, slow_intr = resolve(target, problem.estimate(), None)
        fast, fast_intr = resolve(target, promised(problem, dims, divisor).estimate(), None)
    except MmaflowError as e:  # (configure resolves the problem itself and reports its own errors)
        why.append(f"no kernel for {when}: {e}")
        return None
    if fast_intr.name == slow_intr.name:
        why.append(f"{when} would buy the same kernel ({slow_intr.name})")
        return None
    shared = _fits(target, problem, fast, slow, when, why)
    if shared is None:
        return None
    return VersionPlan(dims, divisor, fast, slow, note=_cost(target, problem, shared, slow, when))


def _strengthen(func: ir.Operation, problem: Contraction, dims, divisor: int) -> None:
    """In ``func``, the ``util.assume.int`` of each workload value of ``dims`` promises ``udiv``
    ``divisor`` too (every call site); a value with no assume gets one."""
    ordinals = {o for d in problem.dynamic if d.dim in dims for o in d.ordinals}
    for op in ops_named(func, "iree_tensor_ext.dispatch.workload.ordinal"):
        if ir.IntegerAttr(op.attributes["ordinal"]).value not in ordinals:
            continue
        src = op.operands[0]
        assume = defining_op(src)
        with func.context, op.location:
            if assume is None or assume.name != "util.assume.int":
                new = ir.Operation.create(
                    "util.assume.int",
                    results=[src.type],
                    operands=[src],
                    attributes={"assumptions": ir.Attribute.parse(f"[[#util.int.assumption<udiv = {divisor}>]]")},
                    ip=ir.InsertionPoint(op),
                )
                op.operands[0] = new.results[0]
                continue
            i = list(assume.results).index(src)
            rows = int_assumptions(assume.attributes["assumptions"])
            table = [list(r) for r in ir.ArrayAttr(assume.attributes["assumptions"])]
            sites = rows[i] or [{}]
            table[i] = [
                ir.Attribute.parse(
                    "#util.int.assumption<"
                    + ", ".join(f"{k} = {v}" for k, v in {**s, "udiv": math.lcm(s.get("udiv", 1), divisor)}.items())
                    + ">"
                )
                for s in sites
            ]
            assume.attributes["assumptions"] = ir.ArrayAttr.get([ir.ArrayAttr.get(r) for r in table])


def fork(module: ir.Module, plan: VersionPlan) -> ir.Module:
    """A copy of ``module`` (its one hal.executable) whose dispatch promises ``plan``'s sizes."""
    with module.context, module.operation.location:
        copy = ir.Module.create()
        for named in module.operation.attributes:  # the container's own (stream.affinity.default, ...)
            copy.operation.attributes[named.name] = named.attr
    for op in module.body.operations:
        op.operation.clone(ip=ir.InsertionPoint(copy.body))
    func = attrs.dispatch_func(copy.operation)
    problem = promised(attrs.read_problem(func), plan.dims, plan.divisor)
    if plan.divisor > 1:
        _strengthen(func, attrs.read_problem(func), plan.dims, plan.divisor)
    if plan.at_most:
        problem = bounded(problem, plan.dims, plan.at_most)
    attrs.write_problem(func, problem)
    # A bounded version's config is the one planned here (for its bound);
    # a promised one is configured afresh from its promises (configure), as before.
    config = plan.fast if plan.at_most else None
    attrs.write_version(
        func, attrs.Version(plan.condition(), plan.dims, plan.divisor, config=config, at_most=plan.at_most)
    )
    return copy


# --------------------------------------------------------------------------------------------
# Joining the versions (hand-back, after both were handed back).


def _condition(values: list[ir.Value], version: attrs.Version) -> ir.Value:
    """AND over ``values`` (the workload's index values) of the version's test: ``value % divisor
    == 0`` (``divisor`` a power of two), or ``value <= at_most`` (unsigned)."""
    cond = None

    def both(c):
        return c if cond is None else arith.AndIOp(cond, c).result

    for v in values:
        if version.at_most:
            bound = arith.ConstantOp(v.type, version.at_most).result
            cond = both(arith.CmpIOp(arith.CmpIPredicate.ule, v, bound).result)
            continue
        mask = arith.ConstantOp(v.type, version.divisor - 1).result
        rem = arith.AndIOp(v, mask).result
        zero = arith.ConstantOp(v.type, 0).result
        cond = both(arith.CmpIOp(arith.CmpIPredicate.eq, rem, zero).result)
    return cond


def merge(module: ir.Module, fast_module: ir.Module) -> attrs.Version:
    """Join the handed-back fast version into ``module``'s handed-back executable as a kernel of its
    own: its function and ``iree_codegen.dispatch_config`` beside the other kernel's, under the
    export the host program dispatches, which gets a ``condition`` on the workload (the version's
    test) and ``fallback`` to the other kernel, renamed ``<name>_else`` with an export of its own
    (IREE's export specialization: the host evaluates the condition at each dispatch). Each kernel
    keeps its own workgroup size and registers; on NVIDIA both launch with their shared memory
    together (``launch_shared_bytes``). Returns the fast version's record,
    written on the other kernel's function (still the dispatch's, ``attrs.dispatch_func``) as
    ``mmaflow.versions``."""
    func, fast = attrs.dispatch_func(module.operation), attrs.dispatch_func(fast_module.operation)
    name = str_attr(func, "sym_name")
    other = name + attrs.FALLBACK_SUFFIX
    version = replace(
        attrs.read_version(fast),
        problem=attrs.read_problem(fast),
        config=attrs.read_config(fast),
        expect=attrs.read_expect(fast),
        export=name,
    )
    inner, variant = func.parent, parent_named(func, "hal.executable.variant")
    export = _export(variant, name)
    fexport = _export(parent_named(fast, "hal.executable.variant"), name)
    (config,) = [c for c in ops_named(inner, "iree_codegen.dispatch_config") if _config_of(c) == name]
    (fconfig,) = ops_named(fast.parent, "iree_codegen.dispatch_config")
    ordinal = ir.IntegerAttr(export.attributes["ordinal"]).value
    last = max(ir.IntegerAttr(e.attributes["ordinal"]).value for e in ops_named(variant, "hal.executable.export"))
    _merge_globals(func, fast)
    with func.context, func.location:
        index = ir.IndexType.get()
        func.attributes["sym_name"] = ir.StringAttr.get(other)
        export.attributes["sym_name"] = ir.StringAttr.get(other)
        export.attributes["ordinal"] = ir.IntegerAttr.get(index, last + 1)
        config.attributes["function_ref"] = ir.FlatSymbolRefAttr.get(other)
        fast.move_before(func)
        fconfig.move_before(config)
        del fast.attributes[attrs.DISPATCH]
        del fast.attributes[attrs.VERSION]
        first = fexport.clone(ip=ir.InsertionPoint(export))
        first.attributes["ordinal"] = ir.IntegerAttr.get(index, ordinal)
        first.attributes["condition_fallback"] = ir.FlatSymbolRefAttr.get(other)
        count_args = list(first.regions[0].blocks[0].arguments)  # the device, then the workload
        block = first.regions[1].blocks.append(*[a.type for a in count_args])
        workload = list(block.arguments)[1:]
        ordinals = [o for d in version.problem.dynamic if d.dim in version.dims for o in d.ordinals]
        with ir.InsertionPoint(block):
            hal.ReturnOp([_condition([workload[o] for o in ordinals], version)])
    attrs.write_versions(func, [version])
    return version


def _export(variant: ir.Operation, name: str) -> ir.Operation:
    exports = [e for e in ops_named(variant, "hal.executable.export") if str_attr(e, "sym_name") == name]
    if len(exports) != 1:
        raise CodegenError(f"expected one hal.executable.export @{name}, found {len(exports)}", stage="hand-back")
    return exports[0]


def _config_of(config: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(config.attributes["function_ref"]).value


def _merge_globals(func: ir.Operation, fast: ir.Operation) -> None:
    """Module-level ``memref.global``s the fast kernel's body uses (the TMA ring's map slots,
    ``tma.MAPS_GLOBAL``) move beside ``func``; one both kernels declare must be the same."""

    def globals_of(fn):
        return {
            ir.StringAttr(o.operation.attributes["sym_name"]).value: o.operation
            for o in fn.parent.regions[0].blocks[0].operations
            if o.operation.name == "memref.global"
        }

    have = globals_of(func)
    for name, op in globals_of(fast).items():
        if name not in have:
            op.move_before(func)
        elif str(have[name]) != str(op):
            raise CodegenError(f"the versions declare memref.global @{name} differently", stage="hand-back")
