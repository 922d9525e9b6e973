"""The warpgroup-MMA kernel's persistent grid (``--config persistent=W``; the sm_90a default from
two waves of whole tiles): tiles / W workgroups, each computing W output tiles in turn, the next
tile's first K tiles copied (the ring prologue, cloned with the next tile's indices) after a
barrier that ends this tile's K loop and before its epilogue (``wgmma.rewrite._persist``).

Numerics on the lane executor against numpy, with more tiles than workgroups so that every
workgroup walks several tiles through one ring; a mutation (prefetching the tile just computed
instead of the next) must fail them."""

from __future__ import annotations

import re

import pytest
from conftest import handed_back, mutant, simulate, sm90a_ptxas, spread

from mmaflow.compiler.core.errors import MmaflowError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.kernels.registry import explain, resolve
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.modules import dynamic_module, epilogue_module, matmul_module
from mmaflow.runtime.simulate import check_matmul

SM90 = get_target("sm_90a")
E4M3 = "f8E4M3FN"
N256, N128 = "WGMMA_F32_64x256x16_F16", "WGMMA_F32_64x128x16_F16"


def _sim(src, overrides, exact=False, seed=0):
    text = handed_back(src, "sm_90a", tuple(sorted(overrides.items())))
    return check_matmul(parse_module(text, new_context()), exact=exact, seed=seed)


