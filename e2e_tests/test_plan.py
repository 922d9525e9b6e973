"""The kernel plan (`compiler/kernels/common/plan.py`), on its own and against the IR the rewrite emits.

The plan is built from the script stage's IR (``distribute.match``), so these tests run the
pipeline to `script`, plan, and check the decisions a reviewer would ask about; the pure parts
(copy shapes, fragment reads) are checked against independent recomputation.
"""

from __future__ import annotations

import dataclasses

import pytest
from conftest import handed_back

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.kernels.common import contraction as distribute
from mmaflow.compiler.kernels.common.fragments import FragmentPlan
from mmaflow.compiler.kernels.common.lds_copy import CopyShape
from mmaflow.compiler.kernels.common.plan import plan_kernel
from mmaflow.compiler.pipeline.pipeline import CodegenOptions
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.layout import COL, ROW
from mmaflow.compiler.target.targets import get_target, read_target
from mmaflow.runtime.modules import dynamic_module, matmul_module


def plan_of(source: str, target: str, overrides: dict | None = None):
    """(plan, expectations the full pipeline recorded) for the module's one matmul."""
    res = codegen_module(source, target, options=CodegenOptions(dump_after="script", overrides=overrides or {}))
    (exe,) = res.taken
    module = parse_module(exe.run.dumps["script"], new_context())
    func = attrs.dispatch_func(module.operation)
    tgt, cfg, problem = read_target(func), attrs.read_config(func), attrs.read_problem(func)
    with module.context:
        m = distribute.match(func, tgt.intrinsic(cfg.intrinsic), cfg, tgt.vendor)
        mem = distribute._memref_extents(m, problem, cfg)
        a, b = distribute.operand_facts(m, mem)
        c_ext = mem[distribute._transfer_parts(m.out_write)[0]][1]
        plan = plan_kernel(problem, cfg, tgt, a, b, c_ext)
    handed = parse_module(handed_back(source, target, tuple(sorted((overrides or {}).items()))), new_context())
    return plan, attrs.read_expect(attrs.dispatch_func(handed.operation))


def test_plan_gfx942_interleaves_k_and_matches_the_ir():
    plan, expect = plan_of(matmul_module(256, 256, 256), "gfx942")
    assert plan.expectations() == expect  # what verify checks in the ISA comes from the plan
    assert plan.loop.k_interleaved and plan.loop.k_tiles == 8 and plan.loop.instructions == (4, 4, 2)
    assert (plan.a.copy.transposed, plan.b.copy.transposed) == (False, True)
    assert plan.a.copy.v * 16 == 128 and plan.a.fragments.kind == "runs"
    # Interleaved K steps: every LDS fragment read of a K tile is 128 bits wide.
    a_reads = plan.a.fragments.reads([(i, k) for i in range(4) for k in range(2)])
    assert {r.length * 16 for r in a_reads} == {128}
    assert plan.a.bounded == (False, False) and plan.epilogue.bounded == (False, False)
    assert plan.notes == ()


def test_plan_sm80_uses_ldmatrix_and_no_row_order():
    plan, expect = plan_of(matmul_module(256, 256, 256), "sm_80")
    assert plan.expectations() == expect
    assert plan.a.fragments.kind == "ldmatrix" and len(plan.a.fragments.blocks) == 4
    # B (K x N) keeps K outermost in its ring slot; ldmatrix .trans gives the same registers
    assert plan.b.fragments.kind == "ldmatrix.trans" and len(plan.b.fragments.blocks) == 2
    assert (plan.a.k_outer, plan.b.k_outer) == (False, True)
    # 256^3 is fewer 128x128 tiles than SMs: 64x128 tiles
    assert plan.a.lds_shape == (64, 40) and plan.b.lds_shape == (32, 136)
    assert plan.loop.stages == 4 and plan.loop.prefetch == 3 and expect.async_copies  # 4 x 13824 B <= RING_BYTES
    assert plan.a.copy.asynchronous and not plan.b.copy.transposed and plan.b.copy.registers() == 0
    assert not plan.loop.k_interleaved and not plan.loop.guard_empty_k
    # async copies into 80-byte rows: rows 4 apart per phase keep the stores off each other's banks
    assert (plan.a.copy.row_group, plan.a.copy.row_step) == (2, 4)


