"""The TMA-fed wgmma ring (``--config copy=tma``, ``compiler/kernels/wgmma/tma.py``): numerics on the lane executor
(whose TMA is ``runtime/executor/tma.py``: tensor-map records, mbarrier phases, bulk copies with
the 128B swizzle and zero fill, landing only when a wait completes their phase), the mutations it
must catch, refusals, the plan, and the lowering to PTX (ptxas, verify).

Tolerance as ``test_wgmma_kernel.py``: ``exact=True`` uses small integers (exact in f32)."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import handed_back, mutant, simulate, sm90a_ptxas

from mmaflow.compiler.core.errors import ConfigError, MmaflowError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.kernels.registry import resolve
from mmaflow.compiler.kernels.wgmma.tma import ONE_BLOCK_PER_SM, TmaRing
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.executor import ExecutorError
from mmaflow.runtime.modules import epilogue_module, matmul_module
from mmaflow.runtime.simulate import check_matmul

SM90 = get_target("sm_90a")


def _wg(n, t="f16"):
    return f"WGMMA_F32_64x{n}x16_{t.upper()}"


def _over(n, t="f16", **kw):
    return {"intrinsic": _wg(n, t), "copy": "tma", **kw}


def _sim(src, overrides, exact=False, **kw):
    text = handed_back(src, "sm_90a", tuple(sorted(overrides.items())))
    return check_matmul(parse_module(text, new_context()), exact=exact, **kw)


# ---- numerics --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "m,n,k,t,wn,tile_m,stages,ta,tb,exact",
    [
        (256, 256, 512, "f16", 256, 128, 4, False, False, True),  # N 256: 32 boxes of B per K tile, 8 K tiles
        (256, 256, 512, "bf16", 256, 128, 3, False, False, False),
        (128, 128, 320, "f16", 128, 128, 2, False, False, True),  # 5 K tiles: 2 slots reused twice
        (64, 128, 448, "bf16", 128, 64, 3, False, False, False),  # one warpgroup, 7 K tiles
        (128, 128, 64, "f16", 128, 128, 4, False, False, True),  # one K tile: fewer than the ring copies ahead
        (200, 136, 104, "f16", 128, 128, 4, False, False, True),  # partial M, N, K: TMA's zero fill, no masks
        (72, 264, 520, "bf16", 256, 128, 3, False, False, True),  # a nearly empty N tile, K 8 + 1/8 tiles
        (128, 129, 320, "f16", 128, 128, 4, False, True, True),  # B^T (K-major, one box), N odd
        (136, 120, 72, "f16", 128, 128, 3, True, False, True),  # A^T (MN-major A: 16 boxes)
        (128, 128, 320, "f16", 128, 128, 4, True, True, True),
    ],
    ids=[
        "f16-n256",
        "bf16-n256-s3",
        "s2-k5",
        "bf16-m64",
        "one-tile",
        "partial-mnk",
        "partial-bf16-n256",
        "Bt-n129",
        "At-partial",
        "AtBt",
    ],
)
def test_tma_ring_matches_numpy(m, n, k, t, wn, tile_m, stages, ta, tb, exact):
    r = _sim(
        matmul_module(m, n, k, t, transpose_a=ta, transpose_b=tb), _over(wn, t, tile_m=tile_m, stages=stages), exact
    )
    assert r.check.passed, r.check.detail
    assert not r.stats.races
    tiles = -(-m // tile_m) * -(-n // wn) * -(-k // 64)
    assert r.stats.matrix_ops == tiles * 4 * (tile_m // 64)


def test_tma_ring_batch_one_warpgroup():
    # 3-D maps: (K, M, batch) and (N, K, batch), box 1 along the batch; partial M/N/K
    r = _sim(matmul_module(40, 72, 56, "bf16", batch=2), _over(64, "bf16", tile_m=64, stages=2), True)
    assert r.check.passed, r.check.detail
    r = _sim(matmul_module(64, 128, 128, "f16", batch=3), _over(128, tile_m=64, stages=3))
    assert r.check.passed, r.check.detail


def test_tma_ring_fused_epilogue():
    from test_epilogue import CASES

    for name, (m, n, k) in (("bias_n-relu-f16", (200, 136, 104)), ("scale_n-shift_m", (128, 256, 192))):
        kw, ref, _ = CASES[name]
        r = simulate(epilogue_module(m, n, k, **kw), "sm_90a", _over(128), seed=5, exact=True, epilogue=ref)
        assert r.check.passed, (name, r.check.line())


def test_tma_ring_dynamic_sizes():
    """Every dimension dynamic (N, K promised multiples of 8): the maps' sizes come from the
    memref's run-time sizes; K 0 issues nothing; partial tiles zero-filled by TMA."""
    from mmaflow.runtime.modules import dynamic_module

    src = dynamic_module(divisors=dict(n=8, k=8))
    for sizes in (dict(m=130, n=264, k=72), dict(m=129, n=136, k=520), dict(m=5, n=16, k=0), dict(m=1, n=8, k=8)):
        r = simulate(src, "sm_90a", _over(128, stages=4), sizes=sizes, seed=1, exact=True)
        assert r.check.passed, (sizes, r.check.line())


