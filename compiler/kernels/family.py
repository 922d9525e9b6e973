"""The kernel-family protocol: what the pipeline may ask of a family, through ``registry``.

A contraction family (a matmul kernel reached through the transform script) answers:

    sole(target, problem)        only this family computes these types on the target
    refusal(target, problem)     why it does not take a problem it alone computes (None: it does)
    require(target, problem)     raise ``UnsupportedError`` naming what the target has, if nothing of
                                 this family computes the types
    owns(intrinsic, cfg)         whether a config (its catalogue instruction, its fields) is
                                 this family's
    configure(target, problem, overrides, why)
                                 its config and instruction, or None where it declines (the reason
                                 in ``why``); a config it cannot take with the overrides raises
    explain(target, problem, overrides, why)
                                 the heuristic's reasons into ``why``; False where it declines
    distribute(module, func)     plan and emit the per-lane kernel in place; returns the plan
                                 (``describe()``, ``notes``, ``expectations()``)
    shared_bytes(cfg, intrinsic, problem, target)
                                 the shared memory (LDS) one kernel allocates
    grid(cfg, problem)           a constant grid (x, y, z) where the family sets its own (None: one
                                 workgroup per output tile, the pipeline's default)
    min_ptx_version(cfg)         the PTX ISA version its code needs (0: the target's own)
    candidates(target, problem)  the configs `mmaflow tune` times for a problem, as --config
                                 overrides ([] where it offers none; each is resolved and
                                 validated before it is built)
    fit(target, problem, overrides, measured)
                                 a tuning-table entry's overrides, measured at ``measured``
                                 (batch, M, N, K), fitted to ``problem``: (overrides, a note
                                 saying what changed, or None), or None where they hold nothing
                                 of this family's to fit (before they are validated: an entry's
                                 value may not take ``problem`` until fitted)

A direct family (one that builds its kernel without the script) answers:

    plan(record, target)         its plan, or ``UnsupportedError`` with the reason it refuses
    placements(op)               where each operand lives (bindings, offsets, orders) and the
                                 consumers the kernel computes with the op
    lower(func)                  replace the dispatch by the kernel; returns (kernel, plan) with
                                 the plan's ``grid``, ``workgroup_size``, ``wave_size``, ``describe()``

A family imports ``core``, ``target`` and ``kernels.common`` only (import contracts in pyproject.toml).
"""

from __future__ import annotations

from typing import Protocol

from iree.compiler import ir

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.problem import Contraction


class ContractionFamily(Protocol):
    name: str  # short, as in logs and --config intrinsic names' families
    title: str  # in sentences: "the warpgroup-MMA kernel"

    def sole(self, target, problem: Contraction) -> bool: ...
    def refusal(self, target, problem: Contraction) -> str | None: ...
    def require(self, target, problem: Contraction) -> None: ...
    def owns(self, intrinsic, cfg: KernelConfig | None = None) -> bool: ...
    def configure(self, target, problem: Contraction, overrides: dict, why: list) -> tuple | None: ...
    def explain(self, target, problem: Contraction, overrides: dict, why: list) -> bool: ...
    def distribute(self, module: ir.Module, func: ir.Operation): ...
    def shared_bytes(self, cfg: KernelConfig, intrinsic, problem: Contraction, target) -> int: ...
    def grid(self, cfg: KernelConfig, problem: Contraction) -> tuple[int, int, int] | None: ...
    def min_ptx_version(self, cfg: KernelConfig) -> int: ...
    def candidates(self, target, problem: Contraction) -> list[dict]: ...
    def fit(self, target, problem: Contraction, overrides: dict, measured: tuple) -> tuple[dict, str | None] | None: ...


class DirectFamily(Protocol):
    name: str
    title: str

    def plan(self, record, target): ...
    def placements(self, op: ir.Operation) -> tuple: ...
    def lower(self, func: ir.Operation) -> tuple: ...