def test_plan_sm80_one_stage_transposes_b_in_registers():
    plan, expect = plan_of(matmul_module(256, 256, 256), "sm_80", {"stages": 1})
    assert plan.expectations() == expect and not expect.async_copies
    assert plan.b.fragments.kind == "ldmatrix" and not plan.b.k_outer and plan.b.copy.transposed
    assert plan.b.lds_shape == (128, 40) and plan.loop.stages == 1 and plan.loop.prefetch == 1
    assert plan.a.copy.row_step == 1  # register-staged copies keep the plain store order on NVIDIA


@pytest.mark.parametrize("stages", [2, 3])
def test_plan_amd_ring_keeps_one_stage_copies_in_two_slots(stages):
    """AMD's ring: the copies of one stage (B transposed in registers, K-innermost tiles), the
    S - 1 tiles in flight in registers (the K loop unrolled by S - 1 from 3 stages), two LDS
    slots whatever S (config.ring_slots), one barrier per K tile in the ISA."""
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.common.tiles import lds_bytes

    plan, expect = plan_of(matmul_module(256, 256, 256), "gfx942", {"stages": stages})
    assert plan.expectations() == expect and not expect.async_copies and expect.k_loop_barriers == 1
    assert (plan.loop.stages, plan.loop.slots, plan.loop.prefetch) == (stages, 2, stages - 1)
    assert plan.loop.unroll == (2 if stages == 3 else 1)  # a carried tile keeps its registers
    assert not plan.loop.asynchronous and plan.loop.fragment_groups == ((0, 1),)  # K steps interleaved
    assert plan.b.copy.transposed and not plan.b.k_outer and plan.b.lds_shape == (128, 40)
    # The module must outlive its func: a nested op does not keep the module alive in MLIR's bindings.
    module = parse_module(handed_back(matmul_module(256, 256, 256), "gfx942", (("stages", stages),)), new_context())
    cfg = attrs.read_config(attrs.dispatch_func(module.operation))
    assert (
        lds_bytes(cfg, Contraction(256, 256, 256, 1, "f16", "f16", "f32"), get_target("gfx942")) == 2 * 2 * 128 * 40 * 2
    )
    one, _ = plan_of(matmul_module(256, 256, 256), "gfx942")
    assert one.expectations().k_loop_barriers == 2 and one.loop.slots == 1


def test_plan_unaligned_bounds_and_narrow_copies():
    plan, expect = plan_of(matmul_module(17, 33, 65), "gfx1100")
    assert plan.expectations() == expect
    assert plan.a.bounded == (True, True) and plan.b.bounded == (True, True)
    # 65-element rows of A, 33-element rows of B: only 16-bit chunks divide them.
    assert plan.a.copy.v == 1 and plan.b.copy.v == 1
    assert any("65 elements long" in n for n in plan.notes) and any("33 elements long" in n for n in plan.notes)
    assert plan.epilogue.bounded == (True, True)
    assert all(r.length == 1 for r in plan.epilogue.runs)


def test_plan_dynamic_k_on_nvidia_guards_empty_k():
    plan, expect = plan_of(dynamic_module(m=256, n=256, divisors={"k": 32}), "sm_80")
    assert plan.loop.k_tiles is None and expect.k_tiles == 0
    assert plan.loop.guard_empty_k
    plan, _ = plan_of(dynamic_module(m=256, n=256, divisors={"k": 32}), "gfx942")
    assert not plan.loop.guard_empty_k  # AMD's raw buffer loads read 0 from an empty buffer


def test_plan_describe_names_every_part():
    plan, _ = plan_of(matmul_module(256, 256, 256), "gfx1100")
    text = "\n".join(plan.describe())
    for part in (
        "WMMA_F32_16x16x16_F16 wave32",
        "A: layout",
        "B: LDS f16[128][40]",
        "A: fragments per K tile",
        "loop: 4x2 instructions x 2 K steps = 16 per K tile",
        "epilogue:",
    ):
        assert part in text, part


