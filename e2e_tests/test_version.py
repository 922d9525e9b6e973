"""Stage `version`: a dynamic dispatch with no divisibility promise on sm_90a holds two kernels,
the warpgroup (wgmma) kernel where the run-time sizes make every operand row whole 16-byte chunks
(K % 8 == 0 and N % 8 == 0 for f16) and the mma.sync kernel elsewhere, each a function and export
of its own: the export the host dispatches has a ``condition`` on the workload and a ``fallback``
to the other (IREE's export specialization; the host program evaluates it at each dispatch).

Each branch is run on the lane executor against numpy in sentinel-filled buffers (``simulate``),
the PTX is verified per kernel (``verify.check_dispatch_isa``) and ptxas keeps it without spills.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import both_routes_and_verify, dynamic_module, simulate

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import VerificationError
from mmaflow.compiler.core.problem import Contraction, DynamicDim
from mmaflow.compiler.driver.bridge import compile_module
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.pipeline.version import plan_version
from mmaflow.compiler.target.isa import parse_isa, parse_ptx, split_kernels
from mmaflow.compiler.target.targets import get_target
from mmaflow.compiler.verify import check_dispatch_isa
from mmaflow.runtime.numerics import EpilogueReference

FAST, SLOW = "WGMMA_F32_64x256x16_F16", "MMA_SYNC_F32_16x8x16_F16"

# (sizes, the kernel they take)
BRANCHES = [
    (dict(m=130, n=264, k=72), FAST),  # partial tiles along M, N and K, rows whole chunks
    (dict(m=129, n=133, k=70), SLOW),  # neither K nor N a multiple of 8
    (dict(m=1, n=1, k=1), SLOW),
    (dict(m=64, n=100, k=72), SLOW),  # K whole chunks, N not: both are needed
    (dict(m=40, n=16, k=36), SLOW),  # N whole chunks, K not
    (dict(m=8, n=8, k=8), FAST),  # one chunk
    (dict(m=5, n=16, k=0), FAST),
]  # empty K: the accumulator stays 0


@pytest.mark.exhaustive
def test_each_branch_matches_numpy():
    src = dynamic_module()
    for sizes, kernel in BRANCHES:
        r = simulate(src, "sm_90a", sizes=sizes, seed=sum(sizes.values()), exact=True)
        assert r.config.intrinsic == kernel, sizes
        assert r.check.passed, (sizes, r.check.line())
        assert not r.stats.races, sizes
    # random (not small-integer) data on the fast branch too
    r = simulate(src, "sm_90a", sizes=BRANCHES[0][0], seed=3)
    assert r.check.passed, r.check.line()


def test_fast_branch_grid_and_instructions():
    """The grid follows the branch taken: 128x256 tiles (wgmma) or 256x128 (mma.sync)."""
    src = dynamic_module()
    fast = simulate(src, "sm_90a", sizes=dict(m=130, n=264, k=72), seed=1, exact=True)
    assert fast.grid == (2, 2, 1)
    assert fast.stats.matrix_ops == 2 * 2 * 2 * 2 * 4  # tiles x K tiles x warpgroups x wgmma per K tile
    slow = simulate(src, "sm_90a", sizes=dict(m=130, n=263, k=72), seed=1, exact=True)
    assert slow.grid == (3, 1, 1)
    assert slow.config.intrinsic == SLOW


def test_bias_epilogue_on_both_branches():
    src = dynamic_module(bias=True)
    ref = EpilogueReference(lambda acc, b: acc + b[None, :], 1.0, 1)
    for sizes, kernel in ((dict(m=30, n=56, k=64), FAST), (dict(m=30, n=50, k=70), SLOW)):
        r = simulate(src, "sm_90a", sizes=sizes, seed=5, epilogue=ref)
        assert r.config.intrinsic == kernel, sizes
        assert r.check.passed, (sizes, r.check.line())


@pytest.mark.exhaustive
def test_versioned_kernel_verifies_and_ptxas_keeps_it(tmp_path):
    from mmaflow.compiler.report import ptxas_path

    res = compile_module(dynamic_module(), "sm_90a")  # verify=True: check_dispatch_isa on each kernel
    (exe,) = res.taken
    assert [v.config.intrinsic for v in exe.facts.versions] == [FAST] and exe.facts.config.intrinsic == SLOW
    assert any("versioned on K % 8 == 0 and N % 8 == 0: WGMMA_F32_64x256x16_F16" in line for line in res.log)
    (v,) = exe.facts.versions
    assert exe.export == v.export and exe.kernel == v.export + "_else"  # (the host dispatches the first)
    main, parts = split_kernels(res.isa_text[exe.name])
    fast_ptx, slow_ptx = parts[v.export], main
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in fast_ptx and "mma.sync" not in fast_ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in slow_ptx and "wgmma" not in slow_ptx
    # the wgmma kernel's tiles overhang (dynamic): TMA copies (wgmma.plan.default_copy), so the
    # executable is PTX 8.3 (hand_back.retarget after the merge)
    assert "cp.async.bulk.tensor" in fast_ptx and ".version 8.3" in fast_ptx
    target = get_target("sm_90a")
    fast, slow = parse_ptx(fast_ptx, v.export, target), parse_ptx(slow_ptx, exe.kernel, target)
    assert fast.has_loop and slow.has_loop
    fast_out, slow_out = (_ptxas(tmp_path, t, ptxas_path()) for t in (fast_ptx, slow_ptx))
    # each kernel is its own function: the wgmma kernel spills nothing (its registers are not the
    # other's); the mma.sync kernel spills as it does alone (today's default for these sizes)
    assert _spill_stores(fast_out) == 0 and "serialized" not in fast_out.lower(), fast_out
    alone = compile_module(
        dynamic_module(), "sm_90a", options=CodegenOptions(overrides=dict(tile_m=256, tile_n=128, tile_k=32))
    ).isa_text
    assert _spill_stores(slow_out) <= _spill_stores(_ptxas(tmp_path, next(iter(alone.values())), ptxas_path()))
    # Each version is checked against its own expectations: a wrong one for the fast kernel fails.
    report = res.reports[exe.name]
    wrong = replace(exe.facts, versions=(replace(v, expect=replace(v.expect, k_loop_barriers=3)),))
    with pytest.raises(VerificationError, match=r"K % 8 == 0 and N % 8 == 0: .*3 per K tile"):
        check_dispatch_isa(report, res.isa_text[exe.name], exe.name, wrong)


def test_versions_are_exports_the_host_selects(tmp_path):
    """The handed-back executable holds a function, ``iree_codegen.dispatch_config`` and export per
    kernel: the host's export (the dispatch's name) with the version's condition on the workload
    and ``fallback`` to ``<name>_else``; each its own workgroup size. In the .vmfb the host program
    branches on the workload between looking up the two functions (``iree-dump-module``)."""
    import shutil
    import sys
    from pathlib import Path

    from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module, str_attr

    res = compile_module(dynamic_module(None, 4096, 4096, transpose_b=True), "sm_90a")
    (exe,) = res.taken
    (v,) = exe.facts.versions
    assert v.condition == "M <= 32" and exe.export == v.export and exe.kernel == v.export + "_else"
    module = parse_module(exe.text.split("// ----- mmaflow version")[0], new_context())
    exports = {str_attr(e, "sym_name"): e for e in ops_named(module.operation, "hal.executable.export")}
    assert set(exports) == {v.export, exe.kernel}
    first = exports[v.export]
    assert str(first.attributes["condition_fallback"]) == f"@{exe.kernel}"
    assert "condition_fallback" not in exports[exe.kernel].attributes
    cond = str(first)  # the export, its condition region printed
    assert "condition(" in cond and "arith.cmpi ule" in cond and "hal.return" in cond, cond
    sizes = {
        str_attr(f, "sym_name"): str(f.attributes["translation_info"])
        for f in ops_named(module.operation, "func.func")
        if "translation_info" in f.attributes
    }
    assert set(sizes) == {v.export, exe.kernel}
    # the decode version plans its own workgroup (no longer the warpgroup kernel's)
    assert f"workgroup_size = [{v.config.workgroup_size}, 1, 1]" in sizes[v.export], sizes
    dump = shutil.which("iree-dump-module") or str(Path(sys.executable).parent / "iree-dump-module")
    vmfb = tmp_path / "m.vmfb"
    vmfb.write_bytes(res.vmfb)
    out = subprocess.run([dump, str(vmfb)], capture_output=True, text=True).stdout
    body = out[out.index("vm.func @matmul") :]
    body = body[: body.index("\nvm.export", 1)] if "\nvm.export" in body else body
    # the workload's test (M <= 32: not 32 < M), a branch on it, a function looked up on each side
    lookups = [i for i, line in enumerate(body.splitlines()) if "@hal.executable.lookup.function" in line]
    lines = body.splitlines()
    branch = next(i for i, line in enumerate(lines) if "vm.cond_br" in line)
    assert len(lookups) == 2 and branch < min(lookups), body[:3000]
    assert any("vm.cmp.lt.i64.u" in line for line in lines[:branch]), body[:3000]


def _ptxas(tmp_path, ptx: str, ptxas: str) -> str:
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    r = subprocess.run(
        [ptxas, "-arch=sm_90a", "-v", str(src), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def _spill_stores(ptxas_out: str) -> int:
    return int(re.search(r"(\d+) bytes spill stores", ptxas_out).group(1))


@pytest.mark.parametrize(
    "src,target,overrides",
    [
        (dynamic_module(divisors=dict(n=8, k=8)), "sm_90a", None),  # promised: the fast kernel alone
        (dynamic_module(), "sm_80", None),  # no warpgroup MMA
        (dynamic_module(), "sm_90a", {"tile_m": 128, "tile_n": 128, "tile_k": 32}),  # configured by hand
        (dynamic_module(m=None, n=136, k=200), "sm_90a", None),  # dynamic rows only: rows are whole chunks
    ],
    ids=["promised", "sm_80", "overrides", "rows"],
)
def test_not_versioned(src, target, overrides):
    res = compile_module(src, target, options=CodegenOptions(overrides=overrides or {}))
    (exe,) = res.taken
    assert exe.facts.versions == ()
    assert not any("versioned" in line for line in res.log)


def _problem(b_transposed=False, divisors=None):
    divisors = divisors or {}
    dyn = tuple(DynamicDim(d, (i,), ((i, -1),), divisors.get(d, 1)) for i, d in enumerate("mnk"))
    return Contraction(
        m=None,
        n=None,
        k=None,
        batch=1,
        a_type="f16",
        b_type="f16",
        c_type="f32",
        b_transposed=b_transposed,
        dynamic=dyn,
    )


def test_plan_names_the_row_dimensions():
    """The promised dims are those the operands' global rows run along and lack the promise."""
    sm90 = get_target("sm_90a")
    assert plan_version(sm90, _problem(), None).dims == ("k", "n")
    assert plan_version(sm90, _problem(b_transposed=True), None).dims == ("k",)  # B^T: rows along K
    assert plan_version(sm90, _problem(divisors=dict(k=8)), None).dims == ("n",)
    assert plan_version(sm90, _problem(divisors=dict(k=8, n=16)), None) is None
    assert plan_version(get_target("sm_80"), _problem(), None) is None
    small = replace(_problem(), m=64, n=64, dynamic=_problem().dynamic[2:])  # only K dynamic: 1 tile either way
    why = []
    assert plan_version(sm90, small, None, why) is None
    assert why == ["K % 8 == 0 would buy the same kernel (MMA_SYNC_F32_16x8x16_F16)"], why
    res = compile_module(dynamic_module(m=64, n=64, k=None), "sm_90a", verify=False)
    assert any("not versioned: K % 8 == 0 would buy the same kernel" in line for line in res.log), res.log
    plan = plan_version(sm90, _problem(), None)
    assert plan.condition() == "K % 8 == 0 and N % 8 == 0"
    assert (plan.fast.intrinsic, plan.slow.intrinsic) == (FAST, SLOW)


