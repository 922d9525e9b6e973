"""Attention's P conversion (accumulator C -> A operand of the next instruction), checked
against the independent ISA model.

For every target's 16-bit-A / 32-bit-C instruction (f16 and bf16), both ways of computing S
(Q K^T, and K Q^T read transposed) and both routes of each plan (registers, LDS round trip): the
source registers are filled from the ISA model's C placement (``runtime/isa/tables.py``, not
the compiler's layouts), the plan is replayed lane by lane in numpy exactly as its JSON says
(each permute: every lane reads one register of the lane it names; each destination register
from two halves; LDS stores and loads at their byte addresses), and every destination slot must
hold the P element the ISA model's A placement says it holds. Then the converted A and V (rows
in the plan's K order) go through the ISA model's instruction: P V must come out.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from mmaflow.compiler.target.convert import attention_plans, best, to_json
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.targets import TARGETS
from mmaflow.runtime.isa import INSTRUCTIONS, execute, np_dtype

CASES = [
    pytest.param(t.name, i.name, id=f"{t.name}-{i.name}")
    for t in TARGETS.values()
    if t.name != "sm_90a"
    for i in t.intrinsics()
    if TYPE_BITS[i.a_type] == 16 and TYPE_BITS[i.c_type] == 32
]
_PLANS: dict = {}


def plans(target: str, name: str) -> list[dict]:
    """Both candidates of one instruction, as the JSON the CLI prints (computed once)."""
    if (target, name) not in _PLANS:
        t = TARGETS[target]
        convs = attention_plans(t.intrinsic(name), vendor=t.vendor.value, family=t.family.value)
        _PLANS[(target, name)] = [to_json(c) for c in convs]
    return _PLANS[(target, name)]


def source_registers(isa, plan, p):
    """The 16-bit source slots of every lane, from the ISA model's C placement: slot
    (instance, element), instances row-major over P's tile (queries x keys)."""
    m, n = isa.m, isa.n
    br, bc = plan["source_batch"]  # the S (or S^T) instruction grid
    per = isa.c_slots
    out = np.zeros((isa.wave, br * bc * per), p.dtype)
    for bi in range(br):
        for bj in range(bc):
            for lane in range(isa.wave):
                for e in range(per):
                    r, c = isa.c_place(lane, e)
                    if plan["transposed"]:  # instance (bi, bj) of S^T is instance (bj, bi) of P
                        out[lane, (bj * br + bi) * per + e] = p[bj * n + c, bi * m + r]
                    else:
                        out[lane, (bi * bc + bj) * per + e] = p[bi * m + r, bj * n + c]
    return out


def expected(isa, plan, p, keys):
    """What every A slot must hold: the ISA model's A placement, K read through ``keys``."""
    dr, dc = plan["dest_batch"]
    per = isa.a_slots
    out = np.zeros((isa.wave, dr * dc * per), p.dtype)
    for bi in range(dr):
        for bj in range(dc):
            for lane in range(isa.wave):
                for e in range(per):
                    r, c = isa.a_place(lane, e)
                    out[lane, (bi * dc + bj) * per + e] = p[bi * isa.m + r, keys[bj * isa.k + c]]
    return out


def replay_registers(route, src, n_dst):
    wave = src.shape[0]
    words = src.reshape(wave, -1, 2)
    lanes = np.arange(wave)
    for pm in route["permutes"]:  # a named pattern is what it says (it picks the instruction)
        if pm["pattern"] != "general":
            x = int(pm["pattern"].removeprefix("lane ^ "))
            assert pm["source_lane"] == list(lanes ^ x), pm["pattern"]
    received = [words[np.array(pm["source_lane"]), pm["register"]] for pm in route["permutes"]]
    dst = np.zeros((wave, n_dst), src.dtype)
    for a in route["assemble"]:
        for lane, pair in enumerate(a["halves"]):
            for h, (where, index, half) in enumerate(pair):
                value = words[lane, index, half] if where == "own" else received[index][lane, half]
                dst[lane, 2 * a["register"] + h] = value
    return dst


