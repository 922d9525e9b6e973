"""16- and 32-bit outputs stored 4 elements per lane on NVIDIA (``EpiloguePlan.lane_pairs``,
``plan.store_pairs``, ``Rewriter._swap_words``): lanes l and l ^ 1 swap a run's 32-bit words of
each two runs 8 columns apart, so each stores 4 contiguous elements (8 or 16 bytes) and a warp's
store covers whole 32-byte sectors. When the plan takes it, the numerics through the lane
executor (edges, sentinels, a wrong swap caught), the executor's own ``vector.bitcast`` and
whole-wave shuffles, and the PTX."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compiled_ptx, simulate
from iree.compiler import ir

from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.kernels.common.contraction import Rewriter
from mmaflow.compiler.kernels.common.plan import lane_pairs, store_pairs
from mmaflow.compiler.kernels.wgmma.plan import warp_c_layout
from mmaflow.compiler.pipeline.pipeline import CodegenOptions
from mmaflow.runtime.executor import ExecutorError, Kernel
from mmaflow.runtime.modules import EPILOGUES, epilogue_module, matmul_module
from mmaflow.runtime.numerics import EPILOGUE_REFERENCES, EpilogueReference

RELU = EPILOGUES["bias_n_relu_f16"]
CAST = dict(out_type="f16", body="%res = arith.truncf %acc : f32 to f16")
WGMMA = {"intrinsic": "WGMMA_F32_64x128x16_F16", "producer": 1, "copy": "tma-wide", "tile_m": 128}


def _plan_line(source: str, target: str, overrides: dict | None = None) -> str:
    res = codegen_module(source, target, options=CodegenOptions(dump_after="distribute", overrides=overrides or {}))
    (exe,) = res.taken
    (line,) = [x for x in exe.run.dumps["distribute"].splitlines() if x.startswith("// distribute: epilogue")]
    return line


@pytest.mark.parametrize("target,overrides", [("sm_80", None), ("sm_90a", None), ("sm_90a", WGMMA)])
def test_outputs_are_stored_by_lane_pairs(target, overrides):
    assert "store 4 contiguous elements each (8 bytes)" in _plan_line(
        epilogue_module(64, 96, 64, **RELU), target, overrides
    )
    # a partial tile along N (the warpgroup kernel needs N % 8 == 0: whole groups always)
    assert "store 4 contiguous" in _plan_line(epilogue_module(64, 136, 64, **CAST), target, overrides)
    # f32: two words per run swapped, 16-byte stores
    line = _plan_line(matmul_module(64, 96, 64), target, overrides)
    assert "swap 2 32-bit words" in line and "(16 bytes)" in line, line


@pytest.mark.parametrize("n,pairs", [(100, True), (98, False)])
def test_pairs_only_where_n_is_whole_groups_of_4(n, pairs):
    """N of 100: partial tiles, whole 4-element groups; N of 98: a group would straddle N."""
    assert ("store 4 contiguous" in _plan_line(epilogue_module(64, n, 64, **CAST), "sm_80")) == pairs


def test_amd_keeps_its_runs():
    assert "store 4 contiguous" not in _plan_line(epilogue_module(64, 96, 64, **RELU), "gfx942")


def test_pairing_needs_an_aligned_output_and_the_quad_layout():
    """The pure decision: the output's byte offset must be a known multiple of 8 (the store's
    alignment), the layout NVIDIA's quad (2 columns per lane, 4 lanes per 8 columns)."""
    from mmaflow.compiler.kernels.common.plan import Extents
    from mmaflow.compiler.target.layout import COL
    from mmaflow.compiler.target.targets import Vendor

    lay = warp_c_layout(256)
    runs = tuple(lay.runs(COL))
    whole = Extents((4096, 4096), (4096, 4096), ("m", "n"), None, ())
    assert lane_pairs(lay, runs, 64, 256, "f16", whole, Vendor.NVIDIA, 0)
    assert lane_pairs(lay, runs, 64, 256, "bf16", whole, Vendor.NVIDIA, 4096)
    assert not lane_pairs(lay, runs, 64, 256, "f16", whole, Vendor.NVIDIA, 4)  # 4-byte aligned only
    assert not lane_pairs(lay, runs, 64, 256, "f16", whole, Vendor.NVIDIA, None)  # offset known at run time
    assert lane_pairs(lay, runs, 64, 256, "f32", whole, Vendor.NVIDIA, 16)
    assert not lane_pairs(lay, runs, 64, 256, "f32", whole, Vendor.NVIDIA, 8)  # a 16-byte store needs 16
    assert not lane_pairs(lay, runs, 64, 256, "i8", whole, Vendor.NVIDIA, 0)
    # a fused epilogue stored as f32 keeps its 8-byte runs (gelu -> f32 spilled with the swap)
    assert not lane_pairs(lay, runs, 64, 256, "f32", whole, Vendor.NVIDIA, 0, fused=True)
    assert lane_pairs(lay, runs, 64, 256, "f16", whole, Vendor.NVIDIA, 0, fused=True)
    assert not lane_pairs(lay, runs, 64, 256, "f16", whole, Vendor.AMD, 0)
    pairs, singles = store_pairs(runs, lay.batch, 64, 256)
    assert len(pairs) == len(runs) // 2 and not singles
    for (_, _, lo), (_, _, hi) in pairs:
        assert lo.row == hi.row and lo.col % 16 == 0 and hi.col == lo.col + 8
    pairs, singles = store_pairs(runs[:-1], lay.batch, 64, 256)  # a run left without its partner
    assert len(pairs) == len(runs) // 2 - 1 and [r for _, _, r in singles] == [runs[-3]]