def test_version_record_round_trips():
    from mmaflow.compiler.pipeline.results import DispatchFacts

    res = compile_module(dynamic_module(), "sm_90a", verify=False)
    (exe,) = res.taken
    again = DispatchFacts.from_wire(exe.facts.to_wire())
    assert again.versions == exe.facts.versions
    assert again.versions[0].problem.dynamic_dim("k").divisor == 8
    assert attrs.VERSIONS in exe.text


@pytest.mark.exhaustive
def test_model_check_takes_the_kernel_of_the_call(tmp_path):
    """`mmaflow run --device sim` (model_check, against IREE's own dispatch IR) at sizes taking
    each branch: the tiles it checks are those of the kernel the push constants choose."""
    import sys
    from pathlib import Path

    src = tmp_path / "dyn.mlir"
    src.write_text(dynamic_module())
    mmaflow = Path(sys.executable).parent / "mmaflow"
    for dims, matrix in (("m=130,n=264,k=72", "64 matrix"), ("m=129,n=133,k=70", "3072 matrix")):
        r = subprocess.run(
            [str(mmaflow), "run", str(src), "--target", "sm_90a", "--device", "sim", "--dims", dims],
            capture_output=True,
            text=True,
        )
        out = r.stdout + r.stderr
        assert r.returncode == 0 and "PASS: 1 of 1 checks passed" in out, out
        assert f"{matrix} instructions (per wave)" in out, out


