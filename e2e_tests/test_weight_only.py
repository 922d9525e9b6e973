"""The weight-only decode kernel (``compiler/kernels/decode/weight_only.py``): a dequantization of 4-
or 8-bit weights with per-group parameters feeding a decode-sized matmul, in one dispatch as IREE
forms it, built as one kernel that unpacks the packed weights in registers.

On the lane executor against numpy, every target: u4 / s4 / u8 / s8 weights, f16 and bf16
activations, with and without a zero point, f32 and f16 accumulation, M = 1 (IREE drops the unit
dim) up to two whole 16-row instruction tiles, a partial column tile, groups of 32 to 128; the tensors at non-zero
byte offsets of their bindings with sentinel bytes around them (``simulate.Memory``). The reference
dequantizes in the activation type, rounding each op as the dispatch does, and multiplies in
float64: the f32-accumulating kernel is within K * 2^-24 of the sum of |products| (f32
accumulation in any order); the f16-accumulating one gets data whose every partial sum f16 holds
exactly (activations in {-1, 0, 1}, scales 1/16, K 128: multiples of 1/16 below 2048 / 16) and
must be exact. A wrong unpacking order is caught; the forms the kernel refuses are left to IREE
with the reason.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.driver.bridge import codegen_module, compile_module
from mmaflow.compiler.kernels.decode import weight_only
from mmaflow.compiler.kernels.decode.plan import plan_k_order
from mmaflow.compiler.pipeline.pipeline import CodegenOptions, codegen_executable_text
from mmaflow.compiler.report import ptxas_info, ptxas_path
from mmaflow.compiler.target.intrinsics import CATALOGUE
from mmaflow.runtime.executor import ExecutorError
from mmaflow.runtime.executor.ops import lop3
from mmaflow.runtime.modules import weight_only_module
from mmaflow.runtime.simulate import Memory, Region, load_dispatch, run_dispatch

TARGETS = ["sm_80", "sm_90a", "gfx942", "gfx950", "gfx1100", "gfx1201"]
# (m, n, k, group, q_type, act, signed, zero point, acc): n 40 leaves a partial column tile
FORMS = [
    (1, 40, 512, 128, "i4", "f16", False, True, "f32"),
    (5, 48, 1024, 64, "i4", "bf16", True, True, "f32"),
    (2, 40, 512, 64, "i4", "f16", True, True, "f32"),  # s4 -> f16: the odd fields' fma takes the bias too
    (16, 32, 512, 32, "i8", "f16", True, False, "f32"),
    (8, 64, 512, 128, "i8", "bf16", False, True, "f32"),
    (3, 48, 128, 32, "i4", "f16", False, True, "f16"),  # exact data (see _data)
    (24, 40, 512, 128, "i4", "f16", False, True, "f32"),  # two row tiles (the second partial)
    (32, 64, 1024, 64, "i4", "bf16", True, True, "f32"),  # two whole row tiles of 16 (CDNA: one 32-row tile)
    (2, 40, 1408, 64, "i8", "f16", True, True, "f32"),  # 22 chunks: K tiles of 4 and a tail of 3 a wave
    (4, 48, 1408, 128, "i4", "bf16", False, True, "f32"),  # 11 chunks: one wave, K tiles of 4 and a tail of 3
]
# Byte offsets of A, W, the parameters and the output in their bindings (A and W 16-byte aligned).
OFFSETS = {"A": 256, "W": 4160, "P": 34, "O": 80}
NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}


def _cases():
    out = []
    for t in TARGETS:
        for form in FORMS:
            if form[-1] == "f16" and t in ("gfx942", "gfx950"):
                continue  # no MFMA accumulates in f16: refused (test_refusals)
            out.append(pytest.param(t, form, id=f"{t}-" + "-".join(map(str, form))))
    return out


def _at_offsets(source: str) -> str:
    """The executable-sources text with A, W, the parameters and the output moved to OFFSETS."""
    lines, out = source.splitlines(), []
    for line in lines:
        out.append(line)
        if re.search(r"%c0 = arith.constant 0 : index", line):
            indent = line[: len(line) - len(line.lstrip())]
            out += [f"{indent}%c_off{v} = arith.constant {v} : index" for v in sorted(set(OFFSETS.values()))]
    return "\n".join(out)


def _build(target: str, form, *, offsets: bool = True):
    m, n, k, g, q, act, signed, zp, acc = form
    src = weight_only_module(
        m, n, k, g, q_type=q, act=act, signed=signed, zero_point=zp, acc=acc, as_bytes=False, unit_m=m == 1
    )
    (exe,) = codegen_module(src, target).taken
    if not offsets:
        return exe
    rec = exe.facts.problem
    roles = {rec.a.binding: "A", rec.w.binding: "W", rec.out.binding: "O"}
    roles.update({p.binding: "P" for p in rec.params})
    text = _at_offsets(exe.source)

    def move(mt):
        return f"binding({mt.group(1)}) alignment(64) offset(%c_off{OFFSETS[roles[int(mt.group(1))]]})"

    text = re.sub(r"binding\((\d+)\) alignment\(64\) offset\(%c0\)", move, text)
    res = codegen_executable_text(text, CodegenOptions(target=target))
    assert res.taken, res.log
    return res


def _data(form, seed: int):
    m, n, k, g, q, act, signed, zp, acc = form
    rng = np.random.default_rng(seed)
    bits = 4 if q == "i4" else 8
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    qv = rng.integers(lo, hi, size=(n, k))
    u = (qv & ((1 << bits) - 1)).astype(np.uint8)
    packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8) if bits == 4 else u
    dt = NP[act]
    if acc == "f16":  # exact: see the module docstring
        x = rng.integers(-1, 2, size=(m, k)).astype(dt)
        s = np.full((n, k // g), 0.0625, dt)
    else:
        x = rng.standard_normal((m, k)).astype(dt)
        s = (rng.random((n, k // g)) * 0.02 + 0.01).astype(dt)
    z = rng.integers(0, 1 << (bits - 1), size=(n, k // g)).astype(dt)
    deq = qv.astype(dt)
    if zp:
        deq = (deq - np.repeat(z, g, axis=1)).astype(dt)
    deq = (deq * np.repeat(s, g, axis=1)).astype(dt)
    params = [s, z] if zp else [s]
    return x, packed, params, deq


def _run(res, form, seed: int = 0, workgroups=None):
    """Run on the executor with the tensors where the dispatch's subspans put them (all workgroups,
    or those of ``workgroups``); (out, ref, bound, bytes changed outside the output)."""
    m, n, k, g, q, act, signed, zp, acc = form
    exe = res
    rec = exe.facts.problem
    x, packed, params, deq = _data(form, seed)
    mod = parse_module(exe.text, new_context(), source="weight_only")
    d = load_dispatch(mod)
    mem = Memory()
    mem.place(Region(rec.a.binding, rec.a.offset, x.dtype, x.shape, "A"), x)
    mem.place(Region(rec.w.binding, rec.w.offset, packed.dtype, packed.shape, "W"), packed)
    for i, (b, p) in enumerate(zip(rec.params, params)):
        mem.place(Region(b.binding, b.offset, p.dtype, p.shape, f"P{i}"), p)
    out_r = Region(rec.out.binding, rec.out.offset, np.dtype(NP[acc]), (m, n), "O")
    mem.place(out_r)
    bufs = mem.buffers()
    before = {b: v.copy() for b, v in bufs.items()}
    run_dispatch(d, bufs, workgroups=workgroups)
    out = Memory.read(bufs, out_r).astype(np.float64)
    ref = x.astype(np.float64) @ deq.astype(np.float64).T
    absum = np.abs(x.astype(np.float64)) @ np.abs(deq.astype(np.float64)).T
    bound = k * 2.0**-24 * absum if acc == "f32" else np.zeros_like(ref)  # f16: exact data
    return out, ref, bound, Memory.changed_outside(before, bufs, [out_r])


@pytest.mark.parametrize("target,form", _cases())
def test_numerics(target, form):
    res = _build(target, form)
    rec = res.facts.problem
    assert (rec.a.offset, rec.w.offset, rec.out.offset) == (OFFSETS["A"], OFFSETS["W"], OFFSETS["O"])
    assert all(p.offset == OFFSETS["P"] for p in rec.params)
    out, ref, bound, changed = _run(res, form)
    assert not changed, changed
    err = np.abs(out - ref)
    assert (err <= bound).all(), f"worst {float((err / bound).max()):.3g} of the bound"
    # and not trivially: the bound is far below the data
    assert float(bound.max()) < 2e-3 * float(np.abs(ref).max())


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_a_tail_past_whole_k_tiles(target):
    """A wave's chunks not a multiple of the unroll (K 1408: 22 chunks of 64 i8, 11 of 128 i4): whole K tiles in
    the loop, the rest after it, planned and verified (the numerics: FORMS in test_numerics)."""
    for form in FORMS[-2:]:
        res = _build(target, form, offsets=False)
        (line,) = [x for x in res.log if "chunk(s) after them" in x]
        assert "3 chunk(s) after them" in line, line


def test_wide_shape():
    """Many rows of large weights (M >= 9, N x K >= 2^25 on NVIDIA: the seeds' 4 waves x 8 chunks, K
    tiles of 1024): sampled workgroups, first, middle and last, against numpy."""
    form = (16, 8192, 4096, 128, "i4", "f16", False, True, "f32")
    exe = _build("sm_90a", form, offsets=False)
    assert any("4 waves split K in tiles of 1024 (8 chunks of 128)" in x for x in exe.log), exe.log
    picked = [0, 100, 255]  # 32 columns each
    out, ref, bound, changed = _run(exe, form, workgroups=picked)
    assert not changed, changed
    cols = np.concatenate([np.arange(32 * w, 32 * w + 32) for w in picked])
    assert (np.abs(out[:, cols] - ref[:, cols]) <= bound[:, cols]).all()


def test_unpack_order_mutation_caught(monkeypatch):
    """The K order follows the unpacking order: A read in memory order instead fails."""
    form = FORMS[0]
    monkeypatch.setattr(weight_only, "unpack_order", lambda bits, slot: tuple(range(128 // bits)))
    exe = _build("sm_80", form, offsets=False)
    out, ref, bound, _ = _run(exe, form)
    assert (np.abs(out - ref) > bound).any()


def test_lop3_model_is_ptx_s_definition():
    """The executor's lop3.b32 against the PTX ISA's definition bit by bit, for every LUT: bit j of d is
    bit (a_j << 2 | b_j << 1 | c_j) of the LUT."""
    rng = np.random.default_rng(3)
    a, b, c = (rng.integers(-(2**31), 2**31, size=6, dtype=np.int64).astype(np.int32) for _ in range(3))
    for lut in range(256):
        d = lop3(a, b, c, lut).astype(np.int64) & 0xFFFFFFFF
        for i in range(6):
            want = sum(
                ((lut >> ((int(a[i]) >> j & 1) << 2 | (int(b[i]) >> j & 1) << 1 | (int(c[i]) >> j & 1))) & 1) << j
                for j in range(32)
            )
            assert int(d[i]) == want, (lut, i)


def test_unpacking_instructions_and_their_model(monkeypatch):
    """NVIDIA: one lop3.b32 (LUT 0xEA) a word and field, the odd 4-bit fields of an f16 unpacking unshifted
    and scaled back by llvm.intr.fma; the executor refuses a lop3 off its modelled form by name."""
    form = FORMS[0]  # u4 -> f16
    exe = _build("sm_90a", form, offsets=False)
    asm = re.findall(r'llvm.inline_asm "([^"]*)", "([^"]*)"', exe.text)
    assert asm and all(a == ("lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,r,r") for a in asm), asm[:3]
    fmas = exe.text.count("llvm.intr.fma")  # a run of 32 (4 words): fields 1 and 3 as vector fmas
    assert fmas and len(asm) == 8 * fmas, (len(asm), fmas)  # one lop3 a word and field: 16 a run
    mod = parse_module(exe.text.replace('"=r,r,r,r"', '"=r,r,r,r,~{memory}"', 1), new_context(), source="edit")
    with pytest.raises(ExecutorError, match="lop3.b32 is modelled on i32 registers"):
        run_dispatch(load_dispatch(mod), {}, workgroups=[0])
    mod = parse_module(exe.text.replace("$3, 0xEA;", "$3,0xEA;", 1), new_context(), source="edit")
    with pytest.raises(ExecutorError, match=r"lop3 is modelled as 'lop3.b32 \$0, \$1, \$2, \$3, LUT;' only"):
        run_dispatch(load_dispatch(mod), {}, workgroups=[0])


def test_two_workgroups_a_sm_on_sm_90a():
    """The seeds' M 1 shape (8 warps x 32 columns, u4 -> f16) stays within 128 registers a thread on
    sm_90a (ptxas, no spills): two 256-thread workgroups a SM, the residency its timing assumed."""
    assert ptxas_path() is not None, "ptxas is missing: pip install -e '.[test]' installs nvidia-cuda-nvcc-cu12"
    src = weight_only_module(1, 4096, 4096, 128, q_type="i4", act="f16", as_bytes=False, unit_m=True)
    res = compile_module(src, "sm_90a")
    (exe,) = res.taken
    assert any("8 waves split K" in x and "32 columns per workgroup" in x for x in exe.log), exe.log
    info = ptxas_info(res.isa_text[exe.name], "sm_90a", 256)
    assert info.get("vgpr_spills") == 0 and info["vgprs"] <= 128, info
    assert info["waves_per_simd"] >= 16, info  # warps a SM: two workgroups


def test_k_order_with_unpacking_is_a_permutation():
    """For every f16 / bf16 instruction the kernel may pick, the K order of a packed run (i4, i8)
    through either slot width is a permutation of the chunk, with one 128-bit run per lane."""
    count = 0
    for intr in (i for intrs in CATALOGUE.values() for i in intrs):
        if intr.a_type not in ("f16", "bf16"):
            continue
        for bits in (4, 8):
            for slot in (16, 32):
                ko = plan_k_order(intr, stored_bits=bits, value_order=weight_only.unpack_order(bits, slot))
                flat = sorted(x for row in ko.mem for x in row)
                assert flat == list(range(ko.chunk)) and ko.run == 128 // bits
                count += 1
    assert count >= 24


@pytest.mark.parametrize(
    "target,kwargs,why",
    [
        ("sm_90a", dict(group=16), "groups of 16 split a lane's run of 32 weights"),
        ("gfx942", dict(acc="f16"), "no gfx942 instruction computes f16 x f16 -> f16"),
        ("sm_80", dict(m=200), "M = 200 is past 128 rows"),
    ],
)
def test_refusals(target, kwargs, why):
    """Forms the kernel does not take are left to IREE, the log saying why."""
    args = dict(m=4, n=64, k=512, group=128)
    args.update({k: v for k, v in kwargs.items() if k in args})
    extra = {k: v for k, v in kwargs.items() if k not in args}
    src = weight_only_module(args["m"], args["n"], args["k"], args["group"], as_bytes=False, **extra)
    res = codegen_module(src, target, require_matmul=False)
    assert not res.taken
    line = next(x for x in res.log if "a dequantization feeding a matmul" in x)
    assert why in line, line


def test_unaligned_weights_refused():
    """A weight tensor at a byte offset that is not a multiple of 16 is left to IREE (the kernel's
    128-bit loads), not read misaligned."""
    form = FORMS[0]
    (exe,) = codegen_module(weight_only_module(*form[:4], as_bytes=False, unit_m=True), "sm_90a").taken
    w = exe.facts.problem.w.binding
    text = exe.source.replace(
        "%c0 = arith.constant 0 : index", "%c0 = arith.constant 0 : index\n%c8 = arith.constant 8 : index", 1
    )
    text = text.replace(f"binding({w}) alignment(64) offset(%c0)", f"binding({w}) alignment(64) offset(%c8)")
    res = codegen_executable_text(text, CodegenOptions(target="sm_90a"))
    assert not res.taken
    assert any("16-byte aligned" in x for x in res.log), res.log


def test_module_boundary_bytes_form():
    """The bench's form: weights passed as i8 bytes and bitcast to i4 (sub-byte tensors at the
    module boundary, as IREE's tests pass them) reach the same dispatch, taken and verified."""
    from mmaflow.compiler.driver.bridge import compile_module

    res = compile_module(weight_only_module(16, 256, 1024, 128), "sm_90a", require_matmul=False)
    assert [e for e in res.taken if e.facts.is_weight_only]
    assert any("verified" in x for x in res.log) or res.vmfb


