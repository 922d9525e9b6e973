"""Causal masks proven through the host program (``compiler/driver/causal_masks.py``,
``compiler/core/causal.py``): PyTorch's ``is_causal=True`` as iree-turbine exports it, and a mask
generator IREE hoists into an initializer, are proven causal; the kernel then skips the masked
tiles and never reads the mask, which the lane executor checks by filling it with NaN. Every
near miss (the diagonal masked too, a finite "minus infinity", a shifted diagonal, the generator
moved or overwritten in the host program) leaves the mask read, and a mask anything else reads
keeps its writer."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from mmaflow.compiler.core.causal import CAUSAL_MASK
from mmaflow.compiler.core.mlir import new_context, parse_module, walk
from mmaflow.compiler.driver import causal_masks
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.runtime.model_check import check_executable
from mmaflow.runtime.modules import causal_attention_module

# A mask of these tests' sizes IREE would compute once, in an initializer (below its hoisting threshold); at a
# model's sizes (GPT-2's 3 MB, the benchmark's) it is a dispatch of every call. Hoisting off: the latter here.
NO_HOIST = ["--iree-opt-const-expr-hoisting=false"]


def _module(b=1, h=2, s=130, d=64, dt="f16", cmp="sge", lhs="%i", rhs="%j", neg="0xFC00", extra="", result=False):
    """Attention reading a (b, h, s, s) additive mask a generic writes from its indices alone:
    ``select(cmpi cmp lhs, rhs, 0, neg)``, %i the query and %j the key; ``result``: the mask is
    returned as well."""
    t4, m4 = f"tensor<{b}x{h}x{s}x{d}x{dt}>", f"tensor<{b}x{h}x{s}x{s}x{dt}>"
    f3, m3 = f"tensor<{b * h}x{s}x{d}x{dt}>", f"tensor<{b * h}x{s}x{s}x{dt}>"
    dims = "(b, m, n, k1, k2)"
    maps = ", ".join(
        f"affine_map<{dims} -> ({r})>" for r in ("b, m, k1", "b, k2, k1", "b, k2, n", "", "b, m, k2", "b, m, n")
    )
    ret, rtype = (f"%r, %mask : {t4}, {m4}", f"{t4}, {m4}") if result else (f"%r : {t4}", t4)
    return f"""
