"""`mmaflow bench --suite`: the model GEMM suites (runtime/suites.py) and their prepare and run halves."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from mmaflow.runtime import suites
from mmaflow.runtime.suites import MODELS, SUITES, Row, suite


def _shapes(name: str, use: str, **where) -> set[tuple]:
    """(m, n, k, batch, b_layout) of the suite's rows with this use (and these field values)."""
    return {
        (r.m, r.n, r.k, r.batch, r.b_layout)
        for r in suite(name, ("f16",))
        if use in r.uses and all(getattr(r, f) == v for f, v in where.items())
    }


def test_every_suite_row_is_a_positive_gemm_with_its_uses():
    for name in SUITES:
        rows = suite(name)
        assert rows, name
        assert len({r.key for r in rows}) == len(rows), f"{name} repeats a row"
        for r in rows:
            assert min(r.m, r.n, r.k) > 0 and r.batch >= 0 and r.dtype in suites.DTYPES, r
            assert r.b_layout in ("nk", "kn") and r.uses and all(u.count("/") == 2 for u in r.uses), r
            assert not (r.dynamic and r.batch), r  # dynamic M: the weight GEMMs only
    for md in MODELS.values():
        assert md.provenance and str(md.hidden) in md.provenance and str(md.intermediate) in md.provenance
        assert md.hidden % md.heads == 0 and md.heads % md.kv_heads == 0 and md.heads % md.tp == 0


def test_derived_shapes_match_the_configs_by_hand():
    # Llama-3-8B: hidden 4096, intermediate 14336, 8 KV heads of 128, vocab 128256, 32 heads.
    s = "llama3-8b"
    assert (2048, 14336, 4096, 0, "nk") in _shapes(s, "llama3-8b/gate_proj/prefill", dynamic=False)
    assert (2048, 14336, 4096, 0, "kn") in _shapes(s, "llama3-8b/up_proj/prefill", dynamic=True)
    assert (2048, 4096, 14336, 0, "nk") in _shapes(s, "llama3-8b/mlp_down/prefill")
    assert _shapes(s, "llama3-8b/k_proj/decode", dynamic=False, b_layout="nk") == {
        (b, 1024, 4096, 0, "nk") for b in (1, 8, 16, 32, 64)
    }
    assert (1, 128256, 4096, 0, "nk") in _shapes(s, "llama3-8b/lm_head/decode")
    assert _shapes(s, "llama3-8b/attn_scores/prefill") == {(t, t, 128, 32, "nk") for t in (128, 512, 2048, 4096)}
    assert (1, 128, 2048, 64 * 32, "kn") in _shapes(s, "llama3-8b/attn_pv/decode")
    # Llama-3-70B on one of 8 GPUs: column-parallel N / 8, row-parallel K / 8, 64 / 8 heads.
    s = "llama3-70b-tp8"
    assert (512, 1024, 8192, 0, "nk") in _shapes(s, "llama3-70b-tp8/q_proj/prefill")
    assert (512, 128, 8192, 0, "nk") in _shapes(s, "llama3-70b-tp8/v_proj/prefill")
    assert (512, 8192, 1024, 0, "nk") in _shapes(s, "llama3-70b-tp8/o_proj/prefill")
    assert (16, 3584, 8192, 0, "nk") in _shapes(s, "llama3-70b-tp8/gate_proj/decode")
    assert (16, 8192, 3584, 0, "nk") in _shapes(s, "llama3-70b-tp8/mlp_down/decode")
    assert (16, 16032, 8192, 0, "nk") in _shapes(s, "llama3-70b-tp8/lm_head/decode")
    assert (128, 128, 128, 8, "nk") in _shapes(s, "llama3-70b-tp8/attn_scores/prefill")
    # GPT-2: one fused QKV of 3 x 768, 12 heads of 64, at most 1024 positions; BERT: no decode.
    assert (512, 2304, 768, 0, "kn") in _shapes("gpt2", "gpt2/qkv/prefill")
    assert (32, 50257, 768, 0, "nk") in _shapes("gpt2", "gpt2/lm_head/decode")
    assert max(r.m for r in suite("gpt2") if not r.batch) == 512
    assert (512, 30522, 768, 0, "nk") in _shapes("bert-base", "bert-base/lm_head/prefill")
    assert not any(u.endswith("/decode") for r in suite("bert-base") for u in r.uses)
    # ViT-B/16: 197 tokens per image (196 patches of 3 x 16 x 16, + [CLS]), batches 1, 8, 32.
    assert (8 * 196, 768, 768, 0, "nk") in _shapes("vit-b16", "vit-b16/patch_embed/prefill")
    assert (32 * 197, 3072, 768, 0, "nk") in _shapes("vit-b16", "vit-b16/mlp_up/prefill")
    assert (197, 197, 64, 12 * 8, "nk") in _shapes("vit-b16", "vit-b16/attn_scores/prefill")


