"""Split-K on the Hopper warpgroup-MMA kernel (``--config split_k=S``; ``kernels/wgmma/plan.py``
``split_k_refusal``, ``kernels/wgmma/rewrite.py`` ``_reduce_split_k``): S workgroups per output tile,
one thread block cluster, each running a 1/S share of the K tiles; each stores its f32 partial
in its own shared memory, and each warp's rows are summed over distributed shared memory in
rank order (the same sum every run) and stored by one rank, w % S.

Numerics on the lane executor, which models the cluster, barrier.cluster and the distributed
shared-memory loads with their ordering and exit rules (runtime/executor/tma.py, "Clusters"),
against numpy. Tolerance as ``test_wgmma_kernel.py``'s (``numerics.matmul_reference``): f16/bf16
products are exact in f32, the f32 accumulation of K of them errs by at most ~K * 2^-24 of
sum |a||b| -- the split reorders the same K terms into S sums and S - 1 adds, within that bound;
``exact=True``: small integers whose sums are exact in f32, zero tolerance. fp8: bit for bit
against the modelled fp8 tensor-core arithmetic with the split's order
(``numerics.fp8_tensor_core_reference(split=S)``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import handed_back, mutant, sm90a_ptxas, spread

from mmaflow.compiler.core.errors import MmaflowError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.driver.bridge import compile_module
from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.runtime import numerics as num
from mmaflow.runtime.executor import ExecutorError
from mmaflow.runtime.modules import EPILOGUES, epilogue_module, matmul_module
from mmaflow.runtime.numerics import EPILOGUE_REFERENCES
from mmaflow.runtime.simulate import check_matmul


def _wg(n, t="f16"):
    return f"WGMMA_F32_64x{n}x{32 if t.startswith('f8') else 16}_{t.upper()}"


def _sim(src, overrides, exact=False, seed=0, sample=0, epilogue=None):
    text = handed_back(src, "sm_90a", tuple(sorted(overrides.items())))
    return check_matmul(parse_module(text, new_context()), exact=exact, seed=seed, sample=sample, epilogue=epilogue)


# (M, N, K, type, instruction N, tile_m, S, other overrides, B stored N x K): power-of-two and odd
# S, 64- and 128-row tiles, partial M tiles, both rings (cp.async, tma-wide), two slots, and the deep rings
# `mmaflow tune` tries under a wave of tiles (7 and 8 slots, each reused within a rank's share).
CASES = [
    (128, 256, 1024, "f16", 128, 128, 4, {}, False),
    (64, 128, 512, "bf16", 64, 64, 2, {}, True),
    (128, 128, 768, "f16", 128, 128, 3, {}, False),
    (96, 128, 1024, "f16", 64, 64, 8, {}, True),
    (100, 256, 640, "bf16", 128, 128, 2, {"copy": "tma-wide"}, False),
    (128, 128, 512, "f16", 128, 128, 2, {"stages": 2}, True),
    (128, 128, 1024, "f16", 128, 128, 2, {"stages": 7}, True),
    (64, 128, 2048, "bf16", 128, 64, 2, {"stages": 8, "copy": "tma-wide"}, False),
]


# In the default set each case with exact or random data (alternating), both with `-m exhaustive`.
@pytest.mark.parametrize(
    "m,n,k,t,wn,tm,s,extra,tb,exact",
    spread(
        CASES,
        [True, False],
        1,
        lambda c: "x".join(map(str, c[:3])) + f"-{c[3]}-S{c[6]}",
        lambda e: "exact" if e else "random",
    ),
)
def test_split_k_matches_numpy(m, n, k, t, wn, tm, s, extra, tb, exact):
    r = _sim(
        matmul_module(m, n, k, t, transpose_b=tb),
        {"intrinsic": _wg(wn, t), "tile_m": tm, "split_k": s, **extra},
        exact=exact,
    )
    assert r.check.passed, r.check.detail
    assert not r.stats.races, r.stats.races
    assert tuple(r.grid) == (-(-n // wn) * s, -(-m // tm), 1)
    # every rank runs its share: K tiles / S per workgroup, 4 wgmma each per warpgroup
    assert r.stats.matrix_ops == -(-m // tm) * (n // wn) * (k // 64) * 4 * (tm // 64)


def test_split_k_batched_and_sampled():
    """A batch (grid z) and a sample of workgroups: a sampled workgroup runs with its whole
    cluster, and only the sampled clusters' tiles are checked as written."""
    r = _sim(matmul_module(256, 512, 512, "f16", batch=2), {"intrinsic": _wg(128), "split_k": 2}, sample=3, seed=3)
    assert r.check.passed, r.check.detail
    assert r.workgroups % 2 == 0 and r.workgroups < int(np.prod(r.grid))


