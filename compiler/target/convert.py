"""Layout conversion: the registers of one layout re-laid as another, planned as data.

In attention, P = softmax(S) leaves the first matrix instruction in the accumulator (C) layout
and must enter the second as its A operand. This module plans that move for any two layouts of
the same tile (``plan_conversion``) and, for attention, for each way of computing S
(``attention_plans``): S = Q K^T (P in C's layout) or S^T = K Q^T (P in C's layout transposed,
``Layout.transpose``: Q enters as the B operand, which mirrors A on every target here).

Registers. Both fragments hold 16-bit values (S is converted to A's element type first: the
same conversions on every route, counted apart), packed two per 32-bit register. A fragment's
per-lane slots run over its instructions (batch row-major) and, within one, its logical
elements; slots 2w and 2w+1 form register w (low, high half). A's op vectors are exactly these.

Routes, each a complete recipe a test can replay lane by lane:

- registers (``RegisterRoute``): ``permutes`` first, each one instruction that gives every lane
  one 32-bit register of another lane (the same register index in every lane, a per-lane source
  lane: ``gpu.shuffle`` / ``nvvm.shfl.sync``, ``rocdl.ds_bpermute``, ``rocdl.permlanex16``);
  then each destination register is assembled from two halves of the lane's own registers or of
  permute results (``Assemble``; free when it is one whole register already, else a select per
  extra source of each 16-bit half where lanes differ, or one pack when they do not). No
  permutes: the conversion is in-lane. Permutes are found per source register: a lane needing
  n other lanes' copies of it takes n permutes; when the needs group into as many lane-XOR
  patterns, those are used (they lower to cheaper instructions). A permute that would move a
  different register from each lane (a per-lane select before the permute) is not explored.
- LDS (``LdsRoute``): every lane stores its slots into a row-major tile (the key axis
  contiguous, as mmaflow stores A tiles), then loads its A slots (in A's own K order); the
  widest aligned 2-16 byte accesses that runs of consecutive slots allow; one wait.

A register route may also rename A's columns (``in_lane_k_map``): P V sums over the keys, so
any permutation of them applied to P's A operand and V's B operand alike is free, and one
often makes the conversion in-lane.

``ConversionPlan.chosen``: the route with fewer LDS-pipe instructions (stores, loads,
ds_bpermute), then fewer instructions; registers on a tie. Counts are per wave, for the P tile
``attention_tile`` (a wave's larger tile repeats it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.target.intrinsics import TYPE_BITS, Intrinsic
from mmaflow.compiler.target.layout import Layout

HALVES = 2  # 16-bit values per 32-bit register


# ---------------------------------------------------------------------------------------------
# Fragments: a (possibly composed) layout as per-lane 16-bit slots.


def slots(layout: Layout) -> int:
    """16-bit slots per lane: every instruction's logical elements."""
    return layout.elements * layout.num_instructions


def slot_coords(layout: Layout, lane: int, slot: int, k_map: tuple[int, ...] | None = None) -> tuple[int, int]:
    """(row, col) of the tile that slot ``slot`` of lane ``lane`` holds; ``k_map`` renames the
    columns (a K permutation: column c holds column k_map[c] of the tile)."""
    instance, element = divmod(slot, layout.elements)
    row, col = layout.coords(lane, element, divmod(instance, layout.batch[1]))
    return row, (col if k_map is None else k_map[col])


def slot_of(layout: Layout, row: int, col: int, prefer_lane: int) -> tuple[int, int]:
    """(lane, slot) holding tile element (row, col): ``prefer_lane``'s copy if it holds one."""
    owners = layout.owners(row, col)
    lane, element, (bi, bj) = next((o for o in owners if o[0] == prefer_lane), owners[0])
    return lane, (bi * layout.batch[1] + bj) * layout.elements + element


# ---------------------------------------------------------------------------------------------
# The plan, as data.


@dataclass(frozen=True)
class Permute:
    """One cross-lane instruction: lane l receives register ``register`` of lane source_lane[l]."""

    register: int
    source_lane: tuple[int, ...]
    pattern: str  # "lane ^ 16", ..., or "general"
    op: str  # the MLIR op that emits it
    isa: str  # the instruction it lowers to

    def describe(self) -> str:
        if self.pattern != "general":
            return f"register {self.register}, {self.pattern}: {self.op} -> {self.isa}"
        return f"register {self.register}, source lanes {list(self.source_lane)}: {self.op} -> {self.isa}"


