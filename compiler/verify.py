"""Guards against IREE's silent fallbacks.

IREE exits 0 when a transform library fails to load or a substitution misses, and compiles the
dispatch with its own pipeline. mmaflow checks instead of trusting:

- ``check_handed_back``: the executable we return is ours (no_pipeline translation_info with a
  workgroup size, a dispatch_config, the intended matrix op, no leftover vector.contract);
- ``check_isa``: after IREE lowered it, the dispatch's ISA holds the intended matrix
  instruction, and on AMD 128-bit buffer loads, barriers, and no cache invalidates in the K loop.
"""

from __future__ import annotations

from .errors import VerificationError
from .isa import IsaReport
from .mlir import new_context, ops_named, parse_module
from .stages.configure import CONFIG_ATTR, read_config, read_target


def check_handed_back(text: str, name: str) -> None:
    ctx = new_context()
    module = parse_module(text, ctx, source=name)
    funcs = [f for f in ops_named(module.operation, "func.func") if CONFIG_ATTR in f.attributes]
    if len(funcs) != 1:
        raise VerificationError(f"{name}: the returned executable has no mmaflow function")
    func = funcs[0]
    ti = str(func.attributes["translation_info"]) if "translation_info" in func.attributes else ""
    if "no_pipeline" not in ti or "workgroup_size" not in ti:
        raise VerificationError(f"{name}: the function is not handed back (translation_info: {ti or 'none'})")
    configs = ops_named(module.operation, "iree_codegen.dispatch_config")
    if len(configs) != 1:
        raise VerificationError(f"{name}: expected one iree_codegen.dispatch_config, found {len(configs)}")
    intr = read_target(func).intrinsic(read_config(func).intrinsic)
    if not ops_named(func, intr.op):
        raise VerificationError(f"{name}: the function has no {intr.op}")
    left = ops_named(func, "vector.contract", "vector.transfer_read", "vector.transfer_write")
    if left:
        raise VerificationError(f"{name}: {left[0].name} was not distributed")


def check_isa(report: IsaReport, name: str, mnemonic: str, vendor: str, expect_barrier: bool) -> None:
    """Raise unless the lowered kernel is the one mmaflow generated."""
    problems = []
    if report.counts.get("matrix", 0) == 0:
        problems.append(f"no matrix instruction ({mnemonic}) in the ISA")
    if vendor == "amd":
        if report.counts.get("global_load_b128", 0) == 0:
            problems.append("no 128-bit buffer loads")
        if report.loop_counts.get("cache_invalidate", 0):
            problems.append(f"{report.loop_counts['cache_invalidate']} cache invalidates inside the K loop")
    if expect_barrier and report.counts.get("barrier", 0) == 0:
        problems.append("no workgroup barrier although LDS is shared between waves")
    if not report.has_loop:
        problems.append("no K loop in the ISA")
    if problems:
        raise VerificationError(f"{name}: the compiled kernel is not mmaflow's: " + "; ".join(problems),
                                hint="IREE may have fallen back to its own codegen; compare with --dump-after isa")


def mnemonic_present(isa_text: str, mnemonic: str) -> bool:
    return mnemonic in isa_text