def test_split_k_fused_epilogue_stored_once():
    """bias over N + relu, stored as f16, each row by its owner rank only: a rank storing its
    partial's epilogue would write its (partial) values over the owner's or race it."""
    src = epilogue_module(128, 256, 1024, "f16", **EPILOGUES["bias_n_relu_f16"])
    r = _sim(
        src,
        {"intrinsic": _wg(128), "split_k": 4},
        seed=5,
        epilogue=EPILOGUE_REFERENCES["bias_n_relu_f16"],
    )
    assert r.check.passed, r.check.line()


@pytest.mark.parametrize("t", ["f8E4M3FN", "f8E5M2"])
def test_split_k_fp8_bit_for_bit(t):
    """fp8: each rank promotes its K tiles' partials into its own f32 sum; each row's owner adds
    the ranks' sums in order. ``check_matmul`` compares the executor's result with that arithmetic
    (``fp8_tensor_core_reference(split=4)``) at zero tolerance, and with the f32 bound."""
    src = matmul_module(64, 128, 1024, t, transpose_b=True)
    r = _sim(src, {"intrinsic": _wg(128, t), "tile_m": 64, "split_k": 4}, seed=2)
    assert r.check.passed, r.check.detail
    assert r.bound_check.passed, r.bound_check.detail
    assert "modelled fp8 tensor-core arithmetic" in r.check.detail


def test_fp8_reference_adds_the_shares_in_rank_order():
    """The split reference is the shares' own sums added in order, which f32 rounding tells
    apart from the unsplit order: four K tiles whose partials are 2^24, 1, 1, 1 sum to 2^24 one
    by one (2^24 + 1 rounds to even), and to 2^24 + 2 as (2^24 + 1) + (1 + 1)."""
    a = np.zeros((1, 512), np.float64)
    b = np.zeros((512, 1), np.float64)
    a[0, :128], b[:128, 0] = 256.0, 512.0  # tile 0: 128 products of 2^17
    for tile in (1, 2, 3):
        a[0, 128 * tile], b[128 * tile, 0] = 1.0, 1.0
    a, b = a.astype(num.DTYPES["f8E5M2"]), b.astype(num.DTYPES["f8E5M2"])
    whole = num.fp8_tensor_core_reference(a, b, 128)
    split = num.fp8_tensor_core_reference(a, b, 128, split=2)
    assert whole[0, 0] == 2.0**24 and split[0, 0] == 2.0**24 + 2


@pytest.mark.parametrize(
    "over,why",
    [
        ({"split_k": 9}, r"split_k=9: 2 to 8 workgroups per output tile"),
        ({"split_k": 3}, r"the 16 K tiles of 64 \(K = 1024\) do not divide into 3 equal shares"),
        ({"split_k": 2, "producer": 1, "copy": "tma-wide"}, r"warp-specialized kernel's roles"),
        ({"split_k": 2, "persistent": 2}, r"split-K runs one output tile per workgroup"),
        ({"split_k": 2, "stages": 1}, r"f32 partial needs 65536 bytes of shared memory, the 1-slot ring has 32768"),
    ],
)
def test_split_k_refusals(over, why):
    with pytest.raises(MmaflowError, match=why):
        handed_back(
            matmul_module(256, 256, 1024, "f16"), "sm_90a", tuple(sorted({"intrinsic": _wg(128), **over}.items()))
        )


def test_split_k_refused_for_dynamic_sizes_and_other_kernels():
    dyn = """func.func @mm(%a: tensor<?x1024xf16>, %b: tensor<1024x256xf16>) -> tensor<?x256xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x1024xf16>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x256xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x256xf32>) -> tensor<?x256xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x1024xf16>, tensor<1024x256xf16>) outs(%f : tensor<?x256xf32>) -> tensor<?x256xf32>
  return %r : tensor<?x256xf32>
}"""
    with pytest.raises(MmaflowError, match=r"split_k=2: dynamic sizes"):
        handed_back(dyn, "sm_90a", (("intrinsic", _wg(128)), ("split_k", 2)))
    with pytest.raises(MmaflowError, match=r"split_k=2: workgroups split K .* in the warpgroup-MMA kernel only"):
        handed_back(matmul_module(128, 128, 1024, "f16"), "sm_80", (("split_k", 2),))


def test_split_k_alone_asks_for_the_warpgroup_kernel():
    """``--config split_k=S`` alone: the heuristic's warpgroup kernel, its tile count counted with
    the split (64 tiles of 64x128 x 4 = 256 workgroups: enough for wgmma)."""
    text = handed_back(matmul_module(128, 4096, 4096, "f16"), "sm_90a", (("split_k", 4),))
    assert "split_k = 4" in text and "nvvm.cluster_dim = array<i32: 4, 1, 1>" in text


