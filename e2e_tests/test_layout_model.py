"""The compiler's layout model against the independent ISA model, instruction by instruction.

For every catalogue entry: pack random A, B, C into per-lane registers with the compiler's
layouts, execute with the ISA model (written separately from the ISA documents), unpack with the
layout, compare with numpy. A layout with one lane swapped must fail the same test.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mmaflow.compiler.target.intrinsics import CATALOGUE
from mmaflow.compiler.target.targets import TARGETS
from mmaflow.runtime.isa import INSTRUCTIONS, IsaError, execute, np_dtype
from mmaflow.runtime.isa.execute import to_xf32

CASES = [(t.name, i.name) for t in TARGETS.values() if t.name != "sm_90a" for i in t.intrinsics()]
# gfx950's f8f6f4 MFMA has 50 records (5 x 5 formats, two sizes); the default set checks these
# and the exhaustive set all of them (each case 0.1-0.2 s)
F8F6F4_SAMPLE = {
    *(f"MFMA_F32_16x16x128_{t}" for t in ("F8E4M3FN", "F6E3M2FN", "F4E2M1FN")),
    "MFMA_SCALE_F32_16x16x128_F4E2M1FN",
    "MFMA_SCALE_F32_32x32x64_F8E4M3FN_F8E5M2",
    "MFMA_F32_32x32x64_F8E5M2",
    "MFMA_F32_16x16x128_F8E4M3FN_F4E2M1FN",
    "MFMA_F32_32x32x64_F6E2M3FN_F8E5M2",
}


def sampled(cases):
    """pytest params: f8f6f4 records outside ``F8F6F4_SAMPLE`` marked exhaustive."""
    return [
        pytest.param(
            *c,
            marks=pytest.mark.exhaustive
            if TARGETS[c[0]].intrinsic(c[1]).mnemonic.endswith("_f8f6f4") and c[1] not in F8F6F4_SAMPLE
            else (),
        )
        for c in cases
    ]


def pack(layout, matrix, dtype):
    regs = np.zeros((layout.wave_size, layout.op_vector_length), dtype)
    for lane in range(layout.wave_size):
        for e in range(layout.elements):
            r, c = layout.coords(lane, e)
            regs[lane, layout.op_index(e)] = matrix[r, c]
    return regs


def unpack(layout, regs, shape):
    out = np.zeros(shape, regs.dtype)
    for lane in range(layout.wave_size):
        for e in range(layout.elements):
            r, c = layout.coords(lane, e)
            out[r, c] = regs[lane, layout.op_index(e)]
    return out


def operands(intr, rng, *, c_big=False):
    at, bt, ct = np_dtype(intr.a_type), np_dtype(intr.b_type), np_dtype(intr.c_type)
    if intr.a_type == "i4":  # (signed: int4 registers -8..7; unsigned: uint4 0..15)
        lo, hi = (0, 16) if intr.unsigned_a else (-8, 8)
        dt = ml_dtypes.uint4 if intr.unsigned_a else ml_dtypes.int4
        a = rng.integers(lo, hi, (intr.m, intr.k)).astype(dt)
        b = rng.integers(lo, hi, (intr.k, intr.n)).astype(dt)
        c = rng.integers(-1000, 1000, (intr.m, intr.n)).astype(np.int32)
        ref = (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int32)
        return a, b, c, ref
    if intr.a_type == "i8":
        lo, hi = (0, 256) if intr.unsigned_a else (-128, 128)
        a = rng.integers(lo, hi, (intr.m, intr.k)).astype(np.uint8 if intr.unsigned_a else np.int8)
        b = rng.integers(lo, hi, (intr.k, intr.n)).astype(np.uint8 if intr.unsigned_b else np.int8)
        base = 2**31 - 2**14 if c_big else 0
        c = (base + rng.integers(-1000, 1000, (intr.m, intr.n))).astype(np.int64).astype(np.int32)
        ref = a.astype(np.int64) @ b.astype(np.int64) + c.astype(np.int64)
        ref = ((ref + 2**31) % 2**32 - 2**31).astype(np.int32)  # the accumulator's wraparound
        return a, b, c, ref
    a = rng.uniform(-2, 2, (intr.m, intr.k)).astype(at)  # rounded to fp8/f16/bf16 here
    b = rng.uniform(-2, 2, (intr.k, intr.n)).astype(bt)  # (fp8 x bf8: B in its own format)
    c = rng.uniform(-2, 2, (intr.m, intr.n)).astype(ct)
    ar, br = (xf32_nearest(x) for x in (a, b)) if intr.reduced_precision else (a, b)
    # One rounding of the exact result to the accumulator type (f16 accumulation included).
    ref = (ar.astype(np.float64) @ br.astype(np.float64) + c.astype(np.float64)).astype(ct)
    return a, b, c, ref


def xf32_nearest(x: np.ndarray) -> np.ndarray:
    """f32 rounded to 10 mantissa bits, to nearest even: written here from frexp, independently of
    the ISA model's bit arithmetic (``runtime/isa/execute.to_xf32``)."""
    m, e = np.frexp(x.astype(np.float64))  # |m| in [0.5, 1): 1 + 10 bits is 11 bits after the point
    return np.ldexp(np.round(m * 2.0**11) / 2.0**11, e).astype(np.float32)


