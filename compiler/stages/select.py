"""Stage `select`: find the matmul-like contraction of a dispatch and claim it for mmaflow.

Input: one ``hal.executable`` at IREE's executable-sources phase. A dispatch is taken when its
function holds exactly one linalg op whose indexing maps and iterator types make it a
contraction (batch) x M x N x K with a multiply-add body, optionally initialised by a
``linalg.fill``; it is matched by maps, not by op name, so ``linalg.matmul``, transposed
``linalg.matmul`` variants, ``linalg.batch_matmul`` and equivalent ``linalg.generic`` ops all fit.
Elementwise ``linalg.generic`` consumers of its result (bias, activation, scale, cast: arith and
math ops, inputs broadcast along any of the result's dimensions) are its epilogue.

Output: the same IR with the contraction tagged ``mmaflow.contraction``, its epilogue generics
``mmaflow.epilogue``, and the function tagged
``mmaflow.target`` and ``mmaflow.problem`` (JSON of ``Contraction``). Dispatches without a
contraction are left to IREE; a contraction mmaflow cannot compile is an error, never a silent
hand-over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from iree.compiler import ir

from .. import dynamic
from ..errors import InputError, UnsupportedError
from ..mlir import defining_op, location_of, ops_named, str_attr, user_of, walk
from ..problem import Contraction, EpilogueInput
from ..targets import TARGETS, Target, get_target

NAME = "select"
CONTRACTION_ATTR = "mmaflow.contraction"
DISPATCH_ATTR = "mmaflow.dispatch"  # tags the dispatch function (the transform scripts match it)
EPILOGUE_ATTR = "mmaflow.epilogue"  # tags the elementwise consumers fused with the contraction
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


def _subspan_of(dispatch_tensor: ir.Value) -> ir.Operation | None:
    sub = defining_op(dispatch_tensor)
    return sub if sub is not None and sub.name == "hal.interface.binding.subspan" else None


def binding_tensor_type(dispatch_tensor_type: ir.Type) -> ir.RankedTensorType:
    """The tensor type inside ``!iree_tensor_ext.dispatch.tensor<access:tensor<...>>``."""
    m = re.fullmatch(r"!iree_tensor_ext\.dispatch\.tensor<\w+:(tensor<[^<>]*>)>", str(dispatch_tensor_type))
    if m is None:
        raise UnsupportedError(f"unexpected binding type {dispatch_tensor_type}", stage=NAME)
    return ir.RankedTensorType(ir.Type.parse(m.group(1)))


def _whole(op: ir.Operation, binding: ir.Value) -> bool:
    """A dispatch.tensor.load/store of the whole binding (offsets 0, full sizes, strides 1)?
    Dynamic sizes must be the binding's own dynamic dims."""
    def arr(name):
        return list(ir.DenseI64ArrayAttr(op.attributes[name]))
    full = list(binding_tensor_type(binding.type).shape)
    if not (all(o == 0 for o in arr("static_offsets")) and arr("static_sizes") == full
            and all(x == 1 for x in arr("static_strides"))):
        return False
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    starts = [sum(segments[:i]) for i in range(len(segments))]
    dims = operands[starts[-4]:starts[-4] + segments[-4]]  # the binding's dynamic dims
    sizes = operands[starts[-2]:starts[-2] + segments[-2]]
    return dims == sizes


def _binding_of(value: ir.Value) -> int | None:
    """The hal binding a dispatch tensor was loaded from, whole (through dispatch.tensor.load)."""
    load = defining_op(value)
    if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load" or not _whole(load, load.operands[0]):
        return None
    sub = _subspan_of(load.operands[0])
    return None if sub is None else ir.IntegerAttr(sub.attributes["binding"]).value


def _store_binding(store: ir.Operation) -> int | None:
    sub = _subspan_of(store.operands[1])
    if sub is None or not _whole(store, store.operands[1]):
        return None
    return ir.IntegerAttr(sub.attributes["binding"]).value


def _result_binding(result: ir.Value) -> int | None:
    for use in result.uses:
        user = user_of(use)
        if user.name == "iree_tensor_ext.dispatch.tensor.store":
            return _store_binding(user)
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
    sizes = {}
    for shape, dims in ((ashape, a_map), (bshape, b_map), (cshape, c_map)):
        for s, d in zip(shape, dims):
            if s != -1:
                sizes[d] = s
            else:
                sizes.setdefault(d, None)
    problem = Contraction(
        m=sizes[md], n=sizes[nd], k=sizes[kd], batch=sizes[batch[0]] if batch else 1,
        a_type=at, b_type=bt, c_type=ct, a_transposed=a_t, b_transposed=b_t, batched=bool(batch),
        unsigned_a=casts[0] == "arith.extui", unsigned_b=casts[1] == "arith.extui")
    bindings = (_binding_of(ins[0]), _binding_of(ins[1]), _result_binding(op.results[0]))
    if None not in bindings:
        problem = replace(problem, bindings=bindings)
    return problem, ""


