"""The matrix-instruction catalogue: one frozen record per instruction and wave size.

Each record says what the instruction computes (M x N x K, element types), which MLIR op emits it
and with which per-lane vector types, which ISA mnemonic must appear in the final code, and the
hardware-exact batch-lane-vector layout of each operand (see ``target/layout.py``).

Sources for the layouts:
- RDNA3 WMMA: "How to accelerate AI applications on RDNA 3 using WMMA" (GPUOpen, 2023) and the
  RDNA3 ISA guide section 7.9: A lane l holds A[l%16][0..15], B lane l holds B[0..15][l%16],
  lanes 16-31 (and 32-63 in wave64) replicate 0-15; C/D: wave32 row 2v+l/16, wave64 row 4v+l/16,
  column l%16; 16-bit C/D use one half of each VGPR (OPSEL).
- RDNA4 WMMA: "Using the Matrix Cores of AMD RDNA 4 architecture GPUs" (GPUOpen, 2025) and the
  RDNA4 ISA guide: no replication; C/D row v + 8*(l/16); A/B K order within a lane is permuted:
  k = 8*(v/4) + 4*(l/16) + v%4 for 16-bit (v = 2*vgpr + half) and 8-bit (v = 4*vgpr + byte) data.
- CDNA3/CDNA4 MFMA: "Matrix Core Programming on AMD GPUs" (ROCm blogs, 2025) and the CDNA3/4 ISA
  guides chapter 7: A lane l holds A[l%M][kpl*(l/M) + v] (kpl = K elements per lane),
  C/D of 16x16: row 4*(l/16) + v; of 32x32: row 8*(v/4) + 4*(l/32) + v%4; column l%M.
- NVIDIA mma.sync: PTX ISA "Matrix Fragments for mma.m16n8k16 / m16n8k32": groupID = l/4,
  threadID_in_group = l%4.

The runtime's ISA model encodes the same instructions independently; ``e2e_tests`` check every
record here against it.

Hopper's warpgroup MMA (family "wgmma", 128 threads, B read from shared memory through a matrix
descriptor) is the second record type here (``WarpgroupIntrinsic``, ``WGMMA_CATALOGUE``, its
shared-memory operands in ``target/smem_layout.py``). ``Target.intrinsic`` answers both;
``Target.intrinsics`` lists the per-wave records the matmul family chooses from and
``Target.warpgroup_intrinsics`` the warpgroup ones the wgmma family takes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.target.layout import COL, ROW, Layout, make_layout
from mmaflow.compiler.target.smem_layout import Major, SmemLayout, Swizzle

# Element types, as MLIR spells them.
F32, F16, BF16, I32, I8 = "f32", "f16", "bf16", "i32", "i8"
I4 = "i4"  # RDNA3's iu4 WMMA (packed eight to a VGPR; signedness from unsignedA/B, as iu8)
F64 = "f64"
F8E4M3FNUZ, F8E5M2FNUZ, F8E4M3FN, F8E5M2 = "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3FN", "f8E5M2"
# The OCP sub-byte formats CDNA4's f8f6f4 MFMA reads (MLIR: f6E2M3FN, f6E3M2FN, f4E2M1FN)
F6E2M3FN, F6E3M2FN, F4E2M1FN = "f6E2M3FN", "f6E3M2FN", "f4E2M1FN"

TYPE_BITS = {
    F64: 64,
    F32: 32,
    I32: 32,
    F16: 16,
    BF16: 16,
    I8: 8,
    I4: 4,
    F8E4M3FNUZ: 8,
    F8E5M2FNUZ: 8,
    F8E4M3FN: 8,
    F8E5M2: 8,
    F6E2M3FN: 6,
    F6E3M2FN: 6,
    F4E2M1FN: 4,
}
# f8f6f4 MFMA's A and B formats (gfx950): any of these for either operand, the format code in
# the instruction's cbsz (A) and blgp (B) fields, as the final ISA prints it.
F8F6F4_FORMATS = {F8E4M3FN: 0, F8E5M2: 1, F6E2M3FN: 2, F6E3M2FN: 3, F4E2M1FN: 4}


@dataclass(frozen=True)
class Intrinsic:
    name: str
    family: str  # "wmma_rdna3" | "wmma_rdna4" | "mfma" | "mma_sync" (warpgroup "wgmma": target/intrinsics.py)
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    wave_size: int
    op: str  # MLIR op emitted by the distribution
    mnemonic: str  # must appear in the final ISA (.rocmasm / .ptx)
    isa_key: str  # key of this instruction in mmaflow.runtime.isa (independent model)
    a: Layout
    b: Layout
    c: Layout
    a_shape: tuple[int, ...]  # per-lane vector shape the MLIR op takes
    b_shape: tuple[int, ...]
    c_shape: tuple[int, ...]
    unsigned_a: bool = False
    unsigned_b: bool = False
    # Codegen may use another K order inside a lane if A and B use the same one (the sum over K
    # is unchanged); None means codegen uses the hardware order.
    codegen_k_order: tuple[str, ...] | None = None
    # xf32 (gfx942): the instruction rounds its f32 inputs to 10 mantissa bits (``reducePrecision``).
    # Opt-in: no heuristic picks it; a user asks by name (--config intrinsic=...).
    reduced_precision: bool = False
    # Cycles one SIMD spends on one instruction (``MFMA_CYCLES``, CDNA only; None: the static cost
    # model falls back to the part's peak for the operand type)
    cycles: int | None = None
    # Block-scaled (CDNA4's v_mfma_scale_*, ``amdgpu.scaled_mfma``): the K values one E8M0 scale
    # covers (32: an OCP MX block; 0: not scaled), and where each lane's scale of A and of B sits:
    # an M x K/32 (K/32 x N) matrix of scales, one element a lane (``scaled_f8f6f4``)
    scale_block: int = 0
    scale_a: Layout | None = None
    scale_b: Layout | None = None

    def __post_init__(self):
        assert (self.a.rows, self.a.cols) == (self.m, self.k), f"{self.name}: A is not MxK"
        assert (self.b.rows, self.b.cols) == (self.k, self.n), f"{self.name}: B is not KxN"
        assert (self.c.rows, self.c.cols) == (self.m, self.n), f"{self.name}: C is not MxN"
        for lay, shape in ((self.a, self.a_shape), (self.b, self.b_shape), (self.c, self.c_shape)):
            assert lay.wave_size == self.wave_size, f"{self.name}: {lay.operand} wave size"
            assert math.prod(shape) == lay.op_vector_length, (
                f"{self.name}: {lay.operand} vector shape {shape} != {lay.op_vector_length} slots"
            )
        if self.codegen_k_order is not None:
            # The logical order must be a reordering of the same K dims for A and B.
            assert sorted(self.codegen_k_order) == sorted(self.a.col_order)
            assert sorted(self.codegen_k_order) == sorted(self.b.row_order)

    # ---- derived facts -----------------------------------------------------------------------
    @property
    def sub_byte(self) -> bool:
        """A 4- or 6-bit operand (gfx950's f8f6f4, RDNA3's iu4): the matmul kernel moves such data
        as bytes, the decode kernel does not stream it."""
        return TYPE_BITS[self.a_type] < 8 or TYPE_BITS[self.b_type] < 8

    def operand(self, which: str) -> Layout:
        return {"A": self.a, "B": self.b, "C": self.c}[which]

    def element_type(self, which: str) -> str:
        return {"A": self.a_type, "B": self.b_type, "C": self.c_type}[which]

    def codegen_layouts(self) -> tuple[Layout, Layout, Layout]:
        """Layouts the distribution packs registers with (K possibly permuted alike in A and B)."""
        if self.codegen_k_order is None:
            return self.a, self.b, self.c
        return (self.a.permute_axis(COL, self.codegen_k_order), self.b.permute_axis(ROW, self.codegen_k_order), self.c)

    def vgprs(self, which: str) -> int:
        """32-bit registers one lane spends on one instruction's operand."""
        lay = self.operand(which)
        bits = TYPE_BITS[self.element_type(which)]
        if which == "C" and self.family == "wmma_rdna3" and bits == 16:
            return lay.elements  # one element per VGPR (OPSEL half)
        return math.ceil(lay.op_vector_length * bits / 32)

    def wave_tile_cost(self, wave_m: int, wave_n: int, wave_k: int) -> dict:
        """Instructions and registers a wave spends on a wave_m x wave_n tile per wave_k K step."""
        if wave_m % self.m or wave_n % self.n or wave_k % self.k:
            raise UnsupportedError(
                f"wave tile {wave_m}x{wave_n}x{wave_k} is not a multiple of {self.name} ({self.m}x{self.n}x{self.k})"
            )
        bm, bn, bk = wave_m // self.m, wave_n // self.n, wave_k // self.k
        return {
            "instructions": bm * bn * bk,
            "acc_vgprs": bm * bn * self.vgprs("C"),
            "a_vgprs": bm * bk * self.vgprs("A"),
            "b_vgprs": bk * bn * self.vgprs("B"),
        }

    def describe(self) -> str:
        sign = ""
        if self.a_type in (I8, I4):
            sign = (
                f" ({'unsigned' if self.unsigned_a else 'signed'} A, {'unsigned' if self.unsigned_b else 'signed'} B)"
            )
        return (
            f"{self.name}: {self.m}x{self.n}x{self.k} {self.a_type} x {self.b_type} -> "
            f"{self.c_type}{sign}, wave{self.wave_size}, op {self.op}, ISA {self.mnemonic}"
        )