def test_the_hook_route_builds_the_versions_and_verify_accepts_them(tmp_path):
    """A dynamic-M ``nn.Linear`` on sm_90a through the preprocess hook (`iree-compile $(mmaflow
    flags)`) gives the .vmfb `mmaflow compile` gives, both kernels' exports in it; `mmaflow verify`
    finds each kernel in the file's PTX and checks it against its own plan."""
    from mmaflow.compiler.verify import check_dispatch_isa

    src = tmp_path / "dyn.mlir"
    src.write_text(dynamic_module(None, 4096, 4096, transpose_b=True))
    _, ours, v = both_routes_and_verify(src, "sm_90a", tmp_path)
    assert "mmaflow: verified matmul_dispatch_0: M <= 32: " in ours, ours
    assert "mmaflow: verified matmul_dispatch_0 in stock.vmfb: " in v, v
    # a version whose kernel is missing from the ISA is refused (not checked on the other kernel)
    res = compile_module(src.read_text(), "sm_90a")
    (exe,) = res.taken
    main, _ = split_kernels(res.isa_text[exe.name])
    with pytest.raises(VerificationError, match="holds no kernel"):
        check_dispatch_isa(res.reports[exe.name], main, exe.name, exe.facts)


def test_a_dispatchs_kernels_launch_with_their_shared_memory_together(tmp_path):
    """IREE 3.13's NVVM lowering lays the shared memory of every kernel of a variant end to end and
    launches each export with the total: the .vmfb's exports (``vmfb.cuda_exports``) of a dynamic-M
    ``nn.Linear`` on sm_90a (the decode version beside the warpgroup kernel) both carry the sum the
    planner counts (``launch_shared_bytes``), which the compile holds to a workgroup's most. On AMD
    each kernel keeps its own (the HSACO's group segment of each)."""
    from mmaflow.compiler.kernels import registry
    from mmaflow.compiler.pipeline.version import launch_shared_bytes

    src = dynamic_module(None, 4096, 4096, transpose_b=True)
    for name in ("sm_90a", "gfx942"):
        t = get_target(name)
        res = compile_module(src, name)
        (exe,) = res.taken
        (v,) = exe.facts.versions
        own = {
            k: registry.shared_bytes(t, c, t.intrinsic(c.intrinsic), exe.facts.problem)
            for k, c in ((v.export, v.config), (exe.kernel, exe.facts.config))
        }
        assert all(own.values()) and len(set(own.values())) == 2, own
        together = launch_shared_bytes(t, exe.facts.problem, v.config, exe.facts.config)
        if name == "sm_90a":
            assert together == sum(own.values()) <= t.lds_bytes
            assert {k: res.launch_shared[k] for k in exe.kernels()} == {k: together for k in own}
            # `mmaflow report`'s LDS bytes are the launch's
            (tmp_path / "d.mlir").write_text(src)
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "mmaflow.compiler.cli",
                    "report",
                    str(tmp_path / "d.mlir"),
                    "--target",
                    name,
                    "--json",
                ],
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, r.stderr
            (rep,) = json.loads(r.stdout)["mmaflow"].values()
            assert rep["lds_bytes"] == together, rep
        else:
            assert together == max(own.values()) and res.launch_shared == {}
            main, parts = split_kernels(res.isa_text[exe.name])
            assert parse_isa(main, exe.kernel, t).lds_bytes == own[exe.kernel]
            assert parse_isa(parts[v.export], v.export, t).lds_bytes == own[v.export]