@pytest.mark.parametrize(
    "target,overrides,name,m,n,k",
    [
        ("sm_80", None, "relu", 72, 100, 64),
        ("sm_80", None, "cast", 128, 136, 96),
        ("sm_80", None, "f32", 72, 100, 64),
        ("sm_90a", WGMMA, "relu", 72, 136, 64),
        ("sm_90a", WGMMA, "cast", 200, 264, 96),
        ("sm_90a", WGMMA, "f32", 200, 264, 96),
    ],
)
def test_pairs_numerics_exact_at_edges(target, overrides, name, m, n, k):
    """Exact on small integers, partial tiles along M and N, sentinels around every tensor."""
    spec, ref = (
        (RELU, EPILOGUE_REFERENCES["bias_n_relu_f16"])
        if name == "relu"
        else (CAST, EpilogueReference(lambda acc: acc, 1.0, 0))
        if name == "cast"
        else (None, None)
    )
    src = epilogue_module(m, n, k, **spec) if spec else matmul_module(m, n, k)
    assert "store 4 contiguous" in _plan_line(src, target, overrides)
    r = simulate(src, target, overrides, seed=21, exact=True, epilogue=ref)
    assert r.check.passed, r.check.line()
    assert not r.stats.races
    r = simulate(src, target, overrides, seed=22, epilogue=ref)
    assert r.check.passed, r.check.line()


def test_a_wrong_swap_is_caught():
    """Storing each lane's own two pairs side by side (no swap) writes the right values to the
    wrong columns: the check above fails."""

    def no_swap(self, em, lo, hi, odd):
        return em.from_elements(
            ir.VectorType.get([4], ir.VectorType(lo.type).element_type),
            [em.extract(lo, 0), em.extract(lo, 1), em.extract(hi, 0), em.extract(hi, 1)],
        )

    saved = Rewriter._swap_words
    Rewriter._swap_words = no_swap
    try:
        src = epilogue_module(64, 96, 64, **CAST)
        text = codegen_module(src, "sm_80").taken[0].text
    finally:
        Rewriter._swap_words = saved
    from mmaflow.runtime.simulate import check_matmul

    r = check_matmul(
        parse_module(text, new_context()), seed=23, exact=True, epilogue=EpilogueReference(lambda acc: acc, 1.0, 0)
    )
    assert not r.check.passed


