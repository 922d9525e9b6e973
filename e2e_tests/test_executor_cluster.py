"""The lane executor's thread block clusters (runtime/executor/tma.py, "Clusters"): handwritten
kernels with ``nvvm.cluster_dim``, ``%cluster_ctarank``, ``nvvm.mapa``, remote
``mbarrier.arrive``, ``barrier.cluster``, a multicast ``cp.async.bulk.tensor`` and distributed
shared memory (``llvm.load`` / ``llvm.store`` through mapa'd ``!llvm.ptr<7>``); what the executor
computes, and the ordering bugs it must refuse."""

from __future__ import annotations

import numpy as np
import pytest

from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
from mmaflow.runtime.executor import ExecutorError, Kernel, whole_clusters
from mmaflow.runtime.executor.tma import CLUSTER_TAG, RANK_SHIFT

G = "#gpu.address_space<global>"
W = "#gpu.address_space<workgroup>"
LAYOUT = (
    "layout(<bindings = [#hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>, "
    "#hal.pipeline.binding<storage_buffer>]>)"
)


def _kernel(body: str, cluster=(2, 1, 1), *, grid=(2, 1, 1), threads=32, attrs: str | None = None):
    dims = ", ".join(map(str, cluster))
    attr = f"attributes {{nvvm.cluster_dim = array<i32: {dims}>}}" if attrs is None else attrs
    text = f"""
func.func @k() {attr} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %i0 = arith.constant 0 : i32
  %i1 = arith.constant 1 : i32
  %tid = gpu.thread_id x
  %first = arith.cmpi eq, %tid, %c0 : index
  %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
  %r0 = arith.cmpi eq, %rank, %i0 : i32
  %peer = arith.xori %rank, %i1 : i32
{body}
  return
}}
"""
    module = parse_module(text, new_context())
    (func,) = ops_named(module.operation, "func.func")
    k = Kernel(func, arch="sm_90a", grid=grid, workgroup_size=threads, wave_size=32)
    k.module = module  # (keeps the function alive)
    return k


# ---- cluster coordinates and mapa ---------------------------------------------------------------------

IDS = """
  %out = hal.interface.binding.subspan {layout} binding(0) alignment(64) offset(%c0) : memref<{n}x8xi64, {g}>
  %smem = memref.alloc() : memref<4xi64, {w}>
  %base = memref.extract_aligned_pointer_as_index %smem : memref<4xi64, {w}> -> index
  %b64 = arith.index_cast %base : index to i64
  %c8 = arith.constant 8 : i64
  %a = arith.addi %b64, %c8 : i64
  %p3 = llvm.inttoptr %a : i64 to !llvm.ptr<3>
  %p7 = nvvm.mapa %p3, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
  %pv = llvm.ptrtoint %p7 : !llvm.ptr<7> to i64
  %wx = hal.interface.workgroup.id[0] : index
  %wy = hal.interface.workgroup.id[1] : index
  %gx = hal.interface.workgroup.count[0] : index
  %wyx = arith.muli %wy, %gx : index
  %lin = arith.addi %wyx, %wx : index
  %n = nvvm.read.ptx.sreg.cluster.nctarank : i32
  %cx = nvvm.read.ptx.sreg.cluster.ctaid.x : i32
  %cy = nvvm.read.ptx.sreg.cluster.ctaid.y : i32
  %kx = nvvm.read.ptx.sreg.clusterid.x : i32
  %ky = nvvm.read.ptx.sreg.clusterid.y : i32
  %nky = nvvm.read.ptx.sreg.nclusterid.y : i32
  scf.if %first {{
    %v0 = arith.extui %rank : i32 to i64
    memref.store %v0, %out[%lin, %c0] : memref<{n}x8xi64, {g}>
    %v1 = arith.extui %peer : i32 to i64
    memref.store %v1, %out[%lin, %c1] : memref<{n}x8xi64, {g}>
    %c2 = arith.constant 2 : index
    memref.store %pv, %out[%lin, %c2] : memref<{n}x8xi64, {g}>
    %c3 = arith.constant 3 : index
    %v3 = arith.extui %n : i32 to i64
    memref.store %v3, %out[%lin, %c3] : memref<{n}x8xi64, {g}>
    %c4 = arith.constant 4 : index
    %v4 = arith.extui %cx : i32 to i64
    memref.store %v4, %out[%lin, %c4] : memref<{n}x8xi64, {g}>
    %c5 = arith.constant 5 : index
    %v5 = arith.extui %cy : i32 to i64
    memref.store %v5, %out[%lin, %c5] : memref<{n}x8xi64, {g}>
    %c6 = arith.constant 6 : index
    %v6 = arith.extui %kx : i32 to i64
    memref.store %v6, %out[%lin, %c6] : memref<{n}x8xi64, {g}>
    %c7 = arith.constant 7 : index
    %kyn = arith.muli %ky, %nky : i32
    %v7 = arith.extui %kyn : i32 to i64
    memref.store %v7, %out[%lin, %c7] : memref<{n}x8xi64, {g}>
  }}
"""


def _ids_kernel(grid, cluster):
    n = grid[0] * grid[1]
    return _kernel(IDS.format(layout=LAYOUT, n=n, g=G, w=W), cluster, grid=grid)


@pytest.mark.parametrize("grid,cluster", [((4, 1, 1), (2, 1, 1)), ((2, 4, 1), (1, 2, 1))], ids=["x", "y"])
def test_ctarank_and_mapa(grid, cluster):
    """Workgroup (x, y) is rank (x % cx) + cx * (y % cy) of cluster (x // cx, y // cy); mapa of
    shared address 8 and the peer's rank names (peer rank, 8)."""
    gx, gy, _ = grid
    out = np.full((gx * gy, 8), -1, np.int64)
    _ids_kernel(grid, cluster).run({0: out})
    cx, cy, _ = cluster
    for lin in range(gx * gy):
        x, y = lin % gx, lin // gx
        rank = x % cx + cx * (y % cy)
        peer = rank ^ 1
        assert out[lin, 0] == rank and out[lin, 1] == peer
        assert out[lin, 2] == CLUSTER_TAG | peer << RANK_SHIFT | 8
        assert out[lin, 3] == 2
        assert (out[lin, 4], out[lin, 5]) == (x % cx, y % cy)
        assert out[lin, 6] == x // cx and out[lin, 7] == (y // cy) * (gy // cy)


