"""The lane executor must catch broken kernels: a lane's index off by one, a missing barrier, an
out-of-bounds LDS access, an unsupported op, a too-wide buffer access; and must implement the
buffer bounds check (out-of-range loads read 0, stores are dropped)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import dynamic_module, handed_back, matmul_module, simulate
from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module, walk
from mmaflow.runtime.executor import ExecutorError, Kernel
from mmaflow.runtime.simulate import check_matmul

SRC = matmul_module(128, 128, 64)


def _module(target, overrides=()):
    text = handed_back(SRC, target, overrides)
    return parse_module(text, new_context())


def _lds_loads(module):
    """LDS reads of fragments: vector.load, or nvgpu.ldmatrix (whose index operands follow the
    memref the same way)."""
    return [
        o
        for o in walk(module.operation)
        if o.name in ("vector.load", "nvgpu.ldmatrix")
        and "workgroup" in str(ir.MemRefType(o.operands[0].type).memory_space)
    ]


@pytest.mark.parametrize("target", ["gfx1100", "gfx942", "sm_80"])
def test_correct_kernel_passes(target):
    module = _module(target)
    r = check_matmul(module, exact=True)
    assert r.check.passed and not r.stats.races


@pytest.mark.parametrize("target", ["gfx1100", "gfx942", "sm_80"])
def test_one_lane_off_by_one_fails(target):
    """Lane 5 of every wave reads its A fragment one element further along K."""
    module = _module(target)
    load = _lds_loads(module)[0]
    ctx = module.context
    with ctx, load.location, ir.InsertionPoint(load):
        from iree.compiler.dialects import arith, gpu

        index = ir.IndexType.get()
        tid = gpu.ThreadIdOp(gpu.Dimension.x).result
        five = arith.ConstantOp(index, 5).result
        is5 = arith.CmpIOp(arith.CmpIPredicate.eq, tid, five).result
        old = load.operands[2]
        bumped = arith.AddIOp(old, arith.ConstantOp(index, 1).result).result
        load.operands[2] = arith.SelectOp(is5, bumped, old).result
    try:
        r = check_matmul(module, exact=True)
    except ExecutorError as e:  # RDNA3: the lane's replica no longer matches its twin
        assert "replicated lanes must hold equal data" in str(e)
        return
    assert not r.check.passed, "a wrong index in one lane must be caught"


@pytest.mark.parametrize("target", ["gfx1100", "gfx942", "sm_80"])
def test_missing_barrier_is_a_race(target):
    module = _module(target, (("stages", 1),) if target.startswith("sm") else ())
    barriers = ops_named(module.operation, "amdgpu.lds_barrier", "gpu.barrier")
    assert len(barriers) == 2
    barriers[1].erase()  # the one between the LDS stores and the LDS loads
    r = check_matmul(module)
    assert r.stats.races and "no barrier in between" in r.stats.races[0]


def test_missing_war_barrier_is_a_race():
    module = _module("gfx1100")
    barriers = ops_named(module.operation, "amdgpu.lds_barrier")
    barriers[0].erase()  # the one protecting the previous K step's loads from the next stores
    r = check_matmul(module)
    assert any("write after another lane's read" in x for x in r.stats.races)


def _ring_ops(module, name):
    return [o for o in walk(module.operation) if o.name == name]


def _stages(module) -> int:
    return attrs.read_config(attrs.dispatch_func(module.operation)).stages


def test_ring_kernel_passes_with_one_barrier_per_k_tile():
    """NVIDIA's default LDS ring: cp.async copies land at their wait, one barrier before the loop
    and one per K tile (128x128x64 with 32-deep K tiles: 2), B read by ldmatrix .trans. S - 1
    tiles are copied before the loop (here the 2 real ones and a zero fill past the end) and one
    per K tile of the main loop, which ends S - 1 tiles before the last (here it is empty; the
    drain copies nothing): max(S - 1, 2) tiles land, and only the real ones read global memory. 128x128 is fewer 128x128 tiles
    than SMs, so 64x128 tiles: 2 workgroups, each 2 tiles x (A: 256 + B: 512) 16-byte chunks =
    48 wave-wide 16-byte reads."""
    module = _module("sm_80")
    cfg = attrs.read_config(attrs.dispatch_func(module.operation))
    stages = cfg.stages
    assert stages > 1 and len(_ring_ops(module, "nvgpu.device_async_copy")) > 0
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k) == (64, 128, 32)
    assert any(ir.BoolAttr(o.attributes["transpose"]).value for o in _ring_ops(module, "nvgpu.ldmatrix"))
    r = check_matmul(module, exact=True)
    assert r.check.passed and not r.stats.races and r.workgroups == 2
    assert r.stats.barriers == 1 + 2  # (the executor runs both workgroups in one batch)
    assert r.stats.async_copy_bytes == 2 * max(stages - 1, 2) * (64 * 32 + 32 * 128) * 2
    assert dict(r.stats.global_loads) == {16: 2 * 2 * (256 + 512) // 32}


def test_ring_without_its_barrier_is_a_race():
    module = _module("sm_80")
    (barrier,) = [b for b in ops_named(module.operation, "gpu.barrier") if b.parent.name == "scf.for"]
    barrier.erase()
    r = check_matmul(module)
    assert r.stats.races and "no barrier in between" in r.stats.races[0]


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_amd_ring_passes_with_one_barrier_per_k_tile(target):
    """AMD's LDS ring (stages=2): register-staged copies into two slots, one barrier before the
    loop and one per K tile (64-deep K: 2), every LDS access of the ring marked for the
    barriers stage, which adds none."""
    module = _module(target, (("stages", 2),))
    ring = [o for o in walk(module.operation) if attrs.RING in o.attributes]
    assert {o.name for o in ring} == {"vector.load", "vector.store", "amdgpu.lds_barrier"}
    assert len(ops_named(module.operation, "amdgpu.lds_barrier")) == 2
    r = check_matmul(module, exact=True)
    assert r.check.passed and not r.stats.races
    assert r.stats.barriers == 1 + 2


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_amd_ring_without_its_barrier_is_a_race(target):
    module = _module(target, (("stages", 2),))
    (barrier,) = [b for b in ops_named(module.operation, "amdgpu.lds_barrier") if b.parent.name == "scf.for"]
    barrier.erase()
    r = check_matmul(module)
    assert r.stats.races and "no barrier in between" in r.stats.races[0]


def test_amd_ring_storing_into_the_slot_being_read_is_a_race():
    """gfx1100 reads its tile's second K step from slot i % 2 before the stores of tile i+1 (two
    fragment groups per tile); storing into that slot instead of (i+1) % 2 overwrites what other
    lanes read since the last barrier."""
    module = _module("gfx1100", (("stages", 2),))
    loop = next(
        o for o in walk(module.operation) if o.name == "scf.for" and any(attrs.RING in x.attributes for x in walk(o))
    )
    body = [o for o in walk(loop) if attrs.RING in o.attributes]
    first_read = next(o for o in body if o.name == "vector.load")
    stores = [o for o in body if o.name == "vector.store"]
    assert stores and first_read.operands[1] != stores[0].operands[2]  # (value, memref, slot, ...)
    for st in stores:
        st.operands[2] = first_read.operands[1]
    r = check_matmul(module)
    assert any("write after another lane's read" in x for x in r.stats.races), r.stats.races[:3]


def test_ring_wait_that_leaves_the_tile_in_flight_is_an_error():
    """Waiting for all but S - 1 groups (instead of S - 2) lets the fragments read a slot whose
    copies have not landed: the executor refuses, whatever the data would have been."""
    module = _module("sm_80")
    wait = next(o for o in _ring_ops(module, "nvgpu.device_async_wait") if o.parent.name == "scf.for")
    assert ir.IntegerAttr(wait.attributes["numGroups"]).value == _stages(module) - 2
    with module.context:
        wait.attributes["numGroups"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), _stages(module) - 1)
    with pytest.raises(ExecutorError, match="while an async copy to it is in flight"):
        check_matmul(module)


def test_ring_copies_never_waited_for_are_an_error():
    """Without the wait after the loop, the zero-filling copies past the last tile are still in
    flight when the kernel ends."""
    module = _module("sm_80")
    waits = [o for o in _ring_ops(module, "nvgpu.device_async_wait") if o.parent.name != "scf.for"]
    assert [ir.IntegerAttr(w.attributes["numGroups"]).value for w in waits] == [_stages(module) - 2, 0]
    waits[-1].erase()
    with pytest.raises(ExecutorError, match="never waited for"):
        check_matmul(module)


def test_lds_out_of_bounds_is_an_error():
    module = _module("gfx942")
    load = _lds_loads(module)[0]
    with module.context, load.location, ir.InsertionPoint(load):
        from iree.compiler.dialects import arith

        load.operands[1] = arith.AddIOp(load.operands[1], arith.ConstantOp(ir.IndexType.get(), 4096).result).result
    with pytest.raises(ExecutorError, match="LDS access out of bounds"):
        check_matmul(module)


def test_unsupported_op_is_named():
    module = _module("sm_80")
    load = _lds_loads(module)[0]
    with module.context, load.location, ir.InsertionPoint(load):
        ir.Operation.create("gpu.lane_id", results=[ir.IndexType.get()])
    with pytest.raises(ExecutorError, match="does not support gpu.lane_id"):
        check_matmul(module)


KERNEL = """
func.func @k() {{
  %c0 = arith.constant 0 : index
  %in = hal.interface.binding.subspan layout(<bindings = [#hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>]>) binding(0) alignment(64) offset(%c0) : memref<4x8xf32, #gpu.address_space<global>>
  %out = hal.interface.binding.subspan layout(<bindings = [#hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>]>) binding(1) alignment(64) offset(%c0) : memref<64xf32, #gpu.address_space<global>>
  %tid = gpu.thread_id x
  %row = arith.index_cast %tid : index to i32
  %zero = arith.constant 0 : i32
  %v = amdgpu.raw_buffer_load boundsCheck(true) %in[%row, %zero] : memref<4x8xf32, #gpu.address_space<global>>, i32, i32 -> {vt}
  %i = arith.index_cast %tid : index to i32
  %c8 = arith.constant 8 : i32
  %o = arith.muli %i, %c8 : i32
  amdgpu.raw_buffer_store boundsCheck(true) %v -> %out[%o] : {vt} -> memref<64xf32, #gpu.address_space<global>>, i32
  return
}}
"""


def _run_kernel(vt: str, inp: np.ndarray, out: np.ndarray, lanes: int = 8):
    module = parse_module(KERNEL.format(vt=vt), new_context())
    (func,) = ops_named(module.operation, "func.func")
    k = Kernel(func, arch="gfx942", grid=(1, 1, 1), workgroup_size=lanes, wave_size=lanes)
    return k.run({0: inp, 1: out})


def test_raw_buffer_bounds_check():
    """Lanes 0-3 read rows 0-3; lanes 4-7 read past the 4x8 buffer: 0. Stores past 64: dropped."""
    inp = np.arange(32, dtype=np.float32).reshape(4, 8) + 1
    out = np.full(64, -1.0, np.float32)
    _run_kernel("vector<4xf32>", inp, out)
    got = out.reshape(8, 8)
    np.testing.assert_array_equal(got[:4, :4], inp[:, :4])
    np.testing.assert_array_equal(got[4:, :4], 0)  # out-of-range loads read zero
    np.testing.assert_array_equal(got[:, 4:], -1)  # untouched
    out2 = np.full(64, -1.0, np.float32)
    _run_kernel("vector<4xf32>", inp, out2, lanes=16)  # lanes 8-15 store at 64.. -> dropped
    assert out2.shape == (64,)


def test_buffer_access_wider_than_128_bits_is_an_error():
    with pytest.raises(ExecutorError, match="at most 128"):
        _run_kernel("vector<8xf32>", np.zeros((4, 8), np.float32), np.zeros(64, np.float32))


# LDS bank conflicts of the default f16 kernels, as the executor counts them (its bank model is in
# runtime/executor/ops.py): none on any AMD target. CDNA: the fragment reads (K steps interleaved into
# 128-bit reads), A's tile stores (rows in bank-disjoint order) and B's transposing 32-bit stores
# (each store phase's column chunks XOR-swizzled: lds_copy._transposed_swizzle) have none.
@pytest.mark.parametrize("target", ["gfx1100", "gfx1201", "gfx942", "gfx950"])
def test_lds_bank_conflicts_of_default_kernels(target):
    module = _module(target)
    r = check_matmul(module, seed=5)
    assert r.check.passed, r.check.line()
    assert not r.stats.lds_conflicts_by_op, r.stats.lds_conflicts_by_op
    assert r.stats.lds_cycles == r.stats.lds_ideal_cycles


def test_ring_zero_fills_partial_tiles():
    """200x136x96 on sm_80: rows of 96 and 136 halves allow 16-byte cp.async, the M and N edges
    are partial and K ends mid-ring. Chunks outside the tensor copy 0 source elements (zero
    fill), and the result is exact."""
    module = parse_module(handed_back(matmul_module(200, 136, 96), "sm_80"), new_context())
    copies = _ring_ops(module, "nvgpu.device_async_copy")
    assert copies and any(len(list(o.operands)) > 1 + 3 + 1 + 2 for o in copies)  # a srcElements operand
    r = check_matmul(module, exact=True)
    assert r.check.passed and not r.stats.races


def test_ring_guards_a_partial_last_round():
    """250x80x96 on sm_80 gets a 128x96 tile: B's 32x96 K-outer tile is 384 16-byte chunks for
    256 threads, so the second round is guarded (scf.if) instead of clamped onto another
    thread's chunk; the result is exact and race-free."""
    module = parse_module(handed_back(matmul_module(250, 80, 96), "sm_80"), new_context())
    guarded = [o for o in _ring_ops(module, "nvgpu.device_async_copy") if o.parent.name == "scf.if"]
    assert guarded and all(attrs.RING in o.attributes for o in guarded)
    r = check_matmul(module, exact=True)
    assert r.check.passed and not r.stats.races


@pytest.mark.parametrize("target,raster", [("sm_80", 5), ("gfx942", 3), ("gfx1100", 3)])
def test_rastered_workgroups_cover_the_grid_once(target, raster):
    """``raster``: workgroups walk the tiles in groups of tile rows (the last group short here:
    1000 rows are 16 / 8 tile rows). A permutation of the grid: every output element written
    once, exactly (check_matmul counts unwritten elements and compares all of them)."""
    module = parse_module(handed_back(matmul_module(1000, 640, 64), target, (("raster", raster),)), new_context())
    func = attrs.dispatch_func(module.operation)
    assert attrs.read_config(func).raster == raster
    assert len(ops_named(func, "hal.interface.workgroup.count")) == 2
    r = check_matmul(module, exact=True)
    assert r.check.passed and r.check.unwritten == 0 and not r.stats.races
    # a sample of workgroups is checked on the tiles the raster gives them (simulate.tile_mask)
    r = check_matmul(module, exact=True, sample=3)
    assert r.workgroups < r.grid[0] * r.grid[1] and r.check.passed and r.check.unwritten == 0, r.check.line()


@pytest.mark.parametrize("m", [130, 600])
def test_rastered_dynamic_rows_cover_the_grid_once(m):
    """A dynamic M in groups of 8 tile rows (the wgmma heuristic's choice for a dynamic M over more
    than a wave of tile columns): the kernel sizes the groups at run time. 130 rows are 3 tile rows
    (one short group: column by column), 600 are 10 (a group of 8 and one of 2). Every element
    written once, exactly."""
    over = {"intrinsic": "WGMMA_F32_64x64x16_F16", "tile_m": 64, "raster": 8}
    r = simulate(dynamic_module(m=None, n=192, k=64), "sm_90a", over, sizes=dict(m=m), seed=m, exact=True)
    assert r.check.passed and r.check.unwritten == 0 and not r.stats.races, r.check.line()


def _ring_loops(module):
    """The ring's two K loops (main, drain), each with its async copies."""
    loops = [
        o
        for o in walk(module.operation)
        if o.name == "scf.for" and any(x.name == "nvgpu.device_async_create_group" for x in walk(o))
    ]
    return [(lp, [x for x in walk(lp) if x.name == "nvgpu.device_async_copy"]) for lp in loops]


@pytest.mark.parametrize(
    "m,n,k,whole",
    [
        (80, 136, 232, 7),  # partial M, N and K: K = 7 whole tiles of 32 and 8; the drain copies tile 7
        (64, 128, 224, 7),  # K whole tiles: the drain copies nothing
        (64, 128, 64, 2),  # no more tiles than the prologue copies: an empty main loop
    ],
)
def test_ring_main_loop_and_drain(m, n, k, whole):
    """The ring's main loop copies only tiles whole within K: no copy's K index is selected
    (checked), so its addresses stay affine in K; the drain copies a partial last tile, checked,
    or nothing. Every case exact against numpy and without races."""
    module = parse_module(
        handed_back(matmul_module(m, n, k), "sm_80", (("stages", 3), ("tile_k", 32), ("tile_m", 64), ("tile_n", 128))),
        new_context(),
    )
    loops = _ring_loops(module)
    if whole > 2:  # the main loop runs tiles 0 .. whole - 3 (it copies tiles 2 .. whole - 1)
        (main, main_copies), (drain, drain_copies) = loops
        assert len(main_copies) > 0
    else:  # an empty main loop, folded away: the prologue copies both tiles
        main_copies = []
        ((drain, drain_copies),) = loops
    assert (len(drain_copies) > 0) == (k % 32 != 0)

    def k_index_selected(copy) -> bool:
        # operands: dst, 3 dst indices (slot, row, col), src, 2 src indices, [source elements]
        src_shape = tuple(ir.MemRefType(copy.operands[4].type).shape)
        k_pos = 6 if src_shape == (m, k) else 5  # A is m x k, B k x n (K outermost)
        return getattr(copy.operands[k_pos].owner, "name", "") == "arith.select"  # (a block argument has none)

    assert not any(k_index_selected(c) for c in main_copies)
    assert all(k_index_selected(c) for c in drain_copies)
    r = check_matmul(module, exact=True)
    assert r.check.passed and not r.stats.races, r.check.line()


NESTED_IF = """
func.func @k() {
  %c0 = arith.constant 0 : index
  %out = hal.interface.binding.subspan layout(<bindings = [#hal.pipeline.binding<storage_buffer>]>) binding(0) alignment(64) offset(%c0) : memref<16xf32, #gpu.address_space<global>>
  %tid = gpu.thread_id x
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  %three = arith.constant 3.0 : f32
  %low = arith.cmpi ult, %tid, %c8 : index
  %r = scf.if %low -> (f32) {
    scf.yield %one : f32
  } else {
    %lowest = arith.cmpi ult, %tid, %c4 : index
    %v = scf.if %lowest -> (f32) {
      %x = arith.addf %one, %one : f32
      scf.yield %x : f32
    } else {
      scf.yield %three : f32
    }
    scf.yield %v : f32
  }
  %i = arith.index_cast %tid : index to i32
  %rv = vector.broadcast %r : f32 to vector<1xf32>
  amdgpu.raw_buffer_store boundsCheck(true) %rv -> %out[%i] : vector<1xf32> -> memref<16xf32, #gpu.address_space<global>>, i32
  return
}
"""


def test_a_nested_if_side_no_active_lane_takes():
    """Lanes 8-15 take the outer else; there lanes 0-3 (masked off) would take the inner then,
    the active ones none: that side does not run and its results (defined in it) are not read --
    no lane took it (the executor had looked them up and failed)."""
    module = parse_module(NESTED_IF, new_context())
    (func,) = ops_named(module.operation, "func.func")
    out = np.full(16, -1.0, np.float32)
    Kernel(func, arch="gfx942", grid=(1, 1, 1), workgroup_size=16, wave_size=16).run({0: out})
    np.testing.assert_array_equal(out, [1.0] * 8 + [3.0] * 8)
