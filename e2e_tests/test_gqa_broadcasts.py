"""GQA's KV broadcasts read through (``compiler/driver/gqa_broadcasts.py``): the decoder step's attention
rewritten to read its cache where it lies, the broadcasts removed; and the proof refusing what it must.

The rewrite is a host-program transformation, the same whichever backend compiles the dispatches:
the decoder step is built for IREE's llvm-cpu backend with the rewrite between its phases and run on
the CPU against numpy, at cache lengths where a wrong KV head, a stale broadcast or a misplaced offset
shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from iree.compiler import api

from mmaflow.compiler.core.mlir import new_context, parse_module, print_op
from mmaflow.compiler.driver import gqa_broadcasts
from mmaflow.compiler.driver.bridge import lower_to_vmfb, run_phases

MODELS = Path(__file__).parent / "models"
CPU = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu"]
FOLDED = (
    "mmaflow: main$async_dispatch_9_attention_32x64x64xD: GQA folded: K and V read where "
    "main$async_dispatch_7_elementwise_broadcast_8x4xD_f16, main$async_dispatch_8_elementwise_broadcast_8x4x64xD_f16 "
    "read them, 4 query heads a KV head as the rows (batch 8, 4 queries)"
)
REMOVED = [
    "mmaflow: main$async_dispatch_7_elementwise_broadcast_8x4xD_f16: dispatch removed (its broadcast is read by "
    "nothing any more)",
    "mmaflow: main$async_dispatch_8_elementwise_broadcast_8x4x64xD_f16: dispatch removed (its broadcast is read by "
    "nothing any more)",
]


def _front(session: api.Session, source: str):
    return run_phases(session, source, to="executable-sources", name="step.mlir")


def _cpu_build(source: str, rewrite=gqa_broadcasts.fold) -> tuple[bytes, list[str]]:
    """The module for llvm-cpu, ``rewrite`` applied to its host program at executable-sources."""
    session = api.Session()
    session.set_flags(*CPU)
    module = _front(session, source)
    log = rewrite(module)
    return lower_to_vmfb(session, module, start="executable-sources"), log


def _weights(rng) -> dict[str, np.ndarray]:
    shapes = {"q_proj.weight": (1024, 1024), "k_proj.weight": (256, 1024), "v_proj.weight": (256, 1024)}
    shapes["o_proj.weight"] = (1024, 1024)
    return {k: rng.normal(0, 0.02, s).astype(np.float16) for k, s in shapes.items()}


def _reference(w, x, kc, vc) -> np.ndarray:
    """The decoder step in float64 from the f16 data, its projections rounded to f16 as the module stores them."""
    f = np.float64

    def linear(a, weight):
        return (a.astype(f) @ weight.astype(f).T).astype(np.float16)

    q = linear(x, w["q_proj.weight"]).reshape(2, 16, 64)  # (one token: [2, 1, 16, 64] -> [2, 16, 64])
    k = np.concatenate([kc, linear(x, w["k_proj.weight"]).reshape(2, 4, 1, 64)], axis=2).astype(f)
    v = np.concatenate([vc, linear(x, w["v_proj.weight"]).reshape(2, 4, 1, 64)], axis=2).astype(f)
    kv = np.arange(16) // 4  # enable_gqa: query head h reads KV head h // (16 / 4)
    s = np.einsum("bhd,bhkd->bhk", q.astype(f), k[:, kv]) * 0.125
    p = np.exp(s - s.max(-1, keepdims=True))
    o = np.einsum("bhk,bhkd->bhd", p / p.sum(-1, keepdims=True), v[:, kv]).astype(np.float16)
    return (o.reshape(2, 1, 1024).astype(f) @ w["o_proj.weight"].astype(f).T).astype(np.float16) + x.astype(f)


def test_the_decoder_step_reads_its_cache_where_it_lies(tmp_path):
    """llama_decode built for the CPU with the rewrite: the attention folded, both broadcasts gone, and the
    step right against numpy at cache lengths 1, 77 (V's rows not 16-byte multiples of a tile) and 300."""
    import iree.runtime as rt

    vmfb, log = _cpu_build((MODELS / "llama_decode_f16.mlir").read_text())
    assert log == [FOLDED, *REMOVED], log
    rng = np.random.default_rng(3)
    w = _weights(rng)
    index = rt.ParameterIndex()
    for key, arr in w.items():
        meta = {"type": "Tensor", "dtype": "float16", "shape": list(arr.shape)}
        index.add_buffer(key, arr.reshape(-1).view(np.uint8), metadata="PYTORCH:" + json.dumps(meta))
    config = rt.Config("local-task")
    params = rt.create_io_parameters_module(config.vm_instance, index.create_provider(scope="model"))
    (tmp_path / "step.vmfb").write_bytes(vmfb)
    module = rt.VmModule.mmap(config.vm_instance, str(tmp_path / "step.vmfb"))
    ctx = rt.SystemContext(vm_modules=[params, module], config=config)
    for cache in (1, 77, 300):
        x = rng.normal(0, 1, (2, 1, 1024)).astype(np.float16)
        kc, vc = (rng.normal(0, 1, (2, 4, cache, 64)).astype(np.float16) for _ in range(2))
        out = np.asarray(ctx.modules[module.name]["main"](x, kc, vc).to_host()).astype(np.float64)
        ref = _reference(w, x, kc, vc)
        # f16 storage of q, k, v, the attention's output and the result: ~1e-3 relative; a wrong KV head
        # or a stale cache copy is off by the attention's whole contribution (~1e-1 of the residual)
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        assert err < 2e-3, (cache, err)
        attn = out - x.astype(np.float64)
        err_attn = np.linalg.norm(attn - (ref - x)) / np.linalg.norm(ref - x)
        assert err_attn < 2e-2, (cache, err_attn)


def _host(source: str):
    session = api.Session()
    session.set_flags(*CPU)
    return print_op(_front(session, source))


@pytest.fixture(scope="module")
def front_text() -> str:
    """The decoder step's program at executable-sources (llvm-cpu), before the rewrite."""
    return _host((MODELS / "llama_decode_f16.mlir").read_text())


def _fold_text(text: str) -> tuple[list[str], str]:
    module = parse_module(text, new_context())
    log = gqa_broadcasts.fold(module)
    return log, print_op(module)


def _call(text: str, n: int) -> str:
    """The text of the program's call of dispatch ``n`` (one ``stream.cmd.dispatch`` with its bindings)."""
    m = re.search(r"\n( *)stream\.cmd\.dispatch @main\$async_dispatch_%d::[^\n]*\n(?:\1  [^\n]*\n)*?\1\}\n" % n, text)
    assert m, n
    return m.group(0)


def test_the_rewrite_keeps_the_program_valid_and_the_log_names_it(front_text):
    log, text = _fold_text(front_text)
    assert log == [FOLDED, *REMOVED]
    assert "dispatch_7" not in text and "dispatch_8" not in text  # (their executables too)
    call = _call(text, 9)
    # K from dispatch 7's source (its constant offset 8192, as two i32 push constants), V from dispatch 8's
    assert re.search(r"\(%c8192_i32[_0-9]*, %c0_i32[_0-9]*, ", call) or re.search(r"\(%c8192_i32, %c0_i32", call), call
    assert "tensor<8x4x64xf16>" in text and "tensor<8x?x64xf16>" in text


def test_a_write_to_the_cache_between_broadcast_and_attention_keeps_the_broadcasts(front_text):
    """Dispatch 4 (the new token into V's cache) run again after the broadcasts: V's source is not what
    dispatch 8 copied when the attention runs, so nothing is rewritten."""
    v_token = [c for c in re.finditer(r"stream\.cmd\.dispatch @main\$async_dispatch_4::", front_text)][-1]
    block = _call(front_text[v_token.start() - 200 :], 4)
    attention = _call(front_text, 9)
    text = front_text.replace(attention, block + attention)
    log, after = _fold_text(text)
    assert log == [
        "mmaflow: main$async_dispatch_9_attention_32x64x64xD: K and V read as the broadcasts write them "
        "(main$async_dispatch_4_slow_memcpy writes main$async_dispatch_8_elementwise_broadcast_8x4x64xD_f16's "
        "input before the attention reads it)"
    ], log
    assert after == print_op(parse_module(text, new_context()))


def test_a_broadcast_someone_else_reads_stays(front_text):
    """A dispatch after the attention reading what dispatch 7 wrote (the copy function, reading from K's
    broadcast, %16, as many bytes as one cache): the attention reads the cache all the same; dispatch 7
    stays for that reader, dispatch 8 goes."""
    attention = _call(front_text, 9)
    variant = re.search(r"@main\$async_dispatch_9::@(\w+)::", attention).group(1)
    indent = re.match(r"\n( *)", attention).group(1)
    reader = (
        f"{indent}stream.cmd.dispatch @main$async_dispatch_3::@{variant}::@main$async_dispatch_3_slow_memcpy"
        "[%2, %8](%c8192_i32, %c0_i32, %25, %27, %25, %27 : i32, i32, i32, i32, i32, i32) {\n"
        f"{indent}  ro %arg13[%16 for %9] : !stream.resource<transient>{{%18}},\n"
        f"{indent}  rw %arg13[%c0 for %18] : !stream.resource<transient>{{%18}}\n"
        f"{indent}}}\n"
    )
    text = front_text.replace(attention, attention + reader)
    log, _ = _fold_text(text)
    assert log == [
        FOLDED,
        "mmaflow: main$async_dispatch_7_elementwise_broadcast_8x4xD_f16: kept (main$async_dispatch_3_slow_memcpy "
        "reads it)",
        REMOVED[1],
    ], log


def test_a_broadcast_that_computes_is_not_read_through(front_text):
    """Dispatch 7's body negating what it copies: not a broadcast; nothing rewritten, nothing said."""
    body = re.search(r"elementwise_broadcast_8x4xD_f16\(\) \{.*?linalg\.yield %in : f16", front_text, re.S)
    assert body
    text = front_text.replace(
        body.group(0),
        body.group(0)[: -len("linalg.yield %in : f16")] + "%neg = arith.negf %in : f16\n"
        "            linalg.yield %neg : f16",
    )
    log, after = _fold_text(text)
    assert log == [], log
    assert after == print_op(parse_module(text, new_context()))


def test_a_query_sliced_from_a_wider_binding_is_not_folded(front_text):
    """Q loaded as the first 64 of 128 columns of its binding (as a slice of a fused projection would be): its
    rows are not contiguous, so it cannot be read as 8 x 4 x 64; nothing is rewritten."""
    start = front_text.index("hal.executable private @main$async_dispatch_9")
    end = front_text.index("hal.executable private", start + 10)
    exe = front_text[start:end]
    wide = exe.replace("readonly:tensor<32x64xf16>>", "readonly:tensor<32x128xf16>>")
    assert wide.count("tensor<32x128xf16>") == 2, wide  # (the subspan's type and the load's source)
    text = front_text[:start] + wide + front_text[end:]
    log, after = _fold_text(text)
    assert log == [], log
    assert after == print_op(parse_module(text, new_context()))


def test_keys_stored_among_the_batch_dims_are_refused_not_a_crash():
    """An attention whose K and V are stored (batch, keys, heads, head dim), PyTorch SDPA's layout: the fold's
    reading of it declines (not batch outermost) instead of failing on where the keys are."""
    dims = "(b, h, m, n, k1, k2)"
    maps = ", ".join(
        f"affine_map<{dims} -> ({r})>" for r in ("b, h, m, k1", "b, k2, h, k1", "b, k2, h, n", "", "b, h, m, n")
    )
    q_t, kv_t = "tensor<2x4x16x64xf16>", "tensor<2x128x4x64xf16>"
    source = (
        f"func.func @attention(%q: {q_t}, %k: {kv_t}, %v: {kv_t}) -> {q_t} {{\n"
        "  %scale = arith.constant 0.125 : f32\n"
        f"  %e = tensor.empty() : {q_t}\n"
        f"  %o = iree_linalg_ext.attention <{{indexing_maps = [{maps}]}}>\n"
        f"       ins(%q, %k, %v, %scale : {q_t}, {kv_t}, {kv_t}, f32) outs(%e : {q_t}) {{\n"
        "  ^bb0(%s: f32):\n"
        "    iree_linalg_ext.yield %s : f32\n"
        f"  }} -> {q_t}\n"
        f"  return %o : {q_t}\n"
        "}\n"
    )
    module = parse_module(_host(source), new_context())
    prog = gqa_broadcasts.Program(module)
    found = [gqa_broadcasts._attention(e, f) for e, f in prog.funcs.items()]
    assert "its K is not stored batch outermost" in found, found
    assert gqa_broadcasts.fold(module) == []