def test_identical_shapes_are_one_row_that_keeps_every_use():
    rows = suite("all")
    gate = [
        r for r in rows if (r.m, r.n, r.k, r.dtype, r.b_layout, r.dynamic) == (128, 14336, 4096, "f16", "nk", False)
    ]
    assert len(gate) == 1
    assert {"llama3-8b/gate_proj/prefill", "llama3-8b/up_proj/prefill", "mistral-7b/gate_proj/prefill"} <= set(
        gate[0].uses
    )
    assert len({r.key for r in rows}) == len(rows)
    assert any(r.n == 32000 for r in rows) and any(r.n == 128256 for r in rows)  # each model's own vocab
    assert all(any(u.endswith("/decode") for u in r.uses) for r in suite("decode"))
    assert {r.dtype for r in suite("all")} == {"f16", "bf16"} and {r.dtype for r in suite("all", ("bf16",))} == {"bf16"}
    with pytest.raises(KeyError, match="no suite 'llama'"):
        suite("llama")


def test_smoke_is_real_rows_of_every_kind():
    rows = suite("smoke")
    assert len(rows) == len(suites.SMOKE)
    assert {r.b_layout for r in rows} == {"nk", "kn"} and {r.dtype for r in rows} == {"f16", "bf16"}
    assert any(r.dynamic for r in rows) and any(r.batch for r in rows)
    assert max(r.m * max(r.batch, 1) for r in rows) <= 12 * 128


def _mmaflow(*args):
    return subprocess.run([sys.executable, "-m", "mmaflow.compiler.cli", *args], capture_output=True, text=True)


@pytest.mark.exhaustive
def test_bench_suite_smoke_prepares_every_row_with_both_builds(tmp_path):
    r = _mmaflow(
        "bench", "--suite", "smoke", "--target", "sm_80", "--dtype", "f16,bf16", "--prepare-only", str(tmp_path)
    )
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert man["kind"] == "suite" and man["driver"] == "cuda"
    assert [e["name"] for e in man["rows"]] == [row.name for row in suite("smoke")]
    for e in man["rows"]:
        assert set(e["builds"]) == {"mmaflow", "iree-default"}
        for b in e["builds"].values():
            assert (b["file"] and (tmp_path / b["file"]).stat().st_size > 0) or b["not_built"], e
        # (one mma.sync kernel each: the dynamic row's decode version would launch beside the tiled
        # kernel's ring with more shared memory than an A100 workgroup may have, so it is not versioned)
        kernels = e["builds"]["mmaflow"]["config"].split(" | else ")
        assert len(kernels) == 1, kernels
        assert all(k.startswith("MMA_SYNC_F32_16x8x16_" + e["dtype"].upper()) for k in kernels), kernels
    r = _mmaflow("bench", "--suite", "smoke", "--target", "sm_80", "--sizes", "128", "--prepare-only", str(tmp_path))
    assert r.returncode == 2 and "--suite takes its shapes from the suite" in r.stderr