# A half: (where, index, half): where "own" = the lane's own register ``index``; "permute" = the
# result of permute ``index``.
Half = tuple[str, int, int]


@dataclass(frozen=True)
class Assemble:
    """Destination register ``register``: per lane, its (low, high) halves."""

    register: int
    halves: tuple[tuple[Half, Half], ...]

    @property
    def instructions(self) -> int:
        """The same whole register in every lane: 0 (a renaming). Else one select per extra
        source of each half (``v_cndmask_b16`` writes one half of a register on gfx11; what
        ``convert_emit`` emits and LLVM makes of it, lit_tests/isa/conversion.test), or, when every lane
        takes both halves from the same places, one pack (``v_perm_b32`` / ``v_pack_b32_f16``)."""
        whole = {lo[:2] for lo, hi in self.halves if lo[:2] == hi[:2] and (lo[2], hi[2]) == (0, 1)}
        if len(whole) == 1 and all(lo[:2] == hi[:2] and (lo[2], hi[2]) == (0, 1) for lo, hi in self.halves):
            return 0
        selects = sum(len({pair[h] for pair in self.halves}) - 1 for h in range(HALVES))
        return selects or 1


@dataclass(frozen=True)
class RegisterRoute:
    permutes: tuple[Permute, ...]
    assemble: tuple[Assemble, ...]
    waits: int  # ds_bpermute goes through the LDS pipe: one s_waitcnt before its results are used

    @property
    def kind(self) -> str:
        return "in-lane" if not self.permutes else "cross-lane"

    @property
    def instructions(self) -> int:
        return len(self.permutes) + sum(a.instructions for a in self.assemble) + self.waits

    @property
    def lds_pipe(self) -> int:
        """Instructions that go through the LDS pipe (ds_bpermute_b32)."""
        return sum(p.isa.startswith("ds_") for p in self.permutes)


@dataclass(frozen=True)
class LdsAccess:
    """One LDS instruction: every lane moves ``length`` slots from slot ``first`` to/from its own
    byte address (address[l])."""

    first: int
    length: int
    address: tuple[int, ...]


@dataclass(frozen=True)
class LdsRoute:
    stores: tuple[LdsAccess, ...]
    loads: tuple[LdsAccess, ...]
    bytes_written: int  # per wave
    bytes_read: int
    tile_bytes: int  # LDS one wave needs
    waits: int = 1

    @property
    def instructions(self) -> int:
        return len(self.stores) + len(self.loads) + self.waits

    @property
    def lds_pipe(self) -> int:
        return len(self.stores) + len(self.loads)


@dataclass(frozen=True)
class ConversionPlan:
    source: Layout
    dest: Layout
    k_map: tuple[int, ...]  # register route: destination column c holds tile column k_map[c]
    registers: RegisterRoute
    lds: LdsRoute
    converts: int  # f32 -> 16-bit pack conversions per lane (every route)

    @property
    def k_permuted(self) -> bool:
        return self.k_map != tuple(range(len(self.k_map)))

    @property
    def chosen(self) -> str:
        """Fewer LDS-pipe instructions first (in a flash-attention loop K and V stream through
        LDS every iteration, and an LDS round trip sits on the dependency chain between the two
        matrix instructions), then fewer instructions; registers on a tie."""
        reg, lds = self.registers, self.lds
        return "registers" if (reg.lds_pipe, reg.instructions) <= (lds.lds_pipe, lds.instructions) else "lds"

    @property
    def kind(self) -> str:
        return self.registers.kind if self.chosen == "registers" else "LDS round trip"

    @property
    def instructions(self) -> int:
        return self.registers.instructions if self.chosen == "registers" else self.lds.instructions

    @property
    def lds_bytes(self) -> int:
        return 0 if self.chosen == "registers" else self.lds.bytes_written + self.lds.bytes_read

    @property
    def lds_pipe(self) -> int:
        return self.registers.lds_pipe if self.chosen == "registers" else self.lds.lds_pipe


# ---------------------------------------------------------------------------------------------
# Planning.