# --------------------------------------------------------------------------------------------
# Layout builders, one per instruction family.


def _rdna3(a_t, b_t, c_t, wave, mnemonic, name, unsigned=False):
    # A: lane%16 = row m; element v = k.  B: lane%16 = col n; element v = k.
    a = make_layout("A", wave, rows=[("LaneX", 16)], cols=[("VectorX", 16)])
    b = make_layout("B", wave, rows=[("VectorX", 16)], cols=[("LaneX", 16)])
    per_lane_rows = 8 if wave == 32 else 4  # C elements per lane
    lane_groups = 16 * 16 // (16 * per_lane_rows)  # 2 (w32) or 4 (w64)
    stride = 2 if TYPE_BITS[c_t] == 16 else 1
    c = make_layout(
        "C", wave, rows=[("LaneY", lane_groups), ("VectorX", per_lane_rows)], cols=[("LaneX", 16)], vector_stride=stride
    )
    a_len = 16  # 8 VGPRs of f16 pairs or 4 VGPRs of i8 quads: 16 elements either way
    return Intrinsic(
        name,
        "wmma_rdna3",
        16,
        16,
        16,
        a_t,
        b_t,
        c_t,
        wave,
        "amdgpu.wmma",
        mnemonic,
        f"rdna3.{mnemonic}.w{wave}",
        a,
        b,
        c,
        (a_len,),
        (a_len,),
        (per_lane_rows * stride,),
        unsigned,
        unsigned,
    )


