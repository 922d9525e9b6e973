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
from mmaflow.compiler.core.mlir import new_context, parse_module, segments, walk
from mmaflow.compiler.driver import causal_masks
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.runtime.model_check import check_executable
from mmaflow.runtime.modules import causal_attention_module

# A mask of these tests' sizes IREE would compute once, in an initializer (below its hoisting threshold); at a
# model's sizes (GPT-2's 3 MB, the benchmark's) it is a dispatch of every call. Hoisting off: the latter here.
NO_HOIST = ["--iree-opt-const-expr-hoisting=false"]


def _module(
    b=1, h=2, s=130, d=64, dt="f16", cmp="sge", lhs="%i", rhs="%j", neg="0xFC00", extra="", result=False, ctype="index"
):
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
    %c = arith.cmpi {cmp}, {lhs}, {rhs} : {ctype}
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
    dispatch of its own; mmaflow proves it causal, removes that dispatch from the host program once the
    kernel took the attention, and the kernel (sampled workgroups, the mask's bytes NaN) matches the
    causal float64 reference."""
    res = codegen_module(
        causal_attention_module(1, 2, 200, 64, dtype),
        target,
        require_matmul=False,
        extra_flags=NO_HOIST,
    )
    exe = _attention(res)
    attn = exe.facts.problem.attention
    assert attn.causal.startswith("written by attention$async_dispatch_0_elementwise_broadcast")
    assert "causal (written by" in attn.mask
    (config,) = [line for line in res.log if line.startswith(f"mmaflow: config {exe.name}")]
    assert ", causal;" in config and "mask" not in config.split(";")[0], config  # the plan reads no mask
    assert exe.facts.problem.mask is not None  # (where it lives stays recorded)
    assert len(_lines(res, "its mask is the causal pattern")) == 1
    assert len(_lines(res, "dispatch removed (only mmaflow's causal attention reads it)")) == 1
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
        (
            dict(
                extra="%i8 = arith.index_cast %i : index to i8\n    %j8 = arith.index_cast %j : index to i8",
                lhs="%i8",
                rhs="%j8",
                ctype="i8",
            ),
            False,
        ),  # positions compared as i8: rows past 127 wrap
    ],
    ids=["causal", "key-le-query", "unsigned", "diagonal-masked", "transposed", "finite", "shifted", "narrowed"],
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


def _prove(module) -> list[str]:
    """prove, then remove as the bridge does when codegen took every stamped attention."""
    proof = causal_masks.prove(module)
    return proof.log + proof.remove({e.split("::")[0] for e in proof.stamped})


def test_the_unedited_host_program_is_proven(sources):
    module = parse_module(sources, new_context())
    log = _prove(module)
    assert _stamped(module) and any("dispatch removed" in line for line in log), log


def test_a_generator_after_the_attention_proves_nothing(sources):
    module = parse_module(sources, new_context())
    gen, att = _dispatches(module)
    gen.move_after(att)
    log = _prove(module)
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
        offsets = segments(clone)[4]
        shifted = ir.Operation.create(
            "arith.constant",
            results=[ir.IndexType.get()],
            attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), 2)},
            ip=ir.InsertionPoint(clone),
        )
        index = list(clone.operands).index(offsets[0])
        clone.operands[index] = shifted.results[0]
    log = _prove(module)
    assert not _stamped(module) and not any("dispatch removed" in line for line in log), log


# ---- GQA: the query heads sharing a KV head folded into the rows, each head's positions from 0 ------------


def _gqa_module(b, hq, hkv, s, d, dt="f16"):
    """scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True) in the torch dialect."""
    tq, tk = f"!torch.vtensor<[{b},{hq},{s},{d}],{dt}>", f"!torch.vtensor<[{b},{hkv},{s},{d}],{dt}>"
    return (
        f"func.func @attention(%q: {tq}, %k: {tk}, %v: {tk}) -> {tq} {{\n"
        "  %none = torch.constant.none\n  %dropout = torch.constant.float 0.000000e+00\n"
        "  %causal = torch.constant.bool true\n  %gqa = torch.constant.bool true\n"
        "  %o = torch.aten.scaled_dot_product_attention %q, %k, %v, %none, %dropout, %causal, %none, %gqa : "
        f"{tq}, {tk}, {tk}, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> {tq}\n"
        f"  return %o : {tq}\n}}\n"
    )


@pytest.mark.parametrize(
    "target,s",
    [("sm_90a", 128), ("sm_80", 100), pytest.param("gfx942", 128, marks=pytest.mark.exhaustive)],
)
def test_gqa_causal_is_proven_with_its_restarting_positions(target, s):
    """Llama-3's prefill (32 query heads over 8 KV heads, here 4 over 2): IREE folds each KV head's query
    heads into the attention's rows (M = 2 x seq) and writes the mask comparing (row mod seq) with the key.
    Proven with positions restarting every seq rows; the kernel (sampled workgroups, the mask NaN) against
    that reference. Seq 100: a block of 64 rows crosses a restart."""
    res = codegen_module(_gqa_module(1, 4, 2, s, 64), target, require_matmul=False, extra_flags=NO_HOIST)
    exe = _attention(res)
    attn = exe.facts.problem.attention
    assert attn.m == 2 * s and attn.causal and attn.causal_rows == s, attn
    assert f"query positions restarting every {s} rows" in attn.mask
    config = [line for line in res.log if line.startswith(f"mmaflow: config {exe.name}")]
    assert f"causal (positions restart every {s} rows)" in config[0] and "mask" not in config[0].split(";")[0], config
    (c,) = check_executable(exe, seed=2, sample=4)
    assert c.passed, c.line()


def test_a_causal_attention_left_to_iree_keeps_its_mask_written():
    """f32 attention: proven causal, but the kernel takes f16 / bf16 only, so IREE compiles it and its
    code reads the mask: the writer stays."""
    res = codegen_module(_module(dt="f32", neg="0xFF800000"), "sm_80", require_matmul=False, extra_flags=NO_HOIST)
    assert not [e for e in res.taken if e.facts.is_attention]
    assert _lines(res, "its mask is the causal pattern")
    assert not _lines(res, "dispatch removed")
    (kept,) = _lines(res, ": kept (")
    assert "reads it (left to IREE)" in kept, kept


# ---- GPT-2's host program (Q, K, V and the mask in one binding) with a command added ------------------

_ONE = "layout(<bindings = [#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>)"
_TWO = (
    'layout(<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, '
    "#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>)"
)


def _executable(name: str, layout: str, body: str) -> str:
    return f"""  hal.executable private @{name} {{
    hal.executable.variant public @cuda_nvptx_fb target(<"cuda", "cuda-nvptx-fb">) {{
      hal.executable.export public @{name} ordinal(0) {layout.replace("layout(", "layout(#hal.pipeline.layout", 1)}
          count(%arg0: !hal.device) -> (index, index, index) {{
        %x, %y, %z = iree_tensor_ext.dispatch.workgroup_count_from_slice()
        hal.return %x, %y, %z : index, index, index
      }}
      builtin.module {{
        func.func @{name}() {{
{body}
          return
        }}
      }}
    }}
  }}
