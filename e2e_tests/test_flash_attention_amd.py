"""The AMD flash-attention kernel (``compiler/kernels/attention/amd.py``: S^T = K Q^T, O^T = V^T P^T)
on the lane executor for every AMD target family (gfx942 and gfx950 MFMA, gfx1201 RDNA4 WMMA,
gfx1100 RDNA3 WMMA wave32), against the float64 reference and its bound
(``runtime/attention_reference.py``).

The harness is the mma.sync kernel's (``test_flash_attention.run_case``, ``test_flash_attention_mask.run_masked``):
every tensor at a non-zero byte offset (K and V in one binding), sentinel bytes around them,
only O's bytes changed and all of them written. A few small shapes per target by default; the
sweep (batch x heads 1..24, seq 1..512, both head dims, both types, causal and not) with
``-m exhaustive``.
"""

from __future__ import annotations

import numpy as np
import pytest
from iree.compiler import ir
from test_flash_attention import _attention, run_case
from test_flash_attention_mask import run_masked

from mmaflow.compiler.core.attention import Attention
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.core.mlir import new_context, ops_named
from mmaflow.compiler.kernels.attention.amd import _col_sharers
from mmaflow.compiler.kernels.attention.nvidia import Placement, plan_flash_attention, standalone_module
from mmaflow.runtime.attention_reference import attention_reference
from mmaflow.runtime.executor import ExecutorError, Kernel

AMD = ["gfx942", "gfx950", "gfx1201", "gfx1100"]


