"""The kernel plan: every decision the `distribute` stage makes, as frozen data, before it
rewrites anything.

`distribute` runs in three steps: match the script's IR (``kernels/common/contraction.py:match``), plan
(this file: numbers and layouts only, no IR values), rewrite (``distribute.Rewriter`` consumes
the plan). The plan is what a reader, a test or a later change (a software-pipelined loop,
swizzled LDS, async copies) looks at and extends:

    KernelPlan
      a, b: OperandPlan   codegen layout, LDS tile (K-innermost, padded), the global->LDS copy
                          (``lds_copy.CopyShape``), the LDS->register fragment loads
                          (``fragments.FragmentPlan``), which tile edges need bounds
      loop: LoopPlan      instructions per K step, K steps per tile, interleaving, prefetch depth,
                          the K-tile count (static or from the run-time K)
      epilogue:           accumulator layout, runs stored at once, bounds, fused ops
      notes               choices a user may want to know about (the log)

``KernelPlan.describe()`` prints it; `--dump-after distribute` shows it above the IR.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.problem import Contraction, operand_dims
from mmaflow.compiler.kernels.common.fragments import FragmentPlan
from mmaflow.compiler.kernels.common.lds_copy import CopyShape
from mmaflow.compiler.kernels.common.tiles import ring_slots
from mmaflow.compiler.target.intrinsics import TYPE_BITS, Intrinsic
from mmaflow.compiler.target.layout import COL, ROW, Layout, Run
from mmaflow.compiler.target.targets import Target, Vendor


@dataclass(frozen=True)
class Extents:
    """A binding's shapes: what the script saw (``padded``), the true one (None where dynamic),
    the problem dimension of each axis and, for one memref feeding both A and B, the second
    role's dimensions."""

    padded: tuple[int, ...]
    true: tuple[int | None, ...]
    names: tuple[str, ...]
    problem: Contraction
    tiles: tuple[tuple[str, int], ...]  # problem dimension -> its tile
    also: tuple[str | None, ...] | None = None

    def bounded(self) -> tuple[bool, ...]:
        """Per axis: whether tiles may overhang the true extent (accesses must be bounded). A
        dynamic extent the program promises to be a multiple of its tile needs no bound."""
        tiles = dict(self.tiles)
        also = self.also or (None,) * len(self.names)
        out = []
        for axis, (p, t) in enumerate(zip(self.padded, self.true)):
            if t is not None:
                out.append(t != p)
            else:
                ts = [tiles.get(d, 0) for d in (self.names[axis], also[axis]) if d]
                out.append(not (all(ts) and all(self.multiple(axis) % x == 0 for x in ts)))
        return tuple(out)

    def multiple(self, axis: int) -> int:
        """What the axis' true extent is a multiple of (itself when static, the program's
        divisibility promise when dynamic)."""
        t = self.true[axis]
        return t if t is not None else self.problem.multiple_of(self.names[axis])

    def describe(self, axis: int) -> str:
        t = self.true[axis]
        if t is not None:
            return str(t)
        div = self.multiple(axis)
        return (
            f"{self.names[axis].upper()} (dynamic{f', a multiple of {div}' if div > 1 else ', no divisibility hint'})"
        )


def extents(
    problem: Contraction, cfg: KernelConfig, role: str, padded: tuple[int, ...], also: str | None = None
) -> Extents:
    """The extents of the binding of ``role`` ("A", "B", "C"), whose memref the script saw as
    ``padded``; ``also``: the second role of a memref that feeds both A and B."""
    dims = operand_dims(problem)
    names = tuple(dims[role])
    return Extents(
        tuple(padded),
        tuple(getattr(problem, d) for d in names),
        names,
        problem,
        (("m", cfg.tile_m), ("n", cfg.tile_n), ("k", cfg.tile_k), ("batch", 1)),
        tuple(dims[also]) if also else None,
    )


