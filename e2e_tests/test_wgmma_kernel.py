"""The warpgroup-MMA kernel (sm_90a's default where it fits, or ``--config intrinsic=WGMMA_F32_64x<N>x16_F16|BF16``,
``compiler/kernels/wgmma/plan.py`` + ``kernels/wgmma/rewrite.py``): numerics on the lane executor (whose
wgmma is the independent ISA model over shared-memory bytes), refusals, and the lowering to PTX.

Tolerance: ``check_matmul``'s reference (``runtime/numerics.matmul_reference``): products of f16 /
bf16 inputs are exact in f32's double-width reference, the f32 accumulation of K of them errs by
at most ~K * 2^-24 relative to sum |a||b|, plus the output rounding; ``exact=True`` uses small
integers whose sums are exact in f32, compared with zero tolerance.
"""

from __future__ import annotations

import re

import pytest
from conftest import handed_back, simulate, sm90a_ptxas, spread

from mmaflow.compiler.core.errors import MmaflowError, UnsupportedError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.driver.bridge import compile_module
from mmaflow.compiler.kernels.registry import resolve
from mmaflow.compiler.kernels.wgmma.plan import warp_c_layout
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.target.intrinsics import wgmma
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.executor import ExecutorError
from mmaflow.runtime.modules import epilogue_module, matmul_module
from mmaflow.runtime.simulate import check_matmul


def _wg(n, t="f16"):
    return f"WGMMA_F32_64x{n}x16_{t.upper()}"


def _sim(src, overrides, exact=False):
    text = handed_back(src, "sm_90a", tuple(sorted(overrides.items())))
    return check_matmul(parse_module(text, new_context()), exact=exact)


