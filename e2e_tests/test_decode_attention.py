"""Decode attention: a decoder step's queries against a KV cache whose length is a run-time size.

IREE 3.13 forms one ``iree_linalg_ext.attention`` dispatch from PyTorch's
``scaled_dot_product_attention(q, k, v, enable_gqa=True)`` with the cache's length dynamic: the
query heads sharing a KV head are folded into the attention's query rows, and K's and V's length
reach the dispatch as two push constants (``modules.decode_attention_module`` builds the same op;
the first test checks that). mmaflow's flash-attention kernel takes it on every target, the loop's
trip count and every bound from the run-time length; on sm_90a a thread block cluster of workgroups
splits the keys of each block of queries and combines the partial softmax statistics and outputs
through distributed shared memory (flash-decoding, ``nvidia._Kernel.combine``).

On the lane executor against the float64 reference (``attention_reference``, with its bound):
Q, K, V and O at non-zero byte offsets (K and V in one binding) surrounded by sentinel bytes, which
must stay unchanged, and O written exactly once; key lengths from 1 (one key) through a partial
last tile to more tiles than the cluster has ranks; every target; additive and boolean masks.
Removing either cluster barrier of the combine, the warps' barrier or the barrier before the
partials overwrite the K ring is caught.
"""

from __future__ import annotations

import dataclasses
import re

import ml_dtypes
import numpy as np
import pytest
from test_flash_attention import place

from mmaflow.compiler.core.attention import Attention
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import new_context
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.kernels.attention import nvidia
from mmaflow.compiler.kernels.attention.nvidia import Placement, plan_flash_attention, standalone_module
from mmaflow.runtime.attention_reference import attention_bound, attention_reference, bool_mask_additive
from mmaflow.runtime.executor import ExecutorError, Kernel
from mmaflow.runtime.modules import decode_attention_module

TARGETS = ["sm_80", "sm_90a", "gfx942", "gfx950", "gfx1100", "gfx1201"]
DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _attention(batch, m, d, elem, mask="no mask", mask_type=None, v_transposed=False):
    return Attention(
        "iree_linalg_ext.attention",
        (batch,),
        m,
        d,
        None,
        d,
        elem,
        elem,
        elem,
        elem,
        d**-0.5,
        mask,
        mask_type,
        v_transposed=v_transposed,
    )