@dataclass(frozen=True)
class OperandFacts:
    """What the matcher read off the script's IR for one contraction operand."""

    name: str  # "A" | "B"
    vec_dim_role: tuple[str, ...]  # layout axis of each dimension of the LDS read's vector
    lds_shape: tuple[int, ...]  # the script's LDS tile (leading unit dims, then 2-D)
    elem: str
    copy_rows: int  # the global->LDS copy's vector: rows x cols, cols contiguous in memory
    copy_cols: int
    extents: Extents  # of the global memref the copy reads

    @property
    def k_dim(self) -> int:
        """The LDS tile dimension that is K."""
        return self.vec_dim_role.index(COL if self.name == "A" else ROW)


@dataclass(frozen=True)
class OperandPlan:
    name: str
    layout: Layout  # codegen layout composed to the wave tile
    k_axis: str  # layout axis that is K (A: col, B: row)
    k_dim: int  # LDS tile dimension that is K
    vec_dim_role: tuple[str, ...]
    elem: str
    lds_shape: tuple[int, int]  # one stage's tile: [non-K][K + lds_pad], or [K][non-K + lds_pad] if k_outer
    k_outer: bool  # the LDS tile keeps the global K-outer order (an LDS ring's async copies)
    copy: CopyShape
    fragments: FragmentPlan
    bounded: tuple[bool, bool]  # the copy's global rows / cols may overhang the tensor
    extents: Extents


@dataclass(frozen=True)
class LoopPlan:
    tile_k: int
    k_tiles: int | None  # None: from the run-time K
    instructions: tuple[int, int, int]  # per K tile: M tiles x N tiles x K steps
    k_interleaved: bool  # AMD: consecutive K steps' runs read by one LDS access
    prefetch: int  # K tiles in flight (in registers with 1 stage, in the LDS ring's other slots with more)
    guard_empty_k: bool  # dynamic K on NVIDIA: skip the first loads when K is 0
    stages: int = 1  # K tiles in the pipeline: > 1 is an LDS ring, one barrier per K tile
    asynchronous: bool = False  # the ring is filled by async copies (NVIDIA); else through registers (AMD)
    slots: int = 1  # K tiles in LDS (config.ring_slots)
    unroll: int = 1  # K tiles per iteration of the K loop (AMD's ring of 3+ stages: its tiles in flight)
    # per K tile, the M x N instruction blocks of a wave's tile whose first row / column lies within a static M / N:
    # the others' results are never stored in any workgroup, and LLVM may drop them (M = 1 in 32-row wave tiles)
    live: tuple[int, int] | None = None

    @property
    def mma_per_k_tile(self) -> int:
        m, n, k = self.instructions
        return m * n * k

    @property
    def live_mma_per_k_tile(self) -> int:
        """``mma_per_k_tile`` counting only the ``live`` instruction blocks."""
        m, n, k = self.instructions
        lm, ln = self.live or (m, n)
        return lm * ln * k

    @property
    def barriers_per_k_tile(self) -> int:
        """Workgroup barriers per K tile: a ring's one; one LDS tile needs one before its stores
        (the last tile's readers are done) and one after them (the data is visible)."""
        return 1 if self.stages > 1 else 2

    @property
    def fragment_groups(self) -> tuple[tuple[int, ...], ...]:
        """The K steps whose fragments are read together, in order: every step at once where
        the steps are interleaved (one wide LDS read serves several), else one step each."""
        k = self.instructions[2]
        return (tuple(range(k)),) if self.k_interleaved else tuple((kk,) for kk in range(k))