@pytest.mark.parametrize("target", ["sm_80", "gfx942", "gfx1201"])
def test_mmaflow_run_on_the_executor(tmp_path, target):
    """`mmaflow run --device sim` checks a weight-only module's dispatch against the reference
    interpreter's evaluation of the dispatch's own IR (i4 unpacked from IREE's two-per-byte
    storage: ``model_check.unpack_i4``); other devices say they do not run it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    src = tmp_path / "wo.mlir"
    src.write_text(weight_only_module(5, 300, 512, 64, signed=True, act="bf16"))
    mmaflow = str(Path(sys.executable).parent / "mmaflow")
    out = subprocess.run(
        [mmaflow, "run", str(src), "--target", target, "--device", "sim", "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [r for r in json.loads(out.stdout)["dispatches"] if r["taken"]]
    assert [(r["kind"], r["passed"]) for r in rows] == [("weight_only", True)]
    out = subprocess.run(
        [mmaflow, "run", str(src), "--target", target, "--device", "local-task"], capture_output=True, text=True
    )
    assert out.returncode == 3 and "is a weight-only dispatch" in out.stderr, out.stderr[-2000:]


def test_unpack_i4():
    from mmaflow.runtime.model_check import unpack_i4

    packed = np.array([[0x21, 0xF8, 0x7E]], np.uint8)
    assert unpack_i4(packed).tolist() == [[1, 2, -8, -1, -2, 7]]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(m=4, per_channel=True, q_type="i8", signed=True),  # int8 per-channel, the common int8 form
        dict(m=1, per_channel=True, q_type="i8", signed=True, unit_m=True, zero_point=False),
        dict(m=4, param_type="f32"),  # f32 parameters: the weight unpacked through f32, the result truncated
        dict(m=6, param_type="f32", act="bf16", q_type="i8", group=64),
    ],
    ids=["per-channel-i8", "per-channel-unit-m", "f32-params", "f32-params-bf16-i8"],
)
def test_other_forms_against_the_reference_interpreter(target, kwargs):
    """Per-channel parameters (W N x K, one scale per row) and f32 parameters, checked as `mmaflow
    run --device sim` checks a dispatch: against the reference interpreter's evaluation of the
    dispatch's own IR, every workgroup, sentinels around every tensor."""
    from mmaflow.runtime.model_check import check_executable

    args = dict(kwargs)
    m, group = args.pop("m"), args.pop("group", 128)
    (exe,) = codegen_module(weight_only_module(m, 96, 512, group, as_bytes=False, **args), target).taken
    assert exe.facts.is_weight_only
    (check,) = check_executable(exe)
    assert check.passed, check.detail


