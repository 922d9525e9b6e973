"""Guards against IREE's silent fallbacks.

IREE exits 0 when a transform library fails to load or a substitution misses, and compiles the
dispatch with its own pipeline. mmaflow checks instead of trusting:

- ``check_handed_back``: the executable we return is ours (no_pipeline translation_info with a
  workgroup size, a dispatch_config, the intended matrix op, no leftover vector.contract);
- ``check_attention_isa``: the flash-attention kernel's ISA: matrix instructions (as many per
  key tile as planned in the key loop), barriers; PTX: row reductions by shfl.sync.bfly, exp2 by
  ex2.approx, cp.async when planned, no local memory (spills); AMD: v_exp_f32, no spills or
  scratch;
- ``check_dispatch_isa``: ``check_isa`` for each kernel of a dispatch (a versioned one, stage
  `version`, holds a kernel and export per version: each is checked in its own ISA);
- ``check_isa``: after IREE lowered it, the dispatch's ISA holds the intended matrix
  instruction, global loads of the planned width, barriers (as many per K tile as planned), a
  K loop, and on AMD no cache invalidates in the K loop.

``check_kernel`` and ``verified`` reach each kind of kernel (``results.DispatchFacts.kind``: the matmul
families', and each direct family's) through one table, ``KINDS``: the callers (the bridge, ``mmaflow
verify``, ``mmaflow compile``'s summary) name no kind.
"""

from __future__ import annotations

import re

from iree.compiler import ir
from iree.compiler.dialects import iree_codegen

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import VerificationError
from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module, str_attr
from mmaflow.compiler.target.intrinsics import F8F6F4_FORMATS
from mmaflow.compiler.target.isa import IsaReport, loop_barriers, parse_isa, split_kernels
from mmaflow.compiler.target.targets import Vendor, read_target


def handed_back(func: ir.Operation) -> tuple[list[int], int] | None:
    """(workgroup size, subgroup size) when ``func`` carries a no_pipeline translation_info with
    a workgroup size (IREE then only lowers it), else None."""
    if "translation_info" not in func.attributes:
        return None
    ti = iree_codegen.TranslationInfoAttr(func.attributes["translation_info"])
    if not iree_codegen.NoPipelineAttr.isinstance(ti.pass_pipeline) or not ti.workgroup_size:
        return None
    return list(ti.workgroup_size), ti.subgroup_size


