"""`mmaflow bench --attention` (``runtime/attention_bench.py``) without a GPU: the module is the op
IREE makes of torch's SDPA, the prepare half takes (and verifies) the attention dispatch or fails
loudly, bad options are clear errors, and the run half -- reference check, timing, table, results
files, the --kernel-time path -- runs on IREE's CPU driver over modules built for llvm-cpu (the
prepared CUDA modules run only on the H100: docs/PERFORMANCE.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import CPU_FLAGS

from mmaflow.compiler import cli
from mmaflow.runtime import attention_bench, bench, bench_common
from mmaflow.runtime.attention_reference import attention_bound, attention_reference
from mmaflow.runtime.modules import attention_module


def _sdpa_torch_module(b: int, h: int, s: int, d: int, dtype: str) -> str:
    """torch.nn.functional.scaled_dot_product_attention(q, k, v) as iree-turbine exports it."""
    t = f"!torch.vtensor<[{b},{h},{s},{d}],{dtype}>"
    return (
        f"func.func @sdpa(%q: {t}, %k: {t}, %v: {t}) -> {t} {{\n"
        "  %none = torch.constant.none\n  %zero = torch.constant.float 0.000000e+00\n"
        "  %false = torch.constant.bool false\n"
        f"  %r = torch.aten.scaled_dot_product_attention %q, %k, %v, %none, %zero, %false, %none, %false : "
        f"{t}, {t}, {t}, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> {t}\n"
        f"  return %r : {t}\n}}\n"
    )


def _input_ops(source: str) -> list[str]:
    """The attention op, its scale and the reshapes around it after IREE's input phase, SSA names erased."""
    from iree.compiler import compile_str

    text = compile_str(
        source, extra_args=["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80", "--compile-to=input"]
    ).decode()
    keep = ("iree_linalg_ext.attention", "tensor.collapse_shape", "tensor.expand_shape", ": f32")
    return [
        re.sub(r"%[\w$.]+", "%_", line.strip().split(" loc(")[0])
        for line in text.splitlines()
        if any(k in line for k in keep)
    ]


@pytest.mark.parametrize("d,dtype", [(64, "f16"), (128, "bf16")])
def test_module_is_what_iree_makes_of_torch_sdpa(d, dtype):
    """The benchmark times the op real models hit: after IREE's input conversion, attention_module
    and torch's SDPA are the same collapse, attention (maps, f32 scale 1/sqrt(d)) and expand."""
    ours = _input_ops(attention_module(2, 3, 48, d, dtype))
    assert any("iree_linalg_ext.attention" in line for line in ours), ours
    assert ours == _input_ops(_sdpa_torch_module(2, 3, 48, d, dtype))


def test_prepare_takes_the_attention_dispatch(tmp_path):
    assert (
        cli.main(
            [
                "bench",
                "--attention",
                "--target",
                "sm_90a,sm_80",
                "--sizes",
                "128",
                "--head-dims",
                "64",
                "--prepare-only",
                str(tmp_path),
            ]
        )
        == 0
    )
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert man["kind"] == "attention" and man["driver"] == "cuda" and man["function"] == "attention"
    (case,) = man["cases"]
    assert (case["key"], case["batch"], case["heads"], case["seq"], case["head_dim"]) == (
        "f16_b2h16_s128_d64",
        2,
        16,
        128,
        64,
    )
    assert [(e["variant"], e["target"]) for e in case["entries"]] == [
        ("mmaflow sm_90a", "sm_90a"),
        ("mmaflow sm_80", "sm_80"),
        ("iree-default", "sm_80"),
    ]
    # the plan's config line: the dispatch was taken (and its PTX verified), by sm_90a's wgmma kernel
    hopper, ampere = (e["config"] for e in case["entries"][:2])
    assert hopper.startswith("flash attention f16 (wgmma): batch 32, 128 queries x 128 keys, head dim 64"), hopper
    assert ampere.startswith("flash attention f16: batch 32, 128 queries x 128 keys, head dim 64"), ampere
    assert all((tmp_path / e["file"]).stat().st_size > 0 for e in case["entries"])