@pytest.mark.parametrize("out,store,words", [("f16", "st.global.v2.b32", 1), ("f32", "st.global.v4.b32", 2)])
def test_ptx_stores_4_elements_per_lane(tmp_path, out, store, words):
    """The whole way to PTX: the output leaves in 4-element stores (8 bytes for f16, 16 for f32)
    after one shfl.sync.bfly per 32-bit word of a run; no narrower global stores."""
    module = epilogue_module(128, 256, 64, **RELU) if out == "f16" else matmul_module(128, 256, 64)
    text = compiled_ptx(tmp_path, module, "sm_80")
    stores = [ln.split()[0] for ln in text.splitlines() if ln.strip().startswith("st.global")]
    assert stores and set(stores) == {store}, sorted(set(stores))
    assert text.count("shfl.sync.bfly.b32") == words * len(stores)


# ---- the executor's side ------------------------------------------------------------------------


def _kernel(active_lanes: int):
    """64 threads; the first ``active_lanes`` pack (tid, tid + 1000) as f16, swap the 32-bit word
    with lane ^ 1 through vector.bitcast + gpu.shuffle xor, and store it back as f16."""
    from iree.compiler.dialects import arith, func, gpu, hal, scf, vector

    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        i32, f16, index = ir.IntegerType.get_signless(32), ir.F16Type.get(), ir.IndexType.get()
        g = ir.Attribute.parse("#gpu.address_space<global>")
        layout = ir.Attribute.parse(
            "#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>"
        )
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("swap", ir.FunctionType.get([], []))
        with ir.InsertionPoint(fn.add_entry_block()):
            c0 = arith.ConstantOp(index, 0).result
            out = hal.InterfaceBindingSubspanOp(
                ir.MemRefType.get([64, 2], f16, memory_space=g), layout, 0, [], byte_offset=c0, alignment=64
            ).result
            tid = gpu.ThreadIdOp(gpu.Dimension.x).result
            cond = arith.CmpIOp(arith.CmpIPredicate.ult, tid, arith.ConstantOp(index, active_lanes).result).result
            iff = scf.IfOp(cond)
            with ir.InsertionPoint(iff.then_block):
                t = arith.UIToFPOp(f16, arith.IndexCastOp(i32, tid).result).result
                t2 = arith.AddFOp(t, arith.ConstantOp(f16, 1000.0).result).result
                pair = vector.FromElementsOp(ir.VectorType.get([2], f16), [t, t2]).result
                word = vector.ExtractOp(vector.BitCastOp(ir.VectorType.get([1], i32), pair).result, [], [0]).result
                got = gpu.ShuffleOp(
                    word, arith.ConstantOp(i32, 1).result, arith.ConstantOp(i32, 32).result, gpu.ShuffleMode.XOR
                ).results[0]
                back = vector.BitCastOp(
                    ir.VectorType.get([2], f16), vector.FromElementsOp(ir.VectorType.get([1], i32), [got]).result
                ).result
                vector.StoreOp(back, out, [tid, c0])
                scf.YieldOp([])
            func.ReturnOp([])
    assert module.operation.verify()
    return ctx, module, fn


def test_executor_bitcast_and_shuffle_on_whole_waves():
    """Under a branch that whole waves take (warp roles), the shuffle runs; the f16 pair
    travels bit for bit (element 0 the low half)."""
    ctx, module, fn = _kernel(32)
    bufs = {0: np.full((64, 2), -1.0, np.float16)}
    Kernel(fn.operation, arch="sm_80", grid=(1, 1, 1), workgroup_size=64, wave_size=32).run(bufs)
    src = np.arange(32) ^ 1
    np.testing.assert_array_equal(bufs[0][:32, 0], src.astype(np.float16))
    np.testing.assert_array_equal(bufs[0][:32, 1], (src + 1000).astype(np.float16))
    assert np.all(bufs[0][32:] == -1.0)


def test_executor_refuses_a_shuffle_divergent_within_a_wave():
    ctx, module, fn = _kernel(16)
    with pytest.raises(ExecutorError, match="gpu.shuffle under divergent control flow"):
        Kernel(fn.operation, arch="sm_80", grid=(1, 1, 1), workgroup_size=64, wave_size=32).run(
            {0: np.zeros((64, 2), np.float16)}
        )