def unit_scales(intr) -> dict:
    """A block-scaled instruction's scales, all 1.0 (E8M0 127): the plain product."""
    if not intr.scale_block:
        return {}
    one = np.full(intr.wave_size, 1.0, ml_dtypes.float8_e8m0fnu)
    return {"scales_a": one, "scales_b": one}


def run(intr, layouts, a, b, c):
    la, lb, lc = layouts
    d = execute(
        intr.isa_key,
        pack(la, a, a.dtype),
        pack(lb, b, b.dtype),
        pack(lc, c, c.dtype),
        unsigned_a=intr.unsigned_a,
        unsigned_b=intr.unsigned_b,
        **unit_scales(intr),
    )
    return unpack(lc, d, (intr.m, intr.n))


@pytest.mark.parametrize("target,name", sampled(CASES))
@pytest.mark.parametrize("which", ["hardware", "codegen"])
def test_layout_agrees_with_isa_model(target, name, which):
    intr = TARGETS[target].intrinsic(name)
    layouts = (intr.a, intr.b, intr.c) if which == "hardware" else intr.codegen_layouts()
    rng = np.random.default_rng(hash((target, name)) & 0xFFFF)
    a, b, c, ref = operands(intr, rng)
    got = run(intr, layouts, a, b, c)
    np.testing.assert_array_equal(got.astype(np.float64), ref.astype(np.float64))


@pytest.mark.parametrize("target,name", sampled(CASES))
def test_swapped_lane_fails(target, name):
    """Exchange the A data of two lanes that hold different elements: the product must change."""
    intr = TARGETS[target].intrinsic(name)
    la, lb, lc = intr.codegen_layouts()
    rng = np.random.default_rng(7)
    a, b, c, ref = operands(intr, rng)
    regs_a = pack(la, a, a.dtype)
    regs_a[[0, 1]] = regs_a[[1, 0]]  # lanes 0 and 1 always hold different rows
    try:
        d = execute(
            intr.isa_key,
            regs_a,
            pack(lb, b, b.dtype),
            pack(lc, c, c.dtype),
            unsigned_a=intr.unsigned_a,
            unsigned_b=intr.unsigned_b,
            **unit_scales(intr),
        )
    except IsaError as e:  # replicated layouts: the copies now disagree
        assert "replicated lanes must hold equal data" in str(e)
        return
    got = unpack(lc, d, (intr.m, intr.n))
    assert not np.array_equal(got.astype(np.float64), ref.astype(np.float64))