def test_a_sample_runs_whole_clusters():
    """workgroups=[1] runs the whole cluster {0, 1} (workgroup 0 writes its row too), nothing
    else; for a (1, 2, 1) cluster the peer of (1, 2) is (1, 3)."""
    out = np.full((4, 8), -1, np.int64)
    k = _ids_kernel((4, 1, 1), (2, 1, 1))
    k.run({0: out}, workgroups=[1])
    assert k.ran == [0, 1]
    assert out[0, 0] == 0 and out[1, 0] == 1
    assert (out[2:] == -1).all()
    assert whole_clusters([5], (2, 4, 1), (1, 2, 1)) == [5, 7]
    assert whole_clusters([3, 4], (4, 2, 1), (2, 1, 1)) == [2, 3, 4, 5]
    assert whole_clusters([3], (4, 1, 1), (1, 1, 1)) == [3]


def test_the_grid_must_divide_by_the_cluster():
    with pytest.raises(ExecutorError, match=r"grid \(3, 1, 1\) does not divide by the cluster shape \(2, 1, 1\)"):
        _ids_kernel((3, 1, 1), (2, 1, 1)).run({0: np.zeros((3, 8), np.int64)})


def test_mapa_outside_the_cluster():
    body = """
  %smem = memref.alloc() : memref<4xi64, #gpu.address_space<workgroup>>
  %c8 = arith.constant 8 : i64
  %p3 = llvm.inttoptr %c8 : i64 to !llvm.ptr<3>
  %i2 = arith.constant 2 : i32
  %p7 = nvvm.mapa %p3, %i2 : !llvm.ptr<3> -> !llvm.ptr<7>
"""
    with pytest.raises(ExecutorError, match="names CTA rank 2 of a cluster of 2"):
        _kernel(body).run({})


# ---- remote arrive: a two-CTA ping ----------------------------------------------------------------------

PING = """
  %out = hal.interface.binding.subspan {layout} binding(0) alignment(64) offset(%c0) : memref<{n}xi32, {g}>
  %smem = memref.alloc() : memref<2xi64, {w}>
  %base = memref.extract_aligned_pointer_as_index %smem : memref<2xi64, {w}> -> index
  %b64 = arith.index_cast %base : index to i64
  %c8 = arith.constant 8 : i64
  %ba = arith.addi %b64, %c8 : i64
  %barA = llvm.inttoptr %b64 : i64 to !llvm.ptr<3>
  %barB = llvm.inttoptr %ba : i64 to !llvm.ptr<3>
  scf.if %first {{
    nvvm.mbarrier.init %barA, %i1 : !llvm.ptr<3>, i32
    nvvm.mbarrier.init %barB, %i1 : !llvm.ptr<3>, i32
    nvvm.fence.mbarrier.init
  }}
  {visible}
  %target = {target}
  %peerA = nvvm.mapa %barA, %target : !llvm.ptr<3> -> !llvm.ptr<7>
  %peerB = nvvm.mapa %barB, %target : !llvm.ptr<3> -> !llvm.ptr<7>
  // rank 0 pings rank 1's barrier A; rank 1 waits on it, then pongs rank 0's barrier B
  %ping = arith.andi %first, %r0 : i1
  scf.if %ping {{
    nvvm.mbarrier.arrive %peerA : !llvm.ptr<7>
  }}
  %r1 = arith.cmpi eq, %rank, %i1 : i32
  scf.if %r1 {{
    %okA = nvvm.mbarrier.try_wait %barA, %i0, %i0 : !llvm.ptr<3>, i32, i32 -> i1
    %pong = arith.andi %first, %okA : i1
    scf.if %pong {{
      nvvm.mbarrier.arrive %peerB : !llvm.ptr<7>
    }}
  }}
  scf.if %r0 {{
    %okB = nvvm.mbarrier.try_wait %barB, %i0, %i0 : !llvm.ptr<3>, i32, i32 -> i1
  }}
  %wx = hal.interface.workgroup.id[0] : index
  scf.if %first {{
    %c100 = arith.constant 100 : i32
    %v = arith.addi %rank, %c100 : i32
    memref.store %v, %out[%wx] : memref<{n}xi32, {g}>
  }}
  {exit}
"""
CLUSTER_BARRIER = "nvvm.cluster.arrive\n  nvvm.cluster.wait"


def _ping(n=2, *, visible=CLUSTER_BARRIER, target="arith.xori %rank, %i1 : i32", exit=CLUSTER_BARRIER):
    return _kernel(PING.format(layout=LAYOUT, n=n, g=G, w=W, visible=visible, target=target, exit=exit), grid=(n, 1, 1))


@pytest.mark.parametrize("aligned", [False, True])
def test_remote_arrive_completes_the_peers_phase(aligned):
    """Rank 0's remote arrive completes rank 1's barrier A, whose wait then passes; rank 1's
    completes rank 0's barrier B. Four workgroups, one per batch requested: the batch holds the
    cluster anyway."""
    out = np.zeros(4, np.int32)
    cb = (
        CLUSTER_BARRIER.replace("arrive", "arrive aligned").replace("wait", "wait aligned")
        if aligned
        else CLUSTER_BARRIER
    )
    k = _ping(4, visible=cb, exit=cb)
    stats = k.run({0: out}, max_lanes=32)
    np.testing.assert_array_equal(out, [100, 101, 100, 101])
    assert stats.barriers == 2 * 2  # two barrier.cluster per batch of one cluster


def test_an_arrive_on_the_own_barrier_is_not_the_peers():
    """mapa to the thread's own rank: the arrive lands on its own barrier A; rank 1's A never
    completes."""
    with pytest.raises(ExecutorError, match="can never complete: 1 of 1 arrivals missing"):
        _ping(target="arith.addi %rank, %i0 : i32").run({0: np.zeros(2, np.int32)})


def test_remote_arrive_needs_a_cluster_barrier_after_the_init():
    with pytest.raises(
        ExecutorError,
        match="remote mbarrier.arrive by thread 0 of workgroup row 0 on an mbarrier "
        "CTA 1 initialised with no cluster barrier since",
    ):
        _ping(visible="gpu.barrier").run({0: np.zeros(2, np.int32)})