def check(target, batch, m, k2, d, elem, causal):
    plan, stats, _seconds = run_case(batch, m, k2, d, elem, causal, stages=None, target=target)
    assert plan.transposed and plan.stages == 1 and plan.wave_size == (64 if target.startswith("gfx9") else 32)
    blocks = [min(plan.key_tiles, i + 1) if causal else plan.key_tiles for i in range(plan.grid[0])]
    tiles = sum(blocks) * batch
    # Per wave and key tile: S^T (64 / 16) x (d / 16) and O^T (d / 16) x (64 / 16) instructions.
    assert stats.matrix_ops == tiles * 4 * 2 * 4 * (d // 16)
    # Two barriers per tile (copies through registers), counted once per batch of lanes run
    # together: (not causal) as many workgroups as 2^14 lanes hold, (causal) one workgroup.
    runs = -(-plan.grid[0] * plan.grid[1] // ((1 << 14) // plan.workgroup_size))
    assert stats.barriers == 2 * (tiles if causal else plan.key_tiles * runs)
    # Cross-lane: per wave, the max per tile and the sum at the end across the column's lanes
    # (gpu.shuffle xor), and on RDNA3 the planned permlanex16 per 16-key block of P.
    shuffles = len(_col_sharers(plan.intrinsic.c))
    permutes = len(plan.conversion.plan.registers.permutes) * (64 // 16)
    per_wave = (shuffles + permutes) * sum(blocks) + shuffles * plan.grid[0]
    assert stats.cross_lane_ops == 4 * batch * per_wave
    # K's rows and V^T's columns stored, and both read as A fragments, without bank conflicts (the
    # pad chosen from the fragment layout and the target's banks; V's copy lanes along the keys).
    assert stats.lds_conflict_cycles == 0, dict(stats.lds_conflicts_by_op)
    return plan, stats


DEFAULT = [(1, 64, 64, 64, "f16", False), (6, 100, 70, 128, "bf16", True)]


@pytest.mark.parametrize(
    "case", DEFAULT, ids=lambda c: f"b{c[0]}-m{c[1]}-k{c[2]}-d{c[3]}-{c[4]}{'-causal' if c[5] else ''}"
)
@pytest.mark.parametrize("target", AMD)
def test_amd_flash_attention_on_the_executor(target, case):
    plan, _ = check(target, *case)
    assert plan.conversion.plan.kind == ("cross-lane" if target == "gfx1100" else "in-lane")


SEQ = (1, 17, 64, 100, 200, 512)
EXHAUSTIVE = [
    (t, b, m, k2, d, e, c)
    for i, (t, b, m, k2, d, e, c) in enumerate(
        (t, b, m, k2, d, e, c)
        for t in AMD
        for b in (1, 2 * 2, 2 * 12)
        for m in SEQ
        for k2 in SEQ
        for d in (64, 128)
        for e in ("f16", "bf16")
        for c in (False, True)
    )
    if i % 23 == 0
]  # an even spread of 3456


@pytest.mark.exhaustive
@pytest.mark.parametrize("case", EXHAUSTIVE, ids=lambda c: "-".join(map(str, c)))
def test_amd_flash_attention_sweep(case):
    check(*case)


@pytest.mark.parametrize(
    "target,case",
    [
        ("gfx942", ((1,), 64, 64, 64, "f16", "causal", None)),
        ("gfx1100", ((2,), 100, 72, 128, "bf16", "random", None)),
        ("gfx1201", ((1,), 32, 128, 64, "bf16", "first-tile-dead", None)),
        ("gfx950", ((2, 2), 24, 70, 64, "f16", "causal+random", (1, 3, 2))),  # keys outer, broadcast
    ],
)
def test_amd_masked_attention_on_the_executor(target, case):
    plan = run_masked(*case, target=target)
    assert plan.mask == case[4] and plan.transposed


@pytest.mark.parametrize(
    "target,case,causal",
    [
        ("gfx942", ((1,), 64, 100, 64, "f16", "bool", None), False),  # partial key tile
        ("gfx942", ((2,), 40, 72, 64, "bf16", "bool-bit0", None), True),  # bit 0 of each byte; causal too
        ("gfx1100", ((1,), 48, 100, 64, "bf16", "bool-first-tile-dead", None), False),
        ("gfx1100", ((1,), 16, 70, 64, "f16", "bool-dead-rows", None), False),  # NaN rows, as the reference
        ("gfx950", ((2, 2), 20, 70, 64, "f16", "bool", (1, 3, 2)), False),  # keys outer: byte loads
        ("gfx1201", ((1,), 32, 128, 64, "bf16", "bool", None), True),
    ],
)
def test_amd_bool_masked_attention_on_the_executor(target, case, causal):
    """A boolean (i1) mask, one byte per element, on the AMD kernel."""
    plan = run_masked(*case, target=target, causal=causal)
    assert plan.mask == "i1" and plan.transposed


def _module(target, causal=True, d=64):
    plan = plan_flash_attention(_attention(1, 100, 100, d, "f16"), target=target, causal=causal)
    module, fn = standalone_module(
        plan, q=Placement(0), k=Placement(1), v=Placement(2), o=Placement(3), ctx=new_context()
    )
    assert module.operation.verify()
    return plan, module, fn


@pytest.mark.parametrize("target", AMD)
def test_amd_kernel_ops(target):
    """MFMA/WMMA only, 128-bit buffer loads for K and V, the softmax's shuffles, rocdl.exp2, and
    a C -> B conversion of P without LDS: nothing in it touches workgroup memory; on RDNA3 four
    rocdl.permlanex16 per 16 x 16 P tile, elsewhere none."""
    plan, module, fn = _module(target)
    text = str(module)
    mma = plan.intrinsic.op
    assert len(ops_named(fn, mma)) == 4 * 4 + 4 * 4 and "nvgpu" not in text and "nvvm" not in text
    loads = ops_named(fn, "amdgpu.raw_buffer_load")
    copies = [x for x in loads if "copy_" in str(x.location)]
    assert copies and all(str(x.results[0].type) == "vector<8xf16>" for x in copies)
    # K's and V's 16-byte chunks per thread and tile; prefetched (head dim 64 everywhere): tile 0's
    # before the loop, the next tile's in it.
    per_tile = 2 * 64 * 64 // 8 // plan.workgroup_size
    assert plan.prefetch and len(copies) == 2 * per_tile
    assert len([x for x in copies if x.parent.name == "func.func"]) == per_tile
    convert = [x for x in ops_named(fn, *(o for o in _ALL_OPS)) if "mmaflow.convert_p" in str(x.location)]
    assert convert and not [
        x
        for x in convert
        if x.name in ("vector.load", "vector.store", "memref.alloc", "amdgpu.lds_barrier", "rocdl.ds_bpermute")
    ]
    permlanes = ops_named(fn, "rocdl.permlanex16")
    assert len(permlanes) == (4 * 4 if target == "gfx1100" else 0)
    assert all("mmaflow.convert_p" in str(x.location) for x in permlanes)
    shuffles = len(_col_sharers(plan.intrinsic.c))
    assert len(ops_named(fn, "gpu.shuffle")) == 2 * shuffles
    assert len(ops_named(fn, "rocdl.exp2")) == 4 * len(plan.intrinsic.c.element_offsets()) + 1
    assert "math.exp" not in text
    assert len(ops_named(fn, "amdgpu.lds_barrier")) == 2 and len(ops_named(fn, "scf.for")) == 1


_ALL_OPS = (
    "arith.truncf",
    "vector.extract",
    "vector.extract_strided_slice",
    "vector.from_elements",
    "arith.select",
    "rocdl.permlanex16",
    "vector.load",
    "vector.store",
    "memref.alloc",
    "amdgpu.lds_barrier",
    "rocdl.ds_bpermute",
    "vector.shape_cast",
)


def test_a_broken_conversion_fails_the_check():
    """The check can fail: on RDNA3, P's B operand without its permlanex16 halves (each lane keeps
    its own value where it should take the other 16-lane row's) is caught by the executor's WMMA
    model: lanes 16-31 must repeat lanes 0-15's B operand, and now they do not."""
    plan, module, fn = _module("gfx1100", causal=False)
    for op in ops_named(fn, "rocdl.permlanex16"):  # operands: old, source, selectors
        op.results[0].replace_all_uses_with(op.operands[1])
        op.erase()
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 100, 64)).astype(np.float16) for _ in range(3))
    bufs = {0: q.copy(), 1: k.copy(), 2: v.copy(), 3: np.zeros((1, 100, 64), np.float16)}
    with pytest.raises(ExecutorError, match="replicated lanes must hold equal data"):
        Kernel(fn, arch="gfx1100", grid=plan.grid, workgroup_size=plan.workgroup_size, wave_size=32).run(bufs)


