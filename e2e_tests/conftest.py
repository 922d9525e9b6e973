"""Shared helpers for the end-to-end tests: build matmul modules, run mmaflow's pipeline on them
(IREE front + mmaflow stages, no GPU needed) and execute the result on the lane executor."""

from __future__ import annotations

import functools
import json

import pytest
from iree.compiler import ir

from mmaflow.compiler.bridge import codegen_module
from mmaflow.compiler.mlir import new_context, parse_module
from mmaflow.compiler.pipeline import CodegenOptions
from mmaflow.compiler.stages.select import PROBLEM_ATTR, selected_func
from mmaflow.runtime.bench import matmul_source
from mmaflow.runtime.simulate import check_matmul

ALL_TARGETS = ["gfx1100", "gfx1201", "gfx942", "gfx950", "sm_80", "sm_90a"]


def matmul_module(m, n, k, in_type="f16", out_type="f32", *, transpose_a=False, transpose_b=False,
                  batch=0, unsigned=False, generic=False) -> str:
    """A linalg matmul module (optionally transposed operands, batch, unsigned i8 inputs); plain
    ones as linalg.matmul unless ``generic``."""
    if not (transpose_a or transpose_b or batch or unsigned or generic):
        return matmul_source(m, n, k, in_type, out_type)
    lead = f"{batch}x" if batch else ""
    a_shape = f"{lead}{k}x{m}" if transpose_a else f"{lead}{m}x{k}"
    b_shape = f"{lead}{n}x{k}" if transpose_b else f"{lead}{k}x{n}"
    c_shape = f"{lead}{m}x{n}"
    b_dims = "b, " if batch else ""
    dims = "(b, m, n, k)" if batch else "(m, n, k)"
    a_map = f"affine_map<{dims} -> ({b_dims}{'k, m' if transpose_a else 'm, k'})>"
    b_map = f"affine_map<{dims} -> ({b_dims}{'n, k' if transpose_b else 'k, n'})>"
    c_map = f"affine_map<{dims} -> ({b_dims}m, n)>"
    iters = ('"parallel", ' if batch else "") + '"parallel", "parallel", "reduction"'
    zero = "0" if out_type.startswith("i") else "0.0"
    if in_type.startswith("i"):
        ext = "arith.extui" if unsigned else "arith.extsi"
        mul, add = "arith.muli", "arith.addi"
    else:
        ext, mul, add = "arith.extf", "arith.mulf", "arith.addf"
    if in_type == out_type:  # no widening (f16 x f16 -> f16)
        conv, xe, ye = "", "%x", "%y"
    else:
        conv = f"    %xe = {ext} %x : {in_type} to {out_type}\n    %ye = {ext} %y : {in_type} to {out_type}\n"
        xe, ye = "%xe", "%ye"
    return (f"func.func @matmul(%a: tensor<{a_shape}x{in_type}>, %b: tensor<{b_shape}x{in_type}>) -> tensor<{c_shape}x{out_type}> {{\n"
            f"  %zero = arith.constant {zero} : {out_type}\n"
            f"  %e = tensor.empty() : tensor<{c_shape}x{out_type}>\n"
            f"  %f = linalg.fill ins(%zero : {out_type}) outs(%e : tensor<{c_shape}x{out_type}>) -> tensor<{c_shape}x{out_type}>\n"
            f"  %r = linalg.generic {{indexing_maps = [{a_map}, {b_map}, {c_map}], iterator_types = [{iters}]}}\n"
            f"       ins(%a, %b : tensor<{a_shape}x{in_type}>, tensor<{b_shape}x{in_type}>) outs(%f : tensor<{c_shape}x{out_type}>) {{\n"
            f"  ^bb0(%x: {in_type}, %y: {in_type}, %acc: {out_type}):\n"
            f"{conv}"
            f"    %p = {mul} {xe}, {ye} : {out_type}\n"
            f"    %s = {add} %acc, %p : {out_type}\n"
            f"    linalg.yield %s : {out_type}\n"
            f"  }} -> tensor<{c_shape}x{out_type}>\n"
            f"  return %r : tensor<{c_shape}x{out_type}>\n}}\n")