# In the default set each shape with one of the kernels (stages 1 or 3, alternating), both with
# `-m exhaustive` (``conftest.spread``; so for the spread cases below).
@pytest.mark.parametrize(
    "m,n,k,t,wn,exact,stages",
    spread(
        [
            (128, 128, 128, "f16", 128, True),
            (128, 128, 128, "f16", 128, False),
            (128, 128, 128, "bf16", 128, False),
            (256, 256, 128, "f16", 256, False),
            (256, 256, 128, "bf16", 256, False),
            (128, 256, 192, "bf16", 64, True),
        ],
        [1, 3],
        1,
    ),
)
def test_wgmma_kernel_matches_numpy(m, n, k, t, wn, exact, stages):
    r = _sim(matmul_module(m, n, k, t), {"intrinsic": _wg(wn, t), "stages": stages}, exact)
    assert r.check.passed, r.check.detail
    assert not r.stats.races
    # per K tile of 64: 4 wgmma per warpgroup, 2 warpgroups per 128-row tile
    assert r.stats.matrix_ops == (m // 128) * (n // wn) * (k // 64) * 4 * 2


@pytest.mark.parametrize(
    "ta,tb,stages",
    spread(
        [(True, False), (False, True), (True, True)],
        [1, 2, 4],
        1,
        lambda t: {(True, False): "At", (False, True): "Bt", (True, True): "AtBt"}[t],
    ),
)
def test_transposed_operands_use_the_other_major(ta, tb, stages):
    # A^T is MN-major (imm-trans-a), B^T K-major: every combination of the two orders; K = 320
    # is 5 tiles, so every ring (2..4 slots) reuses its slots
    r = _sim(
        matmul_module(128, 128, 320, "f16", transpose_a=ta, transpose_b=tb),
        {"intrinsic": _wg(128), "stages": stages},
        True,
    )
    assert r.check.passed, r.check.detail
    assert not r.stats.races


@pytest.mark.parametrize("stages", [1, 3])
def test_one_warpgroup_tile_and_batch(stages):
    r = _sim(
        matmul_module(64, 128, 128, "bf16", batch=2), {"intrinsic": _wg(128, "bf16"), "tile_m": 64, "stages": stages}
    )
    assert r.check.passed, r.check.detail
    assert r.stats.matrix_ops == 2 * 2 * 4


# ---- the cp.async ring (stages 2..8) -------------------------------------------------------------

_RING = {
    ("f16", 256, 128, 512): "f16-n256-k8tiles",
    ("bf16", 64, 64, 448): "bf16-n64-m64-k7tiles",
    ("f16", 128, 128, 64): "f16-one-tile",
}


@pytest.mark.parametrize("t,wn,tile_m,k,stages", spread(list(_RING), [2, 3, 4], 1, _RING.get))
def test_ring_matches_numpy(stages, t, wn, tile_m, k):
    # K of 8 / 7 tiles: every slot reused more than once; one tile: fewer tiles than the ring
    # copies ahead (the prologue commits empty groups, the main loop is empty)
    r = _sim(
        matmul_module(tile_m, 256, k, t), {"intrinsic": _wg(wn, t), "tile_m": tile_m, "stages": stages}, exact=True
    )
    assert r.check.passed, r.check.detail
    assert not r.stats.races
    assert r.stats.matrix_ops == (256 // wn) * (k // 64) * 4 * (tile_m // 64)


def test_default_is_the_deepest_ring_that_fits():
    from mmaflow.compiler.kernels.wgmma.plan import ALIGN, plan_bytes, slot_bytes

    for t, n, tile_m in (("f16", 256, 128), ("bf16", 64, 64), ("f16", 128, 128)):
        p = Contraction(m=256, n=256, k=128, batch=1, a_type=t, b_type=t, c_type="f32")
        cfg, _ = resolve(SM90, p, {"intrinsic": _wg(n, t), "tile_m": tile_m})
        assert cfg.stages == 4
        assert plan_bytes(cfg, t) <= SM90.lds_bytes  # 227 KB: 4 x 48 KiB + 1 KiB at most
        assert slot_bytes(cfg, t) % ALIGN == 0  # every slot's A and B tile starts on 1024 bytes


def _ring_text(stages, k=512, skew=0):
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    old = WgmmaRewriter._slot_skew
    WgmmaRewriter._slot_skew = skew
    try:
        # (cache-free: the mutation changes the generator, not the arguments)
        from mmaflow.compiler.driver.bridge import codegen_module

        res = codegen_module(
            matmul_module(128, 128, k, "f16"),
            "sm_90a",
            options=CodegenOptions(overrides={"intrinsic": _wg(128), "stages": stages}),
        )
        (exe,) = res.taken
        return exe.text
    finally:
        WgmmaRewriter._slot_skew = old


def _run_text(text):
    return check_matmul(parse_module(text, new_context()), exact=True)


# (7 slots, the deepest ring of 128x128 tiles: K of 16 tiles, so that the mutated copy lands in a slot still in use)
RINGS = [(2, 512), (3, 512), (4, 512), (7, 1024)]


@pytest.mark.parametrize("stages,k", RINGS)
def test_ring_unmutated_passes(stages, k):
    r = _run_text(_ring_text(stages, k))
    assert r.check.passed, r.check.detail
    assert not r.stats.races


@pytest.mark.parametrize("stages,k", RINGS)
def test_slot_reused_one_stage_early_fails(stages, k):
    """Mutation: the copy of tile t+A goes into the slot of tile t+A+1 -- the slot of the wgmma
    group the previous wait_group left running (3+ stages) or of the group just committed (2)."""
    with pytest.raises(ExecutorError, match="that a wgmma.mma_async still reads"):
        _run_text(_ring_text(stages, k, skew=1))


@pytest.mark.parametrize("stages,k", RINGS)
def test_wgmma_wait_one_group_too_lax_fails(stages, k):
    """Mutation: wait_group L+1 in the loop leaves the group of the slot the next copy overwrites
    running."""
    lag = 1 if stages >= 3 else 0
    text = _ring_text(stages, k)
    old, new = f"nvvm.wgmma.wait.group.sync.aligned {lag} ", f"nvvm.wgmma.wait.group.sync.aligned {lag + 1} "
    assert text.count(old) == 2 + (lag == 0)  # main loop, drain (and after the loops, for lag 0)
    if lag == 0:  # keep the final wait 0 after the loops
        head, sep, tail = text.rpartition(old)
        text = head.replace(old, new) + sep + tail
    else:
        text = text.replace(old, new)
    with pytest.raises(ExecutorError, match="that a wgmma.mma_async still reads"):
        _run_text(text)


def test_ring_without_proxy_fence_fails():
    """Mutation: no fence.proxy.async between the cp.async wait and the wgmma."""
    text = _ring_text(3)
    fence = re.compile(r"^\s*nvvm\.fence\.proxy <async\.shared>, space = <cta>.*\n", re.M)
    cut, n = fence.subn("", text)
    assert n == 2  # main loop and drain
    with pytest.raises(ExecutorError, match="generic proxy with no nvvm.fence.proxy"):
        _run_text(cut)


def test_ring_fence_before_the_copy_wait_fails():
    """Mutation: the fence before cp.async.wait_group: the copies land after it, unfenced."""
    text = _ring_text(3)
    lines = text.splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        if "nvgpu.device_async_wait" in lines[i] and i + 1 < len(lines) and "nvvm.fence.proxy" in lines[i + 1]:
            out += [lines[i + 1], lines[i]]
            i += 2
        else:
            out.append(lines[i])
            i += 1
    assert out != lines
    with pytest.raises(ExecutorError, match="generic proxy with no nvvm.fence.proxy"):
        _run_text("".join(out))


@pytest.mark.exhaustive
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_wgmma_kernel_larger(t):
    r = _sim(matmul_module(512, 512, 256, t), {"intrinsic": _wg(256, t)})
    assert r.check.passed, r.check.detail


def test_per_warp_accumulator_is_the_warpgroup_d_layout():
    """warp_c_layout (what the epilogue stores from) is target/intrinsics.py's D layout seen from one warp."""
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


def test_heuristic_small_grids():
    """A static grid under one tile per two SMs with a K too short to split: 64x64 wgmma tiles
    (``wgmma.heuristic._small_grid``); batched, the mma.sync kernel (a tuning table decides)."""
    cfg, intr = resolve(SM90, P)
    assert (intr.family, cfg.tile_m, cfg.tile_n, cfg.split_k) == ("wgmma", 64, 64, 1)
    batched = Contraction(m=128, n=128, k=64, batch=12, a_type="f16", b_type="f16", c_type="f32", batched=True)
    assert resolve(SM90, batched)[1].family == "mma_sync"


@pytest.mark.parametrize(
    "problem,overrides,match",
    [
        (
            Contraction(m=200, n=256, k=100, batch=1, a_type="f16", b_type="f16", c_type="f32"),
            {},
            "A's global rows run along K = 100, not a multiple of 8 elements",
        ),
        (
            Contraction(m=256, n=130, k=96, batch=1, a_type="f16", b_type="f16", c_type="f32"),
            {},
            "B's global rows run along N = 130, not a multiple of 8 elements",
        ),
        (P, {"tile_m": 256}, "tile_m 64 .one warpgroup. or 128"),
        (P, {"tile_n": 64}, "tile_n=64 cannot be set"),
        (P, {"stages": 9}, "stages=9; the warpgroup-MMA kernel has 1"),
        (P, {"stages": 0}, "stages=0; the warpgroup-MMA kernel has 1"),
        (
            Contraction(m=256, n=256, k=128, batch=1, a_type="bf16", b_type="bf16", c_type="f32"),
            {},
            "computes f16xf16->f32, the matmul is bf16xbf16->f32",
        ),
    ],
)
def test_unsupported_configs_are_refused(problem, overrides, match):
    with pytest.raises(MmaflowError, match=match):
        resolve(SM90, problem, {"intrinsic": _wg(128), **overrides})


def test_wgmma_needs_hopper():
    with pytest.raises(UnsupportedError, match="has no intrinsic"):
        resolve(get_target("sm_80"), P, {"intrinsic": _wg(128)})
    assert SM90.intrinsic("WGMMA_F32_64x128x32_F8E4M3FN").k == 32  # fp8: test_wgmma_fp8.py


def test_dynamic_rows_need_a_promise_of_whole_chunks():
    """A dynamic dimension along an operand's global rows needs a promise of 8 elements (whole
    16-byte chunks); the refusal names the dimension and the promise."""
    from mmaflow.runtime.modules import dynamic_module

    with pytest.raises(
        MmaflowError,
        match=r"A's global rows run along K, which is dynamic and has no divisibility "
        r"promise: .* multiple of 8 elements; a promise that it is "
        r"\(util.assume.int %k<udiv = 8>",
    ):
        handed_back(dynamic_module(None, 256, None), "sm_90a", (("intrinsic", _wg(128)),))
    with pytest.raises(
        MmaflowError,
        match=r"B's global rows run along N, which is dynamic and promised only to be "
        r"a multiple of 4",
    ):
        handed_back(dynamic_module(None, None, 64, divisors=dict(n=4)), "sm_90a", (("intrinsic", _wg(128)),))


# ---- fused epilogues (the mma.sync kernel's epilogue, applied to the per-warp D layout) -------------


def _epilogue_cases():
    from test_epilogue import CASES

    return CASES


# Each epilogue with one of the two kernels in the default set, alternating; both with
# `-m exhaustive` (``conftest.spread``).
@pytest.mark.parametrize("name,stages", spread(list(_epilogue_cases()), [1, 4], 1))
def test_fused_epilogue_matches_numpy(name, stages):
    """test_epilogue.py's cases (bias over N / M, relu, casts to f16 / bf16, residuals, gelu, scale
    and shift) on the wgmma kernel: the epilogue reads its inputs at the D layout's coordinates."""
    kw, ref, exact = _epilogue_cases()[name]
    src = epilogue_module(128, 256, 192, **kw)
    over = {"intrinsic": _wg(128), "stages": stages}
    r = simulate(src, "sm_90a", over, seed=3, epilogue=ref)
    assert r.check.passed, r.check.line()
    assert not r.stats.races
    if exact:
        e = simulate(src, "sm_90a", over, seed=4, exact=True, epilogue=ref)
        assert e.check.passed, e.check.line()


def test_fused_epilogue_batch_one_warpgroup():
    from mmaflow.runtime.numerics import EpilogueReference

    src = epilogue_module(
        64,
        128,
        128,
        out_type="f32",
        batch=3,
        inputs=[("f32", ("b",)), ("f32", ("b", "n"))],
        body="%v = arith.mulf %acc, %x0 : f32\n%res = arith.addf %v, %x1 : f32",
    )
    ref = EpilogueReference(lambda acc, s, b: acc * s[:, None, None] + b[:, None, :], 1.0, 2)
    r = simulate(src, "sm_90a", {"intrinsic": _wg(64), "tile_m": 64, "stages": 3}, seed=7, epilogue=ref)
    assert r.check.passed, r.check.line()


def test_fused_bias_relu_f16_lowers_and_verifies():
    kw, _, _ = _epilogue_cases()["bias_n-relu-f16"]
    res = compile_module(
        epilogue_module(256, 256, 512, **kw), "sm_90a", options=CodegenOptions(overrides={"intrinsic": _wg(256)})
    )  # verify=True: check_isa
    (ptx,) = res.isa_text.values()
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx and "cp.async.cg.shared.global" in ptx
    assert "max" in ptx and "cvt.rn.f16" in ptx  # relu and the f16 store
    assert "ld.local" not in ptx and "st.local" not in ptx


# ---- lowering ----------------------------------------------------------------------------------


@pytest.mark.parametrize("t,n", [("f16", 128), ("bf16", 256)])
def test_lowers_to_wgmma_ptx_and_verifies(t, n):
    res = compile_module(
        matmul_module(256, 256, 128, t),
        "sm_90a",
        options=CodegenOptions(overrides={"intrinsic": _wg(n, t), "stages": 1}),
    )  # verify: check_isa
    (ptx,) = res.isa_text.values()
    assert ".target sm_90a" in ptx
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t}") == 4
    for needle in (
        "fence.proxy.async.shared::cta",
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
        "ld.global.nc.v4",
        "st.shared.v4",
    ):
        assert needle in ptx, needle
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize("t,n,stages", [("f16", 128, None), ("bf16", 256, 3), ("f16", 64, 2)])
def test_ring_lowers_to_cp_async_and_wgmma_wait_ptx(t, n, stages):
    over = {"intrinsic": _wg(n, t)} | ({"stages": stages} if stages else {})  # None: the default, 4
    res = compile_module(
        matmul_module(256, 256, 512, t), "sm_90a", options=CodegenOptions(overrides=over)
    )  # verify=True: check_isa (1 barrier per K tile)
    (ptx,) = res.isa_text.values()
    assert ".target sm_90a" in ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t}" in ptx
    lag = 0 if stages == 2 else 1
    for needle in (
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group",
        "fence.proxy.async.shared::cta",
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
    ):
        assert needle in ptx, needle
    # in the loop: wgmma.wait_group 1 (2 stages: 0) after the next tile's cp.async group
    assert re.search(rf"cp\.async\.commit_group;\s*wgmma\.wait_group\.sync\.aligned\s+{lag};", ptx)
    assert "st.shared.v4" not in ptx  # every shared-memory write of the operands is a cp.async
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize("n,stages", [(256, 4), (128, 3), (64, 2)])
def test_ptxas_keeps_the_wgmma_pipeline(tmp_path, n, stages):
    """ptxas (sm_90a) on the ring's PTX: no spills, and no "wgmma.mma_async instructions are
    serialized" warning (ptxas serializes wgmma when registers of an in-flight accumulator are
    touched, which would undo wait_group 1)."""
    res = compile_module(
        matmul_module(256, 256, 512, "f16"),
        "sm_90a",
        options=CodegenOptions(overrides={"intrinsic": _wg(n), "stages": stages}),
    )
    (ptx,) = res.isa_text.values()
    out = sm90a_ptxas(tmp_path, ptx)
    assert "serialized" not in out.lower(), out


