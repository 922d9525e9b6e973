"""The float64 reference of attention and the error bound mmaflow's flash-attention kernel is held
to (``e2e_tests/test_flash_attention.py`` and ``model_check.py`` share them).

Tolerance, per output element (u = 2^-11 for f16, 2^-8 for bf16: the unit roundoff):
    |O - ref| <= u * |ref| + 2 * u * max|V|   (max over the batch entry's V).
The inputs are exact in both (the reference reads the same 16-bit values). S and the online
softmax are f32: S's products of 16-bit values are exact in f32 and its sums err by ~D * 2^-24
relative, exp2 is correctly rounded on the executor, so P and l are right to ~1e-5 relative
(two orders below f16's u). P is rounded to the 16-bit type before P V: each term p_j v_j errs by
at most u * p_j |v_j|, and sum_j p_j |v_j| / l <= max|V| (the weights sum to one); P V accumulates
in f32 (~K2 * 2^-24 relative). The output's rounding adds u * |ref|. The factor 2 on the P term
covers the f32 terms with room; a kernel that drops a key, a row max or the rescaling errs by
the size of a softmax weight times |V| (order 1e-2 and up) and fails.

An additive mask (IREE's float mask: S = scale * Q K^T + mask, then softmax; the kernel adds
mask * log2(e) to its base-2 scores, as IREE's decomposition does) holds to the same bound: its
16-bit values are exact in f32 and -inf stays -inf; the f32 product with log2(e) and the sum err by
~2^-24 * (|s| + |mask|) in the exponent, below 1e-5 relative in a weight while the mask values
that matter (those within a few dozen of the row's largest score) are below ~100 in magnitude
(PyTorch's masks: 0 and -inf). A row masked at every key is 0/0 in both (NaN): the kernel's
running max stays -inf and it subtracts 0 instead (exp2 gives 0, not NaN, for the keys of a
row masked so far), so a row with any visible key is right however many tiles before it were
all masked; only a row with none ends as l = 0, O = 0 * inf. The checks use masks in which
every row sees a key (key 0, as causal masks do).

A boolean (i1) mask is IREE's additive one of 0 where true and -inf where false (LinalgExt
``applyMask``: ``select(mask, 0, -inf)`` added to the scores; PyTorch's boolean attn_mask, True =
takes part): ``bool_mask_additive`` turns it into that, exactly, so the same bound holds.
"""

from __future__ import annotations

import numpy as np

UNIT_ROUNDOFF = {"f16": 2.0**-11, "bf16": 2.0**-8}


def attention_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float,
    causal: bool,
    mask: np.ndarray | None = None,
    causal_rows: int = 0,
) -> np.ndarray:
    """softmax(Q K^T * scale + mask) V in float64; Q (batch, M, D), K and V (batch, K2, D), the
    additive mask (batch, M, K2) or anything that broadcasts to it. Causal: key j > query i
    masked (PyTorch's is_causal, top-left aligned); ``causal_rows``: query i's position is i mod it
    (GQA's query heads folded into the rows, each from position 0)."""
    s = (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), 1, 2)) * scale  # BLAS: einsum is ~10x slower
    if mask is not None:
        s = s + mask.astype(np.float64)
    if causal:
        pos = np.arange(q.shape[1]) % (causal_rows or q.shape[1])
        s = np.where(np.arange(k.shape[1])[None, None, :] > pos[None, :, None], -np.inf, s)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


def bool_mask_additive(mask: np.ndarray) -> np.ndarray:
    """An i1 mask as IREE applies it: 0.0 where true, -inf where false (float64). Stored bytes
    (IREE keeps an i1 one byte per element) count by bit 0, as its ``arith.trunci`` to i1 does."""
    m = np.asarray(mask)
    bit = m if m.dtype == np.bool_ else (m.astype(np.int64) & 1).astype(bool)
    return np.where(bit, 0.0, -np.inf)


def attention_bound(ref: np.ndarray, v: np.ndarray, elem: str) -> np.ndarray:
    """The error bound of each output element (see the module docstring); ``v`` (batch, K2, D)."""
    u = UNIT_ROUNDOFF[elem]
    vmax = np.abs(v.astype(np.float64)).max(axis=(1, 2))[:, None, None]
    return u * np.abs(ref) + 2 * u * vmax
