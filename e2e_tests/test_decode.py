"""The decode kernel (``compiler/kernels/decode/``): M up to one instruction's rows, B stored N x K,
B streamed from global memory straight into the matrix instruction's registers in a K order
derived from the catalogue's layouts, K split across the workgroup's waves and their partial sums
added through LDS.

On the lane executor against numpy (every target and wave size, every type pair the kernel takes,
M below, at and between the instruction's row halves, N with a partial column tile, several K
tiles per wave; random data within the rounding bound and small integers compared exactly; a
fused epilogue; A and B at non-zero byte offsets of one binding). The K order itself for every
catalogue instruction, against the layouts' coordinates; a wrong K order and a missing barrier
are caught. The problems it refuses are left to the tiled kernel with the reason; ``--config``
asks for it or away from it. The ISA: wide global loads, no LDS for B, no spills.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import DTYPES, TARGETS, dynamic_module, epilogue_module, handed_back, matmul_module, simulate, sm90a_ptxas

from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.kernels.decode import plan as decode_plan
from mmaflow.compiler.kernels.decode import rewrite as decode_rewrite
from mmaflow.compiler.kernels.decode.plan import LOAD_BITS, plan_a_loads, plan_k_order
from mmaflow.compiler.pipeline.pipeline import CodegenOptions
from mmaflow.compiler.report import ptxas_info, ptxas_path
from mmaflow.compiler.target.intrinsics import CATALOGUE, TYPE_BITS
from mmaflow.compiler.target.seeds import DECODE_AMD, DECODE_NVIDIA
from mmaflow.compiler.target.targets import get_target
from mmaflow.runtime.numerics import EpilogueReference
from mmaflow.runtime.simulate import check_matmul

BIN = Path(sys.executable).parent

# M: one row, below / at / past the half of mma.sync's A rows (its second A load, rows 8..15: none
# for M <= 8, bounded for 12), a whole 16-row instruction; past 16 (bounded, whole): two row tiles
# of a 16-row instruction, or on CDNA the 32-row MFMA it picks.
ROWS = [1, 5, 8, 12, 16]
TWO_TILE_ROWS = [24, 32]


def _id(target, overrides):
    return target + ("-w64" if overrides.get("wave_size") == 64 else "")


def _k(a_type: str) -> int:
    """K for the random check: 16 or more K tiles, so each of the seeded waves (up to 8) loops at least
    twice; NVIDIA's waves doubled for a small grid of one row tile take one K tile each."""
    return 4096 if TYPE_BITS[a_type] == 8 else 2048


def _exact_k(a_type: str, c_type: str) -> int:
    """K for the exact check: the largest of ours whose small-integer sums stay exact in the
    accumulator (``simulate.check_matmul`` falls back to random data past it): K * 2 * 2 < 2^11
    for f16, K * 1 * 1 < 2^8 for bf16 (values in {-1, 0, 1})."""
    return {"f16": 256, "bf16": 128}.get(c_type, _k(a_type))


def _rows(target: str) -> list[int]:
    return ROWS + TWO_TILE_ROWS


# The other type pairs in the default set (each pair on one target or more, each target's 8-bit
# floats on it); every pair on every target with `-m exhaustive`.
DEFAULT_PAIRS = {
    "gfx1100": [("bf16", "bf16"), ("i8", "i32")],
    "gfx1100-w64": [("f16", "f16"), ("bf16", "f32")],
    "gfx1201": [("f8E4M3FN", "f32"), ("f8E5M2", "f32")],
    "gfx942": [("f8E4M3FNUZ", "f32"), ("f8E5M2FNUZ", "f32")],
    "gfx950": [("f8E4M3FN", "f32"), ("f8E5M2", "f32")],
    "sm_80": [("f16", "f16"), ("i8", "i32")],
    "sm_90a": [("bf16", "f32")],
}

CASES = []
for t_i, (target, ov) in enumerate(TARGETS):
    rows = _rows(target)
    for d_i, (a_t, c_t) in enumerate(DTYPES[target]):
        for m_i, m in enumerate(rows):
            n = 44 if m_i % 2 == 0 else 268  # a partial last column tile either way (8, 16, 32, 64 columns)
            # Default set: f16 -> f32 at two Ms per target (rotating; CDNA also at a 32-row M),
            # DEFAULT_PAIRS at one M (rotating); the rest with `-m exhaustive`.
            if (a_t, c_t) == ("f16", "f32"):
                main = m_i in (t_i % len(ROWS), (t_i + 2) % len(ROWS)) or m == 24
            else:
                main = (a_t, c_t) in DEFAULT_PAIRS[_id(target, ov)] and m_i == (t_i + d_i) % len(ROWS)
            CASES.append(
                pytest.param(
                    target,
                    ov,
                    a_t,
                    c_t,
                    m,
                    n,
                    marks=() if main else pytest.mark.exhaustive,
                    id=f"{_id(target, ov)}-{a_t}-{c_t}-{m}x{n}",
                )
            )


def _assert_decode(cfg, m: int, overrides: dict):
    """The config is the decode kernel's, on the fewest instruction rows that hold M."""
    assert cfg.waves_k > 1, cfg
    assert cfg.tile_m == (16 if m <= 16 else 32), cfg
    assert (cfg.waves_m, cfg.waves_n) == (1, 1), cfg
    if "wave_size" in overrides:
        assert cfg.wave_size == overrides["wave_size"], cfg


@pytest.mark.parametrize("target,overrides,a_type,c_type,m,n", CASES)
def test_decode_on_executor(target, overrides, a_type, c_type, m, n):
    k = _k(a_type)
    r = simulate(matmul_module(m, n, k, a_type, c_type, transpose_b=True), target, overrides, seed=m + n)
    cfg = r.config
    _assert_decode(cfg, m, overrides)
    assert n % cfg.tile_n, "the last workgroup's columns should overhang N"
    rounds = k // cfg.tile_k // cfg.waves_k
    if target.startswith("sm_") and m <= 16:  # one row tile of a grid of few warps a SM: the waves doubled
        assert cfg.waves_k > DECODE_NVIDIA.waves_k.value and rounds == 1, cfg  # (up to one K tile each here)
    else:  # (AMD, two row tiles: not doubled) each wave runs the K loop more than once
        assert rounds >= 2, cfg
    assert r.workgroups == -(-n // cfg.tile_n)
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]
    assert r.stats.barriers > 0  # the partial sums' barrier

    ek = _exact_k(a_type, c_type)  # (K itself where exact: the same compiled kernel, from handed_back's cache)
    e = simulate(matmul_module(m, n, ek, a_type, c_type, transpose_b=True), target, overrides, seed=1, exact=True)
    _assert_decode(e.config, m, overrides)
    assert e.check.passed, e.check.line()
    assert e.check.max_tol == 0, "the exact check compared with a tolerance"
    assert not e.stats.races, e.stats.races[:3]