def test_exit_needs_a_cluster_barrier_after_a_remote_arrive():
    with pytest.raises(
        ExecutorError,
        match=r"workgroup row 0 \(cluster rank 0\) exits while CTA 1 of its cluster "
        r"may still arrive on its mbarrier at 8 .*no barrier.cluster after it",
    ):
        _ping(exit="").run({0: np.zeros(2, np.int32)})


# ---- barrier.cluster --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arrive,match",
    [
        (
            "%h = arith.cmpi ult, %tid, %c16 : index\n  scf.if %h {\n    nvvm.cluster.arrive\n  }",
            r"can never complete: 32 threads of its cluster never arrived \(thread 16 of CTA 0",
        ),
        (
            "scf.if %r0 {\n    nvvm.cluster.arrive\n  }",
            r"can never complete: 32 threads of its cluster never arrived \(thread 0 of CTA 1, workgroup row 1",
        ),
        ("", "with no barrier.cluster.arrive before"),
    ],
    ids=["half-the-threads", "one-cta", "none"],
)
def test_a_cluster_wait_some_threads_never_arrived_at(arrive, match):
    body = f"  %c16 = arith.constant 16 : index\n  {arrive}\n  nvvm.cluster.wait\n"
    with pytest.raises(ExecutorError, match=match):
        _kernel(body).run({})


def test_split_arrivals_complete_the_cluster_barrier():
    """Half the threads arrive, then the other half: the barrier completes at the second arrive
    (one barrier counted) and every thread's wait returns."""
    body = """  %c16 = arith.constant 16 : index
  %h = arith.cmpi ult, %tid, %c16 : index
  scf.if %h {
    nvvm.cluster.arrive
  } else {
    nvvm.cluster.arrive
  }
  nvvm.cluster.wait
"""
    assert _kernel(body).run({}).barriers == 1


def test_a_cluster_barrier_inside_warp_roles_is_refused():
    """Threads 0-15 wait on an mbarrier the others arrive on (a warp-role split, run as two
    tasks); the arriving side's barrier.cluster.arrive is refused there."""
    body = """  %smem = memref.alloc() : memref<1xi64, #gpu.address_space<workgroup>>
  %c8 = arith.constant 0 : i64
  %bar = llvm.inttoptr %c8 : i64 to !llvm.ptr<3>
  scf.if %first {
    nvvm.mbarrier.init %bar, %i1 : !llvm.ptr<3>, i32
    nvvm.fence.mbarrier.init
  }
  gpu.barrier
  %c16 = arith.constant 16 : index
  %h = arith.cmpi ult, %tid, %c16 : index
  scf.if %h {
    %ok = nvvm.mbarrier.try_wait %bar, %i0, %i0 : !llvm.ptr<3>, i32, i32 -> i1
  } else {
    %c16b = arith.cmpi eq, %tid, %c16 : index
    scf.if %c16b {
      %s = nvvm.mbarrier.arrive %bar : !llvm.ptr<3> -> i64
    }
    nvvm.cluster.arrive
    nvvm.cluster.wait
  }
"""
    with pytest.raises(
        ExecutorError,
        match=r"barrier.cluster.arrive inside a warp-role split \(executor.Roles\) is "
        r"not modelled",
    ):
        _kernel(body).run({})


def test_arriving_twice_before_the_wait():
    with pytest.raises(ExecutorError, match="arrives at barrier.cluster again before its barrier.cluster.wait"):
        _kernel("  nvvm.cluster.arrive\n  nvvm.cluster.arrive\n  nvvm.cluster.wait\n").run({})


def test_an_arrive_with_no_wait_is_refused():
    with pytest.raises(ExecutorError, match="barrier.cluster.arrive with no barrier.cluster.wait after it"):
        _kernel("  nvvm.cluster.arrive\n").run({})


# ---- multicast: one box into both CTAs' shared memory ------------------------------------------------------

ROWS, COLS, BOX = 128, 128, 64
COORD = (64, 32)  # innermost (column) first
BOX_BYTES = BOX * BOX * 2
SMEM_I64 = (BOX_BYTES + 256) // 8  # the box at 0, the map at 8192, the mbarrier at 8320