@dataclass(frozen=True)
class EpiloguePlan:
    layout: Layout  # the accumulator's
    runs: tuple[Run, ...]  # elements stored by one access each
    bounded: tuple[bool, bool]  # M / N edges may overhang the output
    fused: tuple[str, ...]  # elementwise ops applied in registers before the store
    stored_type: str
    extents: Extents
    # ``lane_pairs``' choice: the runs merged across lanes l, l ^ 1 into 4-element stores, as
    # ((i, j, run) at column c, (i, j', run') at c + 8), and the runs left without a partner
    pairs: tuple = ()
    singles: tuple = ()

    @property
    def lane_pairs(self) -> bool:
        return bool(self.pairs)

    @property
    def pairs_note(self) -> str:
        if not self.lane_pairs:
            return ""
        bits = TYPE_BITS[self.stored_type]
        words = "one 32-bit word" if bits == 16 else f"{bits // 16} 32-bit words"
        return (
            f"; lanes l and l ^ 1 swap {words} of each two 8-column-apart runs (shfl.bfly 1) and "
            f"store 4 contiguous elements each ({bits // 2} bytes)"
        )


def store_pairs(runs, batch: tuple[int, int], im: int, inn: int) -> tuple[tuple, tuple] | None:
    """The runs of an output paired for ``EpiloguePlan.lane_pairs``: (pairs, singles), a
    pair ((i, j, run) at tile column c, (i, j', run') at column c + 8 of the same row) for c a
    multiple of 16, the runs without such a partner single (an odd number of 8-column
    instruction tiles); None for runs not of two. Lane l (column offset 2 (l % 4)) holds 2
    elements at c + 2 (l % 4) and at c + 8 + 2 (l % 4); after l and l ^ 1 swap a run's worth
    (one 32-bit word for 16-bit elements, two for 32-bit), the even lane holds columns
    c + 4 (l % 4 / 2) .. + 3 and the odd one c + 8 + 4 (l % 4 / 2) .. + 3: one 4-element store
    each (8 or 16 bytes), a whole 32-byte sector per row of the warp's store instead of two halves
    (16-bit) or two sectors per row and half the store instructions (32-bit)."""
    if any(r.length != 2 for r in runs):
        return None
    br, bc = batch
    items = {(i * im + r.row, j * inn + r.col): (i, j, r) for i in range(br) for j in range(bc) for r in runs}
    pairs, paired = [], set()
    for (row, col), item in items.items():
        if col % 16 == 0 and (row, col + 8) in items:
            pairs.append((item, items[(row, col + 8)]))
            paired.update({(row, col), (row, col + 8)})
    return tuple(pairs), tuple(item for key, item in items.items() if key not in paired)


# Output element widths whose runs ``lane_pairs`` merges. Measured on the H200 (kernel-only):
# 16-bit, 4096^3 cast -> f16 0.2042 -> 0.1887 ms; 32-bit (16-byte stores), f32 out 4096^3
# 689.2 / 690.6 -> 700.6 / 701.6 TFLOP/s, 8192^3 727.0 / 727.5 -> 734.0, unaligned 4000^3
# 644.1 -> 659.7.
PAIRED_BITS = (16, 32)


