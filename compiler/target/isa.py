"""Read the final ISA IREE produced (.rocmasm for AMD, .ptx for NVIDIA) into a report.

The report is what we can measure without the GPU: register use and spills, LDS bytes,
occupancy (from the target's register-file model), and counts of the instructions that matter
for a matmul — matrix, global loads by width, LDS loads/stores by width, barriers, cache
invalidates — over the whole kernel and inside the main (K) loop.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

from mmaflow.compiler.core.errors import ToolchainError
from mmaflow.compiler.target.targets import Target


@dataclass
class IsaReport:
    kernel: str
    isa: str  # "amdgcn" | "ptx"
    vgprs: int | None = None
    sgprs: int | None = None
    agprs: int | None = None
    vgpr_spills: int | None = None
    sgpr_spills: int | None = None
    scratch_bytes: int | None = None
    lds_bytes: int | None = None
    waves_per_simd: int | None = None
    wave_size: int | None = None
    counts: dict = field(default_factory=dict)  # category -> count, whole kernel
    loop_counts: dict = field(default_factory=dict)  # category -> count, inside the K loop
    has_loop: bool = False
    # Matrix instructions in the K loop whose nearest preceding instruction (scheduling hints
    # aside) waits for LDS reads: the matrix unit idles for an LDS round trip there. AMD only.
    matrix_behind_lds_wait: int | None = None
    loop_listing: list = field(default_factory=list, repr=False)  # the K loop's instructions, in order
    cluster_ctas: int | None = None  # PTX: CTAs per thread block cluster (.reqnctapercluster; 1: none)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "loop_listing"}


# Instruction categories. Order matters: the first matching pattern wins.
_AMD_CATEGORIES = [
    ("matrix", re.compile(r"^v_(wmma|mfma|smfmac)_")),
    ("global_load_b128", re.compile(r"^(buffer|global)_load_(b128|dwordx4)\b")),
    ("global_load_b96", re.compile(r"^(buffer|global)_load_(b96|dwordx3)\b")),
    ("global_load_b64", re.compile(r"^(buffer|global)_load_(b64|dwordx2)\b")),
    ("global_load_b32", re.compile(r"^(buffer|global)_load_(b32|dword)\b")),
    (
        "global_load_narrow",
        re.compile(r"^(buffer|global)_load_(u8|i8|u16|i16|d16\w*|ubyte\w*|sbyte\w*|ushort|sshort|short\w*)\b"),
    ),
    ("global_store", re.compile(r"^(buffer|global)_store_")),
    # Widths are bits per lane: ds_read2_b64 reads two 64-bit values at two offsets (128 bits).
    ("lds_load_b128", re.compile(r"^ds_(load|read)_b128\b|^ds_(load|read)_2addr_b64\b|^ds_read2(st64)?_b64\b")),
    ("lds_load_b64", re.compile(r"^ds_(load|read)_b64\b|^ds_(load|read)_2addr_b32\b|^ds_read2(st64)?_b32\b")),
    ("lds_load_b32", re.compile(r"^ds_(load|read)_(b32)\b")),
    ("lds_load_narrow", re.compile(r"^ds_(load|read)_(u8|i8|u16|i16|b16|b8)(_d16(_hi)?)?\b|^ds_read_u16_d16\w*")),
    ("lds_load_other", re.compile(r"^ds_(load|read)")),
    ("lds_store_b128", re.compile(r"^ds_(store|write)_b128\b|^ds_(store|write)_2addr_b64\b|^ds_write2(st64)?_b64\b")),
    ("lds_store_b64", re.compile(r"^ds_(store|write)_b64\b|^ds_(store|write)_2addr_b32\b|^ds_write2(st64)?_b32\b")),
    ("lds_store_b32", re.compile(r"^ds_(store|write)_b32\b")),
    ("lds_store_narrow", re.compile(r"^ds_(store|write)_(b8|b16)(_d16_hi)?\b")),
    ("lds_store_other", re.compile(r"^ds_(store|write)")),
    ("barrier", re.compile(r"^s_barrier(_signal|_wait)?\b")),
    ("cache_invalidate", re.compile(r"^(buffer_gl0_inv|buffer_gl1_inv|buffer_wbinvl1\w*|buffer_inv)\b")),
    ("scratch", re.compile(r"^scratch_|^buffer_(load|store)_\w+ .*off, s\[0:3\]")),
]

_PTX_CATEGORIES = [
    ("matrix", re.compile(r"^mma\.sync\.|^wgmma\.mma_async\.")),
    ("global_load_b128", re.compile(r"^ld\.global(\.nc)?\.v4\.(b32|u32|f32)|^ld\.global(\.nc)?\.v2\.(b64|u64)")),
    ("global_load_b64", re.compile(r"^ld\.global(\.nc)?\.v2\.(b32|u32|f32)|^ld\.global(\.nc)?\.(b64|u64)")),
    ("global_load_b32", re.compile(r"^ld\.global(\.nc)?\.(b32|u32|f32)")),
    ("global_load_narrow", re.compile(r"^ld\.global")),
    ("global_store", re.compile(r"^st\.global")),
    # cp.async [dst], [src], cp-size(, src-size): global -> shared, no registers
    ("async_copy_b128", re.compile(r"^cp\.async\.(ca|cg)\.shared\.global\S*\s+\[[^]]+\],\s*\[[^]]+\],\s*16\b")),
    ("async_copy_b64", re.compile(r"^cp\.async\.(ca|cg)\.shared\.global\S*\s+\[[^]]+\],\s*\[[^]]+\],\s*8\b")),
    ("async_copy_b32", re.compile(r"^cp\.async\.(ca|cg)\.shared\.global\S*\s+\[[^]]+\],\s*\[[^]]+\],\s*4\b")),
    ("async_wait", re.compile(r"^cp\.async\.wait_group\b")),
    # TMA: cp.async.bulk.tensor.Nd.shared::cluster.global... [dst], [map, {coords}], [mbarrier]
    ("bulk_tensor_copy", re.compile(r"^cp\.async\.bulk\.tensor\.")),
    ("mbarrier_wait", re.compile(r"^mbarrier\.try_wait\b")),
    ("lds_load_b128", re.compile(r"^ld\.shared\.v4\.(b32|u32|f32)|^ldmatrix")),
    ("lds_load_b64", re.compile(r"^ld\.shared\.v2\.(b32|u32|f32)|^ld\.shared\.(b64|u64)")),
    ("lds_load_b32", re.compile(r"^ld\.shared\.(b32|u32|f32)")),
    ("lds_load_narrow", re.compile(r"^ld\.shared")),
    ("lds_store_b128", re.compile(r"^st\.shared\.v4\.(b32|u32|f32)")),
    ("lds_store_b64", re.compile(r"^st\.shared\.v2\.(b32|u32|f32)|^st\.shared\.(b64|u64)")),
    ("lds_store_b32", re.compile(r"^st\.shared\.(b32|u32|f32)")),
    ("lds_store_narrow", re.compile(r"^st\.shared")),
    ("barrier", re.compile(r"^bar\.sync|^barrier\.sync")),
    ("scratch", re.compile(r"^(ld|st)\.local")),
]


# Between a dispatch's kernel and each of its versions' kernels (stage `version`: a function and
# export each) in the ISA text mmaflow keeps for the dispatch (``join_kernels``), as a comment line.
_KERNEL_MARK = "mmaflow kernel:"


def join_kernels(main: str, versions: dict[str, str], isa: str) -> str:
    """One dispatch's ISA: its own kernel's text, then each version's (export name -> its text,
    ``extract_kernel``'s form) after a marker line; ``split_kernels`` takes it apart."""
    mark = ";" if isa == "amdgcn" else "//"
    return main + "".join(f"\n{mark} {_KERNEL_MARK} {name}\n{text}" for name, text in versions.items())


