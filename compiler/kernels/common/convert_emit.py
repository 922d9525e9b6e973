"""The register route of a conversion plan (``target/convert.py``) as IR, built through the bindings.

Given the source accumulators (one ``vector<E x f32>`` per source instruction, in the plan's
order: row-major over P's tile) and the lane's id in its wave, emit

    arith.truncf                  each accumulator to the A element type
    vector.extract_strided_slice  the packed registers the permutes move (vector<2 x f16/bf16>)
    rocdl.permlanex16             one per permute (lane ^ 16; any 32-bit type, no bitcast)
    vector.extract / arith.select each destination half from its source; where lanes differ, a
                                  select on the lane bits that tell them apart
    vector.from_elements          the A operands, one per destination instruction

and return the A operands. Only what the plans chosen today need is emitted: in-lane plans and
``lane ^ 16`` permutes on RDNA; another permute is refused by name.

``emit_lds_route`` emits the plan's LDS round trip instead (AMD), to measure the two against
each other: the converted slots stored to a wave-private LDS tile (``vector.store`` at each
lane's address, computed from the layout's lane terms), ``amdgpu.lds_barrier``, the A slots
loaded back (``vector.load``).
"""

from __future__ import annotations

import itertools

from iree.compiler import ir
from iree.compiler.dialects import amdgpu, arith, rocdl, vector
from iree.compiler.dialects import memref as memref_d

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.target.convert import HALVES, ConversionPlan, slot_coords, slots

# v_permlanex16 lane selectors that make lane i of each row read lane i of the other row.
_IDENTITY_LO, _IDENTITY_HI = 0x76543210, 0xFEDCBA98


def _lane_test(groups: list[set[int]], wave: int) -> int:
    """The fewest lane-id bits whose value tells the groups apart (as a mask)."""
    bits = [1 << b for b in range(wave.bit_length() - 1)]
    for count in range(1, len(bits) + 1):
        for combo in itertools.combinations(bits, count):
            mask = sum(combo)
            seen: dict[int, int] = {}
            if all(seen.setdefault(lane & mask, g) == g for g, lanes in enumerate(groups) for lane in lanes):
                return mask
    raise AssertionError("lane groups are always told apart by all the lane bits")