MULTICAST = """
  %x = hal.interface.binding.subspan {layout} binding(0) alignment(64) offset(%c0) : memref<{xn}xf16, {g}>
  %out = hal.interface.binding.subspan {layout} binding(1) alignment(64) offset(%c0) : memref<{n}x{oi}xi64, {g}>
  %gm = hal.interface.binding.subspan {layout} binding(2) alignment(64) offset(%c0) : memref<16xi64, {g}>
  %xi = memref.extract_aligned_pointer_as_index %x : memref<{xn}xf16, {g}> -> index
  %xa = arith.index_cast %xi : index to i64
  %gi = memref.extract_aligned_pointer_as_index %gm : memref<16xi64, {g}> -> index
  %ga = arith.index_cast %gi : index to i64
  %gmap1 = llvm.inttoptr %ga : i64 to !llvm.ptr<1>
  %gmap = llvm.addrspacecast %gmap1 : !llvm.ptr<1> to !llvm.ptr
  %smem = memref.alloc() : memref<{si}xi64, {w}>
  %si = memref.extract_aligned_pointer_as_index %smem : memref<{si}xi64, {w}> -> index
  %sa = arith.index_cast %si : index to i64
  %cmap = arith.constant {box_bytes} : i64
  %cbar = arith.constant {bar_off} : i64
  %ma = arith.addi %sa, %cmap : i64
  %bb = arith.addi %sa, %cbar : i64
  %box3 = llvm.inttoptr %sa : i64 to !llvm.ptr<3>
  %box7 = llvm.addrspacecast %box3 : !llvm.ptr<3> to !llvm.ptr<7>
  %map3 = llvm.inttoptr %ma : i64 to !llvm.ptr<3>
  %bar3 = llvm.inttoptr %bb : i64 to !llvm.ptr<3>
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0 : i64
  %mape = arith.constant {map_e} : index
  %lt16 = arith.cmpi ult, %tid, %c16 : index
  scf.if %lt16 {{
    %e = arith.addi %mape, %tid : index
    memref.store %zero, %smem[%e] : memref<{si}xi64, {w}>
  }}
  gpu.barrier
  %builder = arith.andi %first, %r0 : i1
  %i64c = arith.constant 64 : i32
  %rows = arith.constant {rows} : i32
  %cols = arith.constant {cols} : i32
  %pitch = arith.constant {pitch} : i64
  scf.if %builder {{
    nvvm.tensormap.replace field = global_address, new_value = %xa in %map3 : !llvm.ptr<3>, i64
    nvvm.tensormap.replace field = rank, new_value = %i1 in %map3 : !llvm.ptr<3>, i32
    nvvm.tensormap.replace field = box_dim[0], new_value = %i64c in %map3 : !llvm.ptr<3>, i32
    nvvm.tensormap.replace field = box_dim[1], new_value = %i64c in %map3 : !llvm.ptr<3>, i32
    nvvm.tensormap.replace field = global_dim[0], new_value = %cols in %map3 : !llvm.ptr<3>, i32
    nvvm.tensormap.replace field = global_dim[1], new_value = %rows in %map3 : !llvm.ptr<3>, i32
    nvvm.tensormap.replace field = global_stride[0], new_value = %pitch in %map3 : !llvm.ptr<3>, i64
    nvvm.tensormap.replace field = element_stride[0], new_value = %i1 in %map3 : !llvm.ptr<3>, i32
    nvvm.tensormap.replace field = element_stride[1], new_value = %i1 in %map3 : !llvm.ptr<3>, i32
    nvvm.tensormap.replace field = elemtype, new_value = #nvvm.tensormap_elemtype<f16> in %map3 : !llvm.ptr<3>
    nvvm.tensormap.replace field = interleave_layout, new_value = #nvvm.tensormap_interleave_layout<no_interleave> in %map3 : !llvm.ptr<3>
    nvvm.tensormap.replace field = swizzle_mode, new_value = #nvvm.tensormap_swizzle_mode<b128> in %map3 : !llvm.ptr<3>
    nvvm.tensormap.replace field = fill_mode, new_value = #nvvm.tensormap_fill_mode<zero> in %map3 : !llvm.ptr<3>
  }}
  gpu.barrier
  %w0 = arith.cmpi ult, %tid, %c32 : index
  %publisher = arith.andi %r0, %w0 : i1
  scf.if %publisher {{
    nvvm.inline_ptx "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;" ro(%gmap1, %map3 : !llvm.ptr<1>, !llvm.ptr<3>) memory_clobber = true
  }}
  %c128 = arith.constant 128 : i32
  scf.if %first {{
    nvvm.fence.proxy.acquire gpu %gmap, %c128
    nvvm.mbarrier.init %bar3, %i1 : !llvm.ptr<3>, i32
    {init}
    nvvm.fence.mbarrier.init
  }}
  {visible}
  %tx = arith.constant {box_bytes} : i32
  %mask = arith.constant {mask} : i16
  %x0 = arith.constant {c0} : i32
  %x1 = arith.constant {c1} : i32
  scf.if %first {{
    %s = nvvm.mbarrier.arrive.expect_tx %bar3, %tx : !llvm.ptr<3>, i32 -> i64
  }}
  scf.if %builder {{
    nvvm.cp.async.bulk.tensor.shared.cluster.global %box7, %gmap, %bar3, box[%x0, %x1] multicast_mask = %mask : !llvm.ptr<7>, !llvm.ptr
  }}
  %ok = nvvm.mbarrier.try_wait %bar3, %i0, %i0 : !llvm.ptr<3>, i32, i32 -> i1
  {middle}
  %wx = hal.interface.workgroup.id[0] : index
  %per = arith.constant {per} : index
  %start = arith.muli %tid, %per : index
  scf.for %j = %c0 to %per step %c1 {{
    %e = arith.addi %start, %j : index
    %v = memref.load %smem[%e] : memref<{si}xi64, {w}>
    memref.store %v, %out[%wx, %e] : memref<{n}x{oi}xi64, {g}>
  }}
  {exit}
"""


def _multicast_body(mask=3, *, visible=CLUSTER_BARRIER, exit=CLUSTER_BARRIER, threads=32, init="", middle=""):
    oi = BOX_BYTES // 8
    return MULTICAST.format(
        layout=LAYOUT,
        g=G,
        w=W,
        xn=ROWS * COLS,
        n=2,
        oi=oi,
        si=SMEM_I64,
        box_bytes=BOX_BYTES,
        bar_off=BOX_BYTES + 128,
        map_e=BOX_BYTES // 8,
        rows=ROWS,
        cols=COLS,
        pitch=COLS * 2,
        visible=visible,
        mask=mask,
        c0=COORD[0],
        c1=COORD[1],
        per=oi // threads,
        exit=exit,
        init=init,
        middle=middle,
    )


def _multicast(
    mask=3, *, visible=CLUSTER_BARRIER, exit=CLUSTER_BARRIER, threads=32, init="", middle="", attrs=None, grid=(2, 1, 1)
):
    oi = BOX_BYTES // 8
    body = _multicast_body(mask, visible=visible, exit=exit, threads=threads, init=init, middle=middle)
    k = _kernel(body, threads=threads, attrs=attrs, grid=grid)
    x = np.random.default_rng(7).standard_normal((ROWS, COLS)).astype(np.float16)
    bufs = {0: x.copy(), 1: np.zeros((2, oi), np.int64), 2: np.zeros(16, np.int64)}
    return k, bufs, x


def _image(x) -> np.ndarray:
    """The box's 8192 bytes as the 128B swizzle stores them: 16-byte chunk c of box row r at
    chunk c ^ (r % 8) of that row (docs/kernels/hopper_wgmma.md, the H200 probe)."""
    box = x[COORD[1] : COORD[1] + BOX, COORD[0] : COORD[0] + BOX]
    rows = box.view(np.uint8).reshape(BOX, 8, 16)
    out = np.empty_like(rows)
    for r in range(BOX):
        for c in range(8):
            out[r, c ^ (r % 8)] = rows[r, c]
    return out.reshape(-1)