def test_prepare_causal_builds_the_torch_form_proven(tmp_path):
    """--causal: scaled_dot_product_attention(is_causal=True) in the torch dialect, its mask proven causal
    (the kernel's config says causal); FLOPs half the full attention's, as FlashAttention counts them."""
    argv = ["bench", "--attention", "--causal", "--target", "sm_90a", "--sizes", "256", "--head-dims", "128"]
    assert cli.main(argv + ["--dtype", "bf16", "--prepare-only", str(tmp_path)]) == 0
    (case,) = json.loads((tmp_path / "manifest.json").read_text())["cases"]
    assert case["key"] == "bf16_b2h16_s256_d128_causal" and case["causal"] is True
    ours = case["entries"][0]
    assert ours["variant"] == "mmaflow sm_90a" and ", causal;" in ours["config"], ours["config"]
    assert attention_bench.flops(case) == 4 * 2 * 16 * 256 * 256 * 128 / 2


def test_prepare_gqa_causal_builds_the_torch_form(tmp_path):
    """--kv-heads with --causal: enable_gqa=True, K and V of 4 heads; IREE folds the query heads sharing one
    into the rows, and the kernel's positions restart every seq rows."""
    argv = ["bench", "--attention", "--causal", "--kv-heads", "4", "--target", "sm_80", "--sizes", "128"]
    assert cli.main(argv + ["--head-dims", "64", "--prepare-only", str(tmp_path)]) == 0
    (case,) = json.loads((tmp_path / "manifest.json").read_text())["cases"]
    assert case["key"] == "f16_b2h16kv4_s128_d64_causal" and case["kv_heads"] == 4
    ours = case["entries"][0]["config"]
    assert "512 queries x 128 keys" in ours and "causal (positions restart every 128 rows)" in ours, ours
    assert attention_bench.kv_bytes(case) == 2 * 2 * 2 * 4 * 128 * 64


def test_prepare_causal_fails_when_the_mask_is_not_proven(tmp_path, capsys, monkeypatch):
    """A causal build whose mask mmaflow reads would be timed against torch's is_causal as if it skipped
    the masked tiles: the prepare stops."""
    from mmaflow.compiler.driver import causal_masks

    monkeypatch.setattr(causal_masks, "prove", lambda module: causal_masks.Proof(None, {}, []))
    argv = ["bench", "--attention", "--causal", "--target", "sm_80", "--sizes", "64", "--head-dims", "64"]
    assert cli.main(argv + ["--prepare-only", str(tmp_path)]) == 6
    err = capsys.readouterr().err
    assert "mmaflow did not prove the mask causal" in err, err
    assert not (tmp_path / "manifest.json").exists()


def test_prepare_fails_when_mmaflow_leaves_the_attention(tmp_path, capsys, monkeypatch):
    """A build whose attention dispatch IREE compiles would time IREE's kernel as mmaflow's (here
    the attention family refuses every attention, as it would one the kernel does not support)."""
    from mmaflow.compiler.core.errors import UnsupportedError
    from mmaflow.compiler.kernels import registry

    def refuse(attn, target):
        raise UnsupportedError(f"no kernel on {target.name} in this test")

    monkeypatch.setattr(registry.direct_family("attention"), "plan", refuse)
    assert (
        cli.main(
            [
                "bench",
                "--attention",
                "--target",
                "gfx942",
                "--sizes",
                "64",
                "--head-dims",
                "64",
                "--prepare-only",
                str(tmp_path),
            ]
        )
        == 6
    )
    err = capsys.readouterr().err
    assert "mmaflow did not take the attention dispatch" in err and "no kernel on gfx942 in this test" in err, err
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--head-dims", "96"], "--head-dims 96: mmaflow's flash-attention kernel takes head dims 64 and 128"),
        (["--sizes", "0"], "--sizes must be comma-separated positive integers, got '0'"),
        (["--sizes", "2k"], "--sizes must be comma-separated positive integers, got '2k'"),
        (["--head-dims", "64,"], "--head-dims must be comma-separated positive integers, got '64,'"),
        (["--dtype", "f32"], "bench --attention times f16 and bf16 attention, not f32"),
        (["--checks"], "bench does one of --checks, --attention at a time"),
        (["--config", "tile_m=64"], "--config configures matmul kernels"),
        (["--target", "sm_80,gfx942"], "bench --attention runs its targets on one device"),
        (["--causal", "--decode", "1"], "--decode and --causal"),
        (["--kv-heads", "3"], "--kv-heads 3: the query heads (16) share K and V heads in equal groups"),
        (["--kv-heads", "8", "--decode", "1"], "--kv-heads is prefill's"),
        (["--v-head-dim-outer"], "--v-head-dim-outer is an option of bench --attention --decode"),
    ],
)
def test_bad_options_are_clear_errors(tmp_path, capsys, args, needle):
    argv = ["bench", "--attention", "--target", "sm_80", "--prepare-only", str(tmp_path)]
    flags = {"--v-head-dim-outer"}  # (options without a value)
    i = 0
    while i < len(args):  # replace or add each option
        if args[i] in flags:
            argv.append(args[i])
            i += 1
            continue
        if args[i] in argv:
            argv[argv.index(args[i]) + 1] = args[i + 1]
        else:
            argv += args[i : i + 2]
        i += 2
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    assert not list(tmp_path.iterdir())  # refused before compiling anything