def test_a_broken_rescale_fails_the_check():
    """The check can fail numerically: O^T not rescaled by alpha (the in-lane statistics) on gfx942."""
    plan, module, fn = _module("gfx942", causal=False)
    scaled = [
        x
        for x in ops_named(fn, "arith.mulf")
        if "mmaflow.softmax" in str(x.location) and isinstance(x.results[0].type, ir.VectorType)
    ]
    assert len(scaled) == 64 // 16
    for op in scaled:
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 100, 64)).astype(np.float16) for _ in range(3))
    bufs = {0: q.copy(), 1: k.copy(), 2: v.copy(), 3: np.zeros((1, 100, 64), np.float16)}
    Kernel(fn, arch="gfx942", grid=plan.grid, workgroup_size=plan.workgroup_size, wave_size=64).run(bufs)
    err = np.abs(bufs[3].astype(np.float64) - attention_reference(q, k, v, plan.scale, False))
    assert err.max() > 10 * (2 * 2.0**-11 * np.abs(v.astype(np.float64)).max())


@pytest.mark.parametrize(
    "attn,target,why",
    [
        (_attention(1, 64, 64, 96, "f16"), "gfx1201", "head dims 96 -> 96"),
        (_attention(1, 64, 64, 64, "f32"), "gfx942", "must all be f16 or all bf16"),
        (
            Attention(
                "iree_linalg_ext.attention", (1,), None, 64, 64, 64, "f16", "f16", "f16", "f16", 0.125, "no mask"
            ),
            "gfx1100",
            "dynamic sizes",
        ),
    ],
)
def test_amd_unsupported_cases_are_refused_by_name(attn, target, why):
    with pytest.raises(UnsupportedError, match=why):
        plan_flash_attention(attn, target=target)


