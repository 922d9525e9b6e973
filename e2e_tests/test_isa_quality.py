"""Every matmul variant at a 4096-class size, compiled the whole way down with its default config
on every target: no register spills, no scratch, only 128-bit global loads for A and B, wide
(>= 64-bit) LDS loads for every operand layout (what `mmaflow report` shows). Where the target has no instruction for the variant's dtypes, the error names what is
missing.

NVIDIA spills are counted by ptxas (LLVM's PTX has unlimited virtual registers): the test extra
installs it (nvidia-cuda-nvcc-cu12), and the check fails when it is missing.
"""

from __future__ import annotations

import pytest
from conftest import ALL_TARGETS, dynamic_module, epilogue_module, matmul_module

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.pipeline.pipeline import CodegenOptions
from mmaflow.compiler.report import ptxas_info, ptxas_path
from mmaflow.compiler.target.targets import get_target

# name -> (M, N, K, matmul_module keyword arguments)
VARIANTS = {
    "f16": (4096, 4096, 4096, {}),
    "A^T": (4096, 4096, 4096, {"transpose_a": True}),
    "B^T": (4096, 4096, 4096, {"transpose_b": True}),
    "A^T-B^T": (4096, 4096, 4096, {"transpose_a": True, "transpose_b": True}),
    "batch4": (2048, 2048, 2048, {"batch": 4}),
    "unaligned": (4000, 4000, 4000, {}),
    "bf16": (4096, 4096, 4096, {"in_type": "bf16"}),
    "f16-f16": (4096, 4096, 4096, {"out_type": "f16"}),
    "i8": (4096, 4096, 4096, {"in_type": "i8", "out_type": "i32"}),
    "fp8-fnuz": (4096, 4096, 4096, {"in_type": "f8E4M3FNUZ"}),
    "fp8-ocp": (4096, 4096, 4096, {"in_type": "f8E4M3FN"}),
    "f32": (4096, 4096, 4096, {"in_type": "f32", "out_type": "f32"}),  # CDNA's f32 MFMA
    # dynamic sizes with divisibility promises (so 128-bit loads are possible)
    "dynamic": (None, None, None, {"dynamic": dict(divisors=dict(m=16, n=32, k=64))}),
    "dynamic-rows": (None, 4096, 4096, {"dynamic": dict(m=None, n=4096, k=4096)}),
    # fused epilogues (built with epilogue_module)
    "bias-relu-f16": (
        4096,
        4096,
        4096,
        {
            "epilogue": dict(
                out_type="f16",
                inputs=[("f32", ("n",))],
                body="%t = arith.addf %acc, %x0 : f32\n%z = arith.maximumf %t, %zero : f32\n%res = arith.truncf %z : f32 to f16",
            )
        },
    ),
    "gelu": (
        4096,
        4096,
        4096,
        {
            "epilogue": dict(
                out_type="f32",
                body="%c = arith.constant 0.7071067812 : f32\n%u = arith.mulf %acc, %c : f32\n"
                "%er = math.erf %u : f32\n%one = arith.constant 1.0 : f32\n%p = arith.addf %er, %one : f32\n"
                "%h = arith.constant 0.5 : f32\n%v = arith.mulf %acc, %h : f32\n%res = arith.mulf %v, %p : f32",
            )
        },
    ),
}


def _compile(variant: str, target: str):
    m, n, k, kw = VARIANTS[variant]
    if "epilogue" in kw:
        src = epilogue_module(m, n, k, **kw["epilogue"])
    elif "dynamic" in kw:
        src = dynamic_module(**kw["dynamic"])
    elif get_target(target).warpgroup_mma and kw.get("in_type", "").startswith("f8"):
        # fp8 wgmma reads K-major operands only: the form its kernel takes, B stored N x K
        src = matmul_module(m, n, k, transpose_b=True, **kw)
    else:
        src = matmul_module(m, n, k, **kw)
    try:
        return compile_module(src, target)
    except UnsupportedError as e:
        return e


# Default set: the plain f16 matmul on every target, every other variant on two of one RDNA, one
# CDNA and one NVIDIA target (rotating: each of the three on two thirds of them); every variant
# on every target with `-m exhaustive`.
DEFAULT_TARGETS = ("gfx1100", "gfx942", "sm_80")


def _default(i: int, v: str, t: str) -> bool:
    return v == "f16" or t in (DEFAULT_TARGETS[i % 3], DEFAULT_TARGETS[(i + 1) % 3])


CASES = [
    pytest.param(v, t, id=f"{v}-{t}", marks=() if _default(i, v, t) else pytest.mark.exhaustive)
    for i, v in enumerate(VARIANTS)
    for t in ALL_TARGETS
]