@dataclass(frozen=True)
class Shuffles:
    """How a target moves a register across lanes: (MLIR op, instruction) per lane pattern."""

    vendor: str  # "amd" | "nvidia"
    family: str

    def lower(self, pattern: str, wave_size: int) -> tuple[str, str]:
        if self.vendor == "nvidia":
            if pattern.startswith("lane ^ "):
                return "gpu.shuffle xor", "shfl.sync.bfly.b32"
            return "gpu.shuffle idx", "shfl.sync.idx.b32"
        if pattern == "lane ^ 16" and self.family in ("rdna3", "rdna4"):
            # v_permlanex16_b32 (VALU): each lane of a 16-lane row reads the lane its selector
            # names in the other row of its 32-lane half; identity selectors make lane ^ 16.
            return "rocdl.permlanex16", "v_permlanex16_b32"
        # Anything else, e.g. lane ^ 32 in wave64 (RDNA3's v_permlane64_b32 has no ROCDL op in
        # IREE 3.13): ds_bpermute_b32, the LDS crossbar with no LDS memory traffic.
        return "rocdl.ds_bpermute", "ds_bpermute_b32"


def _check_pair(src: Layout, dst: Layout) -> None:
    if (src.rows, src.cols) != (dst.rows, dst.cols):
        raise UnsupportedError(f"cannot convert a {src.rows}x{src.cols} tile to a {dst.rows}x{dst.cols} one")
    if src.wave_size != dst.wave_size:
        raise UnsupportedError(f"cannot convert between wave{src.wave_size} and wave{dst.wave_size} layouts")
    if dst.vector_stride != 1:
        raise UnsupportedError("the destination layout must use every slot of its op vector (A and B do)")
    for lay in (src, dst):
        if slots(lay) % HALVES:
            raise UnsupportedError(f"{slots(lay)} 16-bit slots per lane do not fill whole registers")


def _permutes(needs: dict[int, dict[int, set[int]]], wave: int, shuffles: Shuffles) -> list[Permute]:
    """Permutes covering ``needs[register][lane]`` = the other lanes whose copy of that register
    ``lane`` needs."""
    out = []
    for reg in sorted(needs):
        per_lane = needs[reg]
        fewest = max(len(s) for s in per_lane.values())
        xors = sorted({lane ^ src for lane, s in per_lane.items() for src in s})
        if len(xors) == fewest and all(x < wave for x in xors):
            for x in xors:
                op, isa = shuffles.lower(f"lane ^ {x}", wave)
                out.append(Permute(reg, tuple(l ^ x for l in range(wave)), f"lane ^ {x}", op, isa))
            continue
        lists = {lane: sorted(s) for lane, s in per_lane.items()}
        for i in range(fewest):
            source = tuple(lists[l][i] if l in lists and i < len(lists[l]) else l for l in range(wave))
            op, isa = shuffles.lower("general", wave)
            out.append(Permute(reg, source, "general", op, isa))
    return out


