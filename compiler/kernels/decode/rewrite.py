"""`distribute` for the decode kernel: the rewrite of a ``plan.DecodePlan``.

Everything up to the K loop (prologue, retyped bindings) and the epilogue's stores are the tiled
kernel's (``common/contraction.py``, ``Rewriter``); the script's LDS tiles and K loop are
replaced by:

    wave = tid / W, lane = tid % W
    scf.for r = 0 to K tiles / waves_k  iter_args(acc[m_tiles x n_tiles])   (wave's K tile: r * waves_k + wave)
        for each chunk u of the K tile:                          (every load issued first)
            B: per instruction tile t: row n0 + t * n + column(lane), run of ``run`` elements
               at k = kt * tile_k + u * chunk + b_start(lane)     -> straight into registers
            A: per row tile i and ``ALoad``: row (i * m + lane's row + row), ``length`` elements at
               k = ... + a_start(lane) + first                    (rows >= M read 0)
        for each chunk u, instruction j, column tile t, row tile i:
            acc[i, t] = mma(A operand (i, j) (from A's loads), B run [j * E, (j + 1) * E), acc[i, t])
    (stages 2: the loads of round 0 before the loop; round r issues round r + 1's loads, then
     round r's instructions on the loads it carried in, yielding the new ones; the last round's
     instructions after the loop)
    LDS partial[wave][t][lane][:] = acc[t]                       (barrier: the `barriers` stage)
    if wave == 0:
        acc[t] = sum over w of partial[w][t][lane][:]            (in wave order: deterministic)
        the epilogue's stores (``Rewriter._store_accumulators``), as the tiled kernel's wave 0

B's rows past N are bounded like every overhanging access (``Emitter.bounded_global_load``).
"""

from __future__ import annotations

import math

from iree.compiler import ir
from iree.compiler.dialects import scf

from mmaflow.compiler.kernels.common.contraction import Match, Rewriter, _fail, _transfer_parts
from mmaflow.compiler.kernels.common.emit import Emitter, type_bits, vector_type
from mmaflow.compiler.kernels.common.fragments import LaneIndex
from mmaflow.compiler.kernels.decode.plan import LOAD_BITS, DecodePlan, LaneAffine
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.layout import COL, ROW


def lane_affine(em: Emitter, lanes: LaneIndex, layouts: dict, f: LaneAffine):
    """``f``'s value for this lane (an int where the lane does not enter it)."""
    part = lanes.part(layouts[f.layout], f.axis)
    if isinstance(part, int):
        return f.at(part)
    return em.mul(em.div(part, f.step), f.scale) if f.scale else 0