def split_kernels(text: str) -> tuple[str, dict[str, str]]:
    """The dispatch's own kernel's text and its versions' (export name -> text) of ``join_kernels``."""
    parts = re.split(rf"^(?://|;) {re.escape(_KERNEL_MARK)} (\S+)$", text, flags=re.M)
    return parts[0], dict(zip(parts[1::2], parts[2::2]))


def extract_kernel(text: str, kernel: str, isa: str) -> str | None:
    """The part of a (possibly linked, multi-kernel) ISA file that belongs to ``kernel``.

    AMD: the code from ``kernel:`` to its ``.Lfunc_end`` label plus the kernel's entry of the
    ``.amdgpu_metadata`` YAML. PTX: the ``.entry kernel(`` function up to its closing brace.
    """
    if isa == "amdgcn":
        m = re.search(rf"^{re.escape(kernel)}:\n(.*?)^\.Lfunc_end\d+:", text, re.M | re.S)
        if not m:
            return None
        meta = None
        entries = re.split(r"^  - ", text.split(".amdgpu_metadata", 1)[-1], flags=re.M)
        for e in entries:
            # YAML quotes a name with characters such as iree-turbine's `$`: 'main$async_dispatch_2_...'
            if re.search(rf"^\s+\.name:\s+(['\"]?){re.escape(kernel)}\1\s*$", e, re.M):
                meta = e
        if meta is None:  # registers, spills and LDS would read as unknown: never silently
            raise ToolchainError(f"the .amdgpu_metadata of the ISA has no entry for kernel {kernel}")
        return m.group(1) + "\n.amdgpu_metadata\n" + meta
    m = re.search(rf"\.entry {re.escape(kernel)}\(", text)
    if not m:
        return None
    # Module-scope directives (.version/.target and the .shared/.global declarations kernels use).
    first = re.search(r"^\s*(\.visible\s+|\.weak\s+)?\.(entry|func)\b", text, re.M)
    header = text[: first.start()] if first else ""
    start = text.index("{", m.end())
    depth, i = 0, start
    while i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            break
        i += 1
    return header + text[m.start() : i + 1]


