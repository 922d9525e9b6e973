"""Op builders for per-lane (SIMT) code, used by the `distribute` stage.

One place decides which op a memory access or a matrix multiply becomes on each vendor:

    global load/store  AMD: amdgpu.raw_buffer_load/store (boundsCheck)   NVIDIA: vector.load/store
    LDS load/store     vector.load/store on memref<..., #gpu.address_space<workgroup>>
    4/6-bit data       held in i8 memrefs (``packed_memref_type``: no sub-byte memref reaches
                       IREE's lowering); an access names elements, moves whole bytes and
                       ``vector.bitcast``s them (element 0 in the low bits)
    matrix multiply    amdgpu.wmma | amdgpu.mfma | nvgpu.mma.sync (from the intrinsic record)
    barrier            AMD: amdgpu.lds_barrier                            NVIDIA: gpu.barrier
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import amdgpu, arith, gpu, llvm, nvvm, scf, vector
from iree.compiler.dialects import memref as memref_d

from mmaflow.compiler.target.intrinsics import Intrinsic
from mmaflow.compiler.target.targets import Vendor


def element_type(name: str) -> ir.Type:
    return ir.Type.parse(name)


def vector_type(shape, elem: ir.Type) -> ir.VectorType:
    return ir.VectorType.get(list(shape), elem)


def packed_bits(t: ir.Type) -> int | None:
    """The width of a 4- or 6-bit element type, None for any wider one."""
    bits = type_bits(t)
    return bits if bits < 8 else None


def packed_memref_type(shape, elem: ir.Type, **kw) -> ir.MemRefType:
    """The memref holding ``shape`` elements of ``elem``: itself, or for a 4/6-bit ``elem`` the i8
    memref of the same bytes (the last dimension packed: two fp4 or i4 a byte, four fp6 in three).
    ``kw`` goes to ``MemRefType.get`` (layout, memory_space)."""
    bits = packed_bits(elem)
    if bits is None:
        return ir.MemRefType.get(list(shape), elem, **kw)
    last = shape[-1]
    if not ir.ShapedType.is_dynamic_size(last):
        if last * bits % 8:
            raise ValueError(f"{last} {elem} values are not a whole number of bytes")
        last = last * bits // 8
    return ir.MemRefType.get(list(shape[:-1]) + [last], ir.IntegerType.get_signless(8), **kw)


class Emitter:
    """Builds ops at an insertion point. Integer arithmetic is on ``index`` unless stated."""

    def __init__(self, ip: ir.InsertionPoint, loc: ir.Location, vendor: str, *, source: ir.Location | None = None):
        self.ip, self.loc, self.vendor = ip, loc, vendor
        self.source = source or loc  # the user's location the generated ops derive from
        self.index = ir.IndexType.get()

    def at(self, ip: ir.InsertionPoint) -> "Emitter":
        return Emitter(ip, self.loc, self.vendor, source=self.source)

    def named(self, tag: str) -> "Emitter":
        """The same insertion point, ops located as ``loc("mmaflow.<tag>"(<source location>))``,
        so that dumps and the lane executor's reports name the generated piece."""
        with self.source.context:
            loc = ir.Location.name(f"mmaflow.{tag}", childLoc=self.source)
        return Emitter(self.ip, loc, self.vendor, source=self.source)

    def create(self, name: str, operands=(), results=(), attributes=None) -> ir.Operation:
        """A generic op by name (NVVM / LLVM ops without Python builders); string attributes are parsed."""
        with self.loc, self.ip:
            return ir.Operation.create(
                name,
                results=list(results),
                operands=list(operands),
                attributes={
                    k: (ir.Attribute.parse(v) if isinstance(v, str) else v) for k, v in (attributes or {}).items()
                },
            )

    # ---- scalars -----------------------------------------------------------------------------
    def const(self, value: int) -> ir.Value:
        with self.loc, self.ip:
            return arith.ConstantOp(self.index, value).result

    def _bin(self, op, a, b):
        with self.loc, self.ip:
            return op(a, b).result

    def add(self, *vals) -> ir.Value:
        """Sum of index values and Python ints (constants folded on the Python side)."""
        const = sum(v for v in vals if isinstance(v, int))
        terms = [v for v in vals if not isinstance(v, int)]
        if const or not terms:
            terms.append(self.const(const))
        out = terms[0]
        for t in terms[1:]:
            out = self._bin(arith.AddIOp, out, t)
        return out

    def mul(self, a: ir.Value, k) -> ir.Value:
        """a * k; k a Python int or an index value (likewise div and rem, unsigned)."""
        if isinstance(k, int):
            return a if k == 1 else self._bin(arith.MulIOp, a, self.const(k))
        return self._bin(arith.MulIOp, a, k)

    def div(self, a: ir.Value, k) -> ir.Value:
        if isinstance(k, int):
            return a if k == 1 else self._bin(arith.DivUIOp, a, self.const(k))
        return self._bin(arith.DivUIOp, a, k)

    def rem(self, a: ir.Value, k) -> ir.Value:
        return self._bin(arith.RemUIOp, a, self.const(k) if isinstance(k, int) else k)

    def i32(self, a: ir.Value) -> ir.Value:
        with self.loc, self.ip:
            return arith.IndexCastOp(ir.IntegerType.get_signless(32), a).result

    def lane_part(self, layout, lane: ir.Value, axis: str) -> ir.Value:
        """The lane-dependent part of a row (``axis`` ROW) or column index of ``layout`` (a
        ``target.layout.Layout``) for lane ``lane``: the sum of its lane terms on that axis."""
        terms = [
            self.mul(self.rem(self.div(lane, div), size), stride)
            for _, div, size, ax, stride in layout.lane_terms()
            if ax == axis
        ]
        return self.add(*terms) if terms else self.const(0)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self._bin(arith.SubIOp, a, b)

    def min_index(self, a: ir.Value, b) -> ir.Value:
        """Unsigned minimum (index values here are never negative)."""
        return self._bin(arith.MinUIOp, a, self.const(b) if isinstance(b, int) else b)

    def table(self, values: list[int], index: ir.Value) -> ir.Value:
        """values[index] for an index value known to lie in range (a select chain over the
        constants; none when they are all equal)."""
        out = self.const(values[0])
        for i, v in enumerate(values[1:], start=1):
            if v != values[0]:
                out = self.select(self.eq(index, i), self.const(v), out)
        return out

    def eq(self, a: ir.Value, b) -> ir.Value:
        """a == b as an i1; b an int or an index value."""
        with self.loc, self.ip:
            return arith.CmpIOp(arith.CmpIPredicate.eq, a, self.as_index(b)).result

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        with self.loc, self.ip:
            return arith.SelectOp(cond, a, b).result

    def as_index(self, v) -> ir.Value:
        """An index value from a Python int or an ir.Value."""
        return self.const(v) if isinstance(v, int) else v

    def lt(self, a: ir.Value, b) -> ir.Value:
        """a < b (unsigned) as an i1; b an int or an index value."""
        with self.loc, self.ip:
            return arith.CmpIOp(arith.CmpIPredicate.ult, a, self.as_index(b)).result

    def and_(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self._bin(arith.AndIOp, a, b)

    def or_(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self._bin(arith.OrIOp, a, b)

    def masked_or(self, words: ir.Value, mask: int, fill: int) -> ir.Value:
        """``(words & mask) | fill`` on a vector of i32, one instruction a word. NVIDIA: ``lop3.b32``
        (LUT 0xEA) as inline PTX, which ptxas does not form from an ``and`` and an ``or`` of two
        immediates; AMD: the ``and`` and the ``or``, which LLVM makes one ``v_and_or_b32`` on RDNA
        and two VOP2s on CDNA (gfx9's VOP3 takes no literal)."""
        i32 = ir.IntegerType.get_signless(32)
        vt = ir.VectorType(words.type)

        def const(v):
            return ir.IntegerAttr.get(i32, v - (1 << 32) if v >= 1 << 31 else v)

        if self.vendor is not Vendor.NVIDIA:
            with self.loc, self.ip:
                m, b = self.splat_const(vt, const(mask)), self.splat_const(vt, const(fill))
                return arith.OrIOp(arith.AndIOp(words, m).result, b).result
        with self.loc, self.ip:
            m, b = (arith.ConstantOp(i32, const(v)).result for v in (mask, fill))
        out = []
        for i in range(vt.shape[0]):
            w = self.extract(words, i)
            with self.loc, self.ip:
                out.append(llvm.InlineAsmOp(i32, [w, m, b], "lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,r,r").result)
        return self.from_elements(vt, out)

    # ---- vectors -----------------------------------------------------------------------------
    def splat_const(self, vtype: ir.VectorType, attr: ir.Attribute) -> ir.Value:
        with self.loc, self.ip:
            return arith.ConstantOp(vtype, ir.DenseElementsAttr.get_splat(vtype, attr)).result

    def zero_vector(self, vtype: ir.VectorType) -> ir.Value:
        e = vtype.element_type
        zero = ir.IntegerAttr.get(e, 0) if isinstance(e, ir.IntegerType) else ir.FloatAttr.get(e, 0.0)
        return self.splat_const(vtype, zero)

    def add_values(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """a + b of two float or integer values (vectors or scalars) of one type."""
        t = a.type
        elem = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
        return self._bin(arith.AddIOp if isinstance(elem, ir.IntegerType) else arith.AddFOp, a, b)

    def concat(self, parts: list[ir.Value]) -> ir.Value:
        """1-D vectors of one element type, one after another."""
        elem = ir.VectorType(parts[0].type).element_type
        sizes = [ir.VectorType(p.type).shape[0] for p in parts]
        out = self.zero_vector(vector_type([sum(sizes)], elem))
        at = 0
        for p, size in zip(parts, sizes):
            out = self.insert_slice(p, out, at)
            at += size
        return out

    def extract(self, v: ir.Value, pos: int) -> ir.Value:
        with self.loc, self.ip:
            return vector.ExtractOp(v, static_position=[pos], dynamic_position=[]).result

    def broadcast(self, scalar: ir.Value, vtype: ir.VectorType) -> ir.Value:
        with self.loc, self.ip:
            return vector.BroadcastOp(vtype, scalar).result

    def from_elements(self, vtype: ir.VectorType, elems: list[ir.Value]) -> ir.Value:
        with self.loc, self.ip:
            return vector.FromElementsOp(vtype, elems).result

    def insert_slice(self, part: ir.Value, into: ir.Value, offset: int) -> ir.Value:
        with self.loc, self.ip:
            return vector.InsertStridedSliceOp(part, into, [offset], [1]).result

    def extract_slice(self, v: ir.Value, offset, length) -> ir.Value:
        """``length`` elements from ``offset`` (ints, or one per leading dimension)."""
        vt = ir.VectorType(v.type)
        offs = [offset] if isinstance(offset, int) else list(offset)
        sizes = [length] if isinstance(length, int) else list(length)
        with self.loc, self.ip:
            return vector.ExtractStridedSliceOp(
                vector_type(sizes + list(vt.shape[len(sizes) :]), vt.element_type), v, offs, sizes, [1] * len(sizes)
            ).result

    def shape_cast(self, v: ir.Value, shape) -> ir.Value:
        vt = ir.VectorType(v.type)
        if list(vt.shape) == list(shape):
            return v
        with self.loc, self.ip:
            return vector.ShapeCastOp(vector_type(shape, vt.element_type), v).result

    def convert(self, v: ir.Value, to: ir.Type, signed: bool = True) -> ir.Value:
        """Element-type conversion of a vector (the matmul's output type != accumulator type)."""
        vt = ir.VectorType(v.type)
        src = vt.element_type
        if src == to:
            return v
        out_t = vector_type(vt.shape, to)
        sf, tf = isinstance(src, ir.FloatType), isinstance(to, ir.FloatType)
        with self.loc, self.ip:
            if sf and tf:
                wide = ir.FloatType(src).width < ir.FloatType(to).width
                if not wide and self.vendor is Vendor.NVIDIA and isinstance(to, ir.BF16Type):
                    # IREE 3.13 expands arith.truncf to bf16 into integer rounding (about seven
                    # instructions an element, PTX); llvm.fptrunc (round to nearest even, as
                    # arith.truncf) is left to the NVPTX backend: one cvt.rn.bf16x2.f32 a pair.
                    return llvm.FPTruncOp(out_t, v).result
                return (arith.ExtFOp if wide else arith.TruncFOp)(out_t, v).result
            if not sf and not tf:
                wide = ir.IntegerType(src).width < ir.IntegerType(to).width
                return ((arith.ExtSIOp if signed else arith.ExtUIOp) if wide else arith.TruncIOp)(out_t, v).result
            if sf:
                return arith.FPToSIOp(out_t, v).result
            return (arith.SIToFPOp if signed else arith.UIToFPOp)(out_t, v).result

    # ---- memory ------------------------------------------------------------------------------
    @staticmethod
    def _align(vtype: ir.VectorType) -> int:
        """Bytes of alignment the access may assume: its own size, up to 16 (power of two).

        The distribution only emits accesses whose start is a multiple of their length (chunks
        of the tile, LDS rows padded to 16 bytes), so this is a fact, not a hope.
        """
        vtype = ir.VectorType(vtype)
        nbytes = vtype.shape[0] * type_bits(vtype.element_type) // 8
        align = 1
        while align * 2 <= min(16, nbytes) and nbytes % (align * 2) == 0:
            align *= 2
        return align

    def byte_of(self, v, bits: int):
        """The byte at which packed value ``v`` (an index value or int) of a ``bits``-wide type
        starts: v * bits / 8 (the callers' values start on whole bytes)."""
        if isinstance(v, int):
            return v * bits // 8
        return self.div(v, 8 // bits) if 8 % bits == 0 else self.div(self.mul(v, bits), 8)

    def _bytes(self, mem: ir.Value, idx: list[ir.Value], vtype: ir.VectorType):
        """An access of ``vtype`` at element indices ``idx`` as the access of ``mem``'s own type:
        unchanged, or for 4/6-bit elements in an i8 memref the bytes they occupy (the last index
        scaled; the callers' runs start on whole bytes) and their count."""
        vtype = ir.VectorType(vtype)
        bits = packed_bits(vtype.element_type)
        if bits is None or ir.MemRefType(mem.type).element_type == vtype.element_type:
            return idx, vtype
        n = vtype.shape[-1] * bits
        if len(vtype.shape) != 1 or n % 8:
            raise ValueError(f"{vtype} is not a whole number of bytes")
        return list(idx[:-1]) + [self.byte_of(idx[-1], bits)], vector_type([n // 8], ir.IntegerType.get_signless(8))

    def bitcast(self, val: ir.Value, vtype: ir.VectorType) -> ir.Value:
        """``val``'s bits as ``vtype`` (``vector.bitcast``; ``val`` itself where it has that type)."""
        if val.type == vtype:
            return val
        with self.loc, self.ip:
            return vector.BitCastOp(vtype, val).result

    def _unpack(self, raw: ir.Value, vtype: ir.VectorType) -> ir.Value:
        return self.bitcast(raw, vtype)

    def _pack(self, val: ir.Value, btype: ir.VectorType) -> ir.Value:
        return self.bitcast(val, btype)

    def global_load(self, mem: ir.Value, idx: list[ir.Value], vtype: ir.VectorType) -> ir.Value:
        idx, btype = self._bytes(mem, idx, vtype)
        with self.loc, self.ip:
            if self.vendor is Vendor.AMD:
                raw = amdgpu.RawBufferLoadOp(btype, mem, [self.i32(i) for i in idx], boundsCheck=True).result
            else:
                raw = vector.LoadOp(btype, mem, idx, alignment=self._align(btype)).result
        return self._unpack(raw, vtype)

    def global_store(self, val: ir.Value, mem: ir.Value, idx: list[ir.Value]) -> None:
        idx, btype = self._bytes(mem, idx, val.type)
        val = self._pack(val, btype)
        with self.loc, self.ip:
            if self.vendor is Vendor.AMD:
                amdgpu.RawBufferStoreOp(val, mem, [self.i32(i) for i in idx], boundsCheck=True)
            else:
                vector.StoreOp(val, mem, idx, alignment=self._align(ir.VectorType(val.type)))

    def in_bounds(self, idx: list[ir.Value], limits) -> ir.Value | None:
        """i1: every index below its limit (None: unbounded; an int or an index value); None when
        nothing is bounded."""
        valid = None
        for v, lim in zip(idx, limits):
            if lim is not None:
                ok = self.lt(v, lim)
                valid = ok if valid is None else self.and_(valid, ok)
        return valid

    def _extent0(self, mem: ir.Value, extent0):
        """The first dim's extent: ``extent0`` when given, else the memref's (``memref.dim`` when it is
        dynamic: a run-time key length stored outermost)."""
        if extent0 is not None:
            return extent0
        size = ir.MemRefType(mem.type).shape[0]
        if ir.ShapedType.is_dynamic_size(size):
            with self.loc, self.ip:
                return memref_d.DimOp(mem, self.const(0)).result
        return size

    def bounded_global_load(
        self, mem: ir.Value, idx: list[ir.Value], vtype: ir.VectorType, limits, extent0=None
    ) -> ir.Value:
        """A global load that reads 0 where an index is at or past its limit (the true extent of
        a dimension whose tiles overhang). AMD: the first index is pushed to its extent
        (``extent0``, an int or index value; the memref's when static), past the buffer's end,
        and the raw buffer bounds check returns 0 -- no mask. NVIDIA: the indices are clamped to
        0 and the value selected."""
        valid = self.in_bounds(idx, limits)
        if valid is None:
            return self.global_load(mem, idx, vtype)
        if self.vendor is Vendor.AMD:
            pushed = self.select(valid, idx[0], self.as_index(self._extent0(mem, extent0)))
            return self.global_load(mem, [pushed] + list(idx[1:]), vtype)
        zero = self.const(0)
        val = self.global_load(mem, [self.select(valid, x, zero) for x in idx], vtype)
        return self.select(valid, val, self.zero_vector(vtype))

    def bounded_global_store(self, val: ir.Value, mem: ir.Value, idx: list[ir.Value], limits, extent0=None) -> None:
        """A global store dropped where an index is at or past its limit: AMD sends it past the
        buffer's end (the bounds check drops it), NVIDIA skips it (scf.if)."""
        valid = self.in_bounds(idx, limits)
        if valid is None:
            self.global_store(val, mem, idx)
        elif self.vendor is Vendor.AMD:
            pushed = self.select(valid, idx[0], self.as_index(self._extent0(mem, extent0)))
            self.global_store(val, mem, [pushed] + list(idx[1:]))
        else:
            self.if_then(valid).global_store(val, mem, idx)

    def lds_load(self, mem: ir.Value, idx: list[ir.Value], vtype: ir.VectorType) -> ir.Value:
        idx, btype = self._bytes(mem, idx, vtype)
        with self.loc, self.ip:
            raw = vector.LoadOp(btype, mem, idx, alignment=self._align(btype)).result
        return self._unpack(raw, vtype)

    def lds_store(self, val: ir.Value, mem: ir.Value, idx: list[ir.Value]) -> ir.Operation:
        idx, btype = self._bytes(mem, idx, val.type)
        val = self._pack(val, btype)
        with self.loc, self.ip:
            return vector.StoreOp(val, mem, idx, alignment=self._align(ir.VectorType(val.type))).operation

    def ldmatrix(
        self, mem: ir.Value, idx: list[ir.Value], num_tiles: int, vtype: ir.VectorType, transpose: bool = False
    ) -> ir.Value:
        """nvgpu.ldmatrix (PTX ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16): a warp-wide LDS load."""
        with self.loc, self.ip:
            i32 = ir.IntegerType.get_signless(32)
            return ir.Operation.create(
                "nvgpu.ldmatrix",
                results=[vtype],
                operands=[mem] + list(idx),
                attributes={"numTiles": ir.IntegerAttr.get(i32, num_tiles), "transpose": ir.BoolAttr.get(transpose)},
            ).result

    def async_copy(
        self,
        src: ir.Value,
        src_idx: list[ir.Value],
        dst: ir.Value,
        dst_idx: list[ir.Value],
        n: int,
        valid: ir.Value | None,
        zeroed: list[int] | None = None,
        bypass_l1: bool = False,
    ) -> ir.Value:
        """nvgpu.device_async_copy: ``n`` elements global -> shared. By default PTX cp.async.ca,
        through L1: for the mma.sync kernel's padded tiles on the H100 the L1-bypassing form
        (cp.async.cg) cost 10.5 shared-memory wavefronts per 16-byte copy instead of 4, and
        4096^3 / 8192^3 ran 404 / 431 TFLOP/s with it against 422 / 456 without (docs/PERFORMANCE.md,
        Tried, did not pay). ``bypass_l1`` (``bypassL1``, cp.async.cg 16 bytes) is the wgmma
        kernel's: its 128B-swizzled slots take whole lines, and there .ca measured 558 / 578 TFLOP/s
        against .cg's 650 / 663 on the H100. ``valid`` false: 0 source elements (the chunk is
        zero-filled, nothing is read) from index 0 in the positions ``zeroed`` (default: all; the
        others must then be in range whatever ``valid`` is). Returns the copy's token."""
        src_elems = []
        if valid is not None:
            zero = self.const(0)
            pos = range(len(src_idx)) if zeroed is None else zeroed
            src_idx = [self.select(valid, x, zero) if i in pos else x for i, x in enumerate(src_idx)]
            src_elems = [self.select(valid, self.const(n), zero)]
        attrs = {
            "dstElements": ir.IntegerAttr.get(ir.IndexType.get(), n),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, len(dst_idx), 1, len(src_idx), len(src_elems)]),
        }
        if bypass_l1:
            attrs["bypassL1"] = ir.UnitAttr.get()
        with self.loc, self.ip:
            return ir.Operation.create(
                "nvgpu.device_async_copy",
                results=[ir.Type.parse("!nvgpu.device.async.token")],
                operands=[dst, *dst_idx, src, *src_idx, *src_elems],
                attributes=attrs,
            ).result

    def async_group(self, tokens: list[ir.Value]) -> ir.Value:
        """nvgpu.device_async_create_group (cp.async.commit_group) of this thread's copies."""
        with self.loc, self.ip:
            return ir.Operation.create(
                "nvgpu.device_async_create_group", results=[ir.Type.parse("!nvgpu.device.async.token")], operands=tokens
            ).result

    def async_wait(self, token: ir.Value, pending: int) -> None:
        """nvgpu.device_async_wait (cp.async.wait_group N): all but the ``pending`` most recent
        groups of this thread's copies have landed. The token orders the op after a group's
        creation; the hardware waits on the count alone."""
        with self.loc, self.ip:
            ir.Operation.create(
                "nvgpu.device_async_wait",
                operands=[token],
                attributes={"numGroups": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), pending)},
            )

    def alloc_lds(self, shape, elem: ir.Type) -> ir.Value:
        space = ir.Attribute.parse("#gpu.address_space<workgroup>")
        mtype = packed_memref_type(list(shape), elem, memory_space=space)
        with self.loc, self.ip:
            return memref_d.AllocOp(mtype, [], [], alignment=16).result

    def barrier(self) -> ir.Operation:
        with self.loc, self.ip:
            if self.vendor is Vendor.AMD:
                return amdgpu.LDSBarrierOp().operation
            return gpu.BarrierOp().operation

    def sched_barrier(self) -> ir.Operation:
        """AMD: ``amdgpu.sched_barrier allow = none``, no instruction scheduled across it (LLVM's
        scheduler would otherwise sink prefetched fragment reads next to their uses)."""
        assert self.vendor is Vendor.AMD
        with self.loc, self.ip:
            return amdgpu.SchedBarrierOp(ir.Attribute.parse("#rocdl.sched_group_mask<none>")).operation

    def thread_id(self) -> ir.Value:
        with self.loc, self.ip:
            return gpu.ThreadIdOp(gpu.Dimension.x).result

    def cluster_sync(self) -> None:
        """``barrier.cluster.arrive`` + ``wait`` by every thread (release / acquire at cluster scope)."""
        with self.loc, self.ip:
            nvvm.ClusterArriveOp(aligned=True)
            nvvm.ClusterWaitOp(aligned=True)

    def if_then(self, cond: ir.Value) -> "Emitter":
        """Emit scf.if without results; return an emitter inside its then-block."""
        with self.loc, self.ip:
            op = scf.IfOp(cond)
        with self.loc, ir.InsertionPoint(op.then_block):
            yield_op = scf.YieldOp([])
        return self.at(ir.InsertionPoint(yield_op))  # insert before the yield

    # ---- matrix instructions -----------------------------------------------------------------
    def mma(self, intr: Intrinsic, a: ir.Value, b: ir.Value, c: ir.Value, scales=None) -> ir.Value:
        """D = A x B + C with ``intr``; a block-scaled one (``amdgpu.scaled_mfma``) takes
        ``scales``: each lane's E8M0 scale of A and of B (scalars, byte 0)."""
        with self.loc, self.ip:
            if intr.op == "amdgpu.scaled_mfma":
                sa, sb = scales
                return amdgpu.ScaledMFMAOp(intr.m, intr.n, intr.k, a, b, c, sa, sb, 0, 0).result
            if intr.op == "amdgpu.wmma":
                kwargs = {}
                if intr.a_type in ("i8", "i4"):
                    kwargs = dict(unsignedA=intr.unsigned_a, unsignedB=intr.unsigned_b)
                if intr.family == "wmma_rdna3" and intr.c_type in ("f16", "bf16"):
                    kwargs["subwordOffset"] = 0
                return amdgpu.WMMAOp(intr.m, intr.n, intr.k, a, b, c, **kwargs).result
            if intr.op == "amdgpu.mfma":
                a, b = (self._scalar_of_one(v) for v in (a, b))  # (f32 MFMA: one element a lane, a scalar)
                return amdgpu.MFMAOp(
                    intr.m,
                    intr.n,
                    intr.k,
                    a,
                    b,
                    c,
                    blocks=1,
                    cbsz=0,
                    abid=0,
                    blgp=ir.Attribute.parse("#rocdl.mfma_perm_b<none>"),
                    reducePrecision=intr.reduced_precision or None,
                ).result
            assert intr.op == "nvgpu.mma.sync", intr.op
            shape = ir.ArrayAttr.get(
                [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d) for d in (intr.m, intr.n, intr.k)]
            )
            return ir.Operation.create(
                "nvgpu.mma.sync", results=[c.type], operands=[a, b, c], attributes={"mmaShape": shape}
            ).result

    def _scalar_of_one(self, v: ir.Value) -> ir.Value:
        """``v`` itself, or its element where it is a vector of one (``amdgpu.mfma`` takes f32 and
        f64 operands as scalars)."""
        if not isinstance(v.type, ir.VectorType) or ir.VectorType(v.type).shape != [1]:
            return v
        return vector.ExtractOp(v, [], [0]).result


def type_bits(t: ir.Type) -> int:
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width
    return ir.FloatType(t).width