# Round-to-nearest relative error of the stored type (half an ulp at 1)
UNIT_ROUNDOFF = {"f16": 2.0**-11, "bf16": 2.0**-8}


@pytest.mark.exhaustive
@pytest.mark.parametrize("act", ["f16", "bf16"])
@pytest.mark.parametrize("target", TARGETS)
def test_linear_form_against_float64(target, act):
    """The form an iree-turbine export of ``F.linear(x, q.to(dt) * scale)`` reaches (int8 per channel):
    ``linalg.matmul`` with B's map transposed, its f32 result truncated to the activations' type before
    the store. Taken, stored in that type, and within the f32 bound plus the final rounding of a
    float64 reference (|err| <= u |ref| + (1 + u) K 2^-24 sum |products| + the smallest subnormal's
    half, u the stored type's unit roundoff) on every workgroup, nothing outside the output touched."""
    m, n, k = 5, 96, 512
    src = weight_only_module(
        m, n, k, k, q_type="i8", act=act, signed=True, zero_point=False, as_bytes=False, per_channel=True, linear=True
    )
    (exe,) = codegen_module(src, target).taken
    rec = exe.facts.problem
    assert exe.facts.is_weight_only and rec.out_type == act and rec.acc_type == "f32", rec
    dt = NP[act]
    rng = np.random.default_rng(3)
    q = rng.integers(-127, 128, size=(n, k)).astype(np.int8)
    scale = (rng.random(n) * 0.02 + 0.01).astype(dt)
    x = rng.standard_normal((m, k)).astype(dt)
    deq = (q.astype(dt) * scale[:, None]).astype(dt)  # the dispatch's dequantization, rounded in act
    mem = Memory()
    mem.place(Region(rec.a.binding, rec.a.offset, x.dtype, x.shape, "A"), x)
    mem.place(Region(rec.w.binding, rec.w.offset, q.dtype, q.shape, "W"), q)
    (p,) = rec.params
    mem.place(Region(p.binding, p.offset, scale.dtype, scale.shape, "P0"), scale)
    out_r = Region(rec.out.binding, rec.out.offset, np.dtype(dt), (m, n), "O")
    mem.place(out_r)
    bufs = mem.buffers()
    before = {b: v.copy() for b, v in bufs.items()}
    mod = parse_module(exe.text, new_context(), source="linear")  # (kept alive: the dispatch's ops live in it)
    run_dispatch(load_dispatch(mod), bufs)
    out = Memory.read(bufs, out_r).astype(np.float64)
    ref = x.astype(np.float64) @ deq.astype(np.float64).T
    absum = np.abs(x.astype(np.float64)) @ np.abs(deq.astype(np.float64)).T
    u = UNIT_ROUNDOFF[act]
    bound = u * np.abs(ref) + (1 + u) * k * 2.0**-24 * absum + 2.0**-25
    err = np.abs(out - ref)
    assert (err <= bound).all(), f"worst {float((err / bound).max()):.3g} of the bound"
    assert float(err.max()) > 0 or act == "f16"  # bf16's rounding shows: the output is the truncated type
    assert not Memory.changed_outside(before, bufs, [out_r])


