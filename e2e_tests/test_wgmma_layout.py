"""The warpgroup MMA records (compiler/target/intrinsics.py) against the independent ISA model, thread by
thread, and the guard that keeps them away from codegen until a stage emits wgmma.

Register operands (A in the RS form, the f32 accumulator) are checked as test_layout_model.py
checks every other instruction: each (thread, slot) of the compiler's layout names the same
(row, col) as the ISA model's transcription of the PTX fragment figures, and every element of
the operand is held exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from conftest import layout_table

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.problem import Contraction, DynamicDim
from mmaflow.compiler.kernels.matmul.heuristic import default_config
from mmaflow.compiler.kernels.registry import explain, resolve
from mmaflow.compiler.target.intrinsics import WGMMA_CATALOGUE, WGMMA_N, all_wgmma, wgmma
from mmaflow.compiler.target.targets import TARGETS, get_target
from mmaflow.runtime.isa import WGMMA, IsaError, execute_wgmma, placement


def _agree(intr, operand):
    lay = intr.operand(operand)
    isa = WGMMA[intr.isa_key]
    place = {"A": isa.a_place, "C": isa.c_place}[operand]
    slots = {"A": isa.a_slots, "C": isa.c_slots}[operand]
    assert lay.op_vector_length == slots, (intr.name, operand)
    lanes, sl, rows, cols = layout_table(lay)
    expected = np.array([place(int(t), int(s)) for t, s in zip(lanes, sl)])
    np.testing.assert_array_equal(np.stack([rows, cols], 1), expected, err_msg=f"{intr.name} {operand}")
    # every (thread, slot) of the ISA model is listed once, every element held once
    assert len(set(zip(lanes.tolist(), sl.tolist()))) == 128 * slots
    held = np.zeros((lay.rows, lay.cols), int)
    np.add.at(held, (rows, cols), 1)
    assert (held == 1).all(), f"{intr.name} {operand}: elements held {held.min()}..{held.max()} times"


@pytest.mark.parametrize("name", [i.name for i in WGMMA_CATALOGUE])
@pytest.mark.parametrize("operand", ["A", "C"])
def test_catalogue_record_agrees_with_isa_model(name, operand):
    intr = get_target("sm_90a").layout_intrinsic(name)
    assert intr.family == "wgmma" and intr.wave_size == 128
    _agree(intr, operand)


@pytest.mark.parametrize("a_type,b_type", [("f16", "f16"), ("f8E4M3FN", "f8E5M2")])
def test_every_n_agrees_with_isa_model(a_type, b_type):
    """The parameterised constructor, every legal N (8..256 step 8), A and the accumulator."""
    for n in WGMMA_N:
        intr = wgmma(n, a_type, b_type)
        assert intr.isa_key in WGMMA, intr.isa_key
        _agree(intr, "C")
    _agree(wgmma(8, a_type, b_type), "A")  # A does not depend on N


def test_every_record_exists_in_the_isa_model():
    names = [w.name for w in all_wgmma()]
    assert len(names) == len(set(names)) == 6 * 32
    assert {w.isa_key for w in all_wgmma()} == set(WGMMA)


def test_worked_example_of_the_docstring():
    intr = wgmma(128, "f16")
    assert intr.a.coords(37, 6) == (25, 10)
    assert WGMMA[intr.isa_key].a_place(37, 6) == (25, 10)


def test_swapped_thread_changes_the_product():
    """Exchange two threads' A registers (different rows): the ISA model's product changes, so
    the agreement above is not vacuous."""
    intr = wgmma(64, "f16")
    isa = WGMMA[intr.isa_key]
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (64, 16)).astype(np.float16)
    regs = np.zeros((128, 8), np.float16)
    lanes, slots, rows, cols = layout_table(intr.a)
    regs[lanes, slots] = a[rows, cols]
    smem = np.zeros(4096, np.uint8)  # B = 0 except (k, n) = (0, 0): D's column 0 = A's column 0
    smem[0:2] = np.frombuffer(np.float16(1).tobytes(), np.uint8)
    from mmaflow.runtime.isa import Descriptor, encode_descriptor

    desc = encode_descriptor(Descriptor(0, 128 * 8, 128, 0, "none"))
    c = np.zeros((128, 32), np.float32)
    good = execute_wgmma(intr.isa_key, c, desc, smem, a_regs=regs)
    regs[[0, 4]] = regs[[4, 0]]  # thread 0 holds row 0, thread 4 row 1
    bad = execute_wgmma(intr.isa_key, c, desc, smem, a_regs=regs)
    p = placement(isa, "C")
    d_good = np.zeros((64, 64), np.float32)
    d_good[p.rows, p.cols] = good[p.lanes, p.slots]
    np.testing.assert_array_equal(d_good[:, 0], a[:, 0].astype(np.float32))
    assert not np.array_equal(good, bad)


def test_constructor_refuses_what_the_isa_lacks():
    with pytest.raises(UnsupportedError, match="multiple of 8"):
        wgmma(100, "f16")
    with pytest.raises(UnsupportedError, match="f16 x f16"):
        wgmma(64, "f16", "bf16")
    with pytest.raises(UnsupportedError, match="f16 x f16"):
        wgmma(64, "i8")


def test_register_vector_shapes():
    assert (wgmma(64, "f16").a_shape, wgmma(64, "f16").c_shape) == ((4, 2), (32,))
    assert wgmma(256, "f8E4M3FN").a_shape == (4, 4)
    assert wgmma(256, "bf16").vgprs("C") == 128 and wgmma(256, "bf16").vgprs("A") == 4
    with pytest.raises(UnsupportedError, match="matrix descriptor"):
        wgmma(64, "f16").operand("B")


# ---- codegen does not see them ------------------------------------------------------------------

F16_PROBLEM = Contraction(m=4096, n=4096, k=4096, batch=1, a_type="f16", b_type="f16", c_type="f32")


def test_sm90a_heuristic_picks_wgmma_where_measured_faster_and_says_why_not_elsewhere():
    """compiler/core/config.py warpgroup_default: f16/bf16 -> f32, static, >= one 128x256 tile per two
    SMs; a smaller static grid in 64-row tiles (not batched); everything else keeps mma.sync with the
    reason in explain()."""
    t = get_target("sm_90a")
    assert all(i.family == "mma_sync" for i in t.intrinsics())  # the mma.sync catalogue is unchanged
    assert default_config(t, F16_PROBLEM).intrinsic == "MMA_SYNC_F32_16x8x16_F16"
    cfg, intr = resolve(t, F16_PROBLEM)
    assert intr.name == "WGMMA_F32_64x256x16_F16" and (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.stages) == (
        128,
        256,
        64,
        4,
    )
    assert any("the warpgroup-MMA kernel" in w for w in explain(t, F16_PROBLEM))
    bf16 = replace(F16_PROBLEM, a_type="bf16", b_type="bf16")
    assert resolve(t, bf16)[1].name == "WGMMA_F32_64x256x16_BF16"
    at_2048 = replace(F16_PROBLEM, m=2048, n=2048, k=2048)  # 128 tiles for 132 SMs: measured 503 vs 294 TFLOP/s
    assert resolve(t, at_2048)[1].family == "wgmma"
    cfg, intr = resolve(t, replace(F16_PROBLEM, m=1024, n=1024, k=1024))  # 128 64x128 tiles: 227.5 vs 170.7
    assert intr.name == "WGMMA_F32_64x128x16_F16" and (cfg.tile_m, cfg.tile_n, cfg.stages) == (64, 128, 4)
    small = replace(F16_PROBLEM, m=512, n=512, k=512)  # under one tile per two SMs, K too short to split
    cfg, intr = resolve(t, small)
    assert intr.name == "WGMMA_F32_64x64x16_F16" and (cfg.tile_m, cfg.tile_n, cfg.split_k) == (64, 64, 1)
    assert any("64 tiles for 132 SMs" in w for w in explain(t, small)), explain(t, small)
    keeps = [  # (problem, the reason explain() gives for mma.sync)
        (replace(small, batched=True), "8 tiles of 128x256 or 32 tiles of 64x128 for 132 SMs"),
        (replace(F16_PROBLEM, c_type="f16"), "takes f16/bf16 -> f32"),
        (replace(F16_PROBLEM, k=4095), "not a multiple of 8"),
    ]
    for problem, reason in keeps:
        cfg, intr = resolve(t, problem)
        assert intr.family == "mma_sync", problem
        assert any(reason in w for w in explain(t, problem)), explain(t, problem)
    overridden = resolve(t, F16_PROBLEM, {"stages": 3})  # an mma.sync config key keeps mma.sync, saying so
    assert overridden[1].family == "mma_sync" and overridden[0].stages == 3
    assert any("configures the mma.sync kernel" in w for w in explain(t, F16_PROBLEM, {"stages": 3}))
    sm80 = get_target("sm_80")
    assert resolve(sm80, F16_PROBLEM)[1].family == "mma_sync"  # no Hopper, no wgmma, no reason needed


def test_sm90a_heuristic_rasterizes_from_two_waves_of_tiles():
    """Groups of 8 tile rows where the grid holds two waves of 128x256 tiles (measured on the H200:
    8192^3 1.05x, 4096^3 1.01x); one wave or less (2048^3: 128 tiles), a dynamic size (the count is
    an estimate) and an explicit config keep IREE's order."""
    t = get_target("sm_90a")
    for n, raster in ((8192, 8), (4096, 8), (2048, 1)):
        cfg, intr = resolve(t, replace(F16_PROBLEM, m=n, n=n, k=n))
        assert intr.family == "wgmma" and cfg.raster == raster, (n, cfg)
    assert any("groups of 8 tile rows" in w for w in explain(t, F16_PROBLEM))
    dynamic = replace(F16_PROBLEM, dynamic=(DynamicDim("m", (0,), ((0, -1),), 8),))
    cfg, intr = resolve(t, dynamic)
    assert intr.family == "wgmma" and cfg.raster == 1
    assert resolve(t, F16_PROBLEM, {"intrinsic": "WGMMA_F32_64x256x16_F16"})[0].raster == 1


