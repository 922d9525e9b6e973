"""Stage `configure`: choose the kernel config for the selected contraction.

Reads ``mmaflow.target`` and ``mmaflow.problem`` (set by `select`), applies the heuristic and the
user's overrides, validates, and records the result on the function as ``mmaflow.config`` (a
dictionary attribute) so that later stages, and anyone reading the dump, see the numbers used.
"""

from __future__ import annotations

import json

from iree.compiler import ir

from ..config import KernelConfig, resolve
from ..errors import CodegenError, MmaflowError
from ..problem import Contraction
from ..targets import Target, get_target
from .select import PROBLEM_ATTR, TARGET_ATTR

NAME = "configure"
CONFIG_ATTR = "mmaflow.config"


def read_target(func: ir.Operation) -> Target:
    return get_target(ir.StringAttr(func.attributes[TARGET_ATTR]).value)


def read_problem(func: ir.Operation) -> Contraction:
    return Contraction.from_json(ir.StringAttr(func.attributes[PROBLEM_ATTR]).value)


def read_config(func: ir.Operation) -> KernelConfig:
    if CONFIG_ATTR not in func.attributes:
        raise CodegenError(f"function has no {CONFIG_ATTR}; run the configure stage first")
    d = ir.DictAttr(func.attributes[CONFIG_ATTR])
    out = {}
    for i in range(len(d)):
        named = d[i]
        attr = named.attr
        out[named.name] = attr.value if isinstance(attr, ir.StringAttr) else ir.IntegerAttr(attr).value
    return KernelConfig.from_dict(out)


def write_config(func: ir.Operation, cfg: KernelConfig) -> None:
    with func.context:
        i64 = ir.IntegerType.get_signless(64)
        entries = {k: (ir.StringAttr.get(v) if isinstance(v, str) else ir.IntegerAttr.get(i64, v))
                   for k, v in sorted(cfg.to_dict().items())}
        func.attributes[CONFIG_ATTR] = ir.DictAttr.get(entries)


def configure(func: ir.Operation, overrides: dict | None) -> KernelConfig:
    target, problem = read_target(func), read_problem(func)
    try:
        cfg, _ = resolve(target, problem.estimate(), overrides)  # dynamic sizes: configured as if large
    except MmaflowError as e:
        e.stage = e.stage or NAME
        raise
    write_config(func, cfg)
    return cfg


def describe(func: ir.Operation) -> str:
    return json.dumps(read_config(func).to_dict(), sort_keys=True)
