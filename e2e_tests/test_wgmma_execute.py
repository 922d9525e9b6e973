"""wgmma end to end on the ISA model: the compiler packs the warpgroup's registers (A, C) with its
layouts and writes the shared-memory tiles (B, or A too) with its ``SmemLayout`` and descriptors;
the ISA model (``execute_wgmma``, written from the PTX ISA) computes D; numpy checks it.

Tolerance: f16, bf16 and fp8 products are exact in f32 (11 + 11 or 8 + 8 significand bits), so
the only error of an f32-accumulating wgmma is the rounding of its K + 1 sums to f32: at most
about K * 2^-24 relative to sum(|a| |b|) + |c| (the hardware's order of summation is not
documented; the ISA model itself rounds once). A misplaced element errs by O(1).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import layout_table
from test_wgmma_fp8_accumulator import fp8_model

from mmaflow.compiler.target.intrinsics import wgmma
from mmaflow.compiler.target.smem_layout import Major, SmemLayout, Swizzle
from mmaflow.runtime.isa import IsaError, execute_wgmma, np_dtype

BASE_A, BASE_B = 0, 64 * 1024  # both on every swizzle boundary


def pack(layout, matrix):
    lanes, slots, rows, cols = layout_table(layout)
    regs = np.zeros((layout.wave_size, layout.op_vector_length), matrix.dtype)
    regs[lanes, slots] = matrix[rows, cols]
    return regs


def unpack(layout, regs):
    lanes, slots, rows, cols = layout_table(layout)
    out = np.zeros((layout.rows, layout.cols), regs.dtype)
    out[rows, cols] = regs[lanes, slots]
    return out


@functools.lru_cache(maxsize=None)
def _offsets(tile):
    return np.array([[tile.offset(i, j) for j in range(tile.k)] for i in range(tile.mn)])


def store(smem, tile, base, mn_by_k):
    """Write an mn x k matrix into shared memory as the compiler's tile layout says."""
    eb = mn_by_k.dtype.itemsize
    raw = mn_by_k.reshape(tile.mn, tile.k, 1).view(np.uint8).reshape(tile.mn, tile.k, eb)
    addr = base + _offsets(tile)
    smem[addr[..., None] + np.arange(eb)] = raw


def _random(rng, shape, dtype):
    return rng.uniform(-2, 2, shape).astype(np_dtype(dtype))


def _check(d, a, b, c, k, scale_d=True):
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    ref = a64 @ b64 + (c64 if scale_d else 0)
    bound = k * 2.0**-24 * (np.abs(a64) @ np.abs(b64) + (np.abs(c64) if scale_d else 0)) + 1e-30
    err = np.abs(d.astype(np.float64) - ref)
    assert (err <= bound).all(), f"max error {err.max():.3g} (bound there {bound.flat[err.argmax()]:.3g})"


def run(intr, a, b, c, *, b_major, swizzle, a_major=None, a_swizzle=None, scale_d=True, **scales):
    """D of one instruction: A from registers, or (a_major given) from shared memory."""
    smem = np.zeros(BASE_B + 64 * 1024, np.uint8)
    tb = intr.shared_layout("B", b_major, swizzle)
    bt = np.zeros((tb.mn, tb.k), b.dtype)
    bt[: intr.n, : intr.k] = b.T  # the tile is N x K (the padding the smallest tile has stays zero)
    store(smem, tb, BASE_B, bt)
    b_desc = tb.descriptor(BASE_B, 0, 0, intr.n, intr.k).encode()
    kwargs = {}
    if a_major is None:
        kwargs["a_regs"] = pack(intr.a, a)
    else:
        ta = intr.shared_layout("A", a_major, a_swizzle)
        at = np.zeros((ta.mn, ta.k), a.dtype)
        at[:, : intr.k] = a
        store(smem, ta, BASE_A, at)
        kwargs["a_desc"] = ta.descriptor(BASE_A, 0, 0, intr.m, intr.k).encode()
        kwargs["trans_a"] = a_major is Major.MN
    d = execute_wgmma(
        intr.isa_key, pack(intr.c, c), b_desc, smem, trans_b=b_major is Major.MN, scale_d=scale_d, **kwargs, **scales
    )
    return unpack(intr.c, d)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("swizzle", list(Swizzle), ids=lambda s: s.value)
@pytest.mark.parametrize("b_major", list(Major), ids=lambda m: f"B{m.value}")
def test_register_a_shared_b(dtype, n, swizzle, b_major):
    intr = wgmma(n, dtype)
    rng = np.random.default_rng(n * 7 + len(swizzle.value))
    a, b = _random(rng, (64, intr.k), dtype), _random(rng, (intr.k, n), dtype)
    c = rng.uniform(-2, 2, (64, n)).astype(np.float32)
    _check(run(intr, a, b, c, b_major=b_major, swizzle=swizzle), a, b, c, intr.k)


@pytest.mark.parametrize("swizzle", list(Swizzle), ids=lambda s: s.value)
@pytest.mark.parametrize("a_major", list(Major), ids=lambda m: f"A{m.value}")
def test_shared_a_shared_b(swizzle, a_major):
    intr = wgmma(128, "f16")
    rng = np.random.default_rng(3)
    a, b = _random(rng, (64, 16), "f16"), _random(rng, (16, 128), "f16")
    c = rng.uniform(-2, 2, (64, 128)).astype(np.float32)
    d = run(
        intr,
        a,
        b,
        c,
        b_major=Major.MN if a_major is Major.K else Major.K,
        swizzle=Swizzle.B128,
        a_major=a_major,
        a_swizzle=swizzle,
    )
    _check(d, a, b, c, 16)