@pytest.mark.parametrize(
    "m,n,raster",
    [
        (512, 128256, 4),  # Llama-3's LM head at 512 tokens: 4 x 501 tiles (1134.0 -> 812.4 us on the H200)
        (512, 14336, 4),  # its gate projection: 224 tiles, under two waves (111.7 -> 101.7 us)
        (1024, 8192, 8),  # 8 tile rows, 256 tiles
        (512, 2048, 1),  # 128 tiles of 64x128: one wave, every workgroup at once; nothing to order
        (128, 128256, 1),  # one tile row: B is read once in any order
    ],
)
def test_sm90a_heuristic_walks_few_tile_rows_column_by_column(m, n, raster):
    """A grid of RASTER tile rows or fewer past one wave: workgroups column by column (``raster`` =
    all its rows), so the workgroups running together read each B tile from memory once, not once
    per tile row: an LM head's 1 GB of B outgrows the H200's L2 four times over."""
    t = get_target("sm_90a")
    problem = replace(F16_PROBLEM, m=m, n=n)
    cfg, intr = resolve(t, problem)
    assert intr.family == "wgmma" and cfg.raster == raster, cfg
    assert n < 14336 or (cfg.tile_m, cfg.tile_n) == (128, 256)
    column = [w for w in explain(t, problem) if "column by column" in w]
    assert bool(column) == (raster > 1), explain(t, problem)