def register_route(src: Layout, dst: Layout, shuffles: Shuffles, k_map: tuple[int, ...]) -> RegisterRoute:
    wave = dst.wave_size
    # Where each destination slot's value is: (source lane, source slot).
    where = [
        [slot_of(src, *slot_coords(dst, lane, s, k_map), prefer_lane=lane) for s in range(slots(dst))]
        for lane in range(wave)
    ]
    needs: dict[int, dict[int, set[int]]] = {}
    for lane in range(wave):
        for src_lane, src_slot in where[lane]:
            if src_lane != lane:
                needs.setdefault(src_slot // HALVES, {}).setdefault(lane, set()).add(src_lane)
    permutes = _permutes(needs, wave, shuffles)
    by_source = {(p.register, p.source_lane[lane], lane): i for i, p in enumerate(permutes) for lane in range(wave)}
    assemble = []
    for reg in range(slots(dst) // HALVES):
        per_lane = []
        for lane in range(wave):
            pair = []
            for s in (HALVES * reg, HALVES * reg + 1):
                src_lane, src_slot = where[lane][s]
                r, h = divmod(src_slot, HALVES)
                pair.append(("own", r, h) if src_lane == lane else ("permute", by_source[(r, src_lane, lane)], h))
            per_lane.append(tuple(pair))
        assemble.append(Assemble(reg, tuple(per_lane)))
    waits = 1 if any(p.isa.startswith("ds_") for p in permutes) else 0
    return RegisterRoute(tuple(permutes), tuple(assemble), waits)


def _accesses(layout: Layout, address) -> tuple[LdsAccess, ...]:
    """Each lane's slots in runs of consecutive slots at consecutive addresses, cut into the
    widest accesses (2-16 bytes) aligned in every lane."""
    n = slots(layout)
    out = []
    s = 0
    while s < n:
        length = 1
        while s + length < n and all(
            address(l, s + length) == address(l, s) + 2 * length for l in range(layout.wave_size)
        ):
            length += 1
        while length:
            size = max(
                p
                for p in (1, 2, 4, 8)
                if p <= length and all(address(l, s) % (2 * p) == 0 for l in range(layout.wave_size))
            )
            out.append(LdsAccess(s, size, tuple(address(l, s) for l in range(layout.wave_size))))
            s += size
            length -= size
    return tuple(out)


def lds_route(src: Layout, dst: Layout, k_map: tuple[int, ...]) -> LdsRoute:
    cols = dst.cols

    def address(layout, cmap=None):
        def at(lane, s):
            r, c = slot_coords(layout, lane, s, cmap)
            return 2 * (r * cols + c)

        return at

    stores, loads = _accesses(src, address(src)), _accesses(dst, address(dst, k_map))
    tile = 2 * dst.rows * dst.cols
    # Every lane stores all its slots and loads all of A's (replicated lanes too).
    return LdsRoute(
        stores,
        loads,
        bytes_written=2 * src.wave_size * slots(src),
        bytes_read=2 * dst.wave_size * slots(dst),
        tile_bytes=tile,
    )


def in_lane_k_map(src: Layout, dst: Layout) -> tuple[int, ...] | None:
    """A renaming of the destination's columns that makes the conversion in-lane, if one exists.

    The destination is the A operand of P V, whose columns are the K (key) axis: any permutation
    of K applied to A and to V's B operand alike leaves P V unchanged (RDNA4's codegen K order,
    MFMA's interleaved K steps are such permutations). Column c may become key k when every
    lane that holds column c of some row holds (that row, key k) itself; a perfect matching of
    columns to keys (augmenting paths) is such a permutation."""
    held = [{slot_coords(src, lane, s): s for s in range(slots(src))} for lane in range(src.wave_size)]
    uses: dict[int, list[tuple[int, int, int]]] = {}
    for lane in range(dst.wave_size):
        for s in range(slots(dst)):
            r, c = slot_coords(dst, lane, s)
            uses.setdefault(c, []).append((lane, r, s))
    # Keys tried first: those sitting in the same slot of the source (no reordering at all).
    fits = {
        c: sorted(
            (k for k in range(dst.cols) if all((r, k) in held[lane] for lane, r, _ in u)),
            key=lambda k: -sum(held[lane][(r, k)] == s for lane, r, s in u),
        )
        for c, u in uses.items()
    }
    key_of: dict[int, int] = {}
    col_of: dict[int, int] = {}

    def augment(c, seen):
        for k in fits[c]:
            if k in seen:
                continue
            seen.add(k)
            if k not in col_of or augment(col_of[k], seen):
                key_of[c], col_of[k] = k, c
                return True
        return False

    for c in sorted(fits, key=lambda c: len(fits[c])):
        if not augment(c, set()):
            return None
    return tuple(key_of[c] for c in range(dst.cols))


def plan_conversion(src: Layout, dst: Layout, shuffles: Shuffles, *, permute_k: bool = True) -> ConversionPlan:
    """Plan moving a wave's 16-bit registers from layout ``src`` to layout ``dst`` of one tile.
    With ``permute_k``, the destination's columns may be renamed (``in_lane_k_map``) when that
    makes the conversion in-lane and it is not in-lane as laid out."""
    _check_pair(src, dst)
    converts = math.ceil(slots(src) / HALVES)
    identity = tuple(range(dst.cols))
    k_map = identity
    route = register_route(src, dst, shuffles, identity)
    if route.permutes and permute_k:
        found = in_lane_k_map(src, dst)
        if found is not None:
            k_map, route = found, register_route(src, dst, shuffles, found)
    return ConversionPlan(src, dst, k_map, route, lds_route(src, dst, identity), converts)


# ---------------------------------------------------------------------------------------------
# Attention: P (C of the QK instruction) -> A of the PV instruction.


@dataclass(frozen=True)
class AttentionConversion:
    """One way of computing S, and the plan that turns its accumulator into P's A operand."""

    intrinsic: Intrinsic
    transposed: bool  # S^T = K Q^T (P in C's layout transposed)
    source_batch: tuple[int, int]  # instructions of the S (or S^T) computation, rows x cols of S/S^T
    dest_batch: tuple[int, int]  # A instructions, rows x cols of P
    plan: ConversionPlan

    @property
    def how(self) -> str:
        return "S^T = K Q^T" if self.transposed else "S = Q K^T"


def attention_tile(intr: Intrinsic, transposed: bool) -> tuple[int, int]:
    """The smallest P tile (queries x keys) made of whole S (or S^T) and A instruction tiles."""
    q, k = (intr.n, intr.m) if transposed else (intr.m, intr.n)
    return math.lcm(q, intr.m), math.lcm(k, intr.k)


def attention_conversion(intr: Intrinsic, *, transposed: bool, vendor: str, family: str) -> AttentionConversion:
    """Plan P's C -> A conversion when S is computed (transposed or not) with ``intr`` and P V
    with ``intr`` too (the same instruction, as a flash-attention kernel would use)."""
    if TYPE_BITS[intr.a_type] != 16 or TYPE_BITS[intr.c_type] != 32:
        raise UnsupportedError(
            f"{intr.name}: attention's P needs a 16-bit A operand and a 32-bit accumulator "
            f"({intr.a_type} -> {intr.c_type})"
        )
    rows, cols = attention_tile(intr, transposed)
    if transposed:
        batch = (cols // intr.m, rows // intr.n)  # S^T: keys x queries
        src = intr.c.compose(*batch).transpose()
    else:
        batch = (rows // intr.m, cols // intr.n)
        src = intr.c.compose(*batch)
    a = intr.codegen_layouts()[0]  # the K order codegen packs A (and B) with
    dest_batch = (rows // intr.m, cols // intr.k)
    dst = a.compose(*dest_batch)
    plan = plan_conversion(src, dst, Shuffles(vendor, family))
    return AttentionConversion(intr, transposed, batch, dest_batch, plan)


def attention_plans(intr: Intrinsic, *, vendor: str, family: str) -> tuple[AttentionConversion, AttentionConversion]:
    """Both ways of computing S, in order S = Q K^T, S^T = K Q^T."""
    return tuple(attention_conversion(intr, transposed=t, vendor=vendor, family=family) for t in (False, True))


def best(conversions) -> AttentionConversion:
    """The cheapest: by each plan's chosen route, fewest LDS-pipe instructions, then fewest
    instructions, then S = Q K^T."""
    return min(conversions, key=lambda c: (c.plan.lds_pipe, c.plan.instructions, c.transposed))


# ---------------------------------------------------------------------------------------------
# Presentation.


def hardware_keys(conv: AttentionConversion, route: str = "registers") -> tuple[int, ...]:
    """The key each hardware column of the A fragments holds after ``route``: the codegen K
    order and (registers) the plan's K renaming, composed (identity when neither applies). V's B
    operand must read its rows in this order."""
    plan = conv.plan
    k_map = plan.k_map if route == "registers" else None
    hw = conv.intrinsic.a.compose(*conv.dest_batch)
    keys: dict[int, int] = {}
    for lane in range(hw.wave_size):
        for s in range(slots(hw)):
            _, c_hw = slot_coords(hw, lane, s)
            _, key = slot_coords(plan.dest, lane, s, k_map)
            if keys.setdefault(c_hw, key) != key:
                raise AssertionError(f"{conv.intrinsic.name}: hardware column {c_hw} holds two keys")
    return tuple(keys[c] for c in range(hw.cols))


def _route_line(plan: ConversionPlan) -> str:
    reg, lds = plan.registers, plan.lds
    kinds: dict[str, int] = {}
    for p in reg.permutes:
        kinds[p.isa] = kinds.get(p.isa, 0) + 1
    moves = sum(a.instructions for a in reg.assemble)
    perms = ", ".join(f"{n} {isa}" for isa, n in kinds.items())
    regs = (
        f"{reg.kind}, {len(reg.permutes)} permutes"
        + (f" ({perms})" if perms else "")
        + f" + {moves} assembly"
        + (f" + {reg.waits} wait" if reg.waits else "")
        + f" = {reg.instructions}"
    )

    def count(n, what):
        return f"{n} {what}{'s' if n != 1 else ''}"

    lds_text = (
        f"{count(len(lds.stores), 'store')} + {count(len(lds.loads), 'load')} + {lds.waits} wait = "
        f"{lds.instructions}, "
        f"{lds.bytes_written} B written + {lds.bytes_read} B read"
    )
    return f"registers: {regs} | LDS round trip: {lds_text}"


def describe(conversions, chosen: AttentionConversion) -> str:
    first = conversions[0]
    intr = first.intrinsic
    rows, cols = first.plan.dest.rows, first.plan.dest.cols
    lines = [
        f"{intr.name} (wave{intr.wave_size}): P ({intr.c_type} accumulator, converted to {intr.a_type}) -> "
        f"A of the next {intr.name}; P tile {rows}x{cols} (queries x keys), per wave"
    ]
    for c in conversions:
        mark = "*" if c is chosen else " "
        lines.append(
            f" {mark} {c.how:<12} {c.how.split(' =')[0]} instructions {c.source_batch[0]}x{c.source_batch[1]}, "
            f"A instructions {c.dest_batch[0]}x{c.dest_batch[1]}: {_route_line(c.plan)} -> "
            f"{'registers' if c.plan.chosen == 'registers' else 'LDS'}"
        )
    plan = chosen.plan
    lines.append(
        f"   chosen: {chosen.how}, {plan.kind}: {plan.instructions} instructions, "
        f"{plan.lds_pipe} through the LDS pipe, {plan.lds_bytes} LDS bytes"
    )
    lines.append(
        f"     convert: {plan.converts} packed {intr.c_type} -> {intr.a_type} conversions per lane (every route)"
    )
    if plan.chosen == "registers":
        for i, p in enumerate(plan.registers.permutes):
            lines.append(f"     permute {i}: {p.describe()}")
        moved = [a for a in plan.registers.assemble if a.instructions]
        lines.append(
            f"     assemble: {len(moved)} of {len(plan.registers.assemble)} A registers built "
            f"({sum(a.instructions for a in moved)} instructions: a select per extra source of a 16-bit "
            f"half, or one pack); the rest are source registers as they are"
        )
        if plan.k_permuted:
            lines.append(
                f"     K order: A column c holds key {list(plan.k_map)}[c]; V's B operand reads its "
                f"rows in the same order"
            )
        else:
            lines.append("     K order: unchanged")
    return "\n".join(lines)


def to_json(conv: AttentionConversion) -> dict:
    plan = conv.plan
    reg, lds = plan.registers, plan.lds

    def access(a: LdsAccess) -> dict:
        return {"first": a.first, "length": a.length, "address": list(a.address)}

    return {
        "intrinsic": conv.intrinsic.name,
        "how": conv.how,
        "transposed": conv.transposed,
        "source_batch": list(conv.source_batch),
        "dest_batch": list(conv.dest_batch),
        "tile": [plan.dest.rows, plan.dest.cols],
        "wave_size": plan.dest.wave_size,
        "chosen": plan.chosen,
        "kind": plan.kind,
        "instructions": plan.instructions,
        "lds_bytes": plan.lds_bytes,
        "converts": plan.converts,
        "registers": {
            "kind": reg.kind,
            "instructions": reg.instructions,
            "lds_pipe": reg.lds_pipe,
            "waits": reg.waits,
            "k_map": list(plan.k_map),
            "hardware_keys": list(hardware_keys(conv)),
            "permutes": [
                {
                    "register": p.register,
                    "pattern": p.pattern,
                    "op": p.op,
                    "isa": p.isa,
                    "source_lane": list(p.source_lane),
                }
                for p in reg.permutes
            ],
            "assemble": [
                {
                    "register": a.register,
                    "instructions": a.instructions,
                    "halves": [[list(lo), list(hi)] for lo, hi in a.halves],
                }
                for a in reg.assemble
            ],
        },
        "lds": {
            "instructions": lds.instructions,
            "lds_pipe": lds.lds_pipe,
            "bytes_written": lds.bytes_written,
            "bytes_read": lds.bytes_read,
            "tile_bytes": lds.tile_bytes,
            "hardware_keys": list(hardware_keys(conv, "lds")),
            "stores": [access(a) for a in lds.stores],
            "loads": [access(a) for a in lds.loads],
        },
    }
