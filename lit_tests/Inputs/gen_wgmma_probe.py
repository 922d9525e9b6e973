"""Write the Hopper warpgroup-MMA probe fixtures (issue 16): what lowers through mmaflow's
hand-back route in IREE 3.13 for sm_90a.

    python lit_tests/Inputs/gen_wgmma_probe.py     # rewrites wgmma_probe_*.mlir here

Both are whole modules at the executable-sources phase of a 64x64x64 f16 x f16 -> f32 matmul
(`iree-compile --compile-to=executable-sources`, cuda, sm_90a) whose dispatch is replaced by a
hand-written single-warpgroup kernel (128 threads, one workgroup) carrying the mmaflow.*
attributes the hand-back stage reads (`mmaflow opt --from hand-back --target sm_90a` then gives
it the no_pipeline translation_info and the sm_90a/+ptx80 variant target).

* ``wgmma_probe_nvvm.mlir``: a real kernel at the NVVM level. A (64x64, K-major) and B^T
  (B is KxN in global memory; stored N rows of K) are copied into workgroup memory in the
  non-swizzled core-matrix layout: element (r, k) of a 64x64 operand at byte
  ``(k/8)*1024 + (r/8)*128 + (r%8)*16 + (k%8)*2`` (8x8 core matrices of 128 contiguous bytes;
  the 8 core matrices along M/N of one 8-wide K chunk adjacent, the K chunks 1024 B apart).
  Matrix descriptors are built with arith on the workgroup address (start>>4 in bits 0-13,
  leading byte offset>>4 in 16-29, stride byte offset>>4 in 32-45, layout type 0 = no
  swizzle in 62-63), the generic-proxy stores are made visible to the async proxy
  (``nvvm.fence.proxy <async.shared>``) before a barrier, and four
  ``nvvm.wgmma.mma_async`` m64n64k16 (descriptors advanced 2048 B per K step) run between
  ``nvvm.wgmma.fence.aligned`` and ``commit.group`` / ``wait.group 0``. The accumulator
  (32 f32 a thread) is stored with the PTX ISA's m64nNk16 fragment D layout: d[i] at row
  16*warp + lane/4 + 8*((i/2)%2), column 8*(i/4) + 2*(lane%4) + i%2.
  ``--lbo/--sbo`` choose the two descriptor byte offsets (default: leading = 1024, the K
  step between core matrices; stride = 128, the M/N step).
* ``wgmma_probe_nvgpu.mlir``: the nvgpu-level ops (`nvgpu.warpgroup.generate.descriptor`,
  `.mma.init.accumulator`, `.mma`, `.mma.store`) on the same copies, compile-only: in IREE 3.13
  generate.descriptor needs a ``!nvgpu.tensormap.descriptor`` operand and reads only its
  type (swizzle mode, box) to compute the descriptor's offsets; a kernel under IREE's HAL has
  no tensor map, so the probe conjures the operand from a null pointer
  (``builtin.unrealized_conversion_cast``). Its 128B-swizzle descriptor does not describe the
  non-swizzled copies: it shows what lowers, not a correct kernel.
* ``wgmma_probe_tma.mlir``: whether the TMA instructions lower, compile-only. IREE's CUDA HAL
  passes a kernel only binding pointers and 32-bit constants, so a CUtensorMap cannot arrive
  as a ``__grid_constant__`` parameter; the route left is a tensor map in global memory
  written on the device. Thread 0 rewrites the global address of a tensor map held in a
  global buffer (``nvvm.tensormap.replace``; here the first 128 bytes of C stand in for a
  scratch binding), releases it to the tensor-map proxy (``nvvm.fence.proxy.release`` /
  ``.acquire``), initialises an mbarrier in workgroup memory, arms it with the byte count and
  issues ``nvvm.cp.async.bulk.tensor.shared.cluster.global`` of a 64x64 f16 box; all threads
  wait on the mbarrier's phase. The other tensor-map fields (rank, box, dims, strides, element
  type, swizzle) would be written the same way; the tensor map is not valid as written and
  the kernel is not meant to run. ``tensormap.replace`` needs PTX 8.3 (features "+ptx83").
"""