@pytest.mark.parametrize(
    "target,overrides",
    [
        pytest.param(t, ov, id=_id(t, ov), marks=() if t in ("sm_80", "gfx942") else pytest.mark.exhaustive)
        for t, ov in TARGETS
    ],
)
def test_decode_asked_waves(target, overrides):
    """``--config waves_k=2`` and a K tile of one chunk: the asked split, numerics unchanged."""
    src = matmul_module(5, 40, 1024, transpose_b=True)
    ko = plan_k_order(get_target(target).intrinsic(_taken(src, target, overrides).facts.config.intrinsic))
    ov = dict(overrides, waves_k=2, tile_k=ko.chunk)
    e = simulate(src, target, ov, seed=4, exact=True)
    assert (e.config.waves_k, e.config.tile_k) == (2, ko.chunk), e.config
    assert e.check.passed, e.check.line()
    assert not e.stats.races, e.stats.races[:3]


@pytest.mark.parametrize(
    "target,overrides",
    [
        pytest.param(t, ov, id=_id(t, ov), marks=() if t in ("sm_90a", "gfx942", "gfx1201") else pytest.mark.exhaustive)
        for t, ov in TARGETS
    ],
)
def test_decode_prefetch_on_executor(target, overrides):
    """``--config stages=2``: each wave's next K tile loaded before the current one's instructions and
    carried into the next round in registers, the last round after the loop. Random data at K 2048
    in two waves (each runs 2 rounds or more: the loop and the peeled round), then exact small integers at 4
    rounds of one chunk; an M with rows past it in the row tile, N past the last workgroup's columns."""
    src = matmul_module(12, 44, 2048, transpose_b=True)
    r = simulate(src, target, dict(overrides, stages=2, waves_k=2), seed=7)
    _assert_decode(r.config, 12, overrides)
    assert r.config.stages == 2 and "a tile ahead" in r.config.describe(), r.config.describe()
    assert 2048 // r.config.tile_k // r.config.waves_k >= 2
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]
    small = matmul_module(12, 44, 256, transpose_b=True)
    ko = plan_k_order(get_target(target).intrinsic(r.config.intrinsic))
    e = simulate(small, target, dict(overrides, stages=2, waves_k=2, tile_k=ko.chunk), seed=5, exact=True)
    assert 256 // ko.chunk // 2 >= 4 and e.config.stages == 2, e.config
    assert e.check.passed and e.check.max_tol == 0, e.check.line()
    assert not e.stats.races, e.stats.races[:3]


def test_decode_prefetch_computes_the_carried_tile(monkeypatch):
    """The prefetching loop mutated to compute on the loads it has just issued (round r + 1's) instead
    of the ones it carried in: round 0 is never added, the last twice; the check fails."""
    src = matmul_module(5, 40, 1024, transpose_b=True)
    opts = CodegenOptions(overrides={"stages": 2, "waves_k": 2, "tile_k": 32})
    good = codegen_module(src, "sm_80", options=opts).taken[0]
    monkeypatch.setattr(decode_rewrite.DecodeRewriter, "_prefetch_carried", False)
    (exe,) = codegen_module(src, "sm_80", options=opts).taken
    assert exe.facts.config.stages == 2 and exe.text != good.text
    assert check_matmul(parse_module(good.text, new_context()), seed=2).check.passed
    r = check_matmul(parse_module(exe.text, new_context()), seed=2)
    assert not r.check.passed and "outside" in r.check.detail, r.check.line()


def test_decode_stages_are_two_at_most():
    """The decode kernel has no ring: stages past 2 are refused with the reason."""
    p = _taken(matmul_module(1, 1024, 4096, transpose_b=True), "sm_90a").facts.problem
    with pytest.raises(ConfigError, match="stages=3: the decode kernel has no LDS ring"):
        registry.resolve(get_target("sm_90a"), p, {"waves_k": 8, "stages": 3})


# name -> (M, N, K, matmul_module keyword arguments, overrides, the waves_k it must get, vendors)
ODD = {
    # several instruction tiles per workgroup (3 of 16 columns, 6 of 8), the last workgroup's 4 columns
    "tile_n48": (7, 100, 1024, {}, {"waves_k": 2, "tile_n": 48}, 2, "amd nvidia"),
    # 3 output columns, fewer than one instruction tile's (N = 1 is not here: select records a
    # 1 x K B as K x 1, which the tiled kernel takes)
    "n3": (3, 3, 1024, {}, {}, None, "amd nvidia"),
    # 3 K tiles of 4 chunks: 3 waves (not a power of two)
    "3-waves": (4, 40, 384, {}, {}, 3, "amd nvidia"),
    # 5 K tiles of one chunk: 5 warps (the NVIDIA seed allows 8)
    "5-warps": (4, 40, 160, {}, {}, 5, "nvidia"),
    # unsigned i8 (zero-extended): RDNA's U8 instructions
    "u8": (4, 40, 2048, {"in_type": "i8", "out_type": "i32", "unsigned": True}, {}, None, "rdna"),
}


def _vendors(target: str) -> set:
    return {"nvidia"} if target.startswith("sm_") else {"amd", "rdna"} if target.startswith("gfx1") else {"amd"}


ODD_CASES = [
    pytest.param(name, t, ov, id=f"{name}-{_id(t, ov)}", marks=() if (i + j) % 4 == 0 else pytest.mark.exhaustive)
    for i, name in enumerate(ODD)
    for j, (t, ov) in enumerate(TARGETS)
    if _vendors(t) & set(ODD[name][6].split())
]