def test_a_multicast_copy_lands_in_both_ctas():
    """Rank 0 alone builds the map and issues one copy with mask 0b11: both CTAs' barriers get
    the box's bytes (each armed by its own expect_tx), both shared memories the box."""
    k, bufs, x = _multicast()
    stats = k.run(bufs)
    want = _image(x)
    assert (bufs[1][0].view(np.uint8) == want).all()
    assert (bufs[1][1].view(np.uint8) == want).all()
    assert stats.async_copy_bytes == 2 * BOX_BYTES


def test_a_multicast_to_the_peer_only():
    """Mask 0b10: the box lands in rank 1 alone; rank 0's barrier, armed for 8192 bytes, never
    gets them."""
    k, bufs, x = _multicast(mask=2)
    with pytest.raises(ExecutorError, match=r"workgroup row 0 waits .* 8192 bytes expected, 0 issued"):
        k.run(bufs)


def test_a_multicast_bit_outside_the_cluster():
    k, bufs, _ = _multicast(mask=5)
    with pytest.raises(
        ExecutorError, match="multicasts a bulk tensor copy to CTA mask 0x0005, bits outside its cluster of 2"
    ):
        k.run(bufs)


def test_a_multicast_needs_the_peers_init_visible():
    k, bufs, _ = _multicast(visible="gpu.barrier")
    with pytest.raises(
        ExecutorError,
        match="a multicast cp.async.bulk.tensor by thread 0 of workgroup row 0 on an "
        "mbarrier CTA 1 initialised with no cluster barrier since",
    ):
        k.run(bufs)


def test_exit_needs_a_cluster_barrier_after_a_multicast():
    k, bufs, _ = _multicast(exit="")
    with pytest.raises(
        ExecutorError,
        match=r"workgroup row 1 \(cluster rank 1\) exits while CTA 0 of its cluster "
        r"may still multicast into its shared memory at 0",
    ):
        k.run(bufs)


def test_without_clusters_a_multicast_names_only_the_own_cta():
    """No nvvm.cluster_dim: a cluster of one; mask 0b11 names a CTA that does not exist."""
    k, bufs, _ = _multicast(visible="gpu.barrier", exit="", attrs="", grid=(1, 1, 1))
    with pytest.raises(ExecutorError, match="bits outside its cluster of 1"):
        k.run(bufs)


# ---- happens-before across the cluster: a multicast over bytes the peer's wgmma read ---------------------


def _descriptor() -> int:
    """K-major, 128B swizzle, at shared byte 0 (the box): 8-row groups 1024 bytes apart."""
    from mmaflow.runtime.isa.smem_matrix import Descriptor, encode_descriptor

    return encode_descriptor(Descriptor(0, 16, 1024, 0, "128B"))


ACC = "!llvm.struct<(f32, f32, f32, f32)>"
# Round 2: both CTAs' wgmma (m64n8k16, A and B from the box) read the box; each CTA's thread 0
# then releases it on rank 0's "empty" mbarrier (8328; rank 1's arrival is remote); rank 0's
# thread 0 waits for it and multicasts the box again into both CTAs.
ROUND2 = """
  %desc = arith.constant {desc} : i64
  %zacc = llvm.mlir.zero : {acc}
  nvvm.wgmma.fence.aligned
  %acc = nvvm.wgmma.mma_async %desc, %desc, %zacc, #nvvm.shape<m = 64, n = 8, k = 16>, D [<f32>, #nvvm.wgmma_scale_out<one>], A [<f16>, #nvvm.wgmma_scale_in<one>, <row>], B [<f16>, #nvvm.wgmma_scale_in<one>, <col>] : {acc} -> {acc}
  nvvm.wgmma.commit.group.sync.aligned
  %ce = arith.constant 8 : i64
  %eb = arith.addi %bb, %ce : i64
  %empty3 = llvm.inttoptr %eb : i64 to !llvm.ptr<3>
  %empty7 = nvvm.mapa %empty3, %i0 : !llvm.ptr<3> -> !llvm.ptr<7>
  {release}
  scf.if %builder {{
    %e = nvvm.mbarrier.try_wait %empty3, %i0, %i0 : !llvm.ptr<3>, i32, i32 -> i1
  }}
  scf.if %first {{
    %s2 = nvvm.mbarrier.arrive.expect_tx %bar3, %tx : !llvm.ptr<3>, i32 -> i64
  }}
  scf.if %builder {{
    nvvm.cp.async.bulk.tensor.shared.cluster.global %box7, %gmap, %bar3, box[%x0, %x1] multicast_mask = %mask : !llvm.ptr<7>, !llvm.ptr
  }}
  %ok2 = nvvm.mbarrier.try_wait %bar3, %i1, %i0 : !llvm.ptr<3>, i32, i32 -> i1
"""
ARRIVE = "scf.if %first {\n    nvvm.mbarrier.arrive %empty7 : !llvm.ptr<7>\n  }"
WAIT = "nvvm.wgmma.wait.group.sync.aligned 0"
RELEASES = {
    "carried": f"{WAIT}\n  {ARRIVE}",  # the arrival carries the wait_group
    "early": f"{ARRIVE}\n  {WAIT}",  # released before the wait_group: nothing orders it
    "cluster-barrier": f"{ARRIVE}\n  {WAIT}\n  {CLUSTER_BARRIER}",  # a barrier.cluster after the wait_group
    "cta-barrier": f"{ARRIVE}\n  {WAIT}\n  gpu.barrier",  # a CTA barrier orders nothing for rank 0
}