def test_ring_without_barrier_is_a_race():
    """Mutation: no barrier in the K loop: a thread's cp.async refills a slot whose last wgmma,
    the other warpgroup's, completed with nothing ordering that completion before the copy (the
    executor's happens-before model of wgmma completions refuses it; the numbers happen to be
    right in lockstep)."""
    text = _ring_text(3)
    cut, n = re.subn(r"^\s*gpu\.barrier \{mmaflow\.ring\}.*\n", "", text, flags=re.M)
    assert n == 2  # main loop and drain
    with pytest.raises(ExecutorError, match=r"warpgroup \d's wgmma.mma_async read, with nothing ordering"):
        _run_text(cut)


# ---- partial tiles (M, N, K not multiples of the tile: bounded like the mma.sync kernel's) --------

_PARTIAL = [
    (200, 136, 104, "f16", 128, False, False),  # M, N and K all partial
    (72, 264, 520, "bf16", 256, False, False),  # one partial M tile, a nearly empty N tile, K 8 + 1/8 tiles
    (200, 129, 104, "f16", 64, False, True),  # B^T: N odd, the stores split into single elements
    (136, 120, 72, "f16", 128, True, False),  # A^T: A's rows run along M
]
_PARTIAL_IDS = dict(zip(_PARTIAL, ["mnk", "m-n-k9", "Bt-n-odd", "At"]))


