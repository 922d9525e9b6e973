"""gfx950's block-scaled MFMA (``amdgpu.scaled_mfma``: ``v_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4``)
on the lane executor: a one-wave kernel loads each lane's packed fp4 bytes and bit-casts them,
loads a 4-byte scale vector per lane whose ``scalesIdx`` byte is the lane's E8M0 scale (the other
three bytes random, so reading the wrong one shows), and stores D. Data are placed with the
catalogue's layouts (A, B, C and the scale layouts of ``intrinsics.scaled_f8f6f4``); the result
must be numpy's sum over MX blocks of 32 K of (a * 2^(sa - 127)) (b * 2^(sb - 127)), exactly
(fp4 values times powers of two, few enough terms to be exact in f32). The instruction's
semantics are the independent ISA model's (``runtime/isa``); ``test_layout_model.py`` checks
every scaled record's layouts against it; the MXFP matmuls that issue it are test_mxfp4.py's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.executor import Kernel

_LAYOUT = (
    "#hal.pipeline.layout<bindings = ["
    + ", ".join(['#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">'] * 4)
    + ", #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>"
)


def _kernel(m: int, k: int, idx_a: int, idx_b: int) -> str:
    g = "#gpu.address_space<global>"
    acc = 4 if m == 16 else 16
    sub = "  %{n} = hal.interface.binding.subspan layout({l}) binding({b}) alignment(64) offset(%c0) flags({f}) : memref<64x{w}x{t}, {g}>"
    ro = '"ReadOnly|Indirect"'
    return "\n".join(
        [
            "func.func @scaled() {",
            "  %c0 = arith.constant 0 : index",
            sub.format(n="A", l=_LAYOUT, b=0, f=ro, w=16, t="i8", g=g),
            sub.format(n="B", l=_LAYOUT, b=1, f=ro, w=16, t="i8", g=g),
            sub.format(n="SA", l=_LAYOUT, b=2, f=ro, w=4, t="f8E8M0FNU", g=g),
            sub.format(n="SB", l=_LAYOUT, b=3, f=ro, w=4, t="f8E8M0FNU", g=g),
            sub.format(n="D", l=_LAYOUT, b=4, f="Indirect", w=acc, t="f32", g=g),
            "  %tid = gpu.thread_id x",
            f"  %a8 = vector.load %A[%tid, %c0] : memref<64x16xi8, {g}>, vector<16xi8>",
            "  %a = vector.bitcast %a8 : vector<16xi8> to vector<32xf4E2M1FN>",
            f"  %b8 = vector.load %B[%tid, %c0] : memref<64x16xi8, {g}>, vector<16xi8>",
            "  %b = vector.bitcast %b8 : vector<16xi8> to vector<32xf4E2M1FN>",
            f"  %sa = vector.load %SA[%tid, %c0] : memref<64x4xf8E8M0FNU, {g}>, vector<4xf8E8M0FNU>",
            f"  %sb = vector.load %SB[%tid, %c0] : memref<64x4xf8E8M0FNU, {g}>, vector<4xf8E8M0FNU>",
            f"  %z = arith.constant dense<0.0> : vector<{acc}xf32>",
            f"  %d = amdgpu.scaled_mfma {m}x{m}x{k} (%sa[{idx_a}] * %a) * (%sb[{idx_b}] * %b) + %z : "
            f"vector<4xf8E8M0FNU>, vector<32xf4E2M1FN>, vector<4xf8E8M0FNU>, vector<32xf4E2M1FN>, vector<{acc}xf32>",
            f"  vector.store %d, %D[%tid, %c0] : memref<64x{acc}xf32, {g}>, vector<{acc}xf32>",
            "  return",
            "}",
        ]
    )


def _place(layout, matrix, dtype):
    """Per-lane registers (64, slots) of ``matrix`` by the catalogue layout."""
    regs = np.zeros((64, layout.op_vector_length), dtype)
    for lane in range(64):
        for e in range(layout.elements):
            regs[lane, layout.op_index(e)] = matrix[layout.coords(lane, e)]
    return regs


def _nibbles_to_bytes(codes: np.ndarray) -> np.ndarray:
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)


@pytest.mark.parametrize("size,idx_a,idx_b", [(16, 2, 1), (32, 0, 3)])
def test_scaled_mfma_on_the_executor(size, idx_a, idx_b):
    intr = get_target("gfx950").intrinsic(f"MFMA_SCALE_F32_{size}x{size}x{128 if size == 16 else 64}_F4E2M1FN")
    rng = np.random.default_rng(size)
    a_codes = rng.integers(0, 16, (intr.m, intr.k)).astype(np.uint8)
    b_codes = rng.integers(0, 16, (intr.k, intr.n)).astype(np.uint8)
    blocks = intr.k // intr.scale_block
    sa = rng.integers(120, 135, (intr.m, blocks)).astype(np.uint8)
    sb = rng.integers(120, 135, (blocks, intr.n)).astype(np.uint8)
    bufs = {
        0: _nibbles_to_bytes(_place(intr.a, a_codes, np.uint8)),
        1: _nibbles_to_bytes(_place(intr.b, b_codes, np.uint8)),
        2: rng.integers(0, 255, (64, 4)).astype(np.uint8),
        3: rng.integers(0, 255, (64, 4)).astype(np.uint8),
        4: np.zeros((64, intr.c.op_vector_length), np.float32),
    }
    bufs[2][:, idx_a] = _place(intr.scale_a, sa, np.uint8)[:, 0]
    bufs[3][:, idx_b] = _place(intr.scale_b, sb, np.uint8)[:, 0]
    for i in (2, 3):
        bufs[i] = bufs[i].view(ml_dtypes.float8_e8m0fnu)
    module = parse_module(_kernel(intr.m, intr.k, idx_a, idx_b), new_context())
    func = ops_named(module.operation, "func.func")[0]
    stats = Kernel(func, arch="gfx950", grid=(1, 1, 1), workgroup_size=64, wave_size=64).run(bufs)
    assert stats.matrix_ops == 1

    def value(codes):
        return codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)

    a = value(a_codes) * np.repeat(2.0 ** (sa.astype(np.float64) - 127), 32, axis=1)
    b = value(b_codes) * np.repeat(2.0 ** (sb.astype(np.float64) - 127), 32, axis=0)
    want = (a @ b).astype(np.float32)
    got = np.zeros((intr.m, intr.n), np.float32)
    for lane in range(64):
        for e in range(intr.c.elements):
            got[intr.c.coords(lane, e)] = bufs[4][lane, intr.c.op_index(e)]
    np.testing.assert_array_equal(got, want)