"""


@pytest.fixture(scope="module")
def gpt2_sources(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("gpt2") / "sources.mlir"
    src = Path(__file__).parent / "models" / "gpt2_sdpa_f16.mlir"
    iree_compile = str(Path(sys.executable).parent / "iree-compile")
    args = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_90a", "--compile-to=executable-sources"]
    subprocess.run([iree_compile, str(src), *args, "-o", str(path)], check=True, capture_output=True)
    return path.read_text()


def _ones(i: int, offset: int, n: int) -> str:
    """A dispatch body's lines storing ``n`` f16 ones at byte ``offset`` of binding 0 (its subspan ``i``)."""
    t, dt = f"tensor<{n}xf16>", f"!iree_tensor_ext.dispatch.tensor<writeonly:tensor<{n}xf16>>"
    return f"""          %cst{i} = arith.constant 1.0 : f16
          %off{i} = arith.constant {offset} : index
          %s{i} = hal.interface.binding.subspan {_ONE} binding(0) alignment(64) offset(%off{i}) flags(Indirect) : {dt}
          %e{i} = tensor.empty() : {t}
          %f{i} = linalg.fill ins(%cst{i} : f16) outs(%e{i} : {t}) -> {t}
          iree_tensor_ext.dispatch.tensor.store %f{i}, %s{i}, offsets = [0], sizes = [{n}], strides = [1] : {t} -> {dt}"""


