"""Stage `normalize`: rewrite the dispatch into mmaflow's canonical form, when it needs one.

Canonical form: bindings, dispatch.tensor loads of A and B, zero fill, one ``linalg.generic``
contraction (tagged ``mmaflow.contraction``) and the store of its accumulator-typed result.

- Unaligned shapes: when M, N or K is not a multiple of the config's tile, every dimension is
  rounded up to the tile in the types only. No data is copied or padded: the script tiles whole
  tiles, and `distribute` re-types the bindings to their true shapes (``mmaflow.problem`` keeps
  them) and bounds every global access.
- Dynamic sizes: the script sees two tiles per dynamic dimension; the ops computing the true
  sizes (push constants, ``util.assume.int``, workload ordinals) move into ``@<dispatch>_sizes``
  (see ``compiler/dynamic.py``), and the bindings keep their dynamic types' attributes.
- A fused epilogue (elementwise consumers tagged ``mmaflow.epilogue`` by `select`) is moved out
  of the tensor program into a private scalar function ``@<dispatch>_epilogue(acc, inputs...) ->
  stored`` (tagged ``mmaflow.epilogue``; each input argument keeps its binding's subspan
  attributes as ``mmaflow.subspan``). `distribute` applies it to the accumulator registers
  before the store, and the result binding gets its stored element type back.

Aligned dispatches without an epilogue pass through untouched.
"""

from __future__ import annotations

import math

from iree.compiler import ir
from iree.compiler.dialects import func as func_d

from .. import dynamic
from ..errors import CodegenError
from ..mlir import clone_into, defining_op, ops_named, parse_module, str_attr, walk
from ..problem import Contraction
from .configure import read_config, read_problem
from .select import CONTRACTION_ATTR, EPILOGUE_ATTR

NAME = "normalize"
SUBSPAN_ATTR = "mmaflow.subspan"  # an epilogue argument's binding (subspan attributes)


def padded_problem(problem: Contraction, cfg) -> Contraction:
    """The static problem the transform script sees: every dimension rounded up to whole tiles;
    a dynamic one stands in as two tiles (two workgroups / K steps, so that no loop of one
    iteration folds away: the kernel takes its true extent from the sizes function)."""
    from dataclasses import replace

    def up(d, t):
        return 2 * t if d is None else math.ceil(d / t) * t
    return replace(problem, m=up(problem.m, cfg.tile_m), n=up(problem.n, cfg.tile_n), k=up(problem.k, cfg.tile_k),
                   batch=2 if problem.batch is None else problem.batch, dynamic=())


def is_aligned(problem: Contraction, cfg) -> bool:
    return not problem.is_dynamic and padded_problem(problem, cfg) == problem


def operand_dims(p: Contraction) -> dict[str, list[str]]:
    """The problem dimension each axis of A, B and C follows (batch leading, transposition applied)."""
    lead = ["batch"] if p.batched else []
    return {"A": lead + (["k", "m"] if p.a_transposed else ["m", "k"]),
            "B": lead + (["n", "k"] if p.b_transposed else ["k", "n"]),
            "C": lead + ["m", "n"]}


def operand_shapes(p: Contraction) -> dict[str, list[int | None]]:
    """Storage shapes of A, B, C (None where dynamic)."""
    return {role: [getattr(p, d) for d in dims] for role, dims in operand_dims(p).items()}


def _tensor(shape, elem):
    return f"tensor<{'x'.join(map(str, shape))}x{elem}>"


def _body(p: Contraction) -> str:
    a, c = p.a_type, p.c_type
    if a.startswith("i"):
        ext_a = "arith.extui" if p.unsigned_a else "arith.extsi"
        ext_b = "arith.extui" if p.unsigned_b else "arith.extsi"
        mul, add = "arith.muli", "arith.addi"
    else:
        ext_a = ext_b = "arith.extf"
        mul, add = "arith.mulf", "arith.addf"
    lines = [f"^bb0(%x: {a}, %y: {p.b_type}, %acc: {c}):"]
    if a == c:
        xe, ye = "%x", "%y"
    else:
        lines += [f"  %xe = {ext_a} %x : {a} to {c}", f"  %ye = {ext_b} %y : {p.b_type} to {c}"]
        xe, ye = "%xe", "%ye"
    lines += [f"  %p = {mul} {xe}, {ye} : {c}", f"  %s = {add} %acc, %p : {c}", f"  linalg.yield %s : {c}"]
    return "\n".join(lines)