@pytest.mark.parametrize("name,target,overrides", ODD_CASES)
def test_decode_odd_shapes(name, target, overrides):
    m, n, k, kw, ov, waves, _ = ODD[name]
    src = matmul_module(m, n, k, transpose_b=True, **kw)
    for exact in (False, True):
        r = simulate(src, target, dict(overrides, **ov), seed=9 + exact, exact=exact)
        _assert_decode(r.config, m, overrides)
        assert waves is None or r.config.waves_k == waves, r.config
        assert r.check.passed, r.check.line()
        assert not r.stats.races, r.stats.races[:3]


# ---- batched: eager attention's decode scores (one query row per head against the cached keys) --------
# (batch, M, N, K): a short K of two chunks (a head dimension of 64: the heuristic's K tiles of one
# chunk, more columns a workgroup), one of four (128), a long one; N with a partial column tile.
BATCHED = [(3, 1, 40, 64), (2, 5, 264, 128), (2, 12, 40, 1024)]


@pytest.mark.parametrize(
    "target,overrides,shape",
    [
        pytest.param(
            t,
            ov,
            shape,
            id=f"{_id(t, ov)}-{'x'.join(map(str, shape))}",
            marks=() if (i + j) % 3 == 0 else pytest.mark.exhaustive,
        )
        for i, (t, ov) in enumerate(TARGETS)
        for j, shape in enumerate(BATCHED)
    ],
)
def test_batched_decode_on_executor(target, overrides, shape):
    """Every batch entry's workgroups read their own A and B rows and store their own C: random
    data within the rounding bound, small integers exactly (sentinels around every tensor)."""
    batch, m, n, k = shape
    src = matmul_module(m, n, k, transpose_b=True, batch=batch)
    for exact in (False, True):
        r = simulate(src, target, overrides, seed=batch + n + exact, exact=exact)
        _assert_decode(r.config, m, overrides)
        assert n % r.config.tile_n, "the last workgroup's columns should overhang N"
        assert r.workgroups == batch * -(-n // r.config.tile_n)
        assert r.check.passed, r.check.line()
        assert not exact or r.check.max_tol == 0, "the exact check compared with a tolerance"
        assert not r.stats.races, r.stats.races[:3]


@pytest.mark.parametrize("operand", ["A", "B"])
def test_batched_decode_reads_each_entrys_rows(monkeypatch, operand):
    """One operand's batch index mutated to entry 0 for every load (A's through ``a_operands``, B's
    through ``_load``): the other entries' results go wrong."""
    src = matmul_module(5, 40, 64, transpose_b=True, batch=3)
    good = handed_back(src, "sm_80", ())
    if operand == "B":
        real_load = decode_rewrite.DecodeRewriter._load

        def first_entry(self, em, name, mem, row, k, vtype, limits):
            if name == "B":
                self.lead[name] = [em.const(0) for _ in self.lead[name]]
            return real_load(self, em, name, mem, row, k, vtype, limits)

        monkeypatch.setattr(decode_rewrite.DecodeRewriter, "_load", first_entry)
    else:
        real_a = decode_rewrite.a_operands

        def first_entry_a(em, *args):
            *rest, lead = args
            assert lead, "A's loads should carry a batch index"
            return real_a(em, *rest, [em.const(0) for _ in lead])

        monkeypatch.setattr(decode_rewrite, "a_operands", first_entry_a)
    (exe,) = codegen_module(src, "sm_80").taken
    assert exe.facts.config.waves_k > 1 and exe.text != good
    r = check_matmul(parse_module(exe.text, new_context()), seed=2)
    assert not r.check.passed and "outside" in r.check.detail, r.check.line()


@pytest.mark.parametrize("target", ["sm_80", pytest.param("gfx942", marks=pytest.mark.exhaustive)])
def test_batched_decode_epilogue(target):
    """A per-entry, per-column bias (``b``, ``n``) and a conversion to f16 after a batched decode."""
    src = epilogue_module(
        3,
        40,
        128,
        batch=2,
        transpose_b=True,
        out_type="f16",
        inputs=[("f32", ("b", "n"))],
        body="%t = arith.addf %acc, %x0 : f32\n%res = arith.truncf %t : f32 to f16",
    )
    ref = EpilogueReference(lambda acc, bias: acc + bias[:, None, :], 1.0, 2)
    for exact in (False, True):
        r = simulate(src, target, seed=6 + exact, exact=exact, epilogue=ref)
        _assert_decode(r.config, 3, {})
        assert r.check.passed, r.check.line()


def test_short_k_config():
    """K of two chunks (an attention head of 64): two waves of one chunk each, 64 columns a
    workgroup (sm_80: no tuning table entry), the reason said."""
    p = _taken(matmul_module(1, 2048, 64, transpose_b=True, batch=8), "sm_80").facts.problem
    cfg, _ = registry.resolve(get_target("sm_80"), p)
    assert (cfg.waves_k, cfg.tile_k, cfg.tile_n) == (2, 32, 64), cfg
    why = registry.explain(get_target("sm_80"), p)
    assert any("is short of two K tiles of 4 chunks (the seeds')" in w for w in why), why


def test_batched_packed_operands_are_refused():
    """The packed (4/6-bit) and block-scaled loads have no batch index: a batched problem of them
    is the tiled kernel's, with the reason."""
    target = get_target("gfx950")
    p = _taken(matmul_module(5, 264, 512, transpose_b=True), "gfx950").facts.problem
    fp4 = dataclasses.replace(p, a_type="f4E2M1FN", b_type="f4E2M1FN", batched=True, batch=2)
    intr = target.intrinsic("MFMA_F32_16x16x128_F4E2M1FN")
    assert decode_plan.decode_refusal(target, fp4, intr) == "a batched contraction of 4/6-bit or block-scaled operands"
    assert decode_plan.decode_refusal(target, dataclasses.replace(fp4, batched=False, batch=1), intr) is None


# ---- a fused epilogue --------------------------------------------------------------------------------
RELU_BIAS_F16 = (
    "%t = arith.addf %acc, %x0 : f32\n%z = arith.maximumf %t, %zero : f32\n%res = arith.truncf %z : f32 to f16"
)
EPILOGUES = {
    # bias over columns + relu, stored as f16 (nn.Linear + ReLU)
    "bias_n-relu-f16": (
        dict(out_type="f16", inputs=[("f32", ("n",))], body=RELU_BIAS_F16),
        EpilogueReference(lambda acc, b: np.maximum(acc + b[None, :], 0), 1.0, 2),
    ),
    # a per-column scale and a per-row shift: the rows past M must not be read or written
    "scale_n-shift_m": (
        dict(
            out_type="f32",
            inputs=[("f32", ("n",)), ("f32", ("m",))],
            body="%v = arith.mulf %acc, %x0 : f32\n%res = arith.addf %v, %x1 : f32",
        ),
        EpilogueReference(lambda acc, s, t: acc * s[None, :] + t[:, None], 1.0, 2),
    ),
}
EPI_TARGETS = [
    ("sm_80", {}),
    ("gfx942", {}),
    ("gfx1100", {"wave_size": 64}),
    ("gfx1201", {}),
    ("gfx950", {}),
    ("sm_90a", {}),
]


@pytest.mark.parametrize(
    "target,overrides,name",
    [
        pytest.param(t, ov, name, id=f"{_id(t, ov)}-{name}", marks=() if i < 2 else pytest.mark.exhaustive)
        for i, (t, ov) in enumerate(EPI_TARGETS)
        for name in EPILOGUES
    ],
)
def test_decode_epilogue(target, overrides, name):
    kw, ref = EPILOGUES[name]
    src = epilogue_module(5, 40, 1024, transpose_b=True, **kw)
    r = simulate(src, target, overrides, seed=3, epilogue=ref)
    _assert_decode(r.config, 5, overrides)
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]
    e = simulate(src, target, overrides, seed=4, exact=True, epilogue=ref)
    assert e.check.passed and e.check.max_tol == 0, e.check.line()


