"""fp8 (f8E4M3FN / f8E5M2) x fp8 -> f32 on the sm_90a warpgroup-MMA kernel (``kernels/wgmma/plan.py``,
``kernels/wgmma/rewrite.py``): wgmma m64nNk32 from 128B-swizzled K-major shared-memory tiles of
128 x 128 bytes (K tile = 128 elements: one swizzle line), filled by 16-byte cp.async copies.

Numerics on the lane executor, whose wgmma is the independent ISA model reading the shared-memory
bytes as fp8 (``runtime/isa/wgmma.py``):

- ``exact=True``: inputs in {-2, ..., 2}, exact in both fp8 types; every product and partial sum
  is an integer of magnitude <= 4K, exact in f32 for these K: compared with zero tolerance, so
  one misplaced byte fails.
- random: uniform in [-2, 2) rounded to the fp8 type (``numerics.random_matrix``, ml_dtypes);
  the reference is the float64 product of the *rounded* inputs (products of two fp8 values are
  exact in f32: 4 + 4 significand bits), so the only error is the f32 accumulation, at most
  K * 2^-24 * sum_k |a_ik||b_kj| (Higham's gamma_K) plus the final rounding
  (``numerics.matmul_reference``).

fp8 wgmma has no transpose (imm-trans is for 16-bit types), so both operands must be K-major in
shared memory: A as M x K and B as N x K (``transpose_b``). The other forms and rows that are not
whole 16-byte chunks (K % 16) are refused with the reason; select then leaves the dispatch to
IREE (no mma.sync kernel computes fp8). Mixed pairs (e4m3 x e5m2, e5m2 x e4m3) keep A's and B's
slots in two allocations, one per element type.
"""

from __future__ import annotations

import re

import pytest
from conftest import handed_back, mutant, simulate, sm90a_ptxas, spread

from mmaflow.compiler.core.errors import MmaflowError, UnsupportedError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.kernels.registry import explain, resolve
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.executor import ExecutorError
from mmaflow.runtime.modules import epilogue_module, matmul_module
from mmaflow.runtime.simulate import check_matmul

SM90 = get_target("sm_90a")
E4M3, E5M2 = "f8E4M3FN", "f8E5M2"


def _wg(n, t=E4M3):
    return f"WGMMA_F32_64x{n}x32_{t.upper()}"


def _sim(src, overrides, exact=False, seed=0):
    text = handed_back(src, "sm_90a", tuple(sorted(overrides.items())))
    return check_matmul(parse_module(text, new_context()), exact=exact, seed=seed)


