"""sm_90a's wgmma flash-attention kernel (``compiler/kernels/attention/hopper.py``) on the lane
executor, against a float64 numpy softmax(Q K^T * scale [+ mask]) V, with the harnesses of
``test_flash_attention.py`` (every tensor at a non-zero byte offset, sentinel bytes around each,
O written in full and nothing else) and ``test_flash_attention_mask.py``.

The executor models what the kernel relies on (``runtime/executor/wgmma.py``): the descriptors'
128B-swizzled addressing of Q, K and V (MN-major), the register-A wgmma that reads P from
registers (inline assembly) and the wgmma.fence before it, the wgmma groups and their waits, and
the proxy fence between cp.async's generic-proxy writes and wgmma reads. The mutation tests take
each away.
"""

from __future__ import annotations

import pytest
from conftest import attention_ptx_without_spills
from test_flash_attention import _attention, _handed_back, run_case
from test_flash_attention_mask import BOOL_CASES, CASES, run_masked

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.kernels.attention.hopper import HopperAttentionPlan, HopperKernel, persistent_workers
from mmaflow.compiler.kernels.attention.nvidia import FlashAttentionPlan, plan_flash_attention
from mmaflow.compiler.kernels.common.tma import ONE_BLOCK_PER_SM
from mmaflow.runtime.executor import ExecutorError

# (batch, M, K2, head dim, type, causal, warpgroups, keys per tile): whole and partial query
# blocks and key tiles, M != K2, both head dims, types, tile widths and warpgroup counts.
DEFAULT = [
    (1, 128, 128, 64, "f16", False, 2, 64),
    (2, 100, 520, 128, "bf16", False, 2, 128),
    (1, 256, 700, 64, "f16", True, 2, 64),
    (3, 70, 200, 128, "f16", True, 1, 128),
    (2, 64, 300, 64, "bf16", False, 1, 128),
]
EXHAUSTIVE = [
    (b, m, k2, d, e, c, w, n)
    for i, (b, m, k2, d, e, c, w, n) in enumerate(
        (b, m, k2, d, e, c, w, n)
        for b in (1, 3)
        for m in (16, 100, 200)
        for k2 in (64, 130, 333)
        for d in (64, 128)
        for e in ("f16", "bf16")
        for c in (False, True)
        for w in (1, 2)
        for n in (64, 128)
    )
    if i % 13 == 0
]


def _id(c):
    b, m, k2, d, e, causal, w, n = c
    return f"b{b}-m{m}-k{k2}-d{d}-{e}{'-causal' if causal else ''}-wg{w}-n{n}"


