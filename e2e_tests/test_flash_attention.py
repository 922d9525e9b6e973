"""The mma.sync flash-attention kernel (``compiler/kernels/attention/nvidia.py``) on the lane executor,
against a float64 numpy softmax(Q K^T * scale) V.

Every tensor sits at a non-zero byte offset of its binding (K and V share one), surrounded by
sentinel bytes (0xFF: NaN in f16 and bf16); after the run the output must be written in full
and no other byte of any binding changed.

The reference and the tolerance (with its justification) are ``runtime/attention_reference.py``'s.
"""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest
from conftest import attention_ptx_without_spills
from iree.compiler import ir

from mmaflow.compiler.core.attention import Attention
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import new_context, ops_named
from mmaflow.compiler.kernels.attention.nvidia import Placement, plan_flash_attention, standalone_module
from mmaflow.runtime.attention_reference import UNIT_ROUNDOFF, attention_bound, attention_reference
from mmaflow.runtime.executor import Kernel

SENTINEL = 0xFF
_DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
_U = UNIT_ROUNDOFF


def _attention(batch, m, k2, d, elem, scale=None, mask="no mask"):
    return Attention(
        "iree_linalg_ext.attention",
        (batch,),
        m,
        d,
        k2,
        d,
        elem,
        elem,
        elem,
        elem,
        d**-0.5 if scale is None else scale,
        mask,
    )


reference = attention_reference


def place(tensors: dict, layout: dict) -> tuple[dict, dict]:
    """Byte buffers per binding: each tensor at its byte offset, sentinels everywhere else
    (64 bytes after the last tensor). Returns the buffers and each tensor's (binding, offset)."""
    ends: dict[int, int] = {}
    for name, pl in layout.items():
        ends[pl.binding] = max(ends.get(pl.binding, 0), pl.offset + tensors[name].nbytes)
    bufs = {b: np.full(end + 64, SENTINEL, np.uint8) for b, end in ends.items()}
    for name, pl in layout.items():
        raw = tensors[name].view(np.uint8).reshape(-1)
        bufs[pl.binding][pl.offset : pl.offset + raw.size] = raw
    return bufs, layout


# Q at 64 in binding 0; K and V in binding 1 (K at 128, V 192 bytes after K's end); O at 256
# in binding 2.
def _layout(k_bytes):
    return {
        "q": Placement(0, 64),
        "k": Placement(1, 128),
        "v": Placement(1, 128 + k_bytes + 192),
        "o": Placement(2, 256),
    }


def run_case(batch, m, k2, d, elem, causal, seed=0, inputs=None, scale=None, stages=2, target="sm_80", **plan_options):
    dt = _DT[elem]
    rng = np.random.default_rng(seed)
    # Normal inputs; Q scaled so that scores (scale * q.k, variance ~ 0.8^2) spread softmax's
    # weights: neither uniform nor one-hot.
    q = (0.8 * rng.standard_normal((batch, m, d))).astype(dt)
    k = rng.standard_normal((batch, k2, d)).astype(dt)
    v = rng.standard_normal((batch, k2, d)).astype(dt)
    if inputs is not None:
        q, k, v = (x.astype(dt) for x in inputs)
    o = np.zeros((batch, m, d), dt)
    layout = _layout(k.nbytes)
    bufs, _ = place({"q": q, "k": k, "v": v, "o": o}, layout)
    before = {b: buf.copy() for b, buf in bufs.items()}

    plan = plan_flash_attention(
        _attention(batch, m, k2, d, elem, scale=scale), target=target, causal=causal, stages=stages, **plan_options
    )
    ctx = new_context()
    module, fn = standalone_module(plan, q=layout["q"], k=layout["k"], v=layout["v"], o=layout["o"], ctx=ctx)
    assert module.operation.verify()
    kernel = Kernel(fn, arch=target, grid=plan.grid, workgroup_size=plan.workgroup_size, wave_size=plan.wave_size)
    start = time.perf_counter()
    # Causal: the key loop's bound depends on the workgroup (blocks stop at their diagonal), and
    # the executor needs uniform loop bounds: one workgroup per batch of lanes. So does a
    # persistent grid (each workgroup's loop over blocks starts at its own).
    one_each = causal or getattr(plan, "workers", 0)
    stats = kernel.run(bufs, max_lanes=plan.workgroup_size if one_each else 1 << 14)
    seconds = time.perf_counter() - start
    assert not stats.races, stats.races[:3]

    # Nothing but O's bytes changed; O's bytes all written.
    ob, oo = layout["o"].binding, layout["o"].offset
    changed = {b: np.flatnonzero(bufs[b] != before[b]) for b in bufs}
    for b, idx in changed.items():
        outside = idx if b != ob else idx[(idx < oo) | (idx >= oo + o.nbytes)]
        assert outside.size == 0, f"binding {b}: bytes {outside[:8]} outside O changed"
    assert kernel.written[ob][oo : oo + o.nbytes].all() and kernel.written[ob].sum() == o.nbytes
    out = bufs[ob][oo : oo + o.nbytes].view(dt).reshape(o.shape).astype(np.float64)

    ref = reference(q, k, v, plan.scale, causal, causal_rows=plan.causal_rows)
    bound = attention_bound(ref, v, elem)
    err = np.abs(out - ref)
    assert np.isfinite(out).all()
    assert (err <= bound).all(), f"max error {err.max():.3g} (bound there {bound.flat[err.argmax()]:.3g})"
    return plan, stats, seconds