_ROLES = ("b", "m", "n")


def _consumer_problem(gen: ir.Operation, value: ir.Value, rank: int) -> str | None:
    """Why ``gen`` is not an elementwise consumer of ``value`` mmaflow can apply in registers
    (None if it is one)."""
    if gen.name != "linalg.generic":
        return "is not a linalg.generic"
    iters = [str(t) for t in ir.ArrayAttr(gen.attributes["iterator_types"])]
    if len(iters) != rank or any("parallel" not in t for t in iters):
        return f"is not elementwise over the {rank}-D result (iterators {iters})"
    if len(gen.results) != 1:
        return f"has {len(gen.results)} results"
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(gen.attributes["indexing_maps"])]
    ins = list(gen.operands)[:-1]
    identity = ir.AffineMap.get_identity(rank)
    if maps[-1] != identity:
        return "writes its result permuted"
    uses = [i for i, v in enumerate(ins) if v == value]
    if len(uses) != 1 or maps[uses[0]] != identity:
        return "does not read the matmul result element by element"
    for amap in maps[:-1]:
        dims = [e.position for e in amap.results if isinstance(e, ir.AffineDimExpr)]
        if len(dims) != len(amap.results) or len(set(dims)) != len(dims):
            return f"reads an input through {amap}, which is not a broadcast or permutation"
    block = gen.regions[0].blocks[0]
    out_arg = list(block.arguments)[-1]
    if len(list(out_arg.uses)):
        return "reads its output tensor"
    inside = {o.operation for o in block.operations}
    for o in (o.operation for o in block.operations):
        if o.name == "linalg.yield":
            continue
        if o.name == "linalg.index":
            return "depends on the element's position (linalg.index)"
        if not o.name.startswith(("arith.", "math.")) or o.regions:
            return f"computes with {o.name} (mmaflow applies arith and math ops in registers)"
        for v in o.operands:
            d = defining_op(v)
            if d is not None and d not in inside and d.name != "arith.constant":
                return f"uses {d.name} defined outside its body"
    return None


def match_epilogue(op: ir.Operation, batched: bool):
    """Follow the contraction's result through fused elementwise consumers to its store.

    Returns (consumer generics in order, the final store, EpilogueInputs, body op names, stored
    element type)."""
    rank = 3 if batched else 2
    roles = _ROLES[-rank:]
    chain, inputs, names = [], [], []
    value = op.results[0]
    while True:
        users = [user_of(u) for u in value.uses]
        what = "the matmul result" if not chain else f"the result of {chain[-1].name}"
        if len(users) != 1:
            raise UnsupportedError(f"{what} has {len(users)} users; mmaflow stores exactly one result per "
                                   f"dispatch", stage=NAME, location=location_of(op))
        user = users[0]
        if user.name == "iree_tensor_ext.dispatch.tensor.store":
            return chain, user, inputs, names, str(ir.ShapedType(value.type).element_type)
        why = _consumer_problem(user, value, rank)
        if why:
            raise UnsupportedError(f"the matmul is fused with {user.name}, which {why}; mmaflow fuses "
                                   f"elementwise epilogues only", stage=NAME, location=location_of(user))
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(user.attributes["indexing_maps"])]
        for operand, amap in zip(list(user.operands)[:-1], maps):
            if operand == value:
                continue
            b = _binding_of(operand)
            if b is None:
                src = defining_op(operand)
                if src is not None and src.name == "tensor.empty":
                    raise UnsupportedError(f"the epilogue {user.name} reads an uninitialized tensor (tensor.empty)",
                                           stage=NAME, location=location_of(user))
                raise UnsupportedError(
                    f"an epilogue input ({src.name if src else 'a block argument'}) is not a whole tensor "
                    f"loaded from a binding", stage=NAME, location=location_of(user))
            elem, shape = _element_type(operand)
            inputs.append(EpilogueInput(b, elem, tuple(None if x == -1 else x for x in shape),
                                        tuple(roles[e.position] for e in amap.results)))
        names += [o.operation.name for o in user.regions[0].blocks[0].operations
                  if o.operation.name != "linalg.yield"]
        chain.append(user)
        value = user.results[0]


