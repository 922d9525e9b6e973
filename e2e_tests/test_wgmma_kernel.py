"""The opt-in warpgroup-MMA kernel (``--config intrinsic=WGMMA_F32_64x<N>x16_F16|BF16`` on sm_90a,
``compiler/wgmma_plan.py`` + ``stages/distribute_wgmma.py``): numerics on the lane executor (whose
wgmma is the independent ISA model over shared-memory bytes), refusals, and the lowering to PTX.

Tolerance: ``check_matmul``'s reference (``runtime/numerics.matmul_reference``): products of f16 /
bf16 inputs are exact in f32's double-width reference, the f32 accumulation of K of them errs by
at most ~K * 2^-24 relative to sum |a||b|, plus the output rounding; ``exact=True`` uses small
integers whose sums are exact in f32, compared with zero tolerance.
"""

from __future__ import annotations

import pytest

from conftest import handed_back
from mmaflow.compiler.bridge import compile_module
from mmaflow.compiler.config import resolve
from mmaflow.compiler.errors import MmaflowError, UnsupportedError
from mmaflow.compiler.mlir import new_context, parse_module
from mmaflow.compiler.problem import Contraction
from mmaflow.compiler.results import CodegenOptions
from mmaflow.compiler.targets import get_target
from mmaflow.compiler.wgmma import wgmma
from mmaflow.compiler.wgmma_plan import warp_c_layout
from mmaflow.runtime.modules import epilogue_module, matmul_module
from mmaflow.runtime.simulate import check_matmul


def _wg(n, t="f16"):
    return f"WGMMA_F32_64x{n}x16_{t.upper()}"


def _sim(src, overrides, exact=False):
    text = handed_back(src, "sm_90a", tuple(sorted(overrides.items())))
    return check_matmul(parse_module(text, new_context()), exact=exact)


@pytest.mark.parametrize("m,n,k,t,wn,exact", [
    (128, 128, 128, "f16", 128, True),
    (128, 128, 128, "f16", 128, False),
    (128, 128, 128, "bf16", 128, False),
    (256, 256, 128, "f16", 256, False),
    (256, 256, 128, "bf16", 256, False),
    (128, 256, 192, "bf16", 64, True),
])
def test_wgmma_kernel_matches_numpy(m, n, k, t, wn, exact):
    r = _sim(matmul_module(m, n, k, t), {"intrinsic": _wg(wn, t)}, exact)
    assert r.check.passed, r.check.detail
    assert not r.stats.races
    # per K tile of 64: 4 wgmma per warpgroup, 2 warpgroups per 128-row tile
    assert r.stats.matrix_ops == (m // 128) * (n // wn) * (k // 64) * 4 * 2


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)], ids=["At", "Bt", "AtBt"])
def test_transposed_operands_use_the_other_major(ta, tb):
    # A^T is MN-major (imm-trans-a), B^T K-major: every combination of the two orders
    r = _sim(matmul_module(128, 128, 64, "f16", transpose_a=ta, transpose_b=tb), {"intrinsic": _wg(128)}, True)
    assert r.check.passed, r.check.detail


def test_one_warpgroup_tile_and_batch():
    r = _sim(matmul_module(64, 128, 128, "bf16", batch=2), {"intrinsic": _wg(128, "bf16"), "tile_m": 64})
    assert r.check.passed, r.check.detail
    assert r.stats.matrix_ops == 2 * 2 * 4


@pytest.mark.exhaustive
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_wgmma_kernel_larger(t):
    r = _sim(matmul_module(512, 512, 256, t), {"intrinsic": _wg(256, t)})
    assert r.check.passed, r.check.detail


def test_per_warp_accumulator_is_the_warpgroup_d_layout():
    """warp_c_layout (what the epilogue stores from) is wgmma.py's D layout seen from one warp."""
    for n in (64, 128, 256):
        full, part = wgmma(n, "f16").c, warp_c_layout(n)
        for lane in range(128):
            for e in range(n // 2):
                r, c = full.coords(lane, e)
                pr, pc = part.coords(lane % 32, e)
                assert (r, c) == (16 * (lane // 32) + pr, pc)


# ---- refusals --------------------------------------------------------------------------------

SM90 = get_target("sm_90a")
P = Contraction(m=256, n=256, k=128, batch=1, a_type="f16", b_type="f16", c_type="f32")


def test_heuristic_never_chooses_wgmma():
    cfg, intr = resolve(SM90, P)
    assert intr.family == "mma_sync"


@pytest.mark.parametrize("problem,overrides,match", [
    (Contraction(m=200, n=256, k=128, batch=1, a_type="f16", b_type="f16", c_type="f32"), {},
     "M = 200 is not a multiple of the tile's 128"),
    (Contraction(m=256, n=256, k=96, batch=1, a_type="f16", b_type="f16", c_type="f32"), {},
     "K = 96 is not a multiple of the tile's 64"),
    (P, {"tile_m": 256}, "tile_m 64 .one warpgroup. or 128"),
    (P, {"tile_n": 64}, "tile_n=64 cannot be set"),
    (P, {"stages": 3}, "stages=3 cannot be set"),
    (Contraction(m=256, n=256, k=128, batch=1, a_type="bf16", b_type="bf16", c_type="f32"), {},
     "computes f16xf16->f32, the matmul is bf16xbf16->f32"),
])
def test_unsupported_configs_are_refused(problem, overrides, match):
    with pytest.raises(MmaflowError, match=match):
        resolve(SM90, problem, {"intrinsic": _wg(128), **overrides})


def test_wgmma_needs_hopper_and_f16_or_bf16():
    with pytest.raises(UnsupportedError, match="has no intrinsic"):
        resolve(get_target("sm_80"), P, {"intrinsic": _wg(128)})
    with pytest.raises(UnsupportedError, match="not implemented yet for fp8"):
        SM90.intrinsic("WGMMA_F32_64x128x32_F8E4M3FN")


def test_dynamic_and_epilogue_problems_are_refused():
    from mmaflow.runtime.modules import dynamic_module
    with pytest.raises(MmaflowError, match="needs static sizes"):
        handed_back(dynamic_module(None, 256, 128), "sm_90a", (("intrinsic", _wg(128)),))
    src = epilogue_module(256, 256, 128, out_type="f32", inputs=[("f32", ("n",))],
                          body="%res = arith.addf %acc, %x0 : f32")
    with pytest.raises(MmaflowError, match="fused epilogues"):
        handed_back(src, "sm_90a", (("intrinsic", _wg(128)),))


# ---- lowering ----------------------------------------------------------------------------------

@pytest.mark.parametrize("t,n", [("f16", 128), ("bf16", 256)])
def test_lowers_to_wgmma_ptx_and_verifies(t, n):
    res = compile_module(matmul_module(256, 256, 128, t), "sm_90a",
                         options=CodegenOptions(overrides={"intrinsic": _wg(n, t)}))  # verify=True: check_isa
    (ptx,) = res.isa_text.values()
    assert ".target sm_90a" in ptx
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t}") == 4
    for needle in ("fence.proxy.async.shared::cta", "wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                   "wgmma.wait_group.sync.aligned", "ld.global.nc.v4", "st.shared.v4"):
        assert needle in ptx, needle
    assert "ld.local" not in ptx and "st.local" not in ptx