@pytest.mark.exhaustive
def test_bench_suite_rows_selects_by_name(tmp_path):
    """``--rows REGEX`` keeps the rows whose name matches, and says so when none does."""
    pattern = r"decode.* 1x[0-9]+x[0-9]+ f16 B:kn$"
    r = _mmaflow("bench", "--suite", "smoke", "--target", "sm_80", "--rows", pattern, "--prepare-only", str(tmp_path))
    assert r.returncode == 0, r.stderr
    names = [e["name"] for e in json.loads((tmp_path / "manifest.json").read_text())["rows"]]
    assert names == [row.name for row in suite("smoke") if re.search(pattern, row.name)] and len(names) == 1
    r = _mmaflow(
        "bench", "--suite", "smoke", "--target", "sm_80", "--rows", "no such row", "--prepare-only", str(tmp_path)
    )
    assert r.returncode == 2 and "matching 'no such row'" in r.stderr
    r = _mmaflow("bench", "--suite", "smoke", "--target", "sm_80", "--rows", "(", "--prepare-only", str(tmp_path))
    assert r.returncode == 2 and "is not a regular expression" in r.stderr


def test_suite_run_half_checks_times_and_ranks_against_torch(tmp_path, monkeypatch, capsys):
    """The run half on CPU builds (a numpy stand-in for torch): every build and the f32-out torch
    recipe checked against float64, torch's recipes per B order (F.linear for N x K), the ratios
    against the best torch recipe and IREE default, a side not built reported as such."""
    from conftest import FakeTensor as T
    from conftest import compile_for_cpu, fake_cuda_torch, run_builds_on_cpu

    from mmaflow.runtime import suite_bench

    def mm(a, b, *, out_dtype=None):
        return T((a.x.astype(np.float64) @ b.x.astype(np.float64)).astype(np.float32))

    linear = []
    nn = type(
        "nn",
        (),
        {"functional": type("F", (), {"linear": staticmethod(lambda a, w: linear.append(1) or a @ w.transpose(0, 1))})},
    )
    fake = fake_cuda_torch(
        float32="float32", bfloat16="bfloat16", from_numpy=T, mm=mm, bmm=mm, matmul=lambda a, b: a @ b, nn=nn
    )

    run_builds_on_cpu(monkeypatch)
    monkeypatch.setitem(sys.modules, "torch", fake)
    rows = [
        Row(24, 40, 56, 0, "f16", "nk", True, ("m/x/decode",)),
        Row(16, 32, 48, 3, "bf16", "kn", False, ("m/y/prefill",)),
    ]
    entries = []
    for i, row in enumerate(rows):
        (tmp_path / f"{i}.vmfb").write_bytes(compile_for_cpu(suite_bench.source(row)))
        base = {"file": f"{i}.vmfb", "target": "host", "config": "cpu"}
        entries.append(
            {"name": row.name, **{f: getattr(row, f) for f in ("m", "n", "k", "batch", "dtype", "b_layout", "dynamic")}}
            | {
                "builds": {
                    "mmaflow": base,
                    "iree-default": base if i == 0 else {"file": None, "target": "sm_80", "not_built": "why"},
                }
            }
        )
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "suite", "function": "matmul", "rows": entries}))
    res = suite_bench.run(tmp_path, "cuda", tmp_path / "out", repeat=2, warmup=1)
    by = {(r["row"], r["variant"]): r for r in res}
    assert by[(0, "mmaflow")]["check"] == by[(0, "iree-default")]["check"] == by[(1, "mmaflow")]["check"] == "PASS"
    assert by[(1, "iree-default")]["check"] == "not built" and by[(1, "iree-default")]["detail"] == "why"
    assert by[(0, "torch.mm (f32 out)")]["check"] == "PASS" and by[(1, "torch.bmm (f32 out)")]["check"] == "PASS"
    assert (0, "torch.nn.functional.linear") in by and (1, "torch.nn.functional.linear") not in by and linear
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    r0, r1 = s["rows"]
    assert math.isclose(r0["x_torch"], 1.0 / r0["mmaflow_ms"]) and r0["torch_ms"] == 1.0  # fake events: 1 ms
    assert math.isclose(r0["x_iree"], r0["iree_ms"] / r0["mmaflow_ms"]) and math.isnan(r1["x_iree"])
    assert math.isclose(s["geomean_x_torch"], math.sqrt(r0["x_torch"] * r1["x_torch"]))
    suite_bench.print_table(res)
    out = capsys.readouterr().out
    assert "geomean over 2 rows" in out and "worst 2 rows against torch" in out and "not built: " in out