@pytest.mark.exhaustive
def test_tma_ring_at_iree_binding_offsets(monkeypatch):
    """GPT-2's dispatches with the default switched to TMA (``wgmma.plan.default_copy``, the one-line
    heuristic): Q and K of QK^T in one binding at different byte offsets, bias and GELU epilogues;
    each taken dispatch against IREE's own dispatch IR in numpy, inside sentinel-filled buffers."""
    from test_models import _source

    from mmaflow.compiler.kernels.wgmma import plan as wgmma_plan
    from mmaflow.runtime.model_check import check_executable

    monkeypatch.setenv("MMAFLOW_CODEGEN_SERVER", "0")  # (the patched heuristic runs in this process)
    monkeypatch.setattr(
        wgmma_plan,
        "default_copy",
        lambda target, problem, cfg: "tma" if wgmma_plan.tma_refusal(target, problem, cfg) is None else None,
    )
    res = codegen_module(_source("gpt2_block", "f16"), "sm_90a", require_matmul=False)
    tma = {e.name.split("dispatch_")[1]: e for e in res.taken if e.facts.config and e.facts.config.copy == "tma"}
    assert {"2", "9", "11"} <= set(tma), sorted(tma)
    offsets = [b.offset for k in ("2", "9") for b in (tma[k].facts.problem.a, tma[k].facts.problem.b)]
    assert any(offsets), offsets
    for key in ("2", "9", "11"):
        for c in check_executable(tma[key], seed=7, sample=2):
            assert c.passed, c.line()
            assert not c.stats.races


# ---- mutations the executor must catch -------------------------------------------------------------


def _mutant_text(stages, attr, value, k=320, n=128):
    return mutant(TmaRing, attr, value, matmul_module(128, n, k, "f16"), overrides=_over(n, stages=stages)).text


def _run(text):
    return check_matmul(parse_module(text, new_context()), exact=True)


@pytest.mark.parametrize("stages", [2, 4])
def test_wrong_parity_is_caught(stages):
    # the wait for parity 1 of a fresh mbarrier returns at once: the wgmma reads bytes in flight
    with pytest.raises(ExecutorError, match="wgmma.mma_async reads element .* while an async copy to it is in flight"):
        _run(_mutant_text(stages, "_flip_parity", True))


@pytest.mark.parametrize(
    "stages,match",
    [
        (2, "can never complete: 17 of 17 arrivals missing"),  # slot 1 is not armed before tile 1's copy
        (4, "in flight"),  # slot 1 holds tile 1 (copied ahead); tile 0 is still in flight when read
    ],
)
def test_waiting_on_the_wrong_slot_is_caught(stages, match):
    with pytest.raises(ExecutorError, match=match):
        _run(_mutant_text(stages, "_wait_slot_skew", 1))