def _case_id(c):
    b, m, k2, d, elem, causal = c
    return f"b{b}-m{m}-k{k2}-d{d}-{elem}{'-causal' if causal else ''}"


# A few representative shapes by default (aligned; partial query and key tiles; M != K2;
# both head dims, dtypes and causal); the long tail with -m exhaustive.
DEFAULT = [
    (1, 64, 64, 64, "f16", False),
    (2, 100, 200, 128, "bf16", False),
    (3, 200, 100, 64, "f16", True),
    (1, 16, 128, 128, "f16", True),
]
SIZES = (16, 64, 100, 128, 200)
EXHAUSTIVE = [
    (b, m, k2, d, e, c)
    for i, (b, m, k2, d, e, c) in enumerate(
        (b, m, k2, d, e, c)
        for b in (1, 2, 3)
        for m in SIZES
        for k2 in SIZES
        for d in (64, 128)
        for e in ("f16", "bf16")
        for c in (False, True)
    )
    if i % 7 == 0 and (b, m, k2, d, e, c) not in DEFAULT
]  # an even spread of the 600


@pytest.mark.parametrize(
    "case", DEFAULT + [pytest.param(c, marks=pytest.mark.exhaustive) for c in EXHAUSTIVE], ids=_case_id
)
def test_flash_attention_on_the_executor(case):
    check_case(case, stages=2)


# The synchronous copy (stages=1: through registers, two barriers per tile) on two default
# shapes, the rest of the spread with -m exhaustive.
@pytest.mark.parametrize(
    "case", DEFAULT[1:3] + [pytest.param(c, marks=pytest.mark.exhaustive) for c in EXHAUSTIVE[::3]], ids=_case_id
)
def test_flash_attention_synchronous_copies(case):
    check_case(case, stages=1)