def check_handed_back(text: str, name: str, ctx: ir.Context | None = None) -> None:
    """The executable printed in ``text`` (what the hook tool returns) holds the handed-back
    mmaflow function with its matrix instructions and nothing left undistributed."""
    ctx = ctx or new_context()
    module = parse_module(text, ctx, source=name)
    func = attrs.dispatch_func(module.operation)
    if func is None:
        raise VerificationError(f"{name}: the returned executable has no mmaflow function")
    if handed_back(func) is None:
        ti = func.attributes["translation_info"] if "translation_info" in func.attributes else "none"
        raise VerificationError(f"{name}: the function is not handed back (translation_info: {ti})")
    versions = attrs.read_versions(func)
    own = str_attr(func, "sym_name")
    chain = [v.export for v in versions] + [own]  # each version's export falls back to the next, the last to the own
    funcs = {str_attr(f, "sym_name"): f for f in ops_named(module.operation, "func.func")}
    configs = [
        ir.FlatSymbolRefAttr(c.attributes["function_ref"]).value
        for c in ops_named(module.operation, "iree_codegen.dispatch_config")
    ]
    exports = {str_attr(e, "sym_name"): e for e in ops_named(module.operation, "hal.executable.export")}
    if sorted(exports) != sorted(chain):
        raise VerificationError(f"{name}: the exports ({', '.join(exports)}) are not the kernels' ({', '.join(chain)})")
    for at, then in zip(chain, chain[1:]):
        e = exports[at]
        fallback = (
            ir.FlatSymbolRefAttr(e.attributes["condition_fallback"]).value
            if "condition_fallback" in e.attributes
            else None
        )
        if fallback != then or not list(e.regions[1].blocks):
            raise VerificationError(f"{name}: the export {at} has no condition falling back to {then}")
    if "condition_fallback" in exports[own].attributes:
        raise VerificationError(f"{name}: the dispatch's own kernel {own} falls back to another")
    if sorted(configs) != sorted(chain):
        raise VerificationError(
            f"{name}: expected one iree_codegen.dispatch_config of each kernel ({', '.join(chain)}), "
            f"found {', '.join(configs) or 'none'}"
        )
    if attrs.ATTENTION in func.attributes:  # the flash-attention kernel: matrix instructions, no attention op left
        if not ops_named(func, "nvgpu.mma.sync", "nvvm.wgmma.mma_async", "amdgpu.mfma", "amdgpu.wmma"):
            raise VerificationError(
                f"{name}: the attention kernel has no nvgpu.mma.sync / nvvm.wgmma.mma_async / amdgpu.mfma / amdgpu.wmma"
            )
        if ops_named(func, "iree_linalg_ext.attention"):
            raise VerificationError(f"{name}: an iree_linalg_ext.attention is left in the kernel")
        return
    if attrs.COPY in func.attributes:  # the copy kernel: vector loads and stores, no dispatch tensor left
        if not ops_named(func, "vector.load", "amdgpu.raw_buffer_load"):
            raise VerificationError(f"{name}: the copy kernel has no vector.load / amdgpu.raw_buffer_load")
        if ops_named(func, "iree_tensor_ext.dispatch.tensor.load", "iree_tensor_ext.dispatch.tensor.store"):
            raise VerificationError(f"{name}: a dispatch tensor load or store is left in the copy kernel")
        return
    if attrs.WEIGHT_ONLY in func.attributes:  # the weight-only kernel: matrix instructions, no linalg left
        if not ops_named(func, "nvgpu.mma.sync", "amdgpu.mfma", "amdgpu.wmma"):
            raise VerificationError(f"{name}: the weight-only kernel has no nvgpu.mma.sync / amdgpu.mfma / amdgpu.wmma")
        if ops_named(func, "linalg.generic"):
            raise VerificationError(f"{name}: a linalg.generic is left in the weight-only kernel")
        return
    target = read_target(func)
    for kernel, cfg in zip([own] + chain[:-1], [attrs.read_config(func)] + [v.config for v in versions]):
        f = funcs.get(kernel)
        if f is None or handed_back(f) is None:
            raise VerificationError(f"{name}: the kernel {kernel} of a version is missing or not handed back")
        intr = target.intrinsic(cfg.intrinsic)
        if not ops_named(f, intr.op):
            raise VerificationError(f"{name}: the function {kernel} has no {intr.op}")
        left = ops_named(f, "vector.contract", "vector.transfer_read", "vector.transfer_write")
        if left:
            raise VerificationError(f"{name}: {left[0].name} was not distributed in {kernel}")


def load_category(expect: attrs.Expectations) -> str:
    """The ISA category of the copies' global reads: register loads, or async copies."""
    bits = expect.global_load_bits
    if expect.tma:
        return "bulk_tensor_copy"
    if expect.async_copies:
        return f"async_copy_b{bits}"
    return f"global_load_b{bits}" if bits >= 32 else "global_load_narrow"


