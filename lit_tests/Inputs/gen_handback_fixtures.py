"""Write the hand-back fixtures: one small, fully distributed kernel per instruction family.

Each fixture is a whole module at IREE's executable-sources phase (what `iree-compile
--compile-to=executable-sources` prints for a tiny matmul) whose dispatch function has been
replaced by hand-distributed per-lane code, with the mmaflow.* attributes the hand-back stage
reads. They prove the hand-back independently of the distribution stage:

    python lit_tests/Inputs/gen_handback_fixtures.py     # rewrites handback_*.mlir here

Families: RDNA3 WMMA (gfx1100, wave32), CDNA3 MFMA (gfx942, wave64), NVIDIA mma.sync (sm_80).
The per-lane addressing below is written from the ISA documents (see runtime/isa/tables.py).
"""

import re
import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def matmul(m, n, k):
    return (
        f"func.func @fixture(%a: tensor<{m}x{k}xf16>, %b: tensor<{k}x{n}xf16>) -> tensor<{m}x{n}xf32> {{\n"
        f"  %z = arith.constant 0.0 : f32\n  %e = tensor.empty() : tensor<{m}x{n}xf32>\n"
        f"  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>\n"
        f"  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf16>, tensor<{k}x{n}xf16>) outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>\n"
        f"  return %r : tensor<{m}x{n}xf32>\n}}\n"
    )


def attrs(intrinsic, wave, m, n, k, target):
    problem = (
        '{a = {binding = 0 : i64, offset = 0 : i64}, a_transposed = false, a_type = "f16", '
        'b = {binding = 1 : i64, offset = 0 : i64}, b_transposed = false, b_type = "f16", batch = 1 : i64, '
        'batched = false, c = {binding = 2 : i64, offset = 0 : i64}, c_type = "f32", dynamic = [], epilogue = [], '
        f"epilogue_ops = [], k = {k} : i64, m = {m} : i64, n = {n} : i64, same_ab = false, unsigned_a = false, "
        "unsigned_b = false}"
    )
    return (
        f'mmaflow.config = {{intrinsic = "{intrinsic}", lds_pad = 8 : i64, tile_k = {k} : i64, tile_m = {m} : i64, '
        f"tile_n = {n} : i64, wave_size = {wave} : i64, waves_m = 1 : i64, waves_n = 1 : i64}}, "
        f'mmaflow.dispatch, mmaflow.problem = {problem}, mmaflow.target = "{target}"'
    )


class Body:
    def __init__(self):
        self.lines, self.n = [], 0

    def __call__(self, text):
        self.lines.append("  " + text)

    def v(self):
        self.n += 1
        return f"%v{self.n}"

    def const(self, value, t="index"):
        name = self.v()
        self(f"{name} = arith.constant {value} : {t}")
        return name


def bindings(b, space, m, n, k):
    g = f"#gpu.address_space<{space}>"
    b(
        f'%A = hal.interface.binding.subspan layout(LAYOUT) binding(0) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<{m}x{k}xf16, {g}>'
    )
    b(
        f'%B = hal.interface.binding.subspan layout(LAYOUT) binding(1) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<{k}x{n}xf16, {g}>'
    )
    b(
        f"%C = hal.interface.binding.subspan layout(LAYOUT) binding(2) alignment(64) offset(%c0) flags(Indirect) : memref<{m}x{n}xf32, {g}>"
    )
    return f"memref<{m}x{k}xf16, {g}>", f"memref<{k}x{n}xf16, {g}>", f"memref<{m}x{n}xf32, {g}>"


def amd_index(b, expr_index):
    name = b.v()
    b(f"{name} = arith.index_cast {expr_index} : index to i32")
    return name