def test_xf32_rounds_its_inputs_to_nearest_even():
    """xf32 instructions round A and B (ties to even, as ``xf32_nearest``); the same data through
    the plain f32 instruction does not, and the two products differ."""
    rng = np.random.default_rng(3)
    ties = np.array([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 2**-126 * (1 + 2**-11)], np.float32)
    np.testing.assert_array_equal(to_xf32(ties), xf32_nearest(ties))
    x = rng.standard_normal(4096).astype(np.float32) * np.float32(1e3)
    np.testing.assert_array_equal(to_xf32(x), xf32_nearest(x))
    assert np.isinf(to_xf32(np.array([3.4028235e38], np.float32)))[0]
    assert np.isnan(to_xf32(np.array([np.nan], np.float32)))[0]
    cdna3 = TARGETS["gfx942"]
    for name in ("MFMA_F32_16x16x8_XF32", "MFMA_F32_32x32x4_XF32"):
        intr = cdna3.intrinsic(name)
        a, b, c, ref = operands(intr, rng)
        got = run(intr, intr.codegen_layouts(), a, b, c)
        np.testing.assert_array_equal(got, ref)
        unrounded = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
        assert np.abs(got - unrounded).max() > 1e-4, name  # the rounding shows at 10 bits
    assert not any(i.reduced_precision for i in TARGETS["gfx950"].intrinsics())  # (CDNA4 dropped xf32)


MIXED = [
    c
    for c in CASES
    if TARGETS[c[0]].intrinsic(c[1]).a_type != TARGETS[c[0]].intrinsic(c[1]).b_type
    and not TARGETS[c[0]].intrinsic(c[1]).mnemonic.endswith("_f8f6f4")
]
F8F6F4_MIXED = [
    c
    for c in CASES
    if c[0] == "gfx950"
    and TARGETS[c[0]].intrinsic(c[1]).mnemonic.startswith("v_mfma_f32_")
    and TARGETS[c[0]].intrinsic(c[1]).mnemonic.endswith("_f8f6f4")
    and TARGETS[c[0]].intrinsic(c[1]).a_type != TARGETS[c[0]].intrinsic(c[1]).b_type
]


@pytest.mark.parametrize("target,name", MIXED)
def test_mixed_fp8_reads_each_operand_in_its_own_format(target, name):
    """fp8 x bf8 (and bf8 x fp8): B's bytes handed over in A's format are refused, and the same
    bytes read as A's format by the same-format instruction give another product -- so a kernel
    that picked the wrong instruction, or packed B in the wrong format, fails its check."""
    intr = TARGETS[target].intrinsic(name)
    assert len(MIXED) == 10 and intr.a_type != intr.b_type
    la, lb, lc = intr.codegen_layouts()
    a, b, c, ref = operands(intr, np.random.default_rng(11))
    as_a = pack(lb, b, b.dtype).view(a.dtype)  # B's bytes, typed as A's format
    with pytest.raises(IsaError, match="operand B registers"):
        execute(intr.isa_key, pack(la, a, a.dtype), as_a, pack(lc, c, c.dtype))
    same = next(
        i
        for i in TARGETS[target].intrinsics()
        if (i.a_type, i.b_type, i.m, i.k) == (intr.a_type, intr.a_type, intr.m, intr.k)
    )
    got = unpack(lc, execute(same.isa_key, pack(la, a, a.dtype), as_a, pack(lc, c, c.dtype)), (intr.m, intr.n))
    assert not np.array_equal(got.astype(np.float64), ref.astype(np.float64))


@pytest.mark.parametrize("target,name", sampled(F8F6F4_MIXED))
def test_f8f6f4_reads_each_operand_in_its_own_format_and_width(target, name):
    """gfx950's f8f6f4 MFMA with A and B in different formats (40 pairs at two sizes): B's
    registers typed as A's format are refused, and where the widths differ (8-bit data split in
    two 16-element halves, 4/6-bit data 32 consecutive K) B packed in A's K order gives another
    product -- a kernel that laid one operand out by the other's width fails its check."""
    intr = TARGETS[target].intrinsic(name)
    assert len(F8F6F4_MIXED) == 40
    la, lb, lc = intr.codegen_layouts()
    a, b, c, ref = operands(intr, np.random.default_rng(13))
    regs_a, regs_c = pack(la, a, a.dtype), pack(lc, c, c.dtype)
    with pytest.raises(IsaError, match="operand B registers"):
        execute(intr.isa_key, regs_a, pack(lb, b, b.dtype).astype(a.dtype), regs_c)
    same_order = (intr.a_type[:2] == "f8") == (intr.b_type[:2] == "f8")  # 8-bit split, or 4/6-bit consecutive
    mirrored = TARGETS[target].intrinsic(name.rsplit("_", 2)[0] + "_" + intr.a_type.upper())  # A's format both sides
    b_in_a_order = pack(mirrored.b, b, b.dtype)
    got = unpack(lc, execute(intr.isa_key, regs_a, b_in_a_order, regs_c), (intr.m, intr.n))
    assert np.array_equal(got, ref) == same_order, (intr.a_type, intr.b_type)


