"""The script-based contraction kernels, rewritten to per-lane code (the pipeline's stage `distribute`).

Input (see transform_scripts/matmul.mlir): LDS allocs, a K loop whose iter_arg is the wave's
accumulator vector, global->LDS copies as transfer_read/transfer_write pairs, LDS transfer_reads
of the wave's A rows and B columns feeding one ``vector.contract``, and the accumulator's
transfer_write to the output.

Three steps. ``match`` finds the script's ops (``Match``, IR handles only, checked against
the form the script produces); ``plan.plan_kernel`` makes every decision as frozen data (a
``KernelPlan``: layouts, LDS tiles, copy and fragment plans, loop structure, epilogue);
``Rewriter`` consumes the plan and rewrites the IR.

1. Anchor: the config's intrinsic gives the A/B/C layouts (``target/intrinsics.py``); composed with the
   wave tile they become ``Batch(row) x Batch(col) x Lane.. x Vector..`` layouts of the
   contraction's operands (``target/layout.py``).
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
   - LDS->registers: one ``vector.load`` per contiguous run of the operand layout, or
     ``nvgpu.ldmatrix`` (two instructions' x2 fragments per x4), one K step ahead of the matrix
     instructions that use them (on AMD held there by ``amdgpu.sched_barrier``);
   - the contraction: K steps x M tiles x N tiles of ``amdgpu.wmma``/``amdgpu.mfma``/
     ``nvgpu.mma.sync``, accumulators carried as ``scf.for`` iter_args across the whole K loop;
   - the epilogue: accumulator layout -> output memory, contiguous runs as one store each
     (``amdgpu.raw_buffer_store``/``vector.store``), valid halves only for 16-bit RDNA3 results;
     a fused epilogue (``normalize`` set it aside as a scalar function) is applied to each run in
     registers first (``kernels/common/epilogue.py``).
   Sizes: the bindings get their true shapes back -- static, or dynamic with the values of the
   inlined sizes function (``core/dynamic.py``). Wherever tiles may overhang the true extent, global
   accesses are bounded (``Emitter.bounded_global_load/store``); the K loop runs to the true K.
   Barriers are removed here; the `barriers` stage places them from the LDS accesses.
5. Finalize: canonicalize, CSE, lower affine to arith, so the result uses only arith, vector,
   memref, scf, gpu, hal, amdgpu and nvgpu ops (what IREE lowers and the lane executor runs).

A value needed in two layouts (e.g. a result feeding another contraction) would need a trip
through LDS; this stage reports such IR instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from iree.compiler import ir
from iree.compiler.dialects import arith, gpu, hal, scf, vector
from iree.compiler.dialects.transform import interpreter

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import (
    defining_op,
    location_of,
    op_attributes,
    ops_named,
    parse_module,
    run_passes,
    subspan_constant_offset,
    user_of,
    walk,
)
from mmaflow.compiler.kernels.common.emit import Emitter, packed_bits, packed_memref_type, type_bits, vector_type
from mmaflow.compiler.kernels.common.epilogue import Epilogue, epilogue_function
from mmaflow.compiler.kernels.common.fragments import FragmentLoader, LaneIndex
from mmaflow.compiler.kernels.common.lds_copy import Copy
from mmaflow.compiler.kernels.common.plan import Extents, KernelPlan, OperandFacts, OperandPlan, extents, plan_kernel
from mmaflow.compiler.kernels.common.prologue import buffer_type, inline_prologue
from mmaflow.compiler.target.intrinsics import TYPE_BITS, Intrinsic
from mmaflow.compiler.target.layout import COL, ROW
from mmaflow.compiler.target.targets import Vendor, read_target

NAME = "distribute"
_EXT_OPS = ("arith.extf", "arith.extsi", "arith.extui")
# How far ahead of the run it stores the epilogue loads its inputs on NVIDIA, in bytes per lane (32
# registers): TinyLlama's up projection with silu(gate) * up fused (a f16 [m, n] input) waited out
# one load per 4-element store (docs/kernels/matmul.md, "Fused epilogues").
PREFETCH_BYTES = 128


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
        return mem, list(op.operands[1 : 1 + rank]), ir.VectorType(op.results[0].type)
    mem, rank = op.operands[1], ir.MemRefType(op.operands[1].type).rank
    return mem, list(op.operands[2 : 2 + rank]), ir.VectorType(op.operands[0].type)


def _memory_space(mem: ir.Value) -> str:
    ms = ir.MemRefType(mem.type).memory_space
    return "" if ms is None else str(ms)


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
    bits = TYPE_BITS[str(old_t.element_type)]
    dyn_off = ir.ShapedType.get_dynamic_stride_or_offset()
    if offset != dyn_off and byte_offset is not None and offset * bits != byte_offset * 8:
        raise _fail(
            f"binding {ir.IntegerAttr(sub.attributes['binding']).value}: the memref's offset ({offset} "
            f"elements) disagrees with the subspan's byte offset {byte_offset}",
            sub,
        )
    if offset != dyn_off and byte_offset is None:
        raise _fail("a run-time byte offset with a static memref offset", sub)
    dyn = [d for d in shape if not isinstance(d, int)]
    if packed_bits(elem) is not None:  # 4/6-bit data: the bytes (select: a static last dimension)
        shape = list(shape[:-1]) + [packed_memref_type(shape[-1:], elem).shape[-1]]
        elem = ir.IntegerType.get_signless(8)
        offset = offset if offset == dyn_off else offset * bits // 8
    mtype = buffer_type(
        [d if isinstance(d, int) else None for d in shape], elem, offset_known=None if offset == dyn_off else offset
    )
    if str(mtype.memory_space) != str(space):
        raise _fail(f"unexpected memory space {mtype.memory_space}", sub)
    named = op_attributes(sub)
    offset_operands = (
        [list(sub.operands)[0]] if list(ir.DenseI32ArrayAttr(sub.attributes["operandSegmentSizes"]))[0] else []
    )
    named["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(offset_operands), len(dyn)])
    with sub.location, ir.InsertionPoint(sub):
        new = ir.Operation.create(
            "hal.interface.binding.subspan", results=[mtype], operands=offset_operands + dyn, attributes=named
        )
    return new.results[0]


@dataclass(frozen=True)
class OperandIR:
    """One input of the contraction, followed from the contract back to global memory."""

    name: str  # "A" | "B"
    read: ir.Operation  # transfer_read from the script's LDS alloc
    ext: ir.Operation | None  # arith.ext* between the read and the contract
    alloc: ir.Value  # the script's LDS alloc
    copy_write: ir.Operation  # transfer_write into the alloc ...
    copy_read: ir.Operation  # ... of this transfer_read from global memory
    vec_dim_role: tuple[str, ...]  # layout axis of each read-vector dim


@dataclass(frozen=True)
class Match:
    """The script's ops the rewrite replaces (see transform_scripts/matmul.mlir)."""

    contract: ir.Operation
    loop: ir.Operation  # the K loop around it
    a: OperandIR
    b: OperandIR
    out_write: ir.Operation  # the accumulator's transfer_write to the output
    acc_init: ir.Attribute  # the accumulator's splat start value

    @property
    def operands(self) -> tuple[OperandIR, OperandIR]:
        return self.a, self.b