def _categorize(lines: list[str], cats) -> Counter:
    out = Counter()
    for line in lines:
        for name, pat in cats:
            if pat.search(line):
                out[name] += 1
                break
    return out


def _meta(text: str, key: str) -> int | None:
    m = re.search(rf"^\s*\.{re.escape(key)}:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def _loop_body(instrs: list[tuple[str, str]], branch_re, within: str | None = None) -> list[str] | None:
    """The instructions of the longest backward-branch loop that holds no other such loop, given
    (kind, text) lines; with ``within``, of the longest one holding an instruction that starts
    with it and no other loop that does (the K loop inside a persistent grid's loop over tiles;
    a loop of mbarrier waits inside the K loop holds no matrix instruction)."""
    labels = {}
    loops = []
    for i, (kind, text) in enumerate(instrs):
        if kind == "label":
            labels[text] = i
        elif kind == "instr":
            m = branch_re.search(text)
            if m and m.group(1) in labels:
                start = labels[m.group(1)]
                if within is not None and not any(k == "instr" and t.startswith(within) for k, t in instrs[start:i]):
                    continue
                loops.append((start, i))
    inner = [(a, b) for a, b in loops if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]
    if not inner:
        return None

    def held(ab) -> int:  # matrix instructions between the label and the branch
        return (
            0
            if within is None
            else sum(1 for k, t in instrs[ab[0] : ab[1] + 1] if k == "instr" and t.startswith(within))
        )

    # The most matrix instructions, then the longest: LLVM may lay a rotated K loop out past its
    # enclosing loop's back branch (the causal attention's masked path placed after the loop's
    # latch), so that the enclosing loop's span holds only part of the K loop, and a longer one.
    best = max(inner, key=lambda ab: (held(ab), ab[1] - ab[0]))
    return [t for k, t in instrs[best[0] : best[1] + 1] if k == "instr"]


# Waits on the LDS counter (lgkmcnt; gfx12: s_wait_dscnt) with the count they leave pending, and
# the hints that issue nothing.
_AMD_LDS_WAIT = re.compile(
    r"^s_waitcnt\b.*\blgkmcnt\((\d+)\)|^s_waitcnt_lgkmcnt\s+\S+,\s*(0x[0-9a-f]+|\d+)"
    r"|^s_wait_dscnt\s+(0x[0-9a-f]+|\d+)"
)
# gfx12's combined waits: the immediate packs the load/store count (bits 13:8) and dscnt (5:0).
_AMD_COMBINED_DS_WAIT = re.compile(r"^s_wait_(?:load|store)cnt_dscnt\s+(0x[0-9a-f]+|\d+)")
_AMD_HINT = re.compile(r"^s_(delay_alu|nop|set_inst_prefetch_distance|clause)\b")
_AMD_LDS_OP = re.compile(r"^ds_")


def matrix_behind_lds_wait(body: list[str]) -> int:
    """How many matrix instructions of a loop ``body`` come right after (scheduling hints aside)
    a wait on LDS that needs an LDS access issued since the previous matrix instruction: the
    wait leaves fewer accesses pending than were issued in between (the body taken cyclically,
    so the first matrix instruction's window starts after the last one of the previous
    iteration). Such an instruction idles for a full LDS round trip; one whose fragment was read
    a whole group of matrix instructions earlier does not, even behind a wait."""
    body = [line for line in body if not _AMD_HINT.search(line)]
    is_mma = [bool(_AMD_CATEGORIES[0][1].search(line)) for line in body]
    if not any(is_mma):
        return 0
    n = 0
    for i, line in enumerate(body):
        if not is_mma[i]:
            continue
        prev = body[i - 1]  # (i = 0: the body's last instruction, the loop being cyclic)
        if m := _AMD_LDS_WAIT.search(prev):
            pending = int(next(g for g in m.groups() if g is not None), 0)
        elif m := _AMD_COMBINED_DS_WAIT.search(prev):
            pending = int(m.group(1), 0) & 0x3F
        else:
            continue
        issued, j = 0, i - 2
        while not is_mma[j % len(body)]:
            issued += bool(_AMD_LDS_OP.search(body[j % len(body)]))
            j -= 1
        if pending < issued:
            n += 1
    return n


# One workgroup barrier: s_barrier, or gfx12's s_barrier_signal + s_barrier_wait pair (its wait).
_AMD_BARRIER = re.compile(r"^s_barrier(_wait)?\b")
_PTX_BARRIER = _PTX_CATEGORIES[[c for c, _ in _PTX_CATEGORIES].index("barrier")][1]


_NARROWER = ("global_load_b96", "global_load_b64", "global_load_b32", "global_load_narrow")


def k_loop_global_loads(report: IsaReport) -> tuple[int, int]:
    """(128-bit, narrower) global loads of the K loop -- the whole kernel's where K is unrolled
    (no loop holds matrix instructions); cp.async's 128-bit copies count as 128-bit loads."""
    loop = report.loop_counts if report.loop_counts.get("matrix") else report.counts
    full = loop.get("global_load_b128", 0) + loop.get("async_copy_b128", 0)
    return full, sum(loop.get(k, 0) for k in _NARROWER)


def loop_barriers(report: IsaReport) -> int:
    """Workgroup barriers in the K loop's body (gfx12's signal/wait pair counted once)."""
    pat = _AMD_BARRIER if report.isa == "amdgcn" else _PTX_BARRIER
    return sum(1 for line in report.loop_listing if pat.search(line))


def parse_rocmasm(text: str, kernel: str, target: Target) -> IsaReport:
    """The report of an AMD kernel (``.rocmasm``; of a dispatch's ``join_kernels`` text, its own
    kernel's)."""
    text = split_kernels(text)[0]
    instrs = []
    code = text.split(".amdgpu_metadata", 1)[0]
    for raw in code.splitlines():
        line = raw.strip()
        if not line or line.startswith(";"):
            continue
        if re.match(r"^\.LBB\w*:", line):
            instrs.append(("label", line[:-1]))
        elif re.match(r"^[a-z_][a-z0-9_]*\b", line) and not line.endswith(":"):
            instrs.append(("instr", line.split(";")[0].strip()))
    lines = [t for k, t in instrs if k == "instr"]
    # The K loop is the innermost loop holding matrix instructions: LLVM lays an if / else inside it
    # out with backward branches too (the decode attention's V loads versioned on alignment). Where no
    # loop holds any (K unrolled), the loop there is (a store loop: the report says it is not K's).
    branch = re.compile(r"^s_c?branch\w*\s+(\.LBB\w+)")
    within = next((m for m in ("v_mfma", "v_wmma", "v_smfmac") if any(t.startswith(m) for t in lines)), None)
    body = _loop_body(instrs, branch, within)
    if body is None:
        body = _loop_body(instrs, branch)
    rep = IsaReport(kernel=kernel, isa="amdgcn")
    rep.vgprs = _meta(text, "vgpr_count")
    rep.sgprs = _meta(text, "sgpr_count")
    rep.agprs = _meta(text, "agpr_count")
    rep.vgpr_spills = _meta(text, "vgpr_spill_count")
    rep.sgpr_spills = _meta(text, "sgpr_spill_count")
    rep.scratch_bytes = _meta(text, "private_segment_fixed_size")
    rep.lds_bytes = _meta(text, "group_segment_fixed_size")
    rep.counts = dict(_categorize(lines, _AMD_CATEGORIES))
    rep.has_loop = body is not None
    rep.loop_counts = dict(_categorize(body or [], _AMD_CATEGORIES))
    rep.loop_listing = list(body or [])
    rep.matrix_behind_lds_wait = matrix_behind_lds_wait(body) if body is not None else None
    rep.wave_size = _meta(text, "wavefront_size")
    rep.waves_per_simd = target.waves_per_simd(rep.wave_size, rep.vgprs or 0, rep.agprs or 0) if rep.wave_size else None
    return rep


def parse_ptx(text: str, kernel: str, target: Target) -> IsaReport:
    """The report of a PTX kernel (of a dispatch's ``join_kernels`` text, its own kernel's)."""
    text = split_kernels(text)[0]
    instrs = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("//") or line.startswith("."):
            continue
        if re.match(r"^\$L\w+:$", line):
            instrs.append(("label", line[:-1]))
            continue
        line = re.sub(r"^@!?%p\d+\s+", "", line).rstrip(";")
        if re.match(r"^[a-z]", line):
            instrs.append(("instr", line))
    lines = [t for k, t in instrs if k == "instr"]
    # A wgmma kernel's K loop holds mbarrier wait loops (the TMA rings) and may sit in a loop over
    # tiles (the persistent grid), and LLVM may unswitch a loop on a warp-uniform condition (the
    # decode attention's warps past M copy without computing: a second loop with no matrix
    # instruction): the K loop is the innermost loop holding its matrix instructions.
    within = next((m for m in ("wgmma.mma_async", "mma.sync") if any(t.startswith(m) for t in lines)), None)
    body = _loop_body(instrs, re.compile(r"^bra(?:\.uni)?\s+(\$L\w+)"), within)
    rep = IsaReport(kernel=kernel, isa="ptx")
    m = re.search(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", text)
    rep.lds_bytes = int(m.group(1)) if m else None  # None: dynamic shared memory, sized at launch
    rep.vgprs = None  # PTX registers are virtual; ptxas assigns the real ones
    rep.counts = dict(_categorize(lines, _PTX_CATEGORIES))
    # clusters: multicast bulk copies, remote arrivals (mapa + mbarrier.arrive on shared::cluster),
    # distributed shared memory loads, barrier.cluster waits (counted apart from the categories:
    # each line also has one there)
    for name, pat in (
        ("bulk_tensor_multicast", r"^cp\.async\.bulk\.tensor\.\S*\.multicast::cluster"),
        ("mapa", r"^mapa\.shared::cluster"),
        ("dsmem_load", r"^ld\.shared::cluster\."),
        ("remote_arrive", r"^mbarrier\.arrive\S*\.shared::cluster\."),
        ("cluster_wait", r"^barrier\.cluster\.wait"),
    ):
        n = sum(1 for t in lines if re.search(pat, t))
        if n:
            rep.counts[name] = n
    m = re.search(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", text)
    rep.cluster_ctas = 1 if m is None else int(m.group(1)) * int(m.group(2) or 1) * int(m.group(3) or 1)
    rep.has_loop = body is not None
    rep.loop_counts = dict(_categorize(body or [], _PTX_CATEGORIES))
    rep.loop_listing = list(body or [])
    return rep


def parse_isa(text: str, kernel: str, target: Target) -> IsaReport:
    """``parse_rocmasm`` on AMD, ``parse_ptx`` on NVIDIA."""
    return (parse_rocmasm if target.is_amd else parse_ptx)(text, kernel, target)