def test_kernels_whose_shared_memory_does_not_fit_together_are_not_versioned():
    """sm_80, a dynamic-M 4096 x 4096 ``nn.Linear``: the decode version (32 KB) beside the tiled
    kernel's ring would launch each with more than an A100 workgroup may have, so the dispatch stays
    one kernel and the log says why; N = 1024 fits and is versioned."""
    sm80 = get_target("sm_80")

    def problem(n):
        return Contraction(
            None, n, 4096, 1, "f16", "f16", "f32", b_transposed=True, dynamic=(DynamicDim("m", (0,), ((0, 1),), 1),)
        )

    why = []
    assert plan_version(sm80, problem(4096), None, why) is None
    assert len(why) == 1 and "more than sm_80's 166912 (IREE launches each with the sum)" in why[0], why
    assert plan_version(sm80, problem(1024), None).condition() == "M <= 32"
    res = compile_module(dynamic_module(None, 4096, 4096, transpose_b=True), "sm_80")
    (exe,) = res.taken
    assert exe.facts.versions == ()
    assert any("not versioned: the kernel for M <= 32 and the other need" in line for line in res.log), res.log
    # N = 1024 is versioned, and the log says what it costs the other kernel past the bound
    res = compile_module(dynamic_module(None, 1024, 4096, transpose_b=True), "sm_80")
    (exe,) = res.taken
    assert [v.condition for v in exe.facts.versions] == ["M <= 32"]
    note = (
        "versioned: where M <= 32 does not hold, the other kernel launches with 114688 bytes of shared memory "
        "(its own 81920): room for 1 workgroup(s) a SM where it alone has room for 2"
    )
    assert any(note in line for line in res.log), res.log
    assert res.launch_shared[exe.kernel] == 114688