@pytest.mark.parametrize("case", DEFAULT + [pytest.param(c, marks=pytest.mark.exhaustive) for c in EXHAUSTIVE], ids=_id)
def test_wgmma_attention_on_the_executor(case):
    """The cp.async form (the producer form: ``test_producer_attention_on_the_executor``)."""
    batch, m, k2, d, elem, causal, warpgroups, block_n = case
    plan, stats, _ = run_case(
        batch, m, k2, d, elem, causal, target="sm_90a", warpgroups=warpgroups, block_n=block_n, producer=False
    )
    assert isinstance(plan, HopperAttentionPlan) and plan.workgroup_size == 128 * warpgroups
    blocks = plan.grid[0]
    # Key tiles per workgroup (causal: those at or below the block's last query).
    tiles = [
        min(plan.key_tiles, -(-(i + 1) * plan.block_m // block_n)) if causal else plan.key_tiles for i in range(blocks)
    ]
    # wgmmas per warpgroup and tile: S's K steps and P V's.
    assert stats.matrix_ops == sum(tiles) * batch * warpgroups * (d // 16 + block_n // 16)
    # Barriers, counted once per batch of lanes run together: every workgroup at once, or (causal)
    # one at a time; one per tile (P stays in registers: no P tile to publish).
    assert stats.barriers == (sum(tiles) * batch if causal else plan.key_tiles)
    # cp.async: Q once, every tile's K and V and one zero-filled prefetch after the last, per workgroup.
    workgroups = blocks * batch
    kv = (sum(tiles) * batch + workgroups) * 2 * block_n * d * 2
    assert stats.async_copy_bytes == workgroups * plan.block_m * d * 2 + kv
    assert stats.lds_conflict_cycles == 0, dict(stats.lds_conflicts_by_op)


# (batch, M, K2, head dim, type, causal, warpgroups, keys per tile, slots, persistent): the producer form,
# one workgroup a block (False) or a persistent grid (True: one an SM, so here one a block; an int: that
# many workgroups, each looping over several blocks).
PRODUCER = [
    (1, 128, 200, 128, "f16", False, 2, 128, 2, True),
    (3, 200, 130, 128, "bf16", True, 2, 128, 3, 2),
    (3, 70, 333, 64, "f16", False, 1, 64, 4, False),
    (4, 64, 333, 64, "bf16", False, 1, 64, 2, 3),
    (2, 130, 200, 64, "f16", True, 1, 64, 2, 2),  # causal, three rounds: the odd one runs backwards
]
PRODUCER_EXHAUSTIVE = [
    (1, 256, 700, 64, "bf16", True, 2, 64, 2, False),
    (2, 16, 130, 128, "f16", True, 1, 128, 2, True),
    (1, 200, 64, 128, "bf16", False, 2, 64, 5, 1),
    (2, 100, 520, 128, "f16", False, 2, 128, 2, False),
]


@pytest.mark.parametrize(
    "case",
    PRODUCER + [pytest.param(c, marks=pytest.mark.exhaustive) for c in PRODUCER_EXHAUSTIVE],
    ids=lambda c: _id(c[:8]) + f"-s{c[8]}-p{c[9]}",
)
def test_producer_attention_on_the_executor(case):
    """A producer warpgroup copies Q, K and V by TMA into an S-slot ring; the computing warpgroups
    meet it at mbarriers only (no barrier after the setup's two); a persistent grid's workgroups
    loop over blocks, the ring's count and Q's tile running on across them."""
    batch, m, k2, d, elem, causal, warpgroups, block_n, stages, persistent = case
    plan, stats, _ = run_case(
        batch,
        m,
        k2,
        d,
        elem,
        causal,
        target="sm_90a",
        warpgroups=warpgroups,
        block_n=block_n,
        producer=True,
        stages=stages,
        persistent=persistent,
    )
    assert isinstance(plan, HopperAttentionPlan) and plan.producer and plan.stages == stages
    assert plan.workgroup_size == 128 * (warpgroups + 1) and plan.lds_bytes >= ONE_BLOCK_PER_SM
    blocks = -(-m // plan.block_m)
    workers = (
        0 if persistent is False else persistent_workers(blocks * batch, 132 if persistent is True else persistent)
    )
    assert persistent is False or workers > 0
    assert plan.workers == workers and plan.grid == ((workers, 1, 1) if workers else (blocks, batch, 1))
    tiles = [
        min(plan.key_tiles, -(-(i + 1) * plan.block_m // block_n)) if causal else plan.key_tiles for i in range(blocks)
    ]
    assert stats.matrix_ops == sum(tiles) * batch * warpgroups * (d // 16 + block_n // 16)
    # Batches of lanes run together: all workgroups, or one at a time (causal, persistent); each meets
    # the setup's two barriers (the maps built, then published).
    runs = (workers or blocks * batch) if causal or workers else 1
    assert stats.barriers == 2 * runs
    # Two warpgroups ping-pong: per workgroup warpgroup 0's first turn, then per block and warpgroup a wait
    # and a hand-over around the loop and one of each per key tile, 128 threads each.
    assert plan.pingpong == (warpgroups == 2)
    if plan.pingpong:
        assert stats.named_arrivals == 128 * (
            (workers or blocks * batch) + 2 * 2 * (blocks * batch + sum(tiles) * batch)
        )
    else:
        assert stats.named_arrivals == 0
    # The boxes' bytes (zero fill included): Q once per block, K and V per tile; no prefetch past the loop.
    assert stats.async_copy_bytes == blocks * batch * plan.tx_bytes["Q"] + sum(tiles) * batch * plan.tx_bytes["KV"]


def test_persistent_workers_divide_the_blocks():
    """A persistent grid's workgroup count divides the blocks (a uniform loop) in as few rounds as
    one workgroup an SM would take; none does: a workgroup a block, said in the plan."""
    assert persistent_workers(2048, 132) == 128 and persistent_workers(1024, 132) == 128
    assert persistent_workers(100, 132) == 100 and persistent_workers(200, 132) == 100
    assert persistent_workers(201, 132) == 0  # 3 x 67: 67 workgroups would take 3 rounds, not 2
    plan = plan_flash_attention(_attention(67, 384, 256, 128, "f16"), target="sm_90a")
    assert plan.producer and plan.items == 201 and plan.workers == 0 and "a workgroup a block" in plan.describe()
    with pytest.raises(UnsupportedError, match="divides the 201 blocks"):
        plan_flash_attention(_attention(67, 384, 256, 128, "f16"), target="sm_90a", persistent=True)
    with pytest.raises(UnsupportedError, match="at least one workgroup"):
        plan_flash_attention(_attention(1, 64, 64, 128, "f16"), target="sm_90a", persistent=-1)


def test_the_producer_by_head_dim():
    """By default a producer at head dim 128 (measured faster on the H200) and not at 64; asked
    for where a tensor map cannot address the tensors, refused by name."""
    wide = plan_flash_attention(_attention(32, 4096, 4096, 128, "f16"), target="sm_90a")
    assert wide.producer and wide.stages == 2 and wide.workgroup_size == 384 and wide.lds_bytes <= 227 * 1024
    assert wide.grid == (128, 1, 1) and wide.items == 1024  # persistent: 8 blocks each
    assert "TMA rings of K and V filled by a producer warpgroup" in wide.describe()
    with pytest.raises(UnsupportedError, match="producer form only"):
        plan_flash_attention(_attention(1, 64, 64, 64, "f16"), target="sm_90a", persistent=True)
    narrow = plan_flash_attention(_attention(32, 4096, 4096, 64, "f16"), target="sm_90a")
    assert not narrow.producer and narrow.workgroup_size == 256
    with pytest.raises(UnsupportedError, match="two-slot cp.async ring"):
        plan_flash_attention(_attention(1, 64, 64, 128, "f16"), target="sm_90a", producer=False, stages=3)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("rows", [64, 128])
def test_producer_boxes_are_the_layouts_atoms(d, rows):
    """Box j of a tile (64 head-dim columns x ``rows``, the 128B swizzle's image: row r at byte
    r * 128, 16-byte chunk c at c ^ (r % 8)) lands at j * rows * 128, where ``SmemLayout`` puts the
    elements: Q and K K-major (M/N atoms fastest), V MN-major laid K-atoms fastest."""
    plan = plan_flash_attention(_attention(1, rows, rows, d, "f16"), target="sm_90a", producer=True, block_n=rows)
    for j in range(d // 64):
        for r in range(rows):
            for c in range(0, 64, 8):
                image = j * rows * 128 + r * 128 + ((c * 2 // 16) ^ (r % 8)) * 16
                assert plan.k_layout.offset(r, 64 * j + c) == image
                assert plan.v_layout.offset(64 * j + c, r) == image


@pytest.mark.parametrize(
    "bdims,order",
    [((2, 3), (0, 2, 1, 3)), ((2, 3), (2, 0, 1, 3)), ((3, 2), (1, 0, 2, 3)), ((2, 2, 3), (1, 3, 0, 2, 4))],
    ids=["b-s-h-d", "s-b-h-d", "h-b-s-d", "h-s-b-g-d"],
)
def test_producer_reads_any_storage_order(bdims, order):
    """Q, K and V stored in permuted orders (PyTorch SDPA's (batch, seq, heads, head dim) among
    them), K and V in one binding at offsets, sentinels around every tensor: the producer's tensor
    maps (head dim, rows, batch dims) read them right, and nothing but O is written."""
    import numpy as np
    from test_flash_attention import _DT, place
    from test_flash_attention_mask import _attention as _battention

    from mmaflow.compiler.core.mlir import new_context
    from mmaflow.compiler.kernels.attention.nvidia import Placement, standalone_module
    from mmaflow.runtime.attention_reference import attention_bound, attention_reference
    from mmaflow.runtime.executor import Kernel

    m, k2, d, dt = 64, 130, 128, _DT["f16"]
    rng = np.random.default_rng(1)
    b, nb = int(np.prod(bdims)), len(bdims)
    q = (0.8 * rng.standard_normal((b, m, d))).astype(dt)
    k, v = (rng.standard_normal((b, k2, d)).astype(dt) for _ in range(2))

    def stored(x, rows):
        return np.ascontiguousarray(np.transpose(x.reshape(tuple(bdims) + (rows, d)), order))

    o = np.zeros((b, m, d), dt)
    ks = stored(k, k2)
    layout = {
        "q": Placement(0, 64, order),
        "k": Placement(1, 128, order),
        "v": Placement(1, 128 + ks.nbytes + 192, order),
        "o": Placement(2, 256, tuple(range(nb + 2))),
    }
    bufs, _ = place(
        {"q": stored(q, m), "k": ks, "v": stored(v, k2), "o": o},
        {n: Placement(pl.binding, pl.offset) for n, pl in layout.items()},
    )
    before = {i: buf.copy() for i, buf in bufs.items()}
    plan = plan_flash_attention(_battention(bdims, m, k2, d, "f16"), target="sm_90a", producer=True)
    assert plan.producer
    _, fn = standalone_module(plan, q=layout["q"], k=layout["k"], v=layout["v"], o=layout["o"], ctx=new_context())
    kernel = Kernel(fn, arch="sm_90a", grid=plan.grid, workgroup_size=plan.workgroup_size, wave_size=plan.wave_size)
    stats = kernel.run(bufs, max_lanes=plan.workgroup_size)  # (a persistent grid: one workgroup at a time)
    assert not stats.races
    out = bufs[2][256 : 256 + o.nbytes].view(dt).reshape(o.shape).astype(np.float64)
    ref = attention_reference(q, k, v, plan.scale, False)
    assert (np.abs(out - ref) <= attention_bound(ref, v, "f16")).all(), np.abs(out - ref).max()
    for i in (0, 1):
        assert (bufs[i] == before[i]).all()
    outside = np.ones(bufs[2].size, bool)
    outside[256 : 256 + o.nbytes] = False
    assert (bufs[2][outside] == before[2][outside]).all()


def test_register_a_asm_without_side_effects_is_refused(monkeypatch):
    """An llvm.inline_asm wgmma without has_side_effects may be moved past its commit and wait by
    LLVM: the executor refuses it by name."""
    from mmaflow.compiler.kernels.attention import hopper

    real = hopper.llvm.InlineAsmOp
    monkeypatch.setattr(hopper.llvm, "InlineAsmOp", lambda *a, **kw: real(*a, **{**kw, "has_side_effects": None}))
    with pytest.raises(ExecutorError, match="lacks has_side_effects"):
        run_case(1, 64, 100, 64, "f16", False, target="sm_90a")


def test_two_warpgroups_without_pingpong_on_the_executor():
    """The producer form's two warpgroups without their ping-pong: right, no named barrier."""
    plan, stats, _ = run_case(
        2, 200, 300, 128, "bf16", True, target="sm_90a", producer=True, warpgroups=2, persistent=1, pingpong=False
    )
    assert not plan.pingpong and stats.named_arrivals == 0
    with pytest.raises(UnsupportedError, match="pingpong: two computing warpgroups take turns in the producer form"):
        plan_flash_attention(
            _attention(1, 64, 64, 128, "f16"), target="sm_90a", producer=True, warpgroups=1, pingpong=True
        )


@pytest.mark.parametrize("left_out", ["first", "handover", "last"])
def test_pingpong_mutations_are_caught(monkeypatch, left_out):
    """The ping-pong's turns left out: warpgroup 0 never given the first turn, a warpgroup never handing the
    turn over after its S, or after a block's last P V (the next block's first wait never passes): each
    deadlocks on the executor, which runs each warpgroup of the split as its own task."""
    monkeypatch.setattr(HopperKernel, "_turns_left_out", frozenset({left_out}))
    with pytest.raises(ExecutorError, match="wait at barrier [12] for 256 threads, 128 arrived.*the kernel deadlocks"):
        run_case(2, 128, 300, 128, "f16", False, target="sm_90a", producer=True, warpgroups=2, persistent=1)


def test_q_released_before_its_last_s_completes_is_caught(monkeypatch):
    """Q's tile is released for the next block after the block's last S is waited for; released between
    that S's issue and its wait, the producer's copy of the next block's Q writes bytes the S reads with
    nothing ordering the read's completion before it."""
    monkeypatch.setattr(HopperKernel, "_release_q_unwaited", True)
    with pytest.raises(ExecutorError, match="bulk tensor copy .*into shared-memory byte .*wgmma.mma_async"):
        run_case(2, 128, 300, 128, "f16", False, target="sm_90a", producer=True, warpgroups=2, persistent=1)


def test_pingpong_without_waits_is_right_but_unordered(monkeypatch):
    """The turns' waits left out: the warpgroups only arrive, nothing waits, the numbers stay right (the
    ping-pong orders when the tensor cores are used, not what they compute)."""
    monkeypatch.setattr(HopperKernel, "_turns_left_out", frozenset({"wait"}))
    plan, stats, _ = run_case(1, 128, 300, 128, "f16", False, target="sm_90a", producer=True, warpgroups=2)
    assert plan.pingpong and stats.named_arrivals > 0


@pytest.mark.parametrize(
    "hook,match",
    [
        ("_skip_empty_wait", "more arrivals on the mbarrier"),
        ("_skip_release", "deadlock"),
        ("_flip_parity", "while an async copy to it is in flight"),
    ],
)
@pytest.mark.parametrize("items", [1, 4], ids=["one-block", "four-blocks-one-workgroup"])
def test_producer_ring_mutations_are_caught(monkeypatch, hook, match, items):
    """The producer refilling a slot (or Q's tile) without waiting for its release (it re-arms the
    "full" mbarrier within a phase), the computing warpgroups never releasing (the producer waits
    forever), or waiting on the other phase parity (S reads K's bytes before they land): each fails
    on the executor, in a workgroup of one block and in one looping over four (Q refilled)."""
    from mmaflow.compiler.kernels.attention.hopper import _AttentionRing

    monkeypatch.setattr(_AttentionRing, hook, True)
    batch, m = (1, 128) if items == 1 else (2, 128)
    with pytest.raises(ExecutorError, match=match):
        run_case(
            batch,
            m,
            600,
            128,
            "f16",
            False,
            target="sm_90a",
            producer=True,
            stages=2,
            block_n=64,
            warpgroups=2 if items == 1 else 1,
            persistent=1,
        )


@pytest.mark.parametrize("case", CASES[:4] + [pytest.param(c, marks=pytest.mark.exhaustive) for c in CASES[4:]])
def test_masked_wgmma_attention_on_the_executor(case):
    """The additive masks of the mma.sync kernel's tests, read at the wgmma accumulator's elements."""
    bdims, m, k2, d, elem, kind, order = case
    plan = run_masked(bdims, m, k2, d, elem, kind, order, target="sm_90a")
    assert isinstance(plan, HopperAttentionPlan) and plan.mask == elem


@pytest.mark.parametrize(
    "case", BOOL_CASES[2:5] + [pytest.param(c, marks=pytest.mark.exhaustive) for c in BOOL_CASES[:2] + BOOL_CASES[5:]]
)
def test_bool_masked_wgmma_attention_on_the_executor(case):
    *args, causal = case
    plan = run_masked(*args, target="sm_90a", causal=causal, warpgroups=1)
    assert isinstance(plan, HopperAttentionPlan) and plan.mask == "i1"


def test_the_plan_by_shape():
    """Keys per tile by head dim (64 / 128); two warpgroups when 128-query blocks still fill the
    SMs, else one (GPT-2's SDPA: 24 x 256 queries); the mma.sync kernel on request."""
    big = plan_flash_attention(_attention(32, 2048, 2048, 64, "f16"), target="sm_90a")
    assert (big.block_n, big.warpgroups, big.grid) == (64, 2, (16, 32, 1))
    gpt2 = plan_flash_attention(_attention(24, 256, 256, 64, "bf16"), target="sm_90a")
    assert (gpt2.block_n, gpt2.warpgroups, gpt2.grid) == (64, 1, (4, 24, 1))
    wide = plan_flash_attention(_attention(32, 4096, 4096, 128, "bf16"), target="sm_90a")
    assert (wide.block_n, wide.warpgroups) == (128, 2) and wide.lds_bytes <= 227 * 1024
    assert wide.intrinsic.name == "WGMMA_F32_64x128x16_BF16" and wide.pv_intrinsic.n == 128
    old = plan_flash_attention(_attention(32, 2048, 2048, 64, "f16"), target="sm_90a", kernel="mma.sync")
    assert isinstance(old, FlashAttentionPlan) and "(wgmma)" not in old.describe()
    assert isinstance(plan_flash_attention(_attention(1, 64, 64, 64, "f16"), target="sm_80"), FlashAttentionPlan)


@pytest.mark.parametrize(
    "options,target,why",
    [
        ({"kernel": "wgmma"}, "sm_80", "wgmma on sm_90a only"),
        ({"kernel": "tensor-core"}, "sm_90a", "NVIDIA's attention kernels are"),
        ({"stages": 1}, "sm_90a", "two-slot cp.async ring"),
        ({"block_n": 32}, "sm_90a", r"tiles of \(64, 128\) keys"),
        ({"warpgroups": 3}, "sm_90a", "one or two warpgroups"),
        ({"block_n": 64}, "sm_80", "only the wgmma attention kernel"),
    ],
)
def test_bad_options_are_refused_by_name(options, target, why):
    with pytest.raises(UnsupportedError, match=why):
        plan_flash_attention(_attention(1, 64, 64, 64, "f16"), target=target, **options)


def test_mma_sync_kernel_on_sm90a_still_right():
    plan, _, _ = run_case(2, 100, 200, 64, "f16", True, target="sm_90a", kernel="mma.sync")
    assert isinstance(plan, FlashAttentionPlan)


# ---- mutations: the executor must fail each --------------------------------------------------


def test_missing_proxy_fence_is_caught(monkeypatch):
    monkeypatch.setattr(HopperKernel, "_proxy_fence", lambda self, em: None)
    with pytest.raises(ExecutorError, match="fence.proxy"):
        run_case(1, 128, 200, 64, "f16", False, target="sm_90a")


def test_missing_wgmma_fence_before_register_p_is_caught(monkeypatch):
    """P's registers (and O's, scaled by alpha) are written by ordinary instructions right before
    the register-A wgmma: without a wgmma.fence between, the executor refuses the kernel."""
    monkeypatch.setattr(HopperKernel, "_p_fence", False)
    with pytest.raises(ExecutorError, match="wgmma.fence"):
        run_case(1, 128, 200, 64, "f16", False, target="sm_90a")


def test_register_a_result_read_before_its_wait_is_caught(monkeypatch):
    """P V's wait leaving its own group running: O's fields are read while the inline-assembly
    wgmma may still write them."""
    monkeypatch.setattr(HopperKernel, "_pv_pending", 1)
    with pytest.raises(ExecutorError, match="before wgmma.wait_group"):
        run_case(1, 64, 100, 64, "f16", False, target="sm_90a")


@pytest.mark.parametrize(
    "edit,why",
    [
        (lambda code: code.replace("setp.ne.b32", "setp.eq.b32"), "not '{ .reg .pred p"),
        (lambda code: code.replace("p, 1, 1, 1;", "p, 1, 1, 0;", 1), None),
        (lambda code: code.replace(".f32.f16.f16", ".f32.f16.bf16", 1), "A and B types differ"),
        (lambda code: code.replace("{$0, ", "{$1, ", 1), "the accumulator must be"),
    ],
    ids=["predicate", "trans-b", "types", "accumulator"],
)
def test_unmodelled_inline_assembly_is_refused(monkeypatch, edit, why):
    """The executor models the one register-A form the kernel writes; other assembly is refused by
    name, and a changed transpose bit (V read as K-major) gives wrong numbers."""
    monkeypatch.setattr(HopperKernel, "_pv_asm_edit", staticmethod(edit))
    if why is None:
        with pytest.raises(AssertionError, match="max error"):
            run_case(1, 64, 100, 64, "f16", False, target="sm_90a")
        return
    with pytest.raises(
        ExecutorError, match="llvm.inline_asm is modelled only as lop3.b32 or a register-A wgmma chain: .*" + why
    ):
        run_case(1, 64, 100, 64, "f16", False, target="sm_90a")


@pytest.mark.parametrize("d", [64, 128])
def test_misplaced_p_registers_give_wrong_numbers(monkeypatch, d):
    """Each K step of P V fed the next step's probabilities: the check against numpy fails."""
    monkeypatch.setattr(HopperKernel, "_p_rotate", 1)
    with pytest.raises(AssertionError, match="max error"):
        run_case(1, 128, 200, d, "bf16", False, target="sm_90a", block_n=64)


def test_p_registers_are_in_lane():
    """P V's register-A fragments are S's own accumulator elements, lane by lane (the layouts
    decide). An fp8 A (four bytes of a row per register) is not: refused by name."""
    from mmaflow.compiler.kernels.attention.hopper import p_in_lane
    from mmaflow.compiler.target.targets import get_target

    tgt = get_target("sm_90a")
    for t in ("F16", "BF16"):
        for n in (64, 128):
            steps = p_in_lane(tgt.intrinsic(f"WGMMA_F32_64x{n}x16_{t}"), tgt.intrinsic(f"WGMMA_F32_64x64x16_{t}"))
            # S's fields run 8 per 16 keys (two 8-column groups of 4), in A's register order.
            assert steps == tuple(tuple(range(8 * s, 8 * s + 8)) for s in range(n // 16))
    with pytest.raises(UnsupportedError, match="not in-lane"):
        p_in_lane(tgt.intrinsic("WGMMA_F32_64x64x16_F16"), tgt.intrinsic("WGMMA_F32_64x64x32_F8E4M3FN"))


def test_copy_into_the_slot_being_read_is_caught(monkeypatch):
    """The next tile's K and V copied into this tile's slots: the copies land in bytes this tile's
    wgmmas read."""
    monkeypatch.setattr(HopperKernel, "_slot_skew", 1)
    with pytest.raises(ExecutorError, match="while an async copy to it is in flight"):
        run_case(1, 128, 400, 64, "f16", False, target="sm_90a")


# ---- the lowered kernel --------------------------------------------------------------------------


@pytest.mark.parametrize("d,elem,causal", [(64, "bf16", True)])
def test_ptxas_wgmma_kernel(tmp_path, d, elem, causal):
    """Through IREE and ptxas: wgmma.mma_async, no mma.sync, no spills; a bf16 P converted by
    cvt.rn.bf16x2.f32 (not IREE's integer rounding of arith.truncf)."""
    from mmaflow.compiler.report import ptxas_path

    assert ptxas_path() is not None
    module, plan = _handed_back(tmp_path, 1, 128, 200, d, elem, causal, "sm_90a")
    text = attention_ptx_without_spills(
        tmp_path, str(module), "sm_90a", plan.workgroup_size, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"
    )
    assert "mma.sync" not in text and "cvt.rn.bf16x2.f32" in text and "setp.nan" not in text