def test_no_wait_is_caught():
    with pytest.raises(ExecutorError, match="in flight"):
        _run(_mutant_text(3, "_skip_wait", True))


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_refilling_a_slot_a_wgmma_reads_is_caught(stages):
    with pytest.raises(
        ExecutorError, match="bulk tensor copy is issued into shared-memory byte .* that a wgmma.mma_async still reads"
    ):
        _run(_mutant_text(stages, "_dst_slot_skew", 1))


def test_using_a_map_without_acquire_is_caught():
    with pytest.raises(ExecutorError, match="no fence.proxy.tensormap acquire"):
        _run(_mutant_text(4, "_skip_acquire", True, k=128))


def test_the_swizzle_is_what_the_wgmma_reads(monkeypatch):
    """The executor's TMA image without the 128B swizzle gives wrong numbers (the passing cases
    above do not pass by symmetry: wgmma reads the swizzled layout, from the ISA model)."""
    from mmaflow.runtime.executor import tma as executor_tma

    text = handed_back(matmul_module(128, 128, 128, "f16"), "sm_90a", tuple(sorted(_over(128).items())))
    assert _run(text).check.passed
    monkeypatch.setattr(executor_tma, "swizzle_128b", lambda a: a)
    assert not _run(text).check.passed


# ---- plan, refusals ------------------------------------------------------------------------------------


def test_plan_and_defaults():
    p = Contraction(m=4096, n=4096, k=4096, batch=1, a_type="f16", b_type="f16", c_type="f32")
    cfg, _ = resolve(SM90, p, {"intrinsic": _wg(256)})
    assert cfg.copy is None  # whole tiles: cp.async (wgmma.plan.default_copy; TMA where tiles overhang)
    cfg, _ = resolve(SM90, p, {"intrinsic": _wg(256), "copy": "tma"})
    assert cfg.copy == "tma" and cfg.stages == 4
    cfg, _ = resolve(SM90, p, {"copy": "tma"})  # copy alone: the heuristic's wgmma config, with TMA
    assert cfg.copy == "tma" and cfg.intrinsic.startswith("WGMMA")
    from mmaflow.compiler.kernels.wgmma.plan import plan_bytes

    small = resolve(SM90, p, {"intrinsic": _wg(64), "tile_m": 64, "stages": 2, "copy": "tma"})[0]
    assert plan_bytes(small, "f16") == ONE_BLOCK_PER_SM  # padded: one block per SM (the per-SM map slots)
    assert 2 * (ONE_BLOCK_PER_SM + 1024) > 228 * 1024


def test_refusals():
    p = Contraction(m=256, n=256, k=256, batch=1, a_type="f16", b_type="f16", c_type="f32")
    with pytest.raises(ConfigError, match="copy=tma feeds a ring of 2 to 8 slots"):
        resolve(SM90, p, {"intrinsic": _wg(128), "stages": 1, "copy": "tma"})
    with pytest.raises(ConfigError, match="TMA copies feed the warpgroup-MMA kernel only"):
        resolve(SM90, p, {"intrinsic": "MMA_SYNC_F32_16x8x16_F16", "copy": "tma"})
    with pytest.raises(ConfigError, match="copy=ldg: the copies are one of cp.async, tma"):
        from mmaflow.compiler.core.config import parse_overrides

        parse_overrides(["copy=ldg"])
    with pytest.raises(MmaflowError, match="A sits at byte offset 8 of its binding; a tensor map's global address"):
        from dataclasses import replace

        from mmaflow.compiler.core.problem import Binding

        resolve(SM90, replace(p, a=Binding(0, 8)), {"intrinsic": _wg(128), "copy": "tma"})


def test_plan_is_printed():
    text = handed_back(matmul_module(256, 256, 256, "f16"), "sm_90a", tuple(sorted(_over(128).items())))
    assert "nvvm.cp.async.bulk.tensor.shared.cluster.global" in text and "mmaflow_tma_maps" in text