def test_the_launch_check_and_the_export_reader_refuse_what_they_cannot_take():
    """``check_launch_shared``: a kernel over a workgroup's shared memory, or missing from the .vmfb's
    exports, is a VerificationError naming it; ``cuda_exports`` refuses bytes that are not a CUDA
    executable with an InputError, not a traceback."""
    from mmaflow.compiler.core.errors import InputError
    from mmaflow.compiler.driver.bridge import check_launch_shared
    from mmaflow.compiler.driver.vmfb import cuda_exports, executables

    t = get_target("sm_90a")
    res = compile_module(dynamic_module(None, 4096, 4096, transpose_b=True), "sm_90a")
    (exe,) = res.taken
    check_launch_shared(dict.fromkeys(exe.kernels(), t.lds_bytes), res.taken, t)  # at the limit: fine
    over = {**dict.fromkeys(exe.kernels(), t.lds_bytes), exe.kernel: t.lds_bytes + 1}
    with pytest.raises(VerificationError, match=f"its kernel {exe.kernel} with {t.lds_bytes + 1} bytes"):
        check_launch_shared(over, res.taken, t)
    with pytest.raises(VerificationError, match=f"{exe.name}: the .vmfb has no CUDA export for kernel"):
        check_launch_shared({exe.kernel: 1024}, res.taken, t)
    (blob,) = executables(res.vmfb).values()
    assert sorted(e.kernel for e in cuda_exports(blob)) == sorted(exe.kernels())
    assert all(e.block == (256, 1, 1) for e in cuda_exports(blob))
    assert cuda_exports(blob + bytes(16)) == cuda_exports(blob)  # (the header gives the content's length)
    import struct

    def length(n: int) -> bytes:  # the blob with the header's content length set to n
        return blob[:8] + struct.pack("<Q", n) + blob[16:]

    def at64(off: int, value: bytes) -> bytes:  # the content's bytes at ``off`` replaced
        return blob[: 64 + off] + value + blob[64 + off + len(value) :]

    root = struct.unpack_from("<I", blob, 64)[0]
    bad = [
        b"",
        b"CDA1" + bytes(60),
        blob[:100],
        b"XXXX" + blob[4:],
        length(len(blob)),  # past the blob
        length(4),
        at64(4, b"XXXX"),  # not the flatbuffer's identifier
        at64(0, struct.pack("<I", len(blob))),  # the root past the content
        at64(root, struct.pack("<i", -(len(blob)))),  # the root's vtable past the content's end
        at64(root, struct.pack("<i", root + 64)),  # ... before its start
    ]
    for b in bad:
        with pytest.raises(InputError, match="not a CUDA executable"):
            cuda_exports(b)