def run_decode(target, batch, m, d, elem, k2, *, mask=None, seed=0, split_kv=None, v_transposed=False, **options):
    """The kernel for a run-time key length on the executor at ``k2`` keys; O checked against the
    reference, nothing outside O changed, O written once. Returns the plan. ``v_transposed``: V
    stored (batch, head dim, keys), as IREE lays out a decoder step's broadcast cache; ``options``:
    the plan's (``plan_flash_attention``)."""
    dt = DT[elem]
    rng = np.random.default_rng(seed)
    q = (0.8 * rng.standard_normal((batch, m, d))).astype(dt)
    k = rng.standard_normal((batch, k2, d)).astype(dt)
    v = rng.standard_normal((batch, k2, d)).astype(dt)
    o = np.zeros((batch, m, d), dt)
    tensors = {"q": q, "k": k, "v": np.ascontiguousarray(v.transpose(0, 2, 1)) if v_transposed else v, "o": o}
    layout = {
        "q": Placement(0, 64),
        "k": Placement(1, 128),
        "v": Placement(1, 128 + k.nbytes + 192, (0, 2, 1) if v_transposed else None),
        "o": Placement(2, 256),
    }
    ref_mask, kind = None, "no mask"
    if mask == "additive":  # random finite values, some keys -inf (never key 0)
        mvals = rng.uniform(-3.0, 1.0, (batch, m, k2))
        mvals[..., 1:][rng.random((batch, m, k2 - 1)) < 0.2] = -np.inf
        tensors["mask"] = mvals.astype(dt)
        ref_mask, kind = tensors["mask"].astype(np.float64), f"additive {elem} mask"
    elif mask == "boolean":  # bytes 0 / 1, key 0 always 1
        bits = rng.random((batch, m, k2)) < 0.8
        bits[..., 0] = True
        tensors["mask"] = bits.astype(np.uint8)
        ref_mask, kind = bool_mask_additive(tensors["mask"]), "boolean i1 mask"
    if mask:
        layout["mask"] = Placement(3, 48 * 16)
    bufs, _ = place(tensors, layout)  # sentinel bytes everywhere but the tensors
    before = {b: x.copy() for b, x in bufs.items()}

    mask_type = {"additive": elem, "boolean": "i1", None: None}[mask]
    plan = plan_flash_attention(
        _attention(batch, m, d, elem, kind, mask_type, v_transposed), target=target, split_kv=split_kv, **options
    )
    assert plan.v_transposed == v_transposed
    module, fn = standalone_module(
        plan, q=layout["q"], k=layout["k"], v=layout["v"], o=layout["o"], mask=layout.get("mask"), ctx=new_context()
    )
    assert module.operation.verify()
    constants = [k2, k2] + ([k2] if mask else [])
    kernel = Kernel(
        fn,
        arch=target,
        grid=plan.grid,
        workgroup_size=plan.workgroup_size,
        wave_size=plan.wave_size,
        constants=constants,
    )
    stats = kernel.run(bufs)
    assert not stats.races, stats.races[:3]
    ob, oo = layout["o"].binding, layout["o"].offset
    for b in bufs:
        idx = np.flatnonzero(bufs[b] != before[b])
        outside = idx if b != ob else idx[(idx < oo) | (idx >= oo + o.nbytes)]
        assert outside.size == 0, f"binding {b}: bytes {outside[:8]} outside O changed"
    assert kernel.written[ob][oo : oo + o.nbytes].all() and kernel.written[ob].sum() == o.nbytes
    out = bufs[ob][oo : oo + o.nbytes].view(dt).reshape(o.shape).astype(np.float64)
    ref = attention_reference(q, k, v, plan.scale, False, mask=ref_mask)
    bound = attention_bound(ref, v, elem)
    err = np.abs(out - ref)
    assert np.isfinite(out).all()
    assert (err <= bound).all(), f"K2 {k2}: max error {err.max():.3g} (bound there {bound.flat[err.argmax()]:.3g})"
    return plan


# (batch, M (query heads sharing a KV head x query length), head dim, dtype, mask)
FORMS = [
    (2, 4, 128, "f16", None),  # Llama-3-8B: 4 query heads a KV head, one query each
    (1, 16, 64, "bf16", None),  # one whole row tile (8 heads x 2 queries)
    (1, 8, 64, "f16", "additive"),
    (2, 3, 64, "bf16", "boolean"),
    (1, 24, 64, "f16", None),  # past one row tile (8 heads x 3 queries): warps split queries, not keys
]
# 1 key; a partial last tile; whole tiles; more tiles than a cluster's 8 ranks (sm_90a), the last partial
KEYS = [1, 100, 256, 1100]


@pytest.mark.parametrize(
    "target,form,k2",
    [
        ("sm_80", FORMS[0], 100),
        ("sm_90a", FORMS[0], 1100),
        ("sm_90a", FORMS[4], 700),
        ("gfx942", FORMS[2], 100),
        ("gfx1100", FORMS[3], 256),
    ],
    ids=lambda x: "-".join(map(str, x)) if isinstance(x, tuple) else str(x),
)
def test_decode_attention(target, form, k2):
    batch, m, d, elem, mask = form
    plan = run_decode(target, batch, m, d, elem, k2, mask=mask)
    assert plan.k2 is None and plan.key_tiles is None
    assert plan.split_kv == (8 if target == "sm_90a" else 1)
    assert bool(plan.warp_keys) == (m <= 16 and not target.startswith("gfx"))