# ---- lowering ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("t,n,stages,tb", [("f16", 256, 4, False), ("bf16", 128, 3, True), ("f16", 128, 2, False)])
def test_lowers_to_tma_ptx_verifies_and_ptxas_keeps_it(tmp_path, t, n, stages, tb):
    res = compile_module(
        matmul_module(256, 256, 1024, t, transpose_b=tb),
        "sm_90a",
        options=CodegenOptions(overrides=_over(n, t, stages=stages)),
    )  # verify=True: check_isa
    (ptx,) = res.isa_text.values()
    assert ".target sm_90a" in ptx and ".version 8.3" in ptx
    assert re.search(r"^\.global \.align 128 \.b8 mmaflow_tma_maps\[\d+\];", ptx, re.M)
    for needle in (
        "tensormap.replace.tile.global_address.shared::cta.b1024.b64",
        "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32",
        "tensormap.cp_fenceproxy.global",
        "fence.proxy.tensormap::generic.acquire.gpu",
        "mbarrier.init.shared.b64",
        "fence.mbarrier_init.release.cluster",
        "mbarrier.arrive.expect_tx.shared.b64",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared.b64",
        "%smid",
        f"wgmma.mma_async.sync.aligned.m64n{n}k16",
        "wgmma.wait_group.sync.aligned",
    ):
        assert needle in ptx, needle
    assert not re.search(r"^\s*cp\.async\.(ca|cg)\.", ptx, re.M)  # no per-thread cp.async
    assert "fence.proxy.async" not in ptx  # TMA and wgmma share the async proxy
    assert "ld.local" not in ptx and "st.local" not in ptx
    out = sm90a_ptxas(tmp_path, ptx)
    assert "serialized" not in out.lower(), out


# ---- copy=tma-wide: MN-major tiles with K-atoms fastest (one box per 64-column atom) -----------------