def test_prefetch_where_registers_allow():
    """The next tile's K and V chunks are held in registers everywhere but RDNA at head dim 128
    (about 250 of 256 VGPRs without them)."""
    for target in AMD:
        for d in (64, 128):
            plan = plan_flash_attention(_attention(1, 64, 64, d, "f16"), target=target)
            assert plan.prefetch == (d == 64 or target.startswith("gfx9")), (target, d)
            assert ("prefetched" in plan.describe()) == plan.prefetch


def test_amd_has_no_cp_async_ring():
    with pytest.raises(UnsupportedError, match="copies K and V through registers"):
        plan_flash_attention(_attention(1, 64, 64, 64, "f16"), target="gfx942", stages=2)


def test_v_is_stored_at_its_hardware_k_slot():
    """RDNA4's hardware K order within a lane differs from the codegen order P's conversion packs:
    V^T's LDS columns follow the keys the B operand's slots hold (a permutation, not the identity)."""
    plan = plan_flash_attention(_attention(1, 64, 64, 64, "f16"), target="gfx1201")
    assert sorted(plan.v_columns) == list(range(16)) and plan.v_columns != tuple(range(16))
    for target in ("gfx942", "gfx950", "gfx1100"):
        assert plan_flash_attention(_attention(1, 64, 64, 64, "f16"), target=target).v_columns == tuple(range(16))


def test_rocdl_exp2_semantics():
    """The executor's rocdl.exp2 (v_exp_f32): 2^x rounded to f32, -inf -> 0, +inf -> inf, results
    below the smallest normal f32 flushed to 0."""
    from iree.compiler.dialects import arith, func, gpu, hal, rocdl
    from iree.compiler.dialects import memref as memref_d

    xs = np.array([0.0, 1.0, -1.0, 0.5, -20.25, 10.0, -np.inf, np.inf, -126.0, -127.5, -149.0], np.float32)
    with new_context() as ctx, ir.Location.unknown():
        module = ir.Module.create()
        f32, index = ir.F32Type.get(), ir.IndexType.get()
        g = ir.Attribute.parse("#gpu.address_space<global>")
        layout = ir.Attribute.parse(
            "#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>"
        )
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("exp2", ir.FunctionType.get([], []))
        with ir.InsertionPoint(fn.add_entry_block()):
            c0, c1 = arith.ConstantOp(index, 0).result, arith.ConstantOp(index, 1).result
            buf = hal.InterfaceBindingSubspanOp(
                ir.MemRefType.get([2, xs.size], f32, memory_space=g), layout, 0, [], byte_offset=c0, alignment=64
            ).result
            tid = gpu.ThreadIdOp(gpu.Dimension.x).result
            x = memref_d.LoadOp(buf, [c0, tid]).result
            memref_d.StoreOp(rocdl.exp2(f32, x), buf, [c1, tid])
            func.ReturnOp([])
        assert module.operation.verify() and ctx
    data = np.zeros((2, xs.size), np.float32)
    data[0] = xs
    Kernel(fn.operation, arch="gfx942", grid=(1, 1, 1), workgroup_size=xs.size, wave_size=64).run({0: data})
    got = data[1]
    want = np.exp2(xs.astype(np.float64)).astype(np.float32)
    want[np.abs(want) < np.finfo(np.float32).tiny] = 0
    assert np.array_equal(got, want), (got, want)
    assert got[6] == 0 and got[7] == np.inf and got[8] == 2.0**-126 and got[9] == 0 and got[10] == 0
