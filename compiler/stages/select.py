"""Stage `select`: find the matmul-like contraction of a dispatch and claim it for mmaflow.

Input: one ``hal.executable`` at IREE's executable-sources phase. A dispatch is taken when its
function holds exactly one linalg op whose indexing maps and iterator types make it a
contraction (batch) x M x N x K with a multiply-add body, optionally initialised by a
``linalg.fill``; it is matched by maps, not by op name, so ``linalg.matmul``, transposed
``linalg.matmul`` variants, ``linalg.batch_matmul`` and equivalent ``linalg.generic`` ops all fit.

Output: the same IR with the contraction tagged ``mmaflow.contraction`` and the function tagged
``mmaflow.target`` and ``mmaflow.problem`` (JSON of ``Contraction``). Dispatches without a
contraction are left to IREE; a contraction mmaflow cannot compile is an error, never a silent
hand-over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from iree.compiler import ir

from ..errors import InputError, UnsupportedError
from ..mlir import defining_op, location_of, ops_named, str_attr, walk
from ..problem import Contraction
from ..targets import TARGETS, Target, get_target

NAME = "select"
CONTRACTION_ATTR = "mmaflow.contraction"
TARGET_ATTR = "mmaflow.target"
PROBLEM_ATTR = "mmaflow.problem"

_LINALG_IGNORED = {"linalg.fill", "linalg.yield", "linalg.index"}
_CASTS = {"arith.extf", "arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp"}


@dataclass
class Decision:
    executable: str
    taken: bool
    reason: str

    def line(self) -> str:
        return f"mmaflow: {'taken' if self.taken else 'left '} {self.executable}: {self.reason}"


def variant_arch(variant: ir.Operation) -> tuple[str, str | None]:
    """(backend, arch) of a hal.executable.variant, e.g. ("rocm", "gfx1100"); arch may be None."""
    text = str(variant.attributes["target"])
    backend = re.match(r'#hal\.executable\.target<"([^"]+)"', text)
    arch = re.search(r'arch = "([^"]+)"', text)
    return (backend.group(1) if backend else "?"), (arch.group(1) if arch else None)


def resolve_target(variant: ir.Operation, requested: str | None) -> Target | None:
    """The mmaflow target for this variant, or None if the variant is not for one of ours."""
    backend, arch = variant_arch(variant)
    if requested:
        target = get_target(requested)
        expected_backend = "rocm" if target.is_amd else "cuda"
        if backend != expected_backend:
            raise InputError(f"the executable targets {backend} but --target {requested} is {expected_backend}")
        if arch is not None and arch != target.iree_arch and not target.retarget_variant:
            raise InputError(f"the executable was configured for {arch}, not {requested}")
        return target
    if arch is None:
        return None
    for t in TARGETS.values():
        if t.iree_arch == arch and not t.retarget_variant:
            return t
    return None


def _element_type(value: ir.Value) -> tuple[str, list[int]]:
    t = ir.ShapedType(value.type)
    return str(t.element_type), [t.get_dim_size(i) if not t.is_dynamic_dim(i) else -1 for i in range(t.rank)]


def _map_dims(attr) -> list[list[int]]:
    out = []
    for a in ir.ArrayAttr(attr):
        amap = ir.AffineMapAttr(a).value
        dims = []
        for e in amap.results:
            if not isinstance(e, ir.AffineDimExpr):
                return []
            dims.append(e.position)
        out.append(dims)
    return out


def _body_casts(op: ir.Operation) -> tuple[str | None, str | None] | None:
    """Check the body is out + cast(a) * cast(b); return the cast op names (None = no cast)."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    yields = [o for o in body if o.name == "linalg.yield"]
    if len(yields) != 1 or len(yields[0].operands) != 1:
        return None
    add = defining_op(yields[0].operands[0])
    if add is None or add.name not in ("arith.addf", "arith.addi"):
        return None
    args = list(block.arguments)
    a_arg, b_arg, out_arg = args[0], args[1], args[2]
    lhs, rhs = add.operands
    mul_val = rhs if lhs == out_arg else lhs if rhs == out_arg else None
    mul = defining_op(mul_val) if mul_val is not None else None
    if mul is None or mul.name not in ("arith.mulf", "arith.muli"):
        return None

    def through_cast(v):
        o = defining_op(v)
        if o is not None and o.name in _CASTS:
            return o.operands[0], o.name
        return v, None

    (x, cx), (y, cy) = through_cast(mul.operands[0]), through_cast(mul.operands[1])
    if x == a_arg and y == b_arg:
        return cx, cy
    if x == b_arg and y == a_arg:
        return cy, cx
    return None