def check_isa(
    report: IsaReport, name: str, mnemonic: str, vendor: Vendor, expect_barrier: bool, expect: attrs.Expectations
) -> None:
    """Raise unless the lowered kernel is the one mmaflow generated: the matrix instruction, the
    global loads at the width the copies were planned with (128 bits unless the problem's row length forbids it),
    barriers when waves share LDS, the plan's barriers per K tile in the K loop, a K loop when there are several K
    tiles (or, when LLVM unrolled it fully, exactly the unrolled count of matrix instructions), and on AMD no cache
    invalidates inside the loop. Matrix instructions count per K tile either all the plan's or only its live ones
    (``Expectations.live_mma_per_k_tile``: LLVM drops the blocks past a static M or N, whose results no workgroup
    stores)."""
    problems = []
    if report.counts.get("matrix", 0) == 0:
        problems.append(f"no matrix instruction ({mnemonic}) in the ISA")
    cat = load_category(expect)
    what = "async copies (cp.async)" if expect.async_copies else "global loads"
    if expect.tma:  # the TMA ring: bulk tensor copies completing on mbarriers, no per-thread copies
        if report.counts.get(cat, 0) == 0:
            problems.append("no cp.async.bulk.tensor although the ring is planned with TMA copies")
        if report.counts.get("mbarrier_wait", 0) == 0:
            problems.append("TMA copies but no mbarrier.try_wait")
        stray = sum(report.counts.get(c, 0) for c in ("async_copy_b128", "async_copy_b64", "async_copy_b32"))
        if stray:
            problems.append(f"{stray} per-thread cp.async copies in a kernel planned with TMA copies")
    elif report.counts.get(cat, 0) == 0:
        problems.append(f"no {expect.global_load_bits}-bit {what} ({cat})")
    if expect.cluster and report.isa == "ptx":  # clusters: the launch shape, B's multicast, the peers' releases
        if report.cluster_ctas != expect.cluster:
            problems.append(
                f"the kernel is planned for clusters of {expect.cluster}, the PTX asks for "
                f"{report.cluster_ctas} CTA(s) per cluster (.reqnctapercluster)"
            )
        if not report.counts.get("bulk_tensor_multicast"):
            problems.append("clusters planned, but no multicast cp.async.bulk.tensor")
        if not (report.counts.get("mapa") and report.counts.get("remote_arrive")):
            problems.append(
                "clusters planned, but no release of the peer's slots (mapa + mbarrier.arrive on a "
                "shared::cluster address)"
            )
        if report.counts.get("cluster_wait", 0) < 2:
            problems.append(
                f"clusters planned, but {report.counts.get('cluster_wait', 0)} barrier.cluster.wait (one "
                f"after the mbarriers' init, one before exit)"
            )
    elif expect.split_k and report.isa == "ptx":  # split-K: the launch shape, the peers' partials read, two syncs
        if report.cluster_ctas != expect.split_k:
            problems.append(
                f"split-K is planned over clusters of {expect.split_k}, the PTX asks for "
                f"{report.cluster_ctas} CTA(s) per cluster (.reqnctapercluster)"
            )
        if not (report.counts.get("mapa") and report.counts.get("dsmem_load")):
            problems.append("split-K planned, but no read of the peers' partial sums (mapa + ld.shared::cluster)")
        if report.counts.get("cluster_wait", 0) < 2:
            problems.append(
                f"split-K planned, but {report.counts.get('cluster_wait', 0)} barrier.cluster.wait (one "
                f"before the peers' partials are read, one after)"
            )
    elif report.isa == "ptx" and (report.cluster_ctas or 1) > 1:
        problems.append(f"the PTX asks for clusters of {report.cluster_ctas} CTAs; the kernel is planned without")
    if expect.async_copies and report.counts.get("async_wait", 0) == 0:
        problems.append("async copies but no cp.async.wait_group")
    if vendor is Vendor.AMD and report.loop_counts.get("cache_invalidate", 0):
        problems.append(f"{report.loop_counts['cache_invalidate']} cache invalidates inside the K loop")
    if expect_barrier and report.counts.get("barrier", 0) == 0:
        problems.append("no workgroup barrier although LDS is shared between waves")
    # per K tile: every instruction block's, or only those whose results some workgroup stores (LLVM drops the rest)
    per_tile = [expect.mma_per_k_tile] + ([expect.live_mma_per_k_tile] if expect.live_mma_per_k_tile else [])
    if expect_barrier and expect.k_loop_barriers and report.has_loop and report.loop_counts.get("matrix", 0):
        # the loop body may hold several K tiles (LLVM unrolls some loops by 2)
        found = loop_barriers(report)
        counts = [divmod(report.loop_counts["matrix"], n) for n in per_tile]
        if not any(not left and found == tiles * expect.k_loop_barriers for tiles, left in counts):
            problems.append(
                f"{found} barriers in a K loop of {report.loop_counts['matrix']} matrix instructions "
                f"({' or '.join(map(str, per_tile))} per K tile); the plan has {expect.k_loop_barriers} per K tile"
            )
    unrolled = [expect.k_tiles * n + expect.tail_mma for n in per_tile]
    if expect.k_tiles > 1 and not report.has_loop and report.counts.get("matrix", 0) not in unrolled:
        problems.append(
            f"no K loop in the ISA, and not the {' or '.join(map(str, unrolled))} matrix instructions of its "
            f"{expect.k_tiles} K tiles unrolled"
        )
    if problems:
        raise VerificationError(
            f"{name}: the compiled kernel is not mmaflow's: " + "; ".join(problems),
            hint="IREE may have fallen back to its own codegen; compare with --dump-after isa",
        )