@pytest.mark.parametrize("wave", [32, 64])
def test_iu4_reads_its_signedness(wave):
    """RDNA3's iu4 WMMA: signed data with negative values run as the unsigned instruction (the same
    nibbles read 0..15) give another product; the signed one gives numpy's."""
    sfx = "" if wave == 32 else "_W64"
    t = TARGETS["gfx1100"]
    signed, unsigned = t.intrinsic("WMMA_I32_16x16x16_I4" + sfx), t.intrinsic("WMMA_I32_16x16x16_U4" + sfx)
    assert signed.sub_byte and signed.mnemonic == unsigned.mnemonic == "v_wmma_i32_16x16x16_iu4"
    a, b, c, ref = operands(signed, np.random.default_rng(5))
    assert (a.astype(np.int64) < 0).any()
    regs = [pack(lay, x, x.dtype) for lay, x in zip(signed.codegen_layouts(), (a, b, c))]
    d = execute(signed.isa_key, *regs, unsigned_a=False, unsigned_b=False)
    np.testing.assert_array_equal(unpack(signed.c, d, (16, 16)), ref)
    d_u = execute(unsigned.isa_key, *regs, unsigned_a=True, unsigned_b=True)
    assert not np.array_equal(unpack(signed.c, d_u, (16, 16)), ref)


SCALED = [(t.name, i.name) for t in TARGETS.values() for i in t.scaled_intrinsics()]


