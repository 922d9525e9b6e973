"""Small real-world PyTorch blocks for mmaflow's model corpus: definitions, deterministic weights,
inputs and float32 references.

Pure torch + numpy: nothing here imports IREE or iree-turbine, so this file can be copied to a
machine that only has torch (any 2.x with F.scaled_dot_product_attention) to rebuild the models,
their weights, inputs and references bit-for-bit.

Weights and inputs never come from torch's RNG: they are drawn from
``numpy.random.default_rng(seed)`` in float32 and then rounded to the model dtype (f16 / bf16,
round-to-nearest-even), so they are identical across torch versions and machines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_SEED = 0
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
# Corpus-wide export settings: parameters are externalized under this scope,
# i.e. `#flow.parameter.named<"model"::"<parameter name>">`.
PARAMETER_SCOPE = "model"


# ---------------------------------------------------------------------------------------------
# Llama MLP (SwiGLU)
# ---------------------------------------------------------------------------------------------


class LlamaMLP(nn.Module):
    def __init__(self, hidden_size: int = 2048, intermediate_size: int = 5632):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# ---------------------------------------------------------------------------------------------
# GPT-2 block (nanoGPT style)
# ---------------------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """nanoGPT attention. attn_impl: "explicit" (matmul + causal masked_fill + softmax + matmul),
    "sdpa" (F.scaled_dot_product_attention)."""

    def __init__(self, n_embd: int, n_head: int, attn_impl: str = "explicit", is_causal: bool = True):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=True)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=True)
        self.n_head = n_head
        self.n_embd = n_embd
        self.attn_impl = attn_impl
        self.is_causal = is_causal

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.attn_impl == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=self.is_causal)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            if self.is_causal:
                causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device)).view(1, 1, T, T)
                att = att.masked_fill(~causal, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPT2MLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=True)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=True)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, n_embd: int = 768, n_head: int = 12, attn_impl: str = "explicit", is_causal: bool = True):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head, attn_impl=attn_impl, is_causal=is_causal)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = GPT2MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


# ---------------------------------------------------------------------------------------------
# Llama attention block (RMSNorm + GQA + RoPE + explicit causal attention + residual)
# ---------------------------------------------------------------------------------------------


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos.unsqueeze(1)  # [B, 1, T, D]
    sin = sin.unsqueeze(1)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep: int):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttentionBlock(nn.Module):
    """x + o_proj(attention(rope(q_proj(rms(x))), rope(k_proj(rms(x))), v_proj(rms(x))))."""

    def __init__(
        self,
        hidden_size: int = 1024,
        num_heads: int = 16,
        num_kv_heads: int = 4,
        rope_theta: float = 10000.0,
        rms_eps: float = 1e-6,
    ):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.rope_theta = rope_theta
        self.input_layernorm = LlamaRMSNorm(hidden_size, eps=rms_eps)
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def rotary(self, x, T: int):
        # cos/sin computed in float32 from positions (as HF's LlamaRotaryEmbedding), then cast.
        inv_freq = 1.0 / (
            self.rope_theta
            ** (torch.arange(0, self.head_dim, 2, dtype=torch.int64, device=x.device).float() / self.head_dim)
        )
        position_ids = torch.arange(T, device=x.device).float()
        freqs = torch.outer(position_ids, inv_freq)  # [T, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [T, D]
        cos = emb.cos().to(x.dtype)[None].expand(x.shape[0], T, self.head_dim)
        sin = emb.sin().to(x.dtype)[None].expand(x.shape[0], T, self.head_dim)
        return cos, sin

    def forward(self, x):
        B, T, _ = x.shape
        residual = x
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(x, T)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = repeat_kv(k, self.num_key_value_groups)
        v = repeat_kv(v, self.num_key_value_groups)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        causal_mask = torch.full((T, T), float("-inf"), dtype=attn_weights.dtype, device=x.device).triu(1)
        attn_weights = attn_weights + causal_mask
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(B, T, self.hidden_size)
        return residual + self.o_proj(attn_output)


class LlamaDecodeStep(nn.Module):
    """One decoder step of Llama attention against its KV cache: x [B, 1, hidden], the cache [B, kv
    heads, S, head dim] with S a run-time size; the new token's k and v appended to the cache, SDPA
    with enable_gqa (query heads sharing KV heads, as HF Llama reaches torch's kernel), o_proj and
    the residual. RoPE is left out: it does not change the attention's form."""

    def __init__(self, hidden_size: int = 1024, num_heads: int = 16, num_kv_heads: int = 4):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, x, k_cache, v_cache):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        k = torch.cat([k_cache, k], dim=2)
        v = torch.cat([v_cache, v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return x + self.o_proj(y.transpose(1, 2).reshape(B, T, C))


# ---------------------------------------------------------------------------------------------
# Weight-only quantized Llama MLP (int4 GPTQ-style groups, int8 per channel)
# ---------------------------------------------------------------------------------------------


class Int4GroupLinear(nn.Module):
    """A linear layer whose weight is stored as unsigned 4-bit integers, two a byte (``qweight`` N x
    K/2 uint8, element 2j in the low nibble of byte j, 2j+1 in the high one), with one float scale and
    zero point per row and group of ``group`` along K (``scales`` / ``zeros`` N x K/G, the model dtype):
    ``w = (q - zero) * scale``. The weight is unpacked in forward with shifts and masks, as GPTQ / AWQ
    loaders write it (``bitwise_right_shift`` of the bytes by [0, 4], ``& 0xF``), dequantized in the
    activations' dtype and multiplied by ``F.linear``. No bias."""

    def __init__(self, in_features: int, out_features: int, group: int = 128):
        super().__init__()
        assert in_features % group == 0 and group % 2 == 0
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.register_buffer("qweight", torch.zeros(out_features, in_features // 2, dtype=torch.uint8))
        self.register_buffer("scales", torch.ones(out_features, in_features // group))
        self.register_buffer("zeros", torch.zeros(out_features, in_features // group))

    def forward(self, x):
        n, k, g = self.out_features, self.in_features, self.group
        shifts = torch.tensor([0, 4], dtype=torch.uint8, device=x.device)
        q = torch.bitwise_and(torch.bitwise_right_shift(self.qweight.unsqueeze(-1), shifts), 0xF)
        q = q.view(n, k // g, g).to(x.dtype)
        w = (q - self.zeros.unsqueeze(-1)) * self.scales.unsqueeze(-1)
        return F.linear(x, w.view(n, k))

    def quantize_(self, w: np.ndarray, dtype: torch.dtype) -> None:
        """Fill the buffers from a float32 N x K weight: per group, asymmetric min/max to 0..15 with the
        scale rounded to ``dtype`` first (the integers are computed against the stored scale)."""
        n, k, g = self.out_features, self.in_features, self.group
        wg = w.reshape(n, k // g, g).astype(np.float32)
        lo, hi = wg.min(-1), wg.max(-1)
        scale = _round_to((hi - lo) / 15.0, dtype).float().numpy()
        zero = np.clip(np.round(-lo / scale), 0, 15).astype(np.float32)
        q = np.clip(np.round(wg / scale[..., None] + zero[..., None]), 0, 15).astype(np.uint8).reshape(n, k)
        self.qweight = torch.from_numpy(q[:, 0::2] | (q[:, 1::2] << 4))
        self.scales = _round_to(scale, dtype)
        self.zeros = _round_to(zero, dtype)


class Int8ChannelLinear(nn.Module):
    """A linear layer whose weight is stored as signed 8-bit integers (``qweight`` N x K int8) with one
    float scale per row (``scales`` N x 1, the model dtype), symmetric: ``w = q * scale``, dequantized
    in forward and multiplied by ``F.linear``. No bias."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("qweight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("scales", torch.ones(out_features, 1))

    def forward(self, x):
        return F.linear(x, self.qweight.to(x.dtype) * self.scales)

    def quantize_(self, w: np.ndarray, dtype: torch.dtype) -> None:
        """Fill the buffers from a float32 N x K weight: per row, max |w| to 127."""
        scale = _round_to(np.abs(w).max(-1, keepdims=True) / 127.0, dtype).float().numpy()
        self.qweight = torch.from_numpy(np.clip(np.round(w / scale), -127, 127).astype(np.int8))
        self.scales = _round_to(scale, dtype)


QUANTIZED = (Int4GroupLinear, Int8ChannelLinear)


class QuantizedLlamaMLP(nn.Module):
    """Llama's SwiGLU MLP with weight-only quantized projections, as deployed for decoding: gate and
    up in int4 groups (GPTQ-style, with zero points), down in int8 per channel (the projection often
    kept at 8 bits)."""

    def __init__(self, hidden_size: int = 1024, intermediate_size: int = 2816, group: int = 128):
        super().__init__()
        self.gate_proj = Int4GroupLinear(hidden_size, intermediate_size, group)
        self.up_proj = Int4GroupLinear(hidden_size, intermediate_size, group)
        self.down_proj = Int8ChannelLinear(intermediate_size, hidden_size)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# ---------------------------------------------------------------------------------------------
# BERT encoder layer (post-LayerNorm, HF BertLayer structure)
# ---------------------------------------------------------------------------------------------


class BertSelfAttention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int):
        super().__init__()
        self.num_attention_heads = num_heads
        self.attention_head_size = hidden_size // num_heads
        self.all_head_size = hidden_size
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = F.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class BertSelfOutput(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=eps)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dense(hidden_states) + input_tensor)


class BertIntermediate(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, intermediate_size)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))


class BertOutput(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, eps: float):
        super().__init__()
        self.dense = nn.Linear(intermediate_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=eps)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dense(hidden_states) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, eps: float):
        super().__init__()
        self.self = BertSelfAttention(hidden_size, num_heads)
        self.output = BertSelfOutput(hidden_size, eps)

    def forward(self, hidden_states):
        return self.output(self.self(hidden_states), hidden_states)


class BertLayer(nn.Module):
    def __init__(self, hidden_size: int = 768, num_heads: int = 12, intermediate_size: int = 3072, eps: float = 1e-12):
        super().__init__()
        self.attention = BertAttention(hidden_size, num_heads, eps)
        self.intermediate = BertIntermediate(hidden_size, intermediate_size)
        self.output = BertOutput(hidden_size, intermediate_size, eps)

    def forward(self, hidden_states):
        attention_output = self.attention(hidden_states)
        return self.output(self.intermediate(attention_output), attention_output)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    name: str
    factory: type
    kwargs: dict = field(default_factory=dict)
    input_shapes: tuple = ()  # one shape per positional input
    description: str = ""
    # Run-time sizes of the export: {input index: {dim: (name, min, max)}} (torch.export.Dim); the
    # example inputs' sizes are the ones the references are computed at.
    dynamic: dict = field(default_factory=dict)

    def make(self) -> nn.Module:
        return self.factory(**self.kwargs)


MODELS: dict[str, ModelSpec] = {
    "llama_mlp": ModelSpec(
        "llama_mlp",
        LlamaMLP,
        dict(hidden_size=2048, intermediate_size=5632),
        ((2, 256, 2048),),
        "Llama SwiGLU MLP: down(silu(gate(x)) * up(x)), 2048 -> 5632 -> 2048, no biases",
    ),
    "gpt2_block": ModelSpec(
        "gpt2_block",
        GPT2Block,
        dict(n_embd=768, n_head=12, attn_impl="explicit", is_causal=True),
        ((2, 256, 768),),
        "nanoGPT GPT-2 block: pre-LN, fused qkv, explicit causal attention (tril + masked_fill -inf), "
        "gelu(tanh) MLP 4x, residuals",
    ),
    "gpt2_sdpa": ModelSpec(
        "gpt2_sdpa",
        GPT2Block,
        dict(n_embd=768, n_head=12, attn_impl="sdpa", is_causal=True),
        ((2, 256, 768),),
        "GPT-2 block with F.scaled_dot_product_attention(is_causal=True)",
    ),
    "gpt2_sdpa_nocausal": ModelSpec(
        "gpt2_sdpa_nocausal",
        GPT2Block,
        dict(n_embd=768, n_head=12, attn_impl="sdpa", is_causal=False),
        ((2, 256, 768),),
        "GPT-2 block with F.scaled_dot_product_attention(is_causal=False)",
    ),
    "llama_attention": ModelSpec(
        "llama_attention",
        LlamaAttentionBlock,
        dict(hidden_size=1024, num_heads=16, num_kv_heads=4),
        ((2, 256, 1024),),
        "Llama attention block: RMSNorm, q/k/v/o without bias, GQA 16q/4kv heads x 64, RoPE "
        "(rotate_half), explicit causal matmul+softmax(f32), residual",
    ),
    "llama_decode": ModelSpec(
        "llama_decode",
        LlamaDecodeStep,
        dict(hidden_size=1024, num_heads=16, num_kv_heads=4),
        ((2, 1, 1024), (2, 4, 255, 64), (2, 4, 255, 64)),
        "Llama decoder step: q/k/v of one new token, appended to a KV cache of run-time length (255 in "
        "the example), SDPA with enable_gqa (16 q / 4 kv heads x 64), o_proj, residual",
        dynamic={1: {2: ("cache", 1, 131071)}, 2: {2: ("cache", 1, 131071)}},
    ),
    "llama_mlp_wq": ModelSpec(
        "llama_mlp_wq",
        QuantizedLlamaMLP,
        dict(hidden_size=1024, intermediate_size=2816, group=128),
        ((2, 1, 1024),),
        "Llama SwiGLU MLP with weight-only quantized projections, one decode token x 2: gate/up int4 "
        "(two a byte, unpacked by shifts and masks, groups of 128 with scales and zero points), down int8 "
        "per channel; 1024 -> 2816 -> 1024",
    ),
    "bert_layer": ModelSpec(
        "bert_layer",
        BertLayer,
        dict(hidden_size=768, num_heads=12, intermediate_size=3072),
        ((2, 128, 768),),
        "BERT encoder layer: 12 heads, no mask, post-LN, erf GELU, intermediate 3072, biases",
    ),
}


def _norm_module_param_names(model: nn.Module) -> set[str]:
    names = set()
    for mod_name, mod in model.named_modules():
        if isinstance(mod, (nn.LayerNorm, LlamaRMSNorm)):
            for p_name, _ in mod.named_parameters(recurse=False):
                names.add(f"{mod_name}.{p_name}" if mod_name else p_name)
    return names


def weight_arrays(model: nn.Module, seed: int) -> dict[str, np.ndarray]:
    """float32 numpy values for every parameter, from numpy's RNG, in sorted-name order.

    matrices: normal(0, 0.02); norm weights: ones; norm biases: zeros; Linear biases: normal(0, 0.02).
    """
    rng = np.random.default_rng(seed)
    norm_params = _norm_module_param_names(model)
    params = dict(model.named_parameters())
    out = {}
    for name in sorted(params):
        shape = tuple(params[name].shape)
        if name in norm_params:
            value = np.ones(shape, np.float32) if name.endswith("weight") else np.zeros(shape, np.float32)
        else:  # Linear weight (2-D) or bias (1-D)
            value = rng.normal(0.0, 0.02, size=shape).astype(np.float32)
        out[name] = value
    return out


def _round_to(arr: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """float32 numpy -> torch tensor of `dtype` (round-to-nearest-even, deterministic)."""
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).to(dtype)


@torch.no_grad()
def init_weights(model: nn.Module, seed: int = DEFAULT_SEED, dtype: torch.dtype | None = None) -> nn.Module:
    """Fill every parameter deterministically from numpy's RNG, then cast the model to `dtype`."""
    values = weight_arrays(model, seed)
    params = dict(model.named_parameters())
    for name, value in values.items():
        target = params[name]
        target.data = _round_to(value, dtype or target.dtype)
    # Quantized layers: a float weight drawn as a Linear's (normal(0, 0.02), after the parameters, in
    # sorted module order), quantized into the layer's integer and float buffers.
    rng = np.random.default_rng([seed, 2])
    quantized = {n: m for n, m in model.named_modules() if isinstance(m, QUANTIZED)}
    for name in sorted(quantized):
        m = quantized[name]
        w = rng.normal(0.0, 0.02, size=(m.out_features, m.in_features)).astype(np.float32)
        m.quantize_(w, dtype or torch.float32)
    if dtype is not None:
        model.to(dtype)
    return model


def _dtype(dtype) -> torch.dtype:
    return DTYPES[dtype] if isinstance(dtype, str) else dtype


def example_input_arrays(name: str, seed: int = DEFAULT_SEED) -> list[np.ndarray]:
    """float32 numpy inputs, normal(0, 1), drawn from numpy's RNG (seed offset from the weights')."""
    rng = np.random.default_rng([seed, 1])
    return [rng.normal(0.0, 1.0, size=shape).astype(np.float32) for shape in MODELS[name].input_shapes]


def example_inputs(name: str, dtype, seed: int = DEFAULT_SEED) -> tuple[torch.Tensor, ...]:
    return tuple(_round_to(a, _dtype(dtype)) for a in example_input_arrays(name, seed))


def build(name: str, dtype, seed: int = DEFAULT_SEED) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """(module in `dtype`, eval mode, deterministic weights; example inputs in `dtype`)."""
    dt = _dtype(dtype)
    model = MODELS[name].make().eval()
    init_weights(model, seed, dt)
    return model, example_inputs(name, dt, seed)


@torch.no_grad()
def reference(name: str, dtype, seed: int = DEFAULT_SEED) -> np.ndarray:
    """float32 CPU output of the model from the same dtype-rounded weights and inputs (rounded to
    `dtype`, then upcast to float32). What a `dtype` build is compared against."""
    dt = _dtype(dtype)
    model, inputs = build(name, dt, seed)
    model = model.float()
    out = model(*(x.float() for x in inputs))
    return out.numpy().astype(np.float32)


def parameter_arrays(name: str, dtype, seed: int = DEFAULT_SEED) -> dict[str, np.ndarray]:
    """The model's parameters as numpy arrays in `dtype` (float16, or ml_dtypes.bfloat16), keyed by
    the names used in the exported .mlir (`#flow.parameter.named<"model"::"<name>">`)."""
    dt = _dtype(dtype)
    model, _ = build(name, dt, seed)
    return {k: torch_to_numpy(v) for k, v in sorted(model.state_dict().items())}


def torch_to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes  # ships with iree-base-runtime / jax; only needed for bf16

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
