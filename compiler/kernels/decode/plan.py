"""The decode kernel's plan: every decision as frozen data, derived from the catalogue's layouts.

A decode GEMM (M up to two instruction row tiles, B stored N x K: ``nn.Linear``'s weight) is bound by
reading B once. The kernel streams B straight from global memory into the matrix instruction's
B registers, 128 bits a load, with no LDS round trip; K is split across the workgroup's waves
and their partial sums are added through LDS at the end (``rewrite.py``).

The K order. A lane of one instruction holds only a few K elements of a B column (mma.sync
m16n8k16: 4 f16, 64 bits; MFMA 16x16x16: 4). The sum over K does not care in which order K is
visited, as long as A and B visit it alike. So over a *chunk* of J instructions (J * k K
elements), the kernel gives each lane one contiguous run of memory for each B column it holds,
and the instructions see K in the order that makes that true:

    mem(j, k) = rank(P) * (J * E) + j * E + e     where k = P + (element e's K offset)

P is the lane's part of the K coordinate (``Layout.lane_terms``), rank(P) its index among the
lanes holding the same column, E the elements a lane holds per instruction. J is the smallest
count that makes a lane's run of memory 128 bits (or more, RDNA3's 16 elements: two loads). A then reads
the same K order: each of its elements (m, k) comes from memory position mem(j, k), and where
those positions are contiguous for a lane, one load brings them (on every catalogue instruction
they are: 128 bits per A row and chunk). ``plan_k_order`` derives the table from the layouts and
checks it is a permutation; tests check it against the executor's independent ISA model through
the numerics.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.target.intrinsics import TYPE_BITS, Intrinsic
from mmaflow.compiler.target.layout import COL, ROW, Layout
from mmaflow.compiler.target.seeds import DECODE_AMD, DECODE_NVIDIA
from mmaflow.compiler.target.targets import Target, Vendor

LOAD_BITS = 128  # the widest global load a lane issues (16 bytes)


def seeds(target: Target):
    """The decode kernel's seeds for the target's vendor (``target/seeds.py``)."""
    return DECODE_NVIDIA if target.vendor is Vendor.NVIDIA else DECODE_AMD


def max_row_tiles(target: Target) -> int:
    """The most instruction row tiles (M up to that many times the instruction's rows): every
    workgroup reads all of A, so A's share of the traffic grows with M / tile_n."""
    return seeds(target).row_tiles.value


@dataclass(frozen=True)
class LaneAffine:
    """A per-lane value ``scale * (P // step)`` where P is the lane's part of one axis of a layout
    (``LaneIndex.part``): what the rewrite emits from the lane id."""

    layout: str  # "A" | "B": whose lane part
    axis: str
    step: int
    scale: int

    def at(self, part: int) -> int:
        return self.scale * (part // self.step)


@dataclass(frozen=True)
class KOrder:
    """The K order of one chunk of ``j`` instructions (``mem[j][k]``: the memory position, within
    the chunk, of logical K element k of instruction j) and how B's lanes load it."""

    j: int  # instructions per chunk
    chunk: int  # K elements per chunk (j * the instruction's k)
    mem: tuple[tuple[int, ...], ...]
    run: int  # B elements per lane, column and chunk: one contiguous run of memory
    b_start: LaneAffine  # the run's first position: scale * rank(P)


@dataclass(frozen=True)
class ALoad:
    """One global load of A per lane and chunk: ``length`` elements of row (lane's row part +
    ``row``) from chunk position (``start`` of the lane + ``first``), and which operand element
    of which instruction each loaded element feeds: ``feeds[i] = (j, e)``."""

    row: int
    first: int
    length: int
    feeds: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class DecodePlan:
    intrinsic: Intrinsic
    vendor: Vendor
    wave_size: int
    waves_k: int
    n_tiles: int  # instruction tiles along N per workgroup (all waves compute all of them)
    unroll: int  # chunks per K tile (their loads all issued before their instructions)
    tile_k: int  # K per wave and K tile: unroll * chunk
    k_tiles: int  # K tiles in all (each wave runs every waves_k-th)
    k_order: KOrder
    a_start: LaneAffine  # the lane's chunk position for A: scale * (A's K lane part // step)
    # Per instruction row tile i (rows i * the instruction's M ..): A's loads, and its row offsets
    # past M for every lane (no load: zeros).
    a_loads: tuple[tuple[ALoad, ...], ...]
    a_zero_rows: tuple[tuple[int, ...], ...]
    m: int
    epilogue: object  # the tiled kernel's epilogue plan (``common/plan.py``): the stores are the same
    notes: tuple[str, ...] = ()
    # Block-scaled (MX) problems: per instruction j of a chunk, the chunk position of the MX block
    # the lane's A / B values come from, past its lane start (``plan_scale_blocks``); () otherwise.
    a_blocks: tuple[int, ...] = ()
    b_blocks: tuple[int, ...] = ()

    workgroup_size: int = 0
    # config stages 2: a wave's loads of its next K tile issued before the matrix instructions of the
    # current one, carried in registers (the last round peeled); 1: each round loads, then computes
    prefetch: bool = False

    @property
    def m_tiles(self) -> int:
        """Instruction row tiles: M up to ``m_tiles`` times the instruction's M."""
        return len(self.a_loads)

    @property
    def c_elements(self) -> int:
        return self.intrinsic.c.op_vector_length

    def expectations(self) -> attrs.Expectations:
        per_tile = self.unroll * self.k_order.j * self.m_tiles * self.n_tiles
        return attrs.Expectations(
            global_load_bits=LOAD_BITS,
            k_tiles=-(-self.k_tiles // self.waves_k),  # per wave: its share of the K tiles
            mma_per_k_tile=per_tile,
        )

    def describe(self) -> list[str]:
        intr, ko = self.intrinsic, self.k_order
        return [
            f"{intr.name} wave{self.wave_size}, decode: {self.waves_k} waves split K, each the whole "
            f"{intr.m * self.m_tiles}x{intr.n * self.n_tiles} tile; {self.workgroup_size} threads",
            f"K tiles of {self.tile_k} ({self.unroll} chunks of {ko.chunk}: {ko.j} instructions each): "
            f"{self.k_tiles}, wave w runs tiles w, w + {self.waves_k}, ..."
            + (
                "; the next tile's loads issued before this tile's instructions (in registers)" if self.prefetch else ""
            ),
            f"B: straight to registers, {ko.run} elements per lane, column and chunk "
            f"({ko.run * TYPE_BITS[intr.b_type] // 8} bytes), no LDS",
            f"A: {sum(map(len, self.a_loads))} load(s) per lane and chunk"
            + "".join(
                f"; rows {[i * intr.m + r for r in z]} past M = {self.m}: zeros"
                for i, z in enumerate(self.a_zero_rows)
                if z
            ),
            f"partial sums: LDS[{self.waves_k}][{self.m_tiles * self.n_tiles}][{self.wave_size}][{self.c_elements}] "
            f"x {intr.c_type}, added by wave 0 in wave order, then the epilogue's stores",
        ] + (
            [
                "block scales: per instruction, each lane's E8M0 scale of its A row and of its B column for "
                "the MX block its values come from, a byte load each"
            ]
            if self.b_blocks
            else []
        )


def _lane_parts(lay: Layout, axis: str) -> list[int]:
    """The lane part of ``axis`` for lanes 0 .. lanes_used - 1."""
    out = []
    for lane in range(lay.lanes_used):
        part = 0
        for _, div, size, ax, stride in lay.lane_terms():
            if ax == axis:
                part += ((lane // div) % size) * stride
        out.append(part)
    return out


def _progression(values: list[int]) -> int | None:
    """The common difference d of sorted distinct ``values`` = {0, d, 2d, ...} (1 for {0})."""
    vs = sorted(set(values))
    if vs[0] != 0:
        return None
    if len(vs) == 1:
        return 1
    d = vs[1]
    return d if vs == list(range(0, d * len(vs), d)) else None


def plan_k_order(intr: Intrinsic, stored_bits: int | None = None, value_order: tuple[int, ...] | None = None) -> KOrder:
    """The chunk's K order from B's codegen layout (``UnsupportedError`` where it has none).
    ``stored_bits``: B's bits per element in memory where it is stored narrower than the
    instruction reads it (packed weights, ``weight_only.py``); ``value_order``: the lane's run as
    the registers hold it, value i being the run's element ``value_order[i]`` in memory."""
    _, lb, _ = intr.codegen_layouts()
    bits = stored_bits or TYPE_BITS[intr.b_type]
    offsets = lb.element_offsets()  # (k, n) offset of each element
    if any(c != 0 for _, c in offsets):
        raise UnsupportedError(f"{intr.name}: a lane holds several B columns per instruction")
    e_count = lb.elements
    parts = _lane_parts(lb, ROW)
    step = _progression(parts)
    if step is None:
        raise UnsupportedError(f"{intr.name}: B's lanes do not split K evenly ({sorted(set(parts))})")
    j = 1
    while (j * e_count * bits) % LOAD_BITS:
        j *= 2
        if j > 8:
            raise UnsupportedError(f"{intr.name}: no chunk gives a lane 128 contiguous bits of B")
    run = j * e_count
    order = value_order or tuple(range(run))
    if sorted(order) != list(range(run)):
        raise UnsupportedError(f"{intr.name}: the run's value order {order} is not a permutation of {run} elements")
    mem = [[-1] * intr.k for _ in range(j)]
    for p in sorted(set(parts)):
        for e, (dk, _) in enumerate(offsets):
            k = p + dk
            for jj in range(j):
                mem[jj][k] = (p // step) * run + order[jj * e_count + e]
    flat = sorted(x for row in mem for x in row)
    if flat != list(range(j * intr.k)):
        raise UnsupportedError(f"{intr.name}: the K order is not a permutation of the chunk")
    return KOrder(j, j * intr.k, tuple(tuple(r) for r in mem), run, LaneAffine("B", ROW, step, run))


def plan_a_loads(intr: Intrinsic, ko: KOrder, m: int) -> tuple[LaneAffine, tuple[ALoad, ...], tuple[int, ...]]:
    """A's loads per lane and chunk in the chunk's K order: the lane's start (affine in its K lane
    part), one load per contiguous run of positions of one row, and the rows past ``m``."""
    la, _, _ = intr.codegen_layouts()
    bits = TYPE_BITS[intr.a_type]
    kparts = sorted(set(_lane_parts(la, COL)))
    offsets = la.element_offsets()  # (row, k) offset of each element
    step = _progression(kparts)
    if step is None:
        raise UnsupportedError(f"{intr.name}: A's lanes do not split K evenly")
    # For each (j, e): mem(j, q + dk_e) = scale * (q // step) + base(j, e) for every lane part q.
    scale = None
    base: dict = {}
    for jj in range(ko.j):
        for e, (_, dk) in enumerate(offsets):
            pos = [ko.mem[jj][q + dk] for q in kparts]
            s = (pos[1] - pos[0]) if len(pos) > 1 else 0
            if any(p - pos[0] != s * i for i, p in enumerate(pos)):
                raise UnsupportedError(f"{intr.name}: A's K positions are not affine in the lane")
            if scale is None or (len(pos) > 1 and scale == 0):
                scale = s
            elif len(pos) > 1 and s != scale:
                raise UnsupportedError(f"{intr.name}: A's K positions move unevenly with the lane")
            base[(jj, e)] = pos[0]
    start = LaneAffine("A", COL, step, scale or 0)
    zero_rows = []
    loads = []
    by_row: dict = {}
    for (jj, e), b in base.items():
        by_row.setdefault(offsets[e][0], []).append((b, jj, e))
    # 4/6-bit A: one load per instruction of the lane's values, as bytes (``packed_a_refusal``)
    elems = la.elements if bits < 8 else LOAD_BITS // bits
    for row in sorted(by_row):
        if row >= m:  # the lowest lane's row is past M: no lane reads real data
            zero_rows.append(row)
            continue
        items = sorted(by_row[row])
        i = 0
        while i < len(items):
            first = items[i][0]
            n = 1
            while i + n < len(items) and items[i + n][0] == first + n and n < elems:
                n += 1
            length = n
            # a load of L elements starts at a multiple of L (the alignment it claims), every lane's
            while first % length or (scale or 0) % length:
                length //= 2
            loads.append(ALoad(row, first, length, tuple((jj, e) for _, jj, e in items[i : i + length])))
            i += length
    return start, tuple(loads), tuple(zero_rows)


def packed_a_refusal(intr: Intrinsic, loads) -> str | None:
    """Why 4/6-bit A cannot be read as the decode kernel reads packed operands -- each instruction's
    values of a lane one run of memory, in the order the operand holds them, loaded as bytes and
    bit-cast whole -- or None."""
    e = intr.codegen_layouts()[0].elements
    for ld in loads:
        if ld.length != e or [x[1] for x in ld.feeds] != list(range(e)) or len({x[0] for x in ld.feeds}) != 1:
            return (
                f"{intr.name}: a lane's 4/6-bit A values of one instruction are not one run of memory in operand order"
            )
    return None


def plan_scale_blocks(
    intr: Intrinsic, ko: KOrder, a_start: LaneAffine, a_loads
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A block-scaled instruction's MX blocks: per instruction j of a chunk, where the lane's 32
    values of A and of B start in the chunk's memory order past the lane's start (A: past
    ``a_start``, B: past ``b_start``). Each must be one whole 32-value block, 32-aligned, for a lane's
    one scale to be the scale of all its values (``UnsupportedError`` otherwise)."""
    block = 32
    e = intr.codegen_layouts()[1].elements
    if e != block or ko.run % block or ko.b_start.scale % block:
        raise UnsupportedError(f"{intr.name}: a lane's B values of one instruction are not one {block}-value block")
    b_blocks = tuple(j * e for j in range(ko.j))
    if a_start.scale % block:
        raise UnsupportedError(f"{intr.name}: the lanes' A runs do not start on {block}-value blocks")
    pos = {f: ld.first + i for ld in a_loads for i, f in enumerate(ld.feeds)}
    a_blocks = []
    for j in range(ko.j):
        first = pos.get((j, 0))
        if (
            first is None
            or first % block
            or sorted(pos.get((j, x), -1) for x in range(e)) != list(range(first, first + e))
        ):
            raise UnsupportedError(f"{intr.name}: a lane's A values of one instruction are not one {block}-value block")
        a_blocks.append(first)
    return tuple(a_blocks), b_blocks


def open_dims(problem: Contraction) -> list[str]:
    """The dynamic sizes the decode kernel cannot plan for: all but an M a version bounds."""
    return [d.dim for d in problem.dynamic if not (d.dim == "m" and d.at_most)]


def decode_refusal(target: Target, problem: Contraction, intr: Intrinsic | None) -> str | None:
    """Why the decode kernel does not take ``problem`` with ``intr`` (None: it does; ``intr`` may be
    None for a dynamic problem, refused before any instruction is asked)."""
    unbounded = open_dims(problem)
    if unbounded:  # (a dynamic M bounded by a version's test is planned at its bound)
        return f"dynamic sizes ({', '.join(unbounded)}; the decode kernel is planned for static ones)"
    if problem.batched and (
        problem.scales is not None or TYPE_BITS[problem.a_type] < 8 or TYPE_BITS[problem.b_type] < 8
    ):
        return "a batched contraction of 4/6-bit or block-scaled operands"
    most = max_row_tiles(target)
    if problem.m > intr.m * most:
        return f"M = {problem.m} is more than {most} {intr.name} row tiles ({intr.m * most} rows)"
    if not problem.b_transposed or problem.a_transposed:
        return "B is not stored N x K with A M x K (the decode kernel reads both K-innermost)"
    if problem.same_ab:
        return "A and B are one tensor"
    for name, t in (("A", problem.a_type), ("B", problem.b_type)):
        if problem.k * TYPE_BITS[t] % LOAD_BITS:
            return f"K = {problem.k} {t} values ({name}'s rows) are not a whole number of 16-byte loads"
    for name, at in (("A", problem.a), ("B", problem.b)):
        if at.offset is None or at.offset % (LOAD_BITS // 8):
            return f"{name} is not at a 16-byte aligned constant byte offset ({at.describe()})"
    try:
        ko = plan_k_order(intr)
    except UnsupportedError as e:
        return str(e)
    if problem.k % ko.chunk:
        return f"K = {problem.k} is not a multiple of the {ko.chunk}-deep chunk"
    if problem.k // ko.chunk < 2:
        return f"K = {problem.k} is one chunk: nothing to split across waves"
    try:  # (A's K positions in the chunk's order: a mixed-width pair's may not be affine in the lane)
        start, loads, _ = plan_a_loads(intr, ko, min(problem.m, intr.m))
        if problem.scales is not None:
            plan_scale_blocks(intr, ko, start, loads)
    except UnsupportedError as e:
        return str(e)
    return packed_a_refusal(intr, loads) if TYPE_BITS[problem.a_type] < 8 else None


def plan_decode(problem: Contraction, cfg: KernelConfig, target: Target, epilogue) -> DecodePlan:
    """The plan of ``cfg`` (validated by the family) for ``problem``."""
    intr = target.intrinsic(cfg.intrinsic)
    problem = problem.estimate()  # (a dynamic M at its version's bound; the loads are bounded by the true M)
    why = decode_refusal(target, problem, intr)
    if why is not None:
        raise UnsupportedError(f"the decode kernel cannot take {problem.describe()}: {why}")
    ko = plan_k_order(intr)
    tiles = [plan_a_loads(intr, ko, problem.m - i * intr.m) for i in range(cfg.tile_m // intr.m)]
    a_start = tiles[0][0]
    a_blocks, b_blocks = plan_scale_blocks(intr, ko, a_start, tiles[0][1]) if problem.scales is not None else ((), ())
    return DecodePlan(
        intrinsic=intr,
        vendor=target.vendor,
        wave_size=cfg.wave_size,
        waves_k=cfg.waves_k,
        n_tiles=cfg.tile_n // intr.n,
        unroll=cfg.tile_k // ko.chunk,
        tile_k=cfg.tile_k,
        k_tiles=problem.k // cfg.tile_k,
        k_order=ko,
        a_start=a_start,
        a_loads=tuple(t[1] for t in tiles),
        a_zero_rows=tuple(t[2] for t in tiles),
        m=problem.m,
        epilogue=epilogue,
        workgroup_size=cfg.workgroup_size,
        a_blocks=a_blocks,
        b_blocks=b_blocks,
        prefetch=cfg.stages == 2,
    )