# Each grid with small integers (compared exactly) or random data in the default set, alternating;
# both with `-m exhaustive` (``conftest.spread``).
@pytest.mark.parametrize(
    "m,n,k,over,exact",
    spread(
        [
            (256, 512, 512, dict(intrinsic=N256, persistent=2)),  # 4 tiles, 2 workgroups
            (512, 512, 256, dict(intrinsic=N256, persistent=4, raster=2, stages=3)),  # rastered, 3 slots
            (256, 384, 640, dict(intrinsic=N128, persistent=3, stages=2)),  # 6 tiles of 128x128; kt = 10, 2 slots
            (256, 512, 320, dict(intrinsic=N128, tile_m=64, persistent=4, stages=4)),  # one warpgroup
        ],
        [True, False],
        1,
        row_id=lambda r: f"{r[0]}x{r[1]}x{r[2]}-W{r[3]['persistent']}",
        column_id=lambda e: "ints" if e else "random",
    ),
)
def test_persistent_grid_matches_numpy(m, n, k, over, exact):
    r = _sim(matmul_module(m, n, k, "f16"), over, exact)
    assert r.check.passed, r.check.line()
    assert not r.stats.races
    tiles = (m // over.get("tile_m", 128)) * (n // int(over["intrinsic"].split("x")[1]))
    assert r.grid == (tiles // over["persistent"], 1, 1)


def test_persistent_grid_batch_of_one():
    r = _sim(matmul_module(256, 512, 256, "f16", batch=1), dict(intrinsic=N256, persistent=2))
    assert r.check.passed and r.grid == (2, 1, 1), r.check.line()


# A batch's items one after the other (tile t in item t / tiles per item): the workgroups' tiles
# cross from one item to the next, the next item's first K tiles prefetched during this epilogue.
@pytest.mark.parametrize(
    "batch,m,n,k,over",
    [
        (3, 128, 256, 128, dict(intrinsic=N128, tile_m=64, persistent=4)),  # 12 tiles: 3 workgroups of 4
        (2, 256, 256, 128, dict(intrinsic=N256, persistent=2, copy="tma-wide", producer=1)),  # the producer's ring
        (4, 128, 128, 64, dict(intrinsic=N128, persistent=2, stages=2)),  # one K tile each (K = head dim)
        (2, 256, 256, 128, dict(intrinsic=N128, persistent=2, copy="tma-wide", producer=1, cluster=2)),  # B multicast
    ],
    ids=["cp.async-W4", "producer-W2", "one-k-tile", "cluster-2"],
)
def test_persistent_grid_walks_a_batch(batch, m, n, k, over):
    r = _sim(matmul_module(m, n, k, "f16", batch=batch), over, seed=3)
    assert r.check.passed, r.check.line()
    assert not r.stats.races
    tiles = batch * (m // over.get("tile_m", 128)) * (n // int(over["intrinsic"].split("x")[1]))
    assert r.grid == (tiles // over["persistent"], 1, 1)


@pytest.mark.parametrize(
    "batch,m,over",
    [
        (1, 512, dict(intrinsic=N256, persistent=2, raster=2)),  # 8 tiles in 2 groups of tile rows
        (2, 256, dict(intrinsic=N128, persistent=2, copy="tma-wide", producer=1, cluster=2)),  # clusters of 2 rows
    ],
    ids=["rastered", "cluster-2"],
)
def test_a_sample_of_persistent_workgroups_owns_the_tiles_it_walks(batch, m, over):
    """Checking a sample of a persistent grid (as `mmaflow check` samples a model's dispatches):
    each sampled workgroup is held to the W tiles it walks (``simulate.tile_mask``), in the raster's
    or the clusters' order, nothing else written."""
    text = handed_back(matmul_module(m, 512, 128, "f16", batch=batch), "sm_90a", tuple(sorted(over.items())))
    r = check_matmul(parse_module(text, new_context()), seed=5, sample=1)
    assert r.workgroups < r.grid[0] and r.check.passed and r.check.unwritten == 0, r.check.line()


def test_a_batch_not_walked_fails():
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    exe = mutant(
        WgmmaRewriter,
        "_walk_items",
        False,  # every tile in item 0
        matmul_module(128, 256, 128, "f16", batch=3),
        overrides=dict(intrinsic=N128, tile_m=64, persistent=4),
    )
    r = check_matmul(parse_module(exe.text, new_context()), exact=True)
    assert not r.check.passed


def test_persistent_grid_bf16_b_transposed():
    r = _sim(
        matmul_module(256, 512, 256, "bf16", transpose_b=True), dict(intrinsic="WGMMA_F32_64x256x16_BF16", persistent=2)
    )
    assert r.check.passed, r.check.line()


def test_persistent_grid_fp8_is_the_modelled_arithmetic():
    r = _sim(
        matmul_module(256, 256, 512, E4M3, transpose_b=True),
        dict(intrinsic=f"WGMMA_F32_64x128x32_{E4M3.upper()}", persistent=2),
    )
    assert r.check.passed and r.check.max_abs_err == 0, r.check.line()


@pytest.mark.parametrize("name", ["bias_n-gelu-f16", "bias_n-relu-f16"])
def test_persistent_grid_fused_epilogue(name):
    from test_epilogue import CASES

    kw, ref, _ = CASES[name]
    r = simulate(
        epilogue_module(256, 512, 256, **kw), "sm_90a", dict(intrinsic=N256, persistent=2), seed=2, epilogue=ref
    )
    assert r.check.passed, r.check.line()


def test_prefetching_the_wrong_tile_fails():
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    exe = mutant(
        WgmmaRewriter,
        "_prefetch_tile",
        0,  # the tile just computed, again
        matmul_module(256, 512, 512, "f16"),
        overrides=dict(intrinsic=N256, persistent=2),
    )
    r = check_matmul(parse_module(exe.text, new_context()), exact=True)
    assert not r.check.passed


def test_plan_and_ptx(tmp_path):
    res = compile_module(
        matmul_module(512, 512, 1024, "f16"),
        "sm_90a",  # verify: the K loop inside the tile loop
        options=CodegenOptions(overrides=dict(intrinsic=N256, persistent=4)),
    )
    (ptx,) = res.isa_text.values()
    assert len(re.findall(r"wgmma\.mma_async", ptx)) >= 4
    out = sm90a_ptxas(tmp_path, ptx)
    assert "serialized" not in out.lower(), out
    text = handed_back(
        matmul_module(512, 512, 256, "f16"), "sm_90a", tuple(sorted(dict(intrinsic=N256, persistent=4).items()))
    )
    assert "persistent" in text  # the plan's line, and the config


def test_default_from_two_waves_of_whole_tiles():
    p = Contraction(m=4096, n=4096, k=4096, a_type="f16", b_type="f16", c_type="f32", batch=1)
    cfg, _ = resolve(SM90, p, {"producer": 0})  # (the default there is warp-specialized: test_warp_specialized)
    assert cfg.persistent == 4 and cfg.copy is None  # 512 tiles of 128x256, 128 workgroups
    assert any("persistent grid: 128 workgroups of 4 tiles" in w for w in explain(SM90, p, {"producer": 0}))
    cfg, _ = resolve(SM90, Contraction(m=8192, n=8192, k=8192, a_type="bf16", b_type="bf16", c_type="f32", batch=1), {})
    assert cfg.persistent == 16 and cfg.producer == 0
    e4 = Contraction(m=4096, n=4096, k=4096, a_type=E4M3, b_type=E4M3, c_type="f32", b_transposed=True, batch=1)
    cfg, _ = resolve(SM90, e4, {"producer": 0})  # (the fp8 default is warp-specialized: test_warp_specialized)
    assert cfg.persistent == 8  # 1024 tiles of 128x128
    for m in (2048, 1024):  # one wave or less
        assert (
            resolve(SM90, Contraction(m=m, n=m, k=m, a_type="f16", b_type="f16", c_type="f32", batch=1), {})[
                0
            ].persistent
            is None
        )
    p = Contraction(m=4000, n=4000, k=4000, a_type="f16", b_type="f16", c_type="f32", batch=1)
    assert resolve(SM90, p, {"producer": 0})[0].persistent is None  # the cp.async ring takes whole tiles only
    assert any("not a persistent grid: 4000x4000x4000 is not whole" in w for w in explain(SM90, p, {"producer": 0}))


@pytest.mark.parametrize(
    "over,problem,match",
    [
        (dict(persistent=3), dict(m=256, n=512, k=512), "4 output tiles are not a whole number of 3"),
        (dict(persistent=1), dict(m=256, n=512, k=512), "2 or more"),
        (dict(persistent=2, copy="tma-wide"), dict(m=256, n=512, k=512), "cp.async ring"),
        (dict(persistent=2, stages=1), dict(m=256, n=512, k=512), "cp.async ring"),
        (dict(persistent=2), dict(m=250, n=512, k=512), "not whole 128x256x64 tiles"),
    ],
)
def test_refusals(over, problem, match):
    p = Contraction(a_type="f16", b_type="f16", c_type="f32", batch=1, **problem)
    with pytest.raises(MmaflowError, match=match):
        resolve(SM90, p, dict(intrinsic=N256, **over))


def test_zero_turns_it_off():
    p = Contraction(m=4096, n=4096, k=4096, a_type="f16", b_type="f16", c_type="f32", batch=1)
    cfg, _ = resolve(SM90, p, {"persistent": None})  # (--config persistent=0, parsed)
    assert cfg.persistent is None and cfg.intrinsic == N256
    from mmaflow.compiler.core.config import parse_overrides

    assert parse_overrides(["persistent=0"]) == {"persistent": None}
    from mmaflow.compiler.driver.codegen_tool import tool_argv

    assert "--config=persistent=0" in tool_argv(CodegenOptions(overrides={"persistent": None}))


def test_refused_for_mma_sync_and_dynamic():
    with pytest.raises(MmaflowError, match="warpgroup-MMA kernel's only"):
        resolve(
            get_target("sm_80"),
            Contraction(m=4096, n=4096, k=4096, a_type="f16", b_type="f16", c_type="f32", batch=1),
            dict(persistent=4),
        )
    with pytest.raises(MmaflowError, match="static sizes"):
        codegen_module(
            dynamic_module(m=None, n=4096, k=4096),
            "sm_90a",
            options=CodegenOptions(overrides=dict(intrinsic=N256, persistent=4)),
        )


@pytest.mark.exhaustive
def test_prefetching_without_the_barrier_is_caught():
    """With K tiles not a multiple of the slots (kt = 10, 4 slots), the next tile's first copies go
    into slots whose last wgmmas (tiles 8 and 9) completed after the K loop's last barrier: without
    the barrier before the prefetch nothing orders the other warpgroup's reads before those writes,
    which the executor's happens-before model of wgmma completions refuses."""
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter
    from mmaflow.runtime.executor import ExecutorError

    src = matmul_module(256, 512, 640, "f16")
    over = dict(intrinsic=N256, persistent=2, stages=4)
    assert _sim(src, over, exact=True).check.passed
    exe = mutant(WgmmaRewriter, "_prefetch_barrier", False, src, overrides=over)
    with pytest.raises(ExecutorError, match=r"warpgroup \d's wgmma.mma_async read, with nothing ordering"):
        check_matmul(parse_module(exe.text, new_context()), exact=True)


def test_a_batch_is_persistent_by_default_only_in_whole_tiles():
    """The heuristic walks a batch of whole tiles persistently (Llama-3-70B's attention scores,
    8x4096x4096x128: 1.21x on the H200) and leaves one whose tiles overhang at one tile per
    workgroup (ViT's 384x197x197x64: 0.91x persistent and warp-specialized), saying why."""
    whole = Contraction(m=1024, n=1024, k=128, batch=16, a_type="f16", b_type="f16", c_type="f32", b_transposed=True)
    cfg, _ = resolve(SM90, whole, {})  # 512 tiles of 128x256: 3.9 waves
    why = explain(SM90, whole, {})
    assert why[0].startswith("chosen by the heuristic (tuning table sm_90a has no entry"), why[0]
    assert cfg.persistent == 4 and (cfg.tile_m, cfg.tile_n) == (128, 256), cfg
    over = Contraction(m=1000, n=1000, k=128, batch=16, a_type="f16", b_type="f16", c_type="f32", b_transposed=True)
    cfg, _ = resolve(SM90, over, {})
    assert cfg.persistent is None, cfg
    assert any(
        "a batch whose items' tiles overhang walks no persistent grid by default" in w for w in explain(SM90, over, {})
    )
