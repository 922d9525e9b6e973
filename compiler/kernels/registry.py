"""The kernel registry: the one place that knows which kernel families exist and in which order
they are asked. The pipeline reaches kernels only through these functions (never by a family's
name), as IREE's pipelines reach kernels through attributes and ukernel matching.

Contraction families (through the transform script) are asked in ``CONTRACTION``'s order: the
first whose ``configure`` returns a config takes the dispatch. Direct families (building their
kernel without the script) are found by the dispatch they take (``DIRECT``). The protocol each
answers is ``family.py``'s.
"""

from __future__ import annotations

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.attention.family import FAMILY as FLASH_ATTENTION
from mmaflow.compiler.kernels.common.tiles import require_intrinsic
from mmaflow.compiler.kernels.copy.family import FAMILY as COPY
from mmaflow.compiler.kernels.decode.family import FAMILY as DECODE
from mmaflow.compiler.kernels.decode.family import WEIGHT_ONLY
from mmaflow.compiler.kernels.family import ContractionFamily, DirectFamily
from mmaflow.compiler.kernels.matmul.family import FAMILY as MATMUL
from mmaflow.compiler.kernels.wgmma.family import FAMILY as WGMMA
from mmaflow.compiler.target import tuning

# Asked in this order: the decode kernel takes an M that fits two instruction row tiles (B streamed
# once: whatever N, no tile of the others reads B faster); the Hopper warpgroup kernel declines
# (with its reason) what it does not pay for; the mma.sync / WMMA / MFMA kernel takes every
# problem the catalogue computes.
CONTRACTION: tuple[ContractionFamily, ...] = (DECODE, WGMMA, MATMUL)
# Direct families by the dispatch they take (``select`` tags it).
DIRECT: dict[str, DirectFamily] = {"attention": FLASH_ATTENTION, "weight_only": WEIGHT_ONLY, "copy": COPY}


def families() -> list:
    """Every family, contraction ones first (for listings: ``mmaflow report``, the docs)."""
    return [*CONTRACTION, *DIRECT.values()]


def sole_family(target, problem: Contraction) -> ContractionFamily | None:
    """The family that alone computes ``problem``'s types on ``target`` (fp8 on sm_90a: the
    warpgroup kernel), or None where the general one does."""
    return next((f for f in CONTRACTION if f.sole(target, problem)), None)


def require_instruction(target, problem: Contraction) -> None:
    """Raise ``UnsupportedError`` naming what the target's matrix instructions compute, unless
    one computes ``problem``'s types (a ``sole_family`` problem is that family's to refuse)."""
    if sole_family(target, problem) is None:
        require_intrinsic(target, problem)


def family_of(target, cfg: KernelConfig) -> ContractionFamily:
    """The family whose kernel ``cfg`` configures (its instruction, and for the decode kernel its
    ``waves_k``)."""
    intr = target.intrinsic(cfg.intrinsic)
    return next(f for f in CONTRACTION if f.owns(intr, cfg))


def resolve(target, problem: Contraction, overrides: dict | None = None) -> tuple[KernelConfig, object]:
    """The config of ``problem`` from the families' heuristics (the first family that configures
    it), the user's overrides applied and validated, and its instruction. No tuning table: see
    ``choose``."""
    overrides = dict(overrides or {})
    for family in CONTRACTION:
        chosen = family.configure(target, problem, overrides, [])
        if chosen:
            return chosen
    raise UnsupportedError(f"no kernel family configures {problem.describe()} on {target.name}")


def choose(
    target, problem: Contraction, overrides: dict | None = None, *, tuned: bool = True
) -> tuple[KernelConfig, object, str]:
    """What stage `configure` runs: the config of ``problem`` and its instruction, and which source
    chose it. Without ``--config``, a static problem's entry in the target's measured tuning table
    (``target/tuning.py``) comes first; an entry whose config does not take the problem (a tile the
    problem cannot hold) gives way to the heuristic, and the source says why. ``tuned=False``: the
    heuristic alone (`mmaflow tune`'s baseline)."""
    overrides = dict(overrides or {})
    entry, source = _table_entry(target, problem, overrides) if tuned else (None, "the heuristic (table not asked)")
    if entry is not None:
        try:
            asked, note = _fitted(target, problem, entry)
            cfg, intr = resolve(target, problem, asked)
            return cfg, intr, source + (f"; {note}" if note else "")
        except (ConfigError, UnsupportedError) as e:
            source = f"the heuristic: {source}; its config does not take {problem.describe()}: {e}"
    cfg, intr = resolve(target, problem, overrides)
    return cfg, intr, source


