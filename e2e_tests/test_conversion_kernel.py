"""The RDNA3 wave32 C -> A conversion as IR (``compiler/kernels/common/convert_emit.py``), run on the lane executor.

A one-wave kernel: every lane loads its eight accumulator values of S^T = K Q^T (placed by the
independent ISA model's C layout), converts them to P's A operand with the planned register
route (four ``rocdl.permlanex16`` and per-lane selects), stores that A operand and feeds it to
``amdgpu.wmma`` with V. The executor runs ``rocdl.permlanex16`` from its own reading of the ISA
(``runtime/executor/``); the stored A must be what the ISA model's A layout says, and D = P V.
The same kernel with the plan's LDS round trip instead (``emit_lds_route``) must give the same
A operand and D.
"""

from __future__ import annotations

import numpy as np
import pytest
from iree.compiler import ir

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
from mmaflow.compiler.kernels.common.convert_emit import emit_lds_route, emit_register_route
from mmaflow.compiler.target.convert import attention_conversion, slots
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.executor import Kernel
from mmaflow.runtime.isa import INSTRUCTIONS, np_dtype

_LAYOUT = (
    '#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, '
    '#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, Indirect>, '
    "#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>"
)


def _skeleton(t: str) -> str:
    """The kernel around the conversion; %placeholder stands where the converted A goes."""
    g = "#gpu.address_space<global>"
    sub = (
        "%{n} = hal.interface.binding.subspan layout({l}) binding({b}) alignment(64) offset(%c0) flags({f}) "
        ": memref<32x{w}x{t}, {g}>"
    )
    lines = [
        "func.func @convert() {",
        "  %c0 = arith.constant 0 : index",
        "  " + sub.format(n="S", l=_LAYOUT, b=0, f='"ReadOnly|Indirect"', w=8, t="f32", g=g),
        "  " + sub.format(n="V", l=_LAYOUT, b=1, f='"ReadOnly|Indirect"', w=16, t=t, g=g),
        "  " + sub.format(n="A", l=_LAYOUT, b=2, f="Indirect", w=16, t=t, g=g),
        "  " + sub.format(n="D", l=_LAYOUT, b=3, f="Indirect", w=8, t="f32", g=g),
        "  %tid = gpu.thread_id x",
        f"  %acc = vector.load %S[%tid, %c0] : memref<32x8xf32, {g}>, vector<8xf32>",
        f"  %b = vector.load %V[%tid, %c0] : memref<32x16x{t}, {g}>, vector<16x{t}>",
        f"  %placeholder = arith.constant dense<0.0> : vector<16x{t}>",
        f"  vector.store %placeholder, %A[%tid, %c0] : memref<32x16x{t}, {g}>, vector<16x{t}>",
        "  %z = arith.constant dense<0.0> : vector<8xf32>",
        f"  %d = amdgpu.wmma 16x16x16 %placeholder * %b + %z : vector<16x{t}>, vector<16x{t}>, vector<8xf32>",
        f"  vector.store %d, %D[%tid, %c0] : memref<32x8xf32, {g}>, vector<8xf32>",
        "  return",
        "}",
    ]
    return "\n".join(lines)


def build(conv, elem: str, route: str = "registers"):
    """The kernel with the conversion emitted through the bindings in place of %placeholder."""
    ctx = new_context()
    module = parse_module(_skeleton(elem), ctx)
    func = ops_named(module.operation, "func.func")[0]
    (placeholder,) = [o for o in ops_named(func, "arith.constant") if str(o.results[0].type).startswith("vector<16x")]
    (load,) = [o for o in ops_named(func, "vector.load") if str(o.results[0].type) == "vector<8xf32>"]
    (tid,) = ops_named(func, "gpu.thread_id")
    with ctx, placeholder.location, ir.InsertionPoint(placeholder):
        emit = emit_register_route if route == "registers" else emit_lds_route
        (a,) = emit(conv.plan, [load.results[0]], tid.results[0], elem_type=placeholder.results[0].type.element_type)
    placeholder.results[0].replace_all_uses_with(a)
    placeholder.erase()
    assert module.operation.verify()
    return module, func