def wmma_gfx1100(b):
    ta, tb, tc = bindings(b, "global", 16, 16, 16)
    b("%tid = gpu.thread_id x")
    c16 = b.const(16)
    b(f"%l = arith.remui %tid, {c16} : index")  # lane % 16 (lanes 16-31 replicate)
    b(f"%h = arith.divui %tid, {c16} : index")  # lane / 16: which row of each C pair
    li = amd_index(b, "%l")
    z = b.const(0, "i32")
    eight = b.const(8, "i32")  # 128 bits is the widest buffer load: two halves of the row
    b(f"%a0 = amdgpu.raw_buffer_load boundsCheck(true) %A[{li}, {z}] : {ta}, i32, i32 -> vector<8xf16>")
    b(f"%a1 = amdgpu.raw_buffer_load boundsCheck(true) %A[{li}, {eight}] : {ta}, i32, i32 -> vector<8xf16>")
    b("%apad = arith.constant dense<0.0> : vector<16xf16>")
    b("%alo = vector.insert_strided_slice %a0, %apad offsets = [0], strides = [1] : vector<8xf16> into vector<16xf16>")
    b("%a = vector.insert_strided_slice %a1, %alo offsets = [8], strides = [1] : vector<8xf16> into vector<16xf16>")
    elems = []
    for kk in range(16):
        ki = b.const(kk, "i32")
        e = b.v()
        b(f"{e} = amdgpu.raw_buffer_load boundsCheck(true) %B[{ki}, {li}] : {tb}, i32, i32 -> f16")
        elems.append(e)
    b(f"%b = vector.from_elements {', '.join(elems)} : vector<16xf16>")
    b("%zero = arith.constant dense<0.0> : vector<8xf32>")
    b("%d = amdgpu.wmma 16x16x16 %a * %b + %zero : vector<16xf16>, vector<16xf16>, vector<8xf32>")
    for v in range(8):  # C[2v + lane/16][lane % 16]
        e = b.v()
        b(
            f"{e} = vector.extract_strided_slice %d offsets = [{v}], sizes = [1], strides = [1] : vector<8xf32> to vector<1xf32>"
        )
        two_v = b.const(2 * v)
        r = b.v()
        b(f"{r} = arith.addi %h, {two_v} : index")
        ri = amd_index(b, r)
        b(f"amdgpu.raw_buffer_store boundsCheck(true) {e} -> %C[{ri}, {li}] : vector<1xf32> -> {tc}, i32, i32")


def mfma_gfx942(b):
    ta, tb, tc = bindings(b, "global", 16, 16, 16)
    b("%tid = gpu.thread_id x")
    c16, c4 = b.const(16), b.const(4)
    b(f"%l = arith.remui %tid, {c16} : index")
    b(f"%g = arith.divui %tid, {c16} : index")
    b(f"%k0 = arith.muli %g, {c4} : index")  # K block of this lane: 4*(lane/16)
    li, ki = amd_index(b, "%l"), amd_index(b, "%k0")
    b(f"%a = amdgpu.raw_buffer_load boundsCheck(true) %A[{li}, {ki}] : {ta}, i32, i32 -> vector<4xf16>")
    elems = []
    for v in range(4):
        off = b.const(v)
        kv = b.v()
        b(f"{kv} = arith.addi %k0, {off} : index")
        kvi = amd_index(b, kv)
        e = b.v()
        b(f"{e} = amdgpu.raw_buffer_load boundsCheck(true) %B[{kvi}, {li}] : {tb}, i32, i32 -> f16")
        elems.append(e)
    b(f"%b = vector.from_elements {', '.join(elems)} : vector<4xf16>")
    b("%zero = arith.constant dense<0.0> : vector<4xf32>")
    b("%d = amdgpu.mfma 16x16x16 %a * %b + %zero blgp(none) : vector<4xf16>, vector<4xf16>, vector<4xf32>")
    for v in range(4):  # C[4*(lane/16) + v][lane % 16]
        e = b.v()
        b(
            f"{e} = vector.extract_strided_slice %d offsets = [{v}], sizes = [1], strides = [1] : vector<4xf32> to vector<1xf32>"
        )
        off = b.const(v)
        r = b.v()
        b(f"{r} = arith.addi %k0, {off} : index")
        ri = amd_index(b, r)
        b(f"amdgpu.raw_buffer_store boundsCheck(true) {e} -> %C[{ri}, {li}] : vector<1xf32> -> {tc}, i32, i32")