@pytest.mark.parametrize("target", ["gfx1201", pytest.param("sm_80", marks=pytest.mark.exhaustive)])
def test_decode_int8_dequantize(target):
    """i8 x i8 -> i32, then a per-column f32 scale: the quantized nn.Linear."""
    src = epilogue_module(
        3,
        264,
        2048,
        "i8",
        "i32",
        transpose_b=True,
        out_type="f32",
        inputs=[("f32", ("n",))],
        body="%fl = arith.sitofp %acc : i32 to f32\n%res = arith.mulf %fl, %x0 : f32",
    )
    r = simulate(src, target, seed=8, epilogue=EpilogueReference(lambda acc, s: acc * s[None, :], 1.0, 2))
    _assert_decode(r.config, 3, {})
    assert r.check.passed, r.check.line()


# ---- A and B at non-zero byte offsets of one binding --------------------------------------------------
def packed_module(m: int, n: int, k: int, in_type: str = "f16", *, b_first: bool) -> str:
    """C = A @ B^T where A and B are computed by dispatches of their own (negations of the
    arguments), so IREE packs them into one transient binding: the one produced second at a
    non-zero byte offset."""

    def negate(name, arg, rows):
        t = f"tensor<{rows}x{k}x{in_type}>"
        return (
            f"  %e{name} = tensor.empty() : {t}\n"
            f"  %{name} = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], "
            f'iterator_types = ["parallel", "parallel"]}} ins(%{arg} : {t}) outs(%e{name} : {t}) {{\n'
            f"  ^bb0(%v: {in_type}, %o: {in_type}):\n"
            f"    %s = arith.negf %v : {in_type}\n"
            f"    linalg.yield %s : {in_type}\n"
            f"  }} -> {t}\n"
        )

    a, b = negate("a", "x", m), negate("b", "w", n)
    c = f"tensor<{m}x{n}xf32>"
    return (
        f"func.func @f(%x: tensor<{m}x{k}x{in_type}>, %w: tensor<{n}x{k}x{in_type}>) -> {c} {{\n"
        + (b + a if b_first else a + b)
        + "  %zero = arith.constant 0.0 : f32\n"
        f"  %e = tensor.empty() : {c}\n"
        f"  %f0 = linalg.fill ins(%zero : f32) outs(%e : {c}) -> {c}\n"
        "  %r = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
        "affine_map<(d0, d1, d2) -> (d0, d1)>] "
        f"ins(%a, %b : tensor<{m}x{k}x{in_type}>, tensor<{n}x{k}x{in_type}>) outs(%f0 : {c}) -> {c}\n"
        f"  return %r : {c}\n}}\n"
    )


@pytest.mark.parametrize(
    "target,overrides,b_first",
    [
        pytest.param(
            t,
            ov,
            bf,
            id=f"{_id(t, ov)}-{'B' if bf else 'A'}-first",
            marks=() if i in (0, 5, 9) else pytest.mark.exhaustive,
        )
        for i, ((t, ov), bf) in enumerate((x, bf) for x in TARGETS for bf in (False, True))
    ],
)
def test_decode_at_byte_offsets(target, overrides, b_first):
    """A and B in one binding, the second at a non-zero offset, sentinel bytes everywhere else."""
    src = packed_module(5, 40, 1024, b_first=b_first)
    (exe,) = codegen_module(src, target, options=CodegenOptions(overrides=dict(overrides))).taken
    p = exe.facts.problem
    assert p.a.binding == p.b.binding, (p.a, p.b)
    assert (p.a.offset if b_first else p.b.offset) > 0, (p.a, p.b)
    for exact in (False, True):
        r = simulate(src, target, overrides, seed=5 + exact, exact=exact)
        _assert_decode(r.config, 5, overrides)
        assert r.check.passed, r.check.line()  # (the harness also checks A, B and the sentinels unchanged)


# ---- the K order ----------------------------------------------------------------------------------------
# (gfx950's 4- and 6-bit f8f6f4 records and RDNA3's iu4: the decode kernel does not stream them,
# plan_k_order refuses them; the matmul kernel takes 4-bit operands)
INTRINSICS = [
    pytest.param(i, id=f"{fam}-{i.name}") for fam, intrs in CATALOGUE.items() for i in intrs if not i.sub_byte
]


def test_every_catalogue_family_has_a_k_order():
    """The decode kernel plans every catalogue family (the per-instruction checks below skip none)."""
    accepted = defaultdict(list)
    for fam, intrs in CATALOGUE.items():
        for i in intrs:
            try:
                plan_k_order(i)
                accepted[fam].append(i.name)
            except UnsupportedError:
                pass
    assert set(accepted) == set(CATALOGUE), dict(accepted)


