"""The warp-specialized wgmma kernel (``--config producer=1``; ``tma.TmaRing.specialized``): a
producer warpgroup issues the TMA copies into slots guarded by "full" and "empty" mbarriers, the
MMA warpgroups never meet at a CTA barrier in the K loop. The lane executor runs the two roles as
cooperating tasks (``executor.Roles``: a task whose mbarrier wait cannot complete hands over), so
each side runs as far ahead of the other as the mbarriers allow -- the orders in which a missing
wait or release shows.

Numerics: against numpy on random data (``exact=True``: small integers, exact in f32; else the
f16/bf16 -> f32 bound of ``check_matmul``), fp8 bit for bit against the promoted kernel's modelled
arithmetic; mutations the executor must refuse; PTX through ptxas; the fp8 default and the
refusals."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from conftest import handed_back, mutant, simulate, sm90a_ptxas

from mmaflow.compiler.core.errors import MmaflowError, UnsupportedError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.core.problem import Contraction, DynamicDim
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.kernels.registry import explain, resolve
from mmaflow.compiler.kernels.wgmma import tma
from mmaflow.compiler.kernels.wgmma.tma import TmaRing
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.executor import ExecutorError
from mmaflow.runtime.modules import epilogue_module, matmul_module
from mmaflow.runtime.simulate import check_matmul

SM90 = get_target("sm_90a")
E4M3, E5M2 = "f8E4M3FN", "f8E5M2"
_LONG = pytest.mark.exhaustive  # the long tail (the default set keeps a case of each kind)


def _over(n, t="f16", **kw):
    k = 32 if t.startswith("f8") else 16
    return {"intrinsic": f"WGMMA_F32_64x{n}x{k}_{t.upper()}", "producer": 1, **kw}


def _sim(src, overrides, exact=False, **kw):
    text = handed_back(src, "sm_90a", tuple(sorted(overrides.items())))
    return check_matmul(parse_module(text, new_context()), exact=exact, **kw)


# ---- numerics --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "m,n,k,t,wn,tile_m,stages,copy,ta,tb,exact",
    [
        (256, 256, 512, "f16", 256, 128, 4, "tma", False, False, True),  # 32 + 1 issuers, 8 K tiles: slots reused
        (256, 256, 512, "bf16", 256, 128, 3, "tma-wide", False, False, False),  # 4 + 1 issuers
        (128, 128, 320, "f16", 128, 128, 2, "tma", False, False, True),  # 2 slots, wait_group 0
        (64, 128, 448, "bf16", 128, 64, 3, "tma", False, False, False),  # one MMA warpgroup
        (128, 128, 64, "f16", 128, 128, 4, "tma", False, False, True),  # one K tile: no slot released
        (200, 136, 104, "f16", 128, 128, 4, "tma-wide", False, False, True),  # partial M, N, K
        (128, 129, 320, "f16", 128, 128, 4, "tma", False, True, True),  # B^T, N odd
        (136, 120, 72, "f16", 128, 128, 3, "tma", True, False, True),  # A^T (MN-major A)
        (128, 128, 1024, "f16", 128, 128, 7, "tma-wide", False, True, True),  # the deepest ring, slots reused
        # N 176: B's tile is 1408 16-byte chunks, no whole number per thread (cp.async refuses it; TMA boxes take it)
        (128, 300, 192, "f16", 176, 128, 3, "tma-wide", False, True, True),
    ],
    ids=[
        "f16-n256",
        "bf16-wide-s3",
        "s2",
        "bf16-m64",
        "one-tile",
        "partial-mnk",
        "Bt-n129",
        "At-partial",
        "deep-s7",
        "n176-partial",
    ],
)
def test_matches_numpy(m, n, k, t, wn, tile_m, stages, copy, ta, tb, exact):
    r = _sim(
        matmul_module(m, n, k, t, transpose_a=ta, transpose_b=tb),
        _over(wn, t, tile_m=tile_m, stages=stages, copy=copy),
        exact,
    )
    assert r.check.passed, r.check.detail
    assert not r.stats.races
    tiles = -(-m // tile_m) * -(-n // wn) * -(-k // 64)
    assert r.stats.matrix_ops == tiles * 4 * (tile_m // 64)  # only the MMA warpgroups multiply


@pytest.mark.parametrize("t", [E4M3, pytest.param(E5M2, marks=_LONG)])
@pytest.mark.parametrize(
    "m,n,k,tile_m,stages", [(256, 256, 640, 128, 4), (200, 136, 528, 128, 3), (64, 128, 384, 64, 2)]
)
def test_fp8_matches_the_modelled_arithmetic(t, m, n, k, tile_m, stages):
    r = _sim(matmul_module(m, n, k, t, transpose_b=True), _over(128, t, tile_m=tile_m, stages=stages))
    assert r.check.passed and r.check.max_abs_err == 0, r.check.line()
    assert not r.stats.races


def test_batch_epilogue_and_dynamic_sizes():
    from test_epilogue import CASES

    from mmaflow.runtime.modules import dynamic_module

    r = _sim(matmul_module(40, 72, 56, "bf16", batch=2), _over(64, "bf16", tile_m=64, stages=2), True)
    assert r.check.passed, r.check.detail
    for name, (m, n, k) in (("bias_n-relu-f16", (200, 136, 104)), ("scale_n-shift_m", (128, 256, 192))):
        kw, ref, _ = CASES[name]
        r = simulate(epilogue_module(m, n, k, **kw), "sm_90a", _over(128), seed=5, exact=True, epilogue=ref)
        assert r.check.passed, (name, r.check.line())
    src = dynamic_module(divisors=dict(n=8, k=8))
    for sizes in (dict(m=130, n=264, k=72), dict(m=5, n=16, k=0), dict(m=1, n=8, k=520)):
        r = simulate(src, "sm_90a", _over(128, stages=3), sizes=sizes, seed=1, exact=True)
        assert r.check.passed, (sizes, r.check.line())


@pytest.mark.parametrize(
    "m,n,k,t,wn,tile_m,stages,w,copy",
    [
        pytest.param(256, 512, 512, "f16", 256, 128, 4, 2, "tma-wide", marks=_LONG),  # slots line up across tiles
        (512, 256, 320, "f16", 128, 128, 3, 4, "tma"),  # 5 K tiles, 3 slots: the ring count runs on
        (256, 256, 256, "bf16", 128, 64, 2, 4, "tma"),  # one MMA warpgroup
        pytest.param(256, 256, 640, E4M3, 128, 128, 4, 2, "tma", marks=_LONG),  # fp8, bit for bit
        (200, 136, 104, "f16", 128, 128, 4, 2, "tma-wide"),  # partial M, N, K: zero fill, bounded stores per tile
        pytest.param(250, 520, 200, "bf16", 256, 128, 3, 3, "tma-wide", marks=_LONG),
        (200, 136, 528, E4M3, 128, 128, 3, 2, "tma"),
    ],
)
def test_persistent_matches_numpy(m, n, k, t, wn, tile_m, stages, w, copy):
    """Each role loops over the workgroup's W tiles on its own (``_roles_outside``): the producer
    runs on into the next tile while the MMA warpgroups store this one."""
    fp8 = t.startswith("f8")
    r = _sim(
        matmul_module(m, n, k, t, transpose_b=fp8),
        _over(wn, t, tile_m=tile_m, stages=stages, persistent=w, copy=copy),
        t == "f16",
    )
    assert r.stats.matrix_ops == -(-m // tile_m) * -(-n // wn) * -(-k // (128 if fp8 else 64)) * 4 * (tile_m // 64)
    assert r.check.passed and (not fp8 or r.check.max_abs_err == 0), r.check.line()
    assert not r.stats.races


# ---- mutations the executor must catch -------------------------------------------------------------


def _mutant(attr, value, stages=4, k=640):
    return mutant(TmaRing, attr, value, matmul_module(128, 256, k, "f16"), overrides=_over(256, stages=stages)).text


def _run(text):
    return check_matmul(parse_module(text, new_context()), exact=True)


@pytest.mark.parametrize("stages", [2, 4])
def test_copying_before_the_release_is_caught(stages):
    # the producer re-arms a slot whose phase the MMA warpgroups have not waited for yet
    with pytest.raises(ExecutorError, match="more arrivals on the mbarrier at .* than its count 33 in one phase"):
        _run(_mutant("_skip_empty_wait", True, stages))


@pytest.mark.parametrize("stages", [2, 4])
def test_releasing_before_wait_group_is_caught(stages):
    # the release precedes the wait_group that completes the slot's wgmmas: the next copy into it
    # is ordered after nothing that ordered their reads (the happens-before of the mbarrier phase)
    with pytest.raises(
        ExecutorError,
        match="a bulk tensor copy by thread 256 into shared-memory byte .* which "
        "warpgroup 0's wgmma.mma_async read, with nothing ordering",
    ):
        _run(_mutant("_release_early", True, stages))


def test_never_releasing_deadlocks():
    with pytest.raises(
        ExecutorError,
        match="waits for phase parity 1 of the mbarrier .* cannot yet complete: "
        "33 of 33 arrivals missing.*so does every other warp role .*: the kernel "
        "deadlocks",
    ):
        _run(_mutant("_skip_release", True, 3))


def test_wrong_slot_and_parity_are_caught():
    with pytest.raises(
        ExecutorError, match="wgmma.mma_async reads element 0 of .* while an async copy to it is in flight"
    ):
        _run(_mutant("_dst_slot_skew", 1))
    with pytest.raises(ExecutorError, match="the kernel deadlocks"):
        _run(_mutant("_flip_parity", True))


def test_a_ring_count_restarted_per_tile_is_caught():
    # 5 K tiles a tile in 3 slots: the next tile's tile 0 is not in slot 0, nor of parity 0
    text = mutant(
        TmaRing,
        "_tile_local_count",
        True,
        matmul_module(512, 256, 320, "f16"),
        overrides=_over(128, stages=3, persistent=4),
    ).text
    with pytest.raises(ExecutorError, match="the kernel deadlocks"):
        _run(text)


def _split_kernel():
    """The warp-specialized 128x256x128 f16 kernel, built in this process, so that a test's
    monkeypatched register split holds."""
    (exe,) = codegen_module(
        matmul_module(128, 256, 128, "f16"), "sm_90a", options=CodegenOptions(overrides=_over(256))
    ).taken
    return exe


def test_register_split_beyond_the_sm_is_refused(monkeypatch):
    monkeypatch.setattr(tma, "PRODUCER_REGISTERS", 112)  # 2 x 128 x 232 + 128 x 112 > 64K
    monkeypatch.setattr(tma, "consumer_registers", lambda warpgroups: 232)
    exe = _split_kernel()
    with pytest.raises(
        ExecutorError,
        match=r"setmaxnreg: the warpgroups ask for \[232, 232, 112\] registers per "
        r"thread, 73728 in all, more than the SM's 65536",
    ):
        _run(exe.text)


def test_register_split_beyond_the_pool_is_refused(monkeypatch):
    # 2 x 128 x 232 + 128 x 48 = 65536 fits the SM, but not the 384 x 168 = 64512 registers the
    # workgroup holds from launch, which every .inc draws from: the hardware blocks that .inc
    # forever (run 20 call 4: four MMA warpgroups at 112 and 40 in 640 x 96 hung until a trap)
    monkeypatch.setattr(tma, "PRODUCER_REGISTERS", 48)
    monkeypatch.setattr(tma, "consumer_registers", lambda warpgroups: 232)
    exe = _split_kernel()
    with pytest.raises(
        ExecutorError,
        match=r"setmaxnreg: the warpgroups end at \[232, 232, 48\] registers per "
        r"thread, 65536 in all, more than the workgroup's pool of 64512 \(384 "
        r"threads x 168 at launch\)",
    ):
        _run(exe.text)


@pytest.mark.parametrize(
    "producer,mma,refused",
    [
        (200, 232, r"setmaxnreg.dec 200 from \[168\] .* 168 for 384 threads\)"),  # a .dec that raises the count
        # MMA warpgroups at 160, below the SM's share: ptxas would launch with a count of its own
        # choosing (160 here; 154 with an .inc to 104), which the executor does not model
        (
            40,
            160,
            r"setmaxnreg.inc 160 from \[168\] .* 168 for 384 threads; a kernel that raises no count to it is "
            r"not modelled\)",
        ),
    ],
)
def test_register_counts_moved_the_wrong_way_are_refused(monkeypatch, producer, mma, refused):
    monkeypatch.setattr(tma, "PRODUCER_REGISTERS", producer)
    monkeypatch.setattr(tma, "consumer_registers", lambda warpgroups: mma)
    exe = _split_kernel()
    with pytest.raises(ExecutorError, match=refused) as e:
        _run(exe.text)
    assert "registers per thread: an .inc raises the count, a .dec lowers it (at launch every thread" in str(e.value)


@pytest.mark.parametrize("warpgroups,launch,mma", [(1, 256, 256), (2, 168, 232), (4, 96, 104)])
def test_register_split_fits_the_launch_pool(warpgroups, launch, mma):
    threads = 128 * (warpgroups + 1)
    assert tma.launch_registers(threads) == launch and tma.consumer_registers(warpgroups) == mma


def test_a_split_below_the_launch_count_is_refused(monkeypatch):
    monkeypatch.setattr(tma, "PRODUCER_REGISTERS", 200)  # 2 x 128 x 152 + 128 x 200: the share falls below 168
    with pytest.raises(
        UnsupportedError,
        match=r"2 MMA warpgroups: their register share, 152 per thread, is below "
        r"the 168 every thread launches with",
    ):
        tma.consumer_registers(2)


# ---- lowering --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src,over,regs",
    [
        (matmul_module(1024, 1024, 1024, "f16"), _over(256, copy="tma-wide"), 232),
        (matmul_module(2048, 2048, 1024, E4M3, transpose_b=True), {}, 232),  # fp8's default: one tile each
        (matmul_module(4096, 4096, 1024, E4M3, transpose_b=True), {}, 232),  # fp8's default: persistent
        (matmul_module(4096, 4096, 1024, "f16"), _over(256, copy="tma-wide", persistent=4), 232),
    ],
)
def test_ptx_roles_and_ptxas(tmp_path, src, over, regs):
    """Verified PTX (check_isa: wgmma, bulk copies, no barrier in the K loop); the roles' register
    split, once per role (inside a loop over tiles ptxas could not size the roles: it spilled and
    serialized the wgmmas); the two prologue barriers only; ptxas assembles it without spills or
    serialized wgmma."""
    res = compile_module(src, "sm_90a", options=CodegenOptions(overrides=over))
    (ptx,) = res.isa_text.values()
    assert ".maxntid 384, 1, 1" in ptx
    assert re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+);", ptx) == [("inc", str(regs)), ("dec", "40")]
    assert len(re.findall(r"\bbar\.sync\b", ptx)) == 2
    assert "mbarrier.arrive.shared.b64" in ptx
    assert not re.search(r"^\s*cp\.async\.(ca|cg)\.", ptx, re.M)
    from mmaflow.compiler.target.isa import parse_ptx

    loop = parse_ptx(ptx, "k", SM90).loop_counts  # (not a wait loop inside it, not the loop over tiles)
    assert loop.get("matrix") == 4 and not loop.get("barrier"), loop
    out = sm90a_ptxas(tmp_path, ptx)
    assert "C7514" not in out and "C7517" not in out, out
    # the CTA's register pool, which the .inc draws from: ptxas's count at launch is the one the
    # split is sized from, and the split fits the pool it makes (384 x 168 = 2 x 128 x 232 + 128 x 40)
    used = re.search(r"Used (\d+) registers", out)
    assert used is not None, out
    launch = int(used.group(1))
    assert launch == tma.launch_registers(384) == 168, out
    assert 2 * 128 * regs + 128 * tma.PRODUCER_REGISTERS <= 384 * launch


# ---- the default and refusals ----------------------------------------------------------------------


def test_fp8_default_is_warp_specialized_where_tma_serves():
    p = Contraction(m=4096, n=4096, k=4096, a_type=E4M3, b_type=E4M3, c_type="f32", b_transposed=True, batch=1)
    cfg, _ = resolve(SM90, p, {})
    assert (cfg.producer, cfg.copy, cfg.persistent, cfg.workgroup_size) == (1, "tma", 8, 384)
    assert any("producer warpgroup (warp-specialized: 1.14x / 1.12x" in w for w in explain(SM90, p))
    assert any("persistent grid: 128 workgroups of 8 tiles" in w for w in explain(SM90, p))
    assert resolve(SM90, p, {"producer": 0})[0].producer == 0
    mixed = Contraction(m=4096, n=4096, k=4096, a_type=E4M3, b_type=E5M2, c_type="f32", b_transposed=True, batch=1)
    assert resolve(SM90, mixed, {})[0].producer == 0
    assert any(
        "fp8 on the cp.async ring, not warp-specialized: " in w and "one element type" in w
        for w in explain(SM90, mixed)
    )
    small = Contraction(m=1024, n=1024, k=1024, a_type=E4M3, b_type=E4M3, c_type="f32", b_transposed=True, batch=1)
    cfg, _ = resolve(SM90, small, {})  # 64x128 tiles: one MMA warpgroup
    assert (cfg.tile_m, cfg.producer, cfg.copy) == (64, 0, None)
    assert any("64-row tiles have one MMA warpgroup" in w for w in explain(SM90, small))
    assert (
        resolve(
            SM90,
            Contraction(m=2048, n=2048, k=2048, a_type=E4M3, b_type=E4M3, c_type="f32", b_transposed=True, batch=1),
            {},
        )[0].producer
        == 1
    )
    unaligned = Contraction(m=4000, n=4000, k=4000, a_type=E4M3, b_type=E4M3, c_type="f32", b_transposed=True, batch=1)
    assert resolve(SM90, unaligned, {})[0].persistent == 8  # partial tiles: TMA zero-fills the copies
    f16 = Contraction(m=4096, n=4096, k=4096, a_type="f16", b_type="f16", c_type="f32", batch=1)
    cfg, _ = resolve(SM90, f16, {"producer": 1})  # producer=1 alone: the TMA ring it asks for, one box per row
    assert (cfg.copy, cfg.workgroup_size, cfg.compute_threads) == ("tma", 384, 256)


def _f16(m, n=None, k=None, dtype="f16", **kw):
    return Contraction(m=m, n=n or m, k=k or m, a_type=dtype, b_type=dtype, c_type="f32", batch=1, **kw)


@pytest.mark.parametrize(
    "problem,tiles",
    [
        (_f16(4096), 4),
        (_f16(6144), 9),
        (_f16(3072), 3),
        (_f16(4096, k=1024), 4),
        (_f16(4000), 4),  # partial tiles: the cp.async ring's persistent grid would not take them
        (_f16(4096, dtype="bf16", b_transposed=True), 4),
    ],
)
def test_f16_bf16_default_is_warp_specialized_from_2_to_9_tiles_per_workgroup(problem, tiles):
    cfg, _ = resolve(SM90, problem, {})
    assert (cfg.producer, cfg.copy, cfg.persistent, cfg.workgroup_size) == (1, "tma-wide", tiles, 384)
    why = explain(SM90, problem)
    assert any("instead, the 4-slot tma-wide ring fed by a producer warpgroup" in w for w in why), why
    assert any(f"workgroups of {tiles} tiles each" in w for w in why), why
    # asking for any of producer / copy / persistent: the kernel asked for, not this choice
    assert resolve(SM90, problem, {"producer": 0})[0].producer == 0
    assert resolve(SM90, problem, {"persistent": None})[0].producer == 0  # (--config persistent=0, parsed)


@pytest.mark.parametrize(
    "problem,copy,persistent,why",
    [
        (_f16(8192), None, 16, "would run 16 tiles per workgroup"),  # measured slower there
        (_f16(8192, dtype="bf16"), None, 16, "would run 16 tiles per workgroup"),
        (_f16(2048), None, None, "would run one tile per workgroup"),  # one wave of tiles
        (_f16(5120), None, None, "would run one tile per workgroup"),  # 800 tiles: no W divides them
        (
            Contraction(
                m=None,
                n=4096,
                k=4096,
                a_type="f16",
                b_type="f16",
                c_type="f32",
                batch=1,  # dynamic rows
                dynamic=(DynamicDim("m", (0,), ((0, -1),)),),
            ),
            "tma-wide",
            None,
            None,
        ),
    ],
)
def test_f16_bf16_default_keeps_the_ring_it_had_elsewhere(problem, copy, persistent, why):
    cfg, _ = resolve(SM90, problem, {})
    assert (cfg.producer, cfg.copy, cfg.persistent) == (0, copy, persistent)
    lines = explain(SM90, problem)
    if why:
        assert any(f"not warp-specialized: its persistent grid {why}" in w for w in lines), lines
    else:
        assert not any("warp-specialized" in w for w in lines), lines


@pytest.mark.parametrize(
    "over,match",
    [
        (dict(producer=1, copy=None), "producer=1 issues TMA copies into mbarrier-guarded slots"),
        (dict(producer=2), "producer=2; 0 .* or 1"),
        (dict(producer=1, stages=1), "producer=1 feeds a ring of 2 to 8 slots; stages=1 is the synchronous kernel"),
        (dict(producer=1, persistent=3), "4 output tiles are not a whole number of 3 per workgroup"),
    ],
)
def test_refusals(over, match):
    p = Contraction(m=256, n=512, k=512, a_type="f16", b_type="f16", c_type="f32", batch=1)
    with pytest.raises(MmaflowError, match=match):
        resolve(SM90, p, {"intrinsic": "WGMMA_F32_64x256x16_F16", **over})


def test_tile_widths_that_are_not_whole_chunks_per_thread_need_tma():
    """N 176 (TinyLlama's 5632 columns in 32 tiles), B stored N x K: B's 176 x 64 f16 tile is 1408 16-byte chunks,
    not a whole number for each of 256 copying threads; TMA boxes copy it whole."""
    p = Contraction(m=512, n=5632, k=2048, a_type="f16", b_type="f16", c_type="f32", batch=1, b_transposed=True)
    over = {"intrinsic": "WGMMA_F32_64x176x16_F16", "tile_m": 128}
    with pytest.raises(UnsupportedError, match="B's tile is 1408 16-byte chunks, not a whole number per thread of 256"):
        resolve(SM90, p, over)
    for copy in ({"copy": "tma-wide"}, {"copy": "tma-wide", "producer": 1}):
        cfg, _ = resolve(SM90, p, {**over, **copy})
        assert (cfg.tile_m, cfg.tile_n, cfg.copy) == (128, 176, "tma-wide")


def test_mma_sync_refuses_a_producer():
    p = Contraction(m=256, n=512, k=512, a_type="f16", b_type="f16", c_type="f32", batch=1)
    with pytest.raises(MmaflowError, match="the producer warpgroup feeds the warpgroup-MMA kernel's TMA ring only"):
        resolve(get_target("sm_80"), p, {"producer": 1, "tile_m": 128})


def test_fp8_variants():
    """fp8 (whose default this kernel is in 128-row tiles): batch (3-D maps), the fused epilogue and
    dynamic rows, bit for bit against the promoted kernel's modelled arithmetic (the epilogue,
    stored as f16: the f16 bound)."""
    from test_wgmma_fp8 import DYNAMIC_ROWS

    from mmaflow.runtime.modules import EPILOGUES
    from mmaflow.runtime.numerics import EPILOGUE_REFERENCES

    r = _sim(matmul_module(40, 72, 160, E5M2, transpose_b=True, batch=2), _over(64, E5M2, tile_m=64, stages=2))
    assert r.check.passed and r.check.max_abs_err == 0, r.check.line()
    src = epilogue_module(136, 256, 256, E4M3, transpose_b=True, **EPILOGUES["bias_n_relu_f16"])
    r = simulate(src, "sm_90a", _over(128, E4M3, stages=3), seed=5, epilogue=EPILOGUE_REFERENCES["bias_n_relu_f16"])
    assert r.check.passed, r.check.line()
    for m in (1, 130):  # dynamic M: the maps' sizes at run time, TMA zero-fills past M
        r = simulate(DYNAMIC_ROWS, "sm_90a", _over(128, E4M3, stages=4), sizes=dict(m=m), seed=m)
        assert r.check.passed and r.check.max_abs_err == 0, (m, r.check.line())
        assert r.config.producer == 1


# ---- clusters of 2: B's K tiles shared by TMA multicast (cluster=2) ---------------------------------
# The lane executor runs a cluster's workgroups together (runtime/executor/tma.py, "Clusters"): the
# multicast lands in both workgroups' shared memory and completes both "full" mbarriers, the MMA
# warpgroups' releases arrive on both "empty" mbarriers (mapa + a shared::cluster arrive), and
# barrier.cluster must order the mbarriers' init before any peer uses them and every remote
# operation before exit.


def _cluster(n=128, **kw):
    return _over(n, **{"copy": "tma-wide", "cluster": 2, "stages": 3, "persistent": 2, **kw})


@pytest.mark.parametrize(
    "m,n,k,t,wn,tb,w",
    [
        (512, 256, 320, "f16", 128, False, 2),  # 8 tiles, 4 workgroups: 2 clusters, B's 4 boxes 2 + 2
        (512, 256, 320, "f16", 128, True, 2),  # B^T: its K-major tile cut into 2 boxes of 64 rows
        (500, 264, 200, "bf16", 256, False, 2),  # partial M, N, K: zero fill in both workgroups' slots
        pytest.param(1024, 512, 448, "f16", 256, True, 4, marks=_LONG),  # 4 tiles per workgroup, 16 K tiles
    ],
)
def test_cluster_matches_numpy(m, n, k, t, wn, tb, w):
    r = _sim(matmul_module(m, n, k, t, transpose_b=tb), _cluster(wn, t=t, persistent=w), t == "f16")
    assert r.check.passed, r.check.line()
    assert not r.stats.races
    assert r.stats.matrix_ops == -(-m // 128) * -(-n // wn) * -(-k // 64) * 4 * 2


def test_cluster_raster_walks_pairs():
    """raster=2 over the pairs' grid (8 tile rows = 4 pairs, 2 columns, 4 clusters): every tile
    computed once (a pair on two columns, or two pairs on one tile, would miss or repeat tiles)."""
    r = _sim(matmul_module(1024, 256, 128, "f16"), _cluster(raster=2), True)
    assert r.check.passed, r.check.line()
    assert r.stats.matrix_ops == 8 * 2 * 2 * 4 * 2
    assert not r.stats.races


def test_cluster_fp8_matches_the_modelled_arithmetic():
    """fp8 (A and B K-major: B's one box per K tile cut in two, one per workgroup), bit for bit."""
    r = _sim(matmul_module(512, 256, 512, E4M3, transpose_b=True), _cluster(t=E4M3, copy="tma"))
    assert r.check.passed and r.check.max_abs_err == 0, r.check.line()
    assert not r.stats.races


def test_cluster_fused_epilogue():
    from mmaflow.runtime.modules import EPILOGUES
    from mmaflow.runtime.numerics import EPILOGUE_REFERENCES

    src = epilogue_module(512, 256, 192, "f16", **EPILOGUES["bias_n_gelu_f16"])
    r = simulate(src, "sm_90a", _cluster(), seed=3, epilogue=EPILOGUE_REFERENCES["bias_n_gelu_f16"])
    assert r.check.passed, r.check.line()
    assert r.config.cluster == 2


def _cluster_mutant(attr):
    return mutant(TmaRing, attr, True, matmul_module(512, 256, 320, "f16"), overrides=_cluster()).text


@pytest.mark.parametrize(
    "attr,match",
    [
        # each producer waits for both workgroups' release: a release of its own slot only never completes the peer's
        ("_release_own_only", r"waits for phase parity 0 of the mbarrier .*2 of 4 arrivals missing.*deadlocks"),
        # each "full" mbarrier receives the peer's multicast half too: expecting only its own bytes never completes
        ("_expect_own_only", r"24576 bytes expected, 32768 issued on it"),
        (
            "_skip_setup_cluster_barrier",
            r"multicast cp.async.bulk.tensor .* on an mbarrier CTA 1 initialised with no "
            r"cluster barrier since",
        ),
        ("_skip_exit_cluster_barrier", r"exits while CTA \d of its cluster may still arrive on its mbarrier"),
        # both releases on the workgroup's own mbarrier: the counts are met, but a producer refills the
        # peer's slot before the peer's wgmmas are known to be done with it
        (
            "_release_wrong_peer",
            r"multicast bulk tensor copy into CTA \d of the cluster .* which that CTA's warpgroup \d's "
            r"wgmma.mma_async read, with nothing ordering",
        ),
    ],
)
def test_cluster_mutations_are_caught(attr, match):
    with pytest.raises(ExecutorError, match=match):
        _run(_cluster_mutant(attr))


def test_cluster_plan_and_ptx(tmp_path):
    """The plan says who issues what; the PTX asks for clusters of 2, multicasts B, releases the
    peer's slot through mapa, and ptxas takes it without spills."""
    src = matmul_module(4096, 4096, 1024, "f16")
    res = compile_module(
        src, "sm_90a", options=CodegenOptions(overrides=_over(256, copy="tma-wide", persistent=4, cluster=2))
    )
    (ptx,) = res.isa_text.values()
    assert re.search(r"\.reqnctapercluster 2, 1, 1", ptx)
    multicast = re.findall(r"cp\.async\.bulk\.tensor\.2d\S*\.multicast::cluster", ptx)
    assert len(multicast) == 1 and len(re.findall(r"cp\.async\.bulk\.tensor\.", ptx)) == 2  # B's share; A's own
    assert re.search(r"mapa\.shared::cluster", ptx) and "mbarrier.arrive.shared::cluster.b64" in ptx
    assert len(re.findall(r"barrier\.cluster\.wait", ptx)) == 2  # after the setup, before exit
    from mmaflow.compiler.target.isa import parse_ptx

    assert parse_ptx(ptx, "k", SM90).cluster_ctas == 2
    out = sm90a_ptxas(tmp_path, ptx)
    assert "C7514" not in out and "C7517" not in out, out
    from mmaflow.compiler.kernels.wgmma.plan import operand_layout

    p = Contraction(m=4096, n=4096, k=1024, a_type="f16", b_type="f16", c_type="f32", batch=1)
    plan = tma.plan_tma(
        operand_layout("A", p, 128, "f16"),
        operand_layout("B", p, 256, "f16", k_atoms_fastest=True),
        0,
        4,
        256,
        cluster=2,
    )
    assert (plan.issuers, plan.a.issued, plan.b.issued, plan.b.multicast) == (3, 1, 2, 2)
    text = "\n".join(plan.describe())
    assert "B: TMA 4 boxes" in text and "rank r issuing boxes r * 2 .. r * 2 + 1 with a multicast" in text, text
    assert "cluster: 2 workgroups (nvvm.cluster_dim)" in text
    bt = tma.plan_tma(
        operand_layout("A", p, 128, "f16"),
        operand_layout("B", replace(p, b_transposed=True), 256, "f16"),
        0,
        4,
        256,
        cluster=2,
    )
    assert (bt.b.boxes, bt.b.box, bt.b.row_step) == (2, (64, 128), 128)  # B^T: 256 K-major rows in 2 boxes


def test_verify_refuses_a_kernel_without_the_cluster_shape():
    from mmaflow.compiler import verify
    from mmaflow.compiler.core import attrs
    from mmaflow.compiler.target.isa import IsaReport

    counts = {"matrix": 4, "bulk_tensor_copy": 2, "mbarrier_wait": 2, "barrier": 2}
    rep = IsaReport(kernel="k", isa="ptx", counts=counts, has_loop=True, cluster_ctas=1)
    exp = attrs.Expectations(128, 16, 4, False, 0, tma=True, cluster=2)
    with pytest.raises(
        MmaflowError,
        match=r"clusters of 2, the PTX asks for 1 CTA\(s\).*no multicast.*no release of "
        r"the peer's slots.*0 barrier.cluster.wait",
    ):
        verify.check_isa(rep, "k", "wgmma.mma_async", SM90.vendor, True, exp)
    clustered = {**counts, "bulk_tensor_multicast": 1, "mapa": 2, "remote_arrive": 2, "cluster_wait": 2}
    verify.check_isa(
        IsaReport(kernel="k", isa="ptx", counts=clustered, has_loop=True, cluster_ctas=2),
        "k",
        "wgmma.mma_async",
        SM90.vendor,
        True,
        exp,
    )  # (passes)
    with pytest.raises(MmaflowError, match="the PTX asks for clusters of 2 CTAs; the kernel is planned without"):
        verify.check_isa(
            IsaReport(kernel="k", isa="ptx", counts=clustered, has_loop=True, cluster_ctas=2),
            "k",
            "wgmma.mma_async",
            SM90.vendor,
            True,
            attrs.Expectations(128, 16, 4, False, 0, tma=True),
        )


@pytest.mark.parametrize(
    "over,match",
    [
        (dict(cluster=2, copy="tma-wide"), "clusters are built on the warp-specialized persistent kernel"),
        (dict(cluster=2, producer=1, copy="tma-wide"), "clusters are built on the warp-specialized persistent kernel"),
        (dict(cluster=3, producer=1, copy="tma-wide", persistent=2), "clusters of 1, 2 workgroups are implemented"),
        (dict(cluster=2, producer=1, copy="tma-wide", persistent=2, m=384), "3 tile rows of 128 .* do not pair up"),
        (
            dict(cluster=2, producer=1, copy="tma-wide", persistent=4, n=768),
            "grid of 3 workgroups .* not whole clusters",
        ),
        (
            dict(cluster=2, producer=1, copy="tma-wide", persistent=4, intrinsic="WGMMA_F32_64x64x16_F16"),
            r"B: 1 boxes per K tile do not share out between 2 workgroups \(copy=tma: 8-K-line boxes",
        ),
    ],
)
def test_cluster_refusals(over, match):
    over = dict(over)
    p = Contraction(
        m=over.pop("m", 512), n=over.pop("n", 512), k=512, a_type="f16", b_type="f16", c_type="f32", batch=1
    )
    with pytest.raises(MmaflowError, match=match):
        resolve(SM90, p, {"intrinsic": "WGMMA_F32_64x256x16_F16", **over})
    with pytest.raises(MmaflowError, match="clusters are the warp-specialized warpgroup-MMA kernel's only"):
        resolve(get_target("sm_80"), p, {"cluster": 2, "tile_m": 128})