def mma_sync_sm80(b):
    ta, tb, tc = bindings(b, "global", 16, 8, 16)
    b("%tid = gpu.thread_id x")
    c4, c2, c8 = b.const(4), b.const(2), b.const(8)
    b(f"%g = arith.divui %tid, {c4} : index")  # groupID
    b(f"%t = arith.remui %tid, {c4} : index")  # threadID_in_group
    b(f"%t2 = arith.muli %t, {c2} : index")
    b(f"%g8 = arith.addi %g, {c8} : index")
    b(f"%t28 = arith.addi %t2, {c8} : index")
    b("%apad = arith.constant dense<0.0> : vector<8xf16>")
    acc = "%apad"
    # a0,a1: (g, 2t..2t+1); a2,a3: (g+8, ..); a4,a5: (g, 2t+8..); a6,a7: (g+8, 2t+8..)
    for i, (row, col) in enumerate((("%g", "%t2"), ("%g8", "%t2"), ("%g", "%t28"), ("%g8", "%t28"))):
        v = b.v()
        b(f"{v} = vector.load %A[{row}, {col}] : {ta}, vector<2xf16>")
        nxt = b.v()
        b(
            f"{nxt} = vector.insert_strided_slice {v}, {acc} offsets = [{2 * i}], strides = [1] : vector<2xf16> into vector<8xf16>"
        )
        acc = nxt
    b(f"%a = vector.shape_cast {acc} : vector<8xf16> to vector<4x2xf16>")
    elems = []
    for i in range(4):  # b_i: row 2t + (i&1) + 8*(i>=2), col g
        off = b.const((i & 1) + (8 if i >= 2 else 0))
        r = b.v()
        b(f"{r} = arith.addi %t2, {off} : index")
        e = b.v()
        b(f"{e} = memref.load %B[{r}, %g] : {tb}")
        elems.append(e)
    b(f"%bflat = vector.from_elements {', '.join(elems)} : vector<4xf16>")
    b("%b = vector.shape_cast %bflat : vector<4xf16> to vector<2x2xf16>")
    b("%zero = arith.constant dense<0.0> : vector<2x2xf32>")
    b(
        "%d = nvgpu.mma.sync(%a, %b, %zero) mmaShape = [16, 8, 16] : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>"
    )
    for r, row in ((0, "%g"), (1, "%g8")):  # c0,c1: (g, 2t..2t+1); c2,c3: (g+8, ..)
        e = b.v()
        b(f"{e} = vector.extract %d[{r}] : vector<2xf32> from vector<2x2xf32>")
        b(f"vector.store {e}, %C[{row}, %t2] : {tc}, vector<2xf32>")


FIXTURES = {
    "handback_wmma_gfx1100.mlir": (
        ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx1100"],
        (16, 16, 16),
        wmma_gfx1100,
        ("WMMA_F32_16x16x16_F16", 32, "gfx1100"),
    ),
    "handback_mfma_gfx942.mlir": (
        ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"],
        (16, 16, 16),
        mfma_gfx942,
        ("MFMA_F32_16x16x16_F16", 64, "gfx942"),
    ),
    "handback_mma_sync_sm80.mlir": (
        ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"],
        (16, 8, 16),
        mma_sync_sm80,
        ("MMA_SYNC_F32_16x8x16_F16", 32, "sm_80"),
    ),
}


def main():
    for name, (flags, (m, n, k), kernel, (intr, wave, target)) in FIXTURES.items():
        src = subprocess.run(
            ["iree-compile", "-", *flags, "--compile-to=executable-sources"],
            input=matmul(m, n, k),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        layout = re.search(r"layout\((.*?)\) binding\(", src).group(1)
        func = re.search(r"( *)func\.func @(\w+)\(\) \{\n.*?\n\1\}\n", src, re.S)
        body = Body()
        body("%c0 = arith.constant 0 : index")
        kernel(body)
        body("return")
        text = "\n".join(body.lines).replace("LAYOUT", layout)
        ind = func.group(1)
        new = (
            f"{ind}func.func @{func.group(2)}() attributes {{{attrs(intr, wave, m, n, k, target)}}} {{\n"
            + "\n".join(ind + line for line in text.splitlines())
            + f"\n{ind}}}\n"
        )
        header = (
            f"// Hand-back fixture ({target}, {intr}): generated by gen_handback_fixtures.py.\n"
            f"// A whole module at the executable-sources phase whose dispatch is hand-distributed code.\n"
        )
        (HERE / name).write_text(header + src[: func.start()] + new + src[func.end() :])
        print("wrote", name)


if __name__ == "__main__":
    main()