def _binding_of(value: ir.Value) -> int | None:
    """The hal binding a dispatch tensor was loaded from (through dispatch.tensor.load)."""
    load = defining_op(value)
    if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load":
        return None
    sub = defining_op(load.operands[0])
    if sub is None or sub.name != "hal.interface.binding.subspan":
        return None
    return ir.IntegerAttr(sub.attributes["binding"]).value


def _result_binding(result: ir.Value) -> int | None:
    for use in result.uses:
        user = use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner
        if user.name == "iree_tensor_ext.dispatch.tensor.store":
            sub = defining_op(user.operands[1])
            if sub is not None and sub.name == "hal.interface.binding.subspan":
                return ir.IntegerAttr(sub.attributes["binding"]).value
    return None


def match_contraction(op: ir.Operation) -> tuple[Contraction | None, str]:
    """Return (problem, "") if ``op`` is a matmul-like contraction, else (None, why not)."""
    if "indexing_maps" not in op.attributes or len(op.regions) != 1:
        return None, f"{op.name} has no indexing maps"
    maps = _map_dims(op.attributes["indexing_maps"])
    if len(maps) != 3:
        return None, f"{op.name} does not have two inputs and one output"
    a_map, b_map, c_map = maps
    n_loops = max(max(m) for m in maps if m) + 1
    if "iterator_types" in op.attributes:
        iters = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
        reductions = {i for i, t in enumerate(iters) if "reduction" in t}
    else:  # named op: loops missing from the output are the reductions
        reductions = set(range(n_loops)) - set(c_map)
    if len(reductions) != 1:
        return None, f"{op.name} has {len(reductions)} reduction loops (a matmul has 1)"
    (kd,) = reductions
    batch = [d for d in c_map if d in a_map and d in b_map]
    ms = [d for d in c_map if d in a_map and d not in b_map]
    ns = [d for d in c_map if d in b_map and d not in a_map]
    if len(ms) != 1 or len(ns) != 1 or len(batch) > 1 or kd not in a_map or kd not in b_map:
        return None, f"{op.name}'s indexing maps are not those of a (batch) matmul"
    (md,), (nd,) = ms, ns
    if c_map != batch + [md, nd]:
        return None, f"{op.name} writes its result transposed or permuted (output map {c_map})"
    if a_map == batch + [md, kd]:
        a_t = False
    elif a_map == batch + [kd, md]:
        a_t = True
    else:
        return None, f"{op.name}: A map {a_map} is not (batch,) m, k or k, m"
    if b_map == batch + [kd, nd]:
        b_t = False
    elif b_map == batch + [nd, kd]:
        b_t = True
    else:
        return None, f"{op.name}: B map {b_map} is not (batch,) k, n or n, k"
    casts = _body_casts(op)
    if casts is None:
        return None, f"{op.name}'s body is not a multiply-accumulate"
    ins = list(op.operands)
    (at, ashape), (bt, bshape), (ct, cshape) = (_element_type(v) for v in ins[:3])
    if -1 in ashape + bshape + cshape:
        raise UnsupportedError("dynamic shapes are not supported yet", stage=NAME, location=location_of(op))
    sizes = {}
    for shape, dims in ((ashape, a_map), (bshape, b_map), (cshape, c_map)):
        for s, d in zip(shape, dims):
            sizes[d] = s
    problem = Contraction(
        m=sizes[md], n=sizes[nd], k=sizes[kd], batch=sizes[batch[0]] if batch else 1,
        a_type=at, b_type=bt, c_type=ct, a_transposed=a_t, b_transposed=b_t, batched=bool(batch),
        unsigned_a=casts[0] == "arith.extui", unsigned_b=casts[1] == "arith.extui")
    bindings = (_binding_of(ins[0]), _binding_of(ins[1]), _result_binding(op.results[0]))
    if None not in bindings:
        problem = replace(problem, bindings=bindings)
    return problem, ""