def select(module: ir.Module, requested_target: str | None) -> list[Decision]:
    """Tag the contraction of each executable in ``module`` that mmaflow takes."""
    decisions = []
    with module.context:
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


def _dynamic_dims(func: ir.Operation, problem: Contraction, op: ir.Operation) -> tuple:
    """Trace every dynamic size of the dispatch to M, N, K or batch through the bindings it
    shapes (a binding's role gives each axis its dimension), then make sure every workload value
    of the dispatch is accounted for (the grid and the lane executor need them all)."""
    from ..stages.normalize import operand_dims
    roles = dict(zip(problem.bindings, operand_dims(problem).values()))
    for e in problem.epilogue:
        roles[e.binding] = ["batch" if d == "b" else d for d in e.dims]
    traces: dict[str, list] = {}
    for sub in ops_named(func, "hal.interface.binding.subspan"):
        binding = ir.IntegerAttr(sub.attributes["binding"]).value
        dyn = list(sub.operands)[1:]
        if not dyn:
            continue
        if binding not in roles:
            raise UnsupportedError(f"binding {binding} has dynamic sizes but is not A, B, C or an epilogue input",
                                   stage=NAME, location=location_of(sub))
        shape = binding_tensor_type(sub.results[0].type).shape
        axes = [a for a, d in enumerate(shape) if ir.ShapedType.is_dynamic_size(d)]
        for axis, value in zip(axes, dyn):
            name = roles[binding][axis]
            try:
                traces.setdefault(name, []).append(dynamic.trace(name, value))
            except UnsupportedError as e:
                e.stage, e.location = NAME, location_of(sub)
                raise
    dims = tuple(dynamic.merge(traces[d]) for d in dynamic.DIM_ORDER if d in traces)
    missing = [d for d in ("batch", "m", "n", "k") if getattr(problem, d) is None and d not in traces]
    if missing:
        raise UnsupportedError(f"the dynamic size of {missing[0]} does not shape any binding",
                               stage=NAME, location=location_of(op))
    seen = {o for d in dims for o in d.ordinals}
    for w in ops_named(func, "iree_tensor_ext.dispatch.workload.ordinal"):
        if ir.IntegerAttr(w.attributes["ordinal"]).value not in seen:
            raise UnsupportedError("a dynamic size of the dispatch is none of M, N, K, batch",
                                   stage=NAME, location=location_of(w))
    return dims


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
    chain, store, inputs, names, stored = match_epilogue(op, problem.batched)
    others = [o for o in linalg_ops if o != op and o not in chain]
    if others:
        raise UnsupportedError(
            f"the dispatch also holds {others[0].name}, which does not consume the matmul's result; mmaflow "
            f"compiles a matmul and its elementwise epilogue", stage=NAME, location=location_of(others[0]))
    if chain:
        out = _store_binding(store)
        ab = problem.bindings[:2] if problem.bindings else (_binding_of(op.operands[0]), _binding_of(op.operands[1]))
        if out is None or None in ab:
            raise UnsupportedError("the matmul's operands or the epilogue's result are not whole bindings",
                                   stage=NAME, location=location_of(op))
        problem = replace(problem, bindings=(*ab, out), out_type=stored if stored != problem.c_type else None,
                          epilogue=tuple(inputs), epilogue_ops=tuple(names))
    if any(getattr(problem, d) is None for d in ("batch", "m", "n", "k")):
        if problem.bindings is None:
            raise UnsupportedError("a dynamic matmul whose operands are not whole bindings", stage=NAME,
                                   location=location_of(op))
        problem = replace(problem, dynamic=_dynamic_dims(func, problem, op))
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
        for g in chain:
            g.attributes[EPILOGUE_ATTR] = ir.UnitAttr.get()
        func.attributes[DISPATCH_ATTR] = ir.UnitAttr.get()
        func.attributes[TARGET_ATTR] = ir.StringAttr.get(target.name)
        func.attributes[PROBLEM_ATTR] = ir.StringAttr.get(problem.to_json())
    return Decision(name, True, f"{problem.describe()} on {target.name}")


def selected_func(module: ir.Module) -> ir.Operation | None:
    """The function a previous `select` run tagged, if any."""
    for func in ops_named(module.operation, "func.func"):
        if TARGET_ATTR in func.attributes:
            return func
    return None