def _subspan(name: str, attrs: dict, access: str, tensor: str) -> str:
    """A binding subspan in generic form, keeping the original's attributes (layout, binding,
    flags, alignment) and a zero offset."""
    props = ", ".join(f"{n} = {a}" for n, a in sorted(attrs.items()) if n != "operandSegmentSizes")
    return (f'%{name} = "hal.interface.binding.subspan"(%c0) <{{{props}, operandSegmentSizes = array<i32: 1, 0>}}> '
            f": (index) -> !iree_tensor_ext.dispatch.tensor<{access}:{tensor}>")


def subspan_attributes(op: ir.Operation) -> dict:
    return {n: op.attributes[n] for n in op.attributes}


def canonical_body(p: Contraction, subspans: dict[str, dict]) -> str:
    """The dispatch body for the static problem ``p`` (already rounded up), given each role's
    original subspan attributes (layout, binding, flags, alignment are kept)."""
    shapes = operand_shapes(p)
    elems = {"A": p.a_type, "B": p.b_type, "C": p.c_type}
    dims = "(b, m, n, k)" if p.batched else "(m, n, k)"
    b_ = "b, " if p.batched else ""
    maps = [f"affine_map<{dims} -> ({b_}{'k, m' if p.a_transposed else 'm, k'})>",
            f"affine_map<{dims} -> ({b_}{'n, k' if p.b_transposed else 'k, n'})>",
            f"affine_map<{dims} -> ({b_}m, n)>"]
    iters = ", ".join(['"parallel"'] * (3 if p.batched else 2) + ['"reduction"'])
    lines = ["%c0 = arith.constant 0 : index"]
    for role in "ABC":
        access = "writeonly" if role == "C" else "readonly"
        lines.append(_subspan(f"{role}_binding", subspans[role], access, _tensor(shapes[role], elems[role])))
    for role in "AB":
        s = shapes[role]
        t = _tensor(s, elems[role])
        lines.append(f"%{role} = iree_tensor_ext.dispatch.tensor.load %{role}_binding, offsets = [{', '.join('0' * len(s))}], "
                     f"sizes = [{', '.join(map(str, s))}], strides = [{', '.join('1' * len(s))}] : "
                     f"!iree_tensor_ext.dispatch.tensor<readonly:{t}> -> {t}")
    ct = _tensor(shapes["C"], p.c_type)
    zero = "0" if p.c_type.startswith("i") else "0.0"
    lines += [f"%zero = arith.constant {zero} : {p.c_type}",
              f"%empty = tensor.empty() : {ct}",
              f"%init = linalg.fill ins(%zero : {p.c_type}) outs(%empty : {ct}) -> {ct}",
              f"%r = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iters}]}} "
              f"ins(%A, %B : {_tensor(shapes['A'], p.a_type)}, {_tensor(shapes['B'], p.b_type)}) outs(%init : {ct}) "
              f"attrs = {{{CONTRACTION_ATTR}}} {{\n{_body(p)}\n}} -> {ct}"]
    s = shapes["C"]
    lines += [f"iree_tensor_ext.dispatch.tensor.store %r, %C_binding, offsets = [{', '.join('0' * len(s))}], "
              f"sizes = [{', '.join(map(str, s))}], strides = [{', '.join('1' * len(s))}] : "
              f"{ct} -> !iree_tensor_ext.dispatch.tensor<writeonly:{ct}>",
              "return"]
    return "\n".join(lines)