class DecodeRewriter(Rewriter):
    """Rewrites one matched dispatch as its ``DecodePlan`` says."""

    def __init__(self, func: ir.Operation, m: Match, plan: DecodePlan, mem_extents: dict):
        super().__init__(func, m, plan, mem_extents)
        self.layouts = dict(zip("ABC", plan.intrinsic.codegen_layouts()))
        self.lead: dict = {}  # per operand: its leading (batch) indices, [] unbatched
        self.extent0: dict = {}  # per operand: its first axis' true extent

    def _affine(self, lanes: LaneIndex, em: Emitter, f: LaneAffine):
        return lane_affine(em, lanes, self.layouts, f)

    def run(self) -> None:
        m, plan = self.m, self.plan
        intr, ko = plan.intrinsic, plan.k_order
        self.kernel_prologue()
        top = self.top.named("decode")
        tid = top.thread_id()
        lane = top.rem(tid, plan.wave_size)
        wave = top.div(tid, plan.wave_size)
        lanes = LaneIndex(top, lane, plan.wave_size)
        la, lb = self.layouts["A"], self.layouts["B"]

        old_body = m.loop.regions[0].blocks[0]
        old_iv, lb_ = list(old_body.arguments)[0], m.loop.operands[0]
        pre = Emitter(ir.InsertionPoint(m.loop), m.loop.location, self.vendor)
        mems, origins, limits = {}, {}, {}
        for opd in m.operands:
            src, idx, _ = _transfer_parts(opd.copy_read)
            ext = self.mem_extents[src][1]
            if ext.names[-1] != "k":
                raise _fail(f"the decode kernel reads {opd.name} K-innermost; it is not", opd.copy_read)
            mems[opd.name] = self._global(src)
            origins[opd.name] = self._tile_origin(opd, old_body, {old_iv: lb_}, pre)[0]
            limits[opd.name] = self._limits(ext)[-2]
            # a batched problem's batch index (the script's: one batch entry a workgroup), the axis
            # AMD's bounded loads push past the buffer's end
            self.lead[opd.name] = self._clone_slice(idx[:-2], old_body, {old_iv: lb_}, pre.ip)
            self.extent0[opd.name] = self.extent(ext.names[0])
        b_col = lanes.part(lb, COL)
        b_start = self._affine(lanes, top, ko.b_start)
        a_row = lanes.part(la, ROW)
        a_start = self._affine(lanes, top, plan.a_start)
        elem_a = ir.MemRefType(mems["A"].type).element_type
        elem_b = ir.MemRefType(mems["B"].type).element_type
        # 4/6-bit operands live in i8 memrefs (``global_subspan``): their runs are loaded as bytes
        # and bit-cast to the instruction's type right before it (``_packed_b`` / ``_packed_a``)
        packed_a, packed_b = TYPE_BITS[intr.a_type] < 8, TYPE_BITS[intr.b_type] < 8
        b_piece = LOAD_BITS // 8 if packed_b else min(ko.run, LOAD_BITS // type_bits(elem_b))
        b_count = ko.run * TYPE_BITS[intr.b_type] // 8 if packed_b else ko.run

        mt, nt = plan.m_tiles, plan.n_tiles
        acc_t = vector_type(intr.c_shape, ir.Type.parse(intr.c_type))
        init = pre.splat_const(acc_t, m.acc_init)

        def issue(em: Emitter, k_tile):
            """Every load of the K tile at ``k_tile`` (A's operands, B's runs, the block scales)."""
            a_ops, b_runs = [], []
            for u in range(plan.unroll):
                k0 = em.add(k_tile, u * ko.chunk)
                runs = []
                b_k = em.add(k0, b_start)
                if packed_b:
                    b_k = em.byte_of(b_k, TYPE_BITS[intr.b_type])
                for t in range(nt):
                    row = em.add(origins["B"], b_col, t * intr.n)
                    pieces = [
                        self._load(em, "B", mems["B"], row, em.add(b_k, p), vector_type([b_piece], elem_b), limits)
                        for p in range(0, b_count, b_piece)
                    ]
                    runs.append(pieces)
                b_runs.append(runs)
                a_k = em.add(k0, a_start)
                a_ops.append(
                    [
                        (self._packed_a if packed_a else self._a_operands)(
                            em, mems["A"], em.add(origins["A"], i * intr.m), a_row, a_k, elem_a, i, limits
                        )
                        for i in range(mt)
                    ]
                )
            scales = self._scales(em, origins, limits, lanes, b_start, a_start, k_tile) if plan.b_blocks else None
            return a_ops, b_runs, scales

        def compute(em: Emitter, loaded, accs: list) -> list:
            """The K tile's matrix instructions on its loads; ``accs`` row tile-major: (i, t) at i * nt + t,
            as the epilogue's stores take them."""
            a_ops, b_runs, scales = loaded
            mma_em, accs = em.named("mma"), list(accs)
            for u in range(plan.unroll):
                for j in range(ko.j):
                    for t in range(nt):
                        b_op = (self._packed_b if packed_b else self._b_operand)(em, b_runs[u][t], j)
                        for i in range(mt):
                            sc = (scales[u][j][0][i], scales[u][j][1][t]) if scales else None
                            accs[i * nt + t] = mma_em.mma(intr, a_ops[u][i][j], b_op, accs[i * nt + t], sc)
            return accs

        def k_tile_of(em: Emitter, r):
            """The wave's K tile in round ``r`` (waves interleaved along K), as a K offset."""
            return em.mul(em.add(em.mul(r, plan.waves_k), wave), plan.tile_k)

        rounds = plan.k_tiles // plan.waves_k  # (uniform across the workgroup: waves_k divides the K tiles)
        ahead = plan.prefetch
        if ahead and rounds < 2:  # (validate_decode refuses it: a wave of one round has no next tile)
            raise _fail(f"stages=2 with {rounds} K tile a wave: nothing to issue ahead", m.loop)
        named = pre.named("decode")
        round0 = issue(named, k_tile_of(named, named.const(0))) if ahead else None
        carried = _flatten(round0) if ahead else []
        with m.loop.location, ir.InsertionPoint(m.loop):
            loop = scf.ForOp(
                pre.const(0), pre.const(rounds - 1 if ahead else rounds), pre.const(1), [init] * (mt * nt) + carried
            )
        em = Emitter(ir.InsertionPoint(loop.body), m.loop.location, self.vendor).named("decode")
        iters = list(loop.inner_iter_args)
        if ahead:  # round r + 1's loads issued before round r's instructions, which take the carried ones
            nxt = issue(em, k_tile_of(em, em.add(loop.induction_variable, 1)))
            on = _unflatten(round0, iters[mt * nt :]) if self._prefetch_carried else nxt
            accs = compute(em, on, iters[: mt * nt])
            tail = _flatten(nxt)
        else:
            accs, tail = compute(em, issue(em, k_tile_of(em, loop.induction_variable)), iters), []
        with m.loop.location, ir.InsertionPoint(loop.body):
            scf.YieldOp(accs + tail)
        results = list(loop.results[: mt * nt])
        if ahead:  # the last round, on the loads the loop carried out
            last = Emitter(ir.InsertionPoint(m.loop), m.loop.location, self.vendor).named("decode")
            results = compute(last, _unflatten(round0, list(loop.results[mt * nt :])), results)

        after = Emitter(ir.InsertionPoint(m.loop), m.loop.location, self.vendor).named("decode.reduce")
        c_len = intr.c.op_vector_length
        part = after.alloc_lds([plan.waves_k, mt * nt, plan.wave_size, c_len], acc_t.element_type)
        for t in range(mt * nt):
            flat = after.shape_cast(results[t], [c_len])
            after.lds_store(flat, part, [wave, after.const(t), lane, after.const(0)])
        first = after.if_then(after.eq(wave, 0))
        sums = []
        for t in range(mt * nt):
            total = None
            for w in range(plan.waves_k):
                v = first.lds_load(
                    part,
                    [first.const(w), first.const(t), lane, first.const(0)],
                    vector_type([c_len], acc_t.element_type),
                )
                total = v if total is None else first.add_values(total, v)
            sums.append(first.shape_cast(total, list(intr.c_shape)))
        # The epilogue's stores go where the script wrote the accumulator: inside wave 0's branch.
        w = m.out_write
        w.move_before(_yield_of(first))
        self._store_accumulators(sums, lanes)
        self._erase_old()

    # Mutation hook for the tests (e2e_tests/test_decode.py): False has the prefetching loop compute on
    # the loads it has just issued (round r + 1's) instead of the ones it carried in (round r's).
    _prefetch_carried = True

    def _load(self, em: Emitter, name: str, mem, row, k, vtype, limits: dict):
        """Operand ``name``'s global load at (its batch index, ``row``, ``k``), 0 past its rows."""
        lead = self.lead[name]
        return em.bounded_global_load(
            mem, [*lead, row, k], vtype, [None] * len(lead) + [limits[name], None], extent0=self.extent0[name]
        )

    def _b_operand(self, em: Emitter, pieces: list, j: int):
        """Instruction ``j``'s B operand: elements [j * E, (j + 1) * E) of the lane's run."""
        intr = self.plan.intrinsic
        e = self.layouts["B"].elements
        size = ir.VectorType(pieces[0].type).shape[0]
        lo, hi = j * e, (j + 1) * e
        parts = []
        for p, vec in enumerate(pieces):
            s, t = max(lo, p * size), min(hi, (p + 1) * size)
            if s < t:
                parts.append(vec if t - s == size else em.extract_slice(vec, s - p * size, t - s))
        whole = parts[0] if len(parts) == 1 else em.concat(parts)
        return em.shape_cast(whole, list(intr.b_shape))

    def _packed_b(self, em: Emitter, pieces: list, j: int):
        """Instruction ``j``'s 4/6-bit B operand: its bytes of the lane's run, bit-cast."""
        intr = self.plan.intrinsic
        e = self.layouts["B"].elements
        width = e * TYPE_BITS[intr.b_type] // 8
        run = pieces[0] if len(pieces) == 1 else em.concat(pieces)
        raw = run if width == ir.VectorType(run.type).shape[0] else em.extract_slice(run, j * width, width)
        return em.shape_cast(em.bitcast(raw, vector_type([e], ir.Type.parse(intr.b_type))), list(intr.b_shape))

    def _packed_a(self, em: Emitter, mem, row0, a_row, k0, elem, tile: int, limits: dict) -> list:
        """Row tile ``tile``'s 4/6-bit A operands for the chunk: each instruction's values of the
        lane one run of memory (``plan.packed_a_refusal``), loaded as bytes in the widest pieces
        its alignment allows and bit-cast; zeros for rows past M in every lane."""
        plan = self.plan
        intr, e = plan.intrinsic, self.layouts["A"].elements
        bits = TYPE_BITS[intr.a_type]
        typed_t = vector_type([e], ir.Type.parse(intr.a_type))
        width = e * bits // 8
        ops: dict = {}
        for ld in plan.a_loads[tile]:
            align = math.gcd(LOAD_BITS // 8, width, ld.first * bits // 8, plan.a_start.scale * bits // 8)
            start = em.byte_of(em.add(k0, ld.first), bits)
            row = em.add(row0, a_row, ld.row)
            pieces = [
                self._load(em, "A", mem, row, em.add(start, p), vector_type([align], elem), limits)
                for p in range(0, width, align)
            ]
            ops[ld.feeds[0][0]] = em.bitcast(pieces[0] if len(pieces) == 1 else em.concat(pieces), typed_t)
        return [
            em.shape_cast(ops[j] if j in ops else em.zero_vector(typed_t), list(intr.a_shape))
            for j in range(plan.k_order.j)
        ]

    def _scales(self, em: Emitter, origins, limits, lanes, b_start, a_start, k_tile) -> list:
        """A block-scaled problem's scales, per chunk u and instruction j: ([per row tile], [per
        column tile]) of each lane's E8M0 scale of its A row / B column and the MX block its values
        come from (``plan.a_blocks`` / ``b_blocks``): one byte load each from the scale buffers
        ([rows, K/32] bytes, ``_scale_at``), 0 past the true rows where the tiles overhang them."""
        plan = self.plan
        intr, ko = plan.intrinsic, plan.k_order
        block = self.problem.scales.block
        operands = (  # (scale buffer, tile origin, lane start in K, blocks, tiles, rows a tile, lane's row, limit)
            (self.scale_buffers[0], origins["A"], a_start, plan.a_blocks, plan.m_tiles, intr.m, ROW, "A"),
            (self.scale_buffers[1], origins["B"], b_start, plan.b_blocks, plan.n_tiles, intr.n, COL, "B"),
        )
        out = []
        for u in range(plan.unroll):
            k0 = em.add(k_tile, u * ko.chunk)
            per_j = []
            for j in range(ko.j):
                pair = []
                for buf, first, start, blocks, count, step, axis, name in operands:
                    blk = em.div(em.add(k0, start, blocks[j]), block)  # (K is whole chunks: every block exists)
                    lane_rc = lanes.part(self.layouts[name], axis)
                    pair.append(
                        [
                            self._scale_at(em, buf, [em.add(first, x * step, lane_rc), blk], (limits[name], None))
                            for x in range(count)
                        ]
                    )
                per_j.append(pair)
            out.append(per_j)
        return out

    def _a_operands(self, em: Emitter, mem, row0, a_row, k0, elem, tile: int, limits: dict) -> list:
        """Row tile ``tile``'s A operands for the chunk (``a_operands``); ``limits["A"]``: M where
        the row tiles overhang it (None: they do not: no load is bounded)."""
        plan = self.plan
        return a_operands(
            em,
            plan.intrinsic,
            self.layouts["A"],
            plan.k_order.j,
            plan.a_loads[tile],
            plan.a_zero_rows[tile],
            mem,
            em.add(row0, a_row),
            k0,
            elem,
            limits["A"],
            self.extent0["A"],
            self.lead["A"],
        )


def a_operands(
    em: Emitter, intr, layout, j_count: int, loads, zero_rows, mem, row, k0, elem, limit, extent0=None, lead=()
):
    """One row tile's A operands for a chunk, one per instruction: each element from the load
    (``plan.ALoad``, at the lane's ``row`` + its row and ``k0`` + its first position, after the
    batch index ``lead`` of a batched problem) that brought its K position, zeros for the rows
    past M in every lane (``zero_rows``); the loads bounded by ``limit`` (M, or None) along the
    rows (``extent0``: the memref's first extent where dynamic)."""
    e_count = layout.elements
    zero = em.extract(em.zero_vector(vector_type([1], elem)), 0)
    slots = {}
    for ld in loads:
        vec = em.bounded_global_load(
            mem,
            [*lead, em.add(row, ld.row), em.add(k0, ld.first)],
            vector_type([ld.length], elem),
            [None] * len(lead) + [limit, None],
            extent0=extent0,
        )
        for i, (j, e) in enumerate(ld.feeds):
            slots[(j, e)] = (vec, i)
    out = []
    offsets = layout.element_offsets()
    for j in range(j_count):
        elems = [
            zero if offsets[e][0] in zero_rows else em.extract(slots[(j, e)][0], slots[(j, e)][1])
            for e in range(e_count)
        ]
        out.append(em.shape_cast(em.from_elements(vector_type([e_count], elem), elems), list(intr.a_shape)))
    return out


def _flatten(tree) -> list:
    """The values of a nest of lists and tuples (None leaves: none), in order."""
    if tree is None:
        return []
    if isinstance(tree, (list, tuple)):
        return [v for item in tree for v in _flatten(item)]
    return [tree]


def _unflatten(like, values: list):
    """``values`` (as ``_flatten(like)`` gives them) in the nest of ``like``."""
    it = iter(values)

    def build(t):
        if t is None:
            return None
        if isinstance(t, (list, tuple)):
            return type(t)(build(item) for item in t)
        return next(it)

    out = build(like)
    if next(it, None) is not None:
        raise ValueError("more values than the nest holds")
    return out


def _yield_of(emitter: Emitter) -> ir.Operation:
    """The scf.yield an ``Emitter.if_then`` emitter inserts before."""
    return emitter.ip.ref_operation