@pytest.mark.exhaustive
@pytest.mark.parametrize("v_transposed", [False, True], ids=["v", "vt"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", FORMS, ids=lambda f: "-".join(map(str, f)))
def test_decode_attention_every_form(target, form, v_transposed):
    """Every form on every target, V stored either way (head dim outer: also at 77 keys, its rows unaligned)."""
    batch, m, d, elem, mask = form
    if target == "gfx1201" and d == 128 and mask:
        pytest.skip("refused on gfx1201 (test_refusals)")
    for k2 in KEYS + ([77] if v_transposed else []):
        run_decode(target, batch, m, d, elem, k2, mask=mask, seed=k2, v_transposed=v_transposed)


# V stored head dim outer (a decoder step's cache as IREE broadcasts it): its tiles read along the keys, 16 bytes
# a load where K2 is a multiple of 8 (its rows then 16-byte aligned), else one element a load; every target.
VT_CASES = [
    ("sm_90a", (2, 4, 128, "f16", None), 1100),  # unaligned rows, more tiles than the cluster's ranks
    ("sm_90a", (1, 1, 64, "bf16", "additive"), 256),  # aligned
    ("sm_80", (2, 4, 64, "f16", "boolean"), 77),
    ("gfx942", (2, 4, 128, "bf16", None), 77),
    ("gfx1100", (1, 4, 64, "f16", None), 256),
    ("gfx1201", (1, 4, 64, "f16", "additive"), 77),  # RDNA4: V^T's LDS columns permuted
]


@pytest.mark.parametrize(
    "target,form,k2", VT_CASES, ids=lambda x: "-".join(map(str, x)) if isinstance(x, tuple) else str(x)
)
def test_v_stored_head_dim_outer(target, form, k2):
    batch, m, d, elem, mask = form
    plan = run_decode(target, batch, m, d, elem, k2, mask=mask, v_transposed=True)
    assert "V stored head dim outer" in plan.describe()


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_v_head_dim_outer_module_is_taken_and_checked(target):
    """``decode_attention_module(v_transposed=True)`` (``bench --attention --decode --v-head-dim-outer``):
    IREE folds the GQA broadcast as for the plain form and keeps V stored head dim outer; taken and
    right at an unaligned and an aligned key length."""
    from mmaflow.runtime.model_check import check_executable

    (exe,) = codegen_module(decode_attention_module(1, 8, 4, 128, v_transposed=True), target).taken
    attn = exe.facts.problem.attention
    assert attn.v_transposed and attn.m == 4 and exe.facts.problem.orders[2] == (0, 2, 1)
    for k2 in (77, 256):
        (c,) = check_executable(exe, sizes={"k2": k2}, sample=3)
        assert c.passed, f"K2 {k2}: {c.detail}"


def test_one_query_with_a_mask_is_checked_against_many_keys():
    """The check's additive mask for a decoder step (one query, the keys many): causal bottom-right
    aligned, so the query sees every key (plus random values), not key 0 alone (top-left aligned, O
    would be V's key 0 exactly, and no key past it could fail the check)."""
    from mmaflow.runtime.model_check import check_executable

    (exe,) = codegen_module(decode_attention_module(2, 8, 1, 64, mask="additive", v_transposed=True), "sm_90a").taken
    (c,) = check_executable(exe, sizes={"k2": 77})
    assert c.passed and c.max_abs_err > 0, c.line()


def test_unaligned_v_rows_need_the_narrow_loads(monkeypatch):
    """V's rows 16-byte aligned whatever K2 (the alignment test dropped): at K2 = 77 the 16-byte loads
    start mid-row, and the executor reports the misaligned access, as the GPU would fault."""
    run_decode("sm_90a", 1, 4, 64, "f16", 77, v_transposed=True)
    monkeypatch.setattr(nvidia._Kernel, "vt_rows_aligned", lambda self, em, v_mem: True)
    with pytest.raises(ExecutorError, match="alignment"):
        run_decode("sm_90a", 1, 4, 64, "f16", 77, v_transposed=True)


@pytest.mark.parametrize("split", [1, 2, 5])
def test_split_sizes(split):
    """Any cluster size up to the target's limit gives the same result, one rank having no key tile
    (5 ranks over 4 tiles: ceil(4 / 5) = 1 each, rank 4's past K2)."""
    run_decode("sm_90a", 1, 4, 64, "f16", 250, split_kv=split)


@pytest.mark.exhaustive
def test_many_workgroups_keep_the_warps_on_queries():
    """With as many workgroups as SMs, the warps do not split the keys (measured when their partials
    had shared memory of their own: ``nvidia._warp_keys``); the cluster still combines its ranks'."""
    plan = run_decode("sm_90a", 67, 4, 64, "f16", 150, split_kv=2)
    assert plan.split_kv == 2 and not plan.warp_keys


@pytest.mark.parametrize(
    "which,error", [(0, "distributed shared memory race"), (1, "exits while CTA 0 of its cluster may still load")]
)
def test_combine_needs_both_cluster_barriers(monkeypatch, which, error):
    """Without the first cluster barrier a rank reads a peer's partial before it is stored; without
    the second a rank exits (its shared memory gone) while a peer still reads it: the executor
    reports each."""
    syncs = [True, True]
    syncs[which] = False
    monkeypatch.setattr(nvidia._Kernel, "_combine_syncs", tuple(syncs))
    with pytest.raises(ExecutorError, match=error):
        run_decode("sm_90a", 1, 4, 64, "f16", 300, split_kv=4)


@pytest.mark.parametrize(
    "target,d,warps,keys,stages,k2",
    [
        ("sm_90a", 128, 8, 16, None, 1100),  # 128-key tiles over a cluster of 8, the last ranks' past K2
        ("sm_90a", 64, 4, 32, None, 300),
        ("sm_80", 64, 8, 32, None, 77),  # 256-key tiles, one of them partial
        ("sm_80", 64, 4, 16, 1, 100),  # no ring: the partials in shared memory of their own
    ],
)
def test_warp_shapes(target, d, warps, keys, stages, k2):
    """Every shape of the warps' key split is right: 4 or 8 warps of 16 or 32 keys a tile, the
    partials in the K ring where it holds them."""
    plan = run_decode(target, 2, 4, d, "f16", k2, seed=k2, warps=warps, warp_keys=keys, stages=stages)
    assert (plan.warps, plan.warp_keys, plan.block_n) == (warps, keys, warps * keys)
    assert plan.partials_in_ring == (stages is None)
    assert f"{plan.workgroup_size} threads" in plan.describe() and f"each warp {keys} keys" in plan.describe()


def test_partials_in_the_ring_need_its_barrier(monkeypatch):
    """The partials overwrite the K ring once the loop is over; without the barrier before them a warp
    stores its partial over keys another warp still reads for the last tile: the executor reports
    the race."""
    plan = run_decode("sm_80", 1, 4, 64, "f16", 100)
    assert plan.partials_in_ring
    monkeypatch.setattr(nvidia._Kernel, "_combine_ring_barrier", False)
    with pytest.raises(AssertionError, match="race"):
        run_decode("sm_80", 1, 4, 64, "f16", 100)


def test_warp_merge_needs_its_barrier(monkeypatch):
    """Each warp computes on its own 16 keys of every tile; without the barrier before warp 0 reads
    the other warps' partial results, the executor reports the race."""
    monkeypatch.setattr(nvidia._Kernel, "_combine_warp_barrier", False)
    with pytest.raises(AssertionError, match="race"):
        run_decode("sm_80", 1, 4, 64, "f16", 100)  # "LDS race ... read of lane 32's write with no barrier"


@pytest.mark.parametrize(
    "target,options,why",
    [
        ("sm_80", dict(split_kv=2), "no clusters"),
        ("sm_90a", dict(split_kv=9), "1 to 8"),
        ("gfx942", dict(split_kv=2), "no clusters"),
        ("sm_90a", dict(kernel="wgmma"), "static key length"),
        ("sm_80", dict(causal=True), "causal with a run-time key length"),
        ("sm_80", dict(warp_keys=24), "16 or 32 keys"),
        ("sm_80", dict(warp_keys=0, warps=8), "4 warps of 16 queries"),
        ("sm_90a", dict(kernel="wgmma", warps=8), "mma.sync attention kernel"),
        ("gfx942", dict(warp_keys=16), "mma.sync attention kernel"),
    ],
)
def test_refusals(target, options, why):
    with pytest.raises(UnsupportedError, match=why):
        plan_flash_attention(_attention(1, 4, 64, "f16"), target=target, **options)


def _dispatch_attention(source: str) -> list[str]:
    """The attention op of each dispatch IREE forms from ``source`` (executable sources), SSA names
    erased."""
    from iree.compiler import compile_str

    text = compile_str(
        source,
        extra_args=["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80", "--compile-to=executable-sources"],
    ).decode()
    return [
        re.sub(r"%[\w$.]+", "%_", line.strip().split(" loc(")[0])
        for line in text.splitlines()
        if "iree_linalg_ext.attention" in line or "dispatch.tensor<" in line and "subspan" in line
    ]


@pytest.mark.parametrize("mask", [None, "additive"])
def test_module_is_what_iree_makes_of_torch_gqa_sdpa(mask):
    """``decode_attention_module`` gives the dispatch IREE forms from torch's SDPA with ``enable_gqa``
    and a dynamic cache length, the cache passed in whole (torch-dialect SDPA as iree-turbine emits the op;
    a whole decoder step that first appends to the cache is another form: e2e_tests/models' llama_decode):
    the same attention op over the same bindings, the KV broadcast folded into 4 query rows."""
    q, kv, m = (
        "!torch.vtensor<[2,32,1,128],f16>",
        "!torch.vtensor<[2,8,?,128],f16>",
        "!torch.vtensor<[2,32,1,?],f16>",
    )
    args = f"%q: {q}, %k: {kv}, %v: {kv}" + (f", %m: {m}" if mask else "")
    mask_arg, mask_t = ("%m", m) if mask else ("%none", "!torch.none")
    torch_form = (
        f"func.func @sdpa({args}) -> {q} {{\n"
        "  %none = torch.constant.none\n  %zero = torch.constant.float 0.000000e+00\n"
        "  %false = torch.constant.bool false\n  %true = torch.constant.bool true\n"
        f"  %r = torch.aten.scaled_dot_product_attention %q, %k, %v, {mask_arg}, %zero, %false, %none, %true : "
        f"{q}, {kv}, {kv}, {mask_t}, !torch.float, !torch.bool, !torch.none, !torch.bool -> {q}\n"
        f"  return %r : {q}\n}}\n"
    )
    ours = _dispatch_attention(decode_attention_module(2, 8, 4, 128, mask=mask))
    assert any("16x4x128xf16" in x for x in ours if "attention" in x), ours
    assert ours == _dispatch_attention(torch_form)


def test_taken_from_the_dispatch_and_checked():
    """The IREE dispatch (K's and V's lengths two push constants) is taken with the run-time key length
    recorded, and `mmaflow run --device sim`'s check passes at several lengths."""
    from mmaflow.runtime.model_check import check_executable

    src = decode_attention_module(1, 2, 4, 64, "f16", mask="additive")
    (exe,) = codegen_module(src, "sm_90a").taken
    (dyn,) = exe.facts.problem.dynamic
    assert dyn.dim == "k2" and len(dyn.ordinals) == 2  # K's and V's (the mask's is one of them)
    assert any("a run-time number of keys" in x and "cluster of" in x for x in exe.log), exe.log
    for k2 in (1, 333):
        (check,) = check_executable(exe, sizes={"k2": k2})
        assert check.passed, f"K2 {k2}: {check.detail}"


def _ldmatrix_under(threshold: int):
    """A 64-thread kernel whose threads below ``threshold`` run ``ldmatrix.x1`` of an LDS tile."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, func, gpu, memref, scf

    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        f16, index = ir.F16Type.get(), ir.IndexType.get()
        lds_t = ir.MemRefType.get([8, 8], f16, memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("k", ir.FunctionType.get([], []))
            with ir.InsertionPoint(fn.add_entry_block()):
                lds = memref.AllocOp(lds_t, [], []).result
                tid = gpu.ThreadIdOp(gpu.Dimension.x).result
                row = arith.RemUIOp(tid, arith.ConstantOp(index, 8).result).result
                c0 = arith.ConstantOp(index, 0).result
                cond = arith.CmpIOp(arith.CmpIPredicate.ult, tid, arith.ConstantOp(index, threshold).result).result
                iff = scf.IfOp(cond)
                with ir.InsertionPoint(iff.then_block):
                    ir.Operation.create(
                        "nvgpu.ldmatrix",
                        results=[ir.VectorType.get([1, 2], f16)],
                        operands=[lds, row, c0],
                        attributes={
                            "numTiles": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
                            "transpose": ir.BoolAttr.get(False),
                        },
                    )
                    scf.YieldOp([])
                func.ReturnOp([])
    return ctx, module, fn


def test_ldmatrix_runs_under_a_branch_whole_warps_take():
    """A warp that skips a warp-uniform branch (the decode kernel's warps past M) issues nothing; a
    branch divergent within a warp is still refused."""
    _, _m, fn = _ldmatrix_under(32)
    kernel = Kernel(fn.operation, arch="sm_80", grid=(1, 1, 1), workgroup_size=64, wave_size=32)
    kernel.run({})
    assert kernel.stats.lds_access_pieces > 0
    _, _m2, fn = _ldmatrix_under(16)
    with pytest.raises(ExecutorError, match="nvgpu.ldmatrix under control flow divergent within a wave"):
        Kernel(fn.operation, arch="sm_80", grid=(1, 1, 1), workgroup_size=64, wave_size=32).run({})


def test_a_sample_of_split_workgroups_owns_its_queries():
    """A sampled check (whole clusters) of a split kernel with two blocks of queries (4 heads x 20
    queries = 80 rows): each cluster's workgroups own their block's rows, no other."""
    from mmaflow.runtime.model_check import check_executable

    (exe,) = codegen_module(decode_attention_module(4, 2, 4, 64, "bf16", q_len=20), "sm_90a").taken
    assert any("cluster of 8" in x for x in exe.log), exe.log
    (check,) = check_executable(exe, sizes={"k2": 300}, sample=1)
    assert check.passed and check.workgroups < check.grid_size, check.line()


def test_split_workgroups_own_their_block_of_queries():
    """The check's ownership map: the 8 workgroups of a cluster along x share one block of 64 queries."""
    from mmaflow.runtime.model_check import _attention_owned

    owned = _attention_owned((8, 80, 64), (16, 8, 1), list(range(8)), 64, split=8)
    assert owned[0, :64].all() and not owned[0, 64:].any() and not owned[1:].any()
    owned = _attention_owned((8, 80, 64), (16, 8, 1), [8], 64, split=8)
    assert owned[0, 64:].all() and not owned[0, :64].any()


def test_warp_keys_take_a_run_time_key_length():
    """The warps' key split is the decode form's: a static key length is refused, not masked wrong."""
    static = dataclasses.replace(_attention(1, 4, 64, "f16"), k2=48)
    with pytest.raises(UnsupportedError, match="static key length"):
        plan_flash_attention(static, target="sm_80", warp_keys=16)
    assert not plan_flash_attention(static, target="sm_80").warp_keys


def test_warp_keys_take_one_row_tile():
    """The warps split the keys only where they all hold the same queries (one 16-row tile)."""
    with pytest.raises(UnsupportedError, match="at most 16"):
        plan_flash_attention(_attention(1, 24, 64, "f16"), target="sm_80", warp_keys=16)
    assert not plan_flash_attention(_attention(1, 24, 64, "f16"), target="sm_80").warp_keys