func.func @attention(%q: {t4}, %k: {t4}, %v: {t4}) -> ({rtype}) {{
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : {m4}
  %mask = linalg.generic {{indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}} outs(%e : {m4}) {{
  ^bb0(%out: {dt}):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    {extra}
    %c = arith.cmpi {cmp}, {lhs}, {rhs} : index
    %z = arith.constant 0.0 : {dt}
    %n = arith.constant {neg} : {dt}
    %r = arith.select %c, %z, %n : {dt}
    linalg.yield %r : {dt}
  }} -> {m4}
  %q1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : {t4} into {f3}
  %k1 = tensor.collapse_shape %k [[0, 1], [2], [3]] : {t4} into {f3}
  %v1 = tensor.collapse_shape %v [[0, 1], [2], [3]] : {t4} into {f3}
  %m1 = tensor.collapse_shape %mask [[0, 1], [2], [3]] : {m4} into {m3}
  %eo = tensor.empty() : {f3}
  %o = iree_linalg_ext.attention <{{indexing_maps = [{maps}]}}>
       ins(%q1, %k1, %v1, %scale, %m1 : {f3}, {f3}, {f3}, f32, {m3}) outs(%eo : {f3}) {{
  ^bb0(%x: f32):
    iree_linalg_ext.yield %x : f32
  }} -> {f3}
  %r = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [{b}, {h}, {s}, {d}] : {f3} into {t4}
  return {ret}
}}
"""


def _attention(res):
    (exe,) = [e for e in res.taken if e.facts.is_attention]
    return exe


def _lines(res, what: str) -> list[str]:
    return [line for line in res.log if what in line]


@pytest.mark.parametrize(
    "target,dtype",
    [
        ("sm_90a", "f16"),
        ("gfx942", "bf16"),
        pytest.param("sm_80", "bf16", marks=pytest.mark.exhaustive),
        pytest.param("gfx1100", "f16", marks=pytest.mark.exhaustive),
    ],
)
def test_turbine_causal_sdpa_is_proven_and_its_mask_never_read(target, dtype):
    """``scaled_dot_product_attention(is_causal=True)`` in the torch dialect: IREE writes the mask in a
    dispatch of its own; mmaflow proves it causal, removes that dispatch from the host program, and the
    kernel (sampled workgroups, the mask's bytes NaN) matches the causal float64 reference."""
    res = codegen_module(
        causal_attention_module(1, 2, 200, 64, dtype),
        target,
        require_matmul=False,
        options=CodegenOptions(dump_after="front"),
        extra_flags=NO_HOIST,
    )
    exe = _attention(res)
    attn = exe.facts.problem.attention
    assert attn.causal.startswith("written by attention$async_dispatch_0_elementwise_broadcast")
    assert "causal (written by" in attn.mask and attn.mask.endswith("not read")
    assert exe.facts.problem.mask is not None  # (where it lives stays recorded)
    assert len(_lines(res, "its mask is the causal pattern")) == 1
    assert len(_lines(res, "dispatch removed (only causal attention reads what it writes)")) == 1
    assert "elementwise_broadcast" not in "\n".join(
        line for line in res.front_text.splitlines() if "stream.cmd.dispatch" in line
    )
    (c,) = check_executable(exe, seed=3, sample=3)
    assert c.passed, c.line()


def test_a_mask_hoisted_into_an_initializer_is_proven():
    """IREE computes a small input-independent mask once, in an initializer storing an immutable global:
    proven through the global, its writer kept (it runs once, at load)."""
    res = codegen_module(_module(), "sm_80", require_matmul=False)
    exe = _attention(res)
    assert exe.facts.problem.attention.causal.startswith("written by _initializer_0_dispatch_0")
    (kept,) = _lines(res, ": kept (")
    assert "_initializer_0_dispatch_0" in kept and "resource<constant>" in kept
    (c,) = check_executable(exe, seed=5, sample=3)
    assert c.passed, c.line()


@pytest.mark.parametrize(
    "edit,proven",
    [
        (dict(), True),
        (dict(cmp="sle", lhs="%j", rhs="%i"), True),  # key <= query: the same pattern
        (dict(cmp="uge"), True),  # (indices are never negative)
        (dict(cmp="sgt"), False),  # the diagonal masked too
        (dict(cmp="sge", lhs="%j", rhs="%i"), False),  # the transpose: keys after the query kept
        (dict(neg="-6.550400e+04"), False),  # a finite "minus infinity"
        (
            dict(extra="%c1 = arith.constant 1 : index\n    %i1 = arith.addi %i, %c1 : index", lhs="%i1"),
            False,
        ),  # the diagonal shifted by one
    ],
    ids=["causal", "key-le-query", "unsigned", "diagonal-masked", "transposed", "finite", "shifted"],
)
def test_only_the_causal_pattern_is_proven(edit, proven):
    """Per-call generators (hoisting off): the causal pattern and its equivalent spellings are proven,
    every near miss leaves the mask read (and its writer in place)."""
    res = codegen_module(_module(**edit), "sm_80", require_matmul=False, extra_flags=NO_HOIST)
    attn = _attention(res).facts.problem.attention
    assert bool(attn.causal) == proven, res.log
    assert len(_lines(res, "dispatch removed")) == int(proven)
    if not proven:
        assert attn.mask.endswith("whether causal is in its data")
        assert _lines(res, "its mask is read (not proven causal at every call)")


def test_a_mask_also_returned_keeps_its_writer():
    """The mask is a result of the function as well: proven, but its writer stays."""
    res = codegen_module(_module(result=True), "sm_80", require_matmul=False, extra_flags=NO_HOIST)
    assert _attention(res).facts.problem.attention.causal
    assert not _lines(res, "dispatch removed")
    (kept,) = _lines(res, ": kept (")
    assert "external" in kept or "reads it" in kept, kept


def test_a_kernel_reading_a_proven_mask_fails_the_check():
    """The NaN fill catches a kernel that reads the mask the facts say is causal: the not-proven
    kernel (it reads the mask) checked as if proven."""
    res = codegen_module(_module(cmp="sgt"), "sm_80", require_matmul=False)
    exe = _attention(res)
    rec = exe.facts.problem
    lying = dataclasses.replace(rec, attention=dataclasses.replace(rec.attention, causal="claimed"))
    exe = dataclasses.replace(exe, facts=dataclasses.replace(exe.facts, problem=lying))
    (c,) = check_executable(exe, seed=5, sample=2)
    assert not c.passed and "outside the bound" in c.line()


# ---- the host program edited: the proof must fail where the order or the bytes do not hold ----------


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> str:
    """The turbine causal SDPA at executable-sources (sm_80)."""
    path = tmp_path_factory.mktemp("causal") / "sources.mlir"
    src = path.with_suffix(".in.mlir")
    src.write_text(causal_attention_module(1, 2, 200, 64, "f16"))
    iree_compile = str(Path(sys.executable).parent / "iree-compile")
    subprocess.run(
        [
            iree_compile,
            str(src),
            "--iree-hal-target-device=cuda",
            "--iree-cuda-target=sm_80",
            "--compile-to=executable-sources",
            *NO_HOIST,
            "-o",
            str(path),
        ],
        check=True,
        capture_output=True,
    )
    return path.read_text()


def _dispatches(module):
    ops = [o for o in walk(module.operation) if o.name == "stream.cmd.dispatch"]
    gen = [o for o in ops if "elementwise_broadcast" in str(o.attributes["entry_points"])]
    att = [o for o in ops if "attention" in str(o.attributes["entry_points"]) and o not in gen]
    return gen[0], att[0]


def _stamped(module) -> bool:
    return any(CAUSAL_MASK in o.attributes for o in walk(module.operation) if o.name == "iree_linalg_ext.attention")


def test_the_unedited_host_program_is_proven(sources):
    module = parse_module(sources, new_context())
    log = causal_masks.prove(module)
    assert _stamped(module) and any("dispatch removed" in line for line in log), log


def test_a_generator_after_the_attention_proves_nothing(sources):
    module = parse_module(sources, new_context())
    gen, att = _dispatches(module)
    gen.move_after(att)
    log = causal_masks.prove(module)
    assert not _stamped(module) and not any("dispatch removed" in line for line in log), log


def test_a_write_over_part_of_the_mask_proves_nothing(sources):
    """A second copy of the generator, two bytes further on in the same resource, between the generator and
    the attention: the last write over the mask's bytes is not the whole mask's."""
    from iree.compiler import ir

    module = parse_module(sources, new_context())
    gen, _ = _dispatches(module)
    with module.context, ir.Location.unknown():
        clone = gen.clone(ir.InsertionPoint(gen))
        gen.move_before(clone)
        offsets = causal_masks._segments(clone)[4]
        shifted = ir.Operation.create(
            "arith.constant",
            results=[ir.IndexType.get()],
            attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), 2)},
            ip=ir.InsertionPoint(clone),
        )
        index = list(clone.operands).index(offsets[0])
        clone.operands[index] = shifted.results[0]
    log = causal_masks.prove(module)
    assert not _stamped(module) and not any("dispatch removed" in line for line in log), log
