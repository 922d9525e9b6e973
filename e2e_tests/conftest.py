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
                  batch=0, unsigned=False) -> str:
    """A linalg matmul module (optionally transposed operands, batch, unsigned i8 inputs)."""
    if not (transpose_a or transpose_b or batch or unsigned):
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


@functools.lru_cache(maxsize=256)
def handed_back(source: str, target: str, overrides: tuple = ()) -> tuple[str, str]:
    """(hal.executable text after hand-back, problem JSON) for the module's one matmul."""
    res = codegen_module(source, target, options=CodegenOptions(overrides=dict(overrides)))
    (exe,) = res.taken
    ctx = new_context()
    module = parse_module(exe.text, ctx)
    problem = ir.StringAttr(selected_func(module).attributes[PROBLEM_ATTR]).value
    return exe.text, problem


def simulate(source: str, target: str, overrides: dict | None = None, *, seed: int = 0, exact: bool = False):
    text, problem = handed_back(source, target, tuple(sorted((overrides or {}).items())))
    module = parse_module(text, new_context())
    return check_matmul(module, json.loads(problem), seed=seed, exact=exact)


@pytest.fixture
def sim():
    return simulate