@pytest.mark.parametrize("m,n,k,t,wn,ta,tb,stages", spread(_PARTIAL, [1, 3, 4], 1, _PARTIAL_IDS.get))
def test_partial_tiles_match_numpy(m, n, k, t, wn, ta, tb, stages):
    src = matmul_module(m, n, k, t, transpose_a=ta, transpose_b=tb)
    r = _sim(src, {"intrinsic": _wg(wn, t), "stages": stages}, exact=True)
    assert r.check.passed, r.check.detail
    assert not r.stats.races
    r = _sim(src, {"intrinsic": _wg(wn, t), "stages": stages})
    assert r.check.passed, r.check.detail


def test_partial_tiles_one_warpgroup_batch():
    r = _sim(
        matmul_module(40, 72, 56, "bf16", batch=2),
        {"intrinsic": _wg(64, "bf16"), "tile_m": 64, "stages": 2},
        exact=True,
    )
    assert r.check.passed, r.check.detail


@pytest.mark.parametrize("stages", [1, 4])
def test_partial_tiles_with_fused_epilogue(stages):
    for name, (m, n, k) in (("scale_n-shift_m", (136, 200, 72)), ("bias_n-relu-f16", (200, 136, 104))):
        kw, ref, _ = _epilogue_cases()[name]
        src = epilogue_module(m, n, k, **kw)
        r = simulate(src, "sm_90a", {"intrinsic": _wg(128), "stages": stages}, seed=5, exact=True, epilogue=ref)
        assert r.check.passed, (name, r.check.line())