def test_plan_is_frozen():
    plan, _ = plan_of(matmul_module(128, 128, 64), "gfx1201")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.loop = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.a.copy.v = 4


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_copy_store_order_is_bank_conflict_free(target):
    """Recompute the LDS dword banks one phase of direct-copy stores touches (the lanes of one
    phase: banks * 4 / chunk bytes consecutive threads) from the row order's formula."""
    banks = get_target(target).lds_banks
    for rows, cols, pad in ((128, 32, 8), (64, 64, 8), (128, 16, 8)):
        shape = CopyShape.plan("A", rows, cols, 16, False, 256, row_length=cols, lds_row=cols + pad, banks=banks)
        lanes = banks * 4 // (shape.v * 2)
        stride = (cols + pad) * 2 // 4  # dwords per LDS row
        g, d = shape.row_group, shape.row_step

        def row_of(q):
            if d == 1:
                return q
            h, p = q % g, q // g
            return p % d + d * h + (p // d) * d * g

        assert sorted(row_of(q) for q in range(rows)) == list(range(rows))  # a permutation of the rows
        for phase in range(0, shape.total, lanes):
            used = []
            for t in range(phase, min(phase + lanes, shape.total)):
                row, chunk = row_of(t // shape.per_row), t % shape.per_row
                first = row * stride + chunk * shape.v * 2 // 4
                used += [(first + w) % banks for w in range(shape.v * 2 // 4)]
            conflicts = len(used) - len(set(used))
            if d > 1:
                assert conflicts == 0, (rows, cols, phase)
        if (rows, cols) == (128, 32):
            assert d > 1  # the case the row order exists for (80-byte padded rows)


@pytest.mark.parametrize(
    "target,wave,swizzle",
    [
        ("gfx942", 64, (0, 4)),
        ("gfx950", 64, (0, 0, 4, 4)),
        ("gfx1100", 32, ()),
        ("gfx1100", 64, (0, 0, 4, 4)),
        ("gfx1201", 32, ()),
    ],
)
def test_transposing_copy_swizzle_is_bank_conflict_free(target, wave, swizzle):
    """B (32 x 128, f16) transposed into [128][40]: store x of the lane holding K block b of column
    chunk c writes dword (col + (x ^ s[c])) * 20 + b. Recomputed here: every phase of every store
    (banks * 4 / 4 lanes, at most a wave) hits distinct banks; without the swizzle it would not."""
    banks = get_target(target).lds_banks
    shape = CopyShape.plan("B", 32, 128, 16, True, 256, row_length=128, lds_row=40, banks=banks, wave=wave)
    assert shape.swizzle == swizzle
    lanes = min(banks, wave)
    blocks = shape.rows // shape.kb

    def conflicts(s):
        worst = 0
        for phase in range(0, shape.total, lanes):
            for x in range(shape.v):
                used = []
                for item in range(phase, phase + lanes):
                    c, b = divmod(item, blocks)
                    used.append(((c * shape.v + (x ^ (s[c % len(s)] if s else 0))) * 20 + b) % banks)
                worst = max(worst, len(used) - len(set(used)))
        return worst

    assert conflicts(shape.swizzle) == 0
    assert (conflicts(()) > 0) == bool(swizzle)


def test_transposing_copy_keeps_every_thread_busy():
    s = CopyShape.plan("B", 32, 128, 16, True, 256)
    assert (s.v, s.per_row, s.kb, s.total, s.rounds, s.registers()) == (8, 16, 2, 256, 1, 2)
    s = CopyShape.plan("B", 32, 64, 16, True, 256)
    assert s.kb == 1 and s.total == 256  # kb = 2 would leave half the threads idle


@pytest.mark.parametrize("target", ["gfx1100", "gfx1201", "gfx942", "sm_80"])
def test_fragment_reads_cover_every_element_once(target):
    tgt = get_target(target)
    for intr in tgt.intrinsics():
        la, lb, _ = intr.codegen_layouts()
        bits = TYPE_BITS[intr.a_type]
        for layout, k_axis, shape in ((la.compose(2, 2), COL, intr.a_shape), (lb.compose(2, 2), ROW, intr.b_shape)):
            plan = FragmentPlan.plan(layout, k_axis, bits, shape, allow_ldmatrix=False)
            batches = [(0, 0), (0, 1)] if k_axis == COL else [(0, 0), (1, 0)]
            seen = []
            for read in plan.reads(batches):
                assert read.length == sum(run.length for _, run in read.parts)
                assert len(read.parts) == 1 or read.length * bits <= 128
                seen += [(b, e) for b, run in read.parts for e in range(run.first, run.first + run.length)]
            assert sorted(seen) == [(b, e) for b in range(2) for e in range(layout.elements)], intr.name


def test_nvidia_tiles_follow_the_number_of_sms():
    """H100-measured (docs/PERFORMANCE.md): 64x128 tiles when 128x128 ones would leave SMs idle
    (1024^3: 64 tiles for 132 SMs), 128x128 from there, 128x256 (with the LDS ring; 256x128
    without) once there are two 256x128 tiles per SM; a 4000-row M keeps 128 (64 would fit it
    only as 32-row tiles)."""
    from mmaflow.compiler.core.problem import Contraction
    from mmaflow.compiler.kernels.matmul.heuristic import default_config
    from mmaflow.compiler.target.targets import get_target

    t = get_target("sm_90a")

    def tiles(m, n, k, batch=1):
        cfg = default_config(t, Contraction(m, n, k, batch, "f16", "f16", "f32"), 32)
        return cfg.tile_m, cfg.tile_n, cfg.wave_tile_m, cfg.wave_tile_n

    assert tiles(1024, 1024, 1024) == (64, 128, 32, 32)
    assert tiles(1024, 1024, 1024, batch=4) == (128, 128, 64, 32)  # 256 tiles: enough
    assert tiles(2048, 2048, 2048) == (128, 128, 64, 32)
    assert tiles(4096, 4096, 4096) == (128, 256, 64, 64)  # with the LDS ring; 256x128 without one
    assert tiles(4000, 512, 512)[0] == 128
    # the full 128x256x64 ring tile where 128x160x32 would divide 4000 (1.22x, docs/PERFORMANCE.md)
    c4000 = default_config(t, Contraction(4000, 4000, 4000, 1, "f16", "f16", "f32"), 32)
    assert (c4000.tile_m, c4000.tile_n, c4000.tile_k, c4000.stages) == (128, 256, 64, 3)
    cfg = default_config(t, Contraction(4096, 4096, 4096, 1, "f16", "f16", "f32"), 32)
    no_ring = default_config(t, Contraction(4096, 4096, 4097, 1, "f16", "f16", "f32"), 32)  # 16-bit rows: no cp.async
    # 64 deep in 3 stages with the ring (docs/PERFORMANCE.md); 256x128 without one
    assert (cfg.tile_k, cfg.stages, no_ring.stages, no_ring.tile_m, no_ring.tile_n) == (64, 3, 1, 256, 128)
    # without a ring, K >= 8192 is staged 64 deep (docs/PERFORMANCE.md)
    deep = default_config(t, Contraction(8192, 8192, 8193, 1, "f16", "f16", "f32"), 32)
    assert (deep.stages, deep.tile_m, deep.tile_k) == (1, 256, 64)
    # workgroups grouped by 8 tile rows only where the grid has 8+ tiles per SM (8192^3: 2048)
    raster = {s: default_config(t, Contraction(s, s, s, 1, "f16", "f16", "f32"), 32).raster for s in (4096, 8192)}
    assert raster == {4096: 1, 8192: 8}
    assert default_config(get_target("gfx942"), Contraction(8192, 8192, 8192, 1, "f16", "f16", "f32")).raster == 1


def test_a_run_time_offset_survives_the_records_attribute():
    """A binding at a run-time byte offset (None) reads back as None from the attribute select writes,
    not 0 (the attribute leaves None out): a matmul's C, an epilogue input and block scales; in
    llama_decode, the K and V projection's C and the attention's K and V (run-time offsets of one buffer)."""
    from pathlib import Path

    from mmaflow.compiler.core.problem import Binding, BlockScales, Contraction, EpilogueInput

    problem = Contraction(
        2,
        256,
        1024,
        1,
        "f16",
        "f16",
        "f32",
        c=Binding(2, None),
        epilogue=(EpilogueInput(Binding(3, None), "f16", (2, 256), ("m", "n")),),
        scales=BlockScales(Binding(4, None), Binding(4, 64), "f8E8M0FNU", 32),
    )
    with new_context():
        back = Contraction.from_dict(attrs.from_attr(attrs.to_attr(problem.to_dict())))
    assert back == problem
    model = Path(__file__).parent / "models" / "llama_decode_f16.mlir"
    res = codegen_module(model.read_text(), "sm_90a", require_matmul=False)
    taken = {e.name.split("dispatch_")[1]: e.facts.problem for e in res.taken}
    assert taken["1"].c.offset is None
    assert taken["9"].k.offset is None and taken["9"].v.offset is None and taken["9"].q.offset == 0