def match(func: ir.Operation, intr: Intrinsic, cfg, vendor: Vendor) -> Match:
    """Find and check the script's ops. The only change to the IR: a K loop of one iteration
    that canonicalization removed is put back."""
    contracts = ops_named(func, "vector.contract")
    if len(contracts) != 1:
        raise _fail(f"expected one vector.contract after the script stage, found {len(contracts)}", func)
    c = contracts[0]
    if c.parent.name != "scf.for":
        _materialize_k_loop(c, vendor)
    loop = c.parent
    if loop.name != "scf.for":
        raise _fail("the vector.contract is not directly inside the K loop (scf.for)", c)
    body = loop.regions[0].blocks[0]
    acc = c.operands[2]
    iter_args = list(body.arguments)[1:]
    if len(iter_args) != 1 or acc != iter_args[0]:
        raise _fail(
            "the contraction's accumulator is not the K loop's only iter_arg; the script "
            "must keep the accumulator in registers across K",
            c,
        )
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
    a = _operand(c, "A", c.operands[0], tuple(COL if d == kd else ROW for d in dims[0]), intr)
    b = _operand(c, "B", c.operands[1], tuple(ROW if d == kd else COL for d in dims[1]), intr)
    if dims[2] != [md, nd]:
        raise _fail("the accumulator is transposed relative to the output", c)
    acc_t = ir.VectorType(acc.type)
    if list(acc_t.shape) != [cfg.wave_tile_m, cfg.wave_tile_n]:
        raise _fail(f"the accumulator is {acc_t}, the config's wave tile is {cfg.wave_tile_m}x{cfg.wave_tile_n}", c)
    if str(acc_t.element_type) != intr.c_type:
        raise _fail(f"the accumulator element type {acc_t.element_type} does not match {intr.name}'s {intr.c_type}", c)
    res = loop.results[0]
    users = [user_of(u) for u in res.uses]
    if len(users) != 1 or users[0].name != "vector.transfer_write":
        raise _fail("the accumulator must be written to the output by one vector.transfer_write", loop)
    out_write = users[0]
    _check_transfer(out_write)
    init = defining_op(loop.operands[3])
    if (
        init is None
        or init.name != "arith.constant"
        or not isinstance(init.attributes["value"], ir.DenseElementsAttr)
        or not ir.DenseElementsAttr(init.attributes["value"]).is_splat
    ):
        raise _fail("the accumulator must start from a splat constant (the zero fill)", loop)
    return Match(c, loop, a, b, out_write, ir.DenseElementsAttr(init.attributes["value"]).get_splat_value())


def _materialize_k_loop(c: ir.Operation, vendor: Vendor) -> None:
    """K == tile_k: canonicalization removed the one-iteration K loop. Put it back (a loop of
    one iteration around the K step's ops) so the rest of the stage sees one IR form."""
    acc = c.operands[2]
    init = defining_op(acc)
    if init is None or init.name != "arith.constant":
        raise _fail("without a K loop, the accumulator must be the zero-fill constant", c)
    block_ops = [o.operation for o in c.block.operations]
    step_ops = []
    for o in block_ops[: block_ops.index(c)]:
        if o.name in ("vector.transfer_read", "vector.transfer_write") or o.name in _EXT_OPS:
            step_ops.append(o)
        elif o.name == "gpu.barrier":
            o.erase()  # the barriers stage places barriers
    em = Emitter(ir.InsertionPoint(c), c.location, vendor)
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


def _operand(
    contract: ir.Operation, name: str, value: ir.Value, vec_role: tuple[str, ...], intr: Intrinsic
) -> OperandIR:
    ext = defining_op(value)
    if ext is not None and ext.name in _EXT_OPS:
        value = ext.operands[0]
    else:
        ext = None
    read = defining_op(value)
    if read is None or read.name != "vector.transfer_read":
        raise _fail(f"operand {name} of the contraction does not come from an LDS transfer_read", contract)
    _check_transfer(read)
    alloc = read.operands[0]
    if "workgroup" not in _memory_space(alloc):
        raise _fail(f"operand {name} is read from {alloc.type}, not from workgroup memory (LDS)", read)
    elem = str(ir.MemRefType(alloc.type).element_type)
    want = intr.a_type if name == "A" else intr.b_type
    if elem != want:
        raise _fail(f"operand {name} is {elem}, {intr.name} takes {want}", read)
    if ext is not None and ext.name == "arith.extui" and not (intr.unsigned_a if name == "A" else intr.unsigned_b):
        raise _fail(f"operand {name} is zero-extended but {intr.name} is signed", ext)
    full = ir.MemRefType(alloc.type).shape
    if any(d != 1 for d in full[:-2]):
        raise _fail(f"the LDS tile of {name} is {full}: only leading unit dims may precede the 2-D tile", read)
    # The copy that fills the LDS alloc, inside the loop.
    writes = [user_of(u) for u in alloc.uses if user_of(u).name == "vector.transfer_write"]
    if len(writes) != 1:
        raise _fail(f"expected one copy into the LDS tile of {name}, found {len(writes)}", read)
    w = writes[0]
    _check_transfer(w)
    src = defining_op(w.operands[0])
    if src is None or src.name != "vector.transfer_read":
        raise _fail(f"the LDS tile of {name} is not filled from a global transfer_read", w)
    _check_transfer(src)
    if "workgroup" in _memory_space(src.operands[0]):
        raise _fail(f"the copy into {name}'s LDS tile reads LDS", src)
    return OperandIR(name, read, ext, alloc, w, src, vec_role)


def _memref_extents(m: Match, problem, cfg) -> dict:
    """(role, extents) of each global memref the script reads or writes, keyed by the memref value. A
    memref's role is the operand it feeds (one memref may feed both A and B: A @ A), or the
    result the accumulator is written to."""
    feeds: dict = {}
    for opd in m.operands:
        feeds.setdefault(_transfer_parts(opd.copy_read)[0], []).append(opd.name)
    feeds.setdefault(_transfer_parts(m.out_write)[0], []).append("C")
    return {
        mem: (role, extents(problem, cfg, role, tuple(ir.MemRefType(mem.type).shape), other[0] if other else None))
        for mem, (role, *other) in feeds.items()
    }