@pytest.mark.exhaustive
def test_report_suite_surveys_every_row_on_amd():
    """``mmaflow report --suite``: each row compiled for each target (verified), its registers,
    spills, LDS and the K loop's global loads by width from the .rocmasm, and one sampled
    workgroup on the lane executor against numpy; exit 0 when every row builds, spills nothing
    and passes."""
    r = _mmaflow("report", "--suite", "smoke", "--target", "gfx942,gfx1201", "--check", "1", "--json")
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    out = json.loads(r.stdout)
    assert [(e["target"], e["row"]) for e in out] == [
        (t, row.name) for t in ("gfx942", "gfx1201") for row in suite("smoke")
    ]
    for e in out:
        assert "error" not in e and e["spills"] == 0 and e["check_passed"], e
        assert e["loads_b128"] > 0 and e["loads_narrower"] == 0 and e["vgprs"] > 0, e
        assert e["kernel"].startswith(("MFMA_", "WMMA_")), e
    r = _mmaflow("report", "--suite", "smoke", "--target", "gfx942", "--rows", "k_proj")
    assert r.returncode == 0 and "survey: 1 build (1 row x 1 target): 0 not built, 0 spilling" in r.stdout, r.stdout


def test_report_suite_fails_on_a_bad_row_and_refuses_mixed_arguments(monkeypatch, capsys):
    from mmaflow.compiler import report

    def spilled(target, row, check, seed=0):
        return {
            "row": row.name,
            "target": target.name,
            "kernel": "K",
            "vgprs": 256,
            "spills": 8,
            "lds_bytes": 0,
            "waves": 1,
            "loads_b128": 1,
            "loads_narrower": 0,
        }

    monkeypatch.setattr(report, "survey_row", spilled)
    args = type("A", (), dict(suite="smoke", rows="k_proj", dtype="f16", target="gfx942", check=0, json=False))
    from mmaflow.compiler.pipeline.results import CodegenOptions

    assert report.survey_command(args, CodegenOptions()) == 1
    assert "1 spilling" in capsys.readouterr().out
    for argv, why in [
        (["report", "x.mlir", "--suite", "smoke", "--target", "gfx942"], "no input module"),
        (["report", "--target", "gfx942"], "needs an input module or --suite"),
        (["report", "--suite", "nope", "--target", "gfx942"], "no suite 'nope'"),
        (["report", "--suite", "smoke", "--target", "gfx942", "--config", "tile=64x64x32"], "no --config"),
    ]:
        r = _mmaflow(*argv)
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, (argv, r.stderr)


def test_report_suite_counts_an_executor_refusal_as_the_rows_failure(monkeypatch):
    """A kernel the lane executor refuses (or that races) fails its row; the survey goes on."""
    from mmaflow.compiler.report import survey_row
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.runtime import simulate
    from mmaflow.runtime.executor import ExecutorError

    def refuse(*args, **kwargs):
        raise ExecutorError("an op the executor does not model")

    monkeypatch.setattr(simulate, "check_matmul", refuse)
    (row,) = [r for r in suite("smoke") if "k_proj" in r.name]
    out = survey_row(get_target("gfx942"), row, check=1)
    assert out["check_passed"] is False and "does not model" in out["check"] and out["spills"] == 0, out