@pytest.mark.parametrize("intr", INTRINSICS)
def test_k_order_b_runs(intr):
    """``KOrder.mem`` is a permutation of the chunk; for every lane, the K positions its B elements
    take over the chunk's J instructions are one contiguous, aligned run of 128 bits (256 on RDNA3's
    16-bit instructions: two loads) starting where ``b_start`` says, instruction j's E elements at
    [j * E, (j + 1) * E) of it (what the rewrite hands each instruction); the lanes of one column
    cover the chunk exactly once. Coordinates from ``Layout.coords``, not the plan's lane terms."""
    ko = plan_k_order(intr)  # (every catalogue instruction has a decode K order)
    _, lb, _ = intr.codegen_layouts()
    bits = TYPE_BITS[intr.b_type]
    e_count = lb.elements
    assert ko.chunk == ko.j * intr.k and len(ko.mem) == ko.j and all(len(row) == intr.k for row in ko.mem)
    assert sorted(x for row in ko.mem for x in row) == list(range(ko.chunk))
    assert ko.run == ko.j * e_count
    # one load's 128 bits, or one instruction's operand where it is wider (two loads: RDNA3's 16-bit
    # instructions, 16 elements a lane; gfx950's 8-bit f8f6f4, 32)
    wide = max(LOAD_BITS, e_count * bits)
    assert ko.run * bits == wide, (ko.run, bits)
    k0 = lb.element_offsets()[0][0]
    cover = defaultdict(list)
    for lane in range(lb.wave_size):
        coords = [lb.coords(lane, e) for e in range(e_count)]
        (col,) = {c for _, c in coords}  # one column per lane
        start = ko.b_start.at(coords[0][0] - k0)
        assert start % (LOAD_BITS // bits) == 0, f"lane {lane}: run at {start} is not 16-byte aligned"
        for j in range(ko.j):
            for e, (k, _) in enumerate(coords):
                assert ko.mem[j][k] == start + j * e_count + e, (lane, j, e, k)
        if lane < lb.lanes_used:  # (the rest replicate these)
            cover[col] += range(start, start + ko.run)
    assert sorted(cover) == list(range(intr.n))
    for col, positions in cover.items():
        assert sorted(positions) == list(range(ko.chunk)), col


@pytest.mark.parametrize("intr", INTRINSICS)
def test_k_order_a_loads(intr):
    """A's loads per lane and chunk (``plan_a_loads``) for several M: every (instruction, element)
    of a row below M fed exactly once, by a load of that element's row at the chunk position
    ``mem`` gives its K (so A visits K as B does), 128 bits wide and aligned; rows at or past M for
    every lane are no loads but zeros."""
    ko = plan_k_order(intr)  # (every catalogue instruction has a decode K order)
    la, _, _ = intr.codegen_layouts()
    bits = TYPE_BITS[intr.a_type]
    offsets = la.element_offsets()
    every = {(j, e) for j in range(ko.j) for e in range(la.elements)}
    for m in sorted({1, 5, 8, 12, intr.m} & set(range(1, intr.m + 1))):
        start, loads, zero_rows = plan_a_loads(intr, ko, m)
        assert list(zero_rows) == sorted({r for r, _ in offsets if r >= m}), (m, zero_rows)
        fed = [f for ld in loads for f in ld.feeds]
        assert len(fed) == len(set(fed)), f"M={m}: an element fed twice"
        assert set(fed) == {(j, e) for j, e in every if offsets[e][0] not in zero_rows}, m
        for ld in loads:
            assert ld.length == len(ld.feeds) and ld.length * bits == LOAD_BITS, ld
            assert {offsets[e][0] for _, e in ld.feeds} == {ld.row}, ld
        for lane in range(la.wave_size):
            for ld in loads:
                first = None
                for i, (j, e) in enumerate(ld.feeds):
                    _, k = la.coords(lane, e)
                    pos = start.at(k - offsets[e][1]) + ld.first + i
                    first = pos if first is None else first
                    assert ko.mem[j][k] == pos, (m, lane, ld, j, e)
                assert first % ld.length == 0, (m, lane, ld)


def _xor_one(ko):
    """A wrong but plausible K order: positions 2p and 2p + 1 of every chunk swapped (still a
    permutation, still affine in the lane, so A's loads plan as before; B's runs are unchanged)."""
    return dataclasses.replace(ko, mem=tuple(tuple(x ^ 1 for x in row) for row in ko.mem))


@pytest.mark.parametrize(
    "target,overrides",
    [
        pytest.param(
            t, ov, id=_id(t, ov), marks=() if (t, ov) in (("sm_80", {}), ("gfx1100", {})) else pytest.mark.exhaustive
        )
        for t, ov in TARGETS
    ],
)
def test_a_wrong_k_order_fails_the_check(monkeypatch, target, overrides):
    """The K order as the plan sees it, mutated: A then visits K otherwise than B, and the
    executor's comparison (its own ISA model of each instruction) fails."""
    src = matmul_module(5, 40, 1024, transpose_b=True)
    good = handed_back(src, target, tuple(sorted(overrides.items())))
    real = decode_plan.plan_k_order
    monkeypatch.setattr(decode_plan, "plan_k_order", lambda intr: _xor_one(real(intr)))
    (exe,) = codegen_module(src, target, options=CodegenOptions(overrides=dict(overrides))).taken
    assert exe.facts.config.waves_k > 1 and exe.text != good
    r = check_matmul(parse_module(exe.text, new_context()), seed=2)
    assert not r.check.passed and "outside" in r.check.detail, r.check.line()


@pytest.mark.parametrize("target,barrier", [("sm_80", "gpu.barrier"), ("gfx942", "amdgpu.lds_barrier")])
def test_a_missing_barrier_before_the_partial_sums_is_a_race(target, barrier):
    """Wave 0 adds the other waves' partial sums from LDS after a barrier; without it the executor
    reports the race (its waves run in order, so the numbers alone would not show it)."""
    text = handed_back(matmul_module(5, 40, 1024, transpose_b=True), target)
    lines = text.splitlines()
    assert sum(line.strip().startswith(barrier) for line in lines) == 1
    bad = "\n".join(line for line in lines if not line.strip().startswith(barrier))
    r = check_matmul(parse_module(bad, new_context()), seed=1)
    assert r.stats.races and "mmaflow.decode.reduce" in r.stats.races[0], r.stats.races[:1]


# ---- what it refuses, and --config ----------------------------------------------------------------------
# name -> (module, the reason registry.explain and the ConfigError give)
REFUSED = {
    "dynamic-n": (dynamic_module(5, None, 512, transpose_b=True), "dynamic sizes"),
    "B-KxN": (matmul_module(5, 264, 512), "B is not stored N x K with A M x K"),
    "A-KxM": (matmul_module(5, 264, 512, transpose_a=True, transpose_b=True), "B is not stored N x K with A M x K"),
    "k-not-whole-chunks": (
        matmul_module(5, 264, 520, transpose_b=True),
        "K = 520 is not a multiple of the 32-deep chunk",
    ),
    "k-one-chunk": (matmul_module(5, 264, 32, transpose_b=True), "K = 32 is one chunk: nothing to split across waves"),
    "k-rows-not-16-bytes": (
        matmul_module(5, 264, 36, transpose_b=True),
        "K = 36 f16 values (A's rows) are not a whole number of 16-byte loads",
    ),
    "m-past-32": (matmul_module(33, 264, 512, transpose_b=True), "no instruction for the types holds M rows"),
    "A-is-B": (matmul_module(5, 5, 512, transpose_b=True, shared=True), "A and B are one tensor"),  # A @ A^T
}


def _taken(src: str, target: str, overrides: dict | None = None):
    (exe,) = codegen_module(src, target, options=CodegenOptions(overrides=dict(overrides or {}))).taken
    return exe


# Each reason on one of sm_80 and gfx942 in the default set (alternating), both with `-m exhaustive`;
# M = 33 on sm_80 only (gfx942 takes it in two row tiles of its 32-row MFMA).
@pytest.mark.parametrize(
    "name,target",
    [
        pytest.param(
            name, t, id=f"{name}-{t}", marks=() if (i + j) % 2 == 0 or name == "m-past-32" else pytest.mark.exhaustive
        )
        for i, name in enumerate(REFUSED)
        for j, t in enumerate(["sm_80", "gfx942"])
        if not (name == "m-past-32" and t == "gfx942")
    ],
)
def test_refused_problems_go_to_the_tiled_kernel(name, target):
    """Left to the tiled kernel (no waves_k), the reason in the registry's explanation; asked for
    with ``--config waves_k=4``, a ConfigError naming the same reason."""
    src, why = REFUSED[name]
    exe = _taken(src, target)
    assert exe.facts.config.waves_k == 1, exe.log
    p = exe.facts.problem
    reasons = registry.explain(get_target(target), p.estimate() if p.dynamic else p)
    said = any(f"not the decode kernel: {why}" in r for r in reasons)
    # (an M past every instruction's row tiles is no decode problem: the kernel says nothing)
    assert said != (name == "m-past-32"), reasons
    with pytest.raises(ConfigError, match="waves_k=4: the decode kernel cannot take") as err:
        _taken(src, target, {"waves_k": 4})
    assert why in str(err.value)


@pytest.mark.parametrize("target", ["sm_80"])
def test_dynamic_m_is_refused_as_dynamic(target):
    src = dynamic_module(None, 264, 512, transpose_b=True)
    exe = _taken(src, target)
    assert exe.facts.config.waves_k == 1
    reasons = registry.explain(get_target(target), exe.facts.problem.estimate())  # (as configure and the report)
    assert any(r.startswith("not the decode kernel: dynamic sizes") for r in reasons), reasons
    with pytest.raises(ConfigError, match="dynamic sizes"):
        _taken(src, target, {"waves_k": 4})


def test_dynamic_m_is_left_to_the_tiled_kernel():
    """(What a dynamic M gets today, whatever the reason's words: the tiled kernel, and a
    ConfigError when waves_k asks for the decode kernel.)"""
    src = dynamic_module(None, 264, 512, transpose_b=True)
    assert _taken(src, "gfx942").facts.config.waves_k == 1
    with pytest.raises(ConfigError, match="waves_k=4: the decode kernel cannot take"):
        _taken(src, "gfx942", {"waves_k": 4})


DECODE_SRC = matmul_module(5, 264, 512, transpose_b=True)


@pytest.mark.parametrize("target", ["sm_80", "gfx1100"])
def test_tiled_config_keys_leave_a_decode_problem_to_the_tiled_kernel(target):
    """``--config tile=16x16x64 waves=1x1`` (keys of the tiled kernel) without waves_k: the tiled
    kernel, with that tile, and the reason in the explanation; on the executor, still right.
    (waves=1x1: the tiled kernel keeps its heuristic's 2x4 / 1x4 waves, which a 16-column tile
    cannot split, whatever B's order.)"""
    assert _taken(DECODE_SRC, target).facts.config.waves_k > 1  # (decode without --config)
    ov = {"tile_m": 16, "tile_n": 16, "tile_k": 64, "waves_m": 1, "waves_n": 1}
    r = simulate(DECODE_SRC, target, ov, seed=1, exact=True)
    assert r.config.waves_k == 1 and (r.config.tile_m, r.config.tile_n, r.config.tile_k) == (16, 16, 64), r.config
    assert r.check.passed, r.check.line()
    p = _taken(DECODE_SRC, target, ov).facts.problem
    reasons = registry.explain(get_target(target), p, ov)
    assert "not the decode kernel: --config tile_m, waves_m, waves_n configures the tiled kernel" in reasons, reasons
    # waves_k=1 asks for the tiled kernel too
    assert _taken(DECODE_SRC, target, {"waves_k": 1}).facts.config.waves_k == 1


@pytest.mark.parametrize(
    "overrides,message",
    [
        # 512 / 128 = 4 K tiles on sm_80 (chunks of 32, 4 per K tile)
        ({"waves_k": 3}, "waves_k=3 must be 2 or more and divide the 4 K tiles of 128"),
        ({"waves_k": 8}, "waves_k=8 must be 2 or more and divide the 4 K tiles of 128"),
        ({"waves_k": 2, "tile_k": 48}, "tile_k=48 must be a multiple of the 32-deep chunk"),
        ({"waves_k": 2, "tile_n": 12}, "tile_n=12 must be a positive multiple of MMA_SYNC_F32_16x8x16_F16's N=8"),
        ({"waves_k": 4, "stages": 3}, "stages=3: the decode kernel has no LDS ring"),
    ],
)
def test_decode_config_errors(overrides, message):
    with pytest.raises(ConfigError) as err:
        _taken(DECODE_SRC, "sm_80", overrides)
    assert message in str(err.value), str(err.value)


def test_cli_waves_k_on_a_refused_problem_exits_4(tmp_path):
    (tmp_path / "kn.mlir").write_text(REFUSED["B-KxN"][0])
    r = subprocess.run(
        [
            str(BIN / "mmaflow"),
            "run",
            str(tmp_path / "kn.mlir"),
            "--target",
            "gfx942",
            "--device",
            "sim",
            "--config",
            "waves_k=4",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
    assert "B is not stored N x K" in r.stderr and "Traceback" not in r.stderr, r.stderr


# ---- the ISA --------------------------------------------------------------------------------------------
ISA_SRC = matmul_module(5, 4096, 4096, transpose_b=True)


def _compiled(target: str, overrides: dict | None = None):
    res = compile_module(ISA_SRC, target, options=CodegenOptions(overrides=dict(overrides or {})))
    (exe,) = res.taken
    cfg = exe.facts.config
    assert cfg.waves_k > 1, exe.log
    return res, exe, cfg


NARROW_GLOBAL = ("global_load_b96", "global_load_b64", "global_load_b32", "global_load_narrow")


@pytest.mark.parametrize(
    "target,overrides",
    [
        pytest.param(
            t, ov, id=_id(t, ov), marks=() if (t, ov) in (("gfx942", {}), ("gfx1100", {})) else pytest.mark.exhaustive
        )
        for t, ov in TARGETS
        if not t.startswith("sm_")
    ],
)
def test_amd_isa(target, overrides):
    """No spills or scratch; the matrix instruction; every global load 128 bits; LDS only for the
    partial sums (each wave stores its accumulators once, wave 0 reads every wave's)."""
    res, exe, cfg = _compiled(target, overrides)
    rep = res.reports[exe.name]
    intr = get_target(target).intrinsic(cfg.intrinsic)
    assert intr.mnemonic in res.isa_text[exe.name]
    assert (rep.vgpr_spills, rep.sgpr_spills, rep.scratch_bytes) == (0, 0, 0), rep.to_dict()
    assert rep.counts.get("scratch", 0) == 0, rep.counts
    assert rep.counts.get("matrix", 0) > 0 and rep.counts.get("global_load_b128", 0) > 0, rep.counts
    assert not {c: rep.counts[c] for c in NARROW_GLOBAL if rep.counts.get(c)}, rep.counts
    n_tiles = cfg.tile_n // intr.n
    stores = n_tiles * intr.c.op_vector_length * 4 * 8 // LOAD_BITS  # f32 partial sums, 128 bits a store
    assert rep.counts.get("lds_store_b128", 0) == stores, rep.counts
    assert rep.counts.get("lds_load_b128", 0) == cfg.waves_k * stores, rep.counts
    assert rep.lds_bytes == cfg.waves_k * n_tiles * cfg.wave_size * intr.c.op_vector_length * 4, rep.to_dict()


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.exhaustive)])
def test_nvidia_ptx(tmp_path, target):
    """mma.sync, 128-bit global loads only, no local memory; ptxas: no spills."""
    assert ptxas_path() is not None, "ptxas is missing: pip install -e '.[test]' installs nvidia-cuda-nvcc-cu12"
    res, exe, cfg = _compiled(target)
    ptx = res.isa_text[exe.name]
    rep = res.reports[exe.name]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
    assert rep.counts.get("matrix", 0) > 0 and rep.counts.get("global_load_b128", 0) > 0, rep.counts
    assert not {c: rep.counts[c] for c in NARROW_GLOBAL if rep.counts.get(c)}, rep.counts
    assert not rep.counts.get("async_copy_b128") and not rep.counts.get("lds_load_narrow"), rep.counts  # no ring
    if target == "sm_90a":
        sm90a_ptxas(tmp_path, ptx)
    else:
        info = ptxas_info(ptx, get_target(target).iree_arch, cfg.workgroup_size)
        assert info.get("vgpr_spills") == 0 and info["vgprs"] <= 255, info