@pytest.mark.parametrize(
    "attr,value,error",
    [
        ("_split_k_syncs", (False, True), r"race|barrier\.cluster"),
        ("_split_k_syncs", (True, False), r"exits while CTA \d of its cluster may still"),
    ],
)
def test_executor_refuses_a_reduction_without_its_cluster_barriers(attr, value, error):
    exe = mutant(
        WgmmaRewriter, attr, value, matmul_module(128, 128, 512, "f16"), overrides={"intrinsic": _wg(128), "split_k": 2}
    )
    with pytest.raises(ExecutorError, match=error):
        r = check_matmul(parse_module(exe.text, new_context()))
        if r.stats.races:  # (a race is recorded, then reported as the run's error)
            raise ExecutorError("; ".join(r.stats.races))


def test_spread_reduction_gives_rank_0s_bits():
    """Each warp's rows summed by rank w % S (the default) or all by rank 0 (``_split_k_spread``
    False): one order, rank 0's partial then 1, 2, ..., so the same bits on random data."""
    src, over = matmul_module(128, 128, 1024, "f16"), {"intrinsic": _wg(128), "split_k": 4}
    spread_ = check_matmul(parse_module(handed_back(src, "sm_90a", tuple(sorted(over.items()))), new_context()), seed=7)
    exe = mutant(WgmmaRewriter, "_split_k_spread", False, src, overrides=over)
    alone = check_matmul(parse_module(exe.text, new_context()), seed=7)
    assert spread_.check.passed and alone.check.passed, (spread_.check.line(), alone.check.line())
    assert "arith.remui" in exe.text  # (both built)
    np.testing.assert_array_equal(spread_.out, alone.out)
    assert np.any(spread_.out != np.round(spread_.out))  # (not integers: the order shows in the bits)


def test_every_rank_must_run_its_own_share():
    exe = mutant(
        WgmmaRewriter,
        "_split_k_share",
        False,
        matmul_module(128, 128, 512, "f16"),
        overrides={"intrinsic": _wg(128), "split_k": 2},
    )
    r = check_matmul(parse_module(exe.text, new_context()), exact=True)
    assert not r.check.passed


@pytest.mark.parametrize("s,wn,tm", [(4, 128, 128), (2, 256, 128), (8, 64, 64)])
def test_split_k_ptx_verifies_and_assembles(tmp_path, s, wn, tm):
    res = compile_module(
        matmul_module(tm, 4 * wn, 64 * 8 * s, "f16", transpose_b=True),
        "sm_90a",
        options=CodegenOptions(overrides={"intrinsic": _wg(wn), "tile_m": tm, "split_k": s}),
    )  # verify: the cluster shape, the DSMEM reads and both cluster barriers in the PTX
    (ptx,) = res.isa_text.values()
    assert re.search(rf"\.reqnctapercluster {s}, 1, 1", ptx)
    assert ptx.count("ld.shared::cluster.v4.b32") == s * wn // 8  # every rank's chunks, once (its own too)
    assert ptx.count("barrier.cluster.wait") == 2
    sm90a_ptxas(tmp_path, ptx)  # assembles, 0 spills


def test_heuristic_splits_k_below_the_wgmma_tile_count():
    """Without a table entry or --config: a static grid under one tile per two SMs with a long K
    takes 64-row wgmma tiles and split-K (``wgmma.heuristic._small_grid``, seeds
    ``small_grid_wide_tiles`` / ``split_k_min_k_tiles``); a short K the 64-row tiles unsplit; a
    dynamic size keeps the mma.sync kernel; the reasons say which."""
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.registry import choose, explain
    from mmaflow.compiler.target.targets import get_target

    sm90 = get_target("sm_90a")

    def pick(m, n, k):
        p = Contraction(m, n, k, 1, "f16", "f16", "f32", b_transposed=True)
        cfg, _, source = choose(sm90, p, {}, tuned=False)
        return cfg, source, p

    cfg, source, p = pick(128, 1024, 4096)  # 32 tiles of 64x64: 4 shares of 16 K tiles, 128 workgroups
    assert (cfg.intrinsic, cfg.tile_m, cfg.tile_n, cfg.split_k) == ("WGMMA_F32_64x64x16_F16", 64, 64, 4)
    assert "heuristic" in source
    _, _, p = pick(128, 2048, 4096)  # (a class no shipped table entry covers: its reasons are the heuristic's)
    why = "\n".join(explain(sm90, p))
    assert re.search(r"64x64 tiles, K split 2 ways \(32 K tiles each\).*64 tiles, 128 workgroups for 132 SMs", why)
    cfg, _, _ = pick(128, 4096, 4096)  # 64 tiles of 64x128 (a quarter of the SMs or more): 2 shares
    assert (cfg.tile_n, cfg.split_k) == (128, 2)
    for short in ((256, 768, 768), (256, 256, 256)):  # under two shares of 16 K tiles: unsplit 64x64 tiles
        cfg, source, p = pick(*short)
        assert (cfg.intrinsic, cfg.tile_m, cfg.tile_n, cfg.split_k) == ("WGMMA_F32_64x64x16_F16", 64, 64, 1)
        assert "heuristic" in source and "too few to split into shares of 16" in "\n".join(explain(sm90, p))