def test_partial_tiles_lower_to_zero_filling_cp_async():
    res = compile_module(
        matmul_module(200, 136, 520, "f16"),
        "sm_90a",  # (cp.async asked for)
        options=CodegenOptions(overrides={"intrinsic": _wg(128), "copy": "cp.async"}),
    )  # verify=True
    (ptx,) = res.isa_text.values()
    # the source-size operand: 16 bytes in range, 0 (zero-fill) past the true extent
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, %r\d+;", ptx), ptx[:2000]
    assert "wgmma.mma_async" in ptx and "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize(
    "shape,copy",
    [
        ((4096, 4096, 4096), None),
        ((4000, 4000, 4000), "tma-wide"),
        ((4096, 4096, 4000), "tma-wide"),
        ((1024, 1024, 1000), None),
    ],
)
def test_heuristic_takes_tma_where_tiles_overhang(shape, copy):
    """wgmma.plan.default_copy (measured on the H200, docs/PERFORMANCE.md): TMA (tma-wide)
    for 128-row tiles that overhang the problem, where it zero-fills past the tensor (unaligned
    4000^3 1.14x); cp.async for whole tiles (1% faster there) and for the 64x128 tiles of small
    problems (TMA's shared-memory floor costs them their second block per SM). (producer=0: the
    ring without a producer warpgroup, which the default is not from 2 to 9 persistent tiles per
    workgroup: test_warp_specialized.)"""
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.registry import resolve

    m, n, k = shape
    cfg, intr = resolve(
        get_target("sm_90a"),
        Contraction(m=m, n=n, k=k, batch=1, a_type="f16", b_type="f16", c_type="f32"),
        {"producer": 0},
    )
    assert intr.family == "wgmma" and cfg.copy == copy, cfg
    if shape == (1024, 1024, 1000):
        assert cfg.tile_m == 64