def test_a_small_m_version_is_left_out_where_the_other_kernel_fills_the_gpu():
    """sm_90a: the decode version launches with the warpgroup kernel's ring beside its own shared
    memory, one workgroup a SM; an LM head's 128256 columns give the warpgroup kernel 501 tiles at
    M <= 32, a tile for every SM already, so the dispatch stays one kernel (measured on the H200:
    docs/PERFORMANCE.md); q's 4096 columns give it 16, and the decode version is kept."""
    sm90 = get_target("sm_90a")

    def problem(n):
        dyn = (DynamicDim("m", (0,), ((0, 1),), 1),)
        return Contraction(None, n, 4096, 1, "f16", "f16", "f32", b_transposed=True, dynamic=dyn)

    why = []
    assert plan_version(sm90, problem(128256), None, why) is None
    assert len(why) == 1 and "one workgroup a SM" in why[0] and "501 tiles at that M fill the 132 SMs" in why[0], why
    assert plan_version(sm90, problem(4096), None).condition() == "M <= 32"


def test_report_gives_each_kernel_of_a_turbine_model_its_launch(tmp_path):
    """`mmaflow report --json` on an iree-turbine export (entry points ``main$async``: the PTX and the
    .vmfb's exports name its kernels ``main_async_...``): every taken kernel's LDS bytes are the
    shared memory its export launches with, the matmuls', the copies' and the attention's."""
    from pathlib import Path

    from mmaflow.compiler.driver.bridge import launch_shared_of

    src = Path(__file__).parent / "models" / "gpt2_sdpa_f16.mlir"
    t = get_target("sm_90a")
    res = compile_module(src.read_text(), "sm_90a", source_name=src.name)
    assert any("$" in e.kernel for e in res.taken)
    r = subprocess.run(
        [sys.executable, "-m", "mmaflow.compiler.cli", "report", str(src), "--target", "sm_90a", "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    mine = json.loads(r.stdout)["mmaflow"]
    assert len(mine) == len(res.taken) >= 5
    for exe in res.taken:
        assert mine[exe.export]["lds_bytes"] == launch_shared_of(res.launch_shared, exe.kernel, t), exe.name


def test_workgroups_a_sm_by_shared_memory():
    """``limits.resident_by_shared`` against the CUDA occupancy rule (an SM holds a workgroup's most plus
    1 KB, each workgroup reserving 1 KB beside its own): two 113 KB workgroups on sm_90a, not a byte
    more; the warpgroup kernel's ring and a decode version together one; sm_80's tiled kernel two
    alone, one beside a 32 KB decode version."""
    from mmaflow.compiler.target.limits import resident_by_shared

    sm90, sm80 = get_target("sm_90a").lds_bytes, get_target("sm_80").lds_bytes
    assert resident_by_shared(115712, sm90) == 2 and resident_by_shared(115713, sm90) == 1
    assert resident_by_shared(230688, sm90) == 1 and resident_by_shared(0, sm90) == 228
    assert resident_by_shared(81920, sm80) == 2 and resident_by_shared(114688, sm80) == 1