@pytest.mark.parametrize("release", list(RELEASES))
def test_a_multicast_over_bytes_the_peers_wgmma_read(release):
    """Rank 0 refills both CTAs' box after its "empty" mbarrier's phase: ordered after rank 1's
    wgmma read only where rank 1's arrival carried its wait_group (knowledge per cluster rank),
    or a barrier.cluster came after it; a CTA barrier, or an arrival before the wait_group, is
    an error naming rank 1."""
    init = "nvvm.mbarrier.init %empty0, %c2i : !llvm.ptr<3>, i32"
    pre = (
        "%c2i = arith.constant 2 : i32\n    %ce0 = arith.constant 8 : i64\n    %eb0 = arith.addi %bb, %ce0 : i64\n"
        "    %empty0 = llvm.inttoptr %eb0 : i64 to !llvm.ptr<3>\n    "
    )
    middle = ROUND2.format(desc=_descriptor(), acc=ACC, release=RELEASES[release])
    k, bufs, x = _multicast(threads=128, init=pre + init, middle=middle)
    if release in ("carried", "cluster-barrier"):
        k.run(bufs)
        want = _image(x)
        assert (bufs[1][0].view(np.uint8) == want).all() and (bufs[1][1].view(np.uint8) == want).all()
        return
    with pytest.raises(
        ExecutorError,
        match=r"a multicast bulk tensor copy into CTA 1 of the cluster by thread 0 of "
        r"workgroup row 0 into shared-memory byte \d+ of cluster rank 1 \(row 1\), "
        r"which that CTA's warpgroup 0's wgmma.mma_async read",
    ):
        k.run(bufs)


# ---- check_matmul: a sample grows to whole clusters, and their tiles are checked -----------------------


def test_check_matmul_samples_whole_clusters():
    """An mma.sync matmul (grid 4 x 8) given nvvm.cluster_dim (2, 1, 1): sample=1 picks the
    four corner workgroups 0, 3, 28, 31; their clusters add 1, 2, 29, 30, whose tiles the check
    must own (else their writes are stray) and compare."""
    from conftest import handed_back, matmul_module
    from iree.compiler import ir

    from mmaflow.runtime.simulate import check_matmul, load_dispatch

    module = parse_module(handed_back(matmul_module(512, 512, 32), "sm_80", ()), new_context())
    d = load_dispatch(module)
    assert d.grid() == (4, 8, 1)
    with module.context:
        d.func.attributes["nvvm.cluster_dim"] = ir.Attribute.parse("array<i32: 2, 1, 1>")
    r = check_matmul(module, sample=1)
    assert r.check.passed, r.check.detail
    assert r.workgroups == 8


def test_work_between_a_split_arrive_and_its_wait_is_refused():
    """The model completes barrier.cluster at the last arrival: a store between a thread's arrive
    and its wait would count as ordered before the barrier, which the hardware does not promise."""
    body = """  %smem = memref.alloc() : memref<64xf32, #gpu.address_space<workgroup>>
  %c16 = arith.constant 16 : index
  %h = arith.cmpi ult, %tid, %c16 : index
  %v = arith.constant 1.0 : f32
  scf.if %h {
    nvvm.cluster.arrive
    memref.store %v, %smem[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
  } else {
    nvvm.cluster.arrive
  }
  nvvm.cluster.wait
"""
    with pytest.raises(
        ExecutorError,
        match=r"memref.store between barrier.cluster.arrive .* and its wait: work between "
        r"a split arrive and wait is not modelled",
    ):
        _kernel(body).run({})


# ---- distributed shared memory: a split-K reduction across the CTAs of a cluster ----------------------

# Every CTA stores its partial (one f32 or vector<w x f32> per thread, from binding 0) into its own
# shared memory through an !llvm.ptr<3>; {publish} (a barrier.cluster); rank 0 adds its own partial
# (read through the !llvm.ptr<3>) and then each peer's, rank after rank, read through nvvm.mapa's
# !llvm.ptr<7>, and writes the sum to binding 1 at [cluster, thread, w:2w] (sentinels either
# side); {exit} (a barrier.cluster: no peer exits while rank 0 reads its shared memory).
SPLIT_K = """
  %in = hal.interface.binding.subspan {layout} binding(0) alignment(64) offset(%c0) : {mem_in}
  %out = hal.interface.binding.subspan {layout} binding(1) alignment(64) offset(%c0) : {mem_out}
  %pad = memref.alloc() : memref<4xf32, {w_}>
  %smem = memref.alloc() : memref<{smem}xf32, {w_}>
  %wx = hal.interface.workgroup.id[0] : index
  %cw = arith.constant {w} : index
  %e = arith.muli %tid, %cw : index
  %v = {load_in}
  %base = memref.extract_aligned_pointer_as_index %smem : memref<{smem}xf32, {w_}> -> index
  %b64 = arith.index_cast %base : index to i64
  %e64 = arith.index_cast %e : index to i64
  %c4 = arith.constant 4 : i64
  %o64 = arith.muli %e64, %c4 : i64
  %a = arith.addi %b64, %o64 : i64
  %p = llvm.inttoptr %a : i64 to !llvm.ptr<3>
  llvm.store %v, %p : {t}, !llvm.ptr<3>
  {publish}
  %nr = arith.constant {nr} : index
  %c8 = arith.constant 8 : i64
  %c512 = arith.constant 512 : i64
  %a8 = arith.addi %a, %c8 : i64
  %a512 = arith.addi %a, %c512 : i64
  %p8 = llvm.inttoptr %a8 : i64 to !llvm.ptr<3>
  %p512 = llvm.inttoptr %a512 : i64 to !llvm.ptr<3>
  scf.if %r0 {{
    %own = llvm.load %p : !llvm.ptr<3> -> {t}
    %sum = scf.for %r = %c1 to %nr step %c1 iter_args(%acc = %own) -> ({t}) {{
      %ri = arith.index_cast %r : index to i32
      %q = nvvm.mapa {src}, %ri : !llvm.ptr<3> -> !llvm.ptr<7>
      %x = llvm.load %q : !llvm.ptr<7> -> {t}
      %s = arith.addf %acc, %x : {t}
      scf.yield %s : {t}
    }}
    %kx = nvvm.read.ptx.sreg.clusterid.x : i32
    %k = arith.index_cast %kx : i32 to index
    {store_out}
  }}
  {after}
  {exit}
"""