@pytest.mark.parametrize("target", TARGETS)
def test_dynamic_m(target):
    """A dynamic M (a serving step's batch): planned at two row tiles, the run-time M read from the
    push constants; past the bound the kernel loops over row blocks (NVIDIA: blocks of 32). Each
    size against the reference interpreter, every workgroup."""
    from mmaflow.runtime.model_check import check_executable

    (exe,) = codegen_module(weight_only_module(0, 96, 512, 64, dynamic_m=True, act="bf16", signed=True), target).taken
    assert exe.facts.problem.m is None and [d.dim for d in exe.facts.problem.dynamic] == ["m"]
    assert any("dynamic M in row blocks of" in x for x in exe.log), exe.log
    for m in (1, 13, 32, 45, 70):
        (check,) = check_executable(exe, sizes={"m": m})
        assert check.passed, f"M = {m}: {check.detail}"


def test_dynamic_m_row_block_barrier_mutation(monkeypatch):
    """Without the barrier between row blocks, the next block's partial sums overwrite LDS wave 0 is
    still reading: the executor reports the race."""
    from mmaflow.runtime.model_check import check_executable

    monkeypatch.setattr(weight_only._Builder, "_row_block_barrier", False)
    (exe,) = codegen_module(weight_only_module(0, 64, 512, 128, dynamic_m=True), "sm_80").taken
    (check,) = check_executable(exe, sizes={"m": 40})
    assert not check.passed and "LDS race" in check.detail, check.detail