@pytest.mark.parametrize("variant,target", CASES)
def test_no_spills_and_wide_loads(variant, target):
    res = _compile(variant, target)
    if isinstance(res, UnsupportedError):
        kw = VARIANTS[variant][3]
        a, c = kw.get("in_type", "f16"), kw.get("out_type", "f32")
        assert f"no matrix instruction on {target} computes {a} x {a} -> {c}" in str(res), str(res)
        have = [i for i in get_target(target).intrinsics() if (i.a_type, i.c_type) == (a, c)]
        assert have == [], f"{target} has {have[0].name} for {variant}"
        return
    (exe,) = res.taken
    rep = res.reports[exe.name]
    # 128-bit global reads: register loads, or NVIDIA's LDS ring's 16-byte cp.async, or its TMA
    # bulk tensor copies (sm_90a where tiles overhang)
    wide = (
        "bulk_tensor_copy"
        if exe.facts.expect.tma
        else "async_copy_b128"
        if exe.facts.expect.async_copies
        else "global_load_b128"
    )
    assert rep.counts.get(wide, 0) > 0, rep.counts
    assert rep.counts.get("scratch", 0) == 0, rep.counts
    # Register loads from LDS stay wide for every operand layout (the LDS tile is K-innermost).
    narrow_lds = {c: rep.counts[c] for c in ("lds_load_b32", "lds_load_narrow", "lds_load_other") if rep.counts.get(c)}
    assert not narrow_lds, narrow_lds
    if "epilogue" not in VARIANTS[variant][3]:  # (an epilogue's bias loads are as wide as its runs)
        narrow = {
            c: rep.counts[c]
            for c in ("global_load_b64", "global_load_b32", "global_load_narrow", "async_copy_b64", "async_copy_b32")
            if rep.counts.get(c)
        }
        assert not narrow, f"global loads narrower than 128 bits: {narrow}"
    if get_target(target).is_amd:
        assert (rep.vgpr_spills, rep.sgpr_spills, rep.scratch_bytes) == (0, 0, 0), rep.to_dict()
        assert rep.waves_per_simd >= 2, rep.to_dict()
        # Fragments read a K step ahead: at most 1 in 10 matrix instructions of the K loop waits
        # for an LDS read issued since the previous one (the first after each tile's barrier).
        assert rep.matrix_behind_lds_wait * 10 <= rep.loop_counts["matrix"], rep.to_dict()


# ptxas on every variant: the plain f16 matmul on both NVIDIA targets, every other variant on one
# of them (alternating); both with `-m exhaustive`.
NV_CASES = [
    pytest.param(
        v, t, id=f"{v}-{t}", marks=() if v == "f16" or t == ("sm_80", "sm_90a")[i % 2] else pytest.mark.exhaustive
    )
    for i, v in enumerate(VARIANTS)
    for t in ALL_TARGETS
    if not get_target(t).is_amd
]


@pytest.mark.parametrize("variant,target", NV_CASES)
def test_ptxas_reports_no_spills(variant, target):
    assert ptxas_path() is not None, "ptxas is missing: pip install -e '.[test]' installs nvidia-cuda-nvcc-cu12"
    res = _compile(variant, target)
    if isinstance(res, UnsupportedError):
        assert "no matrix instruction" in str(res), res  # checked in full by test_no_spills_and_wide_loads
        return
    (exe,) = res.taken
    info = ptxas_info(res.isa_text[exe.name], get_target(target).iree_arch, exe.facts.config.workgroup_size)
    assert info.get("vgpr_spills") == 0, info
    assert info["vgprs"] <= 255, info


# Shapes below or between whole workgroup tiles: the heuristic shrinks the tile, and must not do so by
# piling the whole tile onto one wave (100^3 once got a 112x112 wave tile: 1164 VGPR spills on gfx1100).
SMALL_DIMS = [1, 15, 17, 33, 48, 65, 100, 127, 129, 200, 255, 1000, 4000]
SMALL_DTYPES = [("f16", "f32"), ("f16", "f16"), ("i8", "i32"), ("f8E4M3FNUZ", "f32"), ("f8E4M3FN", "f32")]


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_default_wave_tile_never_outgrows_the_register_budget(target):
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.common.tiles import matching_intrinsics
    from mmaflow.compiler.kernels.matmul.heuristic import default_config

    tgt = get_target(target)
    checked = 0
    for a, c in SMALL_DTYPES:
        for wave in tgt.wave_sizes:
            if not matching_intrinsics(tgt, Contraction(256, 256, 256, 1, a, a, c), wave):
                continue
            for m in SMALL_DIMS:
                for n in SMALL_DIMS:
                    cfg = default_config(tgt, Contraction(m, n, 64, 1, a, a, c), wave)
                    # 64x64 is the largest per-wave tile the heuristic plans for any target.
                    assert cfg.wave_tile_m <= 64 and cfg.wave_tile_n <= 64, (m, n, a, wave, cfg)
                    assert cfg.tile_m >= min(m, 64) and cfg.tile_n >= min(n, 32), (m, n, cfg)
                    checked += 1
    assert checked >= len(SMALL_DIMS) ** 2


