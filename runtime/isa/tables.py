"""Operand placement of each matrix instruction, written from the ISA documents.

This is mmaflow's second, independent encoding of the hardware. It deliberately does not use
the compiler's batch-lane-vector model (``mmaflow.compiler.target.layout``): each function below is a
transcription of a vendor table in its own terms (VGPR number, 16-bit half, byte, lane group,
PTX groupID/threadID_in_group). Tests pack registers with the compiler's layouts and execute them
here; if either side is wrong, the product is wrong.

Each placement function maps (lane, slot) -> (row, col) of the operand matrix, or None when that
slot of the lane's vector carries nothing the instruction reads or writes. ``slot`` indexes the
per-lane vector value exactly as the MLIR op (amdgpu.wmma / amdgpu.mfma / nvgpu.mma.sync) passes
it, flattened row-major (vector<4x2xf16> slot = 2*register + half).

Documents:
  [R3]  AMD RDNA3 ISA Reference Guide, 7.9 "Wave Matrix Multiply Accumulate"; GPUOpen "How to
        accelerate AI applications on RDNA 3 using WMMA" (2023).
  [R4]  AMD RDNA4 ISA Reference Guide, WMMA VGPR layouts; GPUOpen "Using the Matrix Cores of AMD
        RDNA 4 architecture GPUs" (2025).
  [C3]  AMD CDNA3/CDNA4 ISA Reference Guides, 7.1 "Dependent ... MFMA" register layouts; ROCm
        blog "Matrix Core Programming on AMD GPUs" (2025).
  [C4]  AMD CDNA4 ISA Reference Guide, 7 "Matrix Arithmetic Instructions" (f8f6f4 format codes);
        ROCm blog "Matrix Core Programming on AMD CDNA3 and CDNA4 architecture" (2025), figures
        9 and 10 (v_mfma_scale_f32_32x32x64_f8f6f4 lane layouts for fp8 and fp4 data).
  [PTX] NVIDIA PTX ISA, 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16" and .m16n8k32.
  [PTX-WG] NVIDIA PTX ISA 9.7.15 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"
        (wgmma.mma_async, sm_90a): register fragments here, shared-memory layouts and the
        matrix descriptor in ``smem_matrix.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

Place = Callable[[int, int], Optional[tuple]]


@dataclass(frozen=True)
class IsaInstruction:
    key: str
    m: int
    n: int
    k: int
    wave: int
    a_type: str  # "f16" "bf16" "i8" "f8E4M3FNUZ" "f8E5M2FNUZ" "f8E4M3FN" "f8E5M2" "f6E2M3FN" "f6E3M2FN" "f4E2M1FN"
    c_type: str  # "f32" "f16" "bf16" "i32"
    a_slots: int
    b_slots: int
    c_slots: int
    a_place: Place
    b_place: Place
    c_place: Place
    saturate: bool = False  # integer results clamp to the s32 range (PTX .satfinite) instead of wrapping
    b_type: str = ""  # B's element type where it differs from A's (fp8 x bf8); "" = a_type
    # The instruction rounds its inputs to this narrower format before multiplying: "xf32" [C3] (f32's
    # sign and exponent, 10 mantissa bits; ``execute.to_xf32``); "" = none
    round_inputs: str = ""
    # Block-scaled (CDNA4's v_mfma_scale_*): every lane brings one E8M0 scale for A and one for B,
    # which multiply the A (B) values that lane holds ([C4] scaled MFMA: one scale per lane's 32
    # values, an MX block for the 4/6-bit formats)
    scaled: bool = False

    @property
    def b_elem(self) -> str:
        return self.b_type or self.a_type


# ------------------------------------------------------------------------------------------
# RDNA3 WMMA [R3]. A: "each lane holds one row of A (16 K values), packed two 16-bit values or
# four 8-bit values per VGPR, lanes 16-31 must hold the same values as lanes 0-15". B: one column
# of B per lane. C/D (wave32): VGPR r of lane l is D[2r + l/16][l%16]; wave64: D[4r + l/16][l%16].
# 16-bit C/D sit in the low half of each VGPR (OPSEL = 0): vector slot 2r is VGPR r.


def _r3_a(lane, slot):
    return (lane % 16, slot)  # VGPR slot//per_reg, sub-word slot%per_reg => K = slot


def _r3_b(lane, slot):
    return (slot, lane % 16)


def _r3_c(wave, half_regs):
    rows_per_reg = wave // 16  # lanes 0-15, 16-31 (, 32-47, 48-63) take consecutive rows

    def place(lane, slot):
        if half_regs:
            if slot % 2:  # high half of the VGPR: not written with OPSEL = 0
                return None
            slot //= 2
        return (rows_per_reg * slot + lane // 16, lane % 16)

    return place


# ------------------------------------------------------------------------------------------
# RDNA4 WMMA [R4]. No replication. A, 16-bit: VGPR g (0-3) of lanes 0-15 holds K = 2g, 2g+1 for
# g in {0,1} and K = 8+2(g-2), 9+2(g-2) for g in {2,3}; lanes 16-31 hold the same pattern shifted
# by 4 (K = 4..7 and 12..15). 8- and 4-bit data do not interleave so [R4C]: lanes 0-15 hold K
# 0..n-1 of the instruction's 2n, lanes 16-31 K n..2n-1, in VGPR order, the low byte (nibble)
# first (iu8 / fp8 16x16x16: 8 a lane in 2 VGPRs; iu4 16x16x16: 8 in 1; iu4 16x16x32: 16 in 2).
# B mirrors A with N for M. C/D: VGPR g of lane l is D[g + 8*(l/16)][l%16]; 16-bit C/D are packed
# two per VGPR in row order.
# [R4C] AMD Matrix Instruction Calculator (github.com/ROCm/amd_matrix_instruction_calculator),
#       RDNA4 register layouts (-a gfx1201 -i v_wmma_i32_16x16x16_iu8 / _iu4 / 16x16x32_iu4 -A -B -R):
#       e.g. A[0][4] is VGPR 1 of lane 0 for iu8 and fp8, where 16-bit data put K 4 in lane 16.


def _r4_k(lane, slot, bits, k=16):
    if bits == 16:
        g, h = divmod(slot, 2)
        return 8 * (g // 2) + 4 * (lane // 16) + 2 * (g % 2) + h
    return (k // 2) * (lane // 16) + slot


def _r4_a(bits, k=16):
    return lambda lane, slot: (lane % 16, _r4_k(lane, slot, bits, k))


def _r4_b(bits, k=16):
    return lambda lane, slot: (_r4_k(lane, slot, bits, k), lane % 16)


def _r4_c(lane, slot):
    return (slot + 8 * (lane // 16), lane % 16)


# ------------------------------------------------------------------------------------------
# CDNA3/CDNA4 MFMA [C3], wave64. For an M x N x K instruction with B = 64/M lane blocks along K,
# lane l supplies A[l % M][kpl*(l / M) + i] (i < kpl = K/B) and B[kpl*(l / N) + i][l % N].
# D of 16x16: AccVGPR j of lane l is D[4*(l/16) + j][l % 16]. D of 32x32: 16 AccVGPRs in four
# groups of four; AccVGPR 4*g + j of lane l is D[8*g + 4*(l/32) + j][l % 32].


def _mfma_a(m, kpl):
    return lambda lane, slot: (lane % m, kpl * (lane // m) + slot)


def _mfma_b(n, kpl):
    return lambda lane, slot: (kpl * (lane // n) + slot, lane % n)


def _mfma_c(m):
    if m == 16:
        return lambda lane, slot: (4 * (lane // 16) + slot, lane % 16)
    return lambda lane, slot: (8 * (slot // 4) + 4 * (lane // 32) + slot % 4, lane % 32)


# CDNA4 block-scaled MFMA [C4], v_mfma_scale_f32_16x16x128_f8f6f4 / _32x32x64_f8f6f4: the f8f6f4
# lanes below, and two 32-bit scale VGPRs; op_sel picks a byte of each, an E8M0 scale (2^(e - 127),
# 0xFF NaN) for the A (B) values that lane holds: a lane's 32 values of one row of A (column of
# B), 32 consecutive K for the 4/6-bit formats -- one OCP MX block. Modular's MXFP4 kernel
# (BlockScaledMmaOp: "each lane holds 32 FP4 elements and one E8M0 scale byte ... lane_row = lane %
# 16, lane_k_group = lane / 16") and IREE 3.13's ScaledMMA layouts agree.
#
# CDNA4 f8f6f4 MFMA [C4], v_mfma_f32_16x16x128_f8f6f4 and v_mfma_f32_32x32x64_f8f6f4: A and B
# each in any of five formats, cbsz (A) / blgp (B) codes 0 fp8 E4M3, 1 bf8 E5M2, 2 fp6 E2M3,
# 3 bf6 E3M2, 4 fp4 E2M1; 32 elements a lane (8, 6 or 4 VGPRs). With B = 64/M lane blocks:
# 4- and 6-bit: lane l holds K = 32*(l / M) + i.  8-bit: VGPRs 0-3 hold K = 16*(l / M) + byte
# (i < 16), VGPRs 4-7 the same K/2 further. [C4] figures 9 (fp8) and 10 (fp4), 32x32x64;
# 16x16x128's 8-bit halves at K/2 = 64 and the 6-bit layout are inferred (see the catalogue).
F8F6F4_FORMATS = {0: "f8E4M3FN", 1: "f8E5M2", 2: "f6E2M3FN", 3: "f6E3M2FN", 4: "f4E2M1FN"}


def _f8f6f4_k(m, k, bits):
    blocks = 64 // m

    def kk(lane, slot):
        group = lane // m
        if bits == 8:
            half, byte = divmod(slot, 16)
            return half * (k // 2) + 16 * group + byte
        return 32 * group + slot

    assert blocks * 32 == k
    return kk


def _f8f6f4_a(m, k, bits):
    kk = _f8f6f4_k(m, k, bits)
    return lambda lane, slot: (lane % m, kk(lane, slot))


def _f8f6f4_b(m, k, bits):
    kk = _f8f6f4_k(m, k, bits)
    return lambda lane, slot: (kk(lane, slot), lane % m)


# ------------------------------------------------------------------------------------------
# PTX mma.m16n8k16 / m16n8k32 [PTX]. groupID = laneid >> 2, threadID_in_group = laneid % 4.
# m16n8k16 .f16/.bf16 A (a0..a7):  row = groupID + 8 for a2,a3,a6,a7 else groupID;
#                                  col = threadID_in_group*2 + (i & 1) + 8 for i >= 4.
# m16n8k16 B (b0..b3):             row = threadID_in_group*2 + (i & 1) + 8 for i >= 2; col = groupID.
# m16n8k32 .s8 A (a0..a15):        row = groupID + 8 for a4..a7, a12..a15 else groupID;
#                                  col = threadID_in_group*4 + (i & 3) + 16 for i >= 8.
# m16n8k32 B (b0..b7):             row = threadID_in_group*4 + (i & 3) + 16 for i >= 4; col = groupID.
# C/D (c0..c3):                    row = groupID + 8 for i >= 2; col = threadID_in_group*2 + (i & 1).
# .satfinite (integer): "the result is clamped to [MIN_INT32, MAX_INT32] on overflow".


def _ptx_a16(lane, i):
    g, t = lane >> 2, lane % 4
    return (g + (8 if i in (2, 3, 6, 7) else 0), t * 2 + (i & 1) + (8 if i >= 4 else 0))


def _ptx_b16(lane, i):
    g, t = lane >> 2, lane % 4
    return (t * 2 + (i & 1) + (8 if i >= 2 else 0), g)


def _ptx_a32(lane, i):
    g, t = lane >> 2, lane % 4
    return (g + (8 if (4 <= i < 8 or i >= 12) else 0), t * 4 + (i & 3) + (16 if i >= 8 else 0))


def _ptx_b32(lane, i):
    g, t = lane >> 2, lane % 4
    return (t * 4 + (i & 3) + (16 if i >= 4 else 0), g)


def _ptx_c(lane, i):
    g, t = lane >> 2, lane % 4
    return (g + (8 if i >= 2 else 0), t * 2 + (i & 1))


# ------------------------------------------------------------------------------------------


def _build() -> dict[str, IsaInstruction]:
    out: list[IsaInstruction] = []
    for wave in (32, 64):
        c_slots = 8 if wave == 32 else 4
        for mn, a_t, c_t in (
            ("v_wmma_f32_16x16x16_f16", "f16", "f32"),
            ("v_wmma_f32_16x16x16_bf16", "bf16", "f32"),
            ("v_wmma_f16_16x16x16_f16", "f16", "f16"),
            ("v_wmma_bf16_16x16x16_bf16", "bf16", "bf16"),
            ("v_wmma_i32_16x16x16_iu8", "i8", "i32"),
            # [R3] iu4: the same lanes and K order as iu8, eight values a VGPR (two VGPRs a lane)
            ("v_wmma_i32_16x16x16_iu4", "i4", "i32"),
        ):
            half = c_t in ("f16", "bf16")
            out.append(
                IsaInstruction(
                    f"rdna3.{mn}.w{wave}",
                    16,
                    16,
                    16,
                    wave,
                    a_t,
                    c_t,
                    16,
                    16,
                    c_slots * (2 if half else 1),
                    _r3_a,
                    _r3_b,
                    _r3_c(wave, half),
                )
            )
    for mn, a_t, b_t, c_t in (
        ("v_wmma_f32_16x16x16_f16", "f16", "", "f32"),
        ("v_wmma_f32_16x16x16_bf16", "bf16", "", "f32"),
        ("v_wmma_f16_16x16x16_f16", "f16", "", "f16"),
        ("v_wmma_bf16_16x16x16_bf16", "bf16", "", "bf16"),
        ("v_wmma_f32_16x16x16_fp8_fp8", "f8E4M3FN", "", "f32"),
        ("v_wmma_f32_16x16x16_bf8_bf8", "f8E5M2", "", "f32"),
        # [R4] the mixed forms: A and B in the same registers and lanes, each read in its own format
        ("v_wmma_f32_16x16x16_fp8_bf8", "f8E4M3FN", "f8E5M2", "f32"),
        ("v_wmma_f32_16x16x16_bf8_fp8", "f8E5M2", "f8E4M3FN", "f32"),
        ("v_wmma_i32_16x16x16_iu8", "i8", "", "i32"),
    ):
        bits = 16 if a_t in ("f16", "bf16") else 8
        out.append(
            IsaInstruction(
                f"rdna4.{mn}", 16, 16, 16, 32, a_t, c_t, 8, 8, 8, _r4_a(bits), _r4_b(bits), _r4_c, b_type=b_t
            )
        )
    # [R4C] iu4: 8 values a lane at 16x16x16 (one VGPR), 16 at 16x16x32 (two); signedness per
    # unsignedA/B (the NEG bits), as RDNA3's iu4 and iu8
    for k in (16, 32):
        out.append(
            IsaInstruction(
                f"rdna4.v_wmma_i32_16x16x{k}_iu4",
                16,
                16,
                k,
                32,
                "i4",
                "i32",
                k // 2,
                k // 2,
                8,
                _r4_a(4, k),
                _r4_b(4, k),
                _r4_c,
            )
        )
    for mn, m, k, a_t, c_t in (
        ("v_mfma_f32_16x16x16_f16", 16, 16, "f16", "f32"),
        ("v_mfma_f32_32x32x8_f16", 32, 8, "f16", "f32"),
        ("v_mfma_f32_16x16x16_bf16", 16, 16, "bf16", "f32"),
        ("v_mfma_f32_32x32x8_bf16", 32, 8, "bf16", "f32"),
        ("v_mfma_i32_16x16x32_i8", 16, 32, "i8", "i32"),
        ("v_mfma_i32_32x32x16_i8", 32, 16, "i8", "i32"),
        ("v_mfma_f32_16x16x32_fp8_fp8", 16, 32, "fp8", "f32"),
        ("v_mfma_f32_16x16x32_bf8_bf8", 16, 32, "bf8", "f32"),
        ("v_mfma_f32_32x32x16_fp8_fp8", 32, 16, "fp8", "f32"),
        ("v_mfma_f32_32x32x16_bf8_bf8", 32, 16, "bf8", "f32"),
        # [C3] the mixed forms (A's format first in the mnemonic), same lanes and slots
        ("v_mfma_f32_16x16x32_fp8_bf8", 16, 32, "fp8", "f32"),
        ("v_mfma_f32_16x16x32_bf8_fp8", 16, 32, "bf8", "f32"),
        ("v_mfma_f32_32x32x16_fp8_bf8", 32, 16, "fp8", "f32"),
        ("v_mfma_f32_32x32x16_bf8_fp8", 32, 16, "bf8", "f32"),
        ("v_mfma_i32_16x16x64_i8", 16, 64, "i8", "i32"),  # [C4] (gfx950)
        ("v_mfma_i32_32x32x32_i8", 32, 32, "i8", "i32"),
        ("v_mfma_f32_16x16x32_f16", 16, 32, "f16", "f32"),
        ("v_mfma_f32_32x32x16_f16", 32, 16, "f16", "f32"),
        ("v_mfma_f32_16x16x32_bf16", 16, 32, "bf16", "f32"),
        ("v_mfma_f32_32x32x16_bf16", 32, 16, "bf16", "f32"),
        ("v_mfma_f32_16x16x4_f32", 16, 4, "f32", "f32"),
        ("v_mfma_f32_32x32x2_f32", 32, 2, "f32", "f32"),
        ("v_mfma_f64_16x16x4_f64", 16, 4, "f64", "f64"),
        ("v_mfma_f32_16x16x8_xf32", 16, 8, "f32", "f32"),
        ("v_mfma_f32_32x32x4_xf32", 32, 4, "f32", "f32"),
    ):
        kpl = k * m // 64
        # fp8/bf8 MFMA read FNUZ encodings on gfx942 and OCP encodings on gfx950: the element
        # type is a property of the architecture, given by the caller at execution time.
        mixed = re.search(r"_(fp8|bf8)_(fp8|bf8)$", mn)
        out.append(
            IsaInstruction(
                f"cdna.{mn}",
                m,
                m,
                k,
                64,
                a_t,
                c_t,
                kpl,
                kpl,
                4 if m == 16 else 16,
                _mfma_a(m, kpl),
                _mfma_b(m, kpl),
                _mfma_c(m),
                b_type=mixed.group(2) if mixed and mixed.group(1) != mixed.group(2) else "",
                round_inputs="xf32" if mn.endswith("_xf32") else "",
            )
        )
    for m, k in ((16, 128), (32, 64)):
        mn = f"v_mfma_f32_{m}x{m}x{k}_f8f6f4"
        for ca, a_t in F8F6F4_FORMATS.items():
            for cb, b_t in F8F6F4_FORMATS.items():
                bits_a, bits_b = (8 if ca < 2 else 6 if ca < 4 else 4), (8 if cb < 2 else 6 if cb < 4 else 4)
                out.append(
                    IsaInstruction(
                        f"cdna.{mn}.{ca}.{cb}",
                        m,
                        m,
                        k,
                        64,
                        a_t,
                        "f32",
                        32,
                        32,
                        4 if m == 16 else 16,
                        _f8f6f4_a(m, k, bits_a),
                        _f8f6f4_b(m, k, bits_b),
                        _mfma_c(m),
                        b_type=b_t,
                    )
                )
    # CDNA4's block-scaled f8f6f4 MFMA: the same lanes, plus a scale a lane for A and for B
    scaled = [
        IsaInstruction(**{**i.__dict__, "key": i.key.replace("v_mfma_f32_", "v_mfma_scale_f32_"), "scaled": True})
        for i in out
        if "_f8f6f4." in i.key
    ]
    out += scaled
    for mn, k, a_t, c_t in (
        ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 16, "f16", "f32"),
        ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, "bf16", "f32"),
        ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 16, "f16", "f16"),
        ("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32", 32, "i8", "i32"),
    ):
        a, b = (_ptx_a16, _ptx_b16) if k == 16 else (_ptx_a32, _ptx_b32)
        out.append(
            IsaInstruction(
                f"ptx.{mn}",
                16,
                8,
                k,
                32,
                a_t,
                c_t,
                8 if k == 16 else 16,
                4 if k == 16 else 8,
                4,
                a,
                b,
                _ptx_c,
                saturate=".satfinite" in mn,
            )
        )
    return {i.key: i for i in out}


INSTRUCTIONS: dict[str, IsaInstruction] = _build()


# ------------------------------------------------------------------------------------------
# PTX wgmma.mma_async (sm_90a) [PTX-WG]: NVIDIA PTX ISA 9.7.15 "Asynchronous Warpgroup Level
# Matrix Multiply-Accumulate", 9.7.15.5.1.1 "Register Fragments" (Figures 148/149 for .m64nNk16,
# 152/153 for .m64nNk32). A warpgroup is 4 consecutive warps, 128 threads; thread t is lane
# t % 32 of warp t / 32 of the warpgroup; groupID = (t % 32) >> 2, threadID_in_group = t % 4.
# Each warp owns a 16-row slab of the 64-row A and D: rows 16*warp .. 16*warp + 15.
#   A .f16/.bf16 in registers (a0..a7, four .f16x2):
#       row = 16*warp + groupID + 8 for a2, a3, a6, a7;  col = 2*threadID_in_group + (i & 1) + 8 for i >= 4
#   A .e4m3/.e5m2 in registers (a0..a15, four .b32 of four bytes):
#       row = 16*warp + groupID + 8 for a4..a7, a12..a15;  col = 4*threadID_in_group + (i & 3) + 16 for i >= 8
#   D .f32 (d0..d(N/2 - 1)):
#       row = 16*warp + groupID + 8 when i % 4 is 2 or 3;  col = 8*(i / 4) + 2*threadID_in_group + (i & 1)
# CUTLASS cute/atom/mma_traits_sm90_gmma.hpp writes the same maps as (thread, value) -> m + 64*k
# layouts: ALayout_64x16 ((4,8,4),(2,2,2)):((128,1,16),(64,8,512)), ALayout_64x32
# ((4,8,4),(4,2,2)):((256,1,16),(64,8,1024)), CLayout_64xN ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)).
# B (and A when it is not in registers) is read from shared memory through a 64-bit matrix
# descriptor: ``smem_matrix.py``. Shapes (9.7.15.5.1 "Matrix Shape"): .m64nNk16 for .f16/.bf16 and
# .m64nNk32 for .e4m3/.e5m2, N = 8, 16, ..., 256, with an .f32 accumulator. imm-trans-a/b (MN-major
# shared-memory operands) exist only for .f16/.bf16.

_PTX_TYPE = {"f16": "f16", "bf16": "bf16", "f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
# The element type of each PTX (and NVVM ``#nvvm.wgmma_type<...>``) input type name.
WGMMA_PTX_TYPES = {ptx: t for t, ptx in _PTX_TYPE.items()}


def _wg_thread(t):
    return t // 32, (t % 32) >> 2, t % 4  # warp in warpgroup, groupID, threadID_in_group


def _wg_a16(t, i):
    w, g, q = _wg_thread(t)
    return (16 * w + g + (8 if i in (2, 3, 6, 7) else 0), 2 * q + (i & 1) + (8 if i >= 4 else 0))


def _wg_a8(t, i):
    w, g, q = _wg_thread(t)
    return (16 * w + g + (8 if i in (4, 5, 6, 7, 12, 13, 14, 15) else 0), 4 * q + (i & 3) + (16 if i >= 8 else 0))


def _wg_d(t, i):
    w, g, q = _wg_thread(t)
    return (16 * w + g + (8 if i % 4 in (2, 3) else 0), 8 * (i // 4) + 2 * q + (i & 1))


@dataclass(frozen=True)
class WgmmaInstruction:
    """One wgmma.mma_async shape and type combination [PTX-WG]. A comes from registers
    (``a_place``) or through a descriptor, B always through a descriptor; D/C in registers."""

    key: str
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    a_slots: int
    c_slots: int
    a_place: Place
    c_place: Place
    wave: int = 128  # threads of the warpgroup

    @property
    def transposable(self) -> bool:
        """imm-trans-a / imm-trans-b (MN-major shared-memory operands): .f16/.bf16 only."""
        return self.a_type in ("f16", "bf16")

    @property
    def element_bits(self) -> int:
        return 16 if self.a_type in ("f16", "bf16") else 8


def wgmma_key(n: int, a_type: str, b_type: str, c_type: str = "f32") -> str:
    k = 16 if a_type in ("f16", "bf16") else 32
    return f"ptx.wgmma.mma_async.sync.aligned.m64n{n}k{k}.{c_type}.{_PTX_TYPE[a_type]}.{_PTX_TYPE[b_type]}"


def _build_wgmma() -> dict[str, WgmmaInstruction]:
    out = []
    pairs = [("f16", "f16"), ("bf16", "bf16")] + [
        (a, b) for a in ("f8E4M3FN", "f8E5M2") for b in ("f8E4M3FN", "f8E5M2")
    ]
    for a_t, b_t in pairs:
        sixteen = a_t in ("f16", "bf16")
        for n in range(8, 257, 8):
            out.append(
                WgmmaInstruction(
                    wgmma_key(n, a_t, b_t),
                    64,
                    n,
                    16 if sixteen else 32,
                    a_t,
                    b_t,
                    "f32",
                    8 if sixteen else 16,
                    n // 2,
                    _wg_a16 if sixteen else _wg_a8,
                    _wg_d,
                )
            )
    return {i.key: i for i in out}


WGMMA: dict[str, WgmmaInstruction] = _build_wgmma()