@pytest.mark.parametrize(
    "old,new,why",
    [
        (
            "arith.uitofp %in : i4 to f16",
            "arith.extsi %in : i4 to i32\n%V = arith.uitofp %V.x : i32 to f16",
            "sign-extended and then converted as unsigned",
        ),
        (
            "arith.mulf %15, %in_0 : f16",
            "arith.mulf %15, %in_0 : f16\n%V = math.absf %V.x : f16",
            "the dequantization body holds math.absf",
        ),
        ("arith.mulf %14, %15 : f32", "arith.mulf %14, %14 : f32", "does not multiply its two inputs"),
    ],
    ids=["extsi-uitofp", "absf-in-body", "a-times-a"],
)
def test_forms_refused(old, new, why):
    """Dispatches the kernel would compute differently are left to IREE at select with the reason,
    never miscompiled. IREE fuses only dequantization-like bodies, so these are written into the
    dispatch as IREE hands it over (``%V``: the edited op's result; ``%V.x``: the new op between)."""
    (exe,) = codegen_module(weight_only_module(4, 64, 512, 128, as_bytes=False), "sm_90a").taken
    lines = exe.source.splitlines()
    (at,) = [i for i, line in enumerate(lines) if f"= {old} loc(" in line]
    indent, result = re.match(r"(\s*)(%\w+) = ", lines[at]).groups()
    first, *rest = new.replace("%V.x", "%edited").split("\n")
    lines[at : at + 1] = [f"{indent}{'%edited' if rest else result} = {first}"] + [
        indent + r.replace("%V", result) for r in rest
    ]
    res = codegen_executable_text("\n".join(lines), CodegenOptions(target="sm_90a"))
    assert not res.taken
    assert any(why in x for x in res.log), res.log