def check_dispatch_isa(report: IsaReport, text: str, name: str, facts) -> None:
    """``check_isa`` for each kernel of a matmul dispatch (``results.DispatchFacts``): its own
    config and expectations on ``report``, then each version's (``mmaflow.versions``: a kernel and
    export of its own, stage `version`) on the report of its own ISA, the part of ``text`` under
    its export's name (``isa.split_kernels``); the mnemonic of each must be in its kernel's text."""
    target = facts.target
    main, parts = split_kernels(text)
    kernels = [(name, facts.config, facts.expect, report, main)]
    for v in facts.versions:
        if v.export not in parts:
            raise VerificationError(f"{name}: the ISA holds no kernel {v.export} (the version for {v.condition})")
        what = f"{name} ({v.condition}: {v.export})"
        kernels.append((what, v.config, v.expect, parse_isa(parts[v.export], v.export, target), parts[v.export]))
    for what, cfg, expect, rep, own in kernels:
        intr = target.intrinsic(cfg.intrinsic)
        check_isa(rep, what, intr.mnemonic, target.vendor, expect_barrier=cfg.num_waves > 1, expect=expect)
        if intr.mnemonic not in own:
            raise VerificationError(f"{what}: {intr.mnemonic} is not in the ISA")
        if intr.mnemonic.endswith("_f8f6f4"):
            check_f8f6f4_formats(own, what, intr)
        if intr.mnemonic.startswith("v_wmma_i32_"):
            check_wmma_signedness(own, what, intr)


def check_f8f6f4_formats(text: str, what: str, intr) -> None:
    """Every f8f6f4 MFMA of the kernel reads A and B in the formats the plan chose: the format
    codes are the instruction's cbsz (A) and blgp (B) fields, which the ISA prints when not 0."""
    want = (F8F6F4_FORMATS[intr.a_type], F8F6F4_FORMATS[intr.b_type])
    lines = [ln for ln in text.splitlines() if ln.strip().startswith(intr.mnemonic)]
    for ln in lines:
        got = tuple(int(m.group(1)) if (m := re.search(rf"\b{f}:(\d+)", ln)) else 0 for f in ("cbsz", "blgp"))
        if got != want:
            raise VerificationError(
                f"{what}: {ln.strip()!r} reads A and B as formats {got} (cbsz, blgp); the plan's "
                f"{intr.a_type} x {intr.b_type} are {want}"
            )


