"""Descriptor-addressed operands: the compiler's shared-memory tiles and descriptors
(compiler/target/smem_layout.py) against the ISA model's transcription of the PTX canonical layouts and
descriptor format (runtime/isa/smem_matrix.py).

Spot values are worked by hand from the PTX ISA 9.7.15.5.1.2 text: its "exact layout" examples
(CuTe shape:stride in elements, then Swizzle<B,4,3> on the byte address) and Figure 157's
128-byte K-major atom (chunk c of line r stored at chunk c ^ r).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.target.smem_layout import Major, MatrixDescriptor, SmemLayout, Swizzle
from mmaflow.runtime.isa import Descriptor, IsaError, decode_descriptor, encode_descriptor, operand_address

MODES = [
    (major, swizzle, bits)
    for major in Major
    for swizzle in Swizzle
    for bits in (16, 8)
    if major is Major.K or bits == 16
]


def _ids(case):
    return "-".join(str(getattr(x, "value", x)) for x in case)


# ---- the descriptor ------------------------------------------------------------------------------


def test_descriptor_round_trips_and_agrees_with_the_isa_model():
    rng = np.random.default_rng(5)
    for _ in range(200):
        start, lbo, sbo = (int(x) * 16 for x in rng.integers(0, 2**14, 3))
        swizzle, base = Swizzle(rng.choice([s.value for s in Swizzle])), int(rng.integers(0, 8))
        d = MatrixDescriptor(start, lbo, sbo, swizzle, base)
        value = d.encode()
        assert 0 <= value < 2**64
        assert MatrixDescriptor.decode(value) == d
        isa = decode_descriptor(value)  # the other transcription reads the same fields
        assert (isa.start_address, isa.leading_byte_offset, isa.stride_byte_offset, isa.base_offset, isa.swizzle) == (
            start,
            lbo,
            sbo,
            base,
            swizzle.value,
        )
        assert encode_descriptor(isa) == value


def test_descriptor_bit_positions():
    """Bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset, 62-63 mode
    (0 none, 1 128B, 2 64B, 3 32B); the PTX example K-major tf32 LBO 64*4 B encodes 16, SBO 32*4 B 8."""
    assert MatrixDescriptor(0x3FFF0, 0, 0, Swizzle.NONE).encode() == 0x3FFF
    assert MatrixDescriptor(0, 256, 128, Swizzle.NONE).encode() == 16 << 16 | 8 << 32
    assert MatrixDescriptor(0, 0, 0, Swizzle.B128, 5).encode() == 1 << 62 | 5 << 49
    assert [MatrixDescriptor(0, 0, 0, s).encode() >> 62 for s in Swizzle] == [0, 3, 2, 1]
    # the probe of docs/kernels/hopper_wgmma.md: (addr & 0x3FFFF) >> 4 | (LBO >> 4) << 16 | (SBO >> 4) << 32
    assert MatrixDescriptor(0x400, 1024, 128, Swizzle.NONE).encode() == 0x40 | 64 << 16 | 8 << 32


@pytest.mark.parametrize(
    "field,value",
    [("start_address", 8), ("leading_byte_offset", 2**18), ("stride_byte_offset", -16), ("base_offset", 8)],
)
def test_descriptor_refuses_what_it_cannot_encode(field, value):
    kwargs = dict(start_address=0, leading_byte_offset=16, stride_byte_offset=16, swizzle=Swizzle.NONE)
    kwargs[field] = value
    with pytest.raises(UnsupportedError, match="descriptor"):
        MatrixDescriptor(**kwargs)


# ---- layouts: bijections, spot values, agreement ------------------------------------------------


@pytest.mark.parametrize("case", MODES, ids=_ids)
def test_tile_offsets_are_a_bijection(case):
    major, swizzle, bits = case
    mn, k = (128, 128) if major is Major.K else (128, 32)
    t = SmemLayout(major, swizzle, bits, mn, k)
    offsets = sorted(t.offset(i, j) for i in range(mn) for j in range(k))
    assert offsets == list(range(0, t.bytes, bits // 8))


def _ptx_spot(desc, k_major, bits, mn, k):
    return int(operand_address(desc, k_major=k_major, element_bits=bits, mn=mn, k=k))


def test_spot_values_from_the_ptx_examples():
    # K-major, no swizzle, tf32: ((8,2),(4,4)):((4,32),(1,64)), LBO 64*4 B, SBO 32*4 B.
    # (9, 5): 1*4 + 1*32 + 1*1 + 1*64 = 101 elements = 404 B.
    d = Descriptor(0, 256, 128, 0, "none")
    assert _ptx_spot(d, True, 32, 9, 5) == 404
    tf32 = SmemLayout(Major.K, Swizzle.NONE, 32, 16, 16)
    assert tf32.strides() == (256, 128) and tf32.offset(9, 5) == 404
    # MN-major, no swizzle, bf16: ((8,1,2),(8,2)):((1,8,64),(8,128)), LBO 128*2 B, SBO 64*2 B.
    # (13, 10): 5 + 64 + 2*8 + 128 = 213 elements = 426 B.
    assert _ptx_spot(Descriptor(0, 256, 128, 0, "none"), False, 16, 13, 10) == 426
    t = SmemLayout(Major.MN, Swizzle.NONE, 16, 16, 16)
    assert t.strides() == (256, 128) and t.offset(13, 10) == 426
    # MN-major, 32B, bf16: Swizzle<1,4,3> o ((8,2,2),(8,2)):((1,8,128),(16,256)), LBO 256 B, SBO 512 B.
    # (21, 13): 21 = 5 + 8*(2 % 2) + 16*1 -> 5 + 0 + 128; 13 -> 5*16 + 256: 469 elements = 938 B;
    # bit 7 set -> bit 4 flipped: 954.
    assert _ptx_spot(Descriptor(0, 256, 512, 0, "32B"), False, 16, 21, 13) == 954
    t = SmemLayout(Major.MN, Swizzle.B32, 16, 32, 16)
    assert t.strides() == (256, 512) and t.offset(21, 13) == 954
    # MN-major, 64B, bf16: Swizzle<2,4,3> o ((8,4,2),(8,2)):((1,8,256),(32,512)), LBO 512 B, SBO 1024 B.
    # (37, 10): 5 + 256 + 2*32 + 512 = 837 elements = 1674 B; bits 8:7 = 1 -> bit 4 flipped: 1690.
    assert _ptx_spot(Descriptor(0, 512, 1024, 0, "64B"), False, 16, 37, 10) == 1690
    t = SmemLayout(Major.MN, Swizzle.B64, 16, 64, 16)
    assert t.strides() == (512, 1024) and t.offset(37, 10) == 1690
    # K-major, 128B, f16 (Figure 157): line r, chunk c at chunk c ^ r.
    d = Descriptor(0, 16, 1024, 0, "128B")
    t = SmemLayout(Major.K, Swizzle.B128, 16, 64, 64)
    for (mn, k), want in {
        (1, 0): 144,
        (3, 40): 3 * 128 + (5 ^ 3) * 16,
        (7, 63): 7 * 128 + 0 + 7 * 2,
        (9, 17): 1024 + 128 + (2 ^ 1) * 16 + 2,
    }.items():
        assert _ptx_spot(d, True, 16, mn, k) == want, (mn, k)
        assert t.offset(mn, k) == want, (mn, k)


# Tiles two instructions wide along M/N and four K steps deep, at a non-zero (aligned) base.
@pytest.mark.parametrize("case", MODES, ids=_ids)
@pytest.mark.parametrize("inst_mn", [64, 128])
def test_every_instruction_descriptor_addresses_the_tile(case, inst_mn):
    """For every instruction operand of a tile (each M/N block, each K step), the ISA model reads
    element (mn, k) of the operand through the compiler's descriptor exactly where the compiler's
    tile layout stored (mn0 + mn, k0 + k)."""
    major, swizzle, bits = case
    inst_k = 256 // bits
    tile = SmemLayout(major, swizzle, bits, 2 * inst_mn, 4 * inst_k)
    base = 3 * 1024
    mn, k = np.meshgrid(np.arange(inst_mn), np.arange(inst_k), indexing="ij")
    stored = np.array([[tile.offset(i, j) for j in range(tile.k)] for i in range(tile.mn)]) + base
    for mn0, k0 in itertools.product(range(0, tile.mn, inst_mn), range(0, tile.k, inst_k)):
        d = tile.descriptor(base, mn0, k0, inst_mn, inst_k)
        isa = decode_descriptor(d.encode())
        got = operand_address(isa, k_major=major is Major.K, element_bits=bits, mn=mn, k=k)
        np.testing.assert_array_equal(
            got, stored[mn0 : mn0 + inst_mn, k0 : k0 + inst_k], err_msg=f"operand at ({mn0}, {k0}) of {tile.describe()}"
        )


def test_the_agreement_can_fail():
    """The same check with the descriptor's byte offsets exchanged (the swapped probe of
    docs/kernels/hopper_wgmma.md) or the wrong swizzle mode does not hold."""
    tile = SmemLayout(Major.K, Swizzle.B128, 16, 128, 64)
    d = tile.descriptor(0, 0, 16, 64, 16)
    mn, k = np.meshgrid(np.arange(64), np.arange(16), indexing="ij")
    stored = np.array([[tile.offset(i, j) for j in range(16, 32)] for i in range(64)])
    ok = operand_address(decode_descriptor(d.encode()), k_major=True, element_bits=16, mn=mn, k=k)
    np.testing.assert_array_equal(ok, stored)
    for wrong in (
        Descriptor(d.start_address, d.leading_byte_offset, d.stride_byte_offset, 0, "64B"),
        Descriptor(d.start_address, d.leading_byte_offset, d.stride_byte_offset, 0, "none"),
    ):
        assert not np.array_equal(operand_address(wrong, k_major=True, element_bits=16, mn=mn, k=k), stored)
    nosw = SmemLayout(Major.K, Swizzle.NONE, 16, 64, 16)
    d = nosw.descriptor(0, 0, 0, 64, 16)
    swapped = Descriptor(0, d.stride_byte_offset, d.leading_byte_offset, 0, "none")
    stored = np.array([[nosw.offset(i, j) for j in range(16)] for i in range(64)])
    assert not np.array_equal(operand_address(swapped, k_major=True, element_bits=16, mn=mn, k=k), stored)


def test_isa_address_is_injective_on_an_operand():
    for k_major, swizzle in itertools.product((True, False), ("none", "32B", "64B", "128B")):
        tile = SmemLayout(Major.K if k_major else Major.MN, Swizzle(swizzle), 16, 256, 64)
        d = decode_descriptor(tile.descriptor(0, 0, 16, 256, 16).encode())
        mn, k = np.meshgrid(np.arange(256), np.arange(16), indexing="ij")
        addr = operand_address(d, k_major=k_major, element_bits=16, mn=mn, k=k)
        assert len(np.unique(addr)) == addr.size and (addr % 2 == 0).all()


# ---- bank conflicts --------------------------------------------------------------------------------


def _wavefronts(byte_addresses, banks=32):
    """Shared-memory wavefronts for 16-byte accesses at these addresses: the most 4-byte words
    that fall in one bank (all distinct words here)."""
    count = np.zeros(banks, int)
    for a in byte_addresses:
        for w in range(4):
            count[(a // 4 + w) % banks] += 1
    return count.max()


@pytest.mark.parametrize("major", list(Major))
def test_128b_swizzle_is_bank_conflict_free_for_eight_lines(major):
    """The same 16-byte chunk of 8 consecutive lines (8 rows' K 8c..8c+7, or 8 K rows' M/N chunk):
    one wavefront with the 128B swizzle, 8 without it (the lines are 128 bytes apart)."""
    tile = SmemLayout(major, Swizzle.B128, 16, 128, 64)
    for line0 in (0, 8, 40) if major is Major.K else (0, 8, 16):
        for c in range(8):
            if major is Major.K:
                swz = [tile.offset(line0 + r, 8 * c) for r in range(8)]
                lin = [tile.linear_offset(line0 + r, 8 * c) for r in range(8)]
            else:
                swz = [tile.offset(8 * c, line0 + r) for r in range(8)]
                lin = [tile.linear_offset(8 * c, line0 + r) for r in range(8)]
            assert _wavefronts(swz) == 1, (line0, c, swz)
            assert _wavefronts(lin) == 8


# ---- refusals -------------------------------------------------------------------------------------


def test_layout_refusals():
    with pytest.raises(UnsupportedError, match="16-bit types only"):
        SmemLayout(Major.MN, Swizzle.B128, 8, 128, 32)
    with pytest.raises(UnsupportedError, match="atoms"):
        SmemLayout(Major.K, Swizzle.B128, 16, 64, 32)  # a 128B K-major line is 64 f16
    tile = SmemLayout(Major.K, Swizzle.B128, 16, 128, 64)
    with pytest.raises(UnsupportedError, match="1024-byte boundary"):
        tile.descriptor(512, 0, 0, 64, 16)
    with pytest.raises(UnsupportedError, match="K step"):
        tile.descriptor(0, 0, 8, 64, 16)
    with pytest.raises(IsaError, match="base offset"):
        operand_address(Descriptor(0, 16, 1024, 1, "128B"), k_major=True, element_bits=16, mn=0, k=0)


def test_the_device_probe_layout_is_the_k_major_no_swizzle_tile():
    """docs/kernels/hopper_wgmma.md's probe, exact on the H100: 64x64 f16 K-major, element (r, k) at
    (k/8)*1024 + (r/8)*128 + (r%8)*16 + (k%8)*2, LBO 1024, SBO 128, +2048 B per K step. It is
    the compiler's K-major no-swizzle tile of that size."""
    tile = SmemLayout(Major.K, Swizzle.NONE, 16, 64, 64)
    for r, k in itertools.product(range(64), range(64)):
        assert tile.offset(r, k) == (k // 8) * 1024 + (r // 8) * 128 + (r % 8) * 16 + (k % 8) * 2
    for step in range(4):
        d = tile.descriptor(0, 0, 16 * step, 64, 16)
        assert (d.start_address, d.leading_byte_offset, d.stride_byte_offset) == (2048 * step, 1024, 128)