def _split_k(ranks=2, w=4, *, clusters=1, publish=CLUSTER_BARRIER, exit=CLUSTER_BARRIER, after="", src="%p", nr=None):
    t = "f32" if w == 1 else f"vector<{w}xf32>"
    mem_in = f"memref<{ranks * clusters}x32x{w}xf32, {G}>"
    mem_out = f"memref<{clusters}x32x{3 * w}xf32, {G}>"
    if w == 1:
        load_in = f"memref.load %in[%wx, %tid, %c0] : {mem_in}"
        store_out = f"memref.store %sum, %out[%k, %tid, %cw] : {mem_out}"
    else:
        load_in = f"vector.load %in[%wx, %tid, %c0] : {mem_in}, {t}"
        store_out = f"vector.store %sum, %out[%k, %tid, %cw] : {mem_out}, {t}"
    body = SPLIT_K.format(
        layout=LAYOUT,
        w_=W,
        mem_in=mem_in,
        mem_out=mem_out,
        smem=32 * w,
        w=w,
        t=t,
        load_in=load_in,
        store_out=store_out,
        publish=publish,
        nr=ranks if nr is None else nr,
        src=src,
        after=after,
        exit=exit,
    )
    k = _kernel(body, (ranks, 1, 1), grid=(ranks * clusters, 1, 1))
    x = np.random.default_rng(ranks * 10 + w).standard_normal((ranks * clusters, 32, w)).astype(np.float32)
    out = np.full((clusters, 32, 3 * w), -7.0, np.float32)
    return k, {0: x, 1: out}


@pytest.mark.parametrize("ranks,clusters", [(2, 2), (4, 1)], ids=["S2-two-clusters", "S4"])
@pytest.mark.parametrize("w", [4, 2, 1], ids=["v4", "v2", "f32"])
def test_a_split_k_reduction_through_distributed_shared_memory(ranks, clusters, w):
    """Rank 0 of each cluster sums every CTA's partial in rank order (its own through
    !llvm.ptr<3>, the peers' through nvvm.mapa and ld.shared::cluster) after a barrier.cluster;
    a second one keeps the peers alive while it reads. The sum is numpy's in the same order; the
    sentinels around it stay, and the peers write nothing."""
    k, bufs = _split_k(ranks, w, clusters=clusters)
    stats = k.run(bufs)
    x, out = bufs[0].reshape(clusters, ranks, 32, w), bufs[1]
    want = x[:, 0].copy()
    for r in range(1, ranks):
        want = want + x[:, r]
    np.testing.assert_array_equal(out[:, :, w : 2 * w], want)
    assert (out[:, :, :w] == -7.0).all() and (out[:, :, 2 * w :] == -7.0).all()
    assert not stats.races and stats.barriers == 2  # one batch: the two barrier.cluster


@pytest.mark.parametrize("publish", ["", "gpu.barrier"], ids=["nothing", "cta-barrier"])
def test_a_remote_read_needs_a_cluster_barrier_after_the_peers_store(publish):
    """No barrier.cluster between the peer's store and rank 0's read: a race; a CTA barrier (the
    rows of a batch pass it in lockstep) orders nothing across CTAs."""
    k, bufs = _split_k(publish=publish)
    with pytest.raises(
        ExecutorError,
        match=r"distributed shared memory race: thread 0 of workgroup row 0 \(cluster rank 0\) reads "
        r"element 0 of lds@16 of cluster rank 1 \(workgroup row 1\), which CTA 1 of the cluster wrote "
        r"with no barrier.cluster completed in between",
    ):
        k.run(bufs)


OVERWRITE = """%r1 = arith.cmpi ne, %rank, %i0 : i32
  {between}
  scf.if %r1 {{
    llvm.store %v, %p : vector<4xf32>, !llvm.ptr<3>
  }}"""


@pytest.mark.parametrize("between", ["", "gpu.barrier", CLUSTER_BARRIER], ids=["nothing", "cta-barrier", "cluster"])
def test_a_peer_overwriting_its_partial_after_the_read(between):
    """The peer stores over its partial after rank 0 read it: a race unless a barrier.cluster
    came after the read (a CTA barrier is not enough)."""
    k, bufs = _split_k(after=OVERWRITE.format(between=between))
    if between == CLUSTER_BARRIER:
        k.run(bufs)
        return
    with pytest.raises(
        ExecutorError,
        match=r"distributed shared memory race: thread 0 of workgroup row 1 \(cluster rank 1\) writes "
        r"element 0 of lds@16 of cluster rank 1 \(workgroup row 1\), which CTA 0 of the cluster read with "
        r"no barrier.cluster completed in between",
    ):
        k.run(bufs)


@pytest.mark.parametrize("exit", ["", "gpu.barrier"], ids=["nothing", "cta-barrier"])
def test_a_cta_must_not_exit_while_a_peer_may_read_its_shared_memory(exit):
    k, bufs = _split_k(ranks=4, exit=exit)
    with pytest.raises(
        ExecutorError,
        match=r"workgroup row 1 \(cluster rank 1\) exits while CTA 0 of its cluster may still load from "
        r"its shared memory at 16 \(.*\): no barrier.cluster after it",
    ):
        k.run(bufs)


def test_a_remote_load_outside_the_allocation():
    """Rank 0 reads the peer's partial one whole partial (512 bytes) too far: thread 0's
    vector<4xf32> at 528, past the end of the peer's allocation (16..527), is in no allocation."""
    k, bufs = _split_k(src="%p512")
    with pytest.raises(
        ExecutorError,
        match=r"thread 0 of workgroup row 0 \(cluster rank 0\) loads from shared-memory bytes 528..543 of "
        r"cluster rank 1 \(workgroup row 1\), which lie in no workgroup allocation \(out of bounds\)",
    ):
        k.run(bufs)


def test_a_misaligned_remote_vector_load():
    """A vector<4xf32> 8 bytes into a thread's slot: ld.shared::cluster.v4.f32 needs 16 bytes."""
    k, bufs = _split_k(src="%p8")
    with pytest.raises(
        ExecutorError,
        match=r"thread 0 of workgroup row 0 \(cluster rank 0\) loads from shared-memory bytes 24..39 of "
        r"cluster rank 1 \(workgroup row 1\), not 16-byte aligned",
    ):
        k.run(bufs)


def test_a_remote_load_from_a_rank_outside_the_cluster():
    """The rank loop runs one rank too far: nvvm.mapa of rank 2 in a cluster of 2 is refused."""
    k, bufs = _split_k(nr=3)
    with pytest.raises(
        ExecutorError, match="nvvm.mapa by thread 0 of workgroup row 0 names CTA rank 2 of a cluster of 2"
    ):
        k.run(bufs)