@pytest.mark.parametrize("target", [t for t in ALL_TARGETS if get_target(t).is_amd])
@pytest.mark.parametrize("shape", [(100, 100, 100), (200, 72, 100), (17, 33, 65)], ids=lambda s: "x".join(map(str, s)))
def test_small_unaligned_default_configs_do_not_spill(target, shape):
    res = compile_module(matmul_module(*shape), target)
    (exe,) = res.taken
    rep = res.reports[exe.name]
    assert (rep.vgpr_spills, rep.sgpr_spills, rep.scratch_bytes) == (0, 0, 0), rep.to_dict()


def test_matrix_behind_lds_wait_counts_waits_for_reads_issued_since_the_last_matrix_instruction():
    from mmaflow.compiler.target.isa import matrix_behind_lds_wait

    mma = "v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]"
    # a read, a wait for it, the WMMA: counted (hints such as s_delay_alu issue nothing)
    assert (
        matrix_behind_lds_wait(
            ["ds_load_b128 v[8:11], v1", "s_waitcnt lgkmcnt(0)", "s_delay_alu instid0(VALU_DEP_1)", mma]
        )
        == 1
    )
    # the next step's two reads stay pending: the WMMA's own fragment was read a step earlier
    assert (
        matrix_behind_lds_wait(
            [mma, "ds_load_b128 v[8:11], v1", "ds_load_b128 v[12:15], v1", "s_waitcnt lgkmcnt(2)", mma]
        )
        == 0
    )
    # ... but a wait that needs one of them is counted
    assert (
        matrix_behind_lds_wait(
            [mma, "ds_load_b128 v[8:11], v1", "ds_load_b128 v[12:15], v1", "s_waitcnt lgkmcnt(1)", mma]
        )
        == 1
    )
    # the loop is cyclic: reads at the end of the body feed the first WMMA of the next iteration
    assert matrix_behind_lds_wait(["s_wait_dscnt 0x0", mma, mma, "ds_load_b128 v[8:11], v1"]) == 1
    assert matrix_behind_lds_wait(["s_waitcnt vmcnt(0) lgkmcnt(0)", mma, "v_add_u32 v1, v1, v2"]) == 0
    # ... and the wait may be the body's last instruction, in front of its first WMMA
    assert matrix_behind_lds_wait([mma, "ds_load_b128 v[8:11], v1", "s_wait_dscnt 0x0"]) == 1
    # gfx12's combined waits: dscnt in bits 5:0 (0x100: loads 1, LDS 0; 0x101: LDS 1 left pending)
    assert matrix_behind_lds_wait([mma, "ds_load_b128 v[8:11], v1", "s_wait_loadcnt_dscnt 0x100", mma]) == 1
    assert matrix_behind_lds_wait([mma, "ds_load_b128 v[8:11], v1", "s_wait_loadcnt_dscnt 0x101", mma]) == 0
    # MFMA too; no matrix instruction, nothing to count
    assert (
        matrix_behind_lds_wait(
            [
                "ds_read_b128 v[8:11], v1",
                "s_waitcnt lgkmcnt(0)",
                "v_mfma_f32_16x16x16_f16 v[0:3], v[8:9], v[10:11], v[0:3]",
            ]
        )
        == 1
    )
    assert matrix_behind_lds_wait(["ds_read_b128 v[8:11], v1", "s_waitcnt lgkmcnt(0)"]) == 0


def test_verify_demands_the_planned_barriers_per_k_tile():
    """`KernelPlan.expectations()` records the K loop's barriers per K tile (1 in an LDS ring, 2
    with one LDS tile); verify counts them in the ISA's loop, per K tile of matrix instructions
    (LLVM may unroll the loop by 2), gfx12's s_barrier_signal/s_barrier_wait pair once."""
    from mmaflow.compiler.core.attrs import Expectations
    from mmaflow.compiler.core.errors import VerificationError
    from mmaflow.compiler.target.isa import IsaReport
    from mmaflow.compiler.target.targets import Vendor
    from mmaflow.compiler.verify import check_isa

    mma = "v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]"

    def report(body):
        return IsaReport(
            "k",
            "amdgcn",
            counts={"matrix": 8, "global_load_b128": 4, "barrier": 2},
            has_loop=True,
            loop_counts={"matrix": body.count(mma)},
            loop_listing=body,
        )

    ring = Expectations(128, 8, 4, False, 1)
    one = [mma] * 4 + ["s_barrier"]
    check_isa(report(one * 2), "k", "v_wmma", Vendor.AMD, True, ring)  # unrolled by 2: 2 tiles, 2 barriers
    check_isa(report([mma] * 4 + ["s_barrier_signal -1", "s_barrier_wait -1"]), "k", "v_wmma", Vendor.AMD, True, ring)
    with pytest.raises(VerificationError, match="2 barriers in a K loop of 4 matrix instructions"):
        check_isa(report(one + ["s_barrier"]), "k", "v_wmma", Vendor.AMD, True, ring)
    with pytest.raises(VerificationError, match="the plan has 2 per K tile"):
        check_isa(report(one), "k", "v_wmma", Vendor.AMD, True, Expectations(128, 8, 4, False, 2))


