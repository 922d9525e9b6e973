"""The GEMMs real models run, as data: `mmaflow bench --suite NAME` times each row.

Each model is its published config (the values and where they come from, in ``provenance``);
``model_rows`` derives the GEMMs one layer runs from it, as the model's own code does:

    projections  Q, K, V (separate nn.Linear, or one fused QKV: GPT-2's c_attn), the attention
                 output; with grouped-query attention K and V are kv_heads * head_dim wide
    MLP          SwiGLU (Llama, Mistral: gate and up, hidden -> intermediate, then down) or
                 up / down (GPT-2, BERT, ViT); a tensor-parallel shard of ``tp`` GPUs splits the
                 column-parallel N (QKV, gate/up, LM head) and the row-parallel K (O, down)
    LM head      hidden -> vocab (the real vocab, split by tp); ViT: its 1000-class head on the
                 [CLS] token, and the 16x16 patch embedding (a conv of stride 16: a GEMM)
    attention    eager attention's batched GEMMs, batch = sequences x heads: scores Q K^T
                 (K stored tokens x head_dim: B is N x K) and P V (V stored tokens x head_dim: K x N)

at prefill (M = batch x tokens; tokens within the model's context) and, for decoders, decode
(M = batch, one new token each, against a DECODE_CONTEXT-token cache). The linear layers come in
both storage orders of B: N x K (nn.Linear's weight, ``nk``: a matmul_transpose_b) and K x N
(``kn``: a plain matmul, as GPT-2's Conv1D and JAX store weights), static and with M dynamic (one
module per N, K, order and dtype, run at every M). Attention batches come static, in their one
order. Every row is in f16 and bf16 (inputs; f32 out).

Identical shapes across models and layers are one row that keeps all its uses
(``Row.uses``: "model/layer/phase").
"""

from __future__ import annotations

from dataclasses import dataclass, field

DTYPES = ("f16", "bf16")
PREFILL_TOKENS = (128, 512, 2048, 4096)
DECODE_BATCHES = (1, 8, 16, 32, 64)
DECODE_CONTEXT = 2048  # keys in the KV cache of a decode step (attention rows)


@dataclass(frozen=True)
class Model:
    name: str
    provenance: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int  # 0: no LM head
    mlp: str  # "swiglu" or "gelu" (up, activation, down)
    qkv: str  # "separate" (q_proj, k_proj, v_proj) or "fused" (one hidden -> 3 * hidden)
    prefill_tokens: tuple[int, ...] = PREFILL_TOKENS
    prefill_batches: tuple[int, ...] = (1,)
    decode_batches: tuple[int, ...] = ()  # () for encoders
    tp: int = 1  # tensor-parallel shard: the GEMMs of one of tp GPUs
    classes: int = 0  # a classifier head on the [CLS] token (ViT)
    patch: int = 0  # ViT: the patch embedding's K = 3 * patch * patch, one row per patch


