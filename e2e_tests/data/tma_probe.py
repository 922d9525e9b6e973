"""Write the Hopper TMA hardware probe (issue 16, the step after the cp.async ring): can a kernel
under IREE's CUDA HAL build its own tensor map on the device with sm_90a's ``tensormap.replace``
and feed ``cp.async.bulk.tensor`` with it? (docs/kernels/hopper_wgmma.md, "TMA probe".)

    python e2e_tests/data/tma_probe.py zero > zero.mlir        # map built from zero bytes
    python e2e_tests/data/tma_probe.py template > template.mlir  # host template, address replaced
    python e2e_tests/data/tma_probe.py zero-cpfp > zero-cpfp.mlir  # zero, tensormap.cp_fenceproxy
    iree-compile zero.mlir --compile-from=executable-sources --iree-hal-target-device=cuda \\
        --iree-cuda-target=sm_90a -o zero.vmfb

Each output is a whole module at the executable-sources phase, already handed back
(``stages.hand_back.install``: no_pipeline translation_info, a constant 1x1x1 grid, minctasm, the
sm_90a variant target with features "+ptx83", which ``tensormap.replace`` and the tensor-map proxy
fences need; mmaflow's own sm_90a target keeps "+ptx80", nothing of the compiler changes). The host
program is ``@probe`` (the executable sources of a ``flow.dispatch.workgroups`` whose only job is
to give the dispatch its bindings); its dispatch body is replaced by a kernel built here with the
MLIR Python bindings. One workgroup of 128 threads.

Host signature (``(a GPU run of the probe)`` runs it):

    zero:     probe(x: tensor<256x256xf16>)                      -> (image: tensor<1024xi64>, maps: tensor<56xi64>)
    template: probe(x: tensor<256x256xf16>, tmpl: tensor<16xi64>) -> (image, maps)

The kernel:

1. Workgroup memory is one i64 buffer; IREE declares dynamic shared memory ``.align 16`` whatever
   the alloc says, so the kernel rounds its address up to 1024 itself: the TMA box at the
   1024-aligned offset (8192 B, as the 128B swizzle needs), the 128-byte tensor map right after it
   (128-aligned), the mbarrier after that.
2. The 128 map bytes in shared memory start as all zeros (``zero``: threads 0-15 store 0) or as
   the host's template (``template``: threads 0-15 copy the ``tmpl`` binding). After a barrier,
   thread 0 writes the fields with ``nvvm.tensormap.replace`` on the ``.shared::cta`` map:
   ``zero``: global_address (x's binding pointer + the subspan's byte offset), rank (1 = rank 2,
   zero-based), box_dim 64, 64, global_dim 256, 256, global_stride[0] = 512 bytes (the row pitch;
   the innermost stride is implicit), element_stride 1, 1, elemtype f16, interleave none, swizzle
   128B, fill zero; ``template``: global_address only.
3. Thread 0 copies the 128 bytes to global memory with plain loads/stores (PTX has
   ``tensormap.cp_fenceproxy`` for this, but IREE 3.13's NVVM dialect has no op for it), twice:
   to ``maps[0:16]`` (what the host reads back and compares with the driver's encoding) and to a
   128-aligned scratch copy inside ``maps[16:47]`` (the one the TMA uses); then
   ``fence.proxy.tensormap::generic.release.gpu`` and ``fence.proxy.tensormap::generic.acquire.gpu``
   on the scratch map's generic address, 128 bytes (the same thread writes and uses the map).
   ``zero-cpfp`` instead copies the scratch map the production way (as Triton's device-side
   descriptors do): barrier, then warp 0 runs ``tensormap.cp_fenceproxy.global.shared::cta.
   tensormap::generic.release.gpu.sync.aligned`` (as ``nvvm.inline_ptx``: no NVVM op or LLVM
   intrinsic exists for it in IREE 3.13), then thread 0 the acquire fence.
4. Thread 0 initialises the mbarrier (count 1) and fences the init (``fence.mbarrier_init``);
   barrier; thread 0 arms it (``mbarrier.arrive.expect_tx`` 8192 bytes) and issues one
   ``cp.async.bulk.tensor.2d`` of the 64x64 box at coordinates (64, 128) (innermost first:
   columns 64..127 of rows 128..191) into the box.
5. Every thread waits with ``mbarrier.try_wait.parity`` (phase 0, suspend-time hint 1000 ns) in
   a loop bounded at 2^20 tries, so a copy that never completes ends the kernel instead of
   hanging it. Then the 8192
   shared-memory bytes go out raw to ``image`` (8 i64 a thread) and thread 0 writes the number of
   tries it needed (or -1 after the bound) to ``maps[47]`` and the global address it gave the map
   to ``maps[48]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

from iree.compiler import ir
from iree.compiler.dialects import arith, gpu, hal, llvm, memref, nvvm, scf

from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
from mmaflow.compiler.pipeline.hand_back import constant_grid, install
from mmaflow.compiler.target.targets import get_target

VARIANTS = ("zero", "template", "zero-cpfp")
ROWS = COLS = 256  # x: 256 x 256 f16, row-major
BOX = 64  # 64 x 64 box: 64 f16 = 128 bytes per line (the 128B swizzle span)
COORD = (64, 128)  # box start, innermost (column) first
BOX_BYTES = BOX * BOX * 2  # 8192
THREADS = 128
WAIT_LIMIT = 1 << 20  # try_wait attempts before the kernel gives up
WAIT_TICKS_NS = 1000  # suspend-time hint of each attempt (so the bound is ~1 s, not minutes)
SMEM_I64 = (1024 + BOX_BYTES + 256) // 8  # slack to round up to 1024 + box + map + mbarrier
MAPS_I64 = 56  # maps: [0:16) the built map, [16:47) a 128-aligned scratch map (the TMA's),
STATUS, X_ADDRESS = 47, 48  # [47] the wait's try count (-1: gave up), [48] the address given to the map


def host_module(template: bool) -> str:
    """The host program: one flow.dispatch.workgroups with the bindings the kernel needs (its body
    only touches each binding, so that none is dropped; the kernel replaces it)."""
    x = f"tensor<{ROWS}x{COLS}xf16>"
    dx = f"!iree_tensor_ext.dispatch.tensor<readonly:{x}>"
    img, maps, tm = "tensor<1024xi64>", f"tensor<{MAPS_I64}xi64>", "tensor<16xi64>"
    dimg = f"!iree_tensor_ext.dispatch.tensor<writeonly:{img}>"
    dmaps = f"!iree_tensor_ext.dispatch.tensor<writeonly:{maps}>"
    dtm = f"!iree_tensor_ext.dispatch.tensor<readonly:{tm}>"
    args = f"%x: {x}" + (f", %t: {tm}" if template else "")
    ins, in_types = ("%x, %t", f"{x}, {tm}") if template else ("%x", x)
    bargs = f"%bx: {dx}" + (f", %bt: {dtm}" if template else "") + f", %bo: {dimg}, %bm: {dmaps}"
    if template:
        fill_maps = (
            f"    %tv = iree_tensor_ext.dispatch.tensor.load %bt, offsets = [0], sizes = [16], strides = [1] : {dtm} -> {tm}\n"
            f"    iree_tensor_ext.dispatch.tensor.store %tv, %bm, offsets = [0], sizes = [16], strides = [1] : {tm} -> {dmaps}\n"
        )
    else:
        fill_maps = (
            f"    %z = arith.constant dense<0> : {maps}\n"
            f"    iree_tensor_ext.dispatch.tensor.store %z, %bm, offsets = [0], sizes = [{MAPS_I64}], strides = [1] : {maps} -> {dmaps}\n"
        )
    return (
        f"func.func @probe({args}) -> ({img}, {maps}) {{\n"
        f"  %r:2 = flow.dispatch.workgroups({ins}) : ({in_types}) -> ({img}, {maps}) =\n"
        f"      ({bargs}) {{\n"
        f"    %a = iree_tensor_ext.dispatch.tensor.load %bx, offsets = [0, 0], sizes = [1, 4096], strides = [1, 1] : {dx} -> tensor<4096xf16>\n"
        f"    %ab = arith.bitcast %a : tensor<4096xf16> to tensor<4096xi16>\n"
        f"    %s = tensor.extract_slice %ab[0] [1024] [1] : tensor<4096xi16> to tensor<1024xi16>\n"
        f"    %w = arith.extui %s : tensor<1024xi16> to {img}\n"
        f"    iree_tensor_ext.dispatch.tensor.store %w, %bo, offsets = [0], sizes = [1024], strides = [1] : {img} -> {dimg}\n"
        + fill_maps
        + f"    flow.return\n  }}\n"
        f"  return %r#0, %r#1 : {img}, {maps}\n}}\n"
    )


def executable_sources(template: bool) -> str:
    flags = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_90a", "--compile-to=executable-sources"]
    return subprocess.run(
        [iree_compile(), "-", *flags], input=host_module(template), capture_output=True, text=True, check=True
    ).stdout


def iree_compile() -> str:
    """iree-compile from PATH, else next to this Python (a venv's bin)."""
    return shutil.which("iree-compile") or str(Path(sys.executable).parent / "iree-compile")


class Kernel:
    """Builders for the kernel body (at one insertion point, one location)."""

    def __init__(self, consts: ir.InsertionPoint):
        self.consts = consts  # constants go to the top of the function, usable in every region
        self.i1 = ir.IntegerType.get_signless(1)
        self.i32 = ir.IntegerType.get_signless(32)
        self.i64 = ir.IntegerType.get_signless(64)
        self.index = ir.IndexType.get()
        self._consts = {}

    def c(self, value: int, t=None):
        t = t or self.index
        key = (value, str(t))
        if key not in self._consts:
            self._consts[key] = arith.ConstantOp(t, value, ip=self.consts).result
        return self._consts[key]

    def ptr(self, space: int | None):
        return ir.Type.parse("!llvm.ptr" if space is None else f"!llvm.ptr<{space}>")

    def address(self, mref) -> ir.Value:
        """The aligned base address of a memref, as i64."""
        return arith.IndexCastOp(self.i64, memref.ExtractAlignedPointerAsIndexOp(mref).result).result

    def to_ptr(self, addr: ir.Value, space: int) -> ir.Value:
        return llvm.IntToPtrOp(self.ptr(space), addr).result

    def cast(self, p: ir.Value, space: int | None) -> ir.Value:
        return llvm.AddrSpaceCastOp(self.ptr(space), p).result

    def if_(self, cond):
        """``with k.if_(cond):`` builds the then-block of an scf.if without results."""
        op = scf.IfOp(cond)
        return _Then(op)

    def replace(self, field: str, tmap, value=None, *, ord: int | None = None, attr: str | None = None):
        nvvm.TensormapReplaceOp(
            ir.Attribute.parse(f"#nvvm.tensormap_field<{field}>"),
            tmap,
            new_value=value,
            ord=ord,
            new_value_attr=ir.Attribute.parse(attr) if attr else None,
        )


class _Then:
    def __init__(self, op):
        self.op = op

    def __enter__(self):
        self.ip = ir.InsertionPoint(self.op.then_block)
        self.ip.__enter__()

    def __exit__(self, *exc):
        if exc[0] is None:
            scf.YieldOp([])
        self.ip.__exit__(*exc)


def build_kernel(k: Kernel, subspans: dict[int, ir.Operation], template: bool, cp_fenceproxy: bool) -> None:
    """The kernel (see the module docstring), at the current insertion point. ``subspans``: the
    original binding subspans by binding number (their layout, offset, alignment, flags)."""
    glob = ir.Attribute.parse("#gpu.address_space<global>")
    wg = ir.Attribute.parse("#gpu.address_space<workgroup>")
    dyn = ir.Attribute.parse("strided<[1], offset: ?>")
    i64, i32, index = k.i64, k.i32, k.index

    def subspan(binding: int, n: int, elem) -> tuple[ir.Value, ir.Value]:
        """A memref subspan of the binding (same layout, byte offset, alignment and flags), and
        its start address (binding pointer + byte offset) as i64."""
        old = subspans[binding]
        t = ir.MemRefType.get([n], elem, layout=dyn, memory_space=glob)
        attrs = old.attributes
        new = hal.InterfaceBindingSubspanOp(
            t,
            attrs["layout"],
            attrs["binding"],
            [],
            byte_offset=old.operands[0],
            alignment=attrs["alignment"] if "alignment" in attrs else None,
            descriptor_flags=attrs["descriptor_flags"] if "descriptor_flags" in attrs else None,
        ).result
        off = arith.IndexCastOp(i64, old.operands[0]).result
        return new, arith.AddIOp(k.address(new), off).result

    f16 = ir.F16Type.get()
    _, x_addr = subspan(0, ROWS * COLS, f16)
    tmpl = subspan(1, 16, i64)[0] if template else None
    out_b = 2 if template else 1
    image, _ = subspan(out_b, BOX_BYTES // 8, i64)
    maps, maps_addr = subspan(out_b + 1, MAPS_I64, i64)

    tid = gpu.ThreadIdOp(gpu.Dimension.x).result
    first = arith.CmpIOp(arith.CmpIPredicate.eq, tid, k.c(0)).result
    lt16 = arith.CmpIOp(arith.CmpIPredicate.ult, tid, k.c(16)).result

    # Workgroup memory: [pad to 1024][box 8192 B][map 128 B][mbarrier 8 B].
    smem_t = ir.MemRefType.get([SMEM_I64], i64, memory_space=wg)
    smem = memref.AllocOp(smem_t, [], [], alignment=1024).result
    sbase = k.address(smem)
    pad = arith.RemUIOp(
        arith.SubIOp(k.c(1024, i64), arith.RemUIOp(sbase, k.c(1024, i64)).result).result, k.c(1024, i64)
    ).result
    box_addr = arith.AddIOp(sbase, pad).result
    box_e = arith.IndexCastOp(index, arith.DivUIOp(pad, k.c(8, i64)).result).result
    map_e = arith.AddIOp(box_e, k.c(BOX_BYTES // 8)).result
    box3 = k.to_ptr(box_addr, 3)
    box7 = k.cast(box3, 7)
    map3 = k.to_ptr(arith.AddIOp(box_addr, k.c(BOX_BYTES, i64)).result, 3)
    bar3 = k.to_ptr(arith.AddIOp(box_addr, k.c(BOX_BYTES + 128, i64)).result, 3)

    # The scratch map the TMA uses: maps' start + 128, rounded up to 128 bytes.
    gpad = arith.RemUIOp(
        arith.SubIOp(k.c(128, i64), arith.RemUIOp(maps_addr, k.c(128, i64)).result).result, k.c(128, i64)
    ).result
    gmap_addr = arith.AddIOp(arith.AddIOp(maps_addr, k.c(128, i64)).result, gpad).result
    gmap_e = arith.AddIOp(k.c(16), arith.IndexCastOp(index, arith.DivUIOp(gpad, k.c(8, i64)).result).result).result
    gmap1 = k.to_ptr(gmap_addr, 1)
    gmap = k.cast(gmap1, None)

    # 1. The starting bytes of the map in shared memory.
    with k.if_(lt16):
        slot = arith.AddIOp(map_e, tid).result
        v = memref.LoadOp(tmpl, [tid]).result if template else k.c(0, i64)
        memref.StoreOp(v, smem, [slot])
    gpu.BarrierOp()

    # 2.-4. Thread 0: fields, the global copies, proxy fences, mbarrier init.
    with k.if_(first):
        k.replace("global_address", map3, x_addr)
        if not template:
            k.replace("rank", map3, k.c(1, i32))  # zero-based: rank 2
            for d in (0, 1):
                k.replace("box_dim", map3, k.c(BOX, i32), ord=d)
            k.replace("global_dim", map3, k.c(COLS, i32), ord=0)  # innermost first
            k.replace("global_dim", map3, k.c(ROWS, i32), ord=1)
            k.replace("global_stride", map3, k.c(COLS * 2, i64), ord=0)  # bytes between rows
            for d in (0, 1):
                k.replace("element_stride", map3, k.c(1, i32), ord=d)
            k.replace("elemtype", map3, attr="#nvvm.tensormap_elemtype<f16>")
            k.replace("interleave_layout", map3, attr="#nvvm.tensormap_interleave_layout<no_interleave>")
            k.replace("swizzle_mode", map3, attr="#nvvm.tensormap_swizzle_mode<b128>")
            k.replace("fill_mode", map3, attr="#nvvm.tensormap_fill_mode<zero>")
        for i in range(16):
            v = memref.LoadOp(smem, [arith.AddIOp(map_e, k.c(i)).result]).result
            memref.StoreOp(v, maps, [k.c(i)])
            if not cp_fenceproxy:
                memref.StoreOp(v, maps, [arith.AddIOp(gmap_e, k.c(i)).result])
        if not cp_fenceproxy:
            nvvm.FenceProxyReleaseOp(ir.Attribute.parse("#nvvm.mem_scope<gpu>"))
    if cp_fenceproxy:
        # IREE 3.13's NVVM dialect has no op for it (nor LLVM an intrinsic): inline PTX, warp 0
        # converged (.sync.aligned), after a barrier orders thread 0's tensormap.replace.
        gpu.BarrierOp()
        with k.if_(arith.CmpIOp(arith.CmpIPredicate.ult, tid, k.c(32)).result):
            nvvm.InlinePtxOp(
                [],
                [gmap1, map3],
                [],
                "tensormap.cp_fenceproxy.global.shared::cta."
                "tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;",
                memoryClobber=True,
            )
    with k.if_(first):
        nvvm.FenceProxyAcquireOp(ir.Attribute.parse("#nvvm.mem_scope<gpu>"), gmap, k.c(128, i32))
        nvvm.MBarrierInitOp(bar3, k.c(1, i32))
        nvvm.FenceMbarrierInitOp()
    gpu.BarrierOp()
    with k.if_(first):
        nvvm.MBarrierArriveExpectTxOp(bar3, k.c(BOX_BYTES, i32))
        nvvm.CpAsyncBulkTensorGlobalToSharedClusterOp(box7, gmap, [k.c(COORD[0], i32), k.c(COORD[1], i32)], bar3, [])

    # 5. Bounded wait on phase 0, then the box out raw and thread 0's status.
    loop = scf.WhileOp([i32, k.i1], [k.c(0, i32), k.c(0, k.i1)])
    before = loop.before.blocks.append(i32, k.i1)
    with ir.InsertionPoint(before):
        n, done = before.arguments
        under = arith.CmpIOp(arith.CmpIPredicate.ult, n, k.c(WAIT_LIMIT, i32)).result
        notdone = arith.XOrIOp(done, k.c(1, k.i1)).result
        scf.ConditionOp(arith.AndIOp(under, notdone).result, [n, done])
    after = loop.after.blocks.append(i32, k.i1)
    with ir.InsertionPoint(after):
        n, _ = after.arguments
        ok = nvvm.MBarrierTryWaitOp(bar3, k.c(0, i32), ticks=k.c(WAIT_TICKS_NS, i32), results=[k.i1]).result
        scf.YieldOp([arith.AddIOp(n, k.c(1, i32)).result, ok])
    tries, done = loop.results
    for i in range(BOX_BYTES // 8 // THREADS):
        e = arith.AddIOp(tid, k.c(THREADS * i)).result
        v = memref.LoadOp(smem, [arith.AddIOp(box_e, e).result]).result
        memref.StoreOp(v, image, [e])
    with k.if_(first):
        status = arith.SelectOp(done, arith.ExtUIOp(i64, tries).result, k.c(-1, i64)).result
        memref.StoreOp(status, maps, [k.c(STATUS)])
        memref.StoreOp(x_addr, maps, [k.c(X_ADDRESS)])


def probe_module(variant: str) -> ir.Module:
    template, cp_fenceproxy = variant == "template", variant == "zero-cpfp"
    ctx = new_context()
    module = parse_module(executable_sources(template), ctx, source="gen_tma_probe")
    funcs = [f for f in ops_named(module.operation, "func.func") if ops_named(f, "hal.interface.binding.subspan")]
    (fn,) = funcs
    block = fn.regions[0].blocks[0]
    old = list(block.operations)
    subs = [op for op in old if op.name == "hal.interface.binding.subspan"]
    subspans = {ir.IntegerAttr(op.attributes["binding"]).value: op for op in subs}
    assert sorted(subspans) == list(range(4 if template else 3)), sorted(subspans)
    start = old.index(subs[0])
    with ctx, fn.location, ir.InsertionPoint(subs[0]):
        build_kernel(Kernel(ir.InsertionPoint.at_block_begin(block)), subspans, template, cp_fenceproxy)
    for op in reversed(old[start:]):
        op.erase()
    with ctx, fn.location, ir.InsertionPoint(block):
        ir.Operation.create("func.return")
    # The variant needs PTX 8.3 (tensormap.replace, fence.proxy.tensormap::generic); mmaflow's
    # sm_90a target says +ptx80, so this probe hands back with a copy of it saying +ptx83.
    target = dataclasses.replace(get_target("sm_90a"), ptx_version=83)
    install(fn, target, workgroup_size=THREADS, subgroup_size=32, grid=constant_grid((1, 1, 1)))
    assert module.operation.verify()
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", choices=VARIANTS)
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args()
    text = f"// TMA probe ({args.variant}): generated by e2e_tests/data/tma_probe.py; see its docstring.\n" + str(
        probe_module(args.variant)
    )
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