def test_heuristic_deepens_the_ring_for_one_wave_of_long_k_loops():
    """Without a table entry: a grid of 64-row tiles (N <= 128) within one wave whose workgroups each run
    32 K tiles or more takes the deepest ring that fits (``wgmma.heuristic._deep_ring``, seed
    ``deep_ring_min_k_tiles``), split or not; shorter shares, grids past a wave and dynamic
    sizes keep the 4-slot ring, and so do split-K clusters of more than 2 over half the SMs; the reasons say which."""
    from mmaflow.compiler.core.problem import Contraction, DynamicDim
    from mmaflow.compiler.kernels.registry import choose, explain
    from mmaflow.compiler.target.targets import get_target

    sm90 = get_target("sm_90a")

    def pick(m, n, k, **kw):
        p = Contraction(m, n, k, 1, "f16", "f16", "f32", b_transposed=True, **kw)
        return choose(sm90, p, {}, tuned=False)[0], p

    cfg, p = pick(128, 2048, 4096)  # 64 tiles of 64x64, 2 shares of 32 K tiles: 128 workgroups
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.stages) == (64, 64, 2, 8)
    assert re.search(
        r"a ring of 8 slots, not 4 \(128 workgroups for 132 SMs, 32 K tiles each", "\n".join(explain(sm90, p))
    )
    cfg, _ = pick(64, 14336, 4096)  # 112 tiles of 64x128 (no split), 64 K tiles each
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.stages) == (64, 128, 1, 8)
    assert pick(128, 1024, 4096)[0].stages == 4  # 4 shares of 16 K tiles
    assert pick(128, 14336, 4096)[0].stages == 4  # 224 tiles: past a wave
    assert pick(2048, 4096, 4096)[0].stages == 4  # 256 tiles of 128x256: past a wave (48 KiB slots: 4 fit)
    # 32 tiles of 64x64, 4 shares of 32 K tiles: 128 workgroups in clusters of 4, more than fit one to an SM (120 on
    # the H200), so the 4-slot ring; 2 shares (64 workgroups, 64 K tiles) deepen
    cfg, _ = pick(64, 2048, 8192)
    assert (cfg.split_k, cfg.stages) == (4, 4)
    cfg = choose(sm90, Contraction(64, 2048, 8192, 1, "f16", "f16", "f32", b_transposed=True), {"split_k": 2})[0]
    assert (cfg.split_k, cfg.stages) == (2, 8)
    dyn = pick(None, 14336, 4096, dynamic=(DynamicDim("m", (0,), ((0, -1),)),))[0]
    assert dyn.intrinsic.startswith("WGMMA") and dyn.stages == 4, dyn.describe()


def test_heuristic_split_k_kernel_is_right():
    """The heuristic's split-K kernel for a shape no table entry covers, on the executor (random
    data, the f32 accumulation bound; every workgroup)."""
    text = handed_back(matmul_module(64, 192, 2048, "bf16", transpose_b=True), "sm_90a")
    assert "split_k = 2" in text  # 3 tiles of 64x64, 32 K tiles: 2 shares of 16
    r = check_matmul(parse_module(text, new_context()), seed=4)
    assert r.check.passed, r.check.detail
    assert not r.stats.races


def test_heuristic_deep_ring_kernel_is_right():
    """The heuristic's 8-slot split-K kernel (128x2048x4096: 128 workgroups of 32 K tiles) on the
    executor, sampled (random data, the f32 accumulation bound)."""
    text = handed_back(matmul_module(128, 2048, 4096, "f16", transpose_b=True), "sm_90a")
    assert "split_k = 2" in text and "stages = 8" in text
    r = check_matmul(parse_module(text, new_context()), seed=5, sample=3)
    assert r.check.passed, r.check.detail
    assert not r.stats.races


def test_split_k_alone_that_does_not_fit_names_the_reason():
    """``--config split_k=3`` on 16 K tiles: the warpgroup kernel's refusal, not the mma.sync
    kernel's "split_k is the warpgroup kernel's only"."""
    with pytest.raises(MmaflowError, match=r"do not divide into 3 equal shares"):
        handed_back(matmul_module(128, 1024, 1024, "f16"), "sm_90a", (("split_k", 3),))
    # split_k=1: no split, where the heuristic alone would split (128x2048x4096: 2 ways)
    assert "split_k" not in handed_back(matmul_module(128, 2048, 4096, "f16"), "sm_90a", (("split_k", 1),))