MODELS = {
    m.name: m
    for m in (
        Model(
            "llama3-8b",
            "meta-llama/Meta-Llama-3-8B config.json: hidden_size 4096, intermediate_size 14336, "
            "num_attention_heads 32, num_key_value_heads 8, head_dim 128, vocab_size 128256",
            4096,
            14336,
            32,
            8,
            128,
            128256,
            "swiglu",
            "separate",
            decode_batches=DECODE_BATCHES,
        ),
        Model(
            "llama3-70b-tp8",
            "meta-llama/Meta-Llama-3-70B config.json: hidden_size 8192, intermediate_size 28672, "
            "num_attention_heads 64, num_key_value_heads 8, head_dim 128, vocab_size 128256; "
            "one GPU of an 8-way tensor-parallel shard",
            8192,
            28672,
            64,
            8,
            128,
            128256,
            "swiglu",
            "separate",
            decode_batches=DECODE_BATCHES,
            tp=8,
        ),
        Model(
            "mistral-7b",
            "mistralai/Mistral-7B-v0.1 config.json: hidden_size 4096, intermediate_size 14336, "
            "num_attention_heads 32, num_key_value_heads 8, head_dim 128 (4096 / 32), vocab_size 32000",
            4096,
            14336,
            32,
            8,
            128,
            32000,
            "swiglu",
            "separate",
            decode_batches=DECODE_BATCHES,
        ),
        Model(
            "gpt2",
            "openai-community/gpt2 config.json: n_embd 768, n_head 12 (head dim 64), n_inner null "
            "(4 * 768 = 3072), vocab_size 50257, n_positions 1024 (so prefill <= 1024 tokens)",
            768,
            3072,
            12,
            12,
            64,
            50257,
            "gelu",
            "fused",
            prefill_tokens=(128, 512),
            decode_batches=DECODE_BATCHES,
        ),
        Model(
            "bert-base",
            "google-bert/bert-base-uncased config.json: hidden_size 768, intermediate_size 3072, "
            "num_attention_heads 12 (head dim 64), vocab_size 30522 (the MLM head), "
            "max_position_embeddings 512",
            768,
            3072,
            12,
            12,
            64,
            30522,
            "gelu",
            "separate",
            prefill_tokens=(128, 512),
        ),
        Model(
            "vit-b16",
            "google/vit-base-patch16-224 config.json: hidden_size 768, intermediate_size 3072, "
            "num_attention_heads 12 (head dim 64), image_size 224, patch_size 16: 14 * 14 patches "
            "+ [CLS] = 197 tokens; 1000 ImageNet classes",
            768,
            3072,
            12,
            12,
            64,
            0,
            "gelu",
            "separate",
            prefill_tokens=(197,),
            prefill_batches=(1, 8, 32),
            classes=1000,
            patch=16,
        ),
        Model(
            "tinyllama-1.1b",
            "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json: hidden_size 2048, "
            "intermediate_size 5632, num_attention_heads 32, num_key_value_heads 4 (head dim 64), vocab_size "
            "32000, max_position_embeddings 2048; its MLP is the model corpus's llama_mlp (e2e_tests/models)",
            2048,
            5632,
            32,
            4,
            64,
            32000,
            "swiglu",
            "separate",
            prefill_tokens=(128, 512, 2048),
            decode_batches=DECODE_BATCHES,
        ),
    )
}


@dataclass(frozen=True)
class Gemm:
    """One GEMM a model runs: C (batch x) M x N = A (M x K) @ B, B stored ``b_layout``."""

    model: str
    layer: str
    phase: str  # "prefill" or "decode"
    m: int
    n: int
    k: int
    batch: int = 0  # 0: a plain matmul; else a batch_matmul of this many
    linear: bool = True  # a weight GEMM (both B orders, static and dynamic M) or attention's


@dataclass(frozen=True)
class Row:
    m: int
    n: int
    k: int
    batch: int
    dtype: str
    b_layout: str  # "nk" (nn.Linear's weight, matmul_transpose_b) or "kn" (matmul)
    dynamic: bool  # M dynamic in the module
    uses: tuple[str, ...] = field(default=(), compare=False)  # "model/layer/phase", every one

    @property
    def key(self) -> tuple:
        return (self.m, self.n, self.k, self.batch, self.dtype, self.b_layout, self.dynamic)

    @property
    def name(self) -> str:
        more = f" (+{len(self.uses) - 1})" if len(self.uses) > 1 else ""
        shape = f"{self.batch}x" if self.batch else ""
        dyn = " dynM" if self.dynamic else ""
        return f"{self.uses[0]}{more} {shape}{self.m}x{self.n}x{self.k} {self.dtype} B:{self.b_layout}{dyn}"

    @property
    def flop(self) -> float:
        return 2.0 * max(self.batch, 1) * self.m * self.n * self.k