def operand_facts(m: Match, mem_extents: dict) -> tuple[OperandFacts, OperandFacts]:
    out = []
    for opd in m.operands:
        mem, _, vt = _transfer_parts(opd.copy_read)
        rows, cols = vt.shape
        out.append(
            OperandFacts(
                opd.name,
                opd.vec_dim_role,
                tuple(ir.MemRefType(opd.alloc.type).shape),
                str(ir.MemRefType(opd.alloc.type).element_type),
                rows,
                cols,
                mem_extents[mem][1],
            )
        )
    return out[0], out[1]


@dataclass
class KLoop:
    """The rebuilt K loop (``Rewriter._new_loop``, ``Rewriter._ring_loop``)."""

    op: scf.ForOp
    acc_args: list  # one accumulator per instruction tile
    next_tile: list  # the next K tile's loaded chunks (yielded with the accumulators)
    new_yield: ir.Operation | None  # a placeholder yield, replaced once the MMAs exist (None: the ring's is final)


class Rewriter:
    """Rewrites one matched dispatch as its plan says."""

    def __init__(self, func: ir.Operation, m: Match, plan: KernelPlan, mem_extents: dict):
        self.func, self.m, self.plan, self.mem_extents = func, m, plan, mem_extents
        self.problem = attrs.read_problem(func)
        self.vendor = plan.vendor
        entry = func.regions[0].blocks[0]
        self.top = Emitter(
            ir.InsertionPoint([o.operation for o in entry.operations][0]), m.contract.location, self.vendor
        )
        self.sizes: dict = {}  # dynamic problem dimension -> index value (from the inlined prologue)
        self.epilogue_buffers: list = []
        self.scale_buffers: list = []  # a block-scaled problem's A and B scales (i8 bytes, [rows, K/32])
        self.global_of: dict = {}  # the script's global memref -> (its subspan, the retyped subspan's value)
        self.erase: list[ir.Operation] = []

    def kernel_prologue(self) -> None:
        """What every kernel does first: the inlined prologue (dynamic sizes, epilogue buffers),
        rastered workgroup ids, the bindings retyped, the script's barriers noted."""
        self.sizes, buffers = inline_prologue(self.func, self.top.ip, self.problem)
        n_ep = len(self.problem.epilogue)
        self.epilogue_buffers, self.scale_buffers = buffers[:n_ep], buffers[n_ep:]
        raster = attrs.read_config(self.func).raster
        if raster > 1 and not getattr(self.plan, "persistent", None):  # (a persistent grid rasters its own tiles)
            self._raster_workgroups(raster)
        self._retype_bindings()
        self.script_barriers = ops_named(self.func, "gpu.barrier")

    def run(self) -> None:
        m, plan = self.m, self.plan
        self.kernel_prologue()
        tid = self.top.thread_id()
        self.lane_id = self.top.rem(tid, plan.wave_size)
        lanes = LaneIndex(self.top, self.lane_id, plan.wave_size)
        ring = plan.loop.stages > 1
        copies, frags = {}, {}
        for opd, op_plan in zip(m.operands, plan.operands):
            elem = ir.MemRefType(opd.alloc.type).element_type
            storage = self.top.alloc_lds(([plan.loop.slots] if ring else []) + list(op_plan.lds_shape), elem)
            copies[opd.name] = self._copy(opd, op_plan, elem, storage)
            frags[opd.name] = FragmentLoader(op_plan.fragments, storage, elem, lanes)
        if ring:  # the contraction is distributed into the ring's pipelined loop
            loop = self._ring_loop(tid, copies, frags)
        else:
            loop = self._new_loop(tid, copies)
            self._distribute_contract(loop, frags)
        self._distribute_epilogue(loop, lanes)
        self._erase_old()
        if plan.loop.unroll > 1:
            unroll_loop(loop.op.operation, plan.loop.unroll)

    def _raster_workgroups(self, group: int) -> None:
        """Walk the output tiles in groups of ``group`` tile rows, column by column within a
        group: the workgroup with linear id l = y * gx + x (IREE's row-by-row order) takes tile
        row first + (l % (group * gx)) % size and tile column (l % (group * gx)) // size, where
        first = (l // (group * gx)) * group and size = min(gy - first, group) (the last group may
        be short). A permutation of the grid; every use of the workgroup's x and y ids (tile
        origins, bounds, epilogue) follows it."""
        em = self.top.named("raster")
        olds = workgroup_id_ops(self.func)
        with em.loc, em.ip:
            x, y = hal.interface_workgroup_id(0), hal.interface_workgroup_id(1)
            gx, gy = hal.interface_workgroup_count(0), hal.interface_workgroup_count(1)
        row, col = raster_tile(em, lambda: em.add(em.mul(y, gx), x), gx, gy, group)
        for dim, new in ((0, col), (1, row)):
            for op in olds[dim]:
                op.result.replace_all_uses_with(new)
                op.erase()

    def extent(self, dim: str):
        """The true size of a problem dimension: an int, or an index value when dynamic."""
        size = getattr(self.problem, dim)
        return size if size is not None else self.sizes[dim]

    def _limits(self, ext: Extents) -> list:
        """Per axis: the true extent (int or index value) where tiles may overhang it, else None."""
        return [self.extent(name) if b else None for name, b in zip(ext.names, ext.bounded())]

    def _retype_bindings(self) -> None:
        """Give the bindings the global address space that raw buffer ops and LLVM expect, their
        true shapes (the `normalize` stage may have rounded them up to whole tiles, or stood in
        for dynamic sizes) and, for C, the stored element type (an epilogue may convert the
        accumulator)."""
        space = ir.Attribute.parse("#gpu.address_space<global>")
        for sub in ops_named(self.func, "hal.interface.binding.subspan"):
            if sub.results[0] in self.epilogue_buffers + self.scale_buffers:  # from the prologue, typed already
                continue
            if sub.results[0] not in self.mem_extents:
                raise _fail(f"binding {ir.IntegerAttr(sub.attributes['binding']).value} is none of A, B, C", sub)
            role, ext = self.mem_extents[sub.results[0]]
            elem = ir.MemRefType(sub.results[0].type).element_type
            if role == "C":  # the epilogue may store another type than the accumulator's
                elem = ir.Type.parse(self.plan.epilogue.stored_type)
            true = [self.extent(d) for d in ext.names]
            self.global_of[sub.results[0]] = (sub, global_subspan(sub, true, elem, space))

    def _global(self, mem: ir.Value) -> ir.Value:
        try:
            return self.global_of[mem][1]
        except KeyError:
            raise _fail("a global access is not to a hal.interface.binding.subspan") from None

    def _copy(self, opd: OperandIR, op_plan: OperandPlan, elem: ir.Type, storage: ir.Value) -> Copy:
        src_mem, src_idx, _ = _transfer_parts(opd.copy_read)
        _, dst_idx, _ = _transfer_parts(opd.copy_write)
        ext = self.mem_extents[src_mem][1]
        limits = tuple(self._limits(ext)[-2:])
        bits = packed_bits(elem) or 8
        if bits < 8:  # 4/6-bit data, packed along K (the last axis): copied as its bytes
            elem, lim = ir.IntegerType.get_signless(8), limits[-1]
            limits = (limits[0], None if lim is None else self.top.byte_of(lim, bits))
        return Copy(
            op_plan.copy,
            elem,
            self._global(src_mem),
            src_idx[:-2],
            storage,
            tuple(dst_idx[-2:]),
            limits=limits,
            extent0=self.extent(ext.names[0]),
            k_axis=op_plan.k_dim,
            col_bits=bits,
        )

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

    def _tile_origin(self, opd: OperandIR, body, mapping: dict, em: Emitter):
        _, idx, _ = _transfer_parts(opd.copy_read)
        g0, g1 = self._clone_slice(idx[-2:], body, mapping, em.ip)
        return g0, g1

    def _loop_bounds(self):
        """The script's K loop body and induction variable, the new loop's bounds (dynamic K: as
        many K tiles as cover it, the last one bounded) and an emitter before the loop."""
        loop, lp = self.m.loop, self.plan.loop
        old_body = loop.regions[0].blocks[0]
        lb, ub, step = loop.operands[0], loop.operands[1], loop.operands[2]
        pre = Emitter(ir.InsertionPoint(loop), loop.location, self.vendor)
        if lp.k_tiles is None:
            tk = lp.tile_k
            ub = pre.mul(pre.div(pre.add(self.sizes["k"], tk - 1), tk), tk)
        return old_body, list(old_body.arguments)[0], lb, ub, step, pre

    @staticmethod
    def _move_body(old_body, old_iv: ir.Value, new_loop: scf.ForOp):
        """Move the script's K-step ops (all but the yield) into the new loop; (body, iv)."""
        body = new_loop.body
        ip = ir.InsertionPoint(body)
        for o in [o.operation for o in old_body.operations][:-1]:
            ip.insert(o.detach_from_parent())
        old_iv.replace_all_uses_with(new_loop.induction_variable)
        return body, new_loop.induction_variable

    def _new_loop(self, tid: ir.Value, copies: dict) -> KLoop:
        """The K loop, rebuilt: accumulators (one per-lane vector per instruction tile) and the
        prefetched next K tile (this thread's chunks) are its iter_args.

            prologue: load tile 0
            for k:   store the carried tile to LDS; load tile min(k+1, last); fragments + MMAs
        """
        loop, lp, intr = self.m.loop, self.plan.loop, self.plan.intrinsic
        old_body, old_iv, lb, ub, step, pre = self._loop_bounds()
        guard = None
        if lp.guard_empty_k:
            # K may be 0: A and B are then empty buffers, and NVIDIA's clamped loads would still
            # touch their first element. (AMD's raw buffer loads read 0 from an empty buffer.)
            with loop.location, ir.InsertionPoint(loop):
                types = [
                    copies[o.name].chunk_type for o in self.m.operands for _ in range(copies[o.name].shape.registers())
                ]
                guard = scf.IfOp(pre.lt(pre.const(0), self.sizes["k"]), types, has_else=True)
            pre = pre.at(ir.InsertionPoint(guard.then_block))
        first = []
        for opd in self.m.operands:
            g0, g1 = self._tile_origin(opd, old_body, {old_iv: lb}, pre)
            first += copies[opd.name].loads(pre, tid, g0, g1)
        if guard is not None:
            with loop.location, ir.InsertionPoint(guard.then_block):
                scf.YieldOp(first)
            zeros = Emitter(ir.InsertionPoint(guard.else_block), loop.location, self.vendor)
            with loop.location, ir.InsertionPoint(guard.else_block):
                scf.YieldOp([zeros.zero_vector(ir.VectorType(v.type)) for v in first])
            first = list(guard.results)
            pre = pre.at(ir.InsertionPoint(loop))
        acc_t = vector_type(intr.c_shape, ir.Type.parse(intr.c_type))
        n_acc = lp.instructions[0] * lp.instructions[1]
        init = pre.splat_const(acc_t, self.m.acc_init)
        with loop.location, ir.InsertionPoint(loop):
            new_loop = scf.ForOp(lb, ub, step, [init] * n_acc + first)
        body, iv = self._move_body(old_body, old_iv, new_loop)
        args = list(new_loop.inner_iter_args)
        acc_args, carried = args[:n_acc], args[n_acc:]
        # Store the carried tile, then issue the next tile's loads (clamped to the last tile).
        anchor = [o.operation for o in body.operations][0]
        em = Emitter(ir.InsertionPoint(anchor), loop.location, self.vendor)
        pos = 0
        for opd in self.m.operands:
            n = copies[opd.name].shape.registers()
            copies[opd.name].stores(em, tid, carried[pos : pos + n])
            pos += n
        nxt = em.min_index(em.add(iv, step), em.sub(ub, step))
        next_tile = []
        for opd in self.m.operands:
            g0, g1 = self._tile_origin(opd, body, {iv: nxt}, em)
            next_tile += copies[opd.name].loads(em, tid, g0, g1)
        with loop.location, ir.InsertionPoint(body):
            new_yield = scf.YieldOp(acc_args + carried).operation  # operands replaced later
        return KLoop(new_loop, acc_args, next_tile, new_yield)

    def _ring_loop(self, tid: ir.Value, copies: dict, frags: dict) -> KLoop:
        """The K loop over an LDS ring of S = ``stages`` (S - 1 K tiles in flight, one barrier
        per K tile), the contraction distributed into it and its fragments software-pipelined:
        while one group of K steps is multiplied (one step, or every step of the tile where the
        steps are interleaved: ``LoopPlan.fragment_groups``), the next group's fragments are
        read into registers. Two ways to fill the ring, one loop body:

        NVIDIA (``LoopPlan.asynchronous``): async copies straight into S slots (tile i in slot
        i % S), the tiles in flight in LDS.

            prologue: copy tiles 0 .. S-2 (one commit group each; a tile past the last copies
                      nothing); wait for tile 0; barrier; fragments of tile 0's first group
            main:     while tile i+S-1 is whole within K: copy it into slot (i-1) % S; commit
                      groups 0 .. n-2: fragments of group g+1 (slot i % S), MMAs of group g
                      last group: wait until tile i+1 has landed (S-2 groups may stay
                      pending); barrier; fragments of tile i+1's first group (slot (i+1) % S);
                      MMAs of the last group
            drain:    the last tiles: the same, copying a partial last tile (checked; a tile
                      past K copies nothing) or, when K is whole tiles, nothing (an empty
                      commit group keeps the wait counts)
            after:    wait for every group

        The main loop copies only tiles whole within K, so its copies check only the M or N
        axis and their addresses stay affine in the K index (LLVM strength-reduces them to
        pointer increments; measured faster on the H100); K = 0 needs no guard (both loops are empty).

        AMD: the copies of one stage (raw buffer loads, bounds and transposes as there), the
        tiles in flight in registers (``iter_args``), two LDS slots (tile i in slot i % 2;
        ``config.ring_slots``); ``amdgpu.sched_barrier`` holds the order against LLVM's
        scheduler.

            prologue: load tiles 0 .. S-2; store tile 0 into slot 0; barrier; fragments of
                      tile 0's first group
            for i:    load tile min(i+S-1, last) into registers (tiles i+1 .. i+S-2 are there)
                      groups 0 .. n-2: fragments of group g+1 (slot i % 2), MMAs of group g
                      last group: store tile i+1's registers into slot (i+1) % 2; barrier;
                      fragments of tile i+1's first group; MMAs of the last group -- with one
                      group per tile its MMAs come first, so that the stores follow a whole tile
                      of matrix work

        One barrier per K tile: it publishes tile i+1 to every thread and tells every thread
        that tile i's slot is no longer read (all its fragments are in registers), so the next
        iteration may overwrite it; the MMAs of the last group cover the latency of the next
        tile's first fragment loads. AMD's loads are clamped to the last tile (its raw buffer
        loads read 0 from an empty tensor), and what they store past the last tile no matrix
        instruction reads."""
        loop, lp = self.m.loop, self.plan.loop
        S = lp.stages
        bm, bn, _ = lp.instructions
        groups = lp.fragment_groups
        amd = not lp.asynchronous
        old_body, old_iv, lb, ub, step, pre = self._loop_bounds()

        def load(em: Emitter, k_origin: ir.Value, body, iv) -> list[list[ir.Value]]:
            """AMD: this thread's chunks of the tile at ``k_origin``, per operand."""
            return [
                copies[opd.name].loads(em, tid, *self._tile_origin(opd, body, {iv: k_origin}, em))
                for opd in self.m.operands
            ]

        def store(em: Emitter, tile: list[list[ir.Value]], slot: ir.Value) -> None:
            for opd, values in zip(self.m.operands, tile):
                copies[opd.name].stores(em, tid, values, slot)

        def issue(em: Emitter, k_origin: ir.Value, slot: ir.Value, body, iv, guard: bool) -> ir.Value:
            """NVIDIA: async copies of the tile at ``k_origin`` into ``slot``, one commit group.
            ``guard``: the tile may lie past K or overhang it (checked), else it lies within K
            (only the other axis checked)."""
            tile_valid = em.lt(k_origin, ub) if guard else None
            tokens = []
            for opd in self.m.operands:
                g0, g1 = self._tile_origin(opd, body, {iv: k_origin}, em)
                tokens += copies[opd.name].async_copies(em, tid, g0, g1, slot, tile_valid, whole_k=not guard)
            group = em.async_group(tokens)
            attrs.mark(defining_op(group), attrs.RING)
            return group

        def barrier(em: Emitter) -> None:
            attrs.mark(em.barrier(), attrs.RING)

        def fragments(em: Emitter, bases: dict, steps: tuple, slot: ir.Value) -> list[ir.Value]:
            """The fragments of K steps ``steps``: per step, A's bm then B's bn."""
            fa, fb = frags["A"], frags["B"]
            if len(steps) == 1:
                (kk,) = steps
                return fa.load_each(em, bases["A"], [(i, kk) for i in range(bm)], slot) + fb.load_each(
                    em, bases["B"], [(kk, j) for j in range(bn)], slot
                )
            a = [fa.load_group(em, bases["A"], [(i, kk) for kk in steps], slot) for i in range(bm)]
            b = [fb.load_group(em, bases["B"], [(kk, j) for kk in steps], slot) for j in range(bn)]
            return [v for s in range(len(steps)) for v in [a[i][s] for i in range(bm)] + [b[j][s] for j in range(bn)]]

        # Prologue.
        carried: list[list[list[ir.Value]]] = []  # AMD: tiles 1 .. S-2, in registers
        group = None
        for s in range(S - 1):
            if amd:
                if lp.k_tiles is not None:  # (a tile past the last: clamped, never multiplied)
                    s = min(s, lp.k_tiles - 1)
                carried.append(load(pre, pre.add(lb, pre.mul(step, s)) if s else lb, old_body, old_iv))
            else:
                group = issue(pre, pre.add(lb, pre.mul(step, s)) if s else lb, pre.const(s), old_body, old_iv, True)
        if amd:
            store(pre, carried.pop(0), pre.const(0))
        else:
            pre.async_wait(group, S - 2)
        barrier(pre)
        first = fragments(
            pre,
            self._fragment_bases(lambda v: self._clone_slice(v, old_body, {old_iv: lb}, pre.ip)),
            groups[0],
            pre.const(0),
        )
        flat = [v for tile in carried for values in tile for v in values]
        intr = self.plan.intrinsic
        acc_t = vector_type(intr.c_shape, ir.Type.parse(intr.c_type))
        n_acc = bm * bn
        n_frag = len(first)
        init = pre.splat_const(acc_t, self.m.acc_init)
        main_ub = ub
        partial_k = False
        if not amd:
            # NVIDIA's main loop ends where the tile it would copy is not whole within K: S-1
            # tiles before the last whole one (at lb when there are fewer). A partial last
            # tile is copied, checked, by the drain.
            partial_k = any(c.limits[c.k_axis] is not None for c in copies.values())
            k_whole = ub
            if partial_k:
                k = self.extent("k")
                k_whole = (
                    pre.const(k // lp.tile_k * lp.tile_k)
                    if isinstance(k, int)
                    else pre.mul(pre.div(k, lp.tile_k), lp.tile_k)
                )
            tail = pre.mul(step, S - 1)
            main_ub = pre.select(pre.lt(pre.add(lb, tail), k_whole), pre.sub(k_whole, tail), lb)
        with loop.location, ir.InsertionPoint(loop):
            new_loop = scf.ForOp(lb, main_ub, step, [init] * n_acc + first + flat)
        body, iv = self._move_body(old_body, old_iv, new_loop)
        src = (body, iv)  # where the copies' index computations live

        def tile_body(em: Emitter, block, iv, args: list, bases: dict, copy: str | None) -> None:
            """One K tile of the loop whose ``block`` and ``iv`` these are, and its yield. NVIDIA:
            the copy of tile i+S-1 (``copy``: "whole" within K, "guarded", or None: an empty
            group; its indices cloned from the main loop's body)."""
            mma_em = em.named("mma")
            tile = em.div(em.sub(iv, lb), lp.tile_k)
            slots = lp.slots
            in_flight: list = []
            if amd:
                per_tile = [copies[opd.name].shape.registers() for opd in self.m.operands]
                rest = args[n_acc + n_frag :]
                for _ in range(S - 2):
                    t = []
                    for n in per_tile:
                        t, rest = t + [rest[:n]], rest[n:]
                    in_flight.append(t)
                in_flight.append(load(em, em.min_index(em.add(iv, em.mul(step, S - 1)), em.sub(ub, step)), *src))
                em.sched_barrier()
                group = None
            elif copy:
                group = issue(
                    em, em.add(iv, em.mul(step, S - 1)), em.rem(em.add(tile, S - 1), S), *src, copy == "guarded"
                )
            else:
                group = em.async_group([])
                attrs.mark(defining_op(group), attrs.RING)
            acc = {(i, j): args[i * bn + j] for i in range(bm) for j in range(bn)}

            def mmas(steps: tuple, cur: list) -> None:
                for s, kk in enumerate(steps):
                    a_f, b_f = cur[s * (bm + bn) : s * (bm + bn) + bm], cur[s * (bm + bn) + bm : (s + 1) * (bm + bn)]
                    sa, sb = self._block_scales(mma_em, iv, kk, bm, bn)
                    for i in range(bm):
                        for j in range(bn):
                            scales = (sa[i], sb[j]) if sa else None
                            acc[(i, j)] = mma_em.mma(intr, a_f[i], b_f[j], acc[(i, j)], scales)
                if amd:
                    em.sched_barrier()

            def next_tile() -> list[ir.Value]:
                """Tile i+1 in its slot for every thread, slot i % S free; its first fragments."""
                nxt_slot = em.rem(em.add(tile, 1), slots)
                if amd:
                    store(em, in_flight[0], nxt_slot)
                else:
                    em.async_wait(group, S - 2)
                barrier(em)
                return fragments(em, bases, groups[0], nxt_slot)

            cur = args[n_acc : n_acc + n_frag]
            for g, steps in enumerate(groups):
                if g + 1 < len(groups):
                    nxt = fragments(em, bases, groups[g + 1], em.rem(tile, slots))
                elif amd and len(groups) == 1:  # the stores wait for their loads: a tile of MMAs first
                    mmas(steps, cur)
                    cur = next_tile()
                    break
                else:
                    nxt = next_tile()
                if amd:
                    em.sched_barrier()
                mmas(steps, cur)
                cur = nxt
            carry = [v for t in in_flight[1:] for values in t for v in values] if amd else []
            with em.loc, ir.InsertionPoint(block):
                scf.YieldOp([acc[(i, j)] for i in range(bm) for j in range(bn)] + cur + carry)

        c = self.m.contract
        em = Emitter(ir.InsertionPoint(c), c.location, self.vendor).named("ring")
        tile_body(em, body, iv, list(new_loop.inner_iter_args), self._fragment_bases(lambda v: v), "whole")
        if amd:
            return KLoop(new_loop, list(new_loop.inner_iter_args)[:n_acc], [], None)
        with loop.location, ir.InsertionPoint(loop):
            drain = scf.ForOp(main_ub, ub, step, list(new_loop.results))
        d_iv = drain.induction_variable
        d_em = Emitter(ir.InsertionPoint(drain.body), loop.location, self.vendor).named("ring.drain")
        d_bases = self._fragment_bases(lambda v: self._clone_slice(v, body, {iv: d_iv}, d_em.ip))
        tile_body(d_em, drain.body, d_iv, list(drain.inner_iter_args), d_bases, "guarded" if partial_k else None)
        after = Emitter(ir.InsertionPoint.after(drain.operation), loop.location, self.vendor).named("ring")
        after.async_wait(group, 0)  # (the prologue's token: the wait counts groups, not tokens)
        return KLoop(drain, list(drain.inner_iter_args)[:n_acc], [], None)

    def _fragment_bases(self, place) -> dict:
        """Per operand, layout axis -> the wave tile's origin in its LDS tile (the script's LDS
        read indices, passed through ``place``: e.g. cloned before the loop)."""
        bases = {}
        for opd in self.m.operands:
            _, idx, _ = _transfer_parts(opd.read)
            r, c = place(idx[-2:])
            bases[opd.name] = {opd.vec_dim_role[0]: r, opd.vec_dim_role[1]: c}
        return bases

    def _distribute_contract(self, loop: KLoop, frags: dict) -> None:
        c, lp = self.m.contract, self.plan.loop
        em = Emitter(ir.InsertionPoint(c), c.location, self.vendor)
        mma_em = em.named("mma")
        bm, bn, bk = lp.instructions
        bases = self._fragment_bases(lambda v: v)
        acc = {(i, j): loop.acc_args[i * bn + j] for i in range(bm) for j in range(bn)}
        fa, fb = frags["A"], frags["B"]
        if lp.k_interleaved:  # every K step's fragments at once: one wide read serves several
            a_all = {i: fa.load_group(em, bases["A"], [(i, kk) for kk in range(bk)]) for i in range(bm)}
            b_all = {j: fb.load_group(em, bases["B"], [(kk, j) for kk in range(bk)]) for j in range(bn)}

        def fragments(kk):
            if lp.k_interleaved:
                return [a_all[i][kk] for i in range(bm)], [b_all[j][kk] for j in range(bn)]
            return fa.load_each(em, bases["A"], [(i, kk) for i in range(bm)]), fb.load_each(
                em, bases["B"], [(kk, j) for j in range(bn)]
            )

        # Fragments one K step ahead: step kk+1's reads are issued before step kk's matrix
        # instructions, which then wait only for reads that had a whole step to land. On AMD a
        # sched_barrier holds that order (LLVM's scheduler sinks each read next to its use,
        # putting half the WMMAs right behind an LDS wait: docs/PERFORMANCE.md, AMD).
        cur = fragments(0)
        for kk in range(bk):
            if kk and self.vendor is Vendor.AMD:
                em.sched_barrier()
            nxt = fragments(kk + 1) if kk + 1 < bk else None
            if self.vendor is Vendor.AMD and (kk == 0 or nxt is not None):
                em.sched_barrier()
            a_frags, b_frags = cur
            sa, sb = self._block_scales(mma_em, loop.op.induction_variable, kk, bm, bn)
            for i in range(bm):
                for j in range(bn):
                    scales = (sa[i], sb[j]) if sa else None
                    acc[(i, j)] = mma_em.mma(self.plan.intrinsic, a_frags[i], b_frags[j], acc[(i, j)], scales)
            cur = nxt
        with loop.new_yield.location, ir.InsertionPoint(loop.new_yield):
            scf.YieldOp([acc[(i, j)] for i in range(bm) for j in range(bn)] + loop.next_tile)
        self.erase.append(loop.new_yield)

    def _block_scales(self, em: Emitter, k_origin: ir.Value, kk: int, bm: int, bn: int) -> tuple[list, list]:
        """A block-scaled problem's scales for K step ``kk`` of the K tile at ``k_origin``: per A
        row tile i, each lane's E8M0 scale of its row and MX block (the instruction's scale layout:
        row o_m + i*M + lane part, block (k_origin + kk*K)/32 + lane part), per B column tile j
        the same by column; ([], []) for any other problem. Each is a byte load from the scale
        buffer (L1/L2-resident: 1/16 of A's bytes), 0 past the true rows or blocks."""
        if self.problem.scales is None:
            return [], []
        intr, block = self.plan.intrinsic, self.problem.scales.block
        _, idx, _ = _transfer_parts(self.m.out_write)
        o_m, o_n = idx[-2], idx[-1]  # the wave tile's origin in C: its rows of A, its columns of B
        blocks0 = em.div(em.add(k_origin, kk * intr.k), block)
        out = []
        for buf, lay, origin, tiles, step, along in (
            (self.scale_buffers[0], intr.scale_a, o_m, bm, intr.m, ROW),
            (self.scale_buffers[1], intr.scale_b, o_n, bn, intr.n, COL),
        ):
            across = COL if along == ROW else ROW
            blk = em.add(blocks0, em.lane_part(lay, self.lane_id, across))
            lane_rc = em.lane_part(lay, self.lane_id, along)
            rows, nblocks = ir.MemRefType(buf.type).shape
            out.append(
                [
                    self._scale_at(em, buf, [em.add(origin, t * step, lane_rc), blk], (rows, nblocks))
                    for t in range(tiles)
                ]
            )
        return out[0], out[1]

    def _scale_at(self, em: Emitter, buf: ir.Value, idx: list, limits) -> ir.Value:
        """One E8M0 scale of a block-scaled problem: the byte at ``idx`` ([row or column, block]) of
        scale buffer ``buf``, 0 at or past ``limits``, as the scalar the scaled MFMA takes."""
        raw = em.bounded_global_load(buf, idx, vector_type([1], ir.IntegerType.get_signless(8)), limits)
        e8m0 = em.bitcast(raw, vector_type([1], ir.Type.parse(self.problem.scales.type)))
        return em.extract(e8m0, 0)

    def _distribute_epilogue(self, loop: KLoop, lanes: LaneIndex) -> None:
        self._store_accumulators(list(loop.op.results), lanes)

    def _store_accumulators(self, accs: list, lanes: LaneIndex) -> None:
        """The accumulators (one per-lane vector per instruction tile, batch-row-major) through
        the fused epilogue to the output, as the epilogue plan's runs."""
        w, ep, intr = self.m.out_write, self.plan.epilogue, self.plan.intrinsic
        em = Emitter(ir.InsertionPoint(w), w.location, self.vendor).named("epilogue")
        mem, idx, _ = _transfer_parts(w)
        out = self._global(mem)
        ext = self.mem_extents[mem][1]
        limits = tuple(self._limits(ext)[-2:])
        lead, o0, o1 = idx[:-2], idx[-2], idx[-1]
        lay = ep.layout
        out_elem = ir.MemRefType(out.type).element_type
        br, bc = lay.batch
        im, inn = intr.m, intr.n
        row_l, col_l = lanes.part(lay, ROW), lanes.part(lay, COL)
        epi = None
        efunc = epilogue_function(self.func.parent)
        if ep.fused:
            if efunc is None:
                raise _fail("the problem has an epilogue but the module has no epilogue function", w)
            extents_ = {"b": self.extent("batch"), "m": self.extent("m"), "n": self.extent("n")}
            epi = Epilogue(
                efunc,
                self.problem.epilogue,
                self.epilogue_buffers,
                {"b": False, "m": limits[0] is not None, "n": limits[1] is not None},
                extents_,
            )
        flats = [em.shape_cast(acc, [lay.op_vector_length]) for acc in accs]
        bounds = [None] * len(lead) + list(limits)
        places: dict = {}

        def place(i: int, j: int, run) -> tuple:
            """(row, column, coords, key) of ``run`` of instruction tile (i, j)."""
            at = (i, j, run.first)
            if at not in places:
                r = em.add(o0, row_l, i * im + run.row)
                cidx = em.add(o1, col_l, j * inn + run.col)
                coords = {"b": lead[0] if lead else None, "m": r, "n": cidx}
                places[at] = (r, cidx, coords, {"b": 0, "m": i * im + run.row, "n": j * inn + run.col})
            return places[at]

        # the runs in store order; their epilogue inputs are loaded PREFETCH_BYTES per lane ahead
        order = (
            [x for pair in ep.pairs for x in pair] + list(ep.singles)
            if ep.lane_pairs
            else [(i, j, run) for i in range(br) for j in range(bc) for run in ep.runs]
        )
        ahead = 0
        if epi is not None and order and self.vendor is Vendor.NVIDIA:  # (AMD's bounded stores do not branch)
            per_run = max(1, epi.load_bytes(order[0][2].length))
            ahead = max(1, min(len(order), PREFETCH_BYTES // per_run))
        fetched = 0

        def stored(i: int, j: int, run):
            """(value, row, column) of ``run`` of instruction tile (i, j): epilogue applied, converted."""
            nonlocal fetched
            flat = flats[i * bc + j]
            if lay.vector_stride == 1:
                val = flat if run.length == lay.op_vector_length else em.extract_slice(flat, run.first, run.length)
            else:
                elems = [em.extract(flat, lay.op_index(e)) for e in range(run.first, run.first + run.length)]
                val = em.from_elements(vector_type([run.length], ir.VectorType(flat.type).element_type), elems)
            r, cidx, coords, key = place(i, j, run)
            if epi is not None:
                done = order.index((i, j, run))
                while fetched < min(len(order), done + 1 + ahead):
                    fi, fj, frun = order[fetched]
                    _, _, fcoords, fkey = place(fi, fj, frun)
                    epi.prefetch(em, fcoords, fkey, frun.length)
                    fetched += 1
                val = epi.apply(em, val, coords, key)
            return em.convert(val, out_elem, signed=not intr.unsigned_a), r, cidx

        if ep.lane_pairs:  # 8-column-apart runs merged across lanes l, l ^ 1 (plan.store_pairs)
            odd = em.lt(em.const(0), em.rem(col_l, 4))  # col_l = 2 (l % 4): lane l is odd
            shift = em.select(odd, em.const(6), em.const(0))  # the odd lane stores at c + 8 + 4 (l % 4 / 2)
            for lo, hi in ep.pairs:
                v_lo, r, c_lo = stored(*lo)
                v_hi, _, _ = stored(*hi)
                em.bounded_global_store(
                    self._swap_words(em, v_lo, v_hi, odd),
                    out,
                    lead + [r, em.add(c_lo, shift)],
                    bounds,
                    extent0=self.extent(ext.names[0]),
                )
            for item in ep.singles:
                val, r, cidx = stored(*item)
                em.bounded_global_store(val, out, lead + [r, cidx], bounds, extent0=self.extent(ext.names[0]))
            return
        for i in range(br):
            for j in range(bc):
                for run in ep.runs:
                    val, r, cidx = stored(i, j, run)
                    em.bounded_global_store(val, out, lead + [r, cidx], bounds, extent0=self.extent(ext.names[0]))

    def _swap_words(self, em: Emitter, lo: ir.Value, hi: ir.Value, odd: ir.Value) -> ir.Value:
        """Lane l's two runs of 2 ``lo`` (columns c + 2 (l % 4) ..) and ``hi`` (c + 8 + ..) -> its 4
        contiguous elements: the even lane keeps ``lo`` and takes its odd neighbour's ``lo`` after
        it (columns c + 4 (l % 4 / 2) ..); the odd lane takes its even neighbour's ``hi`` before its
        own (columns c + 8 + 4 (l % 4 / 2) ..). One 32-bit shuffle per word of a run."""
        i32 = ir.IntegerType.get_signless(32)
        elem = ir.VectorType(lo.type).element_type
        words = 2 * type_bits(elem) // 32
        word_t = vector_type([words], i32)
        with em.loc, em.ip:
            w_lo = vector.BitCastOp(word_t, lo).result
            w_hi = vector.BitCastOp(word_t, hi).result
            send = arith.SelectOp(odd, w_lo, w_hi).result
            off = arith.ConstantOp(i32, 1).result
            width = arith.ConstantOp(i32, self.plan.wave_size).result
            got = [
                gpu.ShuffleOp(vector.ExtractOp(send, [], [t]).result, off, width, gpu.ShuffleMode.XOR).results[0]
                for t in range(words)
            ]
            got = vector.FromElementsOp(word_t, got).result
            first = arith.SelectOp(odd, got, w_lo).result
            second = arith.SelectOp(odd, w_hi, got).result
            both = [vector.ExtractOp(v, [], [t]).result for v in (first, second) for t in range(words)]
            four = vector.FromElementsOp(vector_type([2 * words], i32), both).result
            return vector.BitCastOp(vector_type([4], elem), four).result

    def _erase_old(self) -> None:
        m = self.m
        old_yield = [o.operation for o in m.loop.regions[0].blocks[0].operations][-1]
        doomed = [m.out_write, old_yield, m.contract]
        doomed += [o.ext for o in m.operands if o.ext is not None]
        doomed += [m.a.read, m.b.read]
        for opd in m.operands:
            doomed += [opd.copy_write, opd.copy_read]
        doomed += self.script_barriers
        doomed += self.erase
        for op in doomed:
            op.erase()
        m.loop.erase()
        for opd in m.operands:
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


def workgroup_id_ops(func: ir.Operation) -> dict:
    """The function's ``hal.interface.workgroup.id`` ops by dimension (0: x, 1: y, 2: z)."""
    olds: dict = {0: [], 1: [], 2: []}
    for op in ops_named(func, "hal.interface.workgroup.id"):
        olds[ir.IntegerAttr(op.attributes["dimension"]).value].append(op)
    return olds


def raster_tile(em: Emitter, lin, gx, gy, group: int):
    """(tile row, tile column) of the ``lin``-th tile in groups of ``group`` tile rows walked
    column by column (``Rewriter._raster_workgroups``); ``gx`` / ``gy``: tiles along N / M (index
    values or ints); ``lin`` an index value or a function making one (after the group size)."""
    per_group = em.mul(gx, group) if isinstance(gx, ir.Value) else em.const(gx * group)
    lin = lin() if callable(lin) else lin
    gy = gy if isinstance(gy, ir.Value) else em.const(gy)
    first = em.mul(em.div(lin, per_group), group)
    size = em.min_index(em.sub(gy, first), group)
    within = em.rem(lin, per_group)
    return em.add(first, em.rem(within, size)), em.div(within, size)


def unroll_loop(loop: ir.Operation, factor: int) -> None:
    """Unroll ``loop`` in place by ``factor`` (``transform_scripts/unroll_k_loop.mlir``: upstream
    loopUnrollByFactor, a remainder loop after it where the trip count may not divide; the
    loop's results are the remainder's then). AMD's ring of S >= 3 stages carries S - 2 K tiles
    round the loop in registers; unrolled by S - 1, each tile's registers stay where its loads
    put them (a carried tile would be copied at the back edge, and the copy waits for the loads
    in the iteration that issued them)."""
    script = parse_module(
        resources.files("mmaflow.transform_scripts").joinpath("unroll_k_loop.mlir").read_text(),
        loop.context,
        source="transform_scripts/unroll_k_loop.mlir",
    )
    (unroll,) = ops_named(script.operation, "transform.loop.unroll")
    (entry,) = ops_named(script.operation, "transform.named_sequence")
    with loop.context:
        unroll.attributes["factor"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), factor)
    try:
        interpreter.apply_named_sequence(loop, entry, script)
    except (ValueError, ir.MLIRError) as e:
        raise _fail(f"unrolling the K loop by {factor} failed: {e}", loop) from None


def finalize(module: ir.Module, func: ir.Operation, plan) -> None:
    """Canonicalize, CSE, lower affine; check that nothing of the script's vector IR is left;
    record what the ISA must show (``verify.check_isa``); drop the applied epilogue function."""
    run_passes(
        func.parent,
        "builtin.module(func.func(canonicalize,cse,lower-affine,canonicalize,cse))",
        module.context,
        stage=NAME,
    )
    left = [
        o
        for o in walk(func)
        if o.name in ("vector.contract", "vector.transfer_read", "vector.transfer_write")
        or o.name.startswith("linalg.")
        or o.name.startswith("affine.")
    ]
    if left:
        raise _fail(f"{left[0].name} survived distribution", left[0])
    attrs.write_expect(func, plan.expectations())
    efunc = epilogue_function(func.parent)
    if efunc is not None:  # applied in registers by Rewriter._distribute_epilogue
        efunc.erase()


def prepare(func: ir.Operation, intr, cfg, target, problem) -> tuple[Match, dict]:
    """The script's ops matched in ``func`` and the extents of its memrefs: what every
    script-based family's plan starts from. Call inside the module's context."""
    m = match(func, intr, cfg, target.vendor)
    return m, _memref_extents(m, problem, cfg)


def output_extents(m: Match, mem_extents: dict):
    """The extents of the output memref the accumulators are written to."""
    return mem_extents[_transfer_parts(m.out_write)[0]][1]


def distribute_matmul(module: ir.Module, func: ir.Operation) -> KernelPlan:
    """The mma.sync / WMMA / MFMA kernel: plan ``func`` (``plan.plan_kernel``) and rewrite it in
    place (``Rewriter``); returns the plan it followed."""
    target, cfg, problem = read_target(func), attrs.read_config(func), attrs.read_problem(func)
    with module.context, ir.Location.unknown():
        m, mem_extents = prepare(func, target.intrinsic(cfg.intrinsic), cfg, target, problem)
        a, b = operand_facts(m, mem_extents)
        plan = plan_kernel(problem, cfg, target, a, b, output_extents(m, mem_extents))
        Rewriter(func, m, plan, mem_extents).run()
        finalize(module, func, plan)
    return plan
