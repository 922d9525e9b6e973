"""AMD's tuning tables, the static choice (runtime/static_cost.py, runtime/tune.py ``static``): the
cost model's terms against figures worked by hand, and a static run end to end -- every candidate
checked on the lane executor, a failing one refused, the table written unmeasured and consulted."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from mmaflow.compiler.core.errors import MmaflowError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.target import tuning
from mmaflow.compiler.target.chips import CHIPS, LDS_LATENCY_CYCLES, chip
from mmaflow.compiler.target.targets import TARGETS, get_target
from mmaflow.runtime import simulate, tune
from mmaflow.runtime.executor.core import Stats
from mmaflow.runtime.static_cost import counters_of, estimate

MI300X = chip("gfx942")
FLOPS = 2 * 16 * 16 * 16  # one MFMA_F32_16x16x16_F16


def _est(part=MI300X, **kw):
    base = dict(
        a_type="f16",
        out_bits=32,
        m=256,
        n=256,
        k=256,
        batch=1,
        flops_per_matrix_op=FLOPS,
        wave_size=64,
        waves_per_workgroup=4,
        waves_per_simd=2,
        lds_bytes=16384,
        behind_lds_wait=0,
        k_iterations=128,
        workgroups=304,
        counters={"matrix_ops": 1000.0, "lds_cycles": 100.0, "global_load_bytes": 64.0},
    )
    return estimate(part, **(base | kw))


def test_every_amd_target_has_a_reference_part_with_its_provenance():
    assert {t.name for t in TARGETS.values() if t.is_amd} == set(CHIPS)
    for name, c in CHIPS.items():
        assert c.units > 0 and c.hbm_tbs > 0 and c.clock_ghz > 0 and "KnownTargets.cpp" in c.source, name
        assert c.peak_flops("f16") == c.tflops["f16"] * 1e12 and c.peak_flops("bf16") == c.peak_flops("f16")
    with pytest.raises(KeyError, match="no matrix rate for f64"):
        chip("gfx1100").peak_flops("f64")
    with pytest.raises(KeyError, match="no reference part for sm_90a"):
        chip("sm_90a")


def test_the_matrix_term_is_the_busiest_units_flops_at_its_share_of_the_peak():
    one = _est()
    per_unit_peak = 1307.4e12 / 304
    assert one.bound == "matrix" and one.parts["per_unit"] == 1
    assert one.us == pytest.approx(1000 * FLOPS / per_unit_peak * 1e6, rel=1e-3)
    # one workgroup more than units: the busiest unit runs two (wave quantization), in one round
    two = _est(workgroups=305)
    assert two.parts["per_unit"] == 2 and two.parts["resident"] == 2 and two.us == pytest.approx(2 * one.us, rel=1e-3)
    # a one-wave workgroup alone on its unit fills one of four SIMDs
    assert _est(waves_per_workgroup=1).us == pytest.approx(4 * one.us, rel=1e-3)


def test_the_matrix_term_from_the_instructions_cycles():
    """With a cycle count (CDNA), the matrix term is instructions x cycles / (4 SIMDs x clock): for
    gfx942's 16x16x16 f16 (16 cycles) the peak-based figure to the digit; on gfx950 the CDNA3-shaped
    16x16x16 f16 takes twice as long per FLOP as its 16x16x32 (both 16 cycles), which the peak-based
    term cannot tell apart."""
    by_peak, by_cycles = _est(), _est(cycles_per_matrix_op=16)
    assert by_cycles.us == pytest.approx(by_peak.us, rel=2e-3)  # MI300X: 2.1 GHz, 304 CUs, 1307.4 TF
    gfx950 = get_target("gfx950")
    narrow, wide = gfx950.intrinsic("MFMA_F32_16x16x16_F16"), gfx950.intrinsic("MFMA_F32_16x16x32_F16")
    assert (narrow.cycles, wide.cycles) == (16, 16) and gfx950.intrinsics()[0] is wide  # the default
    mi355x = chip("gfx950")

    def on_950(intr, ops):
        return _est(
            mi355x,
            flops_per_matrix_op=2 * 16 * 16 * intr.k,
            cycles_per_matrix_op=intr.cycles,
            workgroups=256,
            counters={"matrix_ops": ops, "lds_cycles": 100.0, "global_load_bytes": 64.0},
        )

    # the same FLOPs: 2000 narrow instructions or 1000 wide ones
    assert on_950(narrow, 2000.0).parts["matrix"] == pytest.approx(2 * on_950(wide, 1000.0).parts["matrix"], rel=1e-3)
    assert on_950(wide, 1000.0).parts["matrix"] == pytest.approx(1000 * 16 / (4 * 2.4e9) * 1e6, rel=1e-3)


def test_lds_l2_and_hbm_terms_and_occupancy():
    clock = MI300X.clock_ghz * 1e9
    lds = _est(counters={"matrix_ops": 1.0, "lds_cycles": 21000.0, "global_load_bytes": 0.0})
    assert lds.bound == "lds" and lds.us == pytest.approx(21000 / clock * 1e6, rel=1e-3)
    l2 = _est(counters={"matrix_ops": 1.0, "lds_cycles": 0.0, "global_load_bytes": 64.0 * 21000})
    assert l2.bound == "l2" and l2.us == pytest.approx(21000 / clock * 1e6, rel=1e-3)
    hbm = _est(m=4096, n=4096, k=4096, counters={"matrix_ops": 1.0, "lds_cycles": 0.0, "global_load_bytes": 0.0})
    unique = (4096 * 4096 * 2 * 2 + 4096 * 4096 * 4) / 5.3e12
    assert hbm.bound == "hbm" and hbm.us == pytest.approx(unique * 1e6, rel=1e-3)
    # residency: the LDS one workgroup takes, then the registers (waves per SIMD), bound it
    assert _est(workgroups=304 * 8, lds_bytes=MI300X.lds_bytes).parts["resident"] == 1
    assert _est(workgroups=304 * 8, lds_bytes=MI300X.lds_bytes // 3).parts["resident"] == 2
    assert _est(workgroups=304 * 8, lds_bytes=1024, waves_per_simd=1).parts["resident"] == 1


def test_matrix_instructions_behind_lds_waits_cost_latency_that_other_waves_hide():
    alone = _est(behind_lds_wait=2)
    exposed = 128 * 2 * LDS_LATENCY_CYCLES / (MI300X.clock_ghz * 1e9) * 1e6
    assert alone.parts["exposed"] == pytest.approx(exposed, rel=1e-3)
    assert alone.us == pytest.approx(_est().us + exposed, rel=1e-3)
    # two resident 4-wave workgroups: two waves per SIMD halve what shows
    shared = _est(behind_lds_wait=2, workgroups=608, waves_per_simd=2)
    assert shared.parts["resident"] == 2 and shared.parts["exposed"] == pytest.approx(exposed / 2, rel=1e-3)


def test_counters_are_per_workgroup():
    st = Stats(matrix_ops=40, lds_cycles=800, global_loads=Counter({16: 10, 4: 5}))
    assert counters_of(st, 2, 64) == {"matrix_ops": 20, "lds_cycles": 400, "global_load_bytes": (160 + 20) * 64 / 2}


@pytest.fixture
def table_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "TABLE_DIR", tmp_path / "tuned")
    tuning.table.cache_clear()
    yield tmp_path / "tuned"
    tuning.table.cache_clear()


ROW = r"^gpt2/o_proj/decode 1x768x768 f16 B:kn$"  # the matmul family: 5 builds, each a few K tiles


@pytest.mark.exhaustive
def test_a_static_run_checks_every_candidate_and_writes_an_unmeasured_table(table_dir, tmp_path, monkeypatch):
    real = simulate.check_matmul

    def one_wrong(module, **kw):  # the 64x128x32 candidate computes a wrong tile
        r = real(module, **kw)
        assert kw["workgroups"] == [0]  # the counters are workgroup 0's: a full tile
        if (r.config.tile_m, r.config.tile_n, r.config.tile_k) == (64, 128, 32):
            r.check = replace(r.check, passed=False, detail="wrong")
        return r

    monkeypatch.setattr(simulate, "check_matmul", one_wrong)
    res = tune.static(["gfx942"], "gpt2", ["f16"], ROW, tmp_path / "out")
    (row,) = res["rows"]
    cands = row["candidates"]
    target = get_target("gfx942")
    p = Contraction(1, 768, 768, 1, "f16", "f16", "f32")
    heuristic = registry.resolve(target, p)[0]
    assert cands[0]["config"] == {} and cands[0]["describe"] == heuristic.describe()
    assert len(cands) == 4 and all(c["verdict"].startswith("PASS") and c["us"] > 0 for c in cands)
    assert heuristic.tile_m != 64 and {"tile_m": 64, "tile_n": 128, "tile_k": 32} not in [
        {k: c["config"].get(k) for k in ("tile_m", "tile_n", "tile_k")} for c in cands
    ]
    assert any("FAIL on the executor" in r and "'tile_k': 32" in r and "'tile_n': 128" in r for r in row["refused"])
    assert json.loads((tmp_path / "out" / tune.STATIC_RESULTS).read_text())["rows"] == res["rows"]
    (path,) = tune.write_static(res, "mmaflow tune --suite gpt2 --target gfx942")
    t = tuning.table("gfx942")
    assert path.parent == table_dir and not t.measured and t.gpu == "static estimate for MI300X"
    (e,) = t.entries
    best = min(cands, key=lambda c: c["us"])
    want = best["config"] if best["us"] < (1 - tune.STATIC_MARGIN) * cands[0]["us"] else {}
    assert e.config == want and e.cls == tuning.shape_class(p)
    cfg, _, source = registry.choose(target, p)
    assert source.startswith("tuning table gfx942 (static estimate for MI300X, mmaflow tune at ")
    assert "estimated (unmeasured)" in source and cfg.describe() == e.chosen
    # a measured table and a static one never merge
    bad = tuning.Table("gfx942", "AMD MI300X", True, "x", "x", t.entries)
    with pytest.raises(ValueError, match="unmeasured"):
        tune._merge({"gfx942": bad}, "x")


def test_a_static_run_stops_on_a_wrong_heuristic_build(tmp_path, monkeypatch):
    real = simulate.check_matmul

    def all_wrong(module, **kw):
        r = real(module, **kw)
        r.check = replace(r.check, passed=False, detail="wrong")
        return r

    monkeypatch.setattr(simulate, "check_matmul", all_wrong)
    with pytest.raises(MmaflowError, match="the heuristic's build fails"):
        tune.static(["gfx942"], "gpt2", ["f16"], ROW, tmp_path / "out")