def test_verify_takes_a_loop_without_the_blocks_no_workgroup_stores():
    """A static M (or N) under a wave tile's instruction blocks: the blocks starting past it are never
    stored, and LLVM drops them (M = 1 in 32-row wave tiles: 8 of 16 mma.sync per K tile). The plan
    records the live count; verify takes either count, and no other (the decode P V batch on sm_80 and
    gfx942, which verify refused before, is right on the executor)."""
    from conftest import simulate

    from mmaflow.compiler.core.attrs import Expectations
    from mmaflow.compiler.core.errors import VerificationError
    from mmaflow.compiler.kernels.common.plan import live_blocks
    from mmaflow.compiler.target.isa import IsaReport
    from mmaflow.compiler.target.targets import Vendor
    from mmaflow.compiler.verify import check_isa

    assert [live_blocks(2, 16, m) for m in (1, 16, 17, 100, None)] == [1, 1, 2, 2, 2]
    mma = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"

    def report(n):
        body = [mma] * n + ["bar.sync 0;"]
        return IsaReport(
            "k",
            "ptx",
            counts={"matrix": n, "async_copy_b128": 4, "async_wait": 1, "barrier": 2},
            has_loop=True,
            loop_counts={"matrix": n},
            loop_listing=body,
        )

    live = Expectations(128, 8, 16, True, 1, live_mma_per_k_tile=8)
    check_isa(report(16), "k", "mma.sync", Vendor.NVIDIA, True, live)
    check_isa(report(8), "k", "mma.sync", Vendor.NVIDIA, True, live)
    with pytest.raises(VerificationError, match="1 barriers in a K loop of 8 matrix instructions \\(16 per K tile\\)"):
        check_isa(report(8), "k", "mma.sync", Vendor.NVIDIA, True, Expectations(128, 8, 16, True, 1))
    with pytest.raises(VerificationError, match="K loop of 12 matrix instructions \\(16 or 8 per K tile\\)"):
        check_isa(report(12), "k", "mma.sync", Vendor.NVIDIA, True, live)
    src = matmul_module(1, 128, 512, "f16", batch=2)
    over = {"tile_m": 64, "tile_n": 64, "tile_k": 32, "waves_m": 2, "waves_n": 2}
    for target in ("sm_80", "gfx942"):
        res = compile_module(src, target, options=CodegenOptions(overrides=over))  # verified: no VerificationError
        (exe,) = res.taken
        assert exe.facts.expect.live_mma_per_k_tile == exe.facts.expect.mma_per_k_tile // 2, target
        r = simulate(src, target, over, seed=3)
        assert r.check.passed and not r.stats.races, r.check.detail


def test_gfx950_ring_default_where_it_was_measured_better():
    """The heuristic builds AMD's LDS ring only on gfx950 with both operands K-innermost
    (config._amd_ring): there the ring's kernel holds more waves than one stage's (128 vs 142
    VGPRs at 4096^3: 4 vs 3 waves/SIMD; its 40 KB of LDS leave room for 4 workgroups) with one
    barrier per K tile instead of two. If either figure stops holding, so does the choice."""
    src = matmul_module(4096, 4096, 4096, transpose_b=True)
    ring = compile_module(src, "gfx950")
    one = compile_module(src, "gfx950", options=CodegenOptions(overrides={"stages": 1}))
    (exe,), (exe1,) = ring.taken, one.taken
    assert exe.facts.config.stages == 2 and exe.facts.expect.k_loop_barriers == 1
    rep, rep1 = ring.reports[exe.name], one.reports[exe1.name]
    assert rep.waves_per_simd > rep1.waves_per_simd, (rep.vgprs, rep1.vgprs)
    assert 4 * rep.lds_bytes <= get_target("gfx950").lds_bytes
    assert (rep.vgpr_spills, rep.scratch_bytes) == (0, 0)
    # elsewhere on AMD one stage: an operand transposed into LDS, another AMD target
    for other, target in ((matmul_module(4096, 4096, 4096), "gfx950"), (src, "gfx942"), (src, "gfx1100")):
        (e,) = codegen_module(other, target).taken
        assert e.facts.config.stages == 1, target