def _with_command(sources: str, exe: str, before: str, command: str) -> str:
    anchor = "  hal.executable private @main$async_dispatch_7 {"
    site = f"      stream.cmd.dispatch @main$async_dispatch_{before}::"
    assert sources.count(anchor) == 1 and sources.count(site) == 1
    return sources.replace(anchor, exe + anchor).replace(site, command + site)


def test_gpt2_host_program_is_proven(gpt2_sources):
    module = parse_module(gpt2_sources, new_context())
    log = _prove(module)
    assert _stamped(module) and any("dispatch removed" in line for line in log), log


def test_a_write_through_a_binding_s_other_subspan_proves_nothing(gpt2_sources):
    """Between the mask's writer and the attention, a dispatch writes 16 values over the mask's first
    bytes through the first of its two subspans on the binding (the second far from the mask)."""
    body = _ones(0, 4718592, 16) + "\n" + _ones(1, 0, 32)
    command = """      stream.cmd.dispatch @X::@cuda_nvptx_fb::@X {
        wo %arg17[%c0 for %c7864320] : !stream.resource<transient>{%c7864320}
      }
"""
    module = parse_module(_with_command(gpt2_sources, _executable("X", _ONE, body), "7", command), new_context())
    log = _prove(module)
    assert not _stamped(module) and not any("dispatch removed" in line for line in log), log


def test_a_later_read_through_a_binding_s_other_subspan_keeps_the_writer(gpt2_sources):
    """After the attention, a dispatch reads the mask's first bytes through the first of its subspans on
    the binding (out to the function's result): proven, but the writer stays."""
    body = f"""          %a = arith.constant 4718592 : index
          %c0 = arith.constant 0 : index
          %0 = hal.interface.binding.subspan {_TWO} binding(0) alignment(64) offset(%a) flags("ReadOnly|Indirect")
              : !iree_tensor_ext.dispatch.tensor<readonly:tensor<16xf16>>
          %1 = hal.interface.binding.subspan {_TWO} binding(0) alignment(64) offset(%c0) flags("ReadOnly|Indirect")
              : !iree_tensor_ext.dispatch.tensor<readonly:tensor<16xf16>>
          %2 = hal.interface.binding.subspan {_TWO} binding(1) alignment(64) offset(%c0) flags(Indirect)
              : !iree_tensor_ext.dispatch.tensor<writeonly:tensor<16xf16>>
          %x = iree_tensor_ext.dispatch.tensor.load %0, offsets = [0], sizes = [16], strides = [1]
              : !iree_tensor_ext.dispatch.tensor<readonly:tensor<16xf16>> -> tensor<16xf16>
          iree_tensor_ext.dispatch.tensor.store %x, %2, offsets = [0], sizes = [16], strides = [1]
              : tensor<16xf16> -> !iree_tensor_ext.dispatch.tensor<writeonly:tensor<16xf16>>"""
    command = """      stream.cmd.dispatch @Y::@cuda_nvptx_fb::@Y {
        ro %arg17[%c0 for %c7864320] : !stream.resource<transient>{%c7864320},
        wo %arg16[%c0 for %c786432] : !stream.resource<external>{%c786432}
      }
"""
    module = parse_module(_with_command(gpt2_sources, _executable("Y", _TWO, body), "8", command), new_context())
    log = _prove(module)
    assert _stamped(module), log
    assert not any("dispatch removed" in line for line in log) and any("Y reads it" in line for line in log), log


def test_a_generator_storing_under_control_flow_proves_nothing(gpt2_sources):
    """The mask's writer stores under an ``scf.if`` on a push constant (here 1: it never stores): not a
    generator, the mask is read and the writer stays."""
    import re

    head, rest = gpt2_sources.split("  hal.executable private @main$async_dispatch_6 {", 1)
    exe6, tail = rest.split("  hal.executable private @main$async_dispatch_7 {", 1)
    one = "<bindings = [#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>"
    exe6 = exe6.replace(one, one.replace("<bindings", "<constants = 1, bindings"))
    store = re.search(r"( +)(iree_tensor_ext\.dispatch\.tensor\.store %2, %0.*\n)", exe6)
    ind, layout = store.group(1), one.replace("<bindings", "<constants = 1, bindings")
    guarded = (
        f"{ind}%pc = hal.interface.constant.load layout({layout}) ordinal(0) : i32\n"
        f"{ind}%z = arith.constant 0 : i32\n{ind}%cond = arith.cmpi eq, %pc, %z : i32\n"
        f"{ind}scf.if %cond {{\n{ind}  {store.group(2)}{ind}}}\n"
    )
    exe6 = exe6.replace(store.group(0), guarded)
    site = "stream.cmd.dispatch @main$async_dispatch_6::@cuda_nvptx_fb::@main$async_dispatch_6_elementwise_broadcast_1572864_f16"
    text = head + "  hal.executable private @main$async_dispatch_6 {" + exe6
    text += "  hal.executable private @main$async_dispatch_7 {" + tail
    text = text.replace(site + " {", site + "(%c1_i32 : i32) {")
    text = text.replace(
        "    %c0_i32 = arith.constant 0 : i32\n",
        "    %c0_i32 = arith.constant 0 : i32\n    %c1_i32 = arith.constant 1 : i32\n",
        1,
    )
    module = parse_module(text, new_context())
    assert module.operation.verify()
    log = _prove(module)
    assert not _stamped(module) and not any("dispatch removed" in line for line in log), log