def check_wmma_signedness(text: str, what: str, intr) -> None:
    """Every integer WMMA (iu8 / iu4) of the kernel reads A and B with the plan's signedness: the
    instruction's neg_lo bits 0 (A) and 1 (B) mark a signed operand (the RDNA3 ISA guide's
    V_WMMA_I32_16X16X16_IU8 / IU4: "NEG[0] = A is signed, NEG[1] = B is signed"); the ISA prints
    ``neg_lo:[a,b,0]`` only when one is set."""
    want = (int(not intr.unsigned_a), int(not intr.unsigned_b))
    for ln in (ln for ln in text.splitlines() if ln.strip().startswith(intr.mnemonic)):
        m = re.search(r"neg_lo:\[(\d),(\d),\d\]", ln)
        got = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        if got != want:
            raise VerificationError(
                f"{what}: {ln.strip()!r} reads A and B as {_signs(got)}; the plan's {intr.name} is {_signs(want)}"
            )


def _signs(flags: tuple) -> str:
    return " x ".join("signed" if f else "unsigned" for f in flags)


def check_weight_only_isa(report: IsaReport, text: str, name: str, facts) -> None:
    """``check_isa`` for the weight-only decode kernel (``results.DispatchFacts`` of kind
    "weight_only"): matrix instructions, 128-bit global loads of the packed weights, the partial
    sums' barrier, and no spilled registers (it has no config to trade them for)."""
    check_isa(report, name, "matrix", facts.target.vendor, expect_barrier=True, expect=facts.expect)
    local = any(line.strip().startswith(("ld.local", "st.local")) for line in text.splitlines())
    if report.vgpr_spills or report.sgpr_spills or report.counts.get("scratch", 0) or local:
        raise VerificationError(
            f"{name}: the weight-only kernel spills ({report.vgpr_spills} VGPRs, {report.sgpr_spills} SGPRs, "
            f"{report.counts.get('scratch', 0)} scratch instructions{', PTX local memory' if local else ''})"
        )


def check_copy_isa(report: IsaReport, text: str, name: str, facts) -> None:
    """``check_isa`` for the copy kernel (``results.DispatchFacts`` of kind "copy"): global loads
    of the planned width (none narrower), global stores, and no spilled registers or local memory."""
    bits = facts.expect.global_load_bits
    cat = f"global_load_b{bits}" if bits >= 32 else "global_load_narrow"
    problems = []
    if report.counts.get(cat, 0) == 0:
        problems.append(f"no {bits}-bit global loads ({cat})")
    narrower = [
        c
        for c in _LOAD_WIDTHS
        if c != cat and report.counts.get(c, 0) and _LOAD_WIDTHS.index(c) > _LOAD_WIDTHS.index(cat)
    ]
    if narrower:
        problems.append(f"narrower global loads too ({', '.join(narrower)})")
    stores = [line.split()[0] for line in (x.strip() for x in text.splitlines()) if _STORE.match(line)]
    if not stores:
        problems.append("no global stores")
    narrow = sorted({op for op in stores if not _STORE_WIDTH[bits].match(op)})
    if narrow:
        problems.append(f"stores narrower than {bits} bits ({', '.join(narrow)})")
    local = any(line.strip().startswith(("ld.local", "st.local")) for line in text.splitlines())
    if report.vgpr_spills or report.sgpr_spills or report.counts.get("scratch", 0) or local:
        problems.append("registers spilled")
    if problems:
        raise VerificationError(f"{name}: the compiled copy kernel is not mmaflow's: " + "; ".join(problems))


_STORE = re.compile(r"^(st\.global|(buffer|global)_store_)")
_STORE_WIDTH = {  # a store instruction of that width, PTX or AMDGPU
    128: re.compile(r"^(st\.global\.(v4\.(b|u|f)32|v2\.(b|u)64)|(buffer|global)_store_(b128|dwordx4))$"),
    64: re.compile(r"^(st\.global\.(v2\.(b|u|f)32|(b|u)64)|(buffer|global)_store_(b64|dwordx2))$"),
    32: re.compile(r"^(st\.global\.(b|u|f)32|(buffer|global)_store_(b32|dword))$"),
    16: re.compile(r"^(st\.global\.(b|u)16|(buffer|global)_store_(b16|short))$"),
    8: re.compile(r"^(st\.global\.(b|u)8|(buffer|global)_store_(b8|byte))$"),
}
_LOAD_WIDTHS = ("global_load_b128", "global_load_b96", "global_load_b64", "global_load_b32", "global_load_narrow")