def check_case(case, stages):
    batch, m, k2, d, elem, causal = case
    plan, stats, seconds = run_case(batch, m, k2, d, elem, causal, stages=stages)
    grid = plan.grid
    blocks = [min(plan.key_tiles, -(-(i + 1) * 64 // 64)) if causal else plan.key_tiles for i in range(grid[0])]
    tiles = sum(blocks) * batch
    # Warps whose 16 queries all lie past M copy and meet the barriers but compute nothing.
    live = [sum(1 for w in range(4) if i * 64 + w * 16 < m) for i in range(grid[0])]
    warp_tiles = sum(n * t for n, t in zip(live, blocks)) * batch
    per_tile = (64 // 8) * (d // 16) + (d // 8) * 4  # S and P V mma.sync per warp and key tile
    assert stats.matrix_ops == warp_tiles * per_tile
    # Two barriers per tile (one with the cp.async ring), counted once per batch of lanes run
    # together: all workgroups at once, or (causal) one at a time.
    assert stats.barriers == plan.barriers_per_tile * (tiles if causal else plan.key_tiles)
    # cp.async: every tile's K and V bytes (keys past K2 zero-filled) land, and one more
    # (all zero) prefetch per workgroup after its last tile.
    ring_bytes = (tiles + batch * grid[0]) * 2 * 64 * d * 2 if stages == 2 else 0
    assert stats.async_copy_bytes == ring_bytes
    # shuffles: per tile 2 rows x 2 (max), at the end 2 rows x 2 (sum), per warp
    assert stats.cross_lane_ops == 4 * batch * (4 * sum(blocks) + 4 * grid[0])
    # Padded LDS rows: the 16-byte copies and the ldmatrix reads are bank-conflict free.
    assert stats.lds_conflict_cycles == 0, dict(stats.lds_conflicts_by_op)
    assert seconds < 60


@pytest.mark.parametrize(
    "target,m,k2,rows,options",
    [
        ("sm_80", 200, 100, 100, {}),  # blocks of 64 rows cross the restarts at 100
        ("sm_90a", 256, 128, 128, dict(producer=True, persistent=2)),
        ("sm_90a", 192, 96, 96, dict(producer=False)),
        pytest.param("gfx942", 192, 96, 96, {}, marks=pytest.mark.exhaustive),
        pytest.param("gfx1100", 256, 128, 128, {}, marks=pytest.mark.exhaustive),
    ],
    ids=["mma.sync", "wgmma-producer", "wgmma-cp.async", "gfx942", "gfx1100"],
)
def test_causal_positions_restarting_every_rows(target, m, k2, rows, options):
    """Causal with query positions restarting every ``rows`` rows (IREE's GQA form: two query heads
    folded into the rows): key j masked past row i's position i mod rows, on every kernel, against the
    reference; the plan says so."""
    stages = None if target.startswith("gfx") else 2
    plan, stats, _ = run_case(1, m, k2, 64, "f16", True, target=target, stages=stages, causal_rows=rows, **options)
    assert plan.causal and plan.causal_rows == rows
    assert f"causal (positions restart every {rows} rows)" in plan.describe()
    assert not stats.races


def test_kernel_ops():
    """What the kernel is made of: mma.sync, gpu.shuffle xor, nvvm.ex2, LDS, no permute (the P
    conversion is in-lane on mma.sync)."""
    plan = plan_flash_attention(_attention(1, 100, 100, 64, "f16"), causal=True)
    ctx = new_context()
    module, fn = standalone_module(plan, q=Placement(0), k=Placement(1), v=Placement(2), o=Placement(3), ctx=ctx)
    text = str(module)
    assert plan.conversion.plan.kind == "in-lane" and plan.conversion.plan.registers.permutes == ()
    assert len(ops_named(fn, "nvgpu.mma.sync")) == 8 * 4 + 8 * 4  # S: 8 x K1/16, P V: N/8 x 4
    assert len(ops_named(fn, "memref.alloc")) == 2 and "#gpu.address_space<workgroup>" in text
    # K's and V's fragments by ldmatrix x4, two instructions' fragments each (V: .trans).
    ld = ops_named(fn, "nvgpu.ldmatrix")
    assert plan.k_fragments.kind == "ldmatrix" and plan.v_fragments.kind == "ldmatrix.trans"
    assert sorted(ir.BoolAttr(x.attributes["transpose"]).value for x in ld) == [False] * 16 + [True] * 16
    assert all(ir.IntegerAttr(x.attributes["numTiles"]).value == 4 for x in ld)
    assert not ops_named(fn, "vector.load", "memref.load") or all(
        "workgroup" not in str(x.operands[0].type) for x in ops_named(fn, "vector.load", "memref.load")
    )
    assert len(ops_named(fn, "gpu.shuffle")) == 2 * 2 + 2 * 2 and "rocdl." not in text
    assert len(ops_named(fn, "nvvm.ex2")) == 8 * 4 + 2 and "math.exp" not in text  # P, then alpha per row
    assert len(ops_named(fn, "scf.for")) == 1
    # The two-slot cp.async ring: 4 chunks of K and 4 of V per thread for the first tile before
    # the loop and for the next one in it, one group each; one barrier per tile.
    assert len(ops_named(fn, "nvgpu.device_async_copy")) == 2 * 8
    assert len(ops_named(fn, "nvgpu.device_async_create_group")) == 2
    assert len(ops_named(fn, "gpu.barrier")) == 1 and plan.stages == 2
    subs = ops_named(fn, "hal.interface.binding.subspan")
    assert [ir.IntegerAttr(s.attributes["binding"]).value for s in subs] == [0, 1, 2, 3]


def test_bf16_p_conversion_is_fptrunc():
    """bf16 P (and O) narrowed by llvm.fptrunc (one cvt.rn.bf16x2.f32 a pair), not arith.truncf,
    which IREE 3.13 expands into integer rounding (about seven instructions an element) in the
    key loop; its numerics: the bf16 cases on the executor above."""
    plan = plan_flash_attention(_attention(1, 100, 100, 64, "bf16"), causal=False)
    _, fn = standalone_module(plan, q=Placement(0), k=Placement(1), v=Placement(2), o=Placement(3), ctx=new_context())
    assert not ops_named(fn, "arith.truncf")
    narrowed = ops_named(fn, "llvm.fptrunc")
    assert narrowed and all("bf16" in str(x.results[0].type) for x in narrowed)


def test_a_broken_kernel_fails_the_check():
    """The check can fail: a kernel whose P V skips the last 16 keys of every tile is caught."""
    plan = plan_flash_attention(_attention(1, 64, 64, 64, "f16"))
    ctx = new_context()
    module, fn = standalone_module(plan, q=Placement(0), k=Placement(1), v=Placement(2), o=Placement(3), ctx=ctx)
    mmas = ops_named(fn, "nvgpu.mma.sync")
    pv = [op for op in mmas if "mmaflow.pv" in str(op.location)]
    assert len(pv) == 8 * 4
    for op in pv[3::4]:  # the fourth 16-key chunk of each accumulator: O passes through
        op.results[0].replace_all_uses_with(op.operands[2])
        op.erase()
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 64, 64)).astype(np.float16) for _ in range(3))
    bufs = {0: q.copy(), 1: k.copy(), 2: v.copy(), 3: np.zeros((1, 64, 64), np.float16)}
    Kernel(fn, arch="sm_80", grid=plan.grid, workgroup_size=128, wave_size=32).run(bufs)
    err = np.abs(bufs[3].astype(np.float64) - reference(q, k, v, plan.scale, False))
    assert err.max() > 10 * (2 * 2.0**-11 * np.abs(v.astype(np.float64)).max())


@pytest.mark.parametrize(
    "attn,target,why",
    [
        (_attention(1, 64, 64, 96, "f16"), "sm_80", "head dims 96 -> 96"),
        (_attention(1, 64, 64, 64, "f32"), "sm_80", "must all be f16 or all bf16"),
        (
            Attention(
                "iree_linalg_ext.attention",
                (1,),
                64,
                64,
                64,
                64,
                "f16",
                "f16",
                "f16",
                "f16",
                0.125,
                "additive f32 mask 1x64x64",
                "f32",
            ),
            "sm_80",
            "an additive f32 mask with f16 inputs",
        ),
        (
            Attention(
                "iree_linalg_ext.attention", (1,), None, 64, 64, 64, "f16", "f16", "f16", "f16", 0.125, "no mask"
            ),
            "sm_80",
            "dynamic sizes",
        ),
        (
            Attention("iree_linalg_ext.attention", (1,), 64, 64, 64, 64, "f16", "f16", "f16", "f16", None, "no mask"),
            "sm_80",
            "run-time scale",
        ),
        (_attention(1, 64, 64, 96, "f16"), "gfx942", "head dims 96 -> 96"),
    ],
)
def test_unsupported_cases_are_refused_by_name(attn, target, why):
    with pytest.raises(UnsupportedError, match=why):
        plan_flash_attention(attn, target=target)


def test_unaligned_offsets_are_refused():
    plan = plan_flash_attention(_attention(1, 64, 64, 64, "f16"))
    with pytest.raises(UnsupportedError, match="byte offset 8"):
        standalone_module(plan, q=Placement(0, 8), k=Placement(1), v=Placement(2), o=Placement(3), ctx=new_context())


_SOURCE = """func.func @attn(%q: tensor<{b}x{m}x{d}x{t}>, %k: tensor<{b}x{k2}x{d}x{t}>, %v: tensor<{b}x{k2}x{d}x{t}>) -> tensor<{b}x{m}x{d}x{t}> {{
  %scale = arith.constant {scale} : {t}
  %e = tensor.empty() : tensor<{b}x{m}x{d}x{t}>
  %o = iree_linalg_ext.attention <{{indexing_maps = [affine_map<(b, m, n, k1, k2) -> (b, m, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, n)>, affine_map<(b, m, n, k1, k2) -> ()>, affine_map<(b, m, n, k1, k2) -> (b, m, n)>]}}> ins(%q, %k, %v, %scale : tensor<{b}x{m}x{d}x{t}>, tensor<{b}x{k2}x{d}x{t}>, tensor<{b}x{k2}x{d}x{t}>, {t}) outs(%e : tensor<{b}x{m}x{d}x{t}>) {{
  ^bb0(%s: f32):
    iree_linalg_ext.yield %s : f32
  }} -> tensor<{b}x{m}x{d}x{t}>
  return %o : tensor<{b}x{m}x{d}x{t}>
}}
"""


def _handed_back(tmp_path, b, m, k2, d, elem, causal, target="sm_80", stages=2):
    """IREE's attention dispatch at executable-sources, replaced by the kernel and handed back:
    (module, plan)."""
    import subprocess
    import sys
    from pathlib import Path

    from mmaflow.compiler.core.mlir import parse_module
    from mmaflow.compiler.kernels.attention.nvidia import rewrite_dispatch
    from mmaflow.compiler.pipeline.hand_back import constant_grid, install
    from mmaflow.compiler.target.targets import get_target

    src = tmp_path / "attn.mlir"
    src.write_text(_SOURCE.format(b=b, m=m, k2=k2, d=d, t=elem, scale=d**-0.5))
    iree_compile = Path(sys.executable).parent / "iree-compile"
    subprocess.run(
        [
            str(iree_compile),
            str(src),
            "--iree-hal-target-device=cuda",
            f"--iree-cuda-target={get_target(target).iree_arch}",
            "--compile-to=executable-sources",
            "-o",
            str(tmp_path / "src.mlir"),
        ],
        check=True,
    )
    ctx = new_context()
    module = parse_module((tmp_path / "src.mlir").read_text(), ctx)
    (fn,) = [f for f in ops_named(module.operation, "func.func") if ops_named(f, "iree_linalg_ext.attention")]
    name, inner = ir.StringAttr(fn.attributes["sym_name"]).value, fn.parent
    plan = rewrite_dispatch(fn, target=target, causal=causal, stages=stages)
    (kernel,) = [f for f in ops_named(inner, "func.func") if ir.StringAttr(f.attributes["sym_name"]).value == name]
    install(
        kernel,
        get_target(target),
        workgroup_size=plan.workgroup_size,
        subgroup_size=plan.wave_size,
        grid=constant_grid(plan.grid),
    )
    assert module.operation.verify()
    return module, plan


@pytest.mark.parametrize(
    "d,elem,causal,target", [(64, "f16", False, "sm_80"), (128, "bf16", True, "sm_80"), (128, "f16", False, "sm_90a")]
)
def test_ptxas_reports_no_spills(tmp_path, d, elem, causal, target):
    """The lowered kernel through ptxas (LLVM's PTX registers are virtual): no spill stores or
    loads, within the 255-register limit (the O accumulators, Q's fragments and S's live
    across the softmax)."""
    from mmaflow.compiler.report import ptxas_path
    from mmaflow.compiler.target.targets import get_target

    assert ptxas_path() is not None, "ptxas is missing: pip install -e '.[test]' installs nvidia-cuda-nvcc-cu12"
    module, plan = _handed_back(tmp_path, 1, 128, 200, d, elem, causal, target)
    mnemonic = "wgmma.mma_async.sync.aligned.m64n" if target == "sm_90a" else "mma.sync.aligned.m16n8k16"
    text = attention_ptx_without_spills(
        tmp_path, str(module), get_target(target).iree_arch, plan.workgroup_size, mnemonic
    )
    if target == "sm_90a":  # the wgmma kernel; never the mma.sync one
        assert "mma.sync" not in text


@pytest.mark.parametrize(
    "b,m,k2,d,elem,causal",
    [(2, 100, 200, 64, "f16", False), pytest.param(1, 128, 200, 128, "bf16", True, marks=pytest.mark.exhaustive)],
)
def test_iree_dispatch_replaced_and_handed_back(tmp_path, b, m, k2, d, elem, causal):
    """IREE's own attention dispatch (executable-sources), replaced by the kernel
    (``rewrite_dispatch``: Q, K, V, O at IREE's bindings) and handed back, runs on the executor
    as ``runtime/simulate.py`` loads a handed-back dispatch: grid from its dispatch_config,
    sizes from its translation_info."""
    from mmaflow.runtime.simulate import load_dispatch, run_dispatch

    module, plan = _handed_back(tmp_path, b, m, k2, d, elem, causal)
    dispatch = load_dispatch(module)
    assert dispatch.grid() == plan.grid and dispatch.workgroup_size == 128

    dt = _DT[elem]
    rng = np.random.default_rng(5)
    q = (0.8 * rng.standard_normal((b, m, d))).astype(dt)
    k, v = (rng.standard_normal((b, k2, d)).astype(dt) for _ in range(2))
    guard = np.full(64, SENTINEL, np.uint8)
    bufs = {
        i: np.concatenate([t.view(np.uint8).reshape(-1), guard])
        for i, t in enumerate([q, k, v, np.zeros((b, m, d), dt)])
    }
    before = {i: x.copy() for i, x in bufs.items()}
    run_dispatch(dispatch, bufs, max_lanes=plan.workgroup_size if causal else 1 << 14)
    for i in range(3):
        assert np.array_equal(bufs[i], before[i])
    assert np.array_equal(bufs[3][-64:], guard)
    out = bufs[3][:-64].view(dt).reshape(b, m, d).astype(np.float64)
    ref = reference(q, k, v, plan.scale, causal)
    u = _U[elem]
    assert (np.abs(out - ref) <= u * np.abs(ref) + 2 * u * np.abs(v.astype(np.float64)).max()).all()


def test_gpu_shuffle_semantics():
    """The executor's gpu.shuffle: xor, idx, down and up within a warp; an out-of-range source
    keeps the lane's own value and says so (valid = false)."""
    from iree.compiler.dialects import arith, func, gpu
    from iree.compiler.dialects import memref as memref_d

    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        i32, f32, index = ir.IntegerType.get_signless(32), ir.F32Type.get(), ir.IndexType.get()
        g = ir.Attribute.parse("#gpu.address_space<global>")
        layout = ir.Attribute.parse(
            "#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, "
            "Indirect>, #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>"
        )
        from iree.compiler.dialects import hal

        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("shuffle", ir.FunctionType.get([], []))
        with ir.InsertionPoint(fn.add_entry_block()):
            c0 = arith.ConstantOp(index, 0).result
            out = hal.InterfaceBindingSubspanOp(
                ir.MemRefType.get([4, 64], f32, memory_space=g), layout, 0, [], byte_offset=c0, alignment=64
            ).result
            ok = hal.InterfaceBindingSubspanOp(
                ir.MemRefType.get([4, 64], i32, memory_space=g), layout, 1, [], byte_offset=c0, alignment=64
            ).result
            tid = gpu.ThreadIdOp(gpu.Dimension.x).result
            val = arith.UIToFPOp(f32, arith.IndexCastOp(i32, tid).result).result
            width = arith.ConstantOp(i32, 32).result
            for row, (mode, off) in enumerate(
                [(gpu.ShuffleMode.XOR, 5), (gpu.ShuffleMode.IDX, 3), (gpu.ShuffleMode.DOWN, 4), (gpu.ShuffleMode.UP, 2)]
            ):
                r, valid = gpu.ShuffleOp(val, arith.ConstantOp(i32, off).result, width, mode).results
                at = [arith.ConstantOp(index, row).result, tid]
                memref_d.StoreOp(r, out, at)
                memref_d.StoreOp(arith.ExtUIOp(i32, valid).result, ok, at)
            func.ReturnOp([])
    assert module.operation.verify()
    bufs = {0: np.zeros((4, 64), np.float32), 1: np.zeros((4, 64), np.int32)}
    stats = Kernel(fn.operation, arch="sm_80", grid=(1, 1, 1), workgroup_size=64, wave_size=32).run(bufs)
    lane = np.arange(64) % 32
    base = np.arange(64) - lane
    down_ok, up_ok = lane + 4 < 32, lane - 2 >= 0
    np.testing.assert_array_equal(bufs[0][0], base + (lane ^ 5))
    np.testing.assert_array_equal(bufs[0][1], base + 3)
    np.testing.assert_array_equal(bufs[0][2], np.where(down_ok, np.arange(64) + 4, np.arange(64)))
    np.testing.assert_array_equal(bufs[0][3], np.where(up_ok, np.arange(64) - 2, np.arange(64)))
    np.testing.assert_array_equal(bufs[1], np.stack([np.ones(64), np.ones(64), down_ok, up_ok]).astype(np.int32))
    assert stats.cross_lane_ops == 4 * 2


def _ramp(m, k2, d, slope, rng):
    """Q near one direction u, key j = slope * j / k2 * u (+ noise): scores rise (slope > 0) or
    fall along the keys by ~|slope| * scale * |u|^2 over the sequence."""
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    q = u[None, None, :] * 4.0 + 0.1 * rng.standard_normal((1, m, d))
    k = (slope * np.arange(k2) / k2)[None, :, None] * u[None, None, :] + 0.1 * rng.standard_normal((1, k2, d))
    v = rng.standard_normal((1, k2, d))
    return q, k, v


@pytest.mark.parametrize("slope", [40.0, -40.0], ids=["rising", "falling"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_online_softmax_rescaling(slope, causal):
    """Scores that rise along the keys make every tile raise the running max (O and l rescaled
    by exp2(m_old - m_new) each time; the scores climb by ~20 over the sequence); falling ones keep
    the first tile's max and make later tiles' P underflow toward 0. Both must match."""
    rng = np.random.default_rng(11)
    run_case(1, 100, 300, 64, "f16", causal, inputs=_ramp(100, 300, 64, slope, rng), scale=0.125)


def test_extreme_scores():
    """Scores in the hundreds (scale 4 on dot products of standard deviation ~72): exp2
    underflows to exactly 0 for most keys, nothing overflows, no NaN; the result matches
    (nearly one-hot rows)."""
    rng = np.random.default_rng(12)
    q, k, v = rng.standard_normal((2, 64, 64)), rng.standard_normal((2, 130, 64)), rng.standard_normal((2, 130, 64))
    run_case(2, 64, 130, 64, "bf16", False, inputs=(3 * q, 3 * k, v), scale=4.0)


def test_other_stage_counts_are_refused():
    with pytest.raises(UnsupportedError, match="stages = 5"):
        plan_flash_attention(_attention(1, 64, 64, 64, "f16"), stages=5)


def test_nvvm_ex2_semantics():
    """The executor's nvvm.ex2 (ex2.approx.ftz.f32): 2^x rounded to f32, -inf -> 0, results
    below the smallest normal flushed to 0 with ftz, kept without."""
    from iree.compiler.dialects import arith, func, hal, nvvm
    from iree.compiler.dialects import memref as memref_d

    xs = np.array([0.0, 1.0, -1.0, 0.5, -20.25, 10.0, -np.inf, -127.5, -149.0, -200.0], np.float32)
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        f32, index = ir.F32Type.get(), ir.IndexType.get()
        g = ir.Attribute.parse("#gpu.address_space<global>")
        layout = ir.Attribute.parse(
            "#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>"
        )
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("ex2", ir.FunctionType.get([], []))
        with ir.InsertionPoint(fn.add_entry_block()):
            c0 = arith.ConstantOp(index, 0).result
            buf = hal.InterfaceBindingSubspanOp(
                ir.MemRefType.get([3, xs.size], f32, memory_space=g), layout, 0, [], byte_offset=c0, alignment=64
            ).result
            from iree.compiler.dialects import gpu

            tid = gpu.ThreadIdOp(gpu.Dimension.x).result
            x = memref_d.LoadOp(buf, [c0, tid]).result
            for row, ftz in ((1, True), (2, False)):
                memref_d.StoreOp(
                    nvvm.Ex2Op(x, ftz=ftz, results=[f32]).result, buf, [arith.ConstantOp(index, row).result, tid]
                )
            func.ReturnOp([])
    assert module.operation.verify()
    data = np.zeros((3, xs.size), np.float32)
    data[0] = xs
    Kernel(fn.operation, arch="sm_80", grid=(1, 1, 1), workgroup_size=xs.size, wave_size=32).run({0: data})
    want = np.exp2(xs.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(data[2], want)  # no ftz: subnormal results kept
    assert data[2][-2] > 0 and data[1][-2] == 0 and data[1][-3] == 0  # 2^-149, 2^-127.5: subnormal
    np.testing.assert_array_equal(data[1][:-3], want[:-3])
    assert data[1][6] == 0 and data[1][-1] == 0