@pytest.mark.parametrize("bits,swizzle", [(16, "B128"), (16, "B64"), (16, "NONE"), (8, "B128")])
@pytest.mark.parametrize("major", ["K", "MN"])
def test_k_atoms_fastest_descriptors_address_the_tile(major, swizzle, bits):
    """As test_smem_layout's agreement test, for the K-atoms-fastest order: the ISA model reads
    every instruction operand through the compiler's descriptor (LBO/SBO swapped in magnitude)
    exactly where the tile stored it; and the tile is a bijection."""
    import itertools

    import numpy as np

    from mmaflow.compiler.target.smem_layout import Major, SmemLayout, Swizzle
    from mmaflow.runtime.isa.smem_matrix import decode_descriptor, operand_address

    major, swizzle = Major[major], Swizzle[swizzle]
    if major is Major.MN and bits != 16:
        pytest.skip("MN-major operands are 16-bit")
    inst_mn, inst_k = 64, 256 // bits
    tile = SmemLayout(major, swizzle, bits, 2 * inst_mn, 4 * inst_k, k_atoms_fastest=True)
    assert sorted(tile.offset(i, j) for i in range(tile.mn) for j in range(tile.k)) == list(
        range(0, tile.bytes, bits // 8)
    )
    base = 3 * 1024
    mn, k = np.meshgrid(np.arange(inst_mn), np.arange(inst_k), indexing="ij")
    stored = np.array([[tile.offset(i, j) for j in range(tile.k)] for i in range(tile.mn)]) + base
    for mn0, k0 in itertools.product(range(0, tile.mn, inst_mn), range(0, tile.k, inst_k)):
        d = tile.descriptor(base, mn0, k0, inst_mn, inst_k)
        got = operand_address(decode_descriptor(d.encode()), k_major=major is Major.K, element_bits=bits, mn=mn, k=k)
        np.testing.assert_array_equal(got, stored[mn0 : mn0 + inst_mn, k0 : k0 + inst_k])


@pytest.mark.parametrize(
    "m,n,k,t,wn,tile_m,stages,ta,tb",
    [
        (256, 256, 512, "f16", 256, 128, 4, False, False),  # B: 4 boxes of 64x64 per K tile
        (200, 136, 104, "bf16", 128, 128, 3, False, False),  # partial M, N, K
        (136, 120, 72, "f16", 128, 128, 2, True, False),  # A^T: 2 boxes of 64x64, warpgroup 1's A one atom column on
        (64, 128, 448, "f16", 128, 64, 4, True, True),
    ],
    ids=["n256", "partial-bf16", "At", "m64-AtBt"],
)
def test_tma_wide_matches_numpy(m, n, k, t, wn, tile_m, stages, ta, tb):
    over = {"intrinsic": _wg(wn, t), "copy": "tma-wide", "tile_m": tile_m, "stages": stages}
    r = _sim(matmul_module(m, n, k, t, transpose_a=ta, transpose_b=tb), over, True)
    assert r.check.passed, r.check.detail
    assert not r.stats.races


def test_tma_wide_lowers_with_few_boxes(tmp_path):
    from mmaflow.compiler.report import ptxas_path

    res = compile_module(
        matmul_module(256, 256, 1024, "f16"),
        "sm_90a",
        options=CodegenOptions(overrides={"intrinsic": _wg(256), "copy": "tma-wide"}),
    )
    (ptx,) = res.isa_text.values()
    assert "cp.async.bulk.tensor.2d" in ptx and not re.search(r"^\s*cp\.async\.(ca|cg)\.", ptx, re.M)
    assert "ld.local" not in ptx and "st.local" not in ptx
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    r = subprocess.run(
        [ptxas_path(), "-arch=sm_90a", "-v", str(src), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True
    )
    assert r.returncode == 0 and "0 bytes spill stores" in r.stdout + r.stderr, r.stdout + r.stderr
    text = handed_back(
        matmul_module(256, 256, 256, "f16"),
        "sm_90a",
        tuple(sorted({"intrinsic": _wg(256), "copy": "tma-wide"}.items())),
    )
    assert "mmaflow_tma_maps" in text


# ---- the executor against the H200: the TMA probe (e2e_tests/data/tma_probe.py) ----------------


def _probe(variant):
    import sys
    from pathlib import Path

    import numpy as np

    inputs = str(Path(__file__).parent / "data")
    sys.path.insert(0, inputs)
    try:
        import tma_probe as gen
        from tma_probe_expected import expected_image
    finally:
        sys.path.remove(inputs)
    from mmaflow.runtime.simulate import load_dispatch, run_dispatch

    mod = parse_module(str(gen.probe_module(variant)), new_context())
    d = load_dispatch(mod)
    for op in list(d.func.regions[0].blocks[0].operations):  # the replaced body's dead tensor constants
        if op.operation.name == "arith.constant" and "tensor<" in str(op.operation.results[0].type):
            op.operation.erase()
    x = np.random.default_rng(90).standard_normal((256, 256)).astype(np.float16)
    # IREE packs the two outputs: maps (binding 2) at byte 8192
    bufs = {0: x.copy(), 1: np.zeros(1024, np.int64), 2: np.zeros(1024 + 56, np.int64)}
    run_dispatch(d, bufs)
    return bufs, expected_image(x, gen.COORD[1], gen.COORD[0]), gen


def test_executor_reproduces_the_h200_probe_image():
    """The probe's zero-cpfp kernel (a map built from zero bytes, tensormap.cp_fenceproxy, one 64x64
    box at (64, 128) with the 128B swizzle) passed on the H200; on the executor it gives the same
    8192 bytes (the run script's numpy image) after one try_wait."""
    bufs, want, gen = _probe("zero-cpfp")
    assert (bufs[1].view("uint8") == want).all()
    assert bufs[2][1024 + gen.STATUS] == 1


def test_executor_refuses_a_map_copied_by_plain_stores():
    """The probe's `zero` variant copies the map's bytes with st.global and publishes them with
    fence.proxy.tensormap::generic.release: the executor keeps maps as records (the 128-byte encoding
    is opaque) and follows only cp_fenceproxy's copy, so it refuses that release, loudly."""
    with pytest.raises(ExecutorError, match="does not support nvvm.fence.proxy.release"):
        _probe("zero")