def test_mmaflow_report(tmp_path):
    """`mmaflow report` prints the weight-only kernel's plan and its ISA's counts; the HTML page
    holds the plan and the resources and instruction-mix sections."""
    import subprocess
    import sys
    from pathlib import Path

    src = tmp_path / "wo.mlir"
    src.write_text(weight_only_module(16, 256, 1024, 128))
    mmaflow = str(Path(sys.executable).parent / "mmaflow")
    out = subprocess.run([mmaflow, "report", str(src), "--target", "gfx942"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "kernel: weight-only 16x256x1024 f16 x u4" in out.stdout and "VGPR spills" in out.stdout, out.stdout
    html = subprocess.run(
        [mmaflow, "report", str(src), "--target", "gfx942", "--html", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
    )
    assert html.returncode == 0, html.stderr[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert "weight-only 16x256x1024 f16 x u4" in page
    assert all(f'-{s}"' in page for s in ("plan", "resources", "mix", "kloop")), page[:2000]


def test_stock_route_verify(tmp_path):
    """`iree-compile $(mmaflow flags ...)` builds the weight-only kernel through the hook, and `mmaflow
    verify` finds it in the .vmfb (byte-identical to mmaflow compile's, PTX checked)."""
    import subprocess
    import sys
    from pathlib import Path

    src = tmp_path / "wo.mlir"
    src.write_text(weight_only_module(8, 128, 1024, 128))
    bin_ = Path(sys.executable).parent
    flags = subprocess.run(
        [str(bin_ / "mmaflow"), "flags", "--target", "sm_80"], capture_output=True, text=True, check=True
    ).stdout.split()
    vmfb = tmp_path / "wo.vmfb"
    built = subprocess.run(
        [str(bin_ / "iree-compile"), str(src), *flags, "-o", str(vmfb)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr[-2000:]
    out = subprocess.run(
        [str(bin_ / "mmaflow"), "verify", str(vmfb), "--source", str(src), "--target", "sm_80"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "verified weight_only_dispatch_0" in out.stderr and "PTX checked in the file" in out.stdout, out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [45, 128])
def test_static_row_blocks(target, m):
    """A static M past two row tiles, up to the seeds' 128 rows: row blocks of 32 (CDNA: one 32-row
    MFMA pass up to 64 rows), the last one partial, against the reference interpreter."""
    from mmaflow.runtime.model_check import check_executable

    (exe,) = codegen_module(weight_only_module(m, 64, 512, 128, as_bytes=False, signed=True), target).taken
    blocks = any("M in row blocks of 32" in x for x in exe.log)
    assert blocks == (m > (64 if target in ("gfx942", "gfx950") else 32)), exe.log
    (check,) = check_executable(exe)
    assert check.passed, check.detail
