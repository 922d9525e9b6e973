"""Stage `pad`: round an unaligned matmul's iteration space up to whole tiles (types only).

When M, N or K is not a multiple of the config's tile, the dispatch is rewritten into its
canonical form -- bindings, dispatch.tensor loads, zero fill, one ``linalg.generic`` contraction
(tagged ``mmaflow.contraction``) and the store -- with every dimension rounded up to the tile.
No data is copied or padded: the script then tiles full tiles only, and `distribute` re-types
the bindings to their true shapes and bounds every global access (``mmaflow.problem`` keeps the
true sizes). Aligned dispatches pass through untouched.
"""

from __future__ import annotations

import math
import re

from iree.compiler import ir

from ..errors import CodegenError
from ..mlir import ops_named, parse_module, print_op, str_attr
from ..problem import Contraction
from .configure import read_config, read_problem
from .select import CONTRACTION_ATTR

NAME = "pad"


def padded_problem(problem: Contraction, cfg) -> Contraction:
    from dataclasses import replace
    up = lambda d, t: math.ceil(d / t) * t  # noqa: E731
    return replace(problem, m=up(problem.m, cfg.tile_m), n=up(problem.n, cfg.tile_n), k=up(problem.k, cfg.tile_k))


def is_aligned(problem: Contraction, cfg) -> bool:
    return padded_problem(problem, cfg) == problem


def operand_shapes(p: Contraction) -> dict[str, list[int]]:
    """Storage shapes of A, B, C (batch leading, transposition applied)."""
    lead = [p.batch] if p.batched else []
    return {"A": lead + ([p.k, p.m] if p.a_transposed else [p.m, p.k]),
            "B": lead + ([p.n, p.k] if p.b_transposed else [p.k, p.n]),
            "C": lead + [p.m, p.n]}


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


def canonical_body(p: Contraction, subspans: dict[str, str]) -> str:
    """The dispatch body for problem ``p`` (already rounded up), given each binding's subspan
    op text (its layout, flags, alignment are kept)."""
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
        text = subspans[role]
        text = re.sub(r":\s*!iree_tensor_ext\.dispatch\.tensor<[^>]*>>?\s*$", "", text.strip())
        text = re.sub(r"^%\S+\s*=\s*", "", text)
        text = re.sub(r"offset\(%\w+\)", "offset(%c0)", text)
        lines.append(f"%{role}_binding = {text} : !iree_tensor_ext.dispatch.tensor<{access}:"
                     f"{_tensor(shapes[role], elems[role])}>")
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


def pad(module: ir.Module, func: ir.Operation) -> bool:
    """Rewrite ``func`` in place when the problem is unaligned; return whether it did."""
    problem, cfg = read_problem(func), read_config(func)
    if is_aligned(problem, cfg):
        return False
    if problem.bindings is None:
        raise CodegenError("an unaligned matmul whose bindings are unknown cannot be padded", stage=NAME)
    subs = {}
    for op in ops_named(func, "hal.interface.binding.subspan"):
        b = ir.IntegerAttr(op.attributes["binding"]).value
        for role, idx in zip("ABC", problem.bindings):
            if b == idx:
                subs[role] = print_op(op)
    if set(subs) != set("ABC"):
        raise CodegenError("could not find the subspans of A, B and C", stage=NAME)
    body = canonical_body(padded_problem(problem, cfg), subs)
    name = str_attr(func, "sym_name")
    attrs = ", ".join(f"{n} = {func.attributes[n]}" for n in func.attributes
                      if n not in ("sym_name", "function_type", "sym_visibility"))
    text = f"func.func @{name}() attributes {{{attrs}}} {{\n{body}\n}}"
    new = parse_module(text, module.context, source=f"{name} (padded)")
    (new_func,) = ops_named(new.operation, "func.func")
    ir.InsertionPoint(func).insert(new_func.detach_from_parent())
    func.erase()
    return True