def test_report_lds_bytes_of_the_decode_kernel_on_nvidia(tmp_path):
    import json

    (tmp_path / "d.mlir").write_text(DECODE_SRC)
    r = subprocess.run(
        [str(BIN / "mmaflow"), "report", str(tmp_path / "d.mlir"), "--target", "sm_80", "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    (rep,) = json.loads(r.stdout)["mmaflow"].values()
    cfg = _taken(DECODE_SRC, "sm_80").facts.config
    assert cfg.waves_k == 4 and cfg.tile_n == 8  # (17 workgroups of 16 columns are too few: narrowed)
    assert rep["lds_bytes"] == registry.shared_bytes(get_target("sm_80"), cfg, None, None) == 4 * 1 * 32 * 4 * 4


@pytest.mark.parametrize(
    "target",
    [
        "sm_80",
        "gfx1100",
        pytest.param("sm_90a", marks=pytest.mark.exhaustive),
        pytest.param("gfx942", marks=pytest.mark.exhaustive),
    ],
)
def test_dynamic_m_is_versioned_on_its_size(target):
    """A dynamic M (B N x K, N and K static) gets two kernels in one dispatch: the decode kernel
    where M is at most its reach (32; 64 on CDNA's 32-row MFMA), the other one past it, each a
    function and export of its own (its own workgroup). The executor runs the kernel the
    workload selects (the export's condition, else its fallback), at M on each side of the bound."""
    src = dynamic_module(None, 264, 512, transpose_b=True)
    exe = _taken(src, target)
    (v,) = exe.facts.versions
    bound = 64 if target == "gfx942" else 32
    assert v.at_most == bound and v.condition == f"M <= {bound}" and v.config.waves_k > 1, v
    assert exe.facts.config.waves_k == 1 and exe.kernel == v.export + "_else"
    for m in (1, bound - 7, bound, bound + 1, 100):
        r = simulate(src, target, sizes={"m": m}, seed=m, sample=4 if m > bound else 0)
        assert (r.config.waves_k > 1) == (m <= bound), (m, r.config)
        assert r.check.passed, (m, r.check.line())
        assert not r.stats.races, r.stats.races[:3]


def test_a_warpgroup_instruction_asked_for_a_small_m_is_the_warpgroup_kernels():
    """--config intrinsic=WGMMA_... alone, on an M the decode kernel would take: the decode family
    declines (it runs per-wave instructions) rather than planning a K order it has no layout for;
    with waves_k it is a config error naming both."""
    from mmaflow.compiler.core.problem import Contraction

    sm90 = get_target("sm_90a")
    p = Contraction(16, 1024, 4096, 1, "f16", "f16", "f32", b_transposed=True)
    cfg, intr = registry.resolve(sm90, p, {"intrinsic": "WGMMA_F32_64x64x16_F16"})
    assert cfg.intrinsic == "WGMMA_F32_64x64x16_F16" and cfg.waves_k == 1
    with pytest.raises(ConfigError, match="warpgroup instruction"):
        registry.resolve(sm90, p, {"intrinsic": "WGMMA_F32_64x64x16_F16", "waves_k": 4})
    with pytest.raises(ConfigError):  # the warpgroup kernel refuses the other type, by name
        registry.resolve(sm90, p, {"intrinsic": "WGMMA_F32_64x64x16_BF16"})


@pytest.mark.parametrize(
    "target",
    [
        "gfx942",
        "gfx1201",
        pytest.param("gfx950", marks=pytest.mark.exhaustive),
        pytest.param("gfx1100", marks=pytest.mark.exhaustive),
    ],
)
def test_dynamic_m_versions_compile_and_verify_on_amd(target):
    """``mmaflow compile`` of a dynamic-M ``nn.Linear`` module (two kernels, an export each) on AMD:
    verification reads each kernel's K loop and matrix instructions from its own part of the
    .rocmasm (``isa.split_kernels``; a versioned dispatch's ISA was once parsed as PTX, found with
    no matrix instruction, and every such module refused -- ``mmaflow report --suite smoke`` showed it)."""
    from mmaflow.compiler.target.isa import parse_isa, split_kernels

    res = compile_module(dynamic_module(None, 8192, 1024, transpose_b=True), target)  # verify=True
    (exe,) = res.taken
    (v,) = exe.facts.versions
    t = get_target(target)
    main, parts = split_kernels(res.isa_text[exe.name])
    for cfg, text, name in ((exe.facts.config, main, exe.kernel), (v.config, parts[v.export], v.export)):
        rep = parse_isa(text, name, t)
        assert rep.counts.get("matrix", 0) > 0, (cfg.intrinsic, rep.counts)
        assert t.intrinsic(cfg.intrinsic).mnemonic in text
        assert rep.counts.get("global_load_b128", 0) > 0 and not rep.vgpr_spills


def test_a_grid_of_few_warps_a_sm_doubles_the_waves(tmp_path):
    """The heuristic (the tuning table aside): a grid of one row tile at no more than the seeded 8 warps a
    SM (at the seeded waves and its columns) gets them doubled while they divide the K tiles and fit a
    workgroup, half the most threads for more than one column tile; a full grid, two row tiles, asked
    waves or columns and a target seeded 0 (AMD) keep the seed. The doubled kernels do not spill."""
    from mmaflow.compiler.kernels.decode.heuristic import decode_config

    def config(m, n, k, target, overrides=None):
        p = _taken(matmul_module(m, n, k, transpose_b=True), target).facts.problem
        why: list[str] = []
        cfg, _ = decode_config(get_target(target), p, overrides or {}, why)
        return cfg, " ".join(why)

    # k/v of Llama-3-8B: 1024 columns in 8-column workgroups x 8 warps = 1024 warps <= 8 x 132
    cfg, why = config(1, 1024, 4096, "sm_90a")
    assert cfg.waves_k == 32 and cfg.tile_n == 8, cfg
    assert "doubled from 8: 1024 warps are no more than 8 a SM x 132 SMs" in why, why
    assert config(1, 256, 2048, "sm_90a")[0].waves_k == 16  # (16 K tiles of 128 hold 16 waves at most)
    cfg = config(16, 512, 8192, "sm_90a")[0]  # two column tiles (M 16 keeps 16 columns): 512 threads at most
    assert (cfg.waves_k, cfg.tile_n) == (16, 16), cfg
    cfg, why = config(1, 4096, 4096, "sm_90a")  # 256 workgroups of 16 columns x 8 warps = 2048 warps
    assert cfg.waves_k == 8 and "doubled" not in why, (cfg, why)
    cfg, why = config(32, 256, 2048, "sm_90a")  # two row tiles: not doubled
    assert cfg.waves_k == 8 and "doubled" not in why, (cfg, why)
    assert config(1, 1024, 4096, "sm_90a", {"waves_k": 4})[0].waves_k == 4
    # asked columns count: 2048 columns of 8 are 256 workgroups x 8 warps = 2048 warps
    assert config(1, 2048, 4096, "sm_90a", {"tile_n": 8})[0].waves_k == 8
    cfg, why = config(1, 1024, 4096, "gfx942")
    assert "doubled" not in why and cfg.waves_k == DECODE_AMD.waves_k.value, (cfg, why)
    # ptxas: no spills at the doubled configs (shapes the sm_90a table has no entry for)
    for m, n, k, waves in ((1, 1024, 8192, 32), (16, 512, 8192, 16)):
        res = compile_module(matmul_module(m, n, k, transpose_b=True), "sm_90a")
        (exe,) = res.taken
        assert exe.facts.config.waves_k == waves, exe.facts.config
        sm90a_ptxas(tmp_path, res.isa_text[exe.name])


def test_stages_without_waves_k_ask_for_the_tiled_kernel():
    """``--config stages=S`` alone is the tiled kernel's ring depth; with ``waves_k`` it is the decode
    kernel's loads-ahead, which needs two K tiles a wave."""
    for stages in (2, 3):
        cfg = _taken(DECODE_SRC, "sm_80", {"stages": stages}).facts.config
        assert cfg.waves_k == 1 and cfg.stages == stages, cfg
    with pytest.raises(ConfigError, match="stages=2 issues a wave's next K tile's loads ahead: 4 waves over 4 K"):
        _taken(DECODE_SRC, "sm_80", {"waves_k": 4, "stages": 2})