def test_aligned_problems_copy_unchecked():
    """Whole tiles: no bounds checks in the copies (no source-size operand)."""
    res = compile_module(
        matmul_module(256, 256, 512, "f16"), "sm_90a", options=CodegenOptions(overrides={"intrinsic": _wg(128)})
    )
    (ptx,) = res.isa_text.values()
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16;", ptx)
    assert not re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, ", ptx)


# ---- dynamic sizes (sizes from push constants, K tiles from the run-time K, the grid from the workload) ----

DYN_SIZES = [
    dict(m=130, n=264, k=72),  # partial M, N and K tiles
    dict(m=1, n=8, k=8),  # one row, one chunk
    dict(m=128, n=128, k=64),  # exactly one tile
    dict(m=129, n=136, k=520),  # K 8 + 1/8 tiles: every ring slot reused
    dict(m=5, n=16, k=0),
    dict(m=0, n=16, k=64),
]  # empty K (the accumulator stays 0), no rows


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_dynamic_sizes_match_numpy(stages):
    """One kernel, every dimension dynamic with the smallest promise it takes (N and K multiples
    of 8: whole 16-byte chunks; M none), run at several sizes (sentinel-bounded buffers)."""
    from mmaflow.runtime.modules import dynamic_module

    src = dynamic_module(divisors=dict(n=8, k=8))
    for sizes in DYN_SIZES:
        r = simulate(src, "sm_90a", {"intrinsic": _wg(128), "stages": stages}, sizes=sizes, seed=1, exact=True)
        assert r.check.passed, (sizes, r.check.line())
        assert not r.stats.races
        tiles = -(-sizes["m"] // 128) * -(-sizes["n"] // 128) * -(-sizes["k"] // 64)
        assert r.stats.matrix_ops == tiles * 4 * 2, sizes
    r = simulate(src, "sm_90a", {"intrinsic": _wg(128), "stages": stages}, sizes=DYN_SIZES[0], seed=2)
    assert r.check.passed, r.check.line()


@pytest.mark.parametrize("stages", [1, 4])
def test_dynamic_whole_tile_promises_and_rows(stages):
    """Promises of whole tiles (M % 16, N % 32, K % 64: only M and N bounded) and the inference
    shape: dynamic rows times static weights (bf16, N = 64 instructions)."""
    from mmaflow.runtime.modules import dynamic_module

    src = dynamic_module(divisors=dict(m=16, n=32, k=64))
    for sizes in (dict(m=144, n=160, k=192), dict(m=16, n=32, k=64), dict(m=128, n=128, k=0)):
        r = simulate(src, "sm_90a", {"intrinsic": _wg(128), "stages": stages}, sizes=sizes, seed=3, exact=True)
        assert r.check.passed, (sizes, r.check.line())
    rows = dynamic_module(m=None, n=136, k=200, in_type="bf16")
    for m in (1, 64, 130):
        r = simulate(rows, "sm_90a", {"intrinsic": _wg(64, "bf16"), "stages": stages}, sizes=dict(m=m), seed=m)
        assert r.check.passed, (m, r.check.line())


BATCH_DYNAMIC = """func.func @bmm(%a0: tensor<?x?x64xf16>, %b0: tensor<?x64x136xf16>) -> tensor<?x?x136xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bt0 = tensor.dim %a0, %c0 : tensor<?x?x64xf16>
  %m0 = tensor.dim %a0, %c1 : tensor<?x?x64xf16>
  %bt = arith.addi %bt0, %c0 : index
  %m = arith.addi %m0, %c0 : index
  %a = flow.tensor.reshape %a0 : tensor<?x?x64xf16>{%bt0, %m0} -> tensor<?x?x64xf16>{%bt, %m}
  %b = flow.tensor.reshape %b0 : tensor<?x64x136xf16>{%bt0} -> tensor<?x64x136xf16>{%bt}
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty(%bt, %m) : tensor<?x?x136xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<?x?x136xf32>) -> tensor<?x?x136xf32>
  %r = linalg.batch_matmul ins(%a, %b : tensor<?x?x64xf16>, tensor<?x64x136xf16>) outs(%f : tensor<?x?x136xf32>) -> tensor<?x?x136xf32>
  return %r : tensor<?x?x136xf32>
}
"""


def test_dynamic_batch_one_warpgroup():
    for sizes in (dict(batch=3, m=20), dict(batch=1, m=64)):
        r = simulate(
            BATCH_DYNAMIC, "sm_90a", {"intrinsic": _wg(64), "tile_m": 64, "stages": 3}, sizes=sizes, seed=7, exact=True
        )
        assert r.check.passed, (sizes, r.check.line())


def test_dynamic_prologue_copies_past_k_are_guarded(monkeypatch):
    """Mutation: the ring's prologue copies tiles 0 .. copy_ahead-1 whatever the run-time K; without
    their guard (tile < K tiles) a K of 0, or of one tile promised whole, reads past the tensor."""
    from mmaflow.compiler.driver.bridge import codegen_module
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter
    from mmaflow.runtime.modules import dynamic_module

    copy = WgmmaRewriter._copy_tile
    monkeypatch.setattr(WgmmaRewriter, "_copy_tile", lambda self, *a, tile_valid=None, **kw: copy(self, *a, **kw))
    res = codegen_module(
        dynamic_module(divisors=dict(m=16, n=32, k=64)),
        "sm_90a",
        options=CodegenOptions(overrides={"intrinsic": _wg(128), "stages": 4, "copy": "cp.async"}),
    )
    (exe,) = res.taken
    for sizes in (dict(m=64, n=96, k=0), dict(m=64, n=96, k=64)):
        with pytest.raises(ExecutorError, match="global access out of bounds"):
            check_matmul(parse_module(exe.text, new_context()), sizes=sizes, exact=True)


@pytest.mark.parametrize("divisors", [dict(n=8, k=8), dict(m=16, n=32, k=64)], ids=["chunks", "tiles"])
def test_dynamic_kernel_verifies_and_ptxas_keeps_it(tmp_path, divisors):
    """The default (4-slot ring, N 256; a dynamic problem's tiles overhang: TMA copies,
    wgmma.plan.default_copy) on a dynamic problem: verified PTX (check_isa), bulk tensor copies
    and no per-thread cp.async, no local memory, and ptxas without spills or serialized wgmma."""
    from mmaflow.runtime.modules import dynamic_module

    res = compile_module(dynamic_module(divisors=divisors), "sm_90a")  # the heuristic's choice; verify=True
    (ptx,) = res.isa_text.values()
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor" in ptx and "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
    out = sm90a_ptxas(tmp_path, ptx)
    assert "serialized" not in out.lower(), out


def _dyn_problem(m, n, k, divisors=None):
    from mmaflow.compiler.core.problem import DynamicDim

    divisors = divisors or {}
    sizes = dict(m=m, n=n, k=k)
    dyn = tuple(DynamicDim(d, (i,), ((i, -1),), divisors.get(d, 1)) for i, d in enumerate("mnk") if sizes[d] is None)
    return Contraction(m=m, n=n, k=k, batch=1, a_type="f16", b_type="f16", c_type="f32", dynamic=dyn)


def test_heuristic_takes_dynamic_problems_with_whole_chunk_rows():
    """warpgroup_default on a dynamic problem (as `configure` sees it: the estimate): the tile count
    from the estimate, the row rule from the promises; a refusal is quoted in the reasons."""
    from mmaflow.compiler.kernels.registry import explain

    for p in (
        _dyn_problem(None, None, None, dict(m=16, n=32, k=64)),
        _dyn_problem(None, 4096, 4096),
        _dyn_problem(None, None, None, dict(n=8, k=8)),
    ):
        cfg, intr = resolve(SM90, p.estimate())
        assert intr.name == "WGMMA_F32_64x256x16_F16" and cfg.stages == 4, p
    why = explain(SM90, _dyn_problem(None, 4096, 4096).estimate())
    assert why[0] == "chosen by the heuristic (dynamic sizes: the tuning table holds static shape classes)", why
    assert why[1].startswith("not the decode kernel: dynamic sizes"), why  # (asked first)
    assert "dynamic M estimated as 4096" in why[2], why
    for p, reason in (
        (
            _dyn_problem(None, None, None),
            "A's global rows run along K, which is dynamic and has no divisibility promise",
        ),
        (
            _dyn_problem(None, None, 4096, dict(n=4)),
            "B's global rows run along N, which is dynamic and promised only to be a multiple of 4",
        ),
        (
            _dyn_problem(None, 100, 4096),
            "32 tiles of 128x128 or 64 tiles of 64x128 for 132 SMs, dynamic M estimated as 4096",  # (N 100: fitted)
        ),
    ):
        cfg, intr = resolve(SM90, p.estimate())
        assert intr.family == "mma_sync", p
        why = explain(SM90, p.estimate())[2:]  # (after the source and the decode kernel's: dynamic sizes)
        assert why[0].startswith("mma.sync, not wgmma: ") and reason in why[0], why


@pytest.mark.parametrize(
    "shape,tile",
    [
        ((32, 2048, 128, 128), (128, 128)),  # attention's P V (N = head dim 128): not 128x256 over 128 columns
        ((32, 512, 64, 512), (128, 64)),  # N = head dim 64: 64-wide instructions
        ((12, 512, 64, 512), (64, 64)),  # ... 48 tiles of 128x64 under one per two SMs: 96 of 64x64
        ((256, 1, 2048, 128), (64, 256)),  # one query row per item: 64-row tiles (the decode kernel's, asked of wgmma)
        ((1, 4096, 4096, 4096), (128, 256)),  # large: the first shape, unchanged
        ((96, 197, 197, 64), (128, 256)),  # N 197 needs the 256-wide instruction
    ],
)
def test_heuristic_fits_tiles_to_the_problem(shape, tile):
    """wgmma.heuristic.fitted_shapes: no instruction twice as wide as N, no 128-row tile over
    M <= 64 (a 128x256 tile over N 128 stages and multiplies twice what it stores). The warpgroup
    family is asked directly: a one-row problem is the decode kernel's first."""
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.registry import WGMMA, resolve

    b, m, n, k = shape
    p = Contraction(m=m, n=n, k=k, batch=b, a_type="f16", b_type="f16", c_type="f32", b_transposed=True)
    why: list = []
    cfg, intr = WGMMA.configure(get_target("sm_90a"), p, {}, why)
    assert (cfg.tile_m, cfg.tile_n) == tile and intr.n == tile[1], cfg
    assert any(f"{tile[0]}x{tile[1]}x64 tiles" in w for w in why), why
    if m > 1:  # (M = 1: the decode kernel, first in the registry)
        assert resolve(get_target("sm_90a"), p, {})[0] == cfg


def test_a_deep_ring_without_the_wgmma_intrinsic_says_how_to_ask():
    """``--config stages=8`` alone configures the mma.sync kernel (1 to 4 slots); on sm_90a its refusal names the
    warpgroup kernel's ``intrinsic``, on sm_80 it does not."""
    with pytest.raises(MmaflowError, match=r"got 8 \(sm_90a's warpgroup-MMA kernel takes up to 8: --config intrinsic="):
        handed_back(matmul_module(128, 128, 256, "f16"), "sm_90a", (("stages", 8),))
    with pytest.raises(MmaflowError, match=r"stages must be 1 to 4 \(K tiles in LDS at once\), got 8$"):
        handed_back(matmul_module(128, 128, 256, "f16"), "sm_80", (("stages", 8),))