def check_attention_isa(report: IsaReport, text: str, name: str, expect: attrs.AttentionExpectations) -> None:
    """Raise unless the lowered ISA is mmaflow's flash-attention kernel (``attrs.AttentionExpectations``
    from its plan). PTX: mma.sync, ``shfl.sync.bfly`` (the row max and sum across a row's lanes),
    ``ex2.approx`` (exp2 on the hardware unit, not IREE's polynomial), cp.async into the LDS ring
    when planned, no ld.local / st.local. AMD (.rocmasm): v_mfma / v_wmma, ``v_exp_f32``, no
    spilled registers and no scratch instructions. Both: workgroup barriers, a key loop when
    there are several key tiles whose body holds a whole number of tiles' matrix instructions."""
    problems = []
    lines = [line.strip() for line in text.splitlines()]

    def has(prefix):
        return any(line.startswith(prefix) for line in lines)

    amd = report.isa == "amdgcn"
    if report.counts.get("matrix", 0) == 0:
        problems.append("no v_mfma / v_wmma in the ISA" if amd else f"no {expect.instruction} in the PTX")
    if amd:
        if not has("v_exp_f32"):
            problems.append("no v_exp_f32 (exp2 of the online softmax)")
        if report.vgpr_spills or report.sgpr_spills or report.counts.get("scratch", 0):
            problems.append(
                f"{report.vgpr_spills} VGPRs and {report.sgpr_spills} SGPRs spilled, "
                f"{report.counts.get('scratch', 0)} scratch instructions"
            )
    else:
        if not has("shfl.sync.bfly"):
            problems.append("no shfl.sync.bfly (the softmax's row reductions)")
        if not has("ex2.approx"):
            problems.append("no ex2.approx (exp2 of the online softmax)")
        if has("ld.local") or has("st.local"):
            problems.append("local memory (ld.local / st.local): registers spilled")
    if expect.async_copies and report.counts.get("async_copy_b128", 0) == 0:
        problems.append("no 16-byte cp.async although K and V are planned through a cp.async ring")
    if expect.tma_copies and not has("cp.async.bulk.tensor"):
        problems.append("no cp.async.bulk.tensor although a producer warpgroup copies K and V by TMA")
    if report.counts.get("barrier", 0) == 0:
        problems.append("no workgroup barrier although K and V tiles are shared in LDS")
    mma = "matrix instructions" if amd else expect.instruction
    if expect.key_tiles is None or expect.key_tiles > 1:  # (None: a run-time key length)
        in_loop = report.loop_counts.get("matrix", 0)
        if not report.has_loop and expect.key_tiles is None:
            problems.append("no key loop although the key length is a run-time value")
        elif not report.has_loop:
            if report.counts.get("matrix", 0) != expect.key_tiles * expect.mma_per_key_tile:
                problems.append(
                    f"no key loop, and not the {expect.key_tiles * expect.mma_per_key_tile} {mma} of "
                    f"its {expect.key_tiles} key tiles unrolled"
                )
        elif in_loop == 0 or in_loop % expect.mma_per_key_tile:
            problems.append(f"{in_loop} {mma} in the key loop; the plan has {expect.mma_per_key_tile} per key tile")
    if problems:
        raise VerificationError(
            f"{name}: the compiled attention kernel is not mmaflow's: " + "; ".join(problems),
            hint="IREE may have fallen back to its own codegen; compare with --dump-after isa",
        )


def _matrix(report: IsaReport, facts) -> str:
    mnemonic = facts.target.intrinsic(facts.config.intrinsic).mnemonic
    return f"{report.counts.get('matrix', 0)} {mnemonic}, {facts.problem.describe()}"


