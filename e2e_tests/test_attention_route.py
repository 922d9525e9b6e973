"""Attention dispatches on the flash-attention route (issue 15): select takes an
``iree_linalg_ext.attention`` the mma.sync kernel supports on NVIDIA targets, the
`flash-attention` stage replaces the dispatch by the kernel and hands it back, `mmaflow compile`
verifies its PTX, `mmaflow run --device sim` checks it at its true byte offsets, and the stock
route (iree-compile with the hook) builds the same file, which `mmaflow verify` accepts.

The example's Q and K are computed by other dispatches, so IREE packs them into one binding: K
sits at a non-zero byte offset.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import both_routes_and_verify

from mmaflow.compiler.core.errors import UnsupportedError, VerificationError
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.pipeline.results import DispatchFacts, ExecutableResult
from mmaflow.runtime.model_check import check_executable

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLE = REPO / "examples" / "attention_f16.mlir"


def _source(elem="f16", d=64):
    return EXAMPLE.read_text().replace("f16", elem).replace("x64x", f"x{d}x")


def _attention(res):
    (exe,) = [e for e in res.taken if e.facts.is_attention]
    return exe


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "gfx942", "gfx950", "gfx1201", "gfx1100"])
@pytest.mark.parametrize("elem,d", [("f16", 64), ("bf16", 128)])
def test_select_takes_a_supported_attention(target, elem, d):
    """The decision and config lines, the recorded facts (bindings and byte offsets as IREE placed
    them; the kernel's expectations from its plan), and their wire form."""
    res = codegen_module(_source(elem, d), target, require_matmul=False)
    exe = _attention(res)
    what = (
        f"iree_linalg_ext.attention batch 2, 100 queries x 200 keys, head dim {d} -> {d} ({elem} -> {elem}, "
        f"scale 0.125, no mask)"
    )
    k_offset = 2 * 100 * d * 2  # after Q in the shared buffer
    assert exe.log[0] == (
        f"mmaflow: taken {exe.name}: attention: {what} on {target} (Q: binding 0 @ 0, K: binding 0 "
        f"@ {k_offset}, V: binding 1 @ 0, O: binding 2 @ 0)"
    ), exe.log[0]
    kernel = " (wgmma)" if target == "sm_90a" else ""  # sm_90a's wgmma kernel (compiler/kernels/attention/hopper.py)
    assert exe.log[1].startswith(
        f"mmaflow: config {exe.name}: flash attention {elem}{kernel}: batch 2, 100 queries x 200 keys, head dim {d}"
    ), exe.log[1]
    if target.startswith("sm_"):  # the PTX mnemonic verify counts
        assert exe.facts.expect.instruction == ("wgmma.mma_async" if target == "sm_90a" else "mma.sync")
    facts = exe.facts
    assert facts.kind == "attention" and facts.config is None and facts.problem.describe() == what
    assert facts.problem.k.offset == k_offset
    assert DispatchFacts.from_wire(facts.to_wire()) == facts
    assert ExecutableResult.from_wire(exe.to_wire()).facts == facts
    assert "iree_linalg_ext.attention <" not in exe.text
    if target == "sm_90a":
        # per warpgroup and key tile (64 keys at head dim 64, 128 at 128): S = Q K^T (d/16 wgmma) and
        # O += P V (keys/16, P from registers); at head dim 64 cp.async and one barrier, at 128 a TMA
        # producer and none
        keys = 64 if d == 64 else 128
        assert (
            facts.expect.mma_per_key_tile,
            facts.expect.key_tiles,
            facts.expect.async_copies,
            facts.expect.tma_copies,
            facts.expect.barriers_per_key_tile,
        ) == (d // 16 + keys // 16, -(-200 // keys), d == 64, d == 128, 1 if d == 64 else 0)
        assert "nvvm.wgmma.mma_async" in exe.text and "nvgpu.mma.sync" not in exe.text
    elif target.startswith("sm_"):
        # per warp and 64-key tile: S = Q K^T (8 x d/16 mma.sync) and O += P V (d/8 x 4)
        assert (facts.expect.mma_per_key_tile, facts.expect.key_tiles, facts.expect.async_copies) == (
            8 * d // 16 + d // 8 * 4,
            4,
            True,
        )
        assert "nvgpu.mma.sync" in exe.text
    else:
        # per wave and 64-key tile: S^T = K Q^T (4 x d/16) and O^T += V^T P^T (d/16 x 4), copies through registers
        assert (
            facts.expect.mma_per_key_tile,
            facts.expect.key_tiles,
            facts.expect.async_copies,
            facts.expect.barriers_per_key_tile,
        ) == (4 * d // 16 + d // 16 * 4, 4, False, 2)
        assert ("amdgpu.mfma" if target.startswith("gfx9") else "amdgpu.wmma") in exe.text
        assert "S^T = K Q^T" in exe.log[1]


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_amd_leaves_unsupported_attention_by_name(target):
    res = codegen_module(EXAMPLE.read_text().replace("x64x", "x32x"), target, require_matmul=False)
    assert not [e for e in res.taken if e.facts.is_attention]
    (line,) = [e.log[0] for e in res.executables if "attention" in e.log[0]]
    assert line.endswith("no mask): head dims 32 -> 32; the kernel takes K1 = N in (64, 128); IREE compiles it"), line


def test_unsupported_attention_is_left_with_the_reason():
    why = "head dims 32 -> 32; the kernel takes K1 = N in (64, 128)"
    res = codegen_module(EXAMPLE.read_text().replace("x64x", "x32x"), "sm_80", require_matmul=False)
    assert not [e for e in res.taken if e.facts.is_attention]
    (line,) = [e.log[0] for e in res.executables if "attention" in e.log[0]]
    assert line.startswith("mmaflow: left ") and line.endswith(f": {why}; IREE compiles it"), line


@pytest.mark.parametrize(
    "target,elem,d",
    [
        ("sm_80", "f16", 64),
        pytest.param("sm_80", "bf16", 128, marks=pytest.mark.exhaustive),
        ("gfx942", "f16", 64),
        ("gfx1100", "bf16", 128),
        pytest.param("gfx950", "bf16", 128, marks=pytest.mark.exhaustive),
        pytest.param("gfx1201", "f16", 64, marks=pytest.mark.exhaustive),
    ],
)
def test_the_attention_dispatch_on_the_executor(target, elem, d):
    """At its true byte offsets (K after Q in one binding), sentinels elsewhere, against the float64
    reference within the bound ``runtime/attention_reference.py`` justifies."""
    exe = _attention(codegen_module(_source(elem, d), target, require_matmul=False))
    (c,) = check_executable(exe, seed=3)
    assert c.passed, c.line()
    assert c.workgroups == c.grid_size == 4 and not c.stats.races
    assert 0 < c.max_err_over_bound <= 1


def test_a_broken_attention_kernel_fails_the_check():
    """The kernel's folded scale * log2(e) changed: every softmax weight is off, and the check says
    so (the comparison, not a crash)."""
    exe = _attention(codegen_module(_source(), "sm_80", require_matmul=False))
    import re

    consts = re.findall(r"arith.constant (0\.18033\d*) : f32", exe.text)
    assert consts, "the folded scale * log2(e) constant is not in the kernel"
    bad = dataclasses.replace(
        exe, text=exe.text.replace(f"arith.constant {consts[0]} : f32", "arith.constant 0.3 : f32")
    )
    (c,) = check_executable(bad, seed=3)
    assert not c.passed and "outside the bound" in c.detail, c.line()


def test_mmaflow_run_passes_every_dispatch():
    r = subprocess.run(
        [str(BIN / "mmaflow"), "run", str(EXAMPLE), "--target", "sm_80", "--device", "sim"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS attn_dispatch_2: " in r.stdout and "mmaflow run: PASS: 1 of 1 checks passed" in r.stdout, r.stdout


@pytest.mark.exhaustive
def test_both_routes_build_it_and_verify_accepts_the_stock_build(tmp_path):
    """`mmaflow compile` (which verifies the kernel's PTX) and `iree-compile $(mmaflow flags)` give
    the same .vmfb; `mmaflow verify` accepts the stock build and checks the PTX in it."""
    stock, ours, v = both_routes_and_verify(EXAMPLE, "sm_80", tmp_path)
    assert "mmaflow: taken attn_dispatch_2: attention: " in stock, stock[-3000:]
    assert "mmaflow: verified attn_dispatch_2: flash attention, " in ours, ours
    assert "mmaflow: verified attn_dispatch_2 in stock.vmfb: " in v and "flash attention" in v, v


@pytest.mark.exhaustive
def test_both_routes_build_the_amd_kernel_and_verify_accepts_it(tmp_path):
    """gfx1100: `iree-compile $(mmaflow flags)` (the preprocess hook) and `mmaflow compile` give the
    same .vmfb with the AMD kernel; `mmaflow verify` accepts it and names its matrix instructions."""
    stock, ours, v = both_routes_and_verify(EXAMPLE, "gfx1100", tmp_path)
    assert "mmaflow: taken attn_dispatch_2: attention: " in stock, stock[-3000:]
    assert (
        "mmaflow: verified attn_dispatch_2: flash attention, 32 matrix instructions (32 per wave and key tile), "
        "v_exp_f32, no spills or scratch" in ours
    ), ours
    assert "mmaflow: verified attn_dispatch_2 in stock.vmfb: 32 matrix instructions, flash attention" in v, v


def test_verification_names_what_the_attention_ptx_lacks(tmp_path):
    """check_attention_isa on the kernel's own PTX passes; without ex2.approx, with local memory,
    it fails naming both."""
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.target.isa import parse_ptx
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.compiler.verify import check_attention_isa

    res = compile_module(_source(), "sm_80", require_matmul=False)
    exe = _attention(res)
    text = res.isa_text[exe.name]
    target = get_target("sm_80")
    check_attention_isa(parse_ptx(text, exe.export, target), text, exe.name, exe.facts.expect)
    lines = text.replace("ex2.approx", "ex2.slow").splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("mma.sync"))
    bad = "\n".join(lines[:at] + ["\tst.local.b32 \t[%rd1], %r1;"] + lines[at:])
    with pytest.raises(VerificationError, match="no ex2.approx .*local memory"):
        check_attention_isa(parse_ptx(bad, exe.export, target), bad, exe.name, exe.facts.expect)


@pytest.mark.parametrize("target", ["gfx942", "gfx1201", "gfx1100"])
def test_amd_attention_isa_is_verified(target):
    """The AMD kernel through IREE to .rocmasm: v_mfma / v_wmma, v_exp_f32, no spills, no scratch,
    two barriers per key tile; on RDNA3 the P conversion's v_permlanex16_b32 (4 per 16-key block
    of P, 4 blocks a tile) besides the softmax's two reductions. check_attention_isa passes, and
    fails naming it without v_exp_f32 and with a scratch store."""
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.target.isa import parse_rocmasm
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.compiler.verify import check_attention_isa

    res = compile_module(_source(), target, require_matmul=False)
    exe = _attention(res)
    text, rep = res.isa_text[exe.name], res.reports[exe.name]
    assert rep.vgpr_spills == 0 and rep.sgpr_spills == 0 and not rep.counts.get("scratch")
    assert rep.loop_counts["matrix"] % exe.facts.expect.mma_per_key_tile == 0
    lines = [line.strip() for line in text.splitlines()]
    permlanes = sum(line.startswith("v_permlanex16_b32") for line in lines)
    # the softmax's max and sum across the 2 row lane groups (xor 16) on RDNA; P's conversion on RDNA3
    assert permlanes == {"gfx942": 0, "gfx1201": 2, "gfx1100": 2 + 4 * 4}[target]
    bad = text.replace("v_exp_f32", "v_rcp_f32").replace("\ts_endpgm", "\tscratch_store_b32 off, v0, off\n\ts_endpgm")
    with pytest.raises(VerificationError, match="no v_exp_f32.*scratch instructions"):
        check_attention_isa(parse_rocmasm(bad, exe.export, get_target(target)), bad, exe.name, exe.facts.expect)


_MASKED = REPO / "lit_tests" / "Inputs" / "attention_mask_2x100x200x64_f16.mlir"
_TIGHT = [("gfx1100", "mask", "bf16", 128), ("gfx1201", "nomask", "f16", 128)]  # the most VGPRs (~250 of 256)


@pytest.mark.parametrize(
    "target,kind,elem,d",
    _TIGHT
    + [
        pytest.param(t, k, e, d, marks=pytest.mark.exhaustive)
        for t in ("gfx942", "gfx950", "gfx1201", "gfx1100")
        for k in ("nomask", "mask")
        for e in ("f16", "bf16")
        for d in (64, 128)
        if (t, k, e, d) not in _TIGHT and (t, k, d) != ("gfx1201", "mask", 128)
    ],
)  # (refused: test_rdna4_masked_head_dim_128_is_left_by_name)
def test_amd_attention_compiles_without_spills(target, kind, elem, d):
    """Every AMD target, dtype, head dim, with and without the additive mask: compile_module
    verifies the .rocmasm (check_attention_isa refuses spills and scratch)."""
    from mmaflow.compiler.driver.bridge import compile_module

    src = (
        (_MASKED if kind == "mask" else EXAMPLE)
        .read_text()
        .replace("f16", elem)
        .replace("x64x", f"x{d}x")
        .replace("x64>", f"x{d}>")
    )
    res = compile_module(src, target, require_matmul=False)
    rep = res.reports[_attention(res).name]
    assert rep.vgpr_spills == 0 and rep.vgprs <= 256 and rep.loop_counts["matrix"] == 32 * d // 64


@pytest.mark.parametrize("fixture", ["bool", "additive"])
def test_rdna4_masked_head_dim_128_is_left_by_name(fixture):
    """gfx1201 with a mask at head dim 128: LLVM spilled 10-14 VGPRs (GPT-2-style SDPA, 4 x 128 x
    128, boolean or additive mask), so select leaves it to IREE saying why; head dim 64 is taken."""
    from mmaflow.compiler.driver.bridge import codegen_module

    d64 = BOOL_FIXTURE.read_text() if fixture == "bool" else _MASKED.read_text()
    d128 = (
        d64.replace("[1,4,128,64],f16", "[1,4,128,128],f16")
        if fixture == "bool"
        else d64.replace("x64x", "x128x").replace("x64>", "x128>")
    )
    res = codegen_module(d128, "gfx1201", require_matmul=False)
    assert not [e for e in res.taken if e.facts.is_attention]
    assert any("a masked attention at head dim 128 needs more than its 256 VGPRs" in line for line in res.log), res.log
    assert [e for e in codegen_module(d64, "gfx1201", require_matmul=False).taken if e.facts.is_attention]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "gfx942"])
def test_report_covers_the_attention_kernel(target, tmp_path):
    """`mmaflow report` on a module with an attention dispatch: the kernel's plan (as the compile
    log states it) and its ISA counts, spill-free; JSON too; the HTML page its plan, resources,
    instruction mix and key loop."""
    from mmaflow.compiler.driver.bridge import compile_module

    res = compile_module(EXAMPLE.read_text(), target, require_matmul=False)
    plan_line = next(line for line in res.log if "attn_dispatch_2" in line and "flash attention" in line)
    r = subprocess.run(
        [str(BIN / "mmaflow"), "report", str(EXAMPLE), "--target", target], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = next(
        i for i, line in enumerate(lines) if line.startswith("main$async_dispatch_2") or "attn_dispatch_2" in line
    )
    kernel = lines[at + 1].strip()
    assert kernel.startswith("kernel: flash attention") and kernel.removeprefix("kernel: ") in plan_line, (
        kernel,
        plan_line,
    )
    spills = next(line for line in lines[at:] if "spills (NVIDIA: spill bytes)" in line)
    assert spills.split()[-1] == "0", spills
    assert any(line.strip().startswith("matrix (in K loop)") for line in lines[at:]), lines[at:]
    j = subprocess.run(
        [str(BIN / "mmaflow"), "report", str(EXAMPLE), "--target", target, "--json"], capture_output=True, text=True
    )
    assert j.returncode == 0, j.stderr
    (rep,) = [v for k, v in json.loads(j.stdout)["mmaflow"].items() if "attn_dispatch_2" in k]
    assert rep["vgprs"] and rep["lds_bytes"], rep
    page = tmp_path / "r.html"
    h = subprocess.run(
        [str(BIN / "mmaflow"), "report", str(EXAMPLE), "--target", target, "--html", str(page)],
        capture_output=True,
        text=True,
    )
    assert h.returncode == 0, h.stderr
    text = page.read_text()
    ids = re.findall(r'<section id="([^"]*attn_dispatch_2[^"]*)"', text)
    assert [i.rsplit("-", 1)[1] for i in ids] == ["plan", "resources", "mix", "kloop"], ids
    assert html.escape(kernel.removeprefix("kernel: "), quote=False) in text


def test_the_api_says_it_does_not_run_attention():
    from mmaflow.runtime.api import compile_module

    art = compile_module(EXAMPLE.read_text(), "sm_80", lower=False)
    with pytest.raises(UnsupportedError, match="is an attention dispatch"):
        art.problem


@pytest.mark.parametrize("target", ["sm_90a", "gfx1201"])
def test_v_stored_head_dim_outer_is_taken_and_checked(target):
    """V computed by another dispatch: IREE stores it transposed, (batch, head dim, keys) for the
    attention. The kernel reads its tiles along the keys (on sm_90a the mma.sync kernel: the wgmma
    kernel's TMA boxes run along the head dim); right on the executor."""
    from mmaflow.runtime.model_check import check_executable

    text = EXAMPLE.read_text().replace("ins(%q2, %k2, %v, %scale", "ins(%q2, %k2, %v2, %scale")
    res = codegen_module(text, target, require_matmul=False)
    (exe,) = [e for e in res.taken if e.facts.is_attention]
    assert exe.facts.problem.attention.v_transposed and exe.facts.problem.orders[2] == (0, 2, 1)
    (config,) = [x for x in exe.log if "its tiles read along the keys" in x]
    assert ("MMA_SYNC" in config) == target.startswith("sm_"), config
    (c,) = check_executable(exe, seed=3, sample=2)
    assert c.passed, c.line()


@pytest.mark.exhaustive
def test_config_overrides_configure_the_matmuls_and_the_attention_says_it_has_none():
    """`--config` configures a module's matmul kernels; the taken attention dispatch is compiled
    as without it, and its log says the options do not apply to it (never silently)."""
    from mmaflow.compiler.pipeline.results import CodegenOptions

    model = (REPO / "e2e_tests" / "models" / "gpt2_sdpa_nocausal_f16.mlir").read_text()
    plain = _attention(codegen_module(model, "sm_80"))
    res = codegen_module(model, "sm_80", options=CodegenOptions(overrides={"tile_m": 64, "stages": 2}))
    exe = _attention(res)
    assert exe.text == plain.text
    assert (
        f"mmaflow: note {exe.name}: --config stages, tile_m applies to matmul dispatches; the "
        "flash-attention kernel has no config" in exe.log
    )
    matmuls = [e for e in res.taken if e.facts.kind == "matmul"]
    assert matmuls and all(e.facts.config.tile_m == 64 and e.facts.config.stages == 2 for e in matmuls)


BOOL_FIXTURE = REPO / "lit_tests" / "Inputs" / "sdpa_bool_mask_f16.mlir"


@pytest.mark.parametrize(
    "target,elem,d",
    [
        ("sm_80", "f16", 64),
        ("gfx942", "f16", 64),
        ("gfx1100", "f16", 64),
        ("sm_90a", "bf16", 128),
        ("gfx950", "bf16", 128),
        ("gfx1201", "bf16", 64),
    ],
)
def test_sdpa_bool_mask_is_taken_and_checked(target, elem, d):
    """PyTorch SDPA with a boolean attn_mask (iree-turbine 3.9 / torch 2.13): IREE's attention with
    an i1 mask, stored one byte per element (an i8 binding truncated to i1 in the dispatch) at
    binding 3: taken, its binding and byte offset recorded, and the kernel checked on the lane
    executor at IREE's byte offsets against the float64 reference (bytes 0 / 1, mostly 1)."""
    text = BOOL_FIXTURE.read_text().replace("[1,4,128,64],f16", f"[1,4,128,{d}],{elem}")
    exe = _attention(codegen_module(text, target, require_matmul=False))
    rec = exe.facts.problem
    assert (rec.attention.q_type, rec.attention.k1) == (elem, d)
    assert rec.attention.mask_type == "i1" and rec.mask is not None
    assert "boolean i1 mask: binding 3 @ 0" in exe.log[0], exe.log[0]
    assert "boolean i1 mask;" in exe.log[1], exe.log[1]
    assert "xi1>" not in "".join(x for x in exe.text.splitlines() if "vector.load" in x or "binding.subspan" in x)
    (c,) = check_executable(exe, seed=5)
    assert c.passed, c.line()


def test_sdpa_bool_mask_inverted_fails_the_check():
    """The same check fails the kernel with the mask's sense inverted (True = masked): the f16
    0 and -inf the mask's bytes select between (the only scalar f16 constants) swapped."""
    exe = _attention(codegen_module(BOOL_FIXTURE.read_text(), "sm_80", require_matmul=False))
    zero, neg_inf = "arith.constant 0.000000e+00 : f16", "arith.constant 0xFC00 : f16"
    assert zero in exe.text and neg_inf in exe.text
    text = exe.text.replace(zero, "@SWAP@").replace(neg_inf, zero).replace("@SWAP@", neg_inf)
    (c,) = check_executable(dataclasses.replace(exe, text=text), seed=5)
    assert not c.passed and "outside the bound" in c.detail, c.line()


def _bool_sources(tmp_path) -> str:
    src = tmp_path / "src.mlir"
    subprocess.run(
        [
            str(BIN / "iree-compile"),
            str(BOOL_FIXTURE),
            "--iree-hal-target-device=cuda",
            "--iree-cuda-target=sm_80",
            "--compile-to=executable-sources",
            "-o",
            str(src),
        ],
        check=True,
    )
    return src.read_text()


@pytest.mark.parametrize(
    "edit,why",
    [
        ("packed", "stored packed \\(8 per byte"),  # an i1 binding (--iree-experimental-packed-i1-storage's form)
        ("computed", "not an i8 binding tensor truncated to i1"),  # an i1 made otherwise in the dispatch
    ],
)
def test_other_i1_mask_storage_is_refused_by_name(tmp_path, edit, why):
    """IREE 3.13 stores i1 one byte per element (its flag for the packed form is gone); an
    attention whose i1 mask is loaded as i1 (packed) or made from something other than an i8
    binding is refused with the reason, not read as bytes."""
    import re

    from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
    from mmaflow.compiler.kernels.attention.nvidia import attention_placements

    text = _bool_sources(tmp_path)
    m = re.search(r"(%\d+) = arith.trunci (%\d+) : tensor<4x128x128xi8> to tensor<4x128x128xi1>\n", text)
    assert m, "the dispatch no longer truncates an i8 mask"
    if edit == "packed":  # the binding and its load typed i1, no trunci
        text = text.replace(m.group(0), "").replace("tensor<4x128x128xi8>", "tensor<4x128x128xi1>")
        text = re.sub(rf"{m.group(1)}\b", m.group(2), text)
    else:  # i1 from a compare of the bytes, not a trunci
        text = text.replace(
            m.group(0),
            f"%c0_i8 = arith.constant dense<0> : tensor<4x128x128xi8>\n"
            f"{m.group(1)} = arith.cmpi ne, {m.group(2)}, %c0_i8 : tensor<4x128x128xi8>\n",
        )
    module = parse_module(text, new_context())
    (op,) = ops_named(module.operation, "iree_linalg_ext.attention")
    with pytest.raises(UnsupportedError, match=why):
        attention_placements(op)