def test_a_write_through_a_second_capture_of_the_resource_proves_nothing(gpt2_sources):
    """The region captures the mask's resource twice; a dispatch writes over the mask's first bytes through
    the second name: one resource, so the write is seen."""
    body = _ones(0, 4718592, 16)
    command = """      stream.cmd.dispatch @X::@cuda_nvptx_fb::@X {
        wo %arg18[%c0 for %c7864320] : !stream.resource<transient>{%c7864320}
      }
"""
    text = _with_command(gpt2_sources, _executable("X", _ONE, body), "7", command)
    capture = "%result_0 as %arg17: !stream.resource<transient>{%c7864320})"
    assert text.count(capture) == 1
    text = text.replace(capture, capture[:-1] + ", %result_0 as %arg18: !stream.resource<transient>{%c7864320})")
    module = parse_module(text, new_context())
    assert module.operation.verify()
    log = _prove(module)
    assert not _stamped(module) and not any("dispatch removed" in line for line in log), log


def test_a_mask_the_attention_dispatch_also_reads_elsewhere_proves_nothing(gpt2_sources):
    """Inside the attention dispatch the mask's load has a second user: the kernel, which replaces the
    attention op alone, could not vouch that nothing else needs the mask's bytes."""
    load = (
        "          %8 = iree_tensor_ext.dispatch.tensor.load %3, offsets = [0, 0, 0, 0], sizes = [2, 12, 256, 256], "
        "strides = [1, 1, 1, 1] : !iree_tensor_ext.dispatch.tensor<readonly:tensor<2x12x256x256xf16>> "
        "-> tensor<2x12x256x256xf16>\n"
    )
    assert gpt2_sources.count(load) == 1
    extra = "          %other = tensor.extract_slice %8[0, 0, 0, 0] [1, 1, 1, 1] [1, 1, 1, 1] : tensor<2x12x256x256xf16> to tensor<1x1x1x1xf16>\n"
    module = parse_module(gpt2_sources.replace(load, load + extra), new_context())
    assert module.operation.verify()
    log = _prove(module)
    assert not _stamped(module) and not any("dispatch removed" in line for line in log), log


def test_push_constant_offsets_read_unsigned():
    """IREE loads a subspan's offset as an i32 push constant through arith.index_castui: 3e9 bytes is
    3e9, not the i32's negative value; through a signed cast a negative offset is no offset at all; a 64-bit
    offset in two push constants is lo | hi << 32."""
    from mmaflow.compiler.core.causal import Offset
    from mmaflow.compiler.driver.host_program import push_value

    module = parse_module(
        "func.func @f() {\n  %a = arith.constant -1294967296 : i32\n  %b = arith.constant -5 : i32\n"
        "  %c = arith.constant 7 : i32\n  %d = arith.constant 64 : i32\n  %e = arith.constant 1 : i32\n"
        "  return\n}",
        new_context(),
    )
    (func,) = module.body.operations
    push = [op.results[0] for op in func.regions[0].blocks[0].operations if op.name == "arith.constant"]
    assert push_value(push, Offset(ordinal=0, unsigned=True)).constant == 3_000_000_000
    assert push_value(push, Offset(ordinal=1)) is None
    assert push_value(push, Offset(ordinal=3, unsigned=True)).constant == 64
    assert push_value(push, Offset(value=128)).constant == 128
    assert push_value(push, Offset(ordinal=2, unsigned=True, high=4)).constant == 7 + (1 << 32)