def _scaled_case(intr, rng):
    """Random A, B, C and random E8M0 scales of every MX block (2^-6 .. 2^6), and the reference
    sum_k (a[m,k] * sa[m, k // 32]) * (b[k,n] * sb[k // 32, n]) + c in float64, rounded once to
    f32; K in the logical (codegen) order, blocks of 32 consecutive K."""
    a, b, c, _ = operands(intr, rng)
    blocks = intr.k // intr.scale_block
    sa = rng.integers(121, 134, (intr.m, blocks)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    sb = rng.integers(121, 134, (blocks, intr.n)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    a_s = a.astype(np.float64) * np.repeat(sa.astype(np.float64), intr.scale_block, axis=1)
    b_s = b.astype(np.float64) * np.repeat(sb.astype(np.float64), intr.scale_block, axis=0)
    ref = (a_s @ b_s + c.astype(np.float64)).astype(np.float32)
    return a, b, c, sa, sb, ref


def _lane_scales(layout, scales):
    """One scale a lane, from the scale layout (one element a lane)."""
    return pack(layout, scales, scales.dtype)[:, 0]


@pytest.mark.parametrize("target,name", sampled(SCALED))
def test_block_scales_agree_with_isa_model(target, name):
    """The catalogue's scale layouts (lane l: row l % M, MX block l / M of the codegen K order)
    against the ISA model, which scales each value by the scale of the lane holding it."""
    intr = TARGETS[target].intrinsic(name)
    la, lb, lc = intr.codegen_layouts()
    rng = np.random.default_rng(11)
    a, b, c, sa, sb, ref = _scaled_case(intr, rng)
    d = execute(
        intr.isa_key,
        pack(la, a, a.dtype),
        pack(lb, b, b.dtype),
        pack(lc, c, c.dtype),
        scales_a=_lane_scales(intr.scale_a, sa),
        scales_b=_lane_scales(intr.scale_b, sb),
    )
    np.testing.assert_array_equal(unpack(lc, d, (intr.m, intr.n)), ref)


@pytest.mark.parametrize(
    "name",
    ["MFMA_SCALE_F32_16x16x128_F4E2M1FN", "MFMA_SCALE_F32_32x32x64_F8E4M3FN", "MFMA_SCALE_F32_16x16x128_F6E2M3FN"],
)
def test_misplaced_scale_fails(name):
    """The A scales of two lanes of one row but different blocks exchanged, or B's scales given
    in A's place: the product changes. Without scales, the instruction is refused."""
    intr = TARGETS["gfx950"].intrinsic(name)
    la, lb, lc = intr.codegen_layouts()
    a, b, c, sa, sb, ref = _scaled_case(intr, np.random.default_rng(3))
    regs = (pack(la, a, a.dtype), pack(lb, b, b.dtype), pack(lc, c, c.dtype))
    lane_a, lane_b = _lane_scales(intr.scale_a, sa), _lane_scales(intr.scale_b, sb)
    swapped = lane_a.copy()
    swapped[[0, intr.m]] = swapped[[intr.m, 0]]  # row 0, blocks 0 and 1
    for bad_a, bad_b in ((swapped, lane_b), (lane_b, lane_a)):
        assert not np.array_equal(bad_a.view(np.uint8), lane_a.view(np.uint8))  # (a real exchange)
        d = execute(intr.isa_key, *regs, scales_a=bad_a, scales_b=bad_b)
        assert not np.array_equal(unpack(lc, d, (intr.m, intr.n)), ref)
    with pytest.raises(IsaError, match="without A scales"):
        execute(intr.isa_key, *regs)


@pytest.mark.parametrize("target,name", [c for c in CASES if "I8" in c[1] or "U8" in c[1]])
def test_integer_accumulator_overflow(target, name):
    """AMD's i32 accumulators wrap; PTX mma.sync .satfinite (what nvgpu lowers to) saturates."""
    intr = TARGETS[target].intrinsic(name)
    rng = np.random.default_rng(11)
    a, b, c, wrapped = operands(intr, rng, c_big=True)
    got = run(intr, intr.codegen_layouts(), a, b, c)
    assert (wrapped < 0).any(), "the test must actually overflow"
    if ".satfinite." in intr.mnemonic:
        exact = a.astype(np.int64) @ b.astype(np.int64) + c.astype(np.int64)
        np.testing.assert_array_equal(got, np.clip(exact, -(2**31), 2**31 - 1))
    else:
        np.testing.assert_array_equal(got, wrapped)


# Points of AMD's Matrix Instruction Calculator (github.com/ROCm/amd_matrix_instruction_calculator,
# `-a gfx1201 -i INSTR -A -R`): A[m][k] -> (lane, VGPR, low bit). The whole A and B tables of these
# instructions (and of RDNA3's iu4 and f16, CDNA3's f16, i8 and fp8 MFMAs) agreed with the ISA model
# when checked against the tool; these points pin the ones an earlier reading of the RDNA4 guide had
# interleaved (8-bit data: lanes 0-15 hold K 0-7 in two VGPRs, not K 0-3 and 8-11).
CALCULATOR_POINTS = [
    ("rdna4.v_wmma_f32_16x16x16_f16", (0, 4), (16, 0, 0)),
    ("rdna4.v_wmma_i32_16x16x16_iu8", (0, 4), (0, 1, 0)),
    ("rdna4.v_wmma_i32_16x16x16_iu8", (5, 9), (21, 0, 8)),
    ("rdna4.v_wmma_f32_16x16x16_fp8_bf8", (0, 7), (0, 1, 24)),
    ("rdna4.v_wmma_i32_16x16x16_iu4", (3, 9), (19, 0, 4)),
    ("rdna4.v_wmma_i32_16x16x32_iu4", (0, 8), (0, 1, 0)),
    ("rdna4.v_wmma_i32_16x16x32_iu4", (2, 17), (18, 0, 4)),
]


@pytest.mark.parametrize("key,mk,where", CALCULATOR_POINTS)
def test_isa_model_places_a_as_amds_calculator_does(key, mk, where):
    instr = INSTRUCTIONS[key]
    bits = {"f16": 16, "i8": 8, "f8E4M3FN": 8, "i4": 4}[instr.a_type]
    per = 32 // bits
    held = [
        (lane, slot // per, (slot % per) * bits)
        for lane in range(instr.wave)
        for slot in range(instr.a_slots)
        if instr.a_place(lane, slot) == mk
    ]
    assert held == [where], (key, mk, held)


def test_rdna4_logical_k_order_is_a_permutation_shared_by_a_and_b():
    intr = TARGETS["gfx1201"].intrinsic("WMMA_F32_16x16x16_F16")
    la, lb, _ = intr.codegen_layouts()
    # Logical order: 8 consecutive K per lane (one 128-bit load); hardware: two runs of 4.
    assert [r.length for r in la.runs("col")] == [8]
    assert [r.length for r in intr.a.runs("col")] == [4, 4]
    # Permuting A alone breaks the product.
    rng = np.random.default_rng(3)
    a, b, c, ref = operands(intr, rng)
    got = run(intr, (la, intr.b, intr.c), a, b, c)
    assert not np.allclose(got, ref)


# f8f6f4's 50 records have four A/B layouts a size (8-bit or not, each side): one record of each
# size, with both kinds, stands for them (each takes 1-3 s here)
_F8F6F4_LAYOUTS = [
    ("gfx950", "MFMA_F32_16x16x128_F8E4M3FN_F4E2M1FN"),
    ("gfx950", "MFMA_F32_32x32x64_F4E2M1FN_F8E4M3FN"),
]


@pytest.mark.parametrize(
    "target,name",
    [c for c in CASES if not TARGETS[c[0]].intrinsic(c[1]).mnemonic.endswith("_f8f6f4")][::5] + _F8F6F4_LAYOUTS,
)
def test_coords_and_owners_are_inverse(target, name):
    intr = TARGETS[target].intrinsic(name)
    for lay in (intr.a, intr.b, intr.c, intr.a.compose(2, 3), intr.c.compose(3, 2)):
        seen = set()
        for bi in range(lay.batch[0]):
            for bj in range(lay.batch[1]):
                for lane in range(lay.wave_size):
                    for e in range(lay.elements):
                        rc = lay.coords(lane, e, (bi, bj))
                        assert (lane, e, (bi, bj)) in lay.owners(*rc)
                        seen.add(rc)
        assert len(seen) == lay.rows * lay.cols  # every element held (once modulo replicas)


def test_wave_tile_cost():
    intr = TARGETS["gfx1100"].intrinsic("WMMA_F32_16x16x16_F16")
    assert intr.wave_tile_cost(64, 32, 32) == {"instructions": 16, "acc_vgprs": 64, "a_vgprs": 64, "b_vgprs": 32}
    f16out = TARGETS["gfx1100"].intrinsic("WMMA_F16_16x16x16_F16")
    assert f16out.vgprs("C") == 8  # 16-bit results still take a whole VGPR each (OPSEL half)
    mfma = TARGETS["gfx942"].intrinsic("MFMA_F32_32x32x8_F16")
    assert mfma.wave_tile_cost(64, 64, 16)["acc_vgprs"] == 4 * 16


def test_every_catalogue_instruction_exists_in_the_isa_model():
    for items in CATALOGUE.values():
        for intr in items:
            assert intr.isa_key in INSTRUCTIONS, intr.name


def test_isa_model_does_not_import_the_compiler():
    """Ground truth stays independent: no module of runtime/isa imports mmaflow.compiler."""
    for path in (Path(__file__).parent.parent / "runtime" / "isa").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                assert "compiler" not in mod and not (node.level and mod.startswith("..")), f"{path.name}: {mod}"
            if isinstance(node, ast.Import):
                assert all("compiler" not in a.name for a in node.names), path.name


def test_executor_does_not_import_the_compiler_model():
    """The lane executor (and the reference interpreter the model checks use) is the other half
    of the ground truth: it may share the error hierarchy, nothing of the compiler's model
    (layouts, intrinsics, targets, stages)."""
    runtime = Path(__file__).parent.parent / "runtime"
    for path in sorted((runtime / "executor").glob("*.py")) + [runtime / "reference.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                # the error hierarchy and the IR helpers (parsing, locations) are shared
                ok = not mod.startswith("mmaflow.compiler") or mod in (
                    "mmaflow.compiler.core.errors",
                    "mmaflow.compiler.core.mlir",
                )
                assert ok and not (node.level and mod.startswith("..")), f"{path.name}: {mod}"
            if isinstance(node, ast.Import):
                assert all(not a.name.startswith("mmaflow.compiler") for a in node.names), path.name


@pytest.mark.parametrize("target", ["gfx1100", "gfx1201", "gfx942", "gfx950", "sm_80", "sm_90a"])
def test_executor_lds_banks_agree_with_the_catalogue(target):
    """Two independent records of each GPU's LDS banks (the executor's bank-conflict model and
    the compiler's target table) must agree."""
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.runtime.executor import lds_banks

    t = get_target(target)
    assert lds_banks(t.iree_arch) == t.lds_banks


@pytest.mark.parametrize(
    "target,name,operand",
    [
        ("gfx1100", "WMMA_F32_16x16x16_F16", "A"),
        ("gfx1100", "WMMA_F16_16x16x16_F16", "C"),
        ("gfx942", "MFMA_F32_32x32x8_F16", "C"),
        ("sm_80", "MMA_SYNC_F32_16x8x16_F16", "B"),
    ],
)
def test_layout_json(target, name, operand):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mmaflow.compiler.cli",
            "layout",
            target,
            "--intrinsic",
            name,
            "--operand",
            operand,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    intr = TARGETS[target].intrinsic(name)
    lay = intr.operand(operand)
    assert (data["target"], data["intrinsic"], data["operand"]) == (target, name, operand)
    assert (data["rows"], data["cols"], data["lanes"]) == (lay.rows, lay.cols, intr.wave_size)
    elems = data["elements"]
    assert len(elems) == intr.wave_size * lay.elements  # replicated lanes listed; unused halves not
    # Each element agrees with the independent ISA model's placement of that (lane, slot).
    isa = INSTRUCTIONS[intr.isa_key]
    place = {"A": isa.a_place, "B": isa.b_place, "C": isa.c_place}[operand]
    for e in elems:
        assert place(e["lane"], e["index"]) == (e["row"], e["col"]), e


@pytest.mark.parametrize(
    "target,name",
    [("gfx942", "MFMA_F32_16x16x16_F16"), ("gfx942", "MFMA_F32_32x32x8_F16"), ("gfx942", "MFMA_I32_16x16x32_I8")],
)
def test_interleaved_k_steps_stay_a_k_permutation(target, name):
    """Layout.interleave_batch on A's cols and B's rows: every tile K index is used exactly once per
    lane group, A and B meet at the same K for every (step, instruction k), and a lane's elements
    of consecutive steps become one contiguous run."""
    from mmaflow.compiler.target.layout import COL, ROW
    from mmaflow.compiler.target.targets import get_target

    intr = get_target(target).intrinsic(name)
    la, lb, _ = intr.codegen_layouts()
    steps = 2
    a, b = la.compose(1, steps).interleave_batch(COL), lb.compose(steps, 1).interleave_batch(ROW)
    ks_a, ks_b = set(), set()
    for kk in range(steps):
        for k in range(intr.k):
            lane_a, el_a, _ = la.owners(0, k)[0]
            lane_b, el_b, _ = lb.owners(k, 0)[0]
            ka, kb = a.coords(lane_a, el_a, (0, kk))[1], b.coords(lane_b, el_b, (kk, 0))[0]
            assert ka == kb, (kk, k, ka, kb)
            ks_a.add(ka)
            ks_b.add(kb)
    assert ks_a == ks_b == set(range(steps * intr.k))
    run = la.runs(COL)[0].length
    for lane in range(intr.wave_size):
        cols = [a.coords(lane, e, (0, kk))[1] for kk in range(steps) for e in range(run)]
        assert cols == list(range(cols[0], cols[0] + steps * run)), (lane, cols)
