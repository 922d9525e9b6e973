"""TMA primitives shared by the kernels that copy by tensor maps (``kernels/wgmma/tma.py``'s matmul
ring, ``kernels/attention/hopper.py``'s producer): building a map on the device, the per-SM map
slots in a module global, mbarrier waits, and the register split of a producer warpgroup.

The maps' life (docs/kernels/hopper_wgmma.md, "TMA"): thread 0 builds each map with
``tensormap.replace`` on 128 zero bytes of shared memory, warp 0 copies it to this SM's slot of a
module-level ``memref.global`` with ``tensormap.cp_fenceproxy`` (inline PTX: IREE 3.13 has no NVVM op
for it), and each issuing thread acquires it (``fence.proxy.tensormap``) before its first copy. A
slot per SM is race-free only while no two blocks of the kernel share an SM: the kernel allocates
at least ``ONE_BLOCK_PER_SM`` bytes of shared memory.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, llvm, memref, nvvm, scf

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.target.limits import REGISTER_GRANULE, SHARED_RESERVED_PER_BLOCK, SM_REGISTERS, SM_SHARED_BYTES

BOX_LIMIT = 256  # cuTensorMapEncodeTiled: boxDim[i] <= 256 (PTX ISA "Tensor-map": bounding box)
STRIDE_LIMIT = 1 << 40  # globalStrides[i] < 2^40 bytes, multiples of 16
ADDRESS_ALIGN = 16  # the global address of a non-interleaved map: 16-byte aligned
MAP_BYTES = 128  # a tensor map (CUtensorMap) is 128 bytes, 64-byte aligned; the kernels use 128
MAP_SLOTS = 1024  # per-SM slots of the maps global (%smid < 1024 on every Hopper part)
# A block of more than half of (228 KB - 2 x 1 KB) cannot share an SM with another such
# (``target/limits.py``: shared memory per SM and reserved per block).
ONE_BLOCK_PER_SM = (SM_SHARED_BYTES // 2 - SHARED_RESERVED_PER_BLOCK) + 16
WAIT_TICKS_NS = 1000  # mbarrier.try_wait suspend-time hint per attempt
WAIT_LIMIT = 1 << 22  # attempts before the kernel traps instead of hanging (each suspends at most WAIT_TICKS_NS)
# #nvvm.tensormap_elemtype<...>: fp8 travels as bytes (the copy moves bits; no fp8 elemtype exists)
ELEMTYPES = {"f16": "f16", "bf16": "bf16", "f8E4M3FN": "u8", "f8E5M2": "u8"}
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f8E4M3FN": 1, "f8E5M2": 1}
TMA_TARGET_PTX = 83  # tensormap.replace, fence.proxy.tensormap: PTX ISA 8.3
CP_FENCEPROXY = (
    "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;"
)


# setmaxnreg (PTX ISA "setmaxnreg"): 24..256, multiples of 8. The registers come from a per-CTA
# pool, what the CTA got at launch: every thread the kernel's register count. With .maxntid and
# .minnctapersm 1 (hand_back's nvvm.minctasm) ptxas sets it to the most that fits the SM
# (SM_REGISTERS / threads, in the allocation's multiples of 8: 168 for 384 threads, 96 for 640)
# when a warpgroup raises its count to at least that; a kernel whose counts all stay below gets
# a count ptxas chooses (154 for 384 threads with an .inc to 104: never here, since
# consumer_share refuses a share below the launch count). An .inc blocks until the pool has the
# registers, so the warpgroups' counts must sum within the pool, not the SM's 64K: 640 threads
# asking 4 x 112 + 40 per thread (62464 > 61440) hung on the H100 until the mbarrier waits trapped.
# The producer keeps PRODUCER_REGISTERS, the MMA warpgroups share the rest.
PRODUCER_REGISTERS = 40


def launch_registers(threads: int) -> int:
    """Per-thread registers a CTA of ``threads`` gets at launch when its consumer warpgroups ask
    for at least that many (ptxas's count from .maxntid, allocated in multiples of 8: at most 256,
    ptxas's 255 included)."""
    return min(256, SM_REGISTERS // threads) // REGISTER_GRANULE * REGISTER_GRANULE


def consumer_share(warpgroups: int, producer: int) -> int:
    """setmaxnreg's count for each of ``warpgroups`` consumer warpgroups beside one producer
    warpgroup of ``producer`` registers a thread: what the CTA's launch pool leaves them (above,
    at PRODUCER_REGISTERS: why the pool and not the SM)."""
    threads = 128 * (warpgroups + 1)
    launch = launch_registers(threads)
    per = (threads * launch - 128 * producer) // (128 * warpgroups)
    per = min(256, per // REGISTER_GRANULE * REGISTER_GRANULE)
    if per < launch:  # ptxas would then launch with a count of its own choosing: the pool is not known
        raise UnsupportedError(
            f"{warpgroups} MMA warpgroups: their register share, {per} per thread, is below the "
            f"{launch} every thread launches with: the setmaxnreg split does not apply"
        )
    return per


def _ptr(space: int | None) -> ir.Type:
    return ir.Type.parse("!llvm.ptr" if space is None else f"!llvm.ptr<{space}>")


class TmaEmitter:
    """Builders for TMA kernels, at an ``Emitter``'s insertion point (the subclasses keep their
    kernel's plan and state); ``_wait_ticks`` is the try_wait hint (a test knob)."""

    _wait_ticks = WAIT_TICKS_NS

    def __init__(self):
        self.i32 = ir.IntegerType.get_signless(32)
        self.i64 = ir.IntegerType.get_signless(64)

    # small builders (at an Emitter's insertion point)
    def c32(self, em, v):
        with em.loc, em.ip:
            return arith.ConstantOp(self.i32, v).result

    def c64(self, em, v):
        with em.loc, em.ip:
            return arith.ConstantOp(self.i64, v).result

    def to64(self, em, v):
        with em.loc, em.ip:
            return arith.IndexCastOp(self.i64, v).result

    def to32(self, em, v):
        with em.loc, em.ip:
            return arith.IndexCastOp(self.i32, v).result

    def add64(self, em, a, b):
        with em.loc, em.ip:
            return arith.AddIOp(a, b if isinstance(b, ir.Value) else self.c64(em, b)).result

    def ptr(self, em, addr64, space):
        with em.loc, em.ip:
            p = llvm.IntToPtrOp(_ptr(1 if space == "generic" else space), addr64).result
            if space == "generic":  # a global address is its own generic address
                p = llvm.AddrSpaceCastOp(_ptr(None), p).result
            elif space == 7:
                p = llvm.IntToPtrOp(_ptr(3), addr64).result
                p = llvm.AddrSpaceCastOp(_ptr(7), p).result
            return p

    def maps_global(self, func: ir.Operation, top, name: str, maps_per_slot: int) -> ir.Value:
        """memref.get_global (at ``top``, an Emitter at the kernel's start) of the module's per-SM
        map slots of ``maps_per_slot`` maps each, declared once in ``func``'s inner module."""
        inner = func.parent
        n = MAP_SLOTS * maps_per_slot * MAP_BYTES // 8 + MAP_BYTES // 8  # + slack to round the address up to 128
        space = ir.Attribute.parse("#gpu.address_space<global>")
        mtype = ir.MemRefType.get([n], self.i64, memory_space=space)
        block = inner.regions[0].blocks[0]
        if not any(
            o.operation.name == "memref.global" and ir.StringAttr(o.operation.attributes["sym_name"]).value == name
            for o in block.operations
        ):
            with func.location, ir.InsertionPoint.at_block_begin(block):
                memref.GlobalOp(
                    name, mtype, sym_visibility="private", initial_value=ir.UnitAttr.get(), alignment=MAP_BYTES
                )
        with top.loc, top.ip:
            return memref.GetGlobalOp(mtype, name).result

    def sm_slot(self, em, gmem: ir.Value, maps_per_slot: int) -> tuple[ir.Value, ir.Value]:
        """(this SM's slot address in the maps global ``gmem``, rounded up to 128; %smid as i32)."""
        with em.loc, em.ip:
            gp = em.create("memref.extract_aligned_pointer_as_index", [gmem], [em.index]).result
            g = arith.IndexCastOp(self.i64, gp).result
            g = arith.AndIOp(arith.AddIOp(g, self.c64(em, MAP_BYTES - 1)).result, self.c64(em, -MAP_BYTES)).result
            smid = nvvm.read_ptx_sreg_smid(results=[self.i32])
            slot = arith.MulIOp(arith.ExtUIOp(self.i64, smid).result, self.c64(em, maps_per_slot * MAP_BYTES)).result
            return arith.AddIOp(g, slot).result, smid

    def _trap_unless(self, em, ok):
        """``llvm.intr.trap`` where ``ok`` (i1) is false: a loud error instead of a wrong result."""
        with em.loc, em.ip:
            bad = arith.XOrIOp(ok, arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result).result
            op = scf.IfOp(bad)
            with ir.InsertionPoint(op.then_block):
                llvm.Trap()
                scf.YieldOp([])

    def zero_maps(self, em, maps_sh0, count: int) -> None:
        """128 zero bytes under each of ``count`` shared maps from address ``maps_sh0`` (i64)."""
        zero = self.c64(em, 0)
        with em.loc, em.ip:
            for i in range(count * MAP_BYTES // 8):
                llvm.StoreOp(zero, self.ptr(em, self.add64(em, maps_sh0, 8 * i), 3))

    def build_map(
        self, em, mem, elem: str, box: tuple[int, int], name: str, mp, order: list[int] | None = None
    ) -> None:
        """tensormap.replace of every field of ``mem``'s map (element type ``elem``, a box of
        ``box`` elements innermost first, 1 in the outer dimensions) at shared pointer ``mp``: the
        memref's aligned pointer plus its offset, its sizes and byte strides, the 128B swizzle,
        zero fill. ``order``: the memref's dims as the map's, innermost first (default: the
        memref's own order reversed); the first must be the contiguous one."""
        rank = ir.MemRefType(mem.type).rank
        if not 2 <= rank <= 5:
            raise UnsupportedError(f"{name}: a tensor map has rank 2 to 5, the operand's memref has {rank}")
        eb = ELEMENT_BYTES[elem]
        with em.loc, em.ip:
            md = memref.ExtractStridedMetadataOp(mem)
            base = em.create("memref.extract_aligned_pointer_as_index", [mem], [em.index]).result
            addr = arith.AddIOp(
                arith.IndexCastOp(self.i64, base).result,
                arith.IndexCastOp(self.i64, arith.MulIOp(md.offset, em.const(eb)).result).result,
            ).result
            self._trap_unless(
                em,
                arith.CmpIOp(
                    arith.CmpIPredicate.eq, arith.AndIOp(addr, self.c64(em, ADDRESS_ALIGN - 1)).result, self.c64(em, 0)
                ).result,
            )
            order = list(range(rank))[::-1] if order is None else order  # innermost first
            sizes, strides = [md.sizes[i] for i in order], [md.strides[i] for i in order]

            def rep(field, value=None, ord=None, attr=None):
                nvvm.TensormapReplaceOp(
                    ir.Attribute.parse(f"#nvvm.tensormap_field<{field}>"),
                    mp,
                    new_value=value,
                    ord=ord,
                    new_value_attr=ir.Attribute.parse(attr) if attr else None,
                )

            rep("global_address", addr)
            rep("rank", self.c32(em, rank - 1))  # zero-based
            full = list(box) + [1] * (rank - 2)
            for d in range(rank):
                rep("box_dim", self.c32(em, full[d]), ord=d)
                rep("global_dim", arith.IndexCastOp(self.i32, sizes[d]).result, ord=d)
                rep("element_stride", self.c32(em, 1), ord=d)
            for d in range(1, rank):  # global_stride[d-1]: bytes between steps of dimension d
                rep(
                    "global_stride",
                    arith.IndexCastOp(self.i64, arith.MulIOp(strides[d], em.const(eb)).result).result,
                    ord=d - 1,
                )
            rep("elemtype", attr=f"#nvvm.tensormap_elemtype<{ELEMTYPES[elem]}>")
            rep("interleave_layout", attr="#nvvm.tensormap_interleave_layout<no_interleave>")
            rep("swizzle_mode", attr="#nvvm.tensormap_swizzle_mode<b128>")
            rep("fill_mode", attr="#nvvm.tensormap_fill_mode<zero>")

    def publish_maps(self, em, gmaps: list, maps_sh: list) -> None:
        """Warp 0: ``tensormap.cp_fenceproxy`` of each shared map to its global slot (release)."""
        with em.loc, em.ip:
            for gm, msh in zip(gmaps, maps_sh):
                nvvm.InlinePtxOp([], [self.ptr(em, gm, 1), self.ptr(em, msh, 3)], [], CP_FENCEPROXY, memoryClobber=True)

    def acquire_maps(self, em, gmaps: list) -> None:
        """An issuing thread: ``fence.proxy.tensormap::generic.acquire.gpu`` of each global map."""
        with em.loc, em.ip:
            for gm in gmaps:
                nvvm.FenceProxyAcquireOp(
                    ir.Attribute.parse("#nvvm.mem_scope<gpu>"), self.ptr(em, gm, "generic"), self.c32(em, MAP_BYTES)
                )

    def wait_phase(self, em, bar, parity) -> ir.Operation:
        """``mbarrier.try_wait.parity`` on ``bar`` until the phase of parity ``parity`` (an index
        value) completed, bounded (then trap); returns the wait loop."""
        ph = self.to32(em, parity)
        i1 = ir.IntegerType.get_signless(1)
        with em.loc, em.ip:
            loop = scf.WhileOp([self.i32, i1], [self.c32(em, 0), arith.ConstantOp(i1, 0).result])
            before = loop.before.blocks.append(self.i32, i1)
            with ir.InsertionPoint(before):
                n, done = before.arguments
                go = arith.AndIOp(
                    arith.CmpIOp(arith.CmpIPredicate.ult, n, arith.ConstantOp(self.i32, WAIT_LIMIT).result).result,
                    arith.XOrIOp(done, arith.ConstantOp(i1, 1).result).result,
                ).result
                scf.ConditionOp(go, [n, done])
            after = loop.after.blocks.append(self.i32, i1)
            with ir.InsertionPoint(after):
                n, _ = after.arguments
                ticks = arith.ConstantOp(self.i32, self._wait_ticks).result if self._wait_ticks else None
                ok = nvvm.MBarrierTryWaitOp(bar, ph, ticks=ticks, results=[i1]).result
                scf.YieldOp([arith.AddIOp(n, arith.ConstantOp(self.i32, 1).result).result, ok])
        self._trap_unless(em, loop.results[1])
        return loop