@pytest.mark.parametrize("option", [["--head-dims", "64"], ["--causal"], ["--kv-heads", "4"]])
def test_attention_options_need_attention(tmp_path, capsys, option):
    assert cli.main(["bench", "--target", "sm_80", *option, "--prepare-only", str(tmp_path)]) == 2
    assert f"{option[0]} is an option of bench --attention" in capsys.readouterr().err


# ---- the run half ------------------------------------------------------------------------------


def test_flops_and_cases():
    (c,) = attention_bench.cases([2048], [64], ["f16"])
    assert c["key"] == "f16_b2h16_s2048_d64"
    assert attention_bench.flops(c) == 4 * 2 * 16 * 2048 * 2048 * 64
    assert [c["key"] for c in attention_bench.cases([128, 256], [64, 128], ["bf16"], batch=1, heads=2)] == [
        "bf16_b1h2_s128_d64",
        "bf16_b1h2_s128_d128",
        "bf16_b1h2_s256_d64",
        "bf16_b1h2_s256_d128",
    ]


def test_reference_and_check():
    """The chunked reference is attention_reference over (batch * heads); a result off by a key's
    weight fails the bound, the reference rounded to the dtype passes."""
    (c,) = attention_bench.cases([40], [64], ["f16"], batch=1, heads=3)
    q, k, v = attention_bench.inputs(c)
    assert q.shape == (1, 3, 40, 64) and q.dtype == np.float16
    ref, bound = attention_bench.reference(q, k, v, "f16", chunk=2)
    flat = [x.reshape(3, 40, 64) for x in (q, k, v)]
    whole = attention_reference(*flat, 0.125, False)
    np.testing.assert_array_equal(ref.reshape(3, 40, 64), whole)
    np.testing.assert_array_equal(bound.reshape(3, 40, 64), attention_bound(whole, flat[2], "f16"))
    assert attention_bench.check(ref.astype(np.float16), ref, bound, "f16")["check"] == "PASS"
    dropped = attention_reference(flat[0], flat[1][:, 1:], flat[2][:, 1:], 0.125, False)  # key 0 lost
    bad = attention_bench.check(dropped.reshape(q.shape).astype(np.float16), ref, bound, "f16")
    assert bad["check"] == "FAIL" and bad["err_over_bound"] > 1