def model_gemms(md: Model) -> list[Gemm]:
    """Every GEMM of one layer (and the head) of ``md``, at each prefill and decode M."""
    tp = md.tp
    q, kv = md.heads * md.head_dim // tp, md.kv_heads * md.head_dim // tp
    heads = md.heads // tp
    weights = (
        [("qkv", q + 2 * kv, md.hidden)]
        if md.qkv == "fused"
        else [("q_proj", q, md.hidden), ("k_proj", kv, md.hidden), ("v_proj", kv, md.hidden)]
    )
    weights.append(("o_proj", md.hidden, q))
    up = md.intermediate // tp
    if md.mlp == "swiglu":
        weights += [("gate_proj", up, md.hidden), ("up_proj", up, md.hidden)]
    else:
        weights.append(("mlp_up", up, md.hidden))
    weights.append(("mlp_down", md.hidden, up))
    if md.vocab:
        weights.append(("lm_head", md.vocab // tp, md.hidden))
    out = []
    phases = [("prefill", b, t) for b in md.prefill_batches for t in md.prefill_tokens]
    phases += [("decode", b, 1) for b in md.decode_batches]
    for phase, b, tokens in phases:
        m = b * tokens
        for layer, n, k in weights:
            out.append(Gemm(md.name, layer, phase, m, n, k))
        if md.patch:  # per image: 196 patches of 3 x 16 x 16 -> hidden; the head on [CLS]
            out.append(Gemm(md.name, "patch_embed", phase, b * (tokens - 1), md.hidden, 3 * md.patch**2))
            out.append(Gemm(md.name, "head", phase, b, md.classes, md.hidden))
        keys = tokens if phase == "prefill" else DECODE_CONTEXT
        out.append(Gemm(md.name, "attn_scores", phase, tokens, keys, md.head_dim, batch=b * heads, linear=False))
        out.append(Gemm(md.name, "attn_pv", phase, tokens, md.head_dim, keys, batch=b * heads, linear=False))
    return out


def model_rows(md: Model) -> list[Row]:
    """``model_gemms`` as rows: linear layers in both B orders, static and dynamic M; attention
    static, scores with B (keys) N x K, P V with B (values) K x N; every dtype."""
    rows = []
    for g in model_gemms(md):
        use = (f"{g.model}/{g.layer}/{g.phase}",)
        orders = [("nk", False), ("kn", False), ("nk", True), ("kn", True)] if g.linear else []
        if not g.linear:
            orders = [("nk" if g.layer == "attn_scores" else "kn", False)]
        for dtype in DTYPES:
            rows += [Row(g.m, g.n, g.k, g.batch, dtype, order, dyn, use) for order, dyn in orders]
    return rows


def dedupe(rows: list[Row]) -> list[Row]:
    """One row per distinct shape, dtype, order and dynamism, with every use, in first-seen order."""
    seen: dict[tuple, Row] = {}
    for r in rows:
        if r.key in seen:
            old = seen[r.key]
            seen[r.key] = Row(*r.key, uses=old.uses + tuple(u for u in r.uses if u not in old.uses))
        else:
            seen[r.key] = r
    return list(seen.values())


# The smoke suite: real rows of the models above at small M, one of each kind (fused-QKV decode
# with B K x N, GQA's narrow K/V projection with B N x K, an attention score batch, a dynamic-M
# row, bf16), quick to build for the tests: (use, m, dtype, order, dynamic).
SMOKE = (
    ("gpt2/qkv/decode", 1, "f16", "kn", False),
    ("llama3-8b/k_proj/decode", 8, "f16", "nk", False),
    ("bert-base/attn_scores/prefill", 128, "f16", "nk", False),
    ("llama3-70b-tp8/o_proj/decode", 16, "f16", "nk", True),
    ("vit-b16/head/prefill", 8, "bf16", "nk", False),
)


def suite(name: str, dtypes: tuple[str, ...] = DTYPES) -> list[Row]:
    """The rows of suite ``name`` (a model's, ``decode``, ``prefill``, ``all`` or ``smoke``) in ``dtypes``."""
    if name not in SUITES:
        raise KeyError(f"no suite {name!r}; suites: {', '.join(SUITES)}")
    everything = dedupe([r for md in MODELS.values() for r in model_rows(md)])
    if name in MODELS:
        rows = dedupe(model_rows(MODELS[name]))
    elif name == "smoke":
        rows = [
            r
            for use, m, dtype, order, dyn in SMOKE
            for r in everything
            if use in r.uses and (r.m, r.dtype, r.b_layout, r.dynamic) == (m, dtype, order, dyn)
        ]
    elif name in ("decode", "prefill"):
        rows = [r for r in everything if any(u.endswith("/" + name) for u in r.uses)]
    else:
        rows = everything
    return [r for r in rows if r.dtype in dtypes]


SUITES = (*MODELS, "decode", "prefill", "all", "smoke")


def matching(name: str, dtypes: tuple[str, ...], pattern: str | None) -> list[Row]:
    """Suite ``name``'s rows in ``dtypes`` whose name the regular expression ``pattern`` matches
    (all for None). Raises ValueError with a one-line reason: no such suite, a pattern that is no
    regular expression, or no row left."""
    import re

    try:
        rows = [r for r in suite(name, dtypes) if pattern is None or re.search(pattern, r.name)]
    except KeyError as e:
        raise ValueError(e.args[0]) from None
    except re.error as e:
        raise ValueError(f"--rows {pattern!r} is not a regular expression: {e}") from None
    if not rows:
        raise ValueError(
            f"suite {name} has no rows in {','.join(dtypes)}" + (f" matching {pattern!r}" if pattern else "")
        )
    return rows