def select(module: ir.Module, requested_target: str | None) -> list[Decision]:
    """Tag the contraction of each executable in ``module`` that mmaflow takes."""
    decisions = []
    for exe in ops_named(module.operation, "hal.executable"):
        name = str_attr(exe, "sym_name")
        for variant in ops_named(exe, "hal.executable.variant"):
            target = resolve_target(variant, requested_target)
            if target is None:
                backend, arch = variant_arch(variant)
                decisions.append(Decision(name, False, f"variant {backend}/{arch} is not an mmaflow target"))
                continue
            decisions.append(_select_in_variant(name, variant, target))
    return decisions


def _select_in_variant(name: str, variant: ir.Operation, target: Target) -> Decision:
    funcs = ops_named(variant, "func.func")
    if len(funcs) != 1:
        return Decision(name, False, f"{len(funcs)} functions in the variant (expected 1)")
    func = funcs[0]
    linalg_ops = [o for o in walk(func) if o.name.startswith("linalg.") and o.name not in _LINALG_IGNORED
                  and o.parent.name != "linalg.generic"]
    found, why_not = [], []
    for op in linalg_ops:
        problem, why = match_contraction(op)
        if problem is None:
            why_not.append(why)
        else:
            found.append((op, problem))
    if not found:
        reason = "no matmul-like contraction" + (f" ({'; '.join(why_not)})" if why_not else "")
        return Decision(name, False, reason)
    if len(found) > 1:
        raise UnsupportedError(f"{len(found)} contractions in one dispatch; mmaflow compiles one per dispatch",
                               stage=NAME, location=location_of(found[1][0]))
    op, problem = found[0]
    others = [o for o in linalg_ops if o != op]
    if others:
        raise UnsupportedError(
            f"the matmul is fused with {others[0].name} in this dispatch; fused epilogues are not supported yet",
            stage=NAME, location=location_of(others[0]))
    for fill in (o for o in walk(func) if o.name == "linalg.fill"):
        if fill.results[0] != op.operands[2]:
            raise UnsupportedError("a linalg.fill that does not initialise the matmul", stage=NAME,
                                   location=location_of(fill))
    init = defining_op(op.operands[2])
    if init is None or init.name != "linalg.fill":
        raise UnsupportedError("the matmul accumulates into an existing tensor (C += A*B); mmaflow needs "
                               "a zero-filled init (linalg.fill)", stage=NAME, location=location_of(op))
    from ..config import require_intrinsic  # local: config imports targets, avoid a cycle at import
    try:
        require_intrinsic(target, problem)
    except UnsupportedError as e:
        e.stage, e.location = NAME, location_of(op)
        raise
    with op.context:
        op.attributes[CONTRACTION_ATTR] = ir.UnitAttr.get()
        func.attributes[TARGET_ATTR] = ir.StringAttr.get(target.name)
        func.attributes[PROBLEM_ATTR] = ir.StringAttr.get(problem.to_json())
    return Decision(name, True, f"{problem.describe()} on {target.name}")


def selected_func(module: ir.Module) -> ir.Operation | None:
    """The function a previous `select` run tagged, if any."""
    for func in ops_named(module.operation, "func.func"):
        if TARGET_ATTR in func.attributes:
            return func
    return None