def test_sm90a_heuristic_groups_a_dynamic_m_over_many_tile_columns():
    """A dynamic M (an LM head's tokens) over more than a wave of static tile columns: groups of 8
    tile rows, sized at run time (fewer rows: column by column), as the static rule at any M;
    over one wave of columns or fewer, or with N dynamic too, IREE's order."""
    t = get_target("sm_90a")
    dyn_m = (DynamicDim("m", (0,), ((0, -1),), 8),)
    head = replace(F16_PROBLEM, m=None, n=128256, dynamic=dyn_m)
    cfg, intr = resolve(t, head)
    assert intr.family == "wgmma" and cfg.raster == 8, cfg
    assert any("M is dynamic" in w for w in explain(t, head)), explain(t, head)
    assert resolve(t, replace(head, n=4096))[0].raster == 1
    dyn_mn = dyn_m + (DynamicDim("n", (1,), ((1, -1),), 8),)
    assert resolve(t, replace(head, n=None, dynamic=dyn_mn))[0].raster == 1


def test_mma_sync_walks_few_tile_rows_column_by_column():
    """The mma.sync kernel too (its grouping rule: 8+ tiles per SM): Llama-3's LM head at 512 tokens
    on sm_80 in 128x256 tiles, 4 tile rows (1321.7 -> 1248.6 us on the H200); 4096^3 (3.9 tiles per
    SM) keeps IREE's order."""
    problem = replace(F16_PROBLEM, m=512, n=128256)
    cfg = default_config(get_target("sm_80"), problem, 32)
    assert (cfg.tile_m, cfg.tile_n, cfg.raster) == (128, 256, 4)
    assert default_config(get_target("sm_80"), F16_PROBLEM, 32).raster == 1