def replay_lds(route, src, n_dst):
    wave = src.shape[0]
    mem = np.full(route["tile_bytes"] // 2, np.nan, np.float32).astype(src.dtype)
    written = np.zeros(mem.size, bool)
    for acc in route["stores"]:
        for lane in range(wave):
            addr = acc["address"][lane]
            assert addr % (2 * acc["length"]) == 0, "an LDS access must be aligned to its width"
            mem[addr // 2 : addr // 2 + acc["length"]] = src[lane, acc["first"] : acc["first"] + acc["length"]]
            written[addr // 2 : addr // 2 + acc["length"]] = True
    assert written.all(), "the stores must cover the tile"
    dst = np.zeros((wave, n_dst), src.dtype)
    for acc in route["loads"]:
        for lane in range(wave):
            addr = acc["address"][lane]
            assert addr % (2 * acc["length"]) == 0
            dst[lane, acc["first"] : acc["first"] + acc["length"]] = mem[addr // 2 : addr // 2 + acc["length"]]
    return dst


def distinct_values(shape, dtype, rng):
    """Finite 16-bit values, all different (bit patterns drawn without replacement)."""
    count = int(np.prod(shape))
    pool = np.arange(2**16, dtype=np.uint16).view(dtype)
    finite = np.flatnonzero(np.isfinite(pool.astype(np.float32)))
    return pool[rng.choice(finite, count, replace=False)].reshape(shape)


def check(isa, plan, route, p):
    """Replay ``route`` of ``plan`` on P; return the A registers, asserting every slot."""
    src = source_registers(isa, plan, p)
    dr, dc = plan["dest_batch"]
    n_dst = dr * dc * isa.a_slots
    if route == "registers":
        got = replay_registers(plan["registers"], src, n_dst)
    else:
        got = replay_lds(plan["lds"], src, n_dst)
    keys = plan[route]["hardware_keys"]
    assert sorted(keys) == list(range(plan["tile"][1])), "the K order must be a permutation of the keys"
    want = expected(isa, plan, p, keys)
    bits = np.uint16
    bad = np.argwhere(got.view(bits) != want.view(bits))
    assert bad.size == 0, f"{len(bad)} A slots wrong, first (lane, slot) {tuple(bad[0])}"
    return got


@pytest.mark.parametrize("route", ["registers", "lds"])
@pytest.mark.parametrize("target,name", CASES)
def test_conversion_plan_moves_every_element(target, name, route):
    intr = TARGETS[target].intrinsic(name)
    isa = INSTRUCTIONS[intr.isa_key]
    dtype = np_dtype(intr.a_type)
    rng = np.random.default_rng(5)
    for plan in plans(target, name):
        rows, cols = plan["tile"]
        check(isa, plan, route, distinct_values((rows, cols), dtype, rng))
        # The product with V, its rows read in the same K order, through the ISA model.
        p = rng.uniform(-2, 2, (rows, cols)).astype(dtype)
        v = rng.uniform(-2, 2, (cols, isa.n)).astype(dtype)
        a_regs = check(isa, plan, route, p)
        keys = plan[route]["hardware_keys"]
        dr, dc = plan["dest_batch"]
        for bi in range(dr):
            d = np.zeros((isa.wave, isa.c_slots), np_dtype(intr.c_type))
            for bj in range(dc):
                b = np.zeros((isa.wave, isa.b_slots), dtype)
                for lane in range(isa.wave):
                    for e in range(isa.b_slots):
                        k, col = isa.b_place(lane, e)
                        b[lane, e] = v[keys[bj * isa.k + k], col]
                a = a_regs[:, (bi * dc + bj) * isa.a_slots : (bi * dc + bj + 1) * isa.a_slots]
                d = execute(intr.isa_key, np.ascontiguousarray(a), b, d)
            out = np.zeros((isa.m, isa.n))
            for lane in range(isa.wave):
                for e in range(isa.c_slots):
                    rc = isa.c_place(lane, e)
                    if rc is not None:
                        out[rc] = d[lane, e]
            ref = p[bi * isa.m : (bi + 1) * isa.m].astype(np.float64) @ v.astype(np.float64)
            # f32 accumulation over at most 32 products of magnitude <= 4, rounded per instruction.
            np.testing.assert_allclose(out, ref, atol=1e-4 * cols)


@pytest.mark.parametrize(
    "target,name",
    [("gfx1100", "WMMA_F32_16x16x16_F16"), ("sm_80", "MMA_SYNC_F32_16x8x16_F16"), ("gfx942", "MFMA_F32_32x32x8_F16")],
)
def test_a_wrong_plan_is_caught(target, name):
    """The replay is a real check: one lane's permute source, one assembled half, one LDS
    address changed, and the comparison fails."""
    import copy

    intr = TARGETS[target].intrinsic(name)
    isa = INSTRUCTIONS[intr.isa_key]
    p = distinct_values((32, 32), np_dtype(intr.a_type), np.random.default_rng(1))
    for plan in plans(target, name):
        p_tile = p[: plan["tile"][0], : plan["tile"][1]]
        reg = plan["registers"]
        bad = copy.deepcopy(plan)
        if reg["permutes"]:  # a lane that uses permute 0 reads the lane next to its source
            lane = next(
                lane
                for a in reg["assemble"]
                for lane, pair in enumerate(a["halves"])
                if any(h[0] == "permute" and h[1] == 0 for h in pair)
            )
            bad["registers"]["permutes"][0]["source_lane"][lane] ^= 1
            bad["registers"]["permutes"][0]["pattern"] = "general"  # else the pattern check catches it first
        else:
            halves = bad["registers"]["assemble"][0]["halves"][5]
            halves[0], halves[1] = halves[1], halves[0]
        with pytest.raises(AssertionError, match="A slots wrong"):
            check(isa, bad, "registers", p_tile)
        bad = copy.deepcopy(plan)
        load = bad["lds"]["loads"][0]
        load["address"][0], load["address"][1] = load["address"][1], load["address"][0]
        with pytest.raises(AssertionError, match="A slots wrong"):
            check(isa, bad, "lds", p_tile)


# What the planner chooses, per target: the table in docs/PERFORMANCE.md.
CHOSEN = {
    ("sm_80", "MMA_SYNC_F32_16x8x16_F16"): ("S = Q K^T", "in-lane", 0),
    ("gfx942", "MFMA_F32_16x16x16_F16"): ("S^T = K Q^T", "in-lane", 0),
    ("gfx942", "MFMA_F32_32x32x8_F16"): ("S^T = K Q^T", "in-lane", 0),
    ("gfx950", "MFMA_F32_16x16x32_F16"): ("S^T = K Q^T", "in-lane", 0),
    ("gfx950", "MFMA_F32_32x32x16_F16"): ("S^T = K Q^T", "in-lane", 0),
    ("gfx1201", "WMMA_F32_16x16x16_F16"): ("S^T = K Q^T", "in-lane", 0),
    ("gfx1100", "WMMA_F32_16x16x16_F16"): ("S^T = K Q^T", "cross-lane", 20),
    ("gfx1100", "WMMA_F32_16x16x16_F16_W64"): ("S^T = K Q^T", "cross-lane", 55),
}


@pytest.mark.parametrize("target,name", sorted(CHOSEN))
def test_chosen_plans(target, name):
    t = TARGETS[target]
    convs = attention_plans(t.intrinsic(name), vendor=t.vendor.value, family=t.family.value)
    chosen = best(convs)
    assert (chosen.how, chosen.plan.kind, chosen.plan.instructions) == CHOSEN[(target, name)]
    assert chosen.plan.lds_bytes == 0  # every target converts in registers
    if target == "gfx1100" and chosen.plan.dest.wave_size == 32:
        # RDNA3 wave32: lanes 0-15 and 16-31 swap halves of P with v_permlanex16 (no LDS pipe).
        assert {p.isa for p in chosen.plan.registers.permutes} == {"v_permlanex16_b32"}
        assert chosen.plan.registers.lds_pipe == 0


def test_cli_json_and_errors():
    cli = [sys.executable, "-m", "mmaflow.compiler.cli", "layout"]
    out = subprocess.run(cli + ["gfx1201", "--convert", "C:A", "--json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    (entry,) = data["plans"]
    assert entry["intrinsic"] == "WMMA_F32_16x16x16_F16" and entry["chosen"] == "S^T = K Q^T"
    assert [c["how"] for c in entry["candidates"]] == ["S = Q K^T", "S^T = K Q^T"]
    assert entry["candidates"] == plans("gfx1201", "WMMA_F32_16x16x16_F16")
    for args, message in (
        (["--convert", "A:B"], "only C:A"),
        (["--convert", "C:A", "--intrinsic", "WMMA_I32_16x16x16_I8"], "32-bit accumulator"),
        (["--convert", "C:A", "--operand", "A"], "do not go together"),
    ):
        bad = subprocess.run(cli + ["gfx1100", *args], capture_output=True, text=True)
        assert bad.returncode != 0 and message in bad.stderr, (args, bad.stderr)