def _epilogue_function(func: ir.Operation, problem: Contraction, subspans: dict) -> ir.Operation:
    """The epilogue generics' bodies, composed into ``func.func private @<name>_epilogue``."""
    chain = [o for o in walk(func) if EPILOGUE_ATTR in o.attributes]
    (contraction,) = [o for o in walk(func) if CONTRACTION_ATTR in o.attributes]
    types = [ir.Type.parse(problem.c_type)] + [ir.Type.parse(e.type) for e in problem.epilogue]
    ftype = ir.FunctionType.get(types, [ir.Type.parse(problem.stored_type)])
    with func.location, ir.InsertionPoint(func):
        efunc = func_d.FuncOp(f"{str_attr(func, 'sym_name')}_epilogue", ftype, visibility="private")
    efunc.attributes[EPILOGUE_ATTR] = ir.UnitAttr.get()
    efunc.arg_attrs = ir.ArrayAttr.get(
        [ir.DictAttr.get({})] + [ir.DictAttr.get({SUBSPAN_ATTR: subspans[e.binding]}) for e in problem.epilogue])
    block = efunc.add_entry_block()
    ip = ir.InsertionPoint(block)
    args = list(block.arguments)
    current, value, nxt = args[0], contraction.results[0], 1
    constants: dict = {}
    for gen in chain:
        gblock = gen.regions[0].blocks[0]
        local = {}
        for barg, operand in zip(list(gblock.arguments), list(gen.operands)[:-1]):
            if operand == value:
                local[barg] = current
            else:
                local[barg] = args[nxt]
                nxt += 1
        for o in (o.operation for o in gblock.operations):
            if o.name == "linalg.yield":
                current = local[o.operands[0]]
                break
            for v in o.operands:
                if v not in local:  # a constant captured from outside the generic (select checked)
                    if v not in constants:
                        constants[v] = defining_op(v).clone(ip).results[0]
                    local[v] = constants[v]
            clone_into([o], ip, local)
        value = gen.results[0]
    with func.location, ip:
        func_d.ReturnOp([current])
    if nxt != len(args):
        raise CodegenError(f"the epilogue reads {nxt - 1} inputs, select recorded {len(args) - 1}", stage=NAME)
    return efunc


def normalize(module: ir.Module, func: ir.Operation) -> list[str]:
    """Rewrite ``func`` into canonical form if it needs it; return what was done (for the log)."""
    problem, cfg = read_problem(func), read_config(func)
    done = []
    unaligned = [d for d, t in (("m", cfg.tile_m), ("n", cfg.tile_n), ("k", cfg.tile_k))
                 if getattr(problem, d) is not None and getattr(problem, d) % t]
    if unaligned:
        done.append(f"iteration space rounded up to whole tiles ({', '.join(unaligned)} unaligned)")
    if problem.has_epilogue:
        done.append(f"epilogue ({' '.join(problem.epilogue_ops)}) moved into a function")
    if problem.is_dynamic:
        names = ", ".join(d.dim for d in problem.dynamic)
        done.append(f"dynamic {names}: the script sees two tiles each; the sizes moved into a function")
    if not done:
        return done
    if problem.bindings is None:
        raise CodegenError("a matmul whose bindings are unknown cannot be normalized", stage=NAME)
    by_binding = {ir.IntegerAttr(op.attributes["binding"]).value: op
                  for op in ops_named(func, "hal.interface.binding.subspan")}
    missing = [b for b in list(problem.bindings) + [e.binding for e in problem.epilogue] if b not in by_binding]
    if missing:
        raise CodegenError(f"no subspan for binding {missing[0]}", stage=NAME)
    with module.context, func.location:
        if problem.has_epilogue:
            subspans = {e.binding: ir.DictAttr.get(subspan_attributes(by_binding[e.binding]))
                        for e in problem.epilogue}
            _epilogue_function(func, problem, subspans)
        if problem.is_dynamic:
            ordinals = {ir.IntegerAttr(o.attributes["ordinal"]).value: o.results[0]
                        for o in ops_named(func, "iree_tensor_ext.dispatch.workload.ordinal")}
            dynamic.sizes_function(func, problem, {d.dim: ordinals[d.ordinal] for d in problem.dynamic})
        subs = {role: subspan_attributes(by_binding[b]) for role, b in zip("ABC", problem.bindings)}
        body = canonical_body(padded_problem(problem, cfg), subs)
        name = str_attr(func, "sym_name")
        attrs = ", ".join(f"{n} = {func.attributes[n]}" for n in func.attributes
                          if n not in ("sym_name", "function_type", "sym_visibility"))
        text = f"func.func @{name}() attributes {{{attrs}}} {{\n{body}\n}}"
        new = parse_module(text, module.context, source=f"{name} (normalized)")
        (new_func,) = ops_named(new.operation, "func.func")
        ir.InsertionPoint(func).insert(new_func.detach_from_parent())
        func.erase()
    return done
