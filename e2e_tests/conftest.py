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
from mmaflow.runtime.modules import dynamic_module, epilogue_module, matmul_module, matmul_source  # noqa: F401
from mmaflow.runtime.simulate import check_matmul

ALL_TARGETS = ["gfx1100", "gfx1201", "gfx942", "gfx950", "sm_80", "sm_90a"]


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
             epilogue=None, sizes: dict | None = None):
    text, problem = handed_back(source, target, tuple(sorted((overrides or {}).items())))
    module = parse_module(text, new_context())
    return check_matmul(module, json.loads(problem), seed=seed, exact=exact, epilogue=epilogue, sizes=sizes)


@pytest.fixture
def sim():
    return simulate
