"""The measured tuning table (compiler/target/tuning.py), the registry's use of it (registry.choose),
what compile and report say about it, and `mmaflow tune`'s halves (runtime/tune.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mmaflow.compiler.core.errors import ToolchainError
from mmaflow.compiler.core.problem import Contraction, DynamicDim
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.target import tuning
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime import tune

SM90, SM80 = get_target("sm_90a"), get_target("sm_80")
LINEAR = dict(a_type="f16", b_type="f16", c_type="f32", b_transposed=True)  # nn.Linear: B stored N x K


def _problem(m, n, k, **kw) -> Contraction:
    return Contraction(m, n, k, 1, **{**LINEAR, **kw})


def _entry(cls: tuning.ShapeClass, config: dict, us=10.0, heuristic_us=20.0) -> tuning.Entry:
    run = "NVIDIA H200, mmaflow tune at abc1234, test"
    return tuning.Entry(cls, config, (1, cls.m, cls.n, cls.k), us, heuristic_us, "heuristic cfg", "chosen cfg", 9, run)


def _table(target: str, *entries) -> tuning.Table:
    return tuning.Table(target, "NVIDIA H200", True, "mmaflow tune at abc1234, test", "mmaflow tune ...", entries)


@pytest.fixture
def table_dir(tmp_path, monkeypatch):
    """Tables read from tmp_path instead of the shipped ones (the cache cleared around the test)."""
    monkeypatch.setattr(tuning, "TABLE_DIR", tmp_path)
    tuning.table.cache_clear()
    yield tmp_path
    tuning.table.cache_clear()


def _install(table_dir, table: tuning.Table) -> None:
    (table_dir / f"{table.target}.json").write_text(json.dumps(table.to_dict()))
    tuning.table.cache_clear()


# ---- shape classes ----------------------------------------------------------------------------


def test_buckets_are_powers_of_two_upper_bounds():
    assert [tuning.bucket(x) for x in (1, 2, 3, 64, 65, 128, 129, 14336, 128256)] == [
        1,
        2,
        4,
        64,
        128,
        128,
        256,
        16384,
        131072,
    ]


def test_a_class_holds_the_bucket_and_separates_types_layouts_and_batches():
    c = tuning.shape_class(_problem(128, 1024, 4096))
    assert c.key() == "f16xf16->f32 A:mk B:nk M<=128 N<=1024 K<=4096"
    assert tuning.shape_class(_problem(65, 1000, 2049)) == c  # the same buckets
    assert tuning.shape_class(_problem(129, 1024, 4096)) != c
    assert tuning.shape_class(_problem(128, 1024, 4096, b_transposed=False)).b == "kn"
    assert tuning.shape_class(_problem(128, 1024, 4096, a_type="bf16", b_type="bf16")) != c
    batched = Contraction(128, 1024, 4096, 8, batched=True, **LINEAR)
    assert tuning.shape_class(batched).batched and tuning.shape_class(batched) != c
    dyn = Contraction(None, 1024, 4096, 1, dynamic=(DynamicDim("m", (0,), ((0, -1),)),), **LINEAR)
    assert tuning.shape_class(dyn) is None


def test_a_table_round_trips_and_refuses_malformed_files(table_dir):
    cls = tuning.shape_class(_problem(128, 1024, 4096))
    t = _table("sm_90a", _entry(cls, {"tile_m": 64}))
    assert tuning.Table.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    bad = [
        {**t.to_dict(), "format": 99},
        {**t.to_dict(), "entries": t.to_dict()["entries"] * 2},
        {**t.to_dict(), "provenance": "two\nlines"},
        {**t.to_dict(), "entries": [{**t.to_dict()["entries"][0], "run": ""}]},
    ]
    for b in bad:
        with pytest.raises(ValueError):
            tuning.Table.from_dict(b)
    (table_dir / "sm_90a.json").write_text("{not json")
    with pytest.raises(ToolchainError, match="does not read"):
        tuning.table("sm_90a")
    tuning.table.cache_clear()
    _install(table_dir, _table("sm_80", _entry(cls, {})))
    (table_dir / "sm_90a.json").write_text((table_dir / "sm_80.json").read_text())
    with pytest.raises(ToolchainError, match="is for sm_80"):
        tuning.table("sm_90a")


# ---- the registry consults it -----------------------------------------------------------------


def test_an_entry_configures_its_class_and_says_so(table_dir):
    p = _problem(128, 1024, 4096)
    heuristic, _ = registry.resolve(SM90, p)
    over = {"intrinsic": "WGMMA_F32_64x128x16_F16", "tile_m": 64}
    _install(table_dir, _table("sm_90a", _entry(tuning.shape_class(p), over)))
    for q in (p, _problem(100, 1000, 3000)):  # the measured shape and another of its class
        cfg, intr, source = registry.choose(SM90, q)
        assert (cfg.intrinsic, cfg.tile_m, cfg.tile_n, cfg.split_k) == ("WGMMA_F32_64x128x16_F16", 64, 128, 1)
        assert (cfg.tile_n, cfg.split_k) != (heuristic.tile_n, heuristic.split_k)
        assert source.startswith("tuning table sm_90a (NVIDIA H200, mmaflow tune at abc1234")
        assert "entry f16xf16->f32 A:mk B:nk M<=128 N<=1024 K<=4096" in source and "2.00x" in source
    why = registry.explain(SM90, p)
    assert why[0].startswith("chosen by tuning table sm_90a") and any("WGMMA_F32_64x128x16_F16" in w for w in why)
    # outside the class, under --config, or dynamic: the heuristic, and the source says why
    assert registry.choose(SM90, _problem(129, 1024, 4096))[2].startswith("the heuristic (tuning table sm_90a has no")
    cfg, _, source = registry.choose(SM90, p, {"stages": 3})
    assert source.startswith("--config") and cfg.stages == 3 and cfg.split_k == 1
    dyn = Contraction(None, 1024, 4096, 1, dynamic=(DynamicDim("m", (0,), ((0, -1),)),), **LINEAR)
    assert "dynamic sizes" in registry.choose(SM90, dyn.estimate())[2]
    assert registry.choose(SM80, p)[2] == "the heuristic (no tuning table for sm_80)"


def test_an_entry_that_does_not_take_the_problem_gives_way_with_the_reason(table_dir):
    p = _problem(128, 1024, 4096)
    # a 128-row wgmma tile with M = 65 (same class) is fine; an instruction of the wrong type is not
    _install(table_dir, _table("sm_90a", _entry(tuning.shape_class(p), {"intrinsic": "WGMMA_F32_64x64x16_BF16"})))
    cfg, _, source = registry.choose(SM90, p)
    assert cfg == registry.resolve(SM90, p)[0]
    assert source.startswith("the heuristic: tuning table sm_90a") and "does not take" in source


def test_an_entry_of_the_heuristic_keeps_its_config(table_dir):
    p = _problem(2048, 4096, 4096)
    _install(table_dir, _table("sm_90a", _entry(tuning.shape_class(p), {}, us=10.0, heuristic_us=10.0)))
    cfg, _, source = registry.choose(SM90, p)
    assert cfg == registry.resolve(SM90, p)[0]
    assert "the heuristic's config measured fastest of 9" in source


def test_a_persistent_entry_keeps_its_workgroups_at_another_batch(table_dir):
    """Tiles per workgroup measured at one batch of a class (3 at 24 x 16 tiles: 128 workgroups)
    would leave most SMs idle at a smaller batch, or not divide its tiles at all; the entry is
    fitted to the measured workgroup count before it is validated, and the source says how."""
    shape = dict(a_type="f16", b_type="f16", c_type="f32", b_transposed=True, batched=True)
    measured = Contraction(512, 512, 128, 24, **shape)
    over = {"intrinsic": "WGMMA_F32_64x128x16_F16", "tile_m": 128, "copy": "tma-wide", "producer": 1, "persistent": 3}
    e = tuning.Entry(tuning.shape_class(measured), over, (24, 512, 512, 128), 10.0, 12.0, "h", "c", 9, "run")
    _install(table_dir, _table("sm_90a", e))
    cfg, _, source = registry.choose(SM90, measured)
    assert cfg.persistent == 3 and "fitted" not in source
    one = "one tile per workgroup: no whole number of the {} tiles a workgroup keeps 128 workgroups or 3/4 of them"
    for batch, fitted, said in (
        (8, None, "128 tiles: one tile per workgroup (128 workgroups)"),
        (16, 2, "256 tiles: 128 workgroups of 2 tiles"),  # (3 does not divide 256: refused unfitted)
        (13, 2, "208 tiles: 104 workgroups of 2 tiles"),
        (10, None, "160 tiles: " + one.format(160)),  # (80 workgroups of 2: under 3/4 of 128)
        (41, None, "656 tiles: " + one.format(656)),  # (neither 6 nor 7 divides 656; 8 leaves 82)
        (64, 8, "1024 tiles: 128 workgroups of 8 tiles"),
    ):
        q = Contraction(512, 512, 128, batch, **shape)
        cfg, _, source = registry.choose(SM90, q)
        assert tuning.shape_class(q) == e.cls and cfg.persistent == fitted, (batch, cfg.describe(), source)
        assert (cfg.producer, cfg.copy, cfg.tile_m) == (1, "tma-wide", 128)
        assert source.startswith("tuning table sm_90a"), source
        assert "persistent=3 measured at 384 tiles (128 workgroups) fitted to " + said in source, source
        assert said in registry.explain(SM90, q)[0]


def test_compile_logs_and_report_name_the_entry(table_dir, tmp_path):
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions
    from mmaflow.runtime.modules import matmul_module

    p = _problem(128, 1024, 4096)
    over = {"tile_m": 64, "tile_n": 64, "tile_k": 64, "waves_m": 2, "waves_n": 2, "stages": 3}
    _install(table_dir, _table("sm_80", _entry(tuning.shape_class(p), over)))
    src = matmul_module(128, 1024, 4096, "f16", "f32", transpose_b=True)
    res = compile_module(src, "sm_80", options=CodegenOptions(overrides={}), source_name="t")
    (exe,) = res.taken
    cfg = exe.facts.config
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.stages) == (64, 64, 64, 3)
    note = [line for line in res.log if "config chosen by" in line]
    assert len(note) == 1 and "tuning table sm_80" in note[0] and "tile_k=64" in note[0], res.log
    # the same module on a target without a table: the heuristic, named
    res = compile_module(src, "sm_90a", options=CodegenOptions(overrides={}), source_name="t")
    assert any("config chosen by the heuristic (no tuning table for sm_90a)" in x for x in res.log), res.log


def test_the_table_can_be_left_out_through_both_routes(table_dir):
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.driver.codegen_tool import tool_argv
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions
    from mmaflow.runtime.modules import matmul_module

    p = _problem(128, 1024, 4096)
    _install(table_dir, _table("sm_90a", _entry(tuning.shape_class(p), {"intrinsic": "WGMMA_F32_64x64x16_F16"})))
    src = matmul_module(128, 1024, 4096, "f16", "f32", transpose_b=True)
    tuned = compile_module(src, "sm_90a", options=CodegenOptions(), source_name="t").taken[0].facts.config
    plain = compile_module(src, "sm_90a", options=CodegenOptions(tuned=False), source_name="t").taken[0].facts.config
    assert tuned.intrinsic == "WGMMA_F32_64x64x16_F16" and plain == registry.resolve(SM90, p)[0] != tuned
    assert "--no-tuning-table" in tool_argv(CodegenOptions(target="sm_90a", tuned=False))
    assert "--no-tuning-table" not in tool_argv(CodegenOptions(target="sm_90a"))


# ---- the shipped tables -----------------------------------------------------------------------


def _shipped() -> list[tuning.Table]:
    tuning.table.cache_clear()
    return [t for t in (tuning.table(p.stem) for p in sorted(tuning.TABLE_DIR.glob("*.json"))) if t]


def test_every_shipped_entry_still_builds_the_config_it_measured():
    """A table is checked against the code: each entry's config, resolved for the shape it was
    measured at, is the config it timed (the plan's description); a kernel change that alters it
    makes the entry stale until `mmaflow tune` measures again."""
    tables = _shipped()
    for t in tables:
        target = get_target(t.target)
        # NVIDIA tables are timed on a GPU; AMD ones are the static choice and say so
        assert t.measured == (not target.is_amd) and t.gpu and t.command.startswith("mmaflow tune"), t.target
        if target.is_amd:
            assert t.gpu.startswith("static estimate for "), t.gpu
        for e in t.entries:
            b, m, n, k = e.shape
            p = Contraction(
                m,
                n,
                k,
                b,
                e.cls.types.split("x")[0],
                e.cls.types.split("x")[1].split("->")[0],
                e.cls.types.split("->")[1],
                a_transposed=e.cls.a == "km",
                b_transposed=e.cls.b == "nk",
                batched=e.cls.batched,
            )
            assert tuning.shape_class(p) == e.cls, e.cls.key()
            cfg, _, source = registry.choose(target, p)
            assert source.startswith(f"tuning table {t.target}"), source
            assert cfg.describe() == e.chosen, (e.cls.key(), cfg.describe(), e.chosen)


def test_warpgroup_candidates_add_the_deepest_ring_under_a_wave():
    """Under a wave of tiles (Llama-3-8B's q at M 128) each candidate but the warp-specialized one, split-K's included, is
    also tried on the deepest ring that fits (5 to MAX_STAGES slots): one more slot does not; past a
    wave (M 2048) the candidates keep the default ring."""
    from mmaflow.compiler.core.errors import ConfigError
    from mmaflow.compiler.kernels.wgmma.heuristic import tuning_candidates
    from mmaflow.compiler.kernels.wgmma.plan import MAX_STAGES, warpgroup_config

    cands = tuning_candidates(SM90, _problem(128, 4096, 4096))
    deep = [c for c in cands if "stages" in c]
    assert {c["stages"] for c in deep} == {5, 7, 8}  # 64x256, 128x128, 64x128/64x64 tiles (40, 32, 24/16 KiB slots)
    assert any("split_k" in c for c in deep) and any("split_k" not in c for c in deep)
    for c in deep:
        assert {k: v for k, v in c.items() if k != "stages"} in cands  # the same config on the 4-slot ring
        cfg = warpgroup_config(SM90, _problem(128, 4096, 4096), SM90.intrinsic(c["intrinsic"]), c)
        assert cfg.stages == c["stages"] > 4
        if c["stages"] < MAX_STAGES:
            with pytest.raises(ConfigError, match="shared memory"):
                warpgroup_config(
                    SM90, _problem(128, 4096, 4096), SM90.intrinsic(c["intrinsic"]), {**c, "stages": c["stages"] + 1}
                )
    assert not [c for c in tuning_candidates(SM90, _problem(2048, 4096, 4096)) if "stages" in c]


def test_warpgroup_candidates_fit_a_wave_with_tma_only_widths():
    """TinyLlama's 512x5632 gate: 128x192 tiles (whole 16-byte chunks for 256 copying threads) make
    120 workgroups on 132 SMs, 128x176 ones 128, which only TMA boxes copy: that width is a candidate
    of the warp-specialized kernel alone, and only where B is K-major (176 columns are not whole
    64-column swizzle atoms of an MN-major tile)."""
    from mmaflow.compiler.kernels.wgmma.heuristic import tuning_candidates

    w176 = {"intrinsic": "WGMMA_F32_64x176x16_F16", "tile_m": 128}
    nk = tuning_candidates(SM90, Contraction(512, 5632, 2048, 1, "f16", "f16", "f32", b_transposed=True))
    assert {"intrinsic": "WGMMA_F32_64x192x16_F16", "tile_m": 128} in nk
    assert [c for c in nk if {k: c.get(k) for k in w176} == w176] == [{**w176, "copy": "tma-wide", "producer": 1}]
    kn = tuning_candidates(SM90, Contraction(512, 5632, 2048, 1, "f16", "f16", "f32"))
    assert not [c for c in kn if {k: c.get(k) for k in w176} == w176]


# ---- mmaflow tune: the run's split and the table --------------------------------------------


def _results(rows):
    return {
        "kind": "tune-results",
        "gpu": "NVIDIA H200",
        "commit": "abc1234",
        "suite": "llama3-8b",
        "rows_regex": None,
        "dtypes": ["f16"],
        "prepared": "2026-11-29",
        "rows": rows,
    }


def _row(target, m, n, k, times: dict, verdicts: dict | None = None):
    cls = tuning.shape_class(_problem(m, n, k))
    return {
        "name": f"x {m}x{n}x{k}",
        "target": target,
        "m": m,
        "n": n,
        "k": k,
        "batch": 0,
        "dtype": "f16",
        "b_layout": "nk",
        "class": cls.to_dict(),
        "candidates": [
            {
                "config": json.loads(c),
                "file": f"{m}_{i}.vmfb",
                "describe": f"cfg {c}",
                "us": us,
                "verdict": (verdicts or {}).get(c, "PASS"),
                "max_rel_err": 1e-7,
            }
            for i, (c, us) in enumerate(times.items())
        ],
    }


def test_the_table_keeps_the_fastest_over_a_class_and_the_heuristic_within_noise():
    h, a, b = "{}", '{"tile_m": 64}', '{"tile_m": 128}'
    rows = [
        _row("sm_90a", 128, 1024, 4096, {h: 20.0, a: 10.0, b: 12.0}),
        _row("sm_90a", 100, 1024, 4096, {h: 20.0, a: 14.0, b: 11.0}),  # same class: b's sum 23 beats a's 24
        _row("sm_90a", 2048, 4096, 4096, {h: 100.0, a: 98.5}),  # within NOISE: the heuristic's
        _row("sm_80", 128, 1024, 4096, {h: 20.0, a: 25.0}),
    ]
    t = tune.tables(_results(rows), "mmaflow tune --suite x")
    (e1, e2) = t["sm_90a"].entries
    by = {e.cls.m: e for e in (e1, e2)}
    assert by[128].config == {"tile_m": 128} and by[128].shape == (1, 128, 1024, 4096)
    assert by[128].us == 12.0 and by[128].heuristic_us == 20.0 and by[128].candidates == 3
    assert by[2048].config == {} and by[2048].chosen == by[2048].heuristic
    assert t["sm_80"].entries[0].config == {}
    assert "mmaflow tune at abc1234" in t["sm_90a"].provenance and t["sm_90a"].gpu == "NVIDIA H200"
    assert all(e.run == t["sm_90a"].provenance for e in t["sm_90a"].entries)
    # a class's rows that did not all build a candidate: only the common ones compete
    rows = [_row("sm_90a", 128, 1024, 4096, {h: 20.0, a: 5.0}), _row("sm_90a", 100, 1024, 4096, {h: 20.0, b: 9.0})]
    assert tune.tables(_results(rows), "c")["sm_90a"].entries[0].config == {}


def test_runs_whose_shapes_share_a_class_decide_it_together(table_dir, tmp_path):
    """BERT-base's 128x768x3072 and Llama-3-8B's 128x1024x4096 are one class: given together, the
    candidate with the least time summed over both suites' rows takes it, the entry names both
    runs; given one after the other, the later run replaces the class."""
    h, a, b = "{}", '{"tile_m": 64}', '{"split_k": 4}'
    llama = _results([_row("sm_90a", 128, 1024, 4096, {h: 39.0, a: 13.0, b: 9.0})])
    bert = {**_results([_row("sm_90a", 128, 768, 3072, {h: 30.0, a: 4.0, b: 9.0})]), "suite": "bert-base"}
    (e,) = tune.tables([llama, bert], "c")["sm_90a"].entries
    assert e.config == {"tile_m": 64}  # 17 against 18: b alone wins Llama's row, a the sum
    assert "suite llama3-8b" in e.run and "suite bert-base" in e.run
    paths = []
    for i, res in enumerate((llama, bert)):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(res))
    tune.write_tables(paths, "mmaflow tune --results r0.json r1.json")
    assert tuning.table("sm_90a").entries[0].config == {"tile_m": 64}
    tune.write_tables(paths[0], "mmaflow tune --results r0.json")
    assert tuning.table("sm_90a").entries[0].config == {"split_k": 4}
    with pytest.raises(ValueError, match="different GPUs"):
        tune.tables([llama, {**bert, "gpu": "NVIDIA H100"}], "c")


def test_a_run_with_a_failed_check_writes_no_table():
    rows = [_row("sm_90a", 128, 1024, 4096, {"{}": 20.0, '{"tile_m": 64}': 1.0}, {'{"tile_m": 64}': "FAIL"})]
    with pytest.raises(ValueError, match="failed their float64 check"):
        tune.tables(_results(rows), "c")


def test_write_tables_merges_into_the_table_dir(table_dir, tmp_path):
    res = tmp_path / "r.json"
    res.write_text(json.dumps(_results([_row("sm_90a", 128, 1024, 4096, {"{}": 20.0, '{"tile_m": 64}': 10.0})])))
    (path,) = tune.write_tables(res, "mmaflow tune --results r.json")
    first = tuning.table("sm_90a")
    assert path == table_dir / "sm_90a.json" and first.entries[0].config == {"tile_m": 64}
    res.write_text(json.dumps(_results([_row("sm_90a", 512, 1024, 4096, {"{}": 20.0, '{"tile_m": 128}': 10.0})])))
    tune.write_tables(res, "mmaflow tune --results r.json")
    merged = tuning.table("sm_90a")
    assert [e.cls.m for e in merged.entries] == [128, 512]  # merged: both classes, each with its run
    assert merged.provenance == merged.entries[0].run and merged.gpu == "NVIDIA H200"


def test_tune_cli_refuses_what_it_cannot_do(tmp_path):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "mmaflow.compiler.cli", "tune", *args], capture_output=True, text=True
        )

    r = cli()
    assert r.returncode != 0 and "needs --suite" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "x.json").write_text('{"kind": "suite"}')
    r = cli("--results", str(tmp_path / "x.json"))
    assert r.returncode != 0 and "not a `python -m mmaflow.runtime.tune` results file" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("--suite", "llama3-8b", "--rows", "dynM", "--target", "sm_90a", "--prepare-only", str(tmp_path / "d"))
    assert r.returncode != 0 and "no static rows" in r.stderr and "Traceback" not in r.stderr
    r = cli("--suite", "llama3-8b", "--rows", "k_proj", "--target", "gfx942", "--prepare-only", str(tmp_path / "d"))
    assert r.returncode == 2 and "chosen statically" in r.stderr and "Traceback" not in r.stderr
    # AMD is chosen statically, NVIDIA timed: one kind per call
    r = cli("--suite", "llama3-8b", "--rows", "k_proj", "--target", "gfx942,sm_90a", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "one call each kind" in r.stderr and "Traceback" not in r.stderr
    # both halves here, without a GPU: refused before any build, naming the two-machine route
    r = cli("--suite", "llama3-8b", "--rows", "k_proj", "--target", "sm_90a", "--out", str(tmp_path / "o"))
    assert r.returncode == 8 and "times kernels on a GPU" in r.stderr and "--prepare-only" in r.stderr, r.stderr
    # the run half on a directory that is not a tune build
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "manifest.json").write_text('{"kind": "suite"}')
    r = subprocess.run(
        [sys.executable, "-m", "mmaflow.runtime.tune", "--from-dir", str(tmp_path / "s"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "not a `mmaflow tune --prepare-only` directory" in r.stderr, r.stderr


@pytest.mark.exhaustive
def test_prepare_builds_the_heuristic_and_distinct_valid_candidates(tmp_path):
    m = tune.prepare(["sm_80"], "llama3-8b", ["f16"], tmp_path, r"^llama3-8b/k_proj/.* 32x1024x4096 f16 B:nk$")
    (row,) = m["rows"]
    cands = row["candidates"]
    assert cands[0]["config"] == {} and len(cands) >= 8
    # the baseline is the heuristic's config, never a table entry (the shipped sm_80 table has one here)
    heuristic = registry.resolve(SM80, Contraction(32, 1024, 4096, 1, **LINEAR))[0]
    assert cands[0]["describe"] == heuristic.describe()
    assert len({c["describe"] for c in cands}) == len(cands)  # one build per distinct config
    assert any("waves_k" in c["config"] for c in cands) and any("tile_m" in c["config"] for c in cands)
    assert all((tmp_path / c["file"]).stat().st_size > 0 for c in cands)
    # the run half splits its one ncu run at the marker module's kernel (ncu.kernel_times, test_ncu.py)
    assert m["marker"] == "marker.vmfb" and (tmp_path / "marker.vmfb").stat().st_size > 0
    assert row["class"] == tuning.shape_class(_problem(32, 1024, 4096)).to_dict()


@pytest.mark.parametrize("target,narrowest", [("sm_90a", 8), ("gfx942", 16)])
def test_decode_candidates_reach_the_narrowed_columns(target, narrowest):
    """The decode kernel's candidates include the 8 columns its small grids narrow to where the
    intrinsic's N is 8 (mma.sync), and no column count the intrinsic's N does not divide; 32 waves
    (the K loop once) where a workgroup holds them, none past the target's workgroup size; each builds."""
    from mmaflow.compiler.kernels import registry
    from mmaflow.compiler.kernels.decode.heuristic import tuning_candidates

    t, problem = get_target(target), _problem(1, 1024, 4096)
    cands = tuning_candidates(t, problem)
    assert min(c["tile_n"] for c in cands) == narrowest
    most = max(c["waves_k"] for c in cands)
    assert most == (32 if 32 * t.intrinsics()[0].wave_size <= t.max_workgroup_size else 16)
    for over in cands:
        cfg, _ = registry.resolve(t, problem, over)
        assert cfg.tile_n == over["tile_n"] and cfg.waves_k == over["waves_k"]


def test_prepare_refuses_candidates_that_spill():
    """A candidate whose PTX spills (32 waves of 32 columns at 16 x 4096 x 4096 on sm_90a: 64 registers
    a lane, 16 bytes spilled) is refused with a line; the heuristic's build stays the baseline."""
    from conftest import matmul_module

    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions
    from mmaflow.compiler.report import ptxas_path

    assert ptxas_path() is not None, "ptxas is missing: pip install -e '.[test]' installs nvidia-cuda-nvcc-cu12"
    src = matmul_module(16, 4096, 4096, transpose_b=True)
    overs = [{}, {"waves_k": 32, "tile_n": 32}, {"waves_k": 16, "tile_n": 16}]
    builds = [(o, compile_module(src, "sm_90a", options=CodegenOptions(overrides=o, tuned=False))) for o in overs]
    refused: list[str] = []
    kept = tune._without_spills(get_target("sm_90a"), builds, refused)
    assert [o for o, _ in kept] == [overs[0], overs[2]], [o for o, _ in kept]
    assert refused == ["{'waves_k': 32, 'tile_n': 32}: spills 16 bytes (ptxas)"], refused