def _attention_line(report: IsaReport, facts) -> str:
    matrix = "matrix instructions" if report.isa == "amdgcn" else "mma.sync"
    return f"{report.counts.get('matrix', 0)} {matrix}, flash attention: {facts.problem.describe()}"


def _copy_line(report: IsaReport, facts) -> str:
    bits = facts.expect.global_load_bits
    loads = report.counts.get(f"global_load_b{bits}" if bits >= 32 else "global_load_narrow", 0)
    return f"{loads} {bits}-bit global loads, {report.counts.get('global_store', 0)} global stores"


def _loads(report: IsaReport, expect) -> str:
    loads = report.counts.get(load_category(expect), 0)
    if expect.tma:
        return f"{loads} cp.async.bulk.tensor (TMA)"
    return f"{loads} {expect.global_load_bits}-bit {'async copies' if expect.async_copies else 'global loads'}"


def _compiled_matmul(report: IsaReport, text: str, facts) -> str:
    """A matmul kernel's matrix instructions and K-loop loads; a versioned dispatch's, each kernel's own."""
    own = split_kernels(text)[1]
    kernels = [("", report, facts.expect)]
    kernels += [
        (f"{v.condition}: ", parse_isa(own[v.export], v.export, facts.target), v.expect) for v in facts.versions
    ]
    parts = []
    for when, r, exp in kernels:
        parts.append(
            f"{when or ('else: ' if len(kernels) > 1 else '')}{r.counts.get('matrix', 0)} matrix instructions, "
            + _loads(r, exp)
        )
    return "; ".join(parts[1:] + parts[:1])


def _compiled_attention(report: IsaReport, text: str, facts) -> str:
    expect, n = facts.expect, report.counts.get("matrix", 0)
    if report.isa == "amdgcn":
        return (
            f"flash attention, {n} matrix instructions ({expect.mma_per_key_tile} per wave and key tile), v_exp_f32, "
            "no spills or scratch"
        )
    return (
        f"flash attention, {n} {expect.instruction} ({expect.mma_per_key_tile} per warp and key tile), "
        f"{report.counts.get('async_copy_b128', 0)} 16-byte cp.async, shfl.sync.bfly, ex2.approx, no local memory"
    )


def _compiled_copy(report: IsaReport, text: str, facts) -> str:
    return f"{facts.problem.describe()}, {_copy_line(report, facts)}, no spills"


# Per kind of kernel (``results.DispatchFacts.kind``): its ISA check (report, text, dispatch name, facts); what
# it holds and computes, ``mmaflow verify``'s line (report, facts); ``mmaflow compile``'s (report, ISA text, facts).
KINDS = {
    "matmul": (check_dispatch_isa, _matrix, _compiled_matmul),
    "attention": (
        lambda rep, text, name, facts: check_attention_isa(rep, text, name, facts.expect),
        _attention_line,
        _compiled_attention,
    ),
    "weight_only": (
        check_weight_only_isa,
        lambda rep, facts: f"{rep.counts.get('matrix', 0)} matrix instructions, {facts.problem.describe()}",
        _compiled_matmul,
    ),
    "copy": (check_copy_isa, lambda rep, facts: facts.problem.describe(), _compiled_copy),
}


def check_kernel(report: IsaReport, text: str, name: str, facts) -> None:
    """Raise unless the lowered ISA is the kernel mmaflow planned for the dispatch (its kind's check)."""
    KINDS[facts.kind][0](report, text, name, facts)


def verified(report: IsaReport, facts) -> str:
    """What a verified kernel holds and what it computes (``mmaflow verify``'s line)."""
    return KINDS[facts.kind][1](report, facts)


def compiled(report: IsaReport, text: str, facts) -> str:
    """What a verified kernel holds, in ``mmaflow compile``'s words."""
    return KINDS[facts.kind][2](report, text, facts)