@pytest.mark.parametrize("route", ["registers", "lds"])
@pytest.mark.parametrize("elem,name", [("f16", "WMMA_F32_16x16x16_F16"), ("bf16", "WMMA_F32_16x16x16_BF16")])
def test_rdna3_conversion_runs_on_the_executor(elem, name, route):
    target = get_target("gfx1100")
    intr = target.intrinsic(name)
    conv = attention_conversion(intr, transposed=True, vendor="amd", family="rdna3")
    assert conv.plan.chosen == "registers" and len(conv.plan.registers.permutes) == 4
    module, func = build(conv, elem, route)
    text = str(module)
    if route == "registers":
        assert text.count("rocdl.permlanex16") == 4 and "memref.alloc" not in text  # no LDS
    else:
        assert "rocdl.permlanex16" not in text and text.count("memref.alloc") == 1

    isa = INSTRUCTIONS[intr.isa_key]
    dt = np_dtype(elem)
    rng = np.random.default_rng(3)
    p = rng.uniform(-2, 2, (16, 16)).astype(np.float32)  # P (queries x keys), before the conversion
    v = rng.uniform(-2, 2, (16, 16)).astype(dt)
    s = np.zeros((32, 8), np.float32)  # each lane's accumulator of S^T = K Q^T: S^T[r][c] = P[c][r]
    for lane in range(32):
        for e in range(8):
            r, c = isa.c_place(lane, e)
            s[lane, e] = p[c, r]
    keys = list(range(16))  # the plan keeps the K order (checked below)
    assert conv.plan.k_map == tuple(keys)
    b = np.zeros((32, 16), dt)
    for lane in range(32):
        for e in range(16):
            k, n = isa.b_place(lane, e)
            b[lane, e] = v[keys[k], n]
    bufs = {0: s.copy(), 1: b.copy(), 2: np.zeros((32, 16), dt), 3: np.zeros((32, 8), np.float32)}
    kernel = Kernel(func, arch="gfx1100", grid=(1, 1, 1), workgroup_size=32, wave_size=32)
    stats = kernel.run(bufs)
    lds = conv.plan.lds
    if route == "registers":
        assert stats.cross_lane_ops == 4 and stats.lds_access_pieces == 0 and stats.matrix_ops == 1
    else:  # the plan's stores and loads, and no race (the barrier orders them)
        assert stats.cross_lane_ops == 0 and stats.barriers == 1 and not stats.races
        assert stats.lds_access_pieces >= len(lds.stores) + len(lds.loads)

    p16 = p.astype(dt)  # the conversion rounds once
    for lane in range(32):
        for e in range(16):
            r, c = isa.a_place(lane, e)
            assert bufs[2][lane, e].view(np.uint16) == p16[r, keys[c]].view(np.uint16), (lane, e)
    d = np.zeros((16, 16))
    for lane in range(32):
        for e in range(8):
            d[isa.c_place(lane, e)] = bufs[3][lane, e]
    np.testing.assert_allclose(d, p16.astype(np.float64) @ v.astype(np.float64), atol=1e-4 * 16)


def test_a_swapped_selector_is_caught():
    """The executor's permlanex16 really moves lanes: a kernel whose selectors are reversed
    (lane i reads lane 15 - i of the other row) stores a wrong A operand, whose two lane halves
    no longer agree (the ISA model's WMMA refuses it)."""
    intr = get_target("gfx1100").intrinsic("WMMA_F32_16x16x16_F16")
    conv = attention_conversion(intr, transposed=True, vendor="amd", family="rdna3")
    module, func = build(conv, "f16")
    with module.context:
        i32 = ir.IntegerType.get_signless(32)
        for op in ops_named(func, "arith.constant"):
            if op.results[0].type == i32 and ir.IntegerAttr(op.attributes["value"]).value in (
                0x76543210,
                0xFEDCBA98 - (1 << 32),
            ):
                op.attributes["value"] = ir.IntegerAttr.get(
                    i32,
                    0x01234567
                    if ir.IntegerAttr(op.attributes["value"]).value == 0x76543210
                    else 0x89ABCDEF - (1 << 32),
                )
    isa = INSTRUCTIONS[intr.isa_key]
    s = np.arange(256, dtype=np.float32).reshape(32, 8)
    bufs = {
        0: s,
        1: np.zeros((32, 16), np.float16),
        2: np.zeros((32, 16), np.float16),
        3: np.zeros((32, 8), np.float32),
    }
    from mmaflow.runtime.executor import ExecutorError

    with pytest.raises(ExecutorError, match="replicated lanes must hold equal data"):  # the WMMA refuses it
        Kernel(func, arch="gfx1100", grid=(1, 1, 1), workgroup_size=32, wave_size=32).run(bufs)
    p = np.zeros((16, 16), np.float32)
    for lane in range(32):
        for e in range(8):
            r, c = isa.c_place(lane, e)
            p[c, r] = s[lane, e]
    want = np.array([[p[isa.a_place(lane, e)] for e in range(16)] for lane in range(32)], np.float16)
    assert not np.array_equal(bufs[2], want)


def test_unemitted_permutes_are_refused():
    """RDNA3 wave64's plan needs ds_bpermute (lane ^ 32, ^ 48): not emitted, and said so."""
    intr = get_target("gfx1100").intrinsic("WMMA_F32_16x16x16_F16_W64")
    conv = attention_conversion(intr, transposed=True, vendor="amd", family="rdna3")
    assert slots(conv.plan.source) == 4
    with pytest.raises(UnsupportedError, match="emitting rocdl.ds_bpermute .* is not implemented"):
        build(conv, "f16")
