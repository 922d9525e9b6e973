"""Stage `configure`: choose the kernel config for the selected contraction.

Reads ``mmaflow.target`` and ``mmaflow.problem`` (set by `select`), applies the measured tuning
table or the heuristic and the user's overrides (``registry.choose``), validates, and records
the result on the function as ``mmaflow.config`` (a dictionary attribute) so that later stages,
and anyone reading the dump, see the numbers used.
"""

from __future__ import annotations

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import MmaflowError
from mmaflow.compiler.kernels.registry import choose
from mmaflow.compiler.target.targets import read_target

NAME = "configure"


def configure(func: ir.Operation, overrides: dict | None, tuned: bool = True) -> tuple[KernelConfig, str]:
    """The config, recorded on ``func``, and which source chose it (a tuning-table entry, the
    heuristic, --config, or stage `version`)."""
    target, problem = read_target(func), attrs.read_problem(func)
    if attrs.VERSION in func.attributes:  # a version's copy: the config stage `version` planned for it
        planned = attrs.read_version(func).config
        if planned is not None:
            attrs.write_config(func, planned)
            return planned, "stage `version` (planned for its bound)"
    try:
        # (dynamic sizes: configured as if large)
        cfg, _, source = choose(target, problem.estimate(), overrides, tuned=tuned)
    except MmaflowError as e:
        e.stage = e.stage or NAME
        raise
    attrs.write_config(func, cfg)
    return cfg, source