def _fitted(target, problem: Contraction, entry) -> tuple[dict, str | None]:
    """A table entry's overrides fitted to ``problem`` (the entry was measured at one shape of its
    class: ``entry.shape``) by the first family that fits them (None: not its to fit), and the
    note saying how; unchanged where none does."""
    for family in CONTRACTION:
        fitted = family.fit(target, problem, dict(entry.config), tuple(entry.shape))
        if fitted is not None:
            return fitted
    return dict(entry.config), None


def _table_entry(target, problem: Contraction, overrides: dict) -> tuple[object, str]:
    """(the tuning-table entry that configures ``problem``, or None; the source line)."""
    if overrides:
        return None, "--config and the heuristic (a tuning table is not consulted under --config)"
    table = tuning.table(target.name)
    if table is None:
        return None, f"the heuristic (no tuning table for {target.name})"
    cls = tuning.shape_class(problem)
    if cls is None:
        return None, "the heuristic (dynamic sizes: the tuning table holds static shape classes)"
    entry = table.lookup(problem)
    if entry is None:
        return None, f"the heuristic (tuning table {target.name} has no entry for {cls.key()})"
    return entry, table.source(entry)


def explain(target, problem: Contraction, overrides: dict | None = None) -> list[str]:
    """Why the config of ``problem`` is what it is: the source that chose it, the heuristic's
    reasons (for a table entry's config, the families' reasons for those overrides), then the
    overrides."""
    overrides = dict(overrides or {})
    _, _, source = choose(target, problem, overrides)
    entry, _ = _table_entry(target, problem, overrides)
    asked = _fitted(target, problem, entry)[0] if entry is not None and source.startswith("tuning table") else overrides
    why: list[str] = []
    for family in CONTRACTION:
        if family.explain(target, problem, dict(asked), why):
            break
    if asked is not overrides:  # the families' "--config K" is the table entry's here
        why = [w.replace("--config ", "the table entry's ") for w in why]
    why.insert(0, f"chosen by {source}")
    why += [f"{k} = {v}: from --config" for k, v in sorted(overrides.items())]
    return why


def candidates(target, problem: Contraction) -> list[dict]:
    """Every family's `mmaflow tune` candidates for ``problem`` (``--config`` overrides, in the
    registry's order; unvalidated: the tuner resolves each)."""
    return [c for family in CONTRACTION for c in family.candidates(target, problem)]


def distribute(module, func, target, cfg: KernelConfig):
    """Plan and emit the per-lane kernel of ``func`` with the family its config names."""
    return family_of(target, cfg).distribute(module, func)


def shared_bytes(target, cfg: KernelConfig, intrinsic, problem: Contraction) -> int:
    """The shared memory (LDS) the kernel of ``cfg`` allocates."""
    return family_of(target, cfg).shared_bytes(cfg, intrinsic, problem, target)


def grid(target, cfg: KernelConfig, problem: Contraction) -> tuple[int, int, int] | None:
    """A constant grid where the family sets its own (a persistent grid), else None."""
    return family_of(target, cfg).grid(cfg, problem)


def min_ptx_version(target, cfg: KernelConfig) -> int:
    """The PTX ISA version the kernel of ``cfg`` needs (0: the target's own)."""
    return family_of(target, cfg).min_ptx_version(cfg)


def small_m(target, problem: Contraction) -> int:
    """The largest M a family specialises for ``problem``'s types and layout on ``target`` (the
    decode kernel), 0 where none does: a dynamic M is versioned on it (stage `version`)."""
    return DECODE.small_m(target, problem)


def direct_family(kind: str) -> DirectFamily:
    """The direct family that takes dispatches of ``kind`` (``"attention"``, ``"weight_only"``, ``"copy"``)."""
    return DIRECT[kind]