import argparse
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).parent
M = N = K = 64
F32X32 = "!llvm.struct<(" + ", ".join(["f32"] * (N // 2)) + ")>"


def matmul():
    return (f"func.func @probe(%a: tensor<{M}x{K}xf16>, %b: tensor<{K}x{N}xf16>) -> tensor<{M}x{N}xf32> {{\n"
            f"  %z = arith.constant 0.0 : f32\n  %e = tensor.empty() : tensor<{M}x{N}xf32>\n"
            f"  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>\n"
            f"  %r = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf16>, tensor<{K}x{N}xf16>) outs(%f : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>\n"
            f"  return %r : tensor<{M}x{N}xf32>\n}}\n")


def attrs():
    # The config is read by the hand-back stage only for the workgroup size (4 waves of 32 =
    # one warpgroup) and the grid (one 64x64 tile); the intrinsic named is the catalogue's.
    problem = ('{a = {binding = 0 : i64, offset = 0 : i64}, a_transposed = false, a_type = "f16", '
               'b = {binding = 1 : i64, offset = 0 : i64}, b_transposed = false, b_type = "f16", batch = 1 : i64, '
               'batched = false, c = {binding = 2 : i64, offset = 0 : i64}, c_type = "f32", dynamic = [], epilogue = [], '
               f'epilogue_ops = [], k = {K} : i64, m = {M} : i64, n = {N} : i64, same_ab = false, unsigned_a = false, '
               'unsigned_b = false}')
    return (f'mmaflow.config = {{intrinsic = "MMA_SYNC_F32_16x8x16_F16", lds_pad = 0 : i64, tile_k = {K} : i64, '
            f'tile_m = {M} : i64, tile_n = {N} : i64, wave_size = 32 : i64, waves_m = 4 : i64, waves_n = 1 : i64}}, '
            f'mmaflow.dispatch, mmaflow.problem = {problem}, mmaflow.target = "sm_90a"')


class Body:
    def __init__(self):
        self.lines, self.n, self.consts = [], 0, {}

    def __call__(self, text):
        self.lines.append(text)

    def v(self):
        self.n += 1
        return f"%v{self.n}"

    def c(self, value, t="index"):
        key = (value, t)
        if key not in self.consts:
            name = f"%c{value}_{t}".replace("-", "m")
            self.consts[key] = name
            self.lines.insert(0, f"{name} = arith.constant {value} : {t}")
        return self.consts[key]

    def op(self, text):
        name = self.v()
        self(f"{name} = {text}")
        return name


GLOBAL = "#gpu.address_space<global>"
SHARED = "#gpu.address_space<workgroup>"


def core_offset(b, r, k):
    """Element offset of (r, k) in the non-swizzled core-matrix layout (see the docstring)."""
    kc = b.op(f"arith.divui {k}, {b.c(8)} : index")
    kr = b.op(f"arith.remui {k}, {b.c(8)} : index")
    rc = b.op(f"arith.divui {r}, {b.c(8)} : index")
    rr = b.op(f"arith.remui {r}, {b.c(8)} : index")
    t0 = b.op(f"arith.muli {kc}, {b.c(512)} : index")    # 1024 B = 512 f16
    t1 = b.op(f"arith.muli {rc}, {b.c(64)} : index")     # 128 B
    t2 = b.op(f"arith.muli {rr}, {b.c(8)} : index")      # 16 B
    s = b.op(f"arith.addi {t0}, {t1} : index")
    s = b.op(f"arith.addi {s}, {t2} : index")
    return b.op(f"arith.addi {s}, {kr} : index")


def copies(b):
    """A and B^T from global memory into two 4096-element workgroup buffers, core-matrix layout."""
    b(f'%A = hal.interface.binding.subspan layout(LAYOUT) binding(0) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<{M}x{K}xf16, {GLOBAL}>')
    b(f'%B = hal.interface.binding.subspan layout(LAYOUT) binding(1) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<{K}x{N}xf16, {GLOBAL}>')
    b(f'%C = hal.interface.binding.subspan layout(LAYOUT) binding(2) alignment(64) offset(%c0) flags(Indirect) : memref<{M}x{N}xf32, {GLOBAL}>')
    b(f"%sa = memref.alloc() alignment = 1024 : memref<{M * K}xf16, {SHARED}>")
    b(f"%sb = memref.alloc() alignment = 1024 : memref<{N * K}xf16, {SHARED}>")
    b("%tid = gpu.thread_id x")
    # A: 512 chunks of 8 K-contiguous f16 (one core-matrix row each), 4 a thread, 128-bit moves.
    for i in range(M * K // 8 // 128):
        chunk = b.op(f"arith.addi %tid, {b.c(128 * i)} : index")
        r = b.op(f"arith.divui {chunk}, {b.c(K // 8)} : index")
        kc = b.op(f"arith.remui {chunk}, {b.c(K // 8)} : index")
        k = b.op(f"arith.muli {kc}, {b.c(8)} : index")
        v = b.op(f"vector.load %A[{r}, {k}] : memref<{M}x{K}xf16, {GLOBAL}>, vector<8xf16>")
        off = core_offset(b, r, k)
        b(f"vector.store {v}, %sa[{off}] : memref<{M * K}xf16, {SHARED}>, vector<8xf16>")
    # B^T: element (n, k) = B[k][n]; 32 scalar moves a thread, consecutive threads along n.
    for i in range(N * K // 128):
        e = b.op(f"arith.addi %tid, {b.c(128 * i)} : index")
        k = b.op(f"arith.divui {e}, {b.c(N)} : index")
        n = b.op(f"arith.remui {e}, {b.c(N)} : index")
        x = b.op(f"memref.load %B[{k}, {n}] : memref<{K}x{N}xf16, {GLOBAL}>")
        off = core_offset(b, n, k)
        b(f"memref.store {x}, %sb[{off}] : memref<{N * K}xf16, {SHARED}>")


def descriptor(b, buf, lbo, sbo):
    p = b.op(f"memref.extract_aligned_pointer_as_index {buf} : memref<{M * K}xf16, {SHARED}> -> index")
    p64 = b.op(f"arith.index_cast {p} : index to i64")
    lo = b.op(f"arith.andi {p64}, {b.c(0x3FFFF, 'i64')} : i64")
    start = b.op(f"arith.shrui {lo}, {b.c(4, 'i64')} : i64")
    offsets = ((lbo >> 4) << 16) | ((sbo >> 4) << 32)   # layout type 0 (no swizzle), base offset 0
    return b.op(f"arith.ori {start}, {b.c(offsets, 'i64')} : i64")


def nvvm_kernel(b, lbo, sbo):
    copies(b)
    b('"nvvm.fence.proxy"() {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>} : () -> ()')
    b("gpu.barrier")
    da = descriptor(b, "%sa", lbo, sbo)
    db = descriptor(b, "%sb", lbo, sbo)
    acc = b.op(f"llvm.mlir.zero : {F32X32}")
    b("nvvm.wgmma.fence.aligned")
    for ks in range(K // 16):
        step = b.c(ks * 2 * 1024 >> 4, "i64")            # two K core-matrix chunks of 1024 B
        ka = b.op(f"arith.addi {da}, {step} : i64")
        kb = b.op(f"arith.addi {db}, {step} : i64")
        acc = b.op(f"nvvm.wgmma.mma_async {ka}, {kb}, {acc}, #nvvm.shape<m = 64, n = {N}, k = 16>, "
                   "D [<f32>, #nvvm.wgmma_scale_out<one>], A [<f16>, #nvvm.wgmma_scale_in<one>, <row>], "
                   f"B [<f16>, #nvvm.wgmma_scale_in<one>, <col>] : {F32X32} -> {F32X32}")
    b("nvvm.wgmma.commit.group.sync.aligned")
    b("nvvm.wgmma.wait.group.sync.aligned 0")
    # Fragment D of wgmma .m64nNk16 (PTX ISA): d[i] at (16*warp + lane/4 + 8*((i/2)%2), 8*(i/4) + 2*(lane%4) + i%2).
    warp = b.op(f"arith.divui %tid, {b.c(32)} : index")
    lane = b.op(f"arith.remui %tid, {b.c(32)} : index")
    w16 = b.op(f"arith.muli {warp}, {b.c(16)} : index")
    l4 = b.op(f"arith.divui {lane}, {b.c(4)} : index")
    row0 = b.op(f"arith.addi {w16}, {l4} : index")
    lm = b.op(f"arith.remui {lane}, {b.c(4)} : index")
    col0 = b.op(f"arith.muli {lm}, {b.c(2)} : index")
    for i in range(N // 2):
        d = b.op(f"llvm.extractvalue {acc}[{i}] : {F32X32}")
        row = b.op(f"arith.addi {row0}, {b.c(8 * ((i // 2) % 2))} : index")
        col = b.op(f"arith.addi {col0}, {b.c(8 * (i // 4) + i % 2)} : index")
        b(f"memref.store {d}, %C[{row}, {col}] : memref<{M}x{N}xf32, {GLOBAL}>")


def nvgpu_kernel(b):
    copies(b)
    sa, sb = f"memref<{M}x{K}xf16, {SHARED}>", f"memref<{K}x{N}xf16, {SHARED}>"
    tm = (f"!nvgpu.tensormap.descriptor<tensor = memref<{M}x{K}xf16, 3>, swizzle = swizzle_128b, l2promo = none, "
          "oob = zero, interleave = none>")
    b('"nvvm.fence.proxy"() {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>} : () -> ()')
    b("gpu.barrier")
    va = b.op(f"memref.expand_shape %sa [[0, 1]] output_shape [{M}, {K}] : memref<{M * K}xf16, {SHARED}> into {sa}")
    vb = b.op(f"memref.expand_shape %sb [[0, 1]] output_shape [{K}, {N}] : memref<{N * K}xf16, {SHARED}> into {sb}")
    null = b.op("llvm.mlir.zero : !llvm.ptr")
    t = b.op(f"builtin.unrealized_conversion_cast {null} : !llvm.ptr to {tm}")
    da = b.op(f"nvgpu.warpgroup.generate.descriptor {va}, {t} : {sa}, {tm} -> "
              f"!nvgpu.warpgroup.descriptor<tensor = memref<{M}x{K}xf16, 3>>")
    db = b.op(f"nvgpu.warpgroup.generate.descriptor {vb}, {t} : {sb}, {tm} -> "
              f"!nvgpu.warpgroup.descriptor<tensor = memref<{K}x{N}xf16, 3>>")
    acc_t = f"!nvgpu.warpgroup.accumulator<fragmented = vector<{M}x{N}xf32>>"
    acc = b.op(f"nvgpu.warpgroup.mma.init.accumulator -> {acc_t}")
    r = b.op(f"nvgpu.warpgroup.mma {da}, {db}, {acc} : <tensor = memref<{M}x{K}xf16, 3>>, "
             f"<tensor = memref<{K}x{N}xf16, 3>>, <fragmented = vector<{M}x{N}xf32>> -> <fragmented = vector<{M}x{N}xf32>>")
    b(f"nvgpu.warpgroup.mma.store {r}, %C : <fragmented = vector<{M}x{N}xf32>> to memref<{M}x{N}xf32, {GLOBAL}>")


def tma_kernel(b):
    b(f'%A = hal.interface.binding.subspan layout(LAYOUT) binding(0) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<{M}x{K}xf16, {GLOBAL}>')
    b(f'%B = hal.interface.binding.subspan layout(LAYOUT) binding(1) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<{K}x{N}xf16, {GLOBAL}>')
    b(f'%C = hal.interface.binding.subspan layout(LAYOUT) binding(2) alignment(64) offset(%c0) flags(Indirect) : memref<{M}x{N}xf32, {GLOBAL}>')
    b(f"%sa = memref.alloc() alignment = 1024 : memref<{M * K}xf16, {SHARED}>")
    b(f"%bar = memref.alloc() alignment = 8 : memref<1xi64, {SHARED}>")
    b("%tid = gpu.thread_id x")

    def ptr(value, mtype, space):
        i = b.op(f"memref.extract_aligned_pointer_as_index {value} : {mtype} -> index")
        i64 = b.op(f"arith.index_cast {i} : index to i64")
        return b.op(f"llvm.inttoptr {i64} : i64 to !llvm.ptr<{space}>"), i64

    tm, _ = ptr("%C", f"memref<{M}x{N}xf32, {GLOBAL}>", 1)
    _, a64 = ptr("%A", f"memref<{M}x{K}xf16, {GLOBAL}>", 1)
    smem, _ = ptr("%sa", f"memref<{M * K}xf16, {SHARED}>", 3)
    bar, _ = ptr("%bar", f"memref<1xi64, {SHARED}>", 3)
    tm_generic = b.op(f"llvm.addrspacecast {tm} : !llvm.ptr<1> to !llvm.ptr")
    dst = b.op(f"llvm.addrspacecast {smem} : !llvm.ptr<3> to !llvm.ptr<7>")
    first = b.op(f"arith.cmpi eq, %tid, {b.c(0)} : index")
    b(f"scf.if {first} {{")
    b(f"  nvvm.tensormap.replace field = global_address, new_value = {a64} in {tm} : !llvm.ptr<1>, i64")
    b("  nvvm.fence.proxy.release gpu")
    b(f"  nvvm.fence.proxy.acquire gpu {tm_generic}, {b.c(128, 'i32')}")
    b(f"  nvvm.mbarrier.init {bar}, {b.c(1, 'i32')} : !llvm.ptr<3>, i32")
    b(f"  nvvm.mbarrier.arrive.expect_tx {bar}, {b.c(M * K * 2, 'i32')} : !llvm.ptr<3>, i32")
    b(f"  nvvm.cp.async.bulk.tensor.shared.cluster.global {dst}, {tm_generic}, {bar}, "
      f"box[{b.c(0, 'i32')}, {b.c(0, 'i32')}] : !llvm.ptr<7>, !llvm.ptr")
    b("}")
    b("gpu.barrier")
    b(f"nvvm.mbarrier.try_wait.parity {bar}, {b.c(0, 'i32')}, {b.c(10000000, 'i32')} : !llvm.ptr<3>, i32, i32")
    x = b.op(f"memref.load %sa[%tid] : memref<{M * K}xf16, {SHARED}>")
    xf = b.op(f"arith.extf {x} : f16 to f32")
    b(f"memref.store {xf}, %C[{b.c(1)}, %tid] : memref<{M}x{N}xf32, {GLOBAL}>")


def module(kernel, header) -> str:
    flags = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_90a"]
    src = subprocess.run(["iree-compile", "-", *flags, "--compile-to=executable-sources"],
                         input=matmul(), capture_output=True, text=True, check=True).stdout
    layout = re.search(r"layout\((.*?)\) binding\(", src).group(1)
    func = re.search(r"( *)func\.func @(\w+)\(\) \{\n.*?\n\1\}\n", src, re.S)
    b = Body()
    kernel(b)
    b("return")
    b.lines.insert(0, "%c0 = arith.constant 0 : index")
    text = "\n".join(b.lines).replace("LAYOUT", layout)
    ind = func.group(1)
    new = (f"{ind}func.func @{func.group(2)}() attributes {{{attrs()}}} {{\n"
           + "\n".join(ind + "  " + line for line in text.splitlines()) + f"\n{ind}}}\n")
    return header + src[:func.start()] + new + src[func.end():]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lbo", type=int, default=1024, help="leading (K) byte offset of the descriptors")
    parser.add_argument("--sbo", type=int, default=128, help="stride (M/N) byte offset of the descriptors")
    parser.add_argument("--stdout", action="store_true", help="print the NVVM probe instead of writing files")
    args = parser.parse_args()
    head = "// Hopper wgmma probe ({}): generated by gen_wgmma_probe.py (issue 16); see its docstring.\n"
    nvvm = module(lambda b: nvvm_kernel(b, args.lbo, args.sbo), head.format(f"NVVM ops, lbo {args.lbo} sbo {args.sbo}"))
    if args.stdout:
        print(nvvm, end="")
        return
    (HERE / "wgmma_probe_nvvm.mlir").write_text(nvvm)
    (HERE / "wgmma_probe_nvgpu.mlir").write_text(module(nvgpu_kernel, head.format("nvgpu ops, compile-only")))
    (HERE / "wgmma_probe_tma.mlir").write_text(module(tma_kernel, head.format("TMA instructions, compile-only")))
    print("wrote wgmma_probe_nvvm.mlir, wgmma_probe_nvgpu.mlir, wgmma_probe_tma.mlir")


if __name__ == "__main__":
    main()