def epilogue_module(m, n, k, in_type="f16", acc_type="f32", *, out_type, inputs=(), body: str,
                    batch=0, transpose_b=False) -> str:
    """A matmul followed by one elementwise linalg.generic (which IREE fuses into the dispatch).

    ``inputs``: (element type, dims) of the epilogue's extra tensors, dims drawn from "b", "m",
    "n" (a bias over columns is ("n",)). ``body``: the generic's body; it sees %acc (the
    matmul's element), %x0, %x1, ... (the inputs' elements) and must define %res : out_type."""
    mm = matmul_module(m, n, k, in_type, acc_type, transpose_b=transpose_b, batch=batch, generic=True)
    sizes = {"b": batch, "m": m, "n": n}
    loops = (["b"] if batch else []) + ["m", "n"]
    dims = ", ".join(f"d{i}" for i in range(len(loops)))
    c_shape = "x".join(str(sizes[d]) for d in loops)
    args, ins, types, maps, bargs = [], ["%r"], [f"tensor<{c_shape}x{acc_type}>"], [], []
    ident = f"affine_map<({dims}) -> ({dims})>"
    maps.append(ident)
    for i, (t, idims) in enumerate(inputs):
        shape = "x".join(str(sizes[d]) for d in idims)
        args.append(f"%in{i}: tensor<{shape}x{t}>")
        ins.append(f"%in{i}")
        types.append(f"tensor<{shape}x{t}>")
        maps.append(f"affine_map<({dims}) -> ({', '.join(f'd{loops.index(d)}' for d in idims)})>")
        bargs.append(f"%x{i}: {t}")
    maps.append(ident)
    head, rest = mm.split(") -> ", 1)
    head += "".join(", " + a for a in args)
    ret_t = f"tensor<{c_shape}x{out_type}>"
    rest = rest.split(" {\n", 1)[1]
    rest = rest.replace(f"  return %r : tensor<{c_shape}x{acc_type}>\n}}\n", "")
    iters = ", ".join(['"parallel"'] * len(loops))
    epi = (f"  %e2 = tensor.empty() : {ret_t}\n"
           f"  %res_t = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iters}]}}\n"
           f"       ins({', '.join(ins)} : {', '.join(types)}) outs(%e2 : {ret_t}) {{\n"
           f"  ^bb0(%acc: {acc_type}, {''.join(b + ', ' for b in bargs)}%o: {out_type}):\n"
           + "".join(f"    {line.strip()}\n" for line in body.strip().splitlines()) +
           f"    linalg.yield %res : {out_type}\n"
           f"  }} -> {ret_t}\n"
           f"  return %res_t : {ret_t}\n}}\n")
    return f"{head}) -> {ret_t} {{\n{rest}{epi}"


@functools.lru_cache(maxsize=256)
def handed_back(source: str, target: str, overrides: tuple = ()) -> tuple[str, str]:
    """(hal.executable text after hand-back, problem JSON) for the module's one matmul."""
    res = codegen_module(source, target, options=CodegenOptions(overrides=dict(overrides)))
    (exe,) = res.taken
    ctx = new_context()
    module = parse_module(exe.text, ctx)
    problem = ir.StringAttr(selected_func(module).attributes[PROBLEM_ATTR]).value
    return exe.text, problem


def simulate(source: str, target: str, overrides: dict | None = None, *, seed: int = 0, exact: bool = False,
             epilogue=None):
    text, problem = handed_back(source, target, tuple(sorted((overrides or {}).items())))
    module = parse_module(text, new_context())
    return check_matmul(module, json.loads(problem), seed=seed, exact=exact, epilogue=epilogue)


@pytest.fixture
def sim():
    return simulate