def _rdna4(a_t, b_t, c_t, mnemonic, name, unsigned=False, k=16):
    if TYPE_BITS[a_t] == 16:
        # K inside a lane (hardware): k = VectorX(4) + 4*LaneY(2) + 8*VectorY(2).
        k_dims = [("VectorX", 4), ("LaneY", 2), ("VectorY", 2)]
        # Logical order: 8 consecutive K per lane (one 128-bit load for 16-bit data).
        codegen = ("VectorX", "VectorY", "LaneY")
    else:
        # 8- and 4-bit data: lanes 0-15 hold the first half of K, consecutive, lanes 16-31 the
        # second (the AMD Matrix Instruction Calculator's RDNA4 tables; runtime/isa/tables.py [R4C])
        k_dims, codegen = [("VectorX", k // 2), ("LaneY", 2)], None
    a = make_layout("A", 32, rows=[("LaneX", 16)], cols=k_dims)
    b = make_layout("B", 32, rows=k_dims, cols=[("LaneX", 16)])
    c = make_layout("C", 32, rows=[("VectorX", 8), ("LaneY", 2)], cols=[("LaneX", 16)])
    return Intrinsic(
        name,
        "wmma_rdna4",
        16,
        16,
        k,
        a_t,
        b_t,
        c_t,
        32,
        "amdgpu.wmma",
        mnemonic,
        f"rdna4.{mnemonic}",
        a,
        b,
        c,
        (k // 2,),
        (k // 2,),
        (8,),
        unsigned,
        unsigned,
        codegen_k_order=codegen,
    )


# Cycles per MFMA on one SIMD, CDNA3 and CDNA4 alike (the cycle table of "Matrix Core Programming on
# AMD CDNA3 and CDNA4 architecture", ROCm blogs 2025; peak = 2*M*N*K * SIMDs * clock / cycles
# reproduces MI325X's 1307 TFLOP/s f16 and MI355X's 2.5 PF f16 / 5 PF fp8 / 10 PF fp4). i8 as the
# same-shape fp8 (CDNA3: 2615 TOP/s = fp8's; gfx950's 16x16x64 at 16 gives MI355X's 5 POP/s), xf32
# from MI300X's 653.7 TFLOP/s. Keyed by (M, K, operand class).
MFMA_CYCLES = {
    (16, 4, "f64"): 64,
    (16, 4, "f32"): 32,
    (32, 2, "f32"): 64,
    (16, 8, "xf32"): 16,
    (32, 4, "xf32"): 32,
    (16, 16, "16"): 16,
    (32, 8, "16"): 32,
    (16, 32, "16"): 16,  # gfx950: twice 16x16x16's K in the same cycles
    (32, 16, "16"): 32,
    (16, 32, "8"): 16,
    (32, 16, "8"): 32,
    (16, 64, "8"): 16,  # gfx950 i8
    (32, 32, "8"): 32,
    (16, 128, "f8f6f4-8"): 32,  # "larger cycle count if either matrix A or B is FP8"
    (32, 64, "f8f6f4-8"): 64,
    (16, 128, "f8f6f4"): 16,
    (32, 64, "f8f6f4"): 32,
}


def _mfma_cycles(m, k, a_t, b_t, mnemonic, reduced_precision=False) -> int:
    if mnemonic.endswith("_f8f6f4"):
        cls = "f8f6f4-8" if 8 in (TYPE_BITS[a_t], TYPE_BITS[b_t]) else "f8f6f4"
    elif reduced_precision:
        cls = "xf32"
    elif a_t in (F64, F32):
        cls = a_t
    else:
        cls = str(TYPE_BITS[a_t])
    return MFMA_CYCLES[m, k, cls]


def _mfma(m, n, k, a_t, c_t, mnemonic, name, b_t=None, reduced_precision=False):
    b_t = b_t or a_t
    kpl = k * m // 64  # K elements per lane: 16x16x16 -> 4, 32x32x8 -> 4, 16x16x32 -> 8
    groups = 64 // m  # lane groups along K
    a = make_layout("A", 64, rows=[("LaneX", m)], cols=[("VectorX", kpl), ("LaneY", groups)])
    b = make_layout("B", 64, rows=[("VectorX", kpl), ("LaneY", groups)], cols=[("LaneX", n)])
    if m == 16:
        c = make_layout("C", 64, rows=[("VectorX", 4), ("LaneY", 4)], cols=[("LaneX", 16)])
        c_len = 4
    else:
        c = make_layout("C", 64, rows=[("VectorX", 4), ("LaneY", 2), ("VectorY", 4)], cols=[("LaneX", 32)])
        c_len = 16
    return Intrinsic(
        name,
        "mfma",
        m,
        n,
        k,
        a_t,
        b_t,
        c_t,
        64,
        "amdgpu.mfma",
        mnemonic,
        f"cdna.{mnemonic}",
        a,
        b,
        c,
        (kpl,),
        (kpl,),
        (c_len,),
        reduced_precision=reduced_precision,
        cycles=_mfma_cycles(m, k, a_t, b_t, mnemonic, reduced_precision),
    )


def _mma_sync(k, a_t, c_t, mnemonic, name):
    # groupID = lane/4 -> LaneY(8); threadID_in_group = lane%4 -> LaneX(4).
    per = 2 if k == 16 else 4  # elements per 32-bit register
    a = make_layout(
        "A",
        32,
        rows=[("LaneY", 8), ("VectorZ", 2)],
        cols=[("VectorX", per), ("LaneX", 4), ("VectorY", 2)],
        vector_order=("VectorX", "VectorZ", "VectorY"),
    )
    b = make_layout("B", 32, rows=[("VectorX", per), ("LaneX", 4), ("VectorY", 2)], cols=[("LaneY", 8)])
    c = make_layout("C", 32, rows=[("LaneY", 8), ("VectorY", 2)], cols=[("VectorX", 2), ("LaneX", 4)])
    return Intrinsic(
        name,
        "mma_sync",
        16,
        8,
        k,
        a_t,
        a_t,
        c_t,
        32,
        "nvgpu.mma.sync",
        mnemonic,
        f"ptx.{mnemonic}",
        a,
        b,
        c,
        (4, per),
        (2, per),
        (2, 2),
    )


def _rdna3_set(wave):
    sfx = "" if wave == 32 else "_W64"
    return [
        _rdna3(F16, F16, F32, wave, "v_wmma_f32_16x16x16_f16", "WMMA_F32_16x16x16_F16" + sfx),
        _rdna3(BF16, BF16, F32, wave, "v_wmma_f32_16x16x16_bf16", "WMMA_F32_16x16x16_BF16" + sfx),
        _rdna3(F16, F16, F16, wave, "v_wmma_f16_16x16x16_f16", "WMMA_F16_16x16x16_F16" + sfx),
        _rdna3(BF16, BF16, BF16, wave, "v_wmma_bf16_16x16x16_bf16", "WMMA_BF16_16x16x16_BF16" + sfx),
        _rdna3(I8, I8, I32, wave, "v_wmma_i32_16x16x16_iu8", "WMMA_I32_16x16x16_I8" + sfx),
        _rdna3(I8, I8, I32, wave, "v_wmma_i32_16x16x16_iu8", "WMMA_I32_16x16x16_U8" + sfx, unsigned=True),
        # iu4 ([R3] 7.9: "one row of A, 16 K values" a lane, as iu8, packed eight to a VGPR: two VGPRs;
        # IREE 3.13 lowers amdgpu.wmma 16x16x16 on vector<16xi4> to it, its own codegen never does)
        _rdna3(I4, I4, I32, wave, "v_wmma_i32_16x16x16_iu4", "WMMA_I32_16x16x16_I4" + sfx),
        _rdna3(I4, I4, I32, wave, "v_wmma_i32_16x16x16_iu4", "WMMA_I32_16x16x16_U4" + sfx, unsigned=True),
    ]


_RDNA4 = [
    _rdna4(F16, F16, F32, "v_wmma_f32_16x16x16_f16", "WMMA_F32_16x16x16_F16"),
    _rdna4(BF16, BF16, F32, "v_wmma_f32_16x16x16_bf16", "WMMA_F32_16x16x16_BF16"),
    _rdna4(F16, F16, F16, "v_wmma_f16_16x16x16_f16", "WMMA_F16_16x16x16_F16"),
    _rdna4(BF16, BF16, BF16, "v_wmma_bf16_16x16x16_bf16", "WMMA_BF16_16x16x16_BF16"),
    _rdna4(F8E4M3FN, F8E4M3FN, F32, "v_wmma_f32_16x16x16_fp8_fp8", "WMMA_F32_16x16x16_F8E4M3FN"),
    _rdna4(F8E5M2, F8E5M2, F32, "v_wmma_f32_16x16x16_bf8_bf8", "WMMA_F32_16x16x16_F8E5M2"),
    # A and B in different 8-bit formats: the same lanes and registers, each read in its own
    _rdna4(F8E4M3FN, F8E5M2, F32, "v_wmma_f32_16x16x16_fp8_bf8", "WMMA_F32_16x16x16_F8E4M3FN_F8E5M2"),
    _rdna4(F8E5M2, F8E4M3FN, F32, "v_wmma_f32_16x16x16_bf8_fp8", "WMMA_F32_16x16x16_F8E5M2_F8E4M3FN"),
    _rdna4(I8, I8, I32, "v_wmma_i32_16x16x16_iu8", "WMMA_I32_16x16x16_I8"),
    _rdna4(I8, I8, I32, "v_wmma_i32_16x16x16_iu8", "WMMA_I32_16x16x16_U8", unsigned=True),
    # iu4: 16x16x32 first (twice 16x16x16's K in the same 8 cycles: the calculator's -d), signed
    # or unsigned per the NEG bits as iu8
    _rdna4(I4, I4, I32, "v_wmma_i32_16x16x32_iu4", "WMMA_I32_16x16x32_I4", k=32),
    _rdna4(I4, I4, I32, "v_wmma_i32_16x16x32_iu4", "WMMA_I32_16x16x32_U4", unsigned=True, k=32),
    _rdna4(I4, I4, I32, "v_wmma_i32_16x16x16_iu4", "WMMA_I32_16x16x16_I4"),
    _rdna4(I4, I4, I32, "v_wmma_i32_16x16x16_iu4", "WMMA_I32_16x16x16_U4", unsigned=True),
]


def _mfma_mixed(fp8, bf8):
    """A and B in different 8-bit formats, fp8 x bf8 and bf8 x fp8 (A's first in the mnemonic),
    at both sizes: the same lanes and registers, each operand read in its own format."""
    return [
        _mfma(m, m, k, a, F32, f"v_mfma_f32_{m}x{m}x{k}_{an}_{bn}", f"MFMA_F32_{m}x{m}x{k}_{a.upper()}_{b.upper()}", b)
        for m, k in ((16, 32), (32, 16))
        for (a, an), (b, bn) in (((fp8, "fp8"), (bf8, "bf8")), ((bf8, "bf8"), (fp8, "fp8")))
    ]


def _f8f6f4(m, a_t, b_t):
    """CDNA4's ``v_mfma_f32_{16x16x128,32x32x64}_f8f6f4``: A and B each any OCP 8/6/4-bit format,
    32 elements of each a lane. Which K a lane holds depends on the width: 4- and 6-bit data
    hold 32 consecutive K (lane group g: K 32g..32g+31); 8-bit data fill each 128-bit half of the
    lane's 256 bits with 16 consecutive K, the second half K/2 further: K = 16g + VectorX +
    (K/2)*VectorY. The formats are the instruction's cbsz / blgp fields (``F8F6F4_FORMATS``)."""
    k = 128 if m == 16 else 64
    groups = 64 // m
    if TYPE_BITS[a_t] == 8:
        a_cols = [("VectorX", 16), ("LaneY", groups), ("VectorY", 2)]
    else:
        a_cols = [("VectorX", 32), ("LaneY", groups)]
    if TYPE_BITS[b_t] == 8:
        b_rows = [("VectorX", 16), ("LaneY", groups), ("VectorY", 2)]
    else:
        b_rows = [("VectorX", 32), ("LaneY", groups)]
    a = make_layout("A", 64, rows=[("LaneX", m)], cols=a_cols)
    b = make_layout("B", 64, rows=b_rows, cols=[("LaneX", m)])
    if m == 16:
        c = make_layout("C", 64, rows=[("VectorX", 4), ("LaneY", 4)], cols=[("LaneX", 16)])
    else:
        c = make_layout("C", 64, rows=[("VectorX", 4), ("LaneY", 2), ("VectorY", 4)], cols=[("LaneX", 32)])
    mnemonic = f"v_mfma_f32_{m}x{m}x{k}_f8f6f4"
    suffix = a_t.upper() if a_t == b_t else f"{a_t.upper()}_{b_t.upper()}"
    return Intrinsic(
        f"MFMA_F32_{m}x{m}x{k}_{suffix}",
        "mfma",
        m,
        m,
        k,
        a_t,
        b_t,
        F32,
        64,
        "amdgpu.mfma",
        mnemonic,
        f"cdna.{mnemonic}.{F8F6F4_FORMATS[a_t]}.{F8F6F4_FORMATS[b_t]}",
        a,
        b,
        c,
        (32,),
        (32,),
        (4 if m == 16 else 16,),
        cycles=_mfma_cycles(m, k, a_t, b_t, mnemonic),
    )


# gfx950's f8f6f4 MFMA, every format pair at both sizes. Sources: AMD's "Matrix Core Programming
# on AMD CDNA3 and CDNA4 architecture" (ROCm blogs, 2025), figures 9 and 10: the 8-bit and 4-bit
# lane layouts of 32x32x64; Triton's gfx950 scaled-MFMA linear layouts (test/TritonGPU/amd,
# mxfp4: 16 bytes of consecutive K a lane) agree. 16x16x128 is taken to split 8-bit data as
# 32x32x64 does (at K/2), and 6-bit data to lie as 4-bit data (IREE 3.13's ScaledMMA layout, 32
# consecutive K a lane): no document at hand draws those two. A same-format product does not
# depend on the K order inside a lane (A and B share it); a mixed-width pair does.
_F8F6F4 = [_f8f6f4(m, a, b) for m in (16, 32) for a in F8F6F4_FORMATS for b in F8F6F4_FORMATS]


def scaled_f8f6f4(plain: Intrinsic) -> Intrinsic:
    """The block-scaled form of an f8f6f4 record (``v_mfma_scale_f32_*_f8f6f4``): the same lanes,
    and each lane's E8M0 scale (byte 0 of a scale VGPR, op_sel 0) multiplies the 32 values that
    lane holds -- one MX block of 32 consecutive K in the 4/6-bit layouts, so the scale of lane l
    is that of row l % M (column l % N for B), block l / M. For 8-bit data, whose two 16-value
    halves lie K/2 apart in the hardware's order, the record's codegen K order (VectorX, VectorY,
    LaneY) makes a lane's 32 values consecutive again; a dot product does not depend on a K order
    A and B share. Mixed 8-bit x 4/6-bit pairs have no common order: not catalogued scaled.
    Sources: the ISA model's ``tables`` notes (Modular's MXFP4 kernel, IREE's ScaledMMA)."""
    groups = 64 // plain.m
    eight = TYPE_BITS[plain.a_type] == 8
    assert eight == (TYPE_BITS[plain.b_type] == 8), plain.name
    scale_a = make_layout("A", 64, rows=[("LaneX", plain.m)], cols=[("LaneY", groups)])
    scale_b = make_layout("B", 64, rows=[("LaneY", groups)], cols=[("LaneX", plain.n)])
    return replace(
        plain,
        name=plain.name.replace("MFMA_F32_", "MFMA_SCALE_F32_"),
        op="amdgpu.scaled_mfma",
        mnemonic=plain.mnemonic.replace("v_mfma_f32_", "v_mfma_scale_f32_"),
        isa_key=plain.isa_key.replace("v_mfma_f32_", "v_mfma_scale_f32_"),
        codegen_k_order=("VectorX", "VectorY", "LaneY") if eight else None,
        scale_block=32,
        scale_a=scale_a,
        scale_b=scale_b,
    )


# gfx950's block-scaled MFMA (MXFP8 / MXFP6 / MXFP4): the same-width pairs of the f8f6f4 records
# (4- and 6-bit data share a layout). The matmul kernel issues them for block-scaled (MXFP) matmuls.
_SCALED_F8F6F4 = [scaled_f8f6f4(i) for i in _F8F6F4 if (TYPE_BITS[i.a_type] == 8) == (TYPE_BITS[i.b_type] == 8)]


_CDNA3 = [
    _mfma(16, 16, 16, F16, F32, "v_mfma_f32_16x16x16_f16", "MFMA_F32_16x16x16_F16"),
    _mfma(32, 32, 8, F16, F32, "v_mfma_f32_32x32x8_f16", "MFMA_F32_32x32x8_F16"),
    _mfma(16, 16, 16, BF16, F32, "v_mfma_f32_16x16x16_bf16", "MFMA_F32_16x16x16_BF16"),
    _mfma(32, 32, 8, BF16, F32, "v_mfma_f32_32x32x8_bf16", "MFMA_F32_32x32x8_BF16"),
    _mfma(16, 16, 32, I8, I32, "v_mfma_i32_16x16x32_i8", "MFMA_I32_16x16x32_I8"),
    _mfma(32, 32, 16, I8, I32, "v_mfma_i32_32x32x16_i8", "MFMA_I32_32x32x16_I8"),
    _mfma(16, 16, 32, F8E4M3FNUZ, F32, "v_mfma_f32_16x16x32_fp8_fp8", "MFMA_F32_16x16x32_F8E4M3FNUZ"),
    _mfma(16, 16, 32, F8E5M2FNUZ, F32, "v_mfma_f32_16x16x32_bf8_bf8", "MFMA_F32_16x16x32_F8E5M2FNUZ"),
    _mfma(32, 32, 16, F8E4M3FNUZ, F32, "v_mfma_f32_32x32x16_fp8_fp8", "MFMA_F32_32x32x16_F8E4M3FNUZ"),
    _mfma(32, 32, 16, F8E5M2FNUZ, F32, "v_mfma_f32_32x32x16_bf8_bf8", "MFMA_F32_32x32x16_F8E5M2FNUZ"),
    *_mfma_mixed(F8E4M3FNUZ, F8E5M2FNUZ),
    # f32 x f32 -> f32, one f32 of A and of B per lane (CDNA3 and CDNA4 alike)
    _mfma(16, 16, 4, F32, F32, "v_mfma_f32_16x16x4_f32", "MFMA_F32_16x16x4_F32"),
    _mfma(32, 32, 2, F32, F32, "v_mfma_f32_32x32x2_f32", "MFMA_F32_32x32x2_F32"),
    # f64 x f64 -> f64: one f64 of A and of B per lane, D 4 f64 a lane as 16x16 f32's
    _mfma(16, 16, 4, F64, F64, "v_mfma_f64_16x16x4_f64", "MFMA_F64_16x16x4_F64"),
    # xf32 (CDNA3 only; gfx950 dropped it): f32 inputs, two a lane, rounded to 10 mantissa bits by
    # the instruction; twice f32's K per instruction. Opt-in (``reduced_precision``).
    _mfma(16, 16, 8, F32, F32, "v_mfma_f32_16x16x8_xf32", "MFMA_F32_16x16x8_XF32", reduced_precision=True),
    _mfma(32, 32, 4, F32, F32, "v_mfma_f32_32x32x4_xf32", "MFMA_F32_32x32x4_XF32", reduced_precision=True),
]

# gfx950's double-rate instructions come first in its catalogue, so that the heuristic's first
# match is the fastest (``MFMA_CYCLES``: twice the K of CDNA3's shapes in the same cycles; OCP fp8 /
# bf8 through f8f6f4, 16x16x128 in 32 cycles against 16x16x32's quarter of the K in 16). IREE
# 3.13's gfx950 target lists its MMAs in the same order.
_CDNA4_FIRST = [
    _mfma(16, 16, 32, F16, F32, "v_mfma_f32_16x16x32_f16", "MFMA_F32_16x16x32_F16"),
    _mfma(32, 32, 16, F16, F32, "v_mfma_f32_32x32x16_f16", "MFMA_F32_32x32x16_F16"),
    _mfma(16, 16, 32, BF16, F32, "v_mfma_f32_16x16x32_bf16", "MFMA_F32_16x16x32_BF16"),
    _mfma(32, 32, 16, BF16, F32, "v_mfma_f32_32x32x16_bf16", "MFMA_F32_32x32x16_BF16"),
    _mfma(16, 16, 64, I8, I32, "v_mfma_i32_16x16x64_i8", "MFMA_I32_16x16x64_I8"),
    _mfma(32, 32, 32, I8, I32, "v_mfma_i32_32x32x32_i8", "MFMA_I32_32x32x32_I8"),
    *(i for i in _F8F6F4 if TYPE_BITS[i.a_type] == TYPE_BITS[i.b_type] == 8),
]

_CDNA4_EXTRA = [
    _mfma(16, 16, 32, F8E4M3FN, F32, "v_mfma_f32_16x16x32_fp8_fp8", "MFMA_F32_16x16x32_F8E4M3FN"),
    _mfma(16, 16, 32, F8E5M2, F32, "v_mfma_f32_16x16x32_bf8_bf8", "MFMA_F32_16x16x32_F8E5M2"),
    _mfma(32, 32, 16, F8E4M3FN, F32, "v_mfma_f32_32x32x16_fp8_fp8", "MFMA_F32_32x32x16_F8E4M3FN"),
    _mfma(32, 32, 16, F8E5M2, F32, "v_mfma_f32_32x32x16_bf8_bf8", "MFMA_F32_32x32x16_F8E5M2"),
    *_mfma_mixed(F8E4M3FN, F8E5M2),
    *(i for i in _F8F6F4 if not TYPE_BITS[i.a_type] == TYPE_BITS[i.b_type] == 8),
]

_NV = [
    _mma_sync(16, F16, F32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "MMA_SYNC_F32_16x8x16_F16"),
    _mma_sync(16, BF16, F32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "MMA_SYNC_F32_16x8x16_BF16"),
    _mma_sync(16, F16, F16, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "MMA_SYNC_F16_16x8x16_F16"),
    # nvgpu.mma.sync lowers integer MMAs with .satfinite: the s32 accumulator saturates on overflow.
    _mma_sync(32, I8, I32, "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32", "MMA_SYNC_I32_16x8x32_I8"),
]

# Per architecture family: the block-scaled instructions (``Target.scaled_intrinsics``): catalogued and
# in the ISA model, apart from what plain matmuls choose from (block-scaled problems take them only).
SCALED_CATALOGUE: dict[str, tuple[Intrinsic, ...]] = {"cdna4": tuple(_SCALED_F8F6F4)}

# Per architecture family: the instructions mmaflow may select.
CATALOGUE: dict[str, tuple[Intrinsic, ...]] = {
    "rdna3": tuple(_rdna3_set(32) + _rdna3_set(64)),
    "rdna4": tuple(_RDNA4),
    "cdna3": tuple(_CDNA3),
    "cdna4": tuple(_CDNA4_FIRST)
    + tuple(i for i in _CDNA3 if "FNUZ" not in i.name and not i.reduced_precision)
    + tuple(_CDNA4_EXTRA),
    "nvidia": tuple(_NV),
}

# ----------------------------------------------------------------------------------------------
# Warpgroup MMA (Hopper wgmma), the catalogue's other record type.
#
# Warpgroup MMA (Hopper, sm_90a ``wgmma.mma_async``): catalogue records, not yet emitted.
#
# One instruction is issued by a warpgroup, 4 consecutive warps = 128 threads, and computes a
# 64 x N x K product (N = 8, 16, ..., 256; K = 16 for f16/bf16, 32 for fp8). The accumulator and,
# optionally, A live in registers and have batch-lane-vector layouts over the 128 threads (the
# ``Layout`` model with wave_size 128: LaneX = threadID_in_group (4), LaneY = groupID (8),
# LaneZ = warp in the warpgroup (4)); B, and A when it is not in registers, are read from shared
# memory through a matrix descriptor (``target/smem_layout.py``).
#
# Source: NVIDIA PTX ISA 9.7.15.5.1.1 "Register Fragments" (Figures 148/149 .m64nNk16, 152/153
# .m64nNk32), checked against CUTLASS cute/atom/mma_traits_sm90_gmma.hpp (ALayout_64x16,
# ALayout_64x32, CLayout_64xN):
#
#     A, 16-bit (a0..a7):  row = 16*warp + groupID + 8*((i/2)%2), col = 2*tig + i%2 + 8*(i/4)
#         rows = LaneY(8) . VectorZ(2) . LaneZ(4)   cols = VectorX(2) . LaneX(4) . VectorY(2)
#         element order VectorX, VectorZ, VectorY  (mma.sync m16n8k16's A, one 16-row slab per warp)
#     A, 8-bit (a0..a15):  row = 16*warp + groupID + 8*((i/4)%2), col = 4*tig + i%4 + 16*(i/8)
#     D, f32 (d0..d(N/2-1)): row = 16*warp + groupID + 8*((i/2)%2), col = 8*(i/4) + 2*tig + i%2
#         rows = LaneY(8) . VectorY(2) . LaneZ(4)   cols = VectorX(2) . LaneX(4) . VectorZ(N/8)
#
# Worked example (A, f16): thread 37 is warp 1, groupID 1, tig 1; its a6 (VectorX 0, VectorZ 1,
# VectorY 1) is A[16 + 1 + 8][2 + 0 + 8] = A[25][10].
#
# These records are deliberately not in ``intrinsics.CATALOGUE`` (``Target.intrinsics()``, what
# the mma.sync heuristic chooses from): configure reaches them only through
# ``wgmma.heuristic.warpgroup_default`` (the measured sm_90a rule) or ``--config intrinsic=NAME``.
# ``Target.intrinsic(name)`` returns any of them on sm_90a, the kernel of ``kernels/wgmma/plan.py`` (fp8:
# K-major A and B only, as the instruction has no transpose for 8-bit types: ``majors``).
# ``mmaflow layout sm_90a`` prints them, and ``e2e_tests/test_wgmma_layout.py`` checks each against
# the runtime's independent ISA model.

WARPGROUP = 128
WGMMA_N = tuple(range(8, 257, 8))  # PTX "Matrix Shape": .m64nNk16 / .m64nNk32, N = 8*i, i = 1..32
_PTX_NAME = {F16: "f16", BF16: "bf16", F8E4M3FN: "e4m3", F8E5M2: "e5m2"}
WGMMA_CODEGEN_TYPES = (F16, BF16, F8E4M3FN, F8E5M2)  # what the warpgroup kernel (kernels/wgmma/plan.py) emits
FP8 = (F8E4M3FN, F8E5M2)


@dataclass(frozen=True)
class WarpgroupIntrinsic:
    """One wgmma.mma_async shape and type: register layouts of A and D, and the shared-memory
    major orders its descriptor operands may take."""

    name: str
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    mnemonic: str
    isa_key: str
    a: Layout  # A from registers (the RS form)
    c: Layout
    a_shape: tuple[int, ...]
    c_shape: tuple[int, ...]
    family: str = "wgmma"
    unsigned_a: bool = False  # (the epilogue's conversions ask; no wgmma is unsigned)
    unsigned_b: bool = False
    wave_size: int = WARPGROUP
    op: str = "nvvm.wgmma.mma_async"

    def __post_init__(self):
        assert self.m == 64 and self.n in WGMMA_N, f"{self.name}: m64nN with N in 8..256 step 8"
        assert self.k * TYPE_BITS[self.a_type] == 256, f"{self.name}: K is 32 bytes of A"
        assert (self.a.rows, self.a.cols) == (self.m, self.k), f"{self.name}: A is not MxK"
        assert (self.c.rows, self.c.cols) == (self.m, self.n), f"{self.name}: C is not MxN"
        for lay, shape in ((self.a, self.a_shape), (self.c, self.c_shape)):
            assert lay.wave_size == WARPGROUP and lay.replication == 1, f"{self.name}: {lay.operand} spans 128 threads"
            assert math.prod(shape) == lay.op_vector_length, f"{self.name}: {lay.operand} vector shape {shape}"

    # ---- what the record answers -----------------------------------------------------------------
    @property
    def majors(self) -> tuple[Major, ...]:
        """Shared-memory orders of A and B: MN-major (imm-trans) exists for 16-bit types only."""
        return (Major.K, Major.MN) if TYPE_BITS[self.a_type] == 16 else (Major.K,)

    def operand(self, which: str) -> Layout:
        if which == "A":
            return self.a
        if which == "C":
            return self.c
        raise UnsupportedError(
            f"{self.name}: {which} is read from shared memory through a matrix descriptor, it "
            f"has no register layout (see shared_layout)"
        )

    def element_type(self, which: str) -> str:
        return {"A": self.a_type, "B": self.b_type, "C": self.c_type}[which]

    def ptx_type(self, which: str) -> str:
        """The PTX / NVVM name of an operand's type (``#nvvm.wgmma_type<e4m3>``)."""
        return _PTX_NAME[self.element_type(which)] if which != "C" else "f32"

    def shared_layout(self, which: str, major: Major, swizzle: Swizzle) -> SmemLayout:
        """The smallest tile of this instruction's A (M x K) or B (N x K) in shared memory."""
        if which not in ("A", "B"):
            raise UnsupportedError(f"{self.name}: only A and B can be read from shared memory, not {which}")
        if major not in self.majors:
            raise UnsupportedError(f"{self.name}: {major.value}-major shared-memory operands need 16-bit inputs")
        bits = TYPE_BITS[self.element_type(which)]
        mn = self.m if which == "A" else self.n
        line = swizzle.width * 8 // bits  # elements per atom line
        atom_mn, atom_k = (8, line) if major is Major.K else (line, 8)
        return SmemLayout(major, swizzle, bits, -(-mn // atom_mn) * atom_mn, -(-self.k // atom_k) * atom_k)

    def vgprs(self, which: str) -> int:
        """32-bit registers each thread spends on A (register form) or the accumulator."""
        lay = self.operand(which)
        return math.ceil(lay.op_vector_length * TYPE_BITS[self.element_type(which)] / 32)

    def describe(self) -> str:
        majors = "/".join(m.value for m in self.majors)
        return (
            f"{self.name}: {self.m}x{self.n}x{self.k} {self.a_type} x {self.b_type} -> {self.c_type}, "
            f"warpgroup{self.wave_size}, op {self.op}, ISA {self.mnemonic}; A in registers or shared memory, "
            f"B in shared memory ({majors}-major, swizzle none/32B/64B/128B) "
            f"[codegen: sm_90a default where it fits, or --config intrinsic={self.name}]"
        )


def _a_layout(bits: int) -> Layout:
    per = 32 // bits  # elements per 32-bit register: 2 (16-bit) or 4 (8-bit)
    return make_layout(
        "A",
        WARPGROUP,
        rows=[("LaneY", 8), ("VectorZ", 2), ("LaneZ", 4)],
        cols=[("VectorX", per), ("LaneX", 4), ("VectorY", 2)],
        vector_order=("VectorX", "VectorZ", "VectorY"),
    )


def _c_layout(n: int) -> Layout:
    return make_layout(
        "C",
        WARPGROUP,
        rows=[("LaneY", 8), ("VectorY", 2), ("LaneZ", 4)],
        cols=[("VectorX", 2), ("LaneX", 4), ("VectorZ", n // 8)],
    )


def wgmma(n: int, a_type: str, b_type: str | None = None) -> WarpgroupIntrinsic:
    """The m64nNk(16|32) f32-accumulating wgmma for any legal N and input types."""
    b_type = b_type or a_type
    if n not in WGMMA_N:
        raise UnsupportedError(f"wgmma has no N = {n}; N is a multiple of 8 from 8 to 256")
    sixteen = {F16, BF16}
    eight = {F8E4M3FN, F8E5M2}
    if not ((a_type == b_type and a_type in sixteen) or (a_type in eight and b_type in eight)):
        raise UnsupportedError(
            f"no f32-accumulating wgmma takes {a_type} x {b_type}; it takes f16 x f16, "
            f"bf16 x bf16 or any pair of f8E4M3FN / f8E5M2"
        )
    bits = TYPE_BITS[a_type]
    k = 256 // bits
    ptx = f"m64n{n}k{k}.f32.{_PTX_NAME[a_type]}.{_PTX_NAME[b_type]}"
    suffix = a_type.upper() if a_type == b_type else f"{a_type.upper()}_{b_type.upper()}"
    name = f"WGMMA_F32_64x{n}x{k}_{suffix}"
    return WarpgroupIntrinsic(
        name,
        64,
        n,
        k,
        a_type,
        b_type,
        F32,
        f"wgmma.mma_async.sync.aligned.{ptx}",
        f"ptx.wgmma.mma_async.sync.aligned.{ptx}",
        _a_layout(bits),
        _c_layout(n),
        (4, 32 // bits),
        (n // 2,),
    )


@functools.cache
def all_wgmma() -> tuple[WarpgroupIntrinsic, ...]:
    """Every f32-accumulating wgmma: each legal N for f16, bf16 and the four fp8 pairs."""
    pairs = [(F16, F16), (BF16, BF16)] + [(a, b) for a in (F8E4M3FN, F8E5M2) for b in (F8E4M3FN, F8E5M2)]
    return tuple(wgmma(n, a, b) for a, b in pairs for n in WGMMA_N)


# What ``mmaflow layout sm_90a`` lists: the N a kernel is likely to use, per input type. Any other
# legal N is ``wgmma(n, type)``.
WGMMA_CATALOGUE: tuple[WarpgroupIntrinsic, ...] = tuple(
    wgmma(n, t) for t in (F16, BF16, F8E4M3FN, F8E5M2) for n in (64, 128, 256)
)