# Remote stores: each CTA stores its partial into slot [rank] of rank 0's shared memory
# (st.shared::cluster); {publish}; rank 0 sums the slots from its own shared memory.
GATHER = """
  %in = hal.interface.binding.subspan {layout} binding(0) alignment(64) offset(%c0) : memref<2x32x4xf32, {g}>
  %out = hal.interface.binding.subspan {layout} binding(1) alignment(64) offset(%c0) : memref<32x4xf32, {g}>
  %smem = memref.alloc() : memref<2x32x4xf32, {w}>
  %wx = hal.interface.workgroup.id[0] : index
  %v = vector.load %in[%wx, %tid, %c0] : memref<2x32x4xf32, {g}>, vector<4xf32>
  %base = memref.extract_aligned_pointer_as_index %smem : memref<2x32x4xf32, {w}> -> index
  %b64 = arith.index_cast %base : index to i64
  %t64 = arith.index_cast %tid : index to i64
  %r64 = arith.extui %rank : i32 to i64
  %c16 = arith.constant 16 : i64
  %c512 = arith.constant 512 : i64
  %ot = arith.muli %t64, %c16 : i64
  %or = arith.muli %r64, %c512 : i64
  %o = arith.addi %ot, %or : i64
  %a = arith.addi %b64, %o : i64
  %p = llvm.inttoptr %a : i64 to !llvm.ptr<3>
  %q = nvvm.mapa %p, %i0 : !llvm.ptr<3> -> !llvm.ptr<7>
  llvm.store %v, %q : vector<4xf32>, !llvm.ptr<7>
  {publish}
  {read}
"""
READ = """scf.if %r0 {{
    %x0 = vector.load %smem[%c0, %tid, %c0] : memref<2x32x4xf32, {w}>, vector<4xf32>
    %x1 = vector.load %smem[%c1, %tid, %c0] : memref<2x32x4xf32, {w}>, vector<4xf32>
    %s = arith.addf %x0, %x1 : vector<4xf32>
    vector.store %s, %out[%tid, %c0] : memref<32x4xf32, {g}>, vector<4xf32>
  }}""".format(w=W, g=G)


def _gather(publish=CLUSTER_BARRIER, read=READ):
    k = _kernel(GATHER.format(layout=LAYOUT, g=G, w=W, publish=publish, read=read))
    x = np.random.default_rng(3).standard_normal((2, 32, 4)).astype(np.float32)
    return k, {0: x, 1: np.zeros((32, 4), np.float32)}


def test_remote_stores_gather_the_partials_in_rank_0():
    """Rank 1's st.shared::cluster lands in rank 0's shared memory; rank 0 reads it after a
    barrier.cluster, which also lets rank 0 exit (nothing touches rank 1's shared memory)."""
    k, bufs = _gather()
    stats = k.run(bufs)
    np.testing.assert_array_equal(bufs[1], bufs[0][0] + bufs[0][1])
    assert not stats.races


def test_a_local_read_of_a_remote_store_needs_a_cluster_barrier():
    k, bufs = _gather(publish="gpu.barrier")
    with pytest.raises(
        ExecutorError,
        match=r"distributed shared memory race: thread 0 of workgroup row 0 \(cluster rank 0\) reads element "
        r"128 of lds@0 of cluster rank 0 \(workgroup row 0\), which CTA 1 of the cluster wrote with no "
        r"barrier.cluster completed in between",
    ):
        k.run(bufs)


def test_a_cta_written_into_must_not_exit_before_a_cluster_barrier():
    k, bufs = _gather(publish="", read="")
    with pytest.raises(
        ExecutorError,
        match=r"workgroup row 0 \(cluster rank 0\) exits while CTA 1 of its cluster may still store to its "
        r"shared memory at 512 \(.*\): no barrier.cluster after it",
    ):
        k.run(bufs)


OWN = """
  %smem = memref.alloc() : memref<32xf32, {w}>
  %base = memref.extract_aligned_pointer_as_index %smem : memref<32xf32, {w}> -> index
  %b64 = arith.index_cast %base : index to i64
  %c4 = arith.constant 4 : i64
  %c32 = arith.constant 32 : index
  %t64 = arith.index_cast %tid : index to i64
  %o = arith.muli %t64, %c4 : i64
  %a = arith.addi %b64, %o : i64
  %p = llvm.inttoptr %a : i64 to !llvm.ptr<3>
  %t1 = arith.addi %tid, %c1 : index
  %n = arith.remui %t1, %c32 : index
  %n64 = arith.index_cast %n : index to i64
  %on = arith.muli %n64, %c4 : i64
  %an = arith.addi %b64, %on : i64
  %pn = llvm.inttoptr %an : i64 to !llvm.ptr<3>
  %pn7 = nvvm.mapa %pn, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
  %p7 = nvvm.mapa %p, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
  %v = arith.constant 1.5 : f32
  llvm.store %v, {dst} : f32, {dst_t}
  {sync}
  %x = llvm.load {src} : {src_t} -> f32
  nvvm.cluster.arrive
  nvvm.cluster.wait
"""


@pytest.mark.parametrize("remote", [False, True], ids=["own", "peer"])
@pytest.mark.parametrize("sync", ["", "gpu.barrier"], ids=["nothing", "cta-barrier"])
def test_one_ctas_threads_are_ordered_by_a_cta_barrier(remote, sync):
    """Thread t stores element t, then loads element t + 1 (thread t + 1's): in its own CTA's
    shared memory, or all in the peer's (through mapa). The accesses are one CTA's, so a CTA
    barrier orders them (no race); without one, an LDS race in Stats.races naming the threads."""
    dst, src, t = ("%p7", "%pn7", "!llvm.ptr<7>") if remote else ("%p", "%pn", "!llvm.ptr<3>")
    k = _kernel(OWN.format(w=W, dst=dst, dst_t=t, sync=sync, src=src, src_t=t))
    stats = k.run({})
    if sync:
        assert not stats.races
        return
    who = "lane {} of cluster rank 0" if remote else "lane {}"
    assert len(stats.races) == 1
    assert stats.races[0].endswith(
        f"LDS race on lds@0 element 1: {who.format(0)} read of {who.format(1)}'s write with no barrier in between"
    )