# In the default set each type and data kind on one of the kernels (stages 1 or 3), both with
# `-m exhaustive` (``conftest.spread``; so for the spread cases below).
@pytest.mark.parametrize(
    "t,exact,stages",
    spread(
        [(E4M3, True), (E4M3, False), (E5M2, True), (E5M2, False)],
        [1, 3],
        1,
        lambda r: f"{r[0]}-{'ints' if r[1] else 'random'}",
    ),
)
def test_fp8_matches_numpy(t, stages, exact):
    # K = 384: 3 K tiles of 128, every slot of the 3-slot ring used once
    r = _sim(matmul_module(128, 128, 384, t, transpose_b=True), {"intrinsic": _wg(128, t), "stages": stages}, exact)
    assert r.check.passed, r.check.line()
    assert not r.stats.races
    assert r.stats.matrix_ops == (384 // 128) * 4 * 2  # 4 wgmma m64n128k32 per K tile and warpgroup


@pytest.mark.parametrize("t", [E4M3, E5M2])
def test_fp8_default_ring_reuses_slots(t):
    """The heuristic's kernel for a small problem (64x128 tiles, one warpgroup; 4-slot ring), K of
    5 tiles: every slot reused."""
    src = matmul_module(128, 256, 640, t, transpose_b=True)
    text = handed_back(src, "sm_90a")
    assert _wg(128, t) in text
    for exact, seed in ((True, 1), (False, 2)):
        r = check_matmul(parse_module(text, new_context()), exact=exact, seed=seed)
        assert r.check.passed, r.check.line()
        assert not r.stats.races


@pytest.mark.parametrize(
    "m,n,k,wn,stages",
    spread([(200, 136, 272, 128), (72, 264, 144, 128)], [1, 4], 1, lambda r: {200: "mnk", 72: "n-k-16"}[r[0]]),
)
def test_fp8_partial_tiles(m, n, k, wn, stages):
    """M, N, K not multiples of the tile (K a multiple of 16: whole 16-byte chunks): chunks past
    the true extent are zero-filled, stores past it dropped."""
    src = matmul_module(m, n, k, E4M3, transpose_b=True)
    for exact in (True, False):
        r = _sim(src, {"intrinsic": _wg(wn), "stages": stages}, exact, seed=3)
        assert r.check.passed, r.check.line()
        assert not r.stats.races


def test_fp8_batch_one_warpgroup():
    r = _sim(
        matmul_module(40, 72, 160, E5M2, transpose_b=True, batch=2),
        {"intrinsic": _wg(64, E5M2), "tile_m": 64, "stages": 2},
        exact=True,
    )
    assert r.check.passed, r.check.line()
    assert r.stats.matrix_ops == 2 * 2 * 2 * 4  # batch 2 x 2 N tiles x 2 K tiles x 4 steps, one warpgroup


def test_fp8_fused_bias_relu_f16():
    """The register epilogue is the f16 kernel's, unchanged: bias over N + relu, stored as f16."""
    from mmaflow.runtime.modules import EPILOGUES
    from mmaflow.runtime.numerics import EPILOGUE_REFERENCES

    src = epilogue_module(136, 256, 256, E4M3, transpose_b=True, **EPILOGUES["bias_n_relu_f16"])
    r = simulate(
        src, "sm_90a", {"intrinsic": _wg(128), "stages": 3}, seed=5, epilogue=EPILOGUE_REFERENCES["bias_n_relu_f16"]
    )
    assert r.check.passed, r.check.line()
    assert not r.stats.races


DYNAMIC_ROWS = """func.func @mm(%a0: tensor<?x256xf8E4M3FN>, %b: tensor<136x256xf8E4M3FN>) -> tensor<?x136xf32> {
  %c0 = arith.constant 0 : index
  %m0 = tensor.dim %a0, %c0 : tensor<?x256xf8E4M3FN>
  %m = arith.addi %m0, %c0 : index
  %a = flow.tensor.reshape %a0 : tensor<?x256xf8E4M3FN>{%m0} -> tensor<?x256xf8E4M3FN>{%m}
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x136xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x136xf32>) -> tensor<?x136xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
       ins(%a, %b : tensor<?x256xf8E4M3FN>, tensor<136x256xf8E4M3FN>) outs(%f : tensor<?x136xf32>) {
  ^bb0(%x: f8E4M3FN, %y: f8E4M3FN, %acc: f32):
    %xe = arith.extf %x : f8E4M3FN to f32
    %ye = arith.extf %y : f8E4M3FN to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x136xf32>
  return %r : tensor<?x136xf32>
}
"""


def test_fp8_dynamic_rows():
    """Dynamic M (inference rows) times static N x K weights: one kernel (the heuristic's, M
    estimated), run at several row counts."""
    for m in (1, 77, 130):
        r = simulate(DYNAMIC_ROWS, "sm_90a", {}, sizes=dict(m=m), seed=m, exact=m != 77)
        assert r.check.passed, (m, r.check.line())
        assert r.config.intrinsic == _wg(128)


@pytest.mark.parametrize(
    "a,b,stages",
    spread([(E4M3, E5M2), (E5M2, E4M3)], [1, 3], 1, lambda r: "e4m3xe5m2" if r[0] == E4M3 else "e5m2xe4m3"),
)
def test_fp8_mixed_pairs(a, b, stages):
    """A and B of different fp8 types: two shared-memory allocations (A's slots, B's slots), each
    rounded up to 1024 bytes; partial M, N, K tiles."""
    src = matmul_module(200, 136, 272, a, transpose_b=True, b_type=b)
    text = handed_back(src, "sm_90a", (("stages", stages),))
    assert (
        text.count("memref.alloc()") == 2
        and "xf8E4M3FN, #gpu.address_space<workgroup>>" in text
        and "xf8E5M2, #gpu.address_space<workgroup>>" in text
    )
    for exact in (True, False):
        r = check_matmul(parse_module(text, new_context()), exact=exact, seed=4)
        assert r.check.passed, r.check.line()
        assert not r.stats.races
        assert r.config.intrinsic == f"WGMMA_F32_64x128x32_{a.upper()}_{b.upper()}"


def test_fp8_mixed_pair_types_matter():
    """Mutation: the wgmma told B is e4m3 when its bytes are e5m2 (the executor reads each operand
    in the op's own type): the exact check fails."""
    text = handed_back(matmul_module(128, 128, 256, E4M3, transpose_b=True, b_type=E5M2), "sm_90a")
    assert "B[<e5m2>" in text
    r = check_matmul(parse_module(text.replace("B[<e5m2>", "B[<e4m3>"), new_context()), exact=True)
    assert not r.check.passed


def _ring_text(stages, skew=0):
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    return mutant(
        WgmmaRewriter,
        "_slot_skew",
        skew,
        matmul_module(128, 128, 640, E4M3, transpose_b=True),
        overrides={"intrinsic": _wg(128), "stages": stages},
    ).text


@pytest.mark.parametrize("stages", [2, 4])
def test_fp8_slot_reused_one_stage_early_fails(stages):
    """Mutation (as for f16): the copy of tile t+A into the slot a wgmma group still reads."""
    ok = check_matmul(parse_module(_ring_text(stages), new_context()), exact=True)
    assert ok.check.passed, ok.check.line()
    with pytest.raises(ExecutorError, match="that a wgmma.mma_async still reads"):
        check_matmul(parse_module(_ring_text(stages, skew=1), new_context()), exact=True)


def test_fp8_k_step_is_32_bytes(monkeypatch):
    """Mutation: K steps of 16 elements (the 16-bit kernel's) inside the fp8 line: the 4 wgmmas
    of a K tile would read its first 64 bytes, half of them twice; the exact check catches it."""
    from mmaflow.compiler.kernels.wgmma.plan import WgmmaPlan

    def a_offset(self, warpgroup, step):
        return self.a.smem.linear_offset(64 * warpgroup, 16 * step)

    def descriptor(self, name, warpgroup, step):
        if name == "A":
            return self.a.smem.descriptor(self.a.offset, 64 * warpgroup, 16 * step, 64, 16)
        return self.b.smem.descriptor(self.b.offset, 0, 16 * step, self.intrinsic.n, 16)

    monkeypatch.setattr(WgmmaPlan, "a_offset", a_offset)
    monkeypatch.setattr(WgmmaPlan, "descriptor", descriptor)
    res = codegen_module(
        matmul_module(128, 128, 256, E4M3, transpose_b=True),
        "sm_90a",
        options=CodegenOptions(overrides={"intrinsic": _wg(128), "stages": 2}),
    )
    (exe,) = res.taken
    r = check_matmul(parse_module(exe.text, new_context()), exact=True)
    assert not r.check.passed, r.check.line()


# ---- promotion: the measured fp8 accumulator on the executor ---------------------------------------


def _promotion_text(promote: bool, stages: int = 4, k: int = 1024) -> str:
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    return mutant(
        WgmmaRewriter,
        "_fp8_promotion",
        promote,
        matmul_module(64, 128, k, E4M3, transpose_b=True),
        overrides={"intrinsic": _wg(128), "tile_m": 64, "stages": stages},
    ).text


@pytest.mark.parametrize("stages", [1, 4])
def test_fp8_without_promotion_fails_the_f32_bound(stages):
    """On the executor (the ISA model's measured fp8 accumulator), K = 1024 (8 K tiles), random e4m3
    in [-2, 2): the kernel that lets every wgmma accumulate into its one accumulator (as measured
    on the H200: 812 of 16.7M outputs outside the f32 bound at 4096^3) fails the f32 bound
    K * 2^-24 * sum |a||b| by 2.5x; the promoted kernel (each K tile's partial added in f32)
    passes it with room, and reproduces the modelled arithmetic bit for bit."""
    bad = check_matmul(parse_module(_promotion_text(False, stages), new_context()), seed=0)
    assert not bad.bound_check.passed and bad.bound_check.worst_ratio > 1.5, bad.bound_check.line()
    assert not bad.check.passed  # nor is it the promoted kernel's arithmetic
    good = check_matmul(parse_module(_promotion_text(True, stages), new_context()), seed=0)
    assert good.check.passed, good.check.line()  # bit for bit: numerics.fp8_tensor_core_reference
    assert good.bound_check.passed and good.bound_check.worst_ratio < 0.6, good.bound_check.line()
    assert not good.stats.races


def test_fp8_promotion_before_its_wait_is_refused(monkeypatch):
    """Mutation: every wgmma.wait_group leaves one group running (1 instead of 0), so the tile's
    partial is added while its wgmmas may still write it: the executor refuses the read."""
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    wait = WgmmaRewriter._wgmma_wait
    monkeypatch.setattr(WgmmaRewriter, "_wgmma_wait", lambda self, em, pending: wait(self, em, max(pending, 1)))
    with pytest.raises(ExecutorError, match="reads a wgmma accumulator before wgmma.wait_group covers"):
        check_matmul(parse_module(_promotion_text(True, 4, k=256), new_context()), exact=True)


def test_fp8_small_k_is_checked_against_the_modelled_arithmetic():
    """At small K the f32 bound (which shrinks as K^2) is tighter than even a promoted tile's 14-bit
    partial: at 128x128x384 the promoted kernel's arithmetic is outside it (about 2x) -- as cuBLAS's
    per-128-k promotion would be -- so the kernel tests compare with the modelled arithmetic
    (``SimResult.check``), and the f32 bound is the verdict at large K (the bench: 4096^3)."""
    text = handed_back(
        matmul_module(128, 128, 384, E4M3, transpose_b=True), "sm_90a", (("intrinsic", _wg(128)), ("stages", 3))
    )
    r = check_matmul(parse_module(text, new_context()), seed=0)
    assert r.check.passed, r.check.line()
    assert not r.bound_check.passed, r.bound_check.line()


def _pairs_text(monkeypatch, m, n, k, stages, skew=0, b_type=None):
    """The kernel with ``WgmmaPlan.fp8_pair_tiles`` (two K tiles per loop iteration, wait_group 1
    then 0), through codegen_module (handed_back's cache would return the default kernel)."""
    from mmaflow.compiler.kernels.wgmma.plan import WgmmaPlan
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    monkeypatch.setattr(WgmmaPlan, "fp8_pair_tiles", True)
    monkeypatch.setattr(WgmmaRewriter, "_slot_skew", skew)
    res = codegen_module(
        matmul_module(m, n, k, E4M3, transpose_b=True, b_type=b_type),
        "sm_90a",
        options=CodegenOptions(
            overrides={
                "intrinsic": _wg(128) if b_type is None else f"WGMMA_F32_64x128x32_{E4M3.upper()}_{b_type.upper()}",
                "stages": stages,
            }
        ),
    )
    (exe,) = res.taken
    return exe.text


_PAIR = {(128, 128, 384, None): "odd-tiles", (200, 136, 272, None): "partial", (72, 136, 656, E5M2): "mixed-6-tiles"}


@pytest.mark.parametrize("m,n,k,b,stages", spread(list(_PAIR), [3, 4], 1, _PAIR.get))
def test_fp8_pair_tiles(monkeypatch, m, n, k, b, stages):
    """``fp8_pair_tiles``: the second tile's wgmmas issued while the first's run, both partials
    added after wait_group 0; an odd K tile count runs a zero-filled tile past K (partial 0). Bit
    for bit the per-K-tile promotion of the default kernel, no races, the executor's order checks
    hold."""
    text = _pairs_text(monkeypatch, m, n, k, stages, b_type=b)
    assert "nvvm.wgmma.wait.group.sync.aligned 1" in text and "nvvm.wgmma.wait.group.sync.aligned 0" in text
    for exact in (True, False):
        r = check_matmul(parse_module(text, new_context()), exact=exact, seed=7)
        assert r.check.passed, r.check.line()
        assert not r.stats.races


def test_fp8_pair_tiles_slot_reused_early_fails(monkeypatch):
    with pytest.raises(ExecutorError, match="that a wgmma.mma_async still reads"):
        check_matmul(parse_module(_pairs_text(monkeypatch, 128, 128, 640, 4, skew=1), new_context()), exact=True)


def test_fp8_pair_tiles_ptxas(tmp_path, monkeypatch):
    """ptxas (sm_90a): no spills, no serialized wgmma (C7514: what wait_group 1 in both tiles of
    the pair gives), no injected wait (C7517); 250 registers with ptxas 12.9."""
    from mmaflow.compiler.kernels.wgmma.plan import WgmmaPlan

    monkeypatch.setattr(WgmmaPlan, "fp8_pair_tiles", True)
    res = compile_module(matmul_module(2048, 2048, 2048, E4M3, transpose_b=True), "sm_90a")
    (ptx,) = res.isa_text.values()
    assert "wgmma.wait_group.sync.aligned \t1;" in ptx or "wgmma.wait_group.sync.aligned 1;" in ptx
    out = sm90a_ptxas(tmp_path, ptx)
    assert "C7514" not in out and "C7517" not in out, out


# ---- configure: the heuristic and the refusals -----------------------------------------------------


def _p(m=4096, n=4096, k=4096, a=E4M3, b=E4M3, ta=False, tb=True):
    return Contraction(m=m, n=n, k=k, batch=1, a_type=a, b_type=b, c_type="f32", a_transposed=ta, b_transposed=tb)


def test_heuristic_takes_fp8_on_the_warpgroup_kernel():
    for t in (E4M3, E5M2):
        cfg, intr = resolve(SM90, _p(a=t, b=t))
        assert intr.name == _wg(128, t) and (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.stages) == (128, 128, 128, 4)
        assert intr.mnemonic.endswith(
            f"m64n128k32.f32.{'e4m3' if t == E4M3 else 'e5m2'}.{'e4m3' if t == E4M3 else 'e5m2'}"
        )
    # few tiles: the smaller shape all the same (no mma.sync computes fp8)
    cfg, intr = resolve(SM90, _p(256, 256, 256))
    assert intr.name == _wg(128) and cfg.tile_m == 64
    assert "no mma.sync instruction computes" in explain(SM90, _p(256, 256, 256))[1]
    # M = 4: the decode kernel, asked first, says why not
    reasons = explain(SM90, _p(4, 256, 256))
    assert reasons[0].startswith("chosen by the heuristic")  # (the source first, then the families' reasons)
    assert "no matrix instruction of sm_90a's mma.sync / WMMA / MFMA computes" in reasons[1], reasons
    # overrides the warpgroup kernel takes
    cfg, _ = resolve(SM90, _p(), {"stages": 2, "tile_m": 64})
    assert (cfg.stages, cfg.tile_m) == (2, 64)


@pytest.mark.parametrize(
    "problem,overrides,match",
    [
        (
            _p(tb=False),
            {},
            r"B is stored K x N \(a plain matmul's B\): its global rows run along N, and 8-bit wgmma reads "
            r"only K-major shared-memory operands .* the fp8 kernel takes A as M x K and B as N x K",
        ),
        (_p(ta=True), {}, r"A is stored K x M \(A\^T\): its global rows run along M"),
        (_p(k=4008), {}, r"A's global rows run along K = 4008, not a multiple of 16 elements"),
        (_p(), {"tile_n": 64}, "tile_n=64 cannot be set"),
        (
            _p(),
            {"intrinsic": _wg(256)},
            r"fp8 wgmma takes N <= 128: its partial sums are promoted to f32 per K tile .*"
            r"2 x N/2 = 256 f32 registers for N 256 .* 255 a thread has",
        ),
        (_p(), {"intrinsic": _wg(192)}, r"fp8 wgmma takes N <= 128"),
        (_p(), {"intrinsic": _wg(128, E5M2)}, "computes f8E5M2xf8E5M2->f32, the matmul is f8E4M3FNxf8E4M3FN->f32"),
    ],
)
def test_fp8_refusals(problem, overrides, match):
    with pytest.raises(MmaflowError, match=match):
        resolve(SM90, problem, overrides)


@pytest.mark.parametrize(
    "src,why",
    [
        (matmul_module(256, 256, 256, E4M3), "B is stored K x N"),
        (matmul_module(256, 256, 256, E5M2, transpose_a=True, transpose_b=True), "A is stored K x M"),
        (matmul_module(256, 256, 100, E4M3, transpose_b=True), "not a multiple of 16 elements"),
    ],
)
def test_select_leaves_what_the_kernel_refuses_to_iree(src, why):
    """No mma.sync kernel computes fp8 on sm_90a: a form the warpgroup kernel refuses is left to
    IREE with the reason (never a silent wrong result), not configured to something else."""
    res = codegen_module(src, "sm_90a", require_matmul=False)
    assert not res.taken
    (line,) = [x for x in res.log if "left" in x]
    assert "only the warpgroup-MMA kernel computes" in line and why in line, line


def test_fp8_is_refused_before_hopper():
    with pytest.raises(UnsupportedError, match="no matrix instruction on sm_80 computes f8E4M3FN"):
        codegen_module(matmul_module(256, 256, 256, E4M3, transpose_b=True), "sm_80")


# ---- lowering ------------------------------------------------------------------------------------


@pytest.mark.parametrize("t,b,ptx_t", [(E4M3, E4M3, "e4m3.e4m3"), (E5M2, E5M2, "e5m2.e5m2"), (E4M3, E5M2, "e4m3.e5m2")])
def test_fp8_lowers_verifies_and_ptxas_does_not_spill(tmp_path, t, b, ptx_t):
    """The cp.async-ring kernel (128x128x128 tiles, 4-slot ring, partials promoted per K tile;
    ``producer=0``: the default is warp-specialized where TMA serves, test_warp_specialized.py):
    verified PTX (check_isa: the wgmma mnemonic, 16-byte cp.async, one barrier per K tile), the
    first wgmma of a tile with scale-d 0 (the predicate p = 0 != 0), the f32 adds after
    wait_group 0, no local memory; ptxas (sm_90a) without spills or serialized wgmma (a read of a
    running wgmma's registers would make ptxas inject a wait, C7517, and serialize, C7514)."""
    res = compile_module(
        matmul_module(2048, 2048, 512, t, transpose_b=True, b_type=b),
        "sm_90a",
        options=CodegenOptions(overrides={"producer": 0}),
    )  # verify=True
    (ptx,) = res.isa_text.values()
    assert ".target sm_90a" in ptx
    assert f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{ptx_t}" in ptx
    assert re.search(r"setp\.ne\.b32 p, 0, 0;\s*wgmma\.mma_async[^;]*, p, 1,\s*1;", ptx)  # scale-d 0
    assert re.search(r"wgmma\.wait_group\.sync\.aligned \t?0;\s*add\.rn\.f32", ptx)
    assert "wgmma.wait_group.sync.aligned \t1;" not in ptx and "wgmma.wait_group.sync.aligned 1;" not in ptx
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16;", ptx)
    assert "ld.local" not in ptx and "st.local" not in ptx
    out = sm90a_ptxas(tmp_path, ptx)
    assert "serialized" not in out.lower() and "C7517" not in out, out
    regs = int(re.search(r"Used (\d+) registers", out).group(1))
    assert regs <= 200, out  # 186 (e4m3, e5m2) / 184 (mixed) with ptxas 12.9


# ---- wider sweep ---------------------------------------------------------------------------------


@pytest.mark.exhaustive
@pytest.mark.parametrize("t,b", [(E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2)], ids=["e4m3", "e5m2", "mixed"])
@pytest.mark.parametrize("wn,tile_m,stages", [(128, 128, 4), (128, 64, 3), (64, 128, 2)])
def test_fp8_sweep(t, b, wn, tile_m, stages):
    name = _wg(wn, t) if t == b else f"WGMMA_F32_64x{wn}x32_{t.upper()}_{b.upper()}"
    for m, n, k in ((256, 512, 1024), (264, 328, 400)):
        src = matmul_module(m, n, k, t, transpose_b=True, b_type=b)
        for exact in (True, False):
            r = _sim(src, {"intrinsic": name, "tile_m": tile_m, "stages": stages}, exact, seed=m + k)
            assert r.check.passed, ((m, n, k), r.check.line())


# ---- the bench (prepare here; the run half's fp8 path on IREE's CPU backend) -----------------------


def test_bench_prepares_fp8_with_iree_default_not_built(tmp_path):
    """`mmaflow bench --dtype e4m3`: the A @ B^T module (B stored N x K) built by mmaflow; IREE's
    default cannot build an fp8 matmul for CUDA, and the manifest says so instead of failing."""
    import json

    from mmaflow.runtime.bench import prepare

    man = prepare("sm_90a", [256], "e4m3", tmp_path)
    assert man["a_type"] == E4M3 and man["b_transposed"] is True
    mine, base = man["entries"]
    assert mine["variant"] == "mmaflow" and (tmp_path / mine["file"]).stat().st_size > 0
    assert _wg(128) in mine["config"]
    assert base["variant"] == "iree-default" and base["file"] is None
    assert "error:" in base["not_built"]
    assert json.loads((tmp_path / "manifest.json").read_text()) == man


@pytest.mark.parametrize("t", ["e4m3", "e5m2"])
def test_bench_run_half_takes_fp8_buffers(tmp_path, t):
    """The run half on the CPU (IREE's llvm-cpu backend compiles the same fp8 module, driver
    local-task): ml_dtypes fp8 arrays reach iree.runtime as they are (HAL element type
    FLOAT_8_E4M3_FN / FLOAT_8_E5M2), the result is checked against float64 of the rounded inputs
    with B^T, and a "not built" entry is reported, not run."""
    import json

    from conftest import compile_for_cpu

    from mmaflow.runtime.bench import FP8, run

    elem = FP8[t]
    src = matmul_module(64, 64, 64, elem, transpose_b=True)
    (tmp_path / "cpu.vmfb").write_bytes(compile_for_cpu(src))
    man = {
        "target": "llvm-cpu",
        "driver": "local-task",
        "a_type": elem,
        "c_type": "f32",
        "b_transposed": True,
        "function": "matmul",
        "entries": [
            {"size": 64, "variant": "llvm-cpu", "file": "cpu.vmfb", "target": "host", "config": "IREE llvm-cpu"},
            {
                "size": 64,
                "variant": "iree-default",
                "file": None,
                "target": "sm_80",
                "config": "IREE default",
                "not_built": "error: x",
            },
        ],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    rows = run(tmp_path, "local-task", tmp_path / "out", repeat=2, warmup=1)
    assert [r["check"] for r in rows] == ["PASS", "not built"], rows
    # the check would see a wrong orientation: B read as K x N fails
    man["b_transposed"] = False
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    assert run(tmp_path, "local-task", tmp_path / "out", repeat=1, warmup=1)[0]["check"] == "FAIL"


class _FakeTensor:
    """Just enough of a torch tensor for the bench's torch side, over numpy (no GPU here)."""

    def __init__(self, x, dtype=None):
        self.x, self.dtype = np_asarray(x), dtype

    def cuda(self):
        return self

    cpu = cuda

    def numpy(self):
        return self.x

    def view(self, dtype):  # bytes -> fp8, as torch's Tensor.view(dtype)
        import ml_dtypes

        return _FakeTensor(
            self.x.view({"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[dtype]), dtype
        )

    def t(self):
        return _FakeTensor(self.x.T, self.dtype)

    def float(self):
        return _FakeTensor(self.x.astype("float32"))

    def abs(self):
        return _FakeTensor(abs(self.x))

    def __matmul__(self, other):
        return _FakeTensor(self.x @ other.x)


def np_asarray(x):
    import numpy as np

    return np.asarray(x)


def _fake_torch(scaled_mm_calls: list):
    import numpy as np

    def scaled_mm(a, b, *, scale_a, scale_b, out_dtype, use_fast_accum=False):
        scaled_mm_calls.append(
            (a.dtype, b.dtype, a.x.flags.c_contiguous, b.x.flags.f_contiguous, out_dtype, use_fast_accum)
        )
        if a.dtype == b.dtype == "float8_e5m2":  # as torch 2.11 on the H200: no e5m2 x e5m2 kernel
            raise ValueError("Multiplication of two Float8_e5m2 matrices is not supported\nmore")
        prod = a.x.astype(np.float64) @ b.x.astype(np.float64) * float(scale_a.x) * float(scale_b.x)
        return _FakeTensor(prod.astype(np.float32))

    from conftest import fake_cuda_torch

    return fake_cuda_torch(
        from_numpy=_FakeTensor,
        _scaled_mm=scaled_mm,
        tensor=lambda v, device=None: _FakeTensor(np.float32(v)),
        float32="float32",
        float8_e4m3fn="float8_e4m3fn",
        float8_e5m2="float8_e5m2",
    )


@pytest.mark.parametrize("t", ["e4m3", "e5m2"])
def test_bench_torch_side_is_scaled_mm_with_column_major_b(tmp_path, monkeypatch, t):
    """The run half's torch side with a numpy stand-in for torch (the GPU machine has torch 2.11):
    torch._scaled_mm gets A row-major, B column-major (``b_nk.t()``), unit scales and f32 out, with
    and without fast accumulation, its result is checked against the same float64 reference;
    e5m2 x e5m2, which cuBLASLt lacks, is reported as not run rather than failing the bench; the
    Nsight Compute child (``profile_one``) calls the recipe its row names."""
    import json
    import sys

    from conftest import compile_for_cpu, run_builds_on_cpu

    from mmaflow.runtime.bench import FP8, PROFILED_CALLS, profile_one, run

    calls = []
    run_builds_on_cpu(monkeypatch)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(calls))
    elem = FP8[t]
    (tmp_path / "cpu.vmfb").write_bytes(compile_for_cpu(matmul_module(64, 64, 64, elem, transpose_b=True)))
    man = {
        "target": "llvm-cpu",
        "driver": "cuda",
        "a_type": elem,
        "c_type": "f32",
        "b_transposed": True,
        "function": "matmul",
        "entries": [{"size": 64, "variant": "mmaflow", "file": "cpu.vmfb", "target": "host", "config": "cpu"}],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    rows = run(tmp_path, "cuda", tmp_path / "out", repeat=2, warmup=1)
    torch_name = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}[t]
    assert calls[0] == (torch_name, torch_name, True, True, "float32", False)
    assert rows[0]["check"] == "PASS", rows
    if t == "e4m3":
        assert [r["variant"] for r in rows[1:]] == [
            "torch._scaled_mm (e4m3, f32 out)",
            "torch._scaled_mm (e4m3, f32 out, fast accum)",
        ]
        assert [r["file"] for r in rows[1:]] == ["torch", "torch-fast-accum"]
        assert all(r["detail"].startswith("torch vs float64: PASS") for r in rows[1:]), rows
        calls.clear()
        profile_one(tmp_path, "torch-fast-accum", 64, "cuda")
        assert len(calls) == 1 + PROFILED_CALLS and all(c[-1] is True for c in calls)
    else:
        assert [r["check"] for r in rows[1:]] == ["not run", "not run"], rows
        assert "Float8_e5m2" in rows[1]["detail"]


def test_bench_table_prints_rows_that_were_not_built(capsys):
    from mmaflow.runtime.bench import print_table

    nan = float("nan")
    print_table(
        [
            {
                "size": 64,
                "variant": "mmaflow",
                "target": "sm_90a",
                "ms": 1.0,
                "tflops": 2.0,
                "check": "PASS",
                "kernel_ms": 0.5,
                "kernel_tflops": 4.0,
            },
            {"size": 64, "variant": "iree-default", "target": "sm_80", "ms": nan, "tflops": nan, "check": "not built"},
        ]
    )
    out = capsys.readouterr().out
    assert "not built" in out and "0.5000" in out


def test_bench_fp8_check_names_the_bound_it_passes():
    """The run half's fp8 verdict: within the f32 bound "PASS"; outside it but within the bound of
    the measured tensor-core accumulator (runtime/isa/wgmma.py: per k32 step, 33 addends each cut
    to 14 bits below the largest) "PASS (fp8 accumulation bound)"; outside both "FAIL" (and f16
    knows only the first)."""
    import numpy as np

    from mmaflow.runtime.bench_common import FP8_ACC_BITS, reference_check
    from mmaflow.runtime.numerics import DTYPES

    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (64, 256)).astype(DTYPES[E4M3])
    b = rng.uniform(-1, 1, (256, 64)).astype(DTYPES[E4M3])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert reference_check(a, b, ref.astype(np.float32), None, fp8=True)["verdict"] == "PASS"
    near = ref + 4 * 2.0**-FP8_ACC_BITS * bound  # 8 k32 steps: within 8 * 33 * 2^-13 * sum |a||b|
    r = reference_check(a, b, near, None, fp8=True)
    assert r["verdict"] == "PASS (fp8 accumulation bound)" and "f32 bound: FAIL" in r["detail"], r
    assert reference_check(a, b, near, None)["verdict"] == "FAIL"
    assert reference_check(a, b, ref + 0.1 * bound, None, fp8=True)["verdict"] == "FAIL"


# ---- fp8 through the TMA ring (--config copy=tma: one box per operand per K tile) ---------------------


@pytest.mark.parametrize("t", [E4M3, E5M2])
@pytest.mark.parametrize(
    "m,n,k,tile_m,stages", [(256, 256, 640, 128, 4), (200, 136, 528, 128, 3), (64, 128, 384, 64, 2)]
)
def test_fp8_tma_ring_matches_the_modelled_arithmetic(t, m, n, k, tile_m, stages):
    # partial M, N and K tiles (200 x 136 x 528: K ends 16 elements into its last tile) are zero-filled
    # by the copy engine; the result is the promoted kernel's arithmetic bit for bit
    r = _sim(
        matmul_module(m, n, k, t, transpose_b=True),
        {"intrinsic": _wg(128, t), "tile_m": tile_m, "stages": stages, "copy": "tma"},
    )
    assert r.check.passed and r.check.max_abs_err == 0, r.check.line()
    assert not r.stats.races


def test_fp8_tma_ring_lowers_and_ptxas_keeps_it(tmp_path):
    res = compile_module(
        matmul_module(256, 256, 1024, E4M3, transpose_b=True),
        "sm_90a",
        options=CodegenOptions(overrides={"intrinsic": _wg(128), "copy": "tma"}),
    )
    (ptx,) = res.isa_text.values()
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "tensormap.replace.tile.elemtype.shared::cta.b1024.b32" in ptx
    assert not re.search(r"^\s*cp\.async\.(ca|cg)\.", ptx, re.M)  # no per-thread copies
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in ptx
    sm90a_ptxas(tmp_path, ptx)


def test_fp8_tma_ring_refuses_mixed_pairs():
    with pytest.raises(MmaflowError, match="TMA copies take A and B of one element type"):
        codegen_module(
            matmul_module(128, 128, 256, E4M3, transpose_b=True, b_type=E5M2),
            "sm_90a",
            options=CodegenOptions(
                overrides={"intrinsic": f"WGMMA_F32_64x128x32_{E4M3.upper()}_{E5M2.upper()}", "copy": "tma"}
            ),
        )


# ---- checking an fp8 result: whole modules on the executor, and a GPU's result --------------------------


def _fp8_executable(promote: bool = True):
    from mmaflow.compiler.kernels.wgmma.rewrite import WgmmaRewriter

    return mutant(WgmmaRewriter, "_fp8_promotion", promote, matmul_module(128, 256, 512, E4M3, transpose_b=True))


def test_whole_module_check_compares_fp8_with_the_modelled_arithmetic():
    """`mmaflow run --device sim` (model_check): at K = 512 the promoted kernel is outside the f32
    bound (test_fp8_small_k_is_checked_against_the_modelled_arithmetic), so an fp8 contraction the
    wgmma kernel computes is compared with the modelled arithmetic, exactly, at IREE's offsets; the
    kernel without promotion fails that comparison."""
    from mmaflow.runtime.model_check import check_executable

    (site,) = check_executable(_fp8_executable(), seed=3)
    assert site.passed and site.max_abs_err == 0, site.line()
    assert "modelled fp8 tensor-core arithmetic" in site.detail
    (bad,) = check_executable(_fp8_executable(promote=False), seed=3)
    assert not bad.passed and "outside the bound" in bad.detail, bad.line()


def test_fp8_tensor_core_bound_holds_the_modelled_kernel():
    """The bound a GPU's fp8 result is checked against (`mmaflow run --device cuda`): the f32
    bound plus the tensor cores' cut addends (``numerics.fp8_tensor_core_bound``). The modelled
    promoted kernel lies inside it; a result missing one K tile's contribution does not."""
    import numpy as np

    from mmaflow.runtime import numerics as nm

    rng = np.random.default_rng(5)
    for m, n, k in ((64, 64, 512), (32, 48, 1000)):
        a, b = nm.random_matrix(rng, (m, k), E4M3), nm.random_matrix(rng, (k, n), E4M3)
        ref, tol = nm.matmul_reference(a, b, "f32", fp8_k_tile=128)
        _, tol32 = nm.matmul_reference(a, b, "f32")
        assert (tol > tol32).all()
        got = nm.fp8_tensor_core_reference(a, b, 128).astype(np.float64)
        assert nm.compare(got, ref, tol, out_type="f32").passed
        short = nm.fp8_tensor_core_reference(a[:, : k - 128], b[: k - 128], 128).astype(np.float64)
        assert not nm.compare(short, ref, tol, out_type="f32").passed


def test_fp8_models_by_row_blocks_are_whole_models(monkeypatch):
    """The fp8 models run over blocks of A's rows (a 4096^2 output's products would need 4 GB at
    once): blocked and whole give the same bits, batched too."""
    import numpy as np

    from mmaflow.runtime import numerics as nm

    rng = np.random.default_rng(8)
    a, b = nm.random_matrix(rng, (2, 70, 256), E4M3), nm.random_matrix(rng, (2, 256, 24), E4M3)
    monkeypatch.setattr(nm, "ROW_BLOCK", 1024)
    whole = nm.fp8_tensor_core_reference(a, b, 128), nm.fp8_tensor_core_bound(a, b, 128)
    monkeypatch.setattr(nm, "ROW_BLOCK", 16)
    blocked = nm.fp8_tensor_core_reference(a, b, 128), nm.fp8_tensor_core_bound(a, b, 128)
    for w, bl in zip(whole, blocked):
        assert w.shape == bl.shape == (2, 70, 24) and np.array_equal(w, bl)