def emit_register_route(
    plan: ConversionPlan, sources: list[ir.Value], lane: ir.Value, *, elem_type: ir.Type, narrow=None
) -> list[ir.Value]:
    """Emit ``plan``'s register route at the current insertion point (an active location and
    context are expected); ``lane`` is an ``index`` value, the lane's id within its wave.
    ``narrow``: how a source becomes ``elem_type`` (default ``arith.truncf``; NVIDIA passes
    ``Emitter.convert``, whose bf16 truncation is one cvt a pair)."""
    src, dst = plan.source, plan.dest
    route = plan.registers
    for p in route.permutes:
        if p.op != "rocdl.permlanex16":
            raise UnsupportedError(
                f"emitting {p.op} ({p.pattern}) is not implemented; the plan is checked on the ISA model only"
            )
    if len(sources) != src.num_instructions:
        raise UnsupportedError(f"the plan converts {src.num_instructions} accumulators, {len(sources)} given")
    per_src = src.elements
    if narrow is None:
        narrowed = [arith.truncf(ir.VectorType.get([per_src], elem_type), v) for v in sources]
    else:
        narrowed = [narrow(v) for v in sources]
    pair = ir.VectorType.get([HALVES], elem_type)
    words: dict[int, ir.Value] = {}

    def own(reg: int) -> ir.Value:
        if reg not in words:
            instance, offset = divmod(HALVES * reg, per_src)
            words[reg] = vector.extract_strided_slice(pair, narrowed[instance], [offset], [HALVES], [1])
        return words[reg]

    i32 = ir.IntegerType.get_signless(32)
    sel_lo, sel_hi = (
        arith.constant(i32, ir.IntegerAttr.get(i32, v - (1 << 32) if v >= 1 << 31 else v))
        for v in (_IDENTITY_LO, _IDENTITY_HI)
    )
    # ``old`` is what a lane keeps when the lane it reads is inactive: never here (every lane is
    # active at the conversion), so poison (ub has no Python builder in IREE 3.13: the generic
    # form); passing the source would make LLVM copy it first (the operand is tied to the result).
    unused = ir.Operation.create("ub.poison", results=[pair]).result if route.permutes else None
    received = [rocdl.permlanex16(pair, unused, own(p.register), sel_lo, sel_hi, False, False) for p in route.permutes]
    lane_i32 = arith.index_cast(i32, lane)
    tests: dict[tuple, ir.Value] = {}

    def half(where: str, index: int, h: int) -> ir.Value:
        word = own(index) if where == "own" else received[index]
        return vector.extract(word, [], [h])

    def in_group(mask: int, values: frozenset) -> ir.Value:
        key = (mask, values)
        if key not in tests:
            masked = arith.andi(lane_i32, arith.constant(i32, mask))
            test = None
            for v in sorted(values):
                eq = arith.cmpi(arith.CmpIPredicate.eq, masked, arith.constant(i32, v))
                test = eq if test is None else arith.ori(test, eq)
            tests[key] = test
        return tests[key]

    wave = dst.wave_size
    values: list[ir.Value] = []
    for a in route.assemble:
        for h in range(HALVES):
            by_source: dict[tuple, set[int]] = {}
            for ln in range(wave):
                by_source.setdefault(tuple(a.halves[ln][h]), set()).add(ln)
            choices = list(by_source.items())
            mask = _lane_test([lanes for _, lanes in choices], wave)
            value = half(*choices[-1][0])
            for source, lanes in reversed(choices[:-1]):
                value = arith.select(in_group(mask, frozenset(ln & mask for ln in lanes)), half(*source), value)
            values.append(value)
    per_dst = dst.elements
    out_t = ir.VectorType.get([per_dst], elem_type)
    return [vector.from_elements(out_t, values[i * per_dst : (i + 1) * per_dst]) for i in range(slots(dst) // per_dst)]


def _tile_index(layout, lane: ir.Value, cols: int) -> ir.Value:
    """``row * cols + col`` of a lane's slot 0 minus its lane-0 value: the lane-dependent part of
    every slot's tile index (the layout's lane terms; replicated lanes wrap through the modulo)."""
    index = ir.IndexType.get()
    total = None
    for _, divisor, size, axis, stride in layout.lane_terms():
        digit = arith.remui(arith.divui(lane, arith.constant(index, divisor)), arith.constant(index, size))
        scale = stride * (cols if axis == "row" else 1)
        term = arith.muli(digit, arith.constant(index, scale))
        total = term if total is None else arith.addi(total, term)
    return total if total is not None else arith.constant(index, 0)


def emit_lds_route(
    plan: ConversionPlan, sources: list[ir.Value], lane: ir.Value, *, elem_type: ir.Type
) -> list[ir.Value]:
    """Emit ``plan``'s LDS round trip at the current insertion point (AMD: ``amdgpu.lds_barrier``
    orders the stores before the loads); returns the A operands."""
    src, dst, route = plan.source, plan.dest, plan.lds
    if len(sources) != src.num_instructions:
        raise UnsupportedError(f"the plan converts {src.num_instructions} accumulators, {len(sources)} given")
    index = ir.IndexType.get()
    cols = dst.cols
    space = ir.Attribute.parse("#gpu.address_space<workgroup>")
    tile = memref_d.AllocOp(
        ir.MemRefType.get([route.tile_bytes // 2], elem_type, memory_space=space), [], [], alignment=16
    ).result
    per_src = src.elements
    narrow = [arith.truncf(ir.VectorType.get([per_src], elem_type), v) for v in sources]
    src_lane, dst_lane = _tile_index(src, lane, cols), _tile_index(dst, lane, cols)

    def lane_part(layout, ln):  # what _tile_index computes, for one lane
        return sum(((ln // d) % n) * st * (cols if axis == "row" else 1) for _, d, n, axis, st in layout.lane_terms())

    for layout, accesses in ((src, route.stores), (dst, route.loads)):
        for acc in accesses:
            r, c = slot_coords(layout, 0, acc.first)
            assert all(2 * (lane_part(layout, ln) + r * cols + c) == acc.address[ln] for ln in range(layout.wave_size))

    def at(lane_part, layout, slot):
        r, c = slot_coords(layout, 0, slot)
        return arith.addi(lane_part, arith.constant(index, r * cols + c))

    for acc in route.stores:
        instance, offset = divmod(acc.first, per_src)
        piece = vector.extract_strided_slice(
            ir.VectorType.get([acc.length], elem_type), narrow[instance], [offset], [acc.length], [1]
        )
        vector.store(piece, tile, [at(src_lane, src, acc.first)])
    amdgpu.LDSBarrierOp()
    per_dst = dst.elements
    out_t = ir.VectorType.get([per_dst], elem_type)
    outs = [
        arith.constant(out_t, ir.DenseElementsAttr.get_splat(out_t, ir.FloatAttr.get(elem_type, 0.0)))
        for _ in range(slots(dst) // per_dst)
    ]
    for acc in route.loads:
        instance, offset = divmod(acc.first, per_dst)
        piece = vector.load(ir.VectorType.get([acc.length], elem_type), tile, [at(dst_lane, dst, acc.first)])
        outs[instance] = vector.insert_strided_slice(piece, outs[instance], [offset], [1])
    return outs