@pytest.mark.parametrize("a_type,b_type", [("f8E4M3FN", "f8E4M3FN"), ("f8E5M2", "f8E4M3FN")])
@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("swizzle", list(Swizzle), ids=lambda s: s.value)
def test_fp8_k_major(a_type, b_type, n, swizzle):
    intr = wgmma(n, a_type, b_type)
    rng = np.random.default_rng(n + len(swizzle.value))
    a, b = _random(rng, (64, 32), a_type), _random(rng, (32, n), b_type)
    c = rng.uniform(-2, 2, (64, n)).astype(np.float32)
    # fp8 does not accumulate in f32 (the measured accumulator, test_wgmma_fp8_accumulator.py):
    # compared bit for bit with a scalar rendering of that model; a misplaced element errs by O(1).
    want = fp8_model(a, b, c)
    for d in (
        run(intr, a, b, c, b_major=Major.K, swizzle=swizzle),
        run(intr, a, b, c, b_major=Major.K, swizzle=swizzle, a_major=Major.K, a_swizzle=swizzle),
    ):
        assert np.array_equal(d, want), np.abs(d - want).max()


def test_scale_d_zero_ignores_the_accumulator():
    intr = wgmma(64, "bf16")
    rng = np.random.default_rng(9)
    a, b = _random(rng, (64, 16), "bf16"), _random(rng, (16, 64), "bf16")
    c = np.full((64, 64), 1e6, np.float32)
    _check(run(intr, a, b, c, b_major=Major.K, swizzle=Swizzle.B64, scale_d=False), a, b, c, 16, scale_d=False)


@pytest.mark.parametrize("scale_a,scale_b", [(-1, 1), (1, -1), (-1, -1)])
def test_imm_scale_negates_an_input(scale_a, scale_b):
    intr = wgmma(128, "f16")
    rng = np.random.default_rng(scale_a + 3 * scale_b + 10)
    a, b = _random(rng, (64, 16), "f16"), _random(rng, (16, 128), "f16")
    c = rng.uniform(-2, 2, (64, 128)).astype(np.float32)
    d = run(intr, a, b, c, b_major=Major.K, swizzle=Swizzle.B128, scale_a=scale_a, scale_b=scale_b)
    _check(d, (scale_a * a.astype(np.float32)), (scale_b * b.astype(np.float32)), c, 16)
    with pytest.raises(IsaError, match="1 or -1"):
        run(intr, a, b, c, b_major=Major.K, swizzle=Swizzle.B128, scale_a=2)


@pytest.mark.parametrize("swizzle", list(Swizzle), ids=lambda s: s.value)
@pytest.mark.parametrize("b_major", list(Major), ids=lambda m: f"B{m.value}")
def test_k_loop_over_a_tile(swizzle, b_major):
    """A 128 x 64 B tile (N x K) read as two N = 64 blocks by four K steps each: the descriptors a
    kernel's K loop would issue (a K step inside a swizzled K-major line moves the start address
    by 32 bytes), accumulated in registers."""
    intr = wgmma(64, "f16")
    rng = np.random.default_rng(21)
    a, b = _random(rng, (64, 64), "f16"), _random(rng, (64, 128), "f16")
    tile = SmemLayout(b_major, swizzle, 16, 128, 64)
    smem = np.zeros(BASE_B + tile.bytes, np.uint8)
    store(smem, tile, BASE_B, np.ascontiguousarray(b.T))
    for n0 in (0, 64):
        acc = pack(intr.c, np.zeros((64, 64), np.float32))
        for k0 in range(0, 64, 16):
            desc = tile.descriptor(BASE_B, n0, k0, 64, 16).encode()
            acc = execute_wgmma(
                intr.isa_key, acc, desc, smem, a_regs=pack(intr.a, a[:, k0 : k0 + 16]), trans_b=b_major is Major.MN
            )
        _check(unpack(intr.c, acc), a, b[:, n0 : n0 + 64], np.zeros((64, 64), np.float32), 64)


def test_a_wrong_major_is_visible():
    """B written K-major but read as MN-major (imm-trans-b 1): the product is wrong, so the
    tests above see the transpose bit."""
    intr = wgmma(64, "f16")
    rng = np.random.default_rng(4)
    a, b = _random(rng, (64, 16), "f16"), _random(rng, (16, 64), "f16")
    c = np.zeros((64, 64), np.float32)
    tb = intr.shared_layout("B", Major.K, Swizzle.B32)
    smem = np.zeros(BASE_B + 64 * 1024, np.uint8)
    store(smem, tb, BASE_B, np.ascontiguousarray(b.T))
    desc = tb.descriptor(BASE_B, 0, 0, 64, 16).encode()
    d = unpack(intr.c, execute_wgmma(intr.isa_key, pack(intr.c, c), desc, smem, a_regs=pack(intr.a, a), trans_b=True))
    with pytest.raises(AssertionError, match="max error"):
        _check(d, a, b, c, 16)


def test_out_of_bounds_descriptor_is_reported():
    intr = wgmma(64, "f16")
    tb = intr.shared_layout("B", Major.K, Swizzle.B128)
    desc = tb.descriptor(4096, 0, 0, 64, 16).encode()
    c = pack(intr.c, np.zeros((64, 64), np.float32))
    with pytest.raises(IsaError, match="outside the 4096 bytes"):
        execute_wgmma(intr.isa_key, c, desc, np.zeros(4096, np.uint8), a_regs=np.zeros((128, 8), np.float16))