def lane_pairs(
    lay: Layout,
    runs,
    im: int,
    inn: int,
    stored_type: str,
    extents: Extents,
    vendor: Vendor,
    offset: int | None,
    fused: bool = False,
) -> tuple[tuple, tuple] | None:
    """``store_pairs``' (pairs, singles) where an output's runs of two are merged across lane
    pairs, else None: elements
    of ``PAIRED_BITS``, NVIDIA's accumulator layouts (the mma.sync and wgmma C layouts: a row's 8
    columns across the 4 lanes of a quad, 2 each), an output whose N is whole 4-element groups
    (static tiles, or its row length a multiple of 4) and whose byte offset is a known multiple of
    the 4-element store (its alignment). Measured on the H200: a 4096^3
    f16-out matmul spent more in its 4-byte stores (half-sector writes) than the f32-out one in
    its 8-byte stores. A 32-bit output with a ``fused`` epilogue keeps its 8-byte runs: the erf
    gelu -> f32 kernel on sm_90a spilled 128 bytes with the swap (``test_isa_quality``), and the
    16-byte stores were measured on plain f32 outputs only."""
    bits = TYPE_BITS.get(stored_type)
    if vendor is not Vendor.NVIDIA or bits not in PAIRED_BITS or offset is None or offset % (bits // 2):
        return None
    if bits == 32 and fused:
        return None
    terms = lay.lane_terms()
    if [(div, size, stride) for _, div, size, axis, stride in terms if axis == COL] != [(1, 4, 2)] or any(
        div < 4 for _, div, _, axis, _ in terms if axis == ROW
    ):
        return None
    if extents.bounded()[-1] and extents.multiple(-1) % 4:
        return None
    found = store_pairs(runs, lay.batch, im, inn)
    return found if found is not None and found[0] else None


@dataclass(frozen=True)
class KernelPlan:
    intrinsic: Intrinsic
    vendor: Vendor
    wave_size: int
    workgroup_size: int
    a: OperandPlan
    b: OperandPlan
    loop: LoopPlan
    epilogue: EpiloguePlan
    notes: tuple[str, ...]

    @property
    def operands(self) -> tuple[OperandPlan, OperandPlan]:
        return self.a, self.b

    def expectations(self) -> attrs.Expectations:
        """What the ISA must show (``verify.check_isa``): the widest global load (or async copy)
        of the copies, the K tiles (0: dynamic) and the matrix instructions per K tile."""
        bits = max(o.copy.v * o.copy.bits for o in self.operands)
        live = self.loop.live_mma_per_k_tile
        return attrs.Expectations(
            bits,
            self.loop.k_tiles or 0,
            self.loop.mma_per_k_tile,
            self.loop.asynchronous,
            self.loop.barriers_per_k_tile,
            live_mma_per_k_tile=live if live != self.loop.mma_per_k_tile else None,
        )

    def describe(self) -> list[str]:
        lp, ep = self.loop, self.epilogue
        m, n, k = lp.instructions
        lines = [
            f"{self.intrinsic.name} wave{self.wave_size}, {self.workgroup_size} threads, "
            f"K tiles of {lp.tile_k}: {lp.k_tiles if lp.k_tiles is not None else 'from the run-time K'}"
        ]
        ring = f"{lp.slots} x " if lp.slots > 1 else ""
        for o in self.operands:
            dims = " x ".join(f"{d.name}({d.size})" for d in o.layout.ordered_dims())
            batches = (
                [(i, kk) for i in range(m) for kk in range(k)]
                if o.name == "A"
                else [(kk, j) for j in range(n) for kk in range(k)]
            )
            bounds = "/".join(ax for ax, b in zip(("rows", "cols"), o.bounded) if b) or "none"
            lines += [
                f"{o.name}: layout {dims}",
                f"{o.name}: LDS {ring}{o.elem}[{o.lds_shape[0]}][{o.lds_shape[1]}] "
                f"({'K outermost' if o.k_outer else 'K innermost'}); copy "
                f"{o.copy.describe()}; global bounds: {bounds}",
                f"{o.name}: fragments per K tile: {o.fragments.describe(batches)}",
            ]
        if lp.asynchronous:
            inflight = (
                f"{lp.stages}-stage LDS ring: {lp.prefetch} K tiles in flight through async copies, "
                f"one barrier per K tile; a main loop copying whole K tiles (no K check), a drain "
                f"for the last {lp.prefetch}"
            )
        elif lp.stages > 1:
            inflight = (
                f"{lp.stages}-stage LDS ring: {lp.prefetch} K tile{'s' if lp.prefetch > 1 else ''} in flight "
                f"in registers ({lp.prefetch} x {sum(o.copy.registers() for o in self.operands)} vectors per "
                f"thread; tile i+{lp.prefetch}'s loads issued before tile i's matrix instructions), tile i+1 "
                f"stored into its LDS slot after them, one barrier per K tile"
                + (
                    f"; the K loop unrolled by {lp.unroll}, so each tile in flight keeps its registers"
                    if lp.unroll > 1
                    else ""
                )
            )
        else:
            inflight = (
                f"prefetch {lp.prefetch} K tile in registers "
                f"({sum(o.copy.registers() for o in self.operands)} vectors per thread)"
            )
        lines.append(
            f"loop: {m}x{n} instructions x {k} K steps = {lp.mma_per_k_tile} per K tile"
            f"{', K steps interleaved' if lp.k_interleaved else ''}; {inflight}"
            f"{'; first loads skipped when K is 0' if lp.guard_empty_k else ''}"
        )
        widths = sorted({r.length for r in ep.runs}, reverse=True)
        bounds = "/".join(ax for ax, b in zip(("M", "N"), ep.bounded) if b) or "none"
        lines.append(
            f"epilogue: {len(ep.runs)} stores of {'/'.join(map(str, widths))} element"
            f"{'s' if widths != [1] else ''} per instruction tile, bounds: {bounds}"
            + (f", fused: {' '.join(op.split('.', 1)[-1] for op in ep.fused)}" if ep.fused else "")
            + f" -> {ep.stored_type}{ep.pairs_note}"
        )
        return lines + [f"note: {x}" for x in self.notes]


def interleave_k(intr: Intrinsic, vendor: Vendor, bits: int, a: Layout, b: Layout) -> bool:
    """Whether to interleave the K steps of a tile (AMD only, see Layout.interleave_batch):
    when a lane's K run per instruction is narrower than 128 bits (MFMA: 64), consecutive K
    steps' runs become one 128-bit LDS read, which is also what keeps 16 lanes reading 16 rows
    of the padded tile off each other's banks. Only if A and B then still meet at the same K."""
    if vendor is not Vendor.AMD or a.batch[1] < 2:
        return False
    if min(r.length for r in a.runs(COL) + b.runs(ROW)) * bits >= 128:
        return False
    ai, bi = a.interleave_batch(COL), b.interleave_batch(ROW)
    ik = intr.k
    for kk in range(a.batch[1]):
        for k in range(ik):
            lane_a, el_a, _ = a.owners(0, kk * ik + k)[0]
            lane_b, el_b, _ = b.owners(kk * ik + k, 0)[0]
            if ai.coords(lane_a, el_a, (0, kk))[1] != bi.coords(lane_b, el_b, (kk, 0))[0]:
                return False
    return True


def live_blocks(blocks: int, size: int, extent: int | None) -> int:
    """Of a wave tile's ``blocks`` instruction blocks of ``size`` rows (or columns), block i
    starting at i * size, those that can hold a row below a static ``extent`` in some workgroup
    (all of them when the extent is dynamic)."""
    return blocks if extent is None else min(blocks, -(-extent // size))


def same_tensor_note(problem: Contraction) -> str:
    """The log's note for A @ A (or A @ A^T): one binding read into both operands' tiles."""
    return (
        f"A and B are the same tensor ({problem.a.describe()}), needed in two layouts: each "
        "operand gets its own copy into LDS, in its own layout"
    )


def plan_kernel(
    problem: Contraction, cfg: KernelConfig, target: Target, a: OperandFacts, b: OperandFacts, c_extents: Extents
) -> KernelPlan:
    """Every decision of the rewrite, from the problem, the config, the target and what the
    matcher read off the script's IR."""
    intr = target.intrinsic(cfg.intrinsic)
    vendor = target.vendor
    la, lb, lc = intr.codegen_layouts()
    wm, wn, tk = cfg.wave_tile_m, cfg.wave_tile_n, cfg.tile_k
    a_lay = la.compose(wm // intr.m, tk // intr.k)
    b_lay = lb.compose(tk // intr.k, wn // intr.n)
    interleaved = interleave_k(intr, vendor, TYPE_BITS[problem.a_type], a_lay, b_lay)
    if interleaved:
        a_lay, b_lay = a_lay.interleave_batch(COL), b_lay.interleave_batch(ROW)
    c_lay = lc.compose(wm // intr.m, wn // intr.n)
    notes = [same_tensor_note(problem)] if problem.same_ab else []
    ring = cfg.stages > 1 and vendor is Vendor.NVIDIA  # filled by async copies (AMD's ring: through registers)
    ops = []
    for facts, layout, k_axis, op_shape in ((a, a_lay, COL, intr.a_shape), (b, b_lay, ROW, intr.b_shape)):
        shape = facts.lds_shape[-2:]
        k, nonk = shape[facts.k_dim], shape[1 - facts.k_dim]
        bits = TYPE_BITS[facts.elem]
        ext = facts.extents
        k_outer = ring and facts.k_dim == 0  # async copies store the tile as it is in global memory
        lds_shape = (k, nonk + cfg.lds_pad) if k_outer else (nonk, k + cfg.lds_pad)
        # 4/6-bit data (packed along K, the rows' last dimension): copied as the bytes they are, in
        # 16-byte chunks that need not hold whole values (a row of 128 fp6 is 96 bytes)
        cbits, per_byte = (8, bits) if bits < 8 else (bits, 8)
        copy = CopyShape.plan(
            facts.name,
            facts.copy_rows,
            facts.copy_cols * per_byte // 8,
            cbits,
            facts.k_dim == 0 and not ring,
            cfg.workgroup_size,
            row_length=ext.multiple(-1) * per_byte // 8 if ext.multiple(-1) * per_byte % 8 == 0 else 0,
            lds_row=lds_shape[1] * per_byte // 8,
            # (NVIDIA's register-staged copies keep the plain row order, as measured)
            banks=target.lds_banks if vendor is Vendor.AMD or ring else 0,
            wave=cfg.wave_size,
            asynchronous=ring,
        )
        if ext.multiple(-1) * bits % 128:  # (select refuses packed rows not of whole 16-byte chunks)
            notes.append(
                f"{facts.name}'s rows are {ext.describe(-1)} elements long: its global loads are "
                f"{copy.v * bits} bits wide, not 128"
            )
        frags = FragmentPlan.plan(
            layout, k_axis, bits, op_shape, allow_ldmatrix=intr.op == "nvgpu.mma.sync", k_outer=k_outer
        )
        ops.append(
            OperandPlan(
                facts.name,
                layout,
                k_axis,
                facts.k_dim,
                facts.vec_dim_role,
                facts.elem,
                lds_shape,
                k_outer,
                copy,
                frags,
                ext.bounded()[-2:],
                ext,
            )
        )
    bm, bk = a_lay.batch
    _, bn = b_lay.batch
    loop = LoopPlan(
        tk,
        None if problem.k is None else -(-problem.k // tk),
        (bm, bn, bk),
        interleaved,
        max(1, cfg.stages - 1),
        problem.k is None and vendor is Vendor.NVIDIA and not ring,
        cfg.stages,
        ring,
        ring_slots(cfg, target),
        cfg.stages - 1 if cfg.stages > 2 and vendor is Vendor.AMD else 1,
        (live_blocks(bm, intr.m, problem.m), live_blocks(bn, intr.n, problem.n)),
    )
    c_bounded = c_extents.bounded()[-2:]
    runs = c_lay.runs(COL)
    if c_bounded[1] and any(c_extents.multiple(-1) % r.length or r.col % r.length for r in runs):
        runs = [Run(e, 1, *c_lay.element_offsets()[e]) for e in range(c_lay.elements)]  # may straddle N
    pairs = lane_pairs(
        c_lay,
        runs,
        intr.m,
        intr.n,
        problem.stored_type,
        c_extents,
        vendor,
        problem.c.offset,
        bool(problem.epilogue_ops),
    )
    epi = EpiloguePlan(
        c_lay, tuple(runs), c_bounded, tuple(problem.epilogue_ops), problem.stored_type, c_extents, *(pairs or ())
    )
    return KernelPlan(intr, vendor, cfg.wave_size, cfg.workgroup_size, ops[0], ops[1], loop, epi, tuple(notes))