def test_asking_for_wgmma_by_name():
    t = get_target("sm_90a")
    cfg, intr = resolve(t, F16_PROBLEM, {"intrinsic": "WGMMA_F32_64x128x16_F16"})  # e2e_tests/test_wgmma_kernel.py
    assert intr.family == "wgmma" and (cfg.tile_m, cfg.tile_n, cfg.tile_k) == (128, 128, 64)
    assert t.intrinsic("WGMMA_F32_64x96x16_BF16").n == 96  # any N, not only the listed ones
    assert t.intrinsic("WGMMA_F32_64x128x32_F8E4M3FN").k == 32  # fp8: e2e_tests/test_wgmma_fp8.py
    with pytest.raises(UnsupportedError, match="has no intrinsic"):  # no Hopper, no wgmma
        get_target("sm_80").intrinsic("WGMMA_F32_64x128x16_F16")


def test_only_sm90a_lists_warpgroup_mma():
    assert {t.name for t in TARGETS.values() if t.warpgroup_intrinsics()} == {"sm_90a"}
    assert get_target("sm_90a").warpgroup_intrinsics() == WGMMA_CATALOGUE


def test_layout_cli_lists_and_prints_wgmma():
    def run(*a):
        cmd = [sys.executable, "-m", "mmaflow.compiler.cli", "layout", *a]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    listing = json.loads(run("sm_90a", "--json"))
    assert all(i["wave_size"] == 32 for i in listing["intrinsics"])
    wg = {i["name"]: i for i in listing["warpgroup_intrinsics"]}
    assert set(wg) == {i.name for i in WGMMA_CATALOGUE}
    assert wg["WGMMA_F32_64x128x16_F16"]["codegen"] is False
    assert wg["WGMMA_F32_64x128x32_F8E4M3FN"]["shared_majors"] == ["K"]
    # per-operand JSON: the accumulator's elements agree with the ISA model's placement
    name = "WGMMA_F32_64x64x16_BF16"
    data = json.loads(run("sm_90a", "--intrinsic", name, "--operand", "C", "--json"))
    isa = WGMMA[get_target("sm_90a").layout_intrinsic(name).isa_key]
    assert len(data["elements"]) == 128 * 32
    for e in data["elements"]:
        assert isa.c_place(e["lane"], e["index"]) == (e["row"], e["col"]), e
    b = json.loads(run("sm_90a", "--intrinsic", name, "--operand", "B", "--json"))
    assert b["shared_memory"] is True
    assert {(x["major"], x["swizzle"]) for x in b["layouts"]} == {
        (m, s) for m in ("K", "MN") for s in ("none", "32B", "64B", "128B")
    }


def test_isa_model_refuses_misuse():
    key = wgmma(64, "f8E4M3FN").isa_key
    c = np.zeros((128, 32), np.float32)
    smem = np.zeros(1 << 14, np.uint8)
    with pytest.raises(IsaError, match="f16/.bf16"):
        execute_wgmma(key, c, 0, smem, a_desc=0, trans_b=True)
    with pytest.raises(IsaError, match="exactly one"):
        execute_wgmma(key, c, 0, smem)
    with pytest.raises(IsaError, match="not held in registers"):
        placement(WGMMA[key], "B")