@pytest.fixture(scope="module")
def cpu_manifest(tmp_path_factory):
    """A prepared directory as `bench --attention` writes one, its modules built for llvm-cpu: the
    real module, and the same with a wrong scale (a broken kernel the check must catch)."""
    from iree.compiler import compile_str

    d = tmp_path_factory.mktemp("attn_cpu")
    (case,) = attention_bench.cases([64], [64], ["bf16"], batch=1, heads=2)
    src = attention_module(1, 2, 64, 64, "bf16")
    wrong = src.replace("arith.constant 0.125 : f32", "arith.constant 0.25 : f32")
    assert wrong != src
    entries = []
    for variant, text in (("mmaflow llvm-cpu", wrong), ("iree-default", src)):
        name = f"{variant.split()[0]}_{case['key']}.vmfb"
        (d / name).write_bytes(compile_str(text, extra_args=CPU_FLAGS))
        entries.append({"variant": variant, "file": name, "target": "llvm-cpu", "config": "test"})
    manifest = {
        "kind": "attention",
        "targets": ["llvm-cpu"],
        "driver": "local-task",
        "function": "attention",
        "flops": attention_bench.FLOPS,
        "cases": [{**case, "entries": entries}],
    }
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def test_run_half_checks_times_and_writes(cpu_manifest, tmp_path, capsys, monkeypatch):
    """`python -m mmaflow.runtime.bench --from-dir DIR` on an attention manifest: each module checked
    (the wrong one fails: exit 1), timed, compared with IREE default; --kernel-time through a stand-in
    ncu (a script on PATH printing Nsight Compute's CSV: three calls of one kernel)."""
    rows = ['"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    rows += [f'"{i}","attention_kernel","gpu__time_duration.sum","usecond","{100 + i}"' for i in range(3)]
    (tmp_path / "ncu.csv").write_text("\n".join(rows) + "\n")
    ncu = tmp_path / "ncu"
    ncu.write_text(f"#!/bin/sh\ncat {tmp_path / 'ncu.csv'}\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(bench_common, "PROFILED_CALLS", 3)  # what kernel_time_of reads
    out = tmp_path / "out"
    assert (
        bench.main(
            [
                "--from-dir",
                str(cpu_manifest),
                "--driver",
                "local-task",
                "--out",
                str(out),
                "--repeat",
                "2",
                "--kernel-time",
            ]
        )
        == 1
    )
    text = capsys.readouterr().out
    res = json.loads((out / "results.json").read_text())
    wrong, base = res["rows"]
    assert (wrong["variant"], wrong["check"], base["variant"], base["check"]) == (
        "mmaflow llvm-cpu",
        "FAIL",
        "iree-default",
        "PASS",
    ), res["rows"]
    assert wrong["err_over_bound"] > 1 >= base["err_over_bound"]
    assert base["kernel_ms"] == pytest.approx(0.101) and base["kernels"] == ["attention_kernel"]
    assert base["x_iree"] == 1.0 and base["tflops"] == pytest.approx(4 * 2 * 64 * 64 * 64 / (base["ms"] * 1e-3) / 1e12)
    assert (
        (out / "results.csv")
        .read_text()
        .splitlines()[0]
        .startswith("key,dtype,batch,heads,kv_heads,q_len,seq,head_dim,causal,variant")
    )
    assert "kernel ms" in text and "x IREE" in text and re.search(r"bf16 +2 +64 +64 +64 +iree-default .* PASS", text), (
        text
    )


def test_run_half_needs_no_iree_compiler(cpu_manifest, tmp_path):
    """The GPU machine may have iree.runtime only: the run half with iree.compiler made unimportable."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('iree.compiler'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from mmaflow.runtime import bench\n"
        f"sys.exit(bench.main(['--from-dir', {str(cpu_manifest)!r}, '--driver', 'local-task', "
        f"'--out', {str(tmp_path)!r}, '--repeat', '1']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 1 and "blocked" not in r.stderr, r.stderr  # 1: the wrong-scale module fails
    assert len(json.loads((tmp_path / "results.json").read_text())["rows"]) == 2


def test_profile_child_runs_a_module(cpu_manifest):
    """What Nsight Compute runs per module (``--profile-one FILE CASE``): the calls, nothing else."""
    man = json.loads((cpu_manifest / "manifest.json").read_text())
    (case,) = man["cases"]
    assert (
        bench.main(
            [
                "--from-dir",
                str(cpu_manifest),
                "--driver",
                "local-task",
                "--out",
                "-",
                "--profile-one",
                case["entries"][1]["file"],
                case["key"],
            ]
        )
        == 0
    )


def test_speedups_prefer_kernel_time():
    rows = [
        {"key": "a", "variant": "mmaflow sm_80", "ms": 1.0, "kernel_ms": 0.5},
        {"key": "a", "variant": "iree-default", "ms": 1.5, "kernel_ms": 1.0},
    ]
    attention_bench.speedups(rows)
    assert [r["x_iree"] for r in rows] == [2.0, 1.0]
    del rows[0]["kernel_ms"], rows[1]["kernel_ms"]
    attention_bench.speedups(rows)
    assert [r["x_iree"] for r in rows] == [1.5, 1.0]


def test_models_manifest_points_to_its_runner(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "models", "entries": []}))
    assert bench.main(["--from-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "python3 -m mmaflow.runtime.model_bench" in capsys.readouterr().err


def test_fa3_shapes():
    """--fa3-shapes: the FlashAttention-3 paper's batch (16k tokens / seq) and heads (2048 / d); sizes
    that do not divide them are refused before anything is built."""
    cs = attention_bench.cases([2048, 16384], [64, 128], ["f16"], fa3=True)
    assert [(c["batch"], c["heads"], c["seq"], c["head_dim"]) for c in cs] == [
        (8, 32, 2048, 64),
        (8, 16, 2048, 128),
        (1, 32, 16384, 64),
        (1, 16, 16384, 128),
    ]
    from mmaflow.compiler.core.errors import InputError

    with pytest.raises(InputError, match="--fa3-shapes: .* 3000 does not divide"):
        attention_bench.prepare(["sm_90a"], [3000], [64], ["f16"], Path("/nonexistent"), fa3=True)


def test_torch_backends(capsys):
    """torch's SDPA under its own choice and each forced backend (``torch.nn.attention.sdpa_kernel``),
    each checked and timed; a backend that refuses (or a torch without them) is said, not timed."""
    import contextlib
    import types

    from conftest import FakeTensor, fake_cuda_torch

    chosen = []

    @contextlib.contextmanager
    def sdpa_kernel(backend):
        if backend == "FLASH_ATTENTION":
            raise RuntimeError("No available kernel")
        chosen.append(backend)
        yield

    def sdpa(q, k, v):
        ref = attention_reference(q.x.astype(np.float64), k.x.astype(np.float64), v.x.astype(np.float64), 0.125, False)
        return FakeTensor(ref.astype(np.float16))

    backends = types.SimpleNamespace(
        CUDNN_ATTENTION="CUDNN_ATTENTION", FLASH_ATTENTION="FLASH_ATTENTION", EFFICIENT_ATTENTION="EFFICIENT_ATTENTION"
    )
    nn = types.SimpleNamespace(
        functional=types.SimpleNamespace(scaled_dot_product_attention=sdpa),
        attention=types.SimpleNamespace(sdpa_kernel=sdpa_kernel, SDPBackend=backends),
    )
    torch = fake_cuda_torch(nn=nn, from_numpy=FakeTensor)
    (case,) = attention_bench.cases([64], [64], ["f16"], batch=1, heads=2)
    q, k, v = (x.reshape(2, 64, 64) for x in attention_bench.inputs(case))
    ref, bound = attention_bench.reference(q[None], k[None], v[None], "f16")
    rows, outs = attention_bench.torch_rows(torch, case, q, k, v, ref[0], bound[0], warmup=1, repeat=2)
    assert [r["variant"] for r in rows] == ["torch SDPA", "torch cuDNN", "torch EFFICIENT"]
    assert all(r["check"] == "PASS" for r in rows) and set(outs) == {"torch", "torch-cudnn", "torch-efficient"}
    assert chosen == ["CUDNN_ATTENTION", "EFFICIENT_ATTENTION"]
    assert "torch FLASH: not run: RuntimeError: No available kernel" in capsys.readouterr().out
    bare = fake_cuda_torch(nn=types.SimpleNamespace(functional=nn.functional), from_numpy=FakeTensor)
    rows, _ = attention_bench.torch_rows(bare, case, q, k, v, ref[0], bound[0], warmup=1, repeat=2)
    assert [r["variant"] for r in rows] == ["torch SDPA"]
    assert "no torch.nn.attention.sdpa_kernel" in capsys.readouterr().out


def test_decode_cases_and_reference():
    """--decode: one query per sequence, 32 query heads over 8 KV heads; the chunked reference reads KV
    head h // 4 for query head h (torch's enable_gqa), the bytes of K and V count once per KV head."""
    (c,) = attention_bench.decode_cases([2], [48], [64], ["f16"])
    assert (c["batch"], c["heads"], c["kv_heads"], c["q_len"], c["seq"]) == (2, 32, 8, 1, 48)
    q, k, v = attention_bench.inputs(c)
    assert q.shape == (2, 32, 1, 64) and k.shape == v.shape == (2, 8, 48, 64)
    ref, bound = attention_bench.reference(q, k, v, "f16", chunk=3)
    kr, vr = (np.repeat(x, 4, axis=1).reshape(64, 48, 64) for x in (k, v))
    whole = attention_reference(q.reshape(64, 1, 64), kr, vr, 0.125, False)
    np.testing.assert_array_equal(ref.reshape(64, 1, 64), whole)
    np.testing.assert_array_equal(bound.reshape(64, 1, 64), attention_bound(whole, vr, "f16"))
    assert attention_bench.flops(c) == 4 * 2 * 32 * 1 * 48 * 64
    assert attention_bench.kv_bytes(c) == 2 * 2 * 2 * 8 * 48 * 64
    shifted = attention_bench.reference(q, np.roll(k, 1, axis=1), np.roll(v, 1, axis=1), "f16")[0]
    assert attention_bench.check(shifted.astype(np.float16), ref, bound, "f16")["check"] == "FAIL"


@pytest.mark.parametrize("v_transposed", [False, True])
def test_decode_run_half_on_cpu(tmp_path, v_transposed):
    """A decode manifest's module (the KV length dynamic) runs through the run half: checked against
    the GQA reference, timed, with GB/s of K and V. ``--v-head-dim-outer``: the module takes V stored
    (batch, KV heads, head dim, keys), handed the same values so (``module_inputs``)."""
    from iree.compiler import compile_str

    from mmaflow.runtime.modules import decode_attention_module

    (case,) = attention_bench.decode_cases([1], [80], [64], ["f16"], v_transposed)
    assert case["key"].endswith("_vt") == v_transposed
    name = f"iree_{case['key']}.vmfb"
    module = decode_attention_module(1, 8, 4, 64, "f16", v_transposed=v_transposed)
    (tmp_path / name).write_bytes(compile_str(module, extra_args=CPU_FLAGS))
    entry = {"variant": "iree-default", "file": name, "target": "llvm-cpu", "config": "test"}
    manifest = {
        "kind": "attention",
        "targets": ["llvm-cpu"],
        "driver": "local-task",
        "function": "attention",
        "flops": attention_bench.FLOPS,
        "cases": [{**case, "entries": [entry]}],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    rows = attention_bench.run(tmp_path, "local-task", tmp_path / "out", repeat=2, warmup=1)
    (row,) = rows
    assert row["check"] == "PASS" and row["q_len"] == 1 and row["kv_heads"] == 8
    assert row["gbps"] == pytest.approx(attention_bench.kv_bytes(case) / (row["ms"] * 1e-3) / 1e9)


@pytest.mark.exhaustive
def test_models_prepare_builds_with_mmaflow_compile(tmp_path, monkeypatch):
    """`mmaflow bench --models` builds with `mmaflow compile`, which carries what the stock route cannot:
    llama_mlp_wq's dense_resource constants (IREE 3.13 does not hand them to the hook) and GPT-2's causal
    mask proven through the host program (its writer gone from the build). Each build verified."""
    from mmaflow.runtime import model_bench

    monkeypatch.setattr(model_bench, "BUILDS", ("mmaflow_sm_80",))
    result = model_bench.prepare(tmp_path, models=["llama_mlp_wq", "gpt2_sdpa"])
    keys = [e["key"] for e in result["entries"]]
    assert sorted(keys) == ["gpt2_sdpa_bf16", "gpt2_sdpa_f16", "llama_mlp_wq_bf16", "llama_mlp_wq_f16"]
    for e in result["entries"]:
        build = e["builds"]["mmaflow_sm_80"]
        assert build["route"] == "mmaflow compile" and (tmp_path / build["file"]).stat().st_size > 0
        assert build["verify"], e["key"]
        if e["model"] == "gpt2_sdpa":
            assert any("dispatch removed" in line for line in build["log"]), build["log"]
