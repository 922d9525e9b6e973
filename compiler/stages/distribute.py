"""Stage `distribute`: rewrite the script's workgroup/wave-level vector IR into per-lane code.

Input (see transform_scripts/matmul.mlir): LDS allocs, a K loop whose iter_arg is the wave's
accumulator vector, global->LDS copies as transfer_read/transfer_write pairs, LDS transfer_reads
of the wave's A rows and B columns feeding one ``vector.contract``, and the accumulator's
transfer_write to the output.

1. Anchor: the config's intrinsic gives the A/B/C layouts (``intrinsics.py``); composed with the
   wave tile they become ``Batch(row) x Batch(col) x Lane.. x Vector..`` layouts of the
   contraction's operands (``layout.py``).
2. Propagate: the layouts flow to the LDS reads that feed the contraction (through any
   arith.ext*), to the accumulator chain (the K loop's iter_arg becomes one per-lane vector per
   instruction tile) and to the final transfer_write.
3. LDS plan: each promoted tile is re-allocated K-innermost (``[non-K][K + lds_pad]``) so every
   lane's operand elements are contiguous runs -> wide ``vector.load``s (ds_load_b64/b128). A tile
   whose global layout is not K-innermost (B of a plain matmul) is transposed on its way in.
4. Rewrite:
   - global->LDS copies: every thread moves 128-bit chunks, ``amdgpu.raw_buffer_load`` (AMD) or
     ``vector.load`` (NVIDIA) from global, ``vector.store`` into LDS (transposing blocks of
     ``kb`` rows in registers when the LDS orientation differs);
   - LDS->registers: one ``vector.load`` per contiguous run of the operand layout;
   - the contraction: K steps x M tiles x N tiles of ``amdgpu.wmma``/``amdgpu.mfma``/
     ``nvgpu.mma.sync``, accumulators carried as ``scf.for`` iter_args across the whole K loop;
   - the epilogue: accumulator layout -> output memory, contiguous runs as one store each
     (``amdgpu.raw_buffer_store``/``vector.store``), valid halves only for 16-bit RDNA3 results;
     a fused epilogue (``normalize`` set it aside as a scalar function) is applied to each run in
     registers first (``epilogue.py``).
   Sizes: the bindings get their true shapes back -- static, or dynamic with the values of the
   inlined sizes function (``dynamic.py``). Wherever tiles may overhang the true extent, global
   accesses are bounded (``Emitter.bounded_global_load/store``); the K loop runs to the true K.
   Barriers are removed here; the `barriers` stage places them from the LDS accesses.
5. Finalize: canonicalize, CSE, lower affine to arith, so the result uses only arith, vector,
   memref, scf, gpu, hal, amdgpu and nvgpu ops (what IREE lowers and the lane executor runs).

A value needed in two layouts (e.g. a result feeding another contraction) would need a trip
through LDS; this stage reports such IR instead of guessing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import scf

from .. import attrs
from ..emit import Emitter, vector_type
from ..epilogue import Epilogue, epilogue_function
from ..errors import CodegenError
from ..fragments import FragmentLoader, LaneIndex
from ..intrinsics import TYPE_BITS, Intrinsic
from ..targets import Vendor
from ..layout import COL, ROW, Layout, Run
from ..lds_copy import CopyPlan
from ..mlir import defining_op, location_of, op_attributes, ops_named, run_passes, subspan_constant_offset, user_of, walk
from ..problem import operand_dims
from ..prologue import buffer_type, inline_prologue

NAME = "distribute"
_EXT_OPS = ("arith.extf", "arith.extsi", "arith.extui")


def _fail(msg: str, op: ir.Operation | None = None) -> CodegenError:
    return CodegenError(msg, stage=NAME, location=location_of(op) if op is not None else None)


def _check_transfer(op: ir.Operation) -> None:
    """Accept only the transfer form the script produces: no mask, in bounds, minor identity."""
    if op.name not in ("vector.transfer_read", "vector.transfer_write"):
        raise _fail(f"expected a vector transfer, found {op.name}", op)
    if "in_bounds" in op.attributes and not all(ir.BoolAttr(b).value for b in ir.ArrayAttr(op.attributes["in_bounds"])):
        raise _fail(f"{op.name} is not in bounds (masked transfers are not supported yet)", op)
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    if amap != ir.AffineMap.get_minor_identity(amap.n_dims, len(amap.results)):
        raise _fail(f"{op.name} has a non-identity permutation map {amap}", op)
    n_mask = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[-1]
    if n_mask:
        raise _fail(f"{op.name} is masked", op)


def _transfer_parts(op: ir.Operation):
    """(memref, indices, vector type) of a transfer op."""
    if op.name == "vector.transfer_read":
        mem, rank = op.operands[0], ir.MemRefType(op.operands[0].type).rank
        return mem, list(op.operands[1:1 + rank]), ir.VectorType(op.results[0].type)
    mem, rank = op.operands[1], ir.MemRefType(op.operands[1].type).rank
    return mem, list(op.operands[2:2 + rank]), ir.VectorType(op.operands[0].type)


def _memory_space(mem: ir.Value) -> str:
    ms = ir.MemRefType(mem.type).memory_space
    return "" if ms is None else str(ms)


@dataclass
class Operand:
    """One input of the contraction, followed from the contract back to global memory."""

    name: str  # "A" | "B"
    read: ir.Operation  # transfer_read from the logical LDS alloc
    ext: ir.Operation | None
    alloc: ir.Value
    layout: Layout  # codegen layout composed to the wave tile
    vec_dim_role: tuple[str, ...]  # layout axis of each read-vector dim
    k_dim: int  # alloc dim that is K
    copy_write: ir.Operation | None = None
    copy_read: ir.Operation | None = None
    storage: ir.Value | None = None  # the re-allocated K-innermost LDS tile
    k_axis: str = COL  # layout axis that is K (A: col, B: row)


class Extents:
    """A binding's shapes: what the script saw (``padded``), the true one (ints, or index values
    for dynamic sizes), and the problem dimension of each axis."""

    def __init__(self, padded: list, true: list, names: list, problem, tiles: dict, also: list | None = None):
        self.padded, self.true, self.names, self.problem, self.tiles = padded, true, names, problem, tiles
        self.also = also or [None] * len(names)  # a second role's dimensions (one memref feeding A and B)

    def limits(self) -> list:
        """Per axis: the true extent where the tiles may overhang it (int or value), else None.
        A dynamic extent the program promises to be a multiple of its tile needs no bound."""
        out = []
        for axis, (p, t) in enumerate(zip(self.padded, self.true)):
            if isinstance(t, int):
                out.append(None if t == p else t)
            else:
                tiles = [self.tiles.get(d, 0) for d in (self.names[axis], self.also[axis]) if d]
                out.append(None if all(tiles) and all(self.multiple(axis) % x == 0 for x in tiles) else t)
        return out

    def multiple(self, axis: int) -> int:
        """What the axis' true extent is a multiple of (itself when static, the program's
        divisibility promise when dynamic)."""
        t = self.true[axis]
        return t if isinstance(t, int) else self.problem.multiple_of(self.names[axis])

    def describe(self, axis: int) -> str:
        t = self.true[axis]
        if isinstance(t, int):
            return str(t)
        div = self.multiple(axis)
        return f"{self.names[axis].upper()} (dynamic{f', a multiple of {div}' if div > 1 else ', no divisibility hint'})"


def global_subspan(sub: ir.Operation, shape: list, elem: ir.Type, space: ir.Attribute) -> ir.Value:
    """A copy of binding subspan ``sub`` typed memref<shape x elem, strided<...>, space>, index
    values in ``shape`` becoming its dynamic dims. Everything else is kept: the attributes
    (binding, alignment, descriptor flags, layout) and the byte-offset operand, and the offset
    of the memref's layout: IREE's lowering addresses the tensor at the layout's offset (from
    the byte offset when the layout's offset is dynamic), so a layout without it would read
    element 0 of the binding, whatever tensor lives there."""
    old_t = ir.MemRefType(sub.results[0].type)
    strides, offset = old_t.get_strides_and_offset()
    byte_offset = subspan_constant_offset(sub)
    elem_bytes = TYPE_BITS[str(old_t.element_type)] // 8
    dyn_off = ir.ShapedType.get_dynamic_stride_or_offset()
    if offset != dyn_off and byte_offset is not None and offset * elem_bytes != byte_offset:
        raise _fail(f"binding {ir.IntegerAttr(sub.attributes['binding']).value}: the memref's offset ({offset} "
                    f"elements) disagrees with the subspan's byte offset {byte_offset}", sub)
    if offset != dyn_off and byte_offset is None:
        raise _fail("a run-time byte offset with a static memref offset", sub)
    dyn = [d for d in shape if not isinstance(d, int)]
    mtype = buffer_type([d if isinstance(d, int) else None for d in shape], elem,
                        offset_known=None if offset == dyn_off else offset)
    if str(mtype.memory_space) != str(space):
        raise _fail(f"unexpected memory space {mtype.memory_space}", sub)
    named = op_attributes(sub)
    offset_operands = [list(sub.operands)[0]] if list(ir.DenseI32ArrayAttr(sub.attributes["operandSegmentSizes"]))[0] else []
    named["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(offset_operands), len(dyn)])
    with sub.location, ir.InsertionPoint(sub):
        new = ir.Operation.create("hal.interface.binding.subspan", results=[mtype],
                                  operands=offset_operands + dyn, attributes=named)
    return new.results[0]


class Distributor:
    def __init__(self, module: ir.Module, func: ir.Operation):
        self.module, self.func = module, func
        self.target = attrs.read_target(func)
        self.cfg = attrs.read_config(func)
        self.problem = attrs.read_problem(func)
        self.intr: Intrinsic = self.target.intrinsic(self.cfg.intrinsic)
        self.vendor = self.target.vendor
        self.erase: list[ir.Operation] = []
        self.notes: list[str] = []  # for the log: choices the user may want to know about

    # ---- 1/2: analysis ---------------------------------------------------------------------
    def analyze(self) -> None:
        contracts = ops_named(self.func, "vector.contract")
        if len(contracts) != 1:
            raise _fail(f"expected one vector.contract after the script stage, found {len(contracts)}", self.func)
        self.contract = c = contracts[0]
        if c.parent.name != "scf.for":
            self._materialize_k_loop(c)
        loop = c.parent
        if loop.name != "scf.for":
            raise _fail("the vector.contract is not directly inside the K loop (scf.for)", c)
        self.loop = loop
        body = loop.regions[0].blocks[0]
        acc = c.operands[2]
        iter_args = list(body.arguments)[1:]
        if len(iter_args) != 1 or acc != iter_args[0]:
            raise _fail("the contraction's accumulator is not the K loop's only iter_arg; the script "
                        "must keep the accumulator in registers across K", c)
        yield_op = [o.operation for o in body.operations][-1]
        if list(yield_op.operands) != [c.results[0]]:
            raise _fail("the K loop does not yield the contraction's result", c)
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(c.attributes["indexing_maps"])]
        dims = [[e.position for e in m.results] for m in maps]
        kinds = [str(t) for t in ir.ArrayAttr(c.attributes["iterator_types"])]
        red = [i for i, t in enumerate(kinds) if "reduction" in t]
        if len(red) != 1 or len(dims[2]) != 2 or "add" not in str(c.attributes["kind"]):
            raise _fail("the vector.contract is not a 2-D multiply-add contraction", c)
        (kd,) = red
        md, nd = dims[2]
        la, lb, lc = self.intr.codegen_layouts()
        wm, wn, tk = self.cfg.wave_tile_m, self.cfg.wave_tile_n, self.cfg.tile_k
        a_lay = la.compose(wm // self.intr.m, tk // self.intr.k)
        b_lay = lb.compose(tk // self.intr.k, wn // self.intr.n)
        self.k_interleaved = self._interleave_k(a_lay, b_lay)
        if self.k_interleaved:
            a_lay, b_lay = a_lay.interleave_batch(COL), b_lay.interleave_batch(ROW)
        self.c_layout = lc.compose(wm // self.intr.m, wn // self.intr.n)
        self.a = self._operand("A", c.operands[0], a_lay, tuple(COL if d == kd else ROW for d in dims[0]), kd, dims[0])
        self.b = self._operand("B", c.operands[1], b_lay, tuple(ROW if d == kd else COL for d in dims[1]), kd, dims[1])
        self.b.k_axis = ROW
        if dims[2] != [md, nd]:
            raise _fail("the accumulator is transposed relative to the output", c)
        acc_t = ir.VectorType(acc.type)
        if list(acc_t.shape) != [wm, wn]:
            raise _fail(f"the accumulator is {acc_t}, the config's wave tile is {wm}x{wn}", c)
        if str(acc_t.element_type) != self.intr.c_type:
            raise _fail(f"the accumulator element type {acc_t.element_type} does not match "
                        f"{self.intr.name}'s {self.intr.c_type}", c)
        # The copies that fill each LDS alloc, inside the loop.
        for opd in (self.a, self.b):
            writes = [user_of(u) for u in opd.alloc.uses
                      if user_of(u).name == "vector.transfer_write"]
            if len(writes) != 1:
                raise _fail(f"expected one copy into the LDS tile of {opd.name}, found {len(writes)}", opd.read)
            w = writes[0]
            _check_transfer(w)
            src = defining_op(w.operands[0])
            if src is None or src.name != "vector.transfer_read":
                raise _fail(f"the LDS tile of {opd.name} is not filled from a global transfer_read", w)
            _check_transfer(src)
            if "workgroup" in _memory_space(src.operands[0]):
                raise _fail(f"the copy into {opd.name}'s LDS tile reads LDS", src)
            opd.copy_write, opd.copy_read = w, src
        # The output write.
        res = loop.results[0]
        users = [user_of(u) for u in res.uses]
        if len(users) != 1 or users[0].name != "vector.transfer_write":
            raise _fail("the accumulator must be written to the output by one vector.transfer_write", loop)
        self.out_write = users[0]
        _check_transfer(self.out_write)
        init = defining_op(loop.operands[3])
        if init is None or init.name != "arith.constant" or not isinstance(init.attributes["value"], ir.DenseElementsAttr) \
                or not ir.DenseElementsAttr(init.attributes["value"]).is_splat:
            raise _fail("the accumulator must start from a splat constant (the zero fill)", loop)
        self.acc_init = ir.DenseElementsAttr(init.attributes["value"]).get_splat_value()

    def _materialize_k_loop(self, c: ir.Operation) -> None:
        """K == tile_k: canonicalization removed the one-iteration K loop. Put it back (a loop of
        one iteration around the K step's ops) so the rest of the stage sees one IR form."""
        acc = c.operands[2]
        init = defining_op(acc)
        if init is None or init.name != "arith.constant":
            raise _fail("without a K loop, the accumulator must be the zero-fill constant", c)
        block_ops = [o.operation for o in c.block.operations]
        step_ops = []
        for o in block_ops[:block_ops.index(c)]:
            if o.name in ("vector.transfer_read", "vector.transfer_write") or o.name in _EXT_OPS:
                step_ops.append(o)
            elif o.name == "gpu.barrier":
                o.erase()  # the barriers stage places barriers
        em = Emitter(ir.InsertionPoint(c), c.location, self.vendor)
        zero, one = em.const(0), em.const(1)
        with c.location, ir.InsertionPoint(c):
            loop = scf.ForOp(zero, one, one, [acc])
        body_ip = ir.InsertionPoint(loop.body)
        for o in step_ops + [c]:
            body_ip.insert(o.detach_from_parent())
        c.operands[2] = loop.inner_iter_args[0]
        result = c.results[0]
        for use in list(result.uses):
            user = user_of(use)
            if user.parent != loop.operation and user != c:
                user.operands[use.operand_number] = loop.results[0]
        with c.location, body_ip:
            scf.YieldOp([result])

    def _operand(self, name, value, layout, vec_role, kd, dims) -> Operand:
        ext = defining_op(value)
        if ext is not None and ext.name in _EXT_OPS:
            value = ext.operands[0]
        else:
            ext = None
        read = defining_op(value)
        if read is None or read.name != "vector.transfer_read":
            raise _fail(f"operand {name} of the contraction does not come from an LDS transfer_read", self.contract)
        _check_transfer(read)
        alloc = read.operands[0]
        if "workgroup" not in _memory_space(alloc):
            raise _fail(f"operand {name} is read from {alloc.type}, not from workgroup memory (LDS)", read)
        elem = str(ir.MemRefType(alloc.type).element_type)
        want = self.intr.a_type if name == "A" else self.intr.b_type
        if elem != want:
            raise _fail(f"operand {name} is {elem}, {self.intr.name} takes {want}", read)
        if ext is not None and ext.name == "arith.extui" and not (self.intr.unsigned_a if name == "A" else self.intr.unsigned_b):
            raise _fail(f"operand {name} is zero-extended but {self.intr.name} is signed", ext)
        k_dim = vec_role.index(COL if name == "A" else ROW)
        return Operand(name, read, ext, alloc, layout, vec_role, k_dim)

    def _interleave_k(self, a: Layout, b: Layout) -> bool:
        """Whether to interleave the K steps of a tile (AMD only, see Layout.interleave_batch):
        when a lane's K run per instruction is narrower than 128 bits (MFMA: 64), consecutive K
        steps' runs become one 128-bit LDS read, which is also what keeps 16 lanes reading 16 rows
        of the padded tile off each other's banks. Only if A and B then still meet at the same K."""
        bits = TYPE_BITS[self.problem.a_type]
        if self.vendor is not Vendor.AMD or a.batch[1] < 2:
            return False
        if min(r.length for r in a.runs(COL) + b.runs(ROW)) * bits >= 128:
            return False
        ai, bi = a.interleave_batch(COL), b.interleave_batch(ROW)
        ik = self.intr.k
        for kk in range(a.batch[1]):
            for k in range(ik):
                lane_a, el_a, _ = a.owners(0, kk * ik + k)[0]
                lane_b, el_b, _ = b.owners(kk * ik + k, 0)[0]
                if ai.coords(lane_a, el_a, (0, kk))[1] != bi.coords(lane_b, el_b, (kk, 0))[0]:
                    return False
        return True

    # ---- 3/4: rewrite ----------------------------------------------------------------------
    def rewrite(self) -> None:
        entry = self.func.regions[0].blocks[0]
        first = [o.operation for o in entry.operations][0]
        loc = self.contract.location
        self.top = Emitter(ir.InsertionPoint(first), loc, self.vendor)
        self.sizes, self.epilogue_buffers = inline_prologue(self.func, ir.InsertionPoint(first), self.problem)
        self._retype_bindings()
        self.tid = self.top.thread_id()
        self.lanes = LaneIndex(self.top, self.top.rem(self.tid, self.cfg.wave_size), self.cfg.wave_size)
        for opd in (self.a, self.b):
            self._plan_lds(opd)
        self._new_loop()
        self._distribute_contract()
        self._distribute_epilogue()
        self._erase_old()

    def extent(self, dim: str):
        """The true size of a problem dimension: an int, or an index value when dynamic."""
        size = getattr(self.problem, dim)
        return size if size is not None else self.sizes[dim]

    def _retype_bindings(self) -> None:
        """Give the bindings the global address space that raw buffer ops and LLVM expect, their
        true shapes (the `normalize` stage may have rounded them up to whole tiles, or stood in
        for dynamic sizes) and, for C, the stored element type (an epilogue may convert the
        accumulator)."""
        self.global_of: dict = {}
        self.true_shape: dict = {}  # old memref value -> Extents
        space = ir.Attribute.parse("#gpu.address_space<global>")
        dims_of = operand_dims(self.problem)
        # A subspan's role is the operand it feeds (one subspan may feed both A and B: A @ A),
        # or the result the accumulator is written to.
        feeds: dict = {}
        for opd in (self.a, self.b):
            feeds.setdefault(_transfer_parts(opd.copy_read)[0], []).append(opd.name)
        feeds.setdefault(_transfer_parts(self.out_write)[0], []).append("C")
        if self.problem.same_ab:
            self.notes.append(f"A and B are the same tensor ({self.problem.a.describe()}), needed in two "
                              "layouts: each operand gets its own copy into LDS, in its own layout")
        for sub in ops_named(self.func, "hal.interface.binding.subspan"):
            if sub.results[0] in self.epilogue_buffers:  # from the prologue, typed already
                continue
            old_t = ir.MemRefType(sub.results[0].type)
            roles = feeds.get(sub.results[0])
            if not roles:
                raise _fail(f"binding {ir.IntegerAttr(sub.attributes['binding']).value} is none of A, B, C", sub)
            role, *other = roles
            names = dims_of[role]
            true = [self.extent(d) for d in names]
            ext = Extents(list(old_t.shape), true, names, self.problem,
                          {"m": self.cfg.tile_m, "n": self.cfg.tile_n, "k": self.cfg.tile_k, "batch": 1},
                          also=dims_of[other[0]] if other else None)
            elem = old_t.element_type
            if role == "C":  # the epilogue may store another type than the accumulator's
                elem = ir.Type.parse(self.problem.stored_type)
            self.true_shape[sub.results[0]] = ext
            self.global_of[sub.results[0]] = (sub, global_subspan(sub, true, elem, space))

    def _global(self, mem: ir.Value) -> ir.Value:
        try:
            return self.global_of[mem][1]
        except KeyError:
            raise _fail("a global access is not to a hal.interface.binding.subspan") from None

    def _plan_lds(self, opd: Operand) -> None:
        """Re-allocate the tile K-innermost and padded; plan its copy and its fragment loads."""
        full = ir.MemRefType(opd.alloc.type).shape
        if any(d != 1 for d in full[:-2]):
            raise _fail(f"the LDS tile of {opd.name} is {full}: only leading unit dims may precede the 2-D tile", opd.read)
        shape = full[-2:]
        k, nonk = shape[opd.k_dim], shape[1 - opd.k_dim]
        elem = ir.MemRefType(opd.alloc.type).element_type
        opd.storage = self.top.alloc_lds([nonk, k + self.cfg.lds_pad], elem)
        opd.elem, opd.bits = elem, TYPE_BITS[str(elem)]
        src_mem, src_idx, vt = _transfer_parts(opd.copy_read)
        _, dst_idx, _ = _transfer_parts(opd.copy_write)
        rows, cols = vt.shape
        ext = self.true_shape[src_mem]
        opd.copy = CopyPlan(opd.name, self._global(src_mem), src_idx[:-2], rows, cols, elem, opd.bits,
                            opd.storage, opd.k_dim == 0, self.cfg.workgroup_size, tuple(dst_idx[-2:]),
                            limits=tuple(ext.limits()[-2:]), row_length=ext.multiple(-1), extent0=ext.true[0],
                            # (AMD: NVIDIA's measured kernels keep the plain row order for now)
                            banks=self.target.lds_banks if self.vendor is Vendor.AMD else 0)
        if ext.multiple(-1) * opd.bits % 128:
            self.notes.append(f"{opd.name}'s rows are {ext.describe(-1)} elements long: its global loads are "
                              f"{opd.copy.v * opd.bits} bits wide, not 128")
        shape_ = self.intr.a_shape if opd.name == "A" else self.intr.b_shape
        opd.frags = FragmentLoader(opd.layout, opd.storage, elem, opd.bits, opd.k_axis, shape_, self.lanes,
                                   allow_ldmatrix=self.intr.op == "nvgpu.mma.sync")

    def _clone_slice(self, values: list[ir.Value], body, mapping: dict, ip: ir.InsertionPoint) -> list[ir.Value]:
        """Clone the index computations of ``values`` that live in ``body`` at ``ip``, with
        ``mapping`` (e.g. the K loop's induction variable -> the next iteration's value)."""
        memo = dict(mapping)

        def clone(v):
            if v in memo:
                return memo[v]
            op = defining_op(v)
            if op is None or op.block != body:
                return v
            if len(op.regions) or op.name.startswith(("vector.", "memref.", "amdgpu.", "nvgpu.")):
                raise _fail(f"a global tile index depends on {op.name} inside the K loop", op)
            operands = [clone(o) for o in op.operands]
            new = op.clone(ip)
            for i, o in enumerate(operands):
                new.operands[i] = o
            for old_r, new_r in zip(op.results, new.results):
                memo[old_r] = new_r
            return memo[v]
        return [clone(v) for v in values]

    def _tile_origin(self, opd: Operand, body, mapping: dict, em: Emitter):
        _, idx, _ = _transfer_parts(opd.copy_read)
        g0, g1 = self._clone_slice(idx[-2:], body, mapping, em.ip)
        return g0, g1

    def _new_loop(self) -> None:
        """The K loop, rebuilt: accumulators (one per-lane vector per instruction tile) and the
        prefetched next K tile (this thread's chunks) are its iter_args.

            prologue: load tile 0
            for k:   store the carried tile to LDS; load tile min(k+1, last); fragments + MMAs
        """
        loop = self.loop
        old_body = loop.regions[0].blocks[0]
        old_iv = list(old_body.arguments)[0]
        lb, ub, step = loop.operands[0], loop.operands[1], loop.operands[2]
        pre = Emitter(ir.InsertionPoint(loop), loop.location, self.vendor)
        if self.problem.k is None:  # dynamic K: as many K tiles as cover it (the last one bounded)
            tk = self.cfg.tile_k
            ub = pre.mul(pre.div(pre.add(self.sizes["k"], tk - 1), tk), tk)
        guard = None
        if self.problem.k is None and self.vendor is Vendor.NVIDIA:
            # K may be 0: A and B are then empty buffers, and NVIDIA's clamped loads would still
            # touch their first element. (AMD's raw buffer loads read 0 from an empty buffer.)
            with loop.location, ir.InsertionPoint(loop):
                types = [opd.copy.chunk_type for opd in (self.a, self.b) for _ in range(opd.copy.registers())]
                guard = scf.IfOp(pre.lt(pre.const(0), self.sizes["k"]), types, has_else=True)
            pre = pre.at(ir.InsertionPoint(guard.then_block))
        first = []
        for opd in (self.a, self.b):
            g0, g1 = self._tile_origin(opd, old_body, {old_iv: lb}, pre)
            opd.n_carry = opd.copy.registers()
            first += opd.copy.loads(pre, self.tid, g0, g1)
        if guard is not None:
            with loop.location, ir.InsertionPoint(guard.then_block):
                scf.YieldOp(first)
            zeros = Emitter(ir.InsertionPoint(guard.else_block), loop.location, self.vendor)
            with loop.location, ir.InsertionPoint(guard.else_block):
                scf.YieldOp([zeros.zero_vector(ir.VectorType(v.type)) for v in first])
            first = list(guard.results)
            pre = pre.at(ir.InsertionPoint(loop))
        acc_t = vector_type(self.intr.c_shape, ir.Type.parse(self.intr.c_type))
        br, bc = self.c_layout.batch
        init = pre.splat_const(acc_t, self.acc_init)
        self.n_acc = br * bc
        with loop.location, ir.InsertionPoint(loop):
            self.new_loop = scf.ForOp(lb, ub, step, [init] * self.n_acc + first)
        body = self.new_loop.body
        ip = ir.InsertionPoint(body)
        for o in [o.operation for o in old_body.operations][:-1]:
            ip.insert(o.detach_from_parent())
        iv = self.new_loop.induction_variable
        old_iv.replace_all_uses_with(iv)
        args = list(self.new_loop.inner_iter_args)
        self.acc_args, carried = args[:self.n_acc], args[self.n_acc:]
        # Store the carried tile, then issue the next tile's loads (clamped to the last tile).
        anchor = [o.operation for o in body.operations][0]
        em = Emitter(ir.InsertionPoint(anchor), loop.location, self.vendor)
        pos = 0
        for opd in (self.a, self.b):
            opd.copy.stores(em, self.tid, carried[pos:pos + opd.n_carry])
            pos += opd.n_carry
        nxt = em.min_index(em.add(iv, step), em.sub(ub, step))
        self.next_tile = []
        for opd in (self.a, self.b):
            g0, g1 = self._tile_origin(opd, body, {iv: nxt}, em)
            self.next_tile += opd.copy.loads(em, self.tid, g0, g1)
        with loop.location, ir.InsertionPoint(body):
            self.new_yield = scf.YieldOp(self.acc_args + carried).operation  # operands replaced later

    def _distribute_contract(self) -> None:
        c = self.contract
        em = Emitter(ir.InsertionPoint(c), c.location, self.vendor)
        mma_em = em.named("mma")
        bm, bk = self.a.layout.batch
        _, bn = self.b.layout.batch
        bases = {}
        for opd in (self.a, self.b):
            _, idx, _ = _transfer_parts(opd.read)
            bases[opd.name] = {opd.vec_dim_role[0]: idx[-2], opd.vec_dim_role[1]: idx[-1]}
        acc = {(i, j): self.acc_args[i * bn + j] for i in range(bm) for j in range(bn)}
        self.mma_per_k_tile = bm * bn * bk
        if self.k_interleaved:  # every K step's fragments at once: one wide read serves several
            a_all = {i: self.a.frags.load_group(em, bases["A"], [(i, kk) for kk in range(bk)]) for i in range(bm)}
            b_all = {j: self.b.frags.load_group(em, bases["B"], [(kk, j) for kk in range(bk)]) for j in range(bn)}
        for kk in range(bk):
            if self.k_interleaved:
                a_frags, b_frags = [a_all[i][kk] for i in range(bm)], [b_all[j][kk] for j in range(bn)]
            else:
                a_frags = [self.a.frags.load(em, bases["A"], (i, kk)) for i in range(bm)]
                b_frags = [self.b.frags.load(em, bases["B"], (kk, j)) for j in range(bn)]
            for i in range(bm):
                for j in range(bn):
                    acc[(i, j)] = mma_em.mma(self.intr, a_frags[i], b_frags[j], acc[(i, j)])
        with self.new_yield.location, ir.InsertionPoint(self.new_yield):
            scf.YieldOp([acc[(i, j)] for i in range(bm) for j in range(bn)] + self.next_tile)
        self.erase.append(self.new_yield)

    def _distribute_epilogue(self) -> None:
        w = self.out_write
        em = Emitter(ir.InsertionPoint(w), w.location, self.vendor).named("epilogue")
        mem, idx, _ = _transfer_parts(w)
        out = self._global(mem)
        ext = self.true_shape[mem]
        limits = tuple(ext.limits()[-2:])
        lead, o0, o1 = idx[:-2], idx[-2], idx[-1]
        lay = self.c_layout
        out_elem = ir.MemRefType(out.type).element_type
        br, bc = lay.batch
        im, inn = self.intr.m, self.intr.n
        row_l, col_l = self.lanes.part(lay, ROW), self.lanes.part(lay, COL)
        runs = lay.runs(COL)
        if limits[1] is not None and any(ext.multiple(-1) % r.length or r.col % r.length for r in runs):
            runs = [Run(e, 1, *lay.element_offsets()[e]) for e in range(lay.elements)]  # may straddle N
        epi = None
        efunc = epilogue_function(self.func.parent)
        if self.problem.has_epilogue:
            if efunc is None:
                raise _fail("the problem has an epilogue but the module has no epilogue function", w)
            extents = {"b": self.extent("batch"), "m": self.extent("m"), "n": self.extent("n")}
            epi = Epilogue(efunc, self.problem, self.epilogue_buffers,
                           {"b": False, "m": limits[0] is not None, "n": limits[1] is not None},
                           extents)
        for i in range(br):
            for j in range(bc):
                acc = self.new_loop.results[i * bc + j]
                flat = em.shape_cast(acc, [lay.op_vector_length])
                for run in runs:
                    if lay.vector_stride == 1:
                        val = flat if run.length == lay.op_vector_length else em.extract_slice(flat, run.first, run.length)
                    else:
                        elems = [em.extract(flat, lay.op_index(e)) for e in range(run.first, run.first + run.length)]
                        val = em.from_elements(vector_type([run.length], ir.VectorType(flat.type).element_type), elems)
                    r = em.add(o0, row_l, i * im + run.row)
                    cidx = em.add(o1, col_l, j * inn + run.col)
                    if epi is not None:
                        coords = {"b": lead[0] if lead else None, "m": r, "n": cidx}
                        val = epi.apply(em, val, coords, {"b": 0, "m": i * im + run.row, "n": j * inn + run.col})
                    val = em.convert(val, out_elem, signed=not self.intr.unsigned_a)
                    em.bounded_global_store(val, out, lead + [r, cidx], [None] * len(lead) + list(limits),
                                            extent0=ext.true[0])

    def _erase_old(self) -> None:
        old_yield = [o.operation for o in self.loop.regions[0].blocks[0].operations][-1]
        doomed = [self.out_write, old_yield, self.contract]
        doomed += [o.ext for o in (self.a, self.b) if o.ext is not None]
        doomed += [self.a.read, self.b.read]
        for opd in (self.a, self.b):
            doomed += [opd.copy_write, opd.copy_read]
        doomed += ops_named(self.func, "gpu.barrier")
        doomed += self.erase
        for op in doomed:
            op.erase()
        self.loop.erase()
        for opd in (self.a, self.b):
            alloc = defining_op(opd.alloc)
            for use in list(opd.alloc.uses):
                user = user_of(use)
                if user.name != "memref.dealloc":
                    raise _fail(f"the old LDS tile of {opd.name} is still used by {user.name}", user)
                user.erase()
            alloc.erase()
        for old_val, (old_op, new_val) in self.global_of.items():
            old_val.replace_all_uses_with(new_val)
            old_op.erase()

    # ---- 5: finalize ------------------------------------------------------------------------
    def finalize(self) -> None:
        inner = self.func.parent
        run_passes(inner, "builtin.module(func.func(canonicalize,cse,lower-affine,canonicalize,cse))",
                   self.module.context, stage=NAME)
        left = [o for o in walk(self.func) if o.name in ("vector.contract", "vector.transfer_read",
                                                          "vector.transfer_write") or o.name.startswith("linalg.")
                or o.name.startswith("affine.")]
        if left:
            raise _fail(f"{left[0].name} survived distribution", left[0])
        self._record_expectations()
        efunc = epilogue_function(self.func.parent)
        if efunc is not None:  # applied in registers by _distribute_epilogue
            efunc.erase()

    def _record_expectations(self) -> None:
        """What the ISA must show for this kernel (checked by verify.check_isa after lowering):
        the global load width the copies use, how many K tiles the loop runs and how many
        matrix instructions one K tile takes (a fully unrolled loop has k_tiles times that)."""
        bits = max(opd.copy.v * opd.bits for opd in (self.a, self.b))
        k_tiles = 0 if self.problem.k is None else -(-self.problem.k // self.cfg.tile_k)  # 0: dynamic
        attrs.write_expect(self.func, attrs.Expectations(bits, k_tiles, self.mma_per_k_tile))


def distribute(module: ir.Module, func: ir.Operation) -> list[str]:
    """Distribute ``func`` in place; return notes for the log."""
    d = Distributor(module, func)
    with module.context, ir.Location.unknown():
        d.analyze()
        d.rewrite()
        d.finalize()
    return d.notes
