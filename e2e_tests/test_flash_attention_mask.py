"""The flash-attention kernel with an additive mask tensor (PyTorch's causal SDPA arrives so:
``is_causal=True`` exported by iree-turbine is an f16/bf16 0 / -inf tensor made by an earlier
dispatch) on the lane executor, against the float64 reference with the mask added
(``runtime/attention_reference.py``: same bound).

The mask sits in Q's binding after Q (as IREE packs them), everything surrounded by sentinel
bytes; after the run only O's bytes changed and all of them were written. Sizes are small (the
executor is a slow simulator): partial query and key tiles, f16 and bf16, head dims 64 and 128,
a causal mask, random finite masks, a row whose first key tile is all masked (the -inf guard),
and masks broadcast over batch dims or stored keys-outer (the per-element loads). Boolean (i1)
masks likewise, one byte per element as IREE stores them (the reference adds 0 / -inf), with
rows masked at every key (NaN in both) and the kernel's causal option on top of one.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import attention_ptx_without_spills
from test_flash_attention import _DT, place

from mmaflow.compiler.core.attention import Attention
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import new_context, ops_named
from mmaflow.compiler.kernels.attention.nvidia import Placement, plan_flash_attention, standalone_module
from mmaflow.runtime.attention_reference import attention_bound, attention_reference, bool_mask_additive
from mmaflow.runtime.executor import Kernel


def _attention(bdims, m, k2, d, elem, mask_type=None):
    mask = f"additive {mask_type} mask" if mask_type else "no mask"
    if mask_type == "i1":
        mask = "boolean i1 mask"
    return Attention(
        "iree_linalg_ext.attention", tuple(bdims), m, d, k2, d, elem, elem, elem, elem, d**-0.5, mask, mask_type
    )


def _causal(m, k2):
    return np.where(np.arange(k2)[None, :] > np.arange(m)[:, None], -np.inf, 0.0)


def make_mask(kind, bdims, m, k2, rng):
    """The logical mask (batch..., M, K2), float64."""
    full = tuple(bdims) + (m, k2)
    if kind == "causal":
        return np.broadcast_to(_causal(m, k2), full).copy()
    if kind == "random":  # finite, within a few units of the scores
        return rng.uniform(-4.0, 2.0, full)
    if kind == "causal+random":
        return _causal(m, k2) + rng.uniform(-3.0, 1.0, full)
    if kind == "first-tile-dead":  # even rows: keys 0..63 all masked, the rest visible
        x = rng.uniform(-2.0, 2.0, full)
        x[..., ::2, :64] = -np.inf
        return x
    # Boolean (i1) masks, True = takes part: the bool array itself.
    if kind in ("bool", "bool-bit0"):  # mostly true, key 0 true in every row
        x = rng.random(full) < 0.8
        x[..., 0] = True
        return x
    if kind == "bool-dead-rows":  # mostly true; rows 3 and 5 masked at every key (NaN in both)
        x = rng.random(full) < 0.8
        x[..., 0] = True
        x[..., [3, 5], :] = False
        return x
    if kind == "bool-first-tile-dead":  # even rows: keys 0..63 all false, the rest mostly true
        x = rng.random(full) < 0.8
        x[..., ::2, :64] = False
        x[..., 64] = True
        return x
    raise ValueError(kind)


def bool_bytes(x: np.ndarray, kind: str, rng) -> np.ndarray:
    """An i1 mask as IREE stores it, one byte per element: 0 / 1 (numpy's bool bytes, what
    iree.runtime passes); "bool-bit0": other bytes with the same bit 0 (IREE truncates to bit 0)."""
    if kind != "bool-bit0":
        return x.astype(np.uint8)
    return (rng.integers(0, 128, x.shape) * 2 + x).astype(np.uint8)


def run_masked(bdims, m, k2, d, elem, kind, order=None, seed=0, target="sm_80", causal=False, **plan_options):
    """Run the kernel with an additive ``kind`` mask (a "bool..." kind: a boolean i1 mask, stored
    one byte per element) stored in ``order`` (over (batch..., queries, keys); None: that order,
    all batch dims), with the kernel's causal option if ``causal`` (``plan_options``: the rest of
    ``plan_flash_attention``'s); returns the plan."""
    boolean = kind.startswith("bool")
    dt = _DT[elem]
    rng = np.random.default_rng(seed)
    batch = int(np.prod(bdims))
    q = (0.8 * rng.standard_normal((batch, m, d))).astype(dt)
    k = rng.standard_normal((batch, k2, d)).astype(dt)
    v = rng.standard_normal((batch, k2, d)).astype(dt)
    nb = len(bdims)
    logical = make_mask(kind, bdims, m, k2, rng)
    order = tuple(range(nb + 2)) if order is None else order
    # Stored: the dims in ``order``; a batch dim left out is a broadcast (take index 0 of it).
    taken = logical[tuple(slice(None) if i in order else 0 for i in range(nb + 2))]
    present = [i for i in range(nb + 2) if i in order]
    stored = np.transpose(taken, [present.index(i) for i in order])
    stored = bool_bytes(stored, kind, rng) if boolean else stored.astype(dt)
    additive = bool_mask_additive(stored) if boolean else stored.astype(np.float64)
    seen = np.transpose(additive, [order.index(i) for i in present])  # back to logical (subset)
    seen = seen.reshape([logical.shape[i] if i in order else 1 for i in range(nb + 2)])
    ref_mask = np.broadcast_to(seen, logical.shape).reshape(batch, m, k2)
    o = np.zeros((batch, m, d), dt)
    q_end = 64 + q.nbytes
    layout = {
        "q": Placement(0, 64),
        "k": Placement(1, 128),
        "v": Placement(1, 128 + k.nbytes + 192),
        "o": Placement(2, 256),
        "mask": Placement(0, -(-(q_end + 48) // 16) * 16),
    }
    bufs, _ = place({"q": q, "k": k, "v": v, "o": o, "mask": np.ascontiguousarray(stored)}, layout)
    before = {b: buf.copy() for b, buf in bufs.items()}
    plan = plan_flash_attention(
        _attention(bdims, m, k2, d, elem, "i1" if boolean else elem), target=target, causal=causal, **plan_options
    )
    pl = layout
    if nb > 1 or order != tuple(range(nb + 2)):  # per-dim addressing: Q, K, V, O (batch..., rows, d)
        pl = {
            n: Placement(x.binding, x.offset, tuple(range(nb + 2)) if n != "mask" else order) for n, x in layout.items()
        }
    module, fn = standalone_module(plan, q=pl["q"], k=pl["k"], v=pl["v"], o=pl["o"], mask=pl["mask"], ctx=new_context())
    assert module.operation.verify()
    kernel = Kernel(fn, arch=target, grid=plan.grid, workgroup_size=plan.workgroup_size, wave_size=plan.wave_size)
    # Causal: the key loop's bound depends on the workgroup (uniform bounds: one workgroup a batch).
    # One workgroup per batch of lanes where loop bounds differ between them (causal, a persistent grid).
    one_each = causal or getattr(plan, "workers", 0)
    stats = kernel.run(bufs, max_lanes=plan.workgroup_size if one_each else 1 << 14)
    assert not stats.races, stats.races[:3]
    ob, oo = layout["o"].binding, layout["o"].offset
    for b in bufs:
        idx = np.flatnonzero(bufs[b] != before[b])
        outside = idx if b != ob else idx[(idx < oo) | (idx >= oo + o.nbytes)]
        assert outside.size == 0, f"binding {b}: bytes {outside[:8]} outside O changed"
    assert kernel.written[ob][oo : oo + o.nbytes].all() and kernel.written[ob].sum() == o.nbytes
    out = bufs[ob][oo : oo + o.nbytes].view(dt).reshape(o.shape).astype(np.float64)
    ref = attention_reference(q, k, v, plan.scale, causal, mask=ref_mask)
    if kind == "causal":  # the same as the kernel's causal option's reference
        assert np.array_equal(ref, attention_reference(q, k, v, plan.scale, True))
    bound = attention_bound(ref, v, elem)
    dead = np.isnan(ref)  # rows masked at every key: 0 / 0 in both
    assert dead.any() == (kind == "bool-dead-rows")
    assert np.array_equal(np.isnan(out), dead) and np.isfinite(out[~dead]).all()
    err = np.where(dead, 0.0, np.abs(out - ref))
    assert ((err <= bound) | dead).all(), f"max error {err.max():.3g} (bound there {bound.flat[err.argmax()]:.3g})"
    assert stats.lds_conflict_cycles == 0
    return plan


CASES = [  # (batch dims, M, K2, head dim, type, mask kind, mask order)
    ((1,), 64, 64, 64, "f16", "causal", None),
    ((2,), 100, 72, 128, "bf16", "random", None),
    ((1,), 48, 100, 128, "f16", "causal+random", None),
    ((1,), 32, 128, 64, "bf16", "first-tile-dead", None),
    ((2, 3), 20, 40, 64, "f16", "causal+random", (1, 2, 3)),  # broadcast over batch dim 0
    ((2, 2), 24, 70, 64, "bf16", "random", (1, 3, 2)),  # keys outer: one load per element
]


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=lambda c: (
        f"{'x'.join(map(str, c[0]))}-m{c[1]}-k{c[2]}-d{c[3]}-{c[4]}-"
        f"{c[5]}{'-order' + ''.join(map(str, c[6])) if c[6] else ''}"
    ),
)
def test_masked_attention_on_the_executor(case):
    bdims, m, k2, d, elem, kind, order = case
    plan = run_masked(bdims, m, k2, d, elem, kind, order)
    assert plan.mask == elem and "additive" in plan.describe()


def test_masked_kernel_ops():
    """Per tile, one 2-element load per C run (8 n-instructions x 2 runs) of the mask from
    global memory, added (times log2(e)) to the f32 scores; the -inf guard: one compare per row."""
    plan = plan_flash_attention(_attention((1,), 100, 100, 64, "f16", "f16"))
    module, fn = standalone_module(
        plan, q=Placement(0), k=Placement(1), v=Placement(2), o=Placement(3), mask=Placement(4), ctx=new_context()
    )
    loads = [x for x in ops_named(fn, "vector.load") if "mmaflow.load_mask" in str(x.location)]
    assert len(loads) == 8 * 2 and all(str(x.result.type) == "vector<2xf16>" for x in loads)
    assert len(ops_named(fn, "arith.extf")) == 8 * 4
    assert len(ops_named(fn, "arith.cmpf")) == 2
    subs = ops_named(fn, "hal.interface.binding.subspan")
    assert [int(str(s.attributes["binding"]).split(":")[0]) for s in subs] == [0, 1, 2, 3, 4]


BOOL_CASES = [  # (batch dims, M, K2, head dim, type, mask kind, mask order, causal)
    ((1,), 64, 100, 64, "f16", "bool", None, False),  # partial key tile
    ((2,), 40, 72, 64, "bf16", "bool-bit0", None, False),  # bytes other than 0 / 1: bit 0 counts
    ((1,), 32, 128, 64, "bf16", "bool-first-tile-dead", None, False),
    ((1,), 16, 70, 64, "f16", "bool-dead-rows", None, False),  # NaN rows, as the reference
    ((1,), 48, 100, 64, "f16", "bool", None, True),  # causal option and a boolean mask
    ((2, 2), 20, 70, 64, "bf16", "bool", (1, 3, 2), False),  # broadcast, keys outer: byte loads
]


def _bool_id(c):
    return (
        f"{'x'.join(map(str, c[0]))}-m{c[1]}-k{c[2]}-d{c[3]}-{c[4]}-{c[5]}"
        f"{'-order' + ''.join(map(str, c[6])) if c[6] else ''}{'-causal' if c[7] else ''}"
    )


@pytest.mark.parametrize("case", BOOL_CASES, ids=_bool_id)
def test_bool_masked_attention_on_the_executor(case):
    """A boolean (i1) mask, stored one byte per element as IREE stores it: each byte read, bit 0
    turned into 0 / -inf right after the load, the rest the additive path."""
    *args, causal = case
    plan = run_masked(*args, causal=causal)
    assert plan.mask == "i1" and "boolean i1 mask" in plan.describe()


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_bool_mask_sense_inverted_fails(monkeypatch, target):
    """A kernel that reads True as masked (the mask's sense inverted) fails the check (the AMD
    kernel reads through the same ``_Kernel.mask_value``)."""
    from mmaflow.compiler.kernels.attention import nvidia as fa

    def inverted(self, em, v, i):
        x = em.extract(v, i)
        with em.loc, em.ip:
            bit = fa.arith.TruncIOp(fa.ir.IntegerType.get_signless(1), x).result
            zero = fa.arith.ConstantOp(self.t, fa.ir.FloatAttr.get(self.t, 0.0)).result
            neg_inf = fa.arith.ConstantOp(self.t, fa.ir.FloatAttr.get(self.t, -np.inf)).result
        return em.select(bit, neg_inf, zero)

    monkeypatch.setattr(fa._Kernel, "mask_value", inverted)
    with pytest.raises(AssertionError):
        run_masked((1,), 16, 64, 64, "f16", "bool", target=target)


def test_bool_masked_kernel_ops():
    """An i1 mask is read as bytes (vector<2xi8> per C run, never vector<Nxi1>), truncated to
    i1 and selected to 0 / -inf of the inputs' type; its subspan is i8, as IREE's."""
    plan = plan_flash_attention(_attention((1,), 100, 100, 64, "f16", "i1"))
    module, fn = standalone_module(
        plan, q=Placement(0), k=Placement(1), v=Placement(2), o=Placement(3), mask=Placement(4), ctx=new_context()
    )
    assert module.operation.verify()
    loads = ops_named(fn, "vector.load")
    masked = [x for x in loads if "mmaflow.load_mask" in str(x.location)]
    assert len(masked) == 8 * 2 and all(str(x.result.type) == "vector<2xi8>" for x in masked)
    assert not [x for x in loads if "xi1>" in str(x.result.type)]
    assert len(ops_named(fn, "arith.trunci")) == 8 * 4
    subs = ops_named(fn, "hal.interface.binding.subspan")
    assert "xi8," in str(subs[4].result.type)


@pytest.mark.parametrize(
    "attn,why",
    [
        (_attention((1,), 64, 64, 64, "f16", "bf16"), "an additive bf16 mask with f16 inputs"),
        (_attention((1,), 64, 64, 64, "f16", "i8"), "an additive i8 mask with f16 inputs"),
        (_attention((1,), 64, 64, 64, "bf16", "f32"), "an additive f32 mask with bf16 inputs"),
    ],
)
def test_other_masks_are_refused_by_name(attn, why):
    with pytest.raises(UnsupportedError, match=why):
        plan_flash_attention(attn)


def test_a_mask_must_be_placed_and_have_queries_and_keys():
    plan = plan_flash_attention(_attention((2, 3), 64, 64, 64, "f16", "f16"))
    pl = [Placement(i, 0, (0, 1, 2, 3)) for i in range(4)]
    with pytest.raises(UnsupportedError, match="do not place one"):
        standalone_module(plan, q=pl[0], k=pl[1], v=pl[2], o=pl[3], ctx=new_context())
    with pytest.raises(UnsupportedError, match="queries and keys present"):
        standalone_module(plan, q=pl[0], k=pl[1], v=pl[2], o=pl[3], mask=Placement(4, 0, (0, 3)), ctx=new_context())


_MASKED_SOURCE = """func.func @attn(%q: tensor<{b}x{m}x{d}x{t}>, %k: tensor<{b}x{k2}x{d}x{t}>, %v: tensor<{b}x{k2}x{d}x{t}>, %mask: tensor<{b}x{m}x{k2}x{t}>) -> tensor<{b}x{m}x{d}x{t}> {{
  %scale = arith.constant {scale} : {t}
  %e = tensor.empty() : tensor<{b}x{m}x{d}x{t}>
  %o = iree_linalg_ext.attention <{{indexing_maps = [affine_map<(b, m, n, k1, k2) -> (b, m, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, n)>, affine_map<(b, m, n, k1, k2) -> ()>, affine_map<(b, m, n, k1, k2) -> (b, m, k2)>, affine_map<(b, m, n, k1, k2) -> (b, m, n)>]}}> ins(%q, %k, %v, %scale, %mask : tensor<{b}x{m}x{d}x{t}>, tensor<{b}x{k2}x{d}x{t}>, tensor<{b}x{k2}x{d}x{t}>, {t}, tensor<{b}x{m}x{k2}x{t}>) outs(%e : tensor<{b}x{m}x{d}x{t}>) {{
  ^bb0(%s: f32):
    iree_linalg_ext.yield %s : f32
  }} -> tensor<{b}x{m}x{d}x{t}>
  return %o : tensor<{b}x{m}x{d}x{t}>
}}
"""


@pytest.mark.parametrize("d,elem,target", [(64, "f16", "sm_80"), (128, "bf16", "sm_80"), (128, "f16", "sm_90a")])
def test_masked_kernel_ptxas_reports_no_spills(tmp_path, d, elem, target):
    """IREE's masked attention dispatch replaced by the kernel (``rewrite_dispatch`` finds the
    mask's binding and offset), handed back and lowered: ptxas reports no spills within 255
    registers with the tile's mask values live across S = Q K^T."""
    import subprocess
    import sys
    from pathlib import Path

    from mmaflow.compiler.core.mlir import parse_module
    from mmaflow.compiler.kernels.attention.nvidia import rewrite_dispatch
    from mmaflow.compiler.pipeline.hand_back import constant_grid, install
    from mmaflow.compiler.report import ptxas_path
    from mmaflow.compiler.target.targets import get_target

    assert ptxas_path() is not None, "ptxas is missing: pip install -e '.[test]' installs nvidia-cuda-nvcc-cu12"
    bindir = Path(sys.executable).parent
    arch = get_target(target).iree_arch
    (tmp_path / "attn.mlir").write_text(_MASKED_SOURCE.format(b=1, m=128, k2=200, d=d, t=elem, scale=d**-0.5))
    subprocess.run(
        [
            str(bindir / "iree-compile"),
            str(tmp_path / "attn.mlir"),
            "--iree-hal-target-device=cuda",
            f"--iree-cuda-target={arch}",
            "--compile-to=executable-sources",
            "-o",
            str(tmp_path / "src.mlir"),
        ],
        check=True,
    )
    module = parse_module((tmp_path / "src.mlir").read_text(), new_context())
    (fn,) = [f for f in ops_named(module.operation, "func.func") if ops_named(f, "iree_linalg_ext.attention")]
    name, inner = str(fn.attributes["sym_name"]), fn.parent
    plan = rewrite_dispatch(fn, target=target)
    assert plan.mask == elem
    (kernel,) = [f for f in ops_named(inner, "func.func") if str(f.attributes["sym_name"]) == name]
    install(
        kernel,
        get_target(target),
        workgroup_size=plan.workgroup_size,
        subgroup_size=plan.wave_size,
        grid=constant_grid(plan.grid),
    )
    assert module.operation.verify()
    mnemonic = "wgmma.mma_async.sync.aligned.m64n" if target == "sm_90a" else "mma.sync.aligned.m16n8k16"
    attention_ptx_without_spills(tmp_path, str(module), arch, plan.workgroup_size, mnemonic)
