"""Flash attention on NVIDIA ``mma.sync`` (docs/kernels/flash_attention.md): one kernel, planned as data, built through
the bindings.

O = softmax(Q K^T * scale + mask) V for static shapes (batch B, M queries, K2 keys, head dims K1
= N in {64, 128}), f16 or bf16 in and out, a constant scale, no mask tensor, an additive one of
the inputs' type (IREE's float mask; PyTorch's causal SDPA arrives so; read per tile at each
lane's S elements, see step 4) or a boolean i1 one (PyTorch's boolean ``attn_mask``, True = takes
part: IREE's LinalgExt ``applyMask``, compiler/src/iree/compiler/Dialect/LinalgExt/IR/
AggregatedOpInterfaceImpl.cpp, truncates an integer mask to i1 and adds ``select(mask, 0, -inf)``
to the scores; IREE stores an i1 tensor one
byte per element at a dispatch boundary, an i8 binding the dispatch truncates to i1, so the
kernel reads those bytes where it reads an additive mask and turns each at once into 0 / -inf of
the inputs' type, bit 0 deciding as ``arith.trunci`` does; the rest is the additive path), and
optionally causal (key
j > query i masked: PyTorch's ``is_causal``, top-left aligned when M != K2). The kernel is the
one sm_80 gets; sm_90a would get the same IR.

Work split. One workgroup per (BLOCK_M = 64 queries, batch): grid (ceil(M / 64), B, 1), four
warps of 32, each warp owning 16 query rows (one mma.sync m16n8k16 row of instructions). Per
warp, with every lane's (row, col) taken from the instruction's layouts (``target/intrinsics.py``,
``target/layout.py``: lane terms plus per-element offsets, never a table written here):

1. Q's fragments, loaded once from global memory in mma.sync's A layout (K1 / 16 of them), stay
   in registers for the whole key loop. Rows past M read 0.
2. Key loop over tiles of BLOCK_N = 64 keys (causal: only the tiles at or below this block's
   last query). K and V (64 x N each, 16-byte chunks, rows padded by 8 elements, keys past K2
   zero-filled) reach LDS through a two-slot ring filled by cp.async (``stages=2``, the
   default): the first tile is issued before the loop; each iteration waits for this thread's
   copies, passes the one barrier (every thread's copies landed, every thread is done with the
   other slot), issues the next tile into the other slot, then computes on this one. With
   ``stages=1`` each tile is copied through registers between two barriers.
3. S = Q K^T: eight n-instructions of 8 keys, each K1 / 16 mma.sync with K's fragments as the B
   operand, read by ``ldmatrix`` x4 (``fragments.FragmentPlan`` / ``FragmentLoader``, as the
   distribute stage reads its operands). f32 accumulators.
4. Online softmax on the accumulator (C) layout, in f32: scores times scale * log2(e), so exp
   is exp2 (``nvvm.ex2``: PTX ex2.approx.ftz.f32); keys past K2 (and, causal, past the query)
   are -inf, in a branch (uniform per warp) taken only by the tiles that hold such keys; per
   query row a lane holds, the tile's max over its own elements, then across the
   lanes that share the row (the C layout's column lane dims: shuffles ``xor 1``, ``xor 2``);
   m_new = max(m, tile max), alpha = exp2(m - m_new), P = exp2(S - m_new); the lane's partial
   row sum l = alpha * l + its own P (one cross-lane sum at the end); O scaled by alpha.
5. P from the C layout (f32) to the A operand (f16/bf16) of the next mma.sync: the conversion
   planned by ``convert.attention_conversion`` (S = Q K^T), emitted by
   ``convert_emit.emit_register_route``; on mma.sync it is in-lane (truncations and register
   renaming only), and the plan's key order (``convert.hardware_keys``) is what V's B operand
   reads.
6. O += P V: N / 8 accumulators, each 4 mma.sync per tile (16 keys each), V's B fragments read
   by ``ldmatrix`` x4 ``.trans`` (V's [key][head dim] tile is K-outer for this operand).
7. After the loop: l summed across the row's lanes (the same shuffles), O / l, converted to the
   output type and stored from the C layout (two consecutive columns per store); rows past M are
   not stored.

A score masked to -inf never makes a NaN. Without a mask tensor the first tile always holds key
0, which no mask hides (K2 >= 1; causal keeps key 0 for every query), so after it every row's
running max is finite and exp2(-inf - finite) = 0. With one, a row's keys may all be masked for
several tiles: while its running max is -inf the kernel subtracts 0 instead (P = exp2(-inf) = 0,
alpha = 0), the standard guard; a row masked at every key ends with l = 0 and O = 0 / 0 = NaN, as
the float64 reference gives.

Storage order. Each tensor is read (O written) in its own storage order
(``Placement.order``): any permutation of (batch..., rows, head dim) with the head dim innermost,
e.g. PyTorch SDPA's (batch, seq, heads, head dim); the grid's y is delinearized into the batch
dims and every global index permuted into the tensor's order. V may have the keys innermost
instead (a decoder step's cache as IREE broadcasts it: ``FlashAttentionPlan.v_transposed``, its
tiles read along the keys into a [head dim][key] LDS tile, ``_Kernel.load_vt``), and Q and O a
unit rows dim they do not store (one query, no query loop). K and V may sit at run-time byte
offsets (``Placement.offset_value``). ``rewrite_dispatch`` reads the
orders from the attention's indexing maps and folds a permuting ``linalg.generic`` on O (the
transpose IREE fuses into the dispatch) into O's order.

``plan_flash_attention`` checks what the kernel supports (``UnsupportedError`` naming why
otherwise; on AMD targets it plans ``kernels/attention/amd.py``'s kernel, S^T = K Q^T and
O^T = V^T P^T, with the same bindings and storage orders); ``emit_flash_attention`` builds the
function at an insertion point;
``standalone_module`` builds a module around it for the lane executor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from iree.compiler import ir
from iree.compiler.dialects import arith, func, gpu, hal, llvm, nvvm, scf, vector
from iree.compiler.dialects import memref as memref_d

from mmaflow.compiler.core import attrs, dynamic
from mmaflow.compiler.core.attention import Attention, describe_attention
from mmaflow.compiler.core.errors import CodegenError, UnsupportedError
from mmaflow.compiler.core.mlir import (
    defining_op,
    subspan_binding,
    subspan_constant_offset,
    subspan_dims,
    subspan_offset,
    user_of,
)
from mmaflow.compiler.core.mlir import walk as walk_ops
from mmaflow.compiler.kernels.attention.amd import AmdKernel, plan_parts
from mmaflow.compiler.kernels.attention.amd import lds_bytes as amd_lds_bytes
from mmaflow.compiler.kernels.attention.hopper import HopperAttentionPlan, HopperKernel, causal_words, plan_hopper
from mmaflow.compiler.kernels.common.convert_emit import emit_register_route
from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.kernels.common.fragments import FragmentLoader, FragmentPlan, LaneIndex
from mmaflow.compiler.kernels.common.prologue import buffer_type, scalar_prologue
from mmaflow.compiler.target.convert import AttentionConversion, attention_conversion, hardware_keys
from mmaflow.compiler.target.intrinsics import Intrinsic
from mmaflow.compiler.target.layout import COL, ROW, Layout
from mmaflow.compiler.target.targets import Family, Vendor, get_target

BLOCK_M = 64  # queries per workgroup
BLOCK_N = 64  # keys per iteration
WARPS = 4  # warps of a workgroup, each 16 of its queries (the decode form: ``FlashAttentionPlan.warps``)
LDS_PAD = 8  # elements after each LDS row (16 bytes)
DECODE_STAGES = 4  # cp.async ring slots of a split-KV (decode) kernel, LDS permitting
WARP_KEYS = 16  # keys of a key tile each warp computes on in the decode form (``warp_keys``)
# Warps of a decode-form workgroup (``warp_keys``) by head dim. H200, batch 1 (a cluster of 8 per KV
# head), f16, 4 query heads a KV head, kernel us at 4k / 32k keys, 4 warps against 8 in the same run:
# head dim 64 8.8 / 35.2 against 9.2 / 27.8 (batch 8: 23.1 / 138.8 against 22.3 / 126.7); head dim 128
# 14.4 / 54.9 against 16.0 / 69.4 (8 warps' 128-key tiles leave LDS for 3 slots, 209 KB).
DECODE_WARPS = {64: 8, 128: 4}
CHUNK_BYTES = 16  # global -> LDS copy width per thread
HEAD_DIMS = (64, 128)
LOG2E = 1.4426950408889634
_READ_ONLY, _INDIRECT = 1, 2  # hal.interface.binding.subspan descriptor_flags bits (IREE's HAL)
_INTRINSICS = {"f16": "MMA_SYNC_F32_16x8x16_F16", "bf16": "MMA_SYNC_F32_16x8x16_BF16"}


@dataclass(frozen=True)
class Placement:
    """Where a tensor lives: binding and byte offset (a multiple of 16: the copies are 16-byte
    loads; IREE aligns its packed tensors to 64). ``offset`` None: known at run time only (IREE
    passes it as push constants; a decoder step's K and V in the cache it grows), ``offset_value``
    the dispatch's index value of it, promised a multiple of 16 (``util.assume.int`` udiv)."""

    binding: int
    offset: int | None = 0
    # The tensor's storage order: for each stored dimension, outermost first, the logical one it
    # holds (0 .. nb - 1: the batch dims, in O's order; nb: rows (queries or keys); nb + 1: the head
    # dim, innermost but in V stored head dim outer). None: stored (batch, rows, head dim), the batch flattened.
    order: tuple[int, ...] | None = None
    offset_value: ir.Value | None = field(default=None, compare=False)


@dataclass(frozen=True)
class FlashAttentionPlan:
    target: str
    intrinsic: Intrinsic
    conversion: AttentionConversion  # P's C -> A plan (S = Q K^T)
    batch: int  # all batch dims flattened (batch x heads)
    m: int
    k2: int | None  # None: a run-time key length (a decoder step's KV cache), read from the push constants
    head_dim: int  # K1 = N
    elem: str  # "f16" | "bf16", inputs and output
    scale: float
    causal: bool
    stages: int  # 1: K/V copied through registers, two barriers per tile; 2: a two-slot cp.async ring
    k_fragments: FragmentPlan  # S's B operand (K^T) from K's [key][head dim] LDS tile
    v_fragments: FragmentPlan  # P V's B operand from V's [key][head dim] tile (K-outer for it)
    batch_dims: tuple[int, ...] = ()  # the batch dims (O's order); their product is ``batch``
    mask: str | None = None  # the mask tensor's element type: elem (additive) or "i1" (boolean); None: none
    # AMD (``kernels/attention/amd.py``): S^T = K Q^T and O^T = V^T P^T; k_fragments / v_fragments
    # are then K's and V^T's A operands, and v_columns the LDS column (hardware K slot) of each
    # key of a P tile.
    transposed: bool = False
    v_columns: tuple[int, ...] = ()
    lds_pad: int = LDS_PAD  # elements after each LDS row
    k_copy: tuple[int, int, int] = ()  # AMD: the K copy's thread order (``flash_attention_amd.k_copy_order``)
    prefetch: bool = False  # AMD: the next tile's K and V loaded into registers during this one
    # Split-KV (flash-decoding, NVIDIA mma.sync on cluster targets): each block of queries is run by a thread
    # block cluster of ``split_kv`` workgroups along x, each over its share of the key tiles, their partial
    # softmax statistics and outputs combined through distributed shared memory (``_Kernel.combine``).
    split_kv: int = 1
    # Causal with query positions restarting every ``causal_rows`` rows (IREE's GQA form: the query heads sharing a
    # KV head folded into the rows, each head's positions from 0); 0: a query's position is its row.
    causal_rows: int = 0
    # Decode (a run-time key length, every query in one warp's row tile): each of the ``warps`` warps
    # takes its own ``warp_keys`` keys of every key tile (0: off, every warp all of the tile's keys for
    # its own 16 queries), with its own softmax statistics, combined at the end; a tile is then
    # warps x warp_keys keys.
    warp_keys: int = 0
    warps: int = WARPS
    # V stored with the keys innermost (``Attention.v_transposed``): its tiles are read along the keys into
    # LDS as [head dim][key] (NVIDIA: v_fragments then read it K-innermost, as K's), through registers
    # (``_Kernel.load_vt``: 16-byte loads where V's rows are 16-byte aligned, else one element each).
    v_transposed: bool = False

    @property
    def wave_size(self) -> int:
        return self.intrinsic.wave_size

    @property
    def block_m(self) -> int:
        return BLOCK_M

    @property
    def block_n(self) -> int:
        return self.warps * self.warp_keys if self.warp_keys else BLOCK_N

    @property
    def workgroup_size(self) -> int:
        return self.warps * self.wave_size

    @property
    def grid(self) -> tuple[int, int, int]:
        return (math.ceil(self.m / BLOCK_M) * self.split_kv, self.batch, 1)

    @property
    def key_tiles(self) -> int | None:
        return None if self.k2 is None else math.ceil(self.k2 / self.block_n)

    @property
    def lds_row(self) -> int:
        return self.head_dim + self.lds_pad

    @property
    def lds_bytes(self) -> int:
        if self.transposed:
            return amd_lds_bytes(self.head_dim, self.lds_pad)
        # K and V tiles (per slot), 16-bit; the partial results the warps or a split-KV cluster combine
        v_tile = self.head_dim * (self.block_n + self.lds_pad) if self.v_transposed else self.block_n * self.lds_row
        partials = 0 if self.partials_in_ring else self.partial_bytes
        return self.stages * (self.block_n * self.lds_row + v_tile) * 2 + partials

    @property
    def barriers_per_tile(self) -> int:
        return 2 if self.stages == 1 else 1

    @property
    def partial_chunks(self) -> int:
        """16-byte chunks of one thread's partial results (``_Kernel.combine``): per row it holds, the
        running max and its partial sum, then its O accumulators (f32)."""
        c = self.intrinsic.c
        rows = len({r for r, _ in c.element_offsets()})
        return math.ceil(2 * rows / 4) + (self.head_dim // self.intrinsic.n) * c.elements // 4

    @property
    def partial_bytes(self) -> int:
        """Shared memory for the partial results the warps or a split-KV cluster combine (0 without)."""
        return self.partial_chunks * 16 * self.workgroup_size if self.split_kv > 1 or self.warp_keys else 0

    @property
    def partials_in_ring(self) -> bool:
        """The partials fit in the K ring (``_Kernel.combine`` writes them there once the loop is over)."""
        return not self.transposed and self.stages > 1 and 0 < self.partial_bytes <= self.k_ring_bytes

    @property
    def k_ring_bytes(self) -> int:
        return self.stages * self.block_n * self.lds_row * 2

    @property
    def tile_keys(self) -> int:
        """Keys of each key tile one warp computes on: all, or with ``warp_keys`` its share."""
        return self.warp_keys or BLOCK_N

    def describe(self) -> str:
        copies = "K/V copies through registers" if self.stages == 1 else f"a {self.stages}-slot cp.async ring"
        if self.transposed:
            copies += (
                ", the next tile prefetched into registers" if self.prefetch else ""
            ) + ", S^T = K Q^T and O^T = V^T P^T (V stored transposed in LDS)"
        mask = "" if not self.mask else ", boolean i1 mask" if self.mask == "i1" else f", additive {self.mask} mask"
        if self.warp_keys:
            copies += f", each warp {self.warp_keys} keys of every tile (its own statistics, combined at the end)"
        if self.v_transposed:
            copies += ", V stored head dim outer (its tiles read along the keys through registers)"
        if self.split_kv > 1:
            copies += (
                f", keys split across a cluster of {self.split_kv} workgroups (partials combined through "
                f"distributed shared memory)"
            )
        keys = "a run-time number of" if self.k2 is None else self.k2
        tiles = "run-time" if self.k2 is None else self.key_tiles
        return (
            f"flash attention {self.elem}: batch {self.batch}, {self.m} {'query' if self.m == 1 else 'queries'} x "
            f"{keys} keys, head dim {self.head_dim}, scale {self.scale:g}{causal_words(self)}"
            f"{mask}; {self.intrinsic.name}, "
            f"grid {self.grid}, {self.workgroup_size} threads, {tiles} key tiles of {self.block_n}, "
            f"{self.lds_bytes} LDS bytes, {copies}; K fragments {self.k_fragments.kind}, V fragments "
            f"{self.v_fragments.kind}, P conversion {self.conversion.plan.kind}"
        )


KERNELS = ("wgmma", "mma.sync")  # NVIDIA's two: ``hopper.py`` on warpgroup-MMA targets (the default), this one


def plan_flash_attention(
    attn: Attention,
    *,
    target: str = "sm_80",
    causal: bool = False,
    stages: int | None = None,
    kernel: str | None = None,
    block_n: int | None = None,
    warpgroups: int | None = None,
    split_kv: int | None = None,
    producer: bool | None = None,
    persistent: bool | int | None = None,
    causal_rows: int | None = None,
    pingpong: bool | None = None,
    warps: int | None = None,
    warp_keys: int | None = None,
) -> FlashAttentionPlan | HopperAttentionPlan:
    """Check that the kernel supports ``attn`` on ``target``; the plan, or UnsupportedError naming why.
    ``stages`` (NVIDIA's mma.sync kernel): 2 (the default) streams K and V through a two-slot LDS ring
    filled by cp.async, the next tile in flight while this one is computed, one barrier per tile; 1
    copies each tile through registers between two barriers. AMD (``kernels/attention/amd.py``)
    copies through registers (1, its default): its targets have no asynchronous global -> LDS copy
    here. ``kernel``: on a warpgroup-MMA target (sm_90a) "wgmma" (the default: ``hopper.py``,
    ``block_n`` keys per tile, ``warpgroups`` of 64 queries, and ``producer``: a TMA producer
    warpgroup with a ring of ``stages`` slots, else a two-slot cp.async ring; by default by head
    dim; ``pingpong``: two computing warpgroups of the producer form take turns, by default where
    they can) or "mma.sync" (this kernel, as sm_80 runs it). ``split_kv`` (mma.sync on a target
    with thread block clusters): workgroups sharing each block of queries' keys, one cluster
    (``_split_kv``: by default, for a run-time key length, enough to fill the SMs). ``warp_keys``
    (mma.sync, every query in one warp's 16 rows): each warp computes on its own 16 or 32 keys of
    every key tile (0: off), ``warps`` (4 or 8) of them; by default on (16 keys, ``DECODE_WARPS`` by
    head dim) for a run-time key length with fewer workgroups than SMs."""
    tgt = get_target(target)
    amd = tgt.vendor is Vendor.AMD
    if kernel is None:  # a run-time key length (decode) runs on mma.sync: the wgmma kernel is planned for static ones
        # (and so does V stored with the keys innermost: the wgmma kernel's TMA boxes run along the head dim)
        wgmma = tgt.warpgroup_mma and attn.k2 is not None and not attn.v_transposed
        kernel = "wgmma" if wgmma else "mma.sync" if not amd else None
    if kernel is not None and (kernel not in KERNELS or amd or (kernel == "wgmma" and not tgt.warpgroup_mma)):
        raise UnsupportedError(
            f"kernel {kernel!r} on {target}: NVIDIA's attention kernels are {KERNELS}, wgmma on sm_90a only"
        )
    if (block_n, warpgroups, producer, persistent, pingpong) != (None,) * 5 and kernel != "wgmma":
        raise UnsupportedError(
            "block_n, warpgroups, producer, persistent, pingpong: only the wgmma attention kernel takes them"
        )
    if (warps, warp_keys) != (None, None) and kernel != "mma.sync":
        raise UnsupportedError("warps, warp_keys: only NVIDIA's mma.sync attention kernel takes them")
    asked_stages = stages
    if stages is None:
        stages = 1 if amd else 2
    if stages not in (1, 2, 3, 4) and kernel != "wgmma":  # (the wgmma kernel's: plan_hopper)
        raise UnsupportedError(
            f"stages = {stages}: the kernel has a synchronous copy (1) or a cp.async ring of 2 to 4 slots"
        )
    if amd and stages != 1:
        raise UnsupportedError(
            f"stages = {stages} on {target}: the AMD kernel copies K and V through registers (stages = 1)"
        )
    if tgt.vendor not in (Vendor.NVIDIA, Vendor.AMD):
        raise UnsupportedError(
            f"the flash-attention kernel is written for NVIDIA mma.sync and AMD MFMA/WMMA, not {target}"
        )
    what = attn.describe()
    sizes = {"batch": attn.batch, "M": attn.m, "K1": attn.k1, "K2": attn.k2, "N": attn.n}
    if any(s is None for s in attn.batch) or any(sizes[d] is None for d in ("M", "K1", "N")):
        raise UnsupportedError(
            f"{what}: dynamic sizes other than the key length are not supported (a run-time K2 is; batch, "
            f"queries and head dims static)"
        )
    if attn.k2 is None and kernel == "wgmma":
        raise UnsupportedError(
            f"{what}: the wgmma attention kernel takes a static key length (mma.sync a run-time one)"
        )
    if attn.v_transposed and kernel == "wgmma":
        raise UnsupportedError(
            f"{what}: the wgmma attention kernel reads V head dim innermost (the mma.sync kernel either way)"
        )
    causal = causal or bool(attn.causal)  # a mask proven causal: masked tiles skipped, the mask not read
    rows = (attn.causal_rows if attn.causal else 0) if causal_rows is None else causal_rows
    if rows and (not causal or attn.m is None or rows < 1 or attn.m % rows):
        raise UnsupportedError(f"{what}: causal_rows = {rows} takes a causal kernel and divides the {attn.m} queries")
    rows = 0 if rows == attn.m else rows
    if attn.k2 is None and causal:
        raise UnsupportedError(f"{what}: causal with a run-time key length (IREE gives causal SDPA as a mask)")
    mask = None
    if attn.mask != "no mask" and not attn.causal:
        mask_type = attn.mask_type or ("i1" if attn.mask.startswith("boolean") else None)
        if mask_type is None:
            raise UnsupportedError(
                f"{what}: a mask of unrecorded element type (the kernel reads a boolean i1 "
                f"mask or an additive mask of the inputs' type)"
            )
        if mask_type != "i1" and mask_type != attn.q_type:
            raise UnsupportedError(
                f"{what}: an additive {attn.mask_type} mask with {attn.q_type} inputs is not "
                f"supported (the kernel reads a boolean i1 mask or an additive mask of the "
                f"inputs' type, f16 or bf16)"
            )
        mask = mask_type
    if attn.scale is None:
        raise UnsupportedError(f"{what}: a run-time scale is not supported (a constant only)")
    elems = {attn.q_type, attn.k_type, attn.v_type, attn.out_type}
    if len(elems) != 1 or attn.q_type not in _INTRINSICS:
        raise UnsupportedError(f"{what}: Q, K, V and O must all be f16 or all bf16")
    if attn.k1 != attn.n or attn.k1 not in HEAD_DIMS:
        raise UnsupportedError(f"{what}: head dims {attn.k1} -> {attn.n}; the kernel takes K1 = N in {HEAD_DIMS}")
    if attn.m < 1 or (attn.k2 is not None and attn.k2 < 1):
        raise UnsupportedError(f"{what}: empty attention")
    if amd and mask is not None and attn.k1 == 128 and tgt.family is Family.RDNA4:
        # RDNA4's kernel at head dim 128 sits at ~250 of 256 VGPRs without a mask; with one, LLVM
        # spills (the GPT-2-style 4 x 128 x 128 SDPA with a boolean or additive mask: 10-14 VGPRs,
        # f16 and bf16). Left to IREE rather than handed back to fail verification.
        raise UnsupportedError(
            f"{what}: on {target} (RDNA4) a masked attention at head dim 128 needs more than "
            f"its 256 VGPRs (LLVM spills 10-14); head dim 64, or no mask, is taken"
        )
    split = _split_kv(tgt, attn, causal, split_kv, what)
    if split > 1 and kernel == "wgmma":
        raise UnsupportedError(f"{what}: split_kv is the mma.sync kernel's (kernel='mma.sync')")
    if amd:
        intr, conv, k_frags, v_frags, columns, pad, k_copy, prefetch = plan_parts(tgt, attn.q_type, attn.k1)
        plan = FlashAttentionPlan(
            target,
            intr,
            conv,
            math.prod(attn.batch),
            attn.m,
            attn.k2,
            attn.k1,
            attn.q_type,
            float(attn.scale),
            causal,
            stages,
            k_frags,
            v_frags,
            tuple(attn.batch),
            mask,
            transposed=True,
            v_columns=columns,
            lds_pad=pad,
            k_copy=k_copy,
            prefetch=prefetch,
            causal_rows=rows,
            v_transposed=attn.v_transposed,
        )
        if plan.lds_bytes > tgt.lds_bytes:
            raise UnsupportedError(f"{what}: {plan.lds_bytes} bytes of LDS, {target} has {tgt.lds_bytes}")
        return plan
    if kernel == "wgmma":
        return plan_hopper(
            tgt,
            attn,
            causal=causal,
            mask=mask,
            block_n=block_n,
            warpgroups=warpgroups,
            producer=producer,
            stages=asked_stages,
            persistent=persistent,
            causal_rows=rows,
            pingpong=pingpong,
        )
    intr = tgt.intrinsic(_INTRINSICS[attn.q_type])
    conv = attention_conversion(intr, transposed=False, vendor=tgt.vendor.value, family=tgt.family.value)
    if conv.plan.chosen != "registers" or conv.plan.registers.permutes:
        raise UnsupportedError(
            f"{intr.name}: P's conversion is {conv.plan.kind}; the kernel emits in-lane register routes only"
        )
    keys = hardware_keys(conv)
    if keys != tuple(range(len(keys))):
        raise UnsupportedError(
            f"{intr.name}: the P conversion renames keys {keys}; V's B operand reads keys in order only"
        )
    if conv.dest_batch[0] != 1 or intr.m * WARPS != BLOCK_M or BLOCK_N % (conv.dest_batch[1] * intr.k):
        raise UnsupportedError(f"{intr.name}: P tiles {conv.dest_batch} do not fit a warp's 16 x {BLOCK_N} block")
    warp_keys, warps = _warp_keys(tgt, attn, intr, split, warp_keys, warps, what)
    block_n = warps * warp_keys if warp_keys else BLOCK_N
    d = attn.k1
    # K^T as S's B operand: rows (K) = head dim, cols = keys; stored [key][head dim], K-innermost.
    k_frags = FragmentPlan.plan(
        intr.b.compose(d // intr.k, block_n // intr.n), ROW, 16, intr.b_shape, allow_ldmatrix=True
    )
    # V as P V's B operand: rows (K) = keys, cols = head dim; stored [key][head dim]: K-outer (V stored
    # head dim outer: its LDS tile is [head dim][key], K-innermost, read as K's is).
    v_frags = FragmentPlan.plan(
        intr.b.compose(block_n // intr.k, d // intr.n),
        ROW,
        16,
        intr.b_shape,
        allow_ldmatrix=True,
        k_outer=not attn.v_transposed,
    )
    plan = FlashAttentionPlan(
        target,
        intr,
        conv,
        math.prod(attn.batch),
        attn.m,
        attn.k2,
        d,
        attn.q_type,
        float(attn.scale),
        causal,
        stages,
        k_frags,
        v_frags,
        tuple(attn.batch),
        mask,
        split_kv=split,
        causal_rows=rows,
        v_transposed=attn.v_transposed,
        warp_keys=warp_keys,
        warps=warps,
    )
    if asked_stages is None and split > 1:
        # A split-KV cluster's workgroups are few (about one an SM) and each streams its share of the
        # keys alone: a deeper ring keeps more of them in flight (H200, with the idle warps' skip:
        # batch 1 / 8 at 32k keys 106.6 / 400.9 -> 82.0 / 306.1 us; the two not measured apart).
        for deeper in range(DECODE_STAGES, stages, -1):
            if replace(plan, stages=deeper).lds_bytes <= tgt.lds_bytes:
                plan = replace(plan, stages=deeper)
                break
    if plan.lds_bytes > tgt.lds_bytes:
        raise UnsupportedError(f"{what}: {plan.lds_bytes} bytes of LDS, {target} has {tgt.lds_bytes}")
    return plan


def _warp_keys(tgt, attn: Attention, intr: Intrinsic, split: int, asked: int | None, warps: int | None, what: str):
    """(keys of each key tile a warp computes on, 0 for off; warps of the workgroup): the asked ones
    (checked), else for the decode form -- one row tile of queries, a run-time key length and fewer
    workgroups than SMs -- ``WARP_KEYS`` and ``DECODE_WARPS`` of the head dim, and (0, ``WARPS``) otherwise.
    (H200: the warps splitting every tile's keys took batch 1 at 4k keys 17.7 -> 14.2 us and batch 8
    at 32k 306 -> 247; at batch 32, 256 workgroups, 126 -> 143, measured while the partials had
    shared memory of their own, not since they moved into the K ring.) Only for a run-time key
    length: its masking is the decode form's (every tile's key bound checked)."""
    if asked and attn.k2 is not None:
        raise UnsupportedError(f"{what}: warp_keys with a static key length (the decode form: a run-time one)")
    if asked is None:
        decode = attn.k2 is None and attn.m <= intr.m and math.prod(attn.batch) * split < tgt.compute_units
        asked = WARP_KEYS if decode else 0
    elif asked not in (0, 16, 32):
        raise UnsupportedError(f"{what}: warp_keys = {asked}; a warp takes 16 or 32 keys of every tile (0: off)")
    elif asked and attn.m > intr.m:
        raise UnsupportedError(
            f"{what}: warp_keys with {attn.m} queries; every warp holds the same queries, at most {intr.m}"
        )
    if warps is None:
        warps = DECODE_WARPS[attn.k1] if asked else WARPS
    elif warps not in (4, 8) or (warps != WARPS and not asked):
        raise UnsupportedError(
            f"{what}: warps = {warps}; the kernel runs {WARPS} warps of 16 queries, or with warp_keys 4 or 8"
        )
    return asked, warps


def _split_kv(tgt, attn: Attention, causal: bool, asked: int | None, what: str) -> int:
    """Workgroups per block of queries (a cluster along x, each over a share of the key tiles): the
    asked number (checked), else for a run-time key length (a decoder step: few blocks of queries,
    many keys) as many as fill the SMs once, up to the cluster limit; 1 otherwise."""
    blocks = math.ceil(attn.m / BLOCK_M) * math.prod(attn.batch)
    if asked is None:
        if attn.k2 is not None or causal or tgt.max_cluster < 2:
            return 1
        return max(1, min(tgt.max_cluster, tgt.compute_units // blocks))
    if asked != 1 and not 2 <= asked <= tgt.max_cluster:
        raise UnsupportedError(
            f"{what}: split_kv = {asked}; {tgt.name} takes 1"
            + (f" to {tgt.max_cluster} (one thread block cluster)" if tgt.max_cluster > 1 else " (no clusters)")
        )
    if asked > 1 and causal:
        raise UnsupportedError(f"{what}: split_kv with a causal kernel (its key range ends at the block's queries)")
    return asked


# ---------------------------------------------------------------------------------------------
# Per-lane coordinates from a layout.


@dataclass(frozen=True)
class _Run1:
    """One C element as a run of length 1 (``Layout.runs``' fields)."""

    first: int
    row: int
    col: int
    length: int = 1


def _row_sharers(layout: Layout) -> list[int]:
    """Lane XOR masks reaching every lane that holds the same rows: the column lane dims' bits."""
    masks = []
    for _, div, size, axis, _ in layout.lane_terms():
        if axis == COL:
            assert size & (size - 1) == 0, "lane dims are powers of two"
            masks += [div << b for b in range(size.bit_length() - 1)]
    return masks


def _op_pos(vtype: ir.VectorType, flat: int) -> list[int]:
    """The static position of flat element ``flat`` in a (row-major) per-lane vector."""
    pos = []
    for d in reversed(list(vtype.shape)):
        flat, r = divmod(flat, d)
        pos.append(r)
    return pos[::-1]


# ---------------------------------------------------------------------------------------------
# Emission.


class _Kernel:
    """Builds the kernel body; one instance per emission (IR handles only, the plan decides)."""

    def __init__(
        self,
        plan: FlashAttentionPlan,
        em: Emitter,
        bdims: tuple[int, ...],
        orders: list[tuple[int, ...]],
        mask_order: tuple[int, ...] | None = None,
    ):
        self.p, self.em = plan, em
        self.bdims, self.orders = bdims, orders  # logical batch dims; storage order of Q, K, V, O
        self.mask_order = mask_order  # the mask's stored dims over (batch..., queries, keys)
        intr = plan.intrinsic
        self.intr = intr
        self.t = ir.Type.parse(plan.elem)
        # The mask's stored element: the inputs' type (additive), or i8 for an i1 mask (IREE
        # stores i1 one byte per element at a dispatch boundary; never loaded as vector<Nxi1>).
        self.mask_t = ir.IntegerType.get_signless(8) if plan.mask == "i1" else self.t
        self.f32 = ir.F32Type.get()
        self.i32 = ir.IntegerType.get_signless(32)
        self.c_t = ir.VectorType.get(list(intr.c_shape), self.f32)
        c = intr.c
        self.rows = sorted({r for r, _ in c.element_offsets()})  # row offsets a lane holds per instruction
        self.row_of = [self.rows.index(r) for r, _ in c.element_offsets()]
        # K2: the plan's, or (a run-time key length) the index value emit gives, defined ahead of the kernel
        self.k2: int | ir.Value = plan.k2

    def key_bound(self, block_n: int | None = None):
        """The bound keys are checked against (K2, an int or a run-time value) where the last tile of
        ``block_n`` keys may be partial; None where every tile is whole."""
        p = self.p
        block_n = p.block_n if block_n is None else block_n
        split = getattr(p, "split_kv", 1) > 1  # (a rank's last tiles may lie past K2)
        return self.k2 if p.k2 is None or p.k2 % block_n or split else None

    def key_tiles(self, em: Emitter, block_n: int | None = None) -> ir.Value:
        """The number of key tiles: the plan's, or ceil(K2 / block_n) of the run-time K2."""
        block_n = self.p.block_n if block_n is None else block_n
        if self.p.k2 is not None:
            return em.const(math.ceil(self.p.k2 / block_n))
        return em.div(em.add(self.k2, block_n - 1), block_n)

    def keys_even(self) -> bool:
        """K2 is known to be even (the mask's rows then start at even elements: 2-element loads)."""
        return self.p.k2 is not None and self.p.k2 % 2 == 0

    # ---- scalar float helpers ---------------------------------------------------------------
    def fconst(self, value: float) -> ir.Value:
        with self.em.loc, self.em.ip:
            return arith.ConstantOp(self.f32, ir.FloatAttr.get(self.f32, value)).result

    def f(self, op, *args) -> ir.Value:
        with self.em.loc, self.em.ip:
            return op(*args).result

    def exp2(self, x: ir.Value) -> ir.Value:
        """2^x as ``nvvm.ex2`` (PTX ``ex2.approx.ftz.f32``, one MUFU instruction; relative error
        below 2^-22, far under P's 16-bit rounding). IREE would expand ``math.exp2`` into a
        polynomial of about ten instructions."""
        with self.em.loc, self.em.ip:
            return nvvm.Ex2Op(x, ftz=True, results=[self.f32]).result

    def shuffle_xor(self, value: ir.Value, mask: int) -> ir.Value:
        with self.em.loc, self.em.ip:
            off = arith.ConstantOp(self.i32, mask).result
            width = arith.ConstantOp(self.i32, self.p.wave_size).result
            return gpu.ShuffleOp(value, off, width, gpu.ShuffleMode.XOR).results[0]

    def row_reduce(self, value: ir.Value, op) -> ir.Value:
        for mask in _row_sharers(self.intr.c):
            value = self.f(op, value, self.shuffle_xor(value, mask))
        return value

    def mask_keys(
        self,
        sm: Emitter,
        scores: list,
        key0,
        q_first,
        row0,
        col0,
        block_n: int,
        keys_on_rows: bool = False,
        q_span: int = 0,
    ) -> list:
        """``scores`` ([instruction][C element], instruction j's keys from j * n) with keys past K2
        and (causal) keys past their query set to -inf, in a branch uniform across the warp and taken
        only by the tiles that hold such keys: K2 inside the tile of ``block_n`` keys from ``key0``,
        or a key past ``q_first``, the warp's first query. ``row0`` / ``col0``: the lane's first C row
        and column (the C layout's lane parts added): queries and keys, or with ``keys_on_rows`` (the
        AMD kernel's S^T, instruction j's keys from j * m) keys and queries. Elsewhere the scores pass
        as they are. ``q_span``: the rows from ``q_first`` the scores hold (needed with ``causal_rows``)."""
        p, c = self.p, self.intr.c
        if p.causal and p.causal_rows and q_span < 1:
            raise CodegenError("mask_keys: restarting causal positions need the rows from q_first (q_span)")
        needs, bound = None, self.key_bound(block_n)
        if bound is not None:
            needs = sm.lt(sm.as_index(bound), sm.add(key0, block_n))
        if p.causal:
            diag = sm.lt(self.first_position(sm, q_first, q_span), sm.add(key0, block_n - 1))
            needs = diag if needs is None else sm.or_(needs, diag)
        if needs is None:
            return scores
        with sm.loc, sm.ip:  # (at sm, not the kernel's current emitter: the AMD kernel keeps its own)
            neg_inf = arith.ConstantOp(self.f32, ir.FloatAttr.get(self.f32, -math.inf)).result
        flat = [s for row in scores for s in row]
        with sm.loc, sm.ip:
            branch = scf.IfOp(needs, [self.f32] * len(flat), has_else=True)
        with sm.loc, ir.InsertionPoint(branch.else_block):
            scf.YieldOp(flat)
        masked = sm.at(ir.InsertionPoint(branch.then_block))
        out = []
        for j, row in enumerate(scores):
            for (ro, co), s in zip(c.element_offsets(), row):
                if keys_on_rows:
                    key, past_query = masked.add(row0, j * self.intr.m + ro), (col0, co + 1)
                else:
                    key, past_query = masked.add(col0, j * self.intr.n + co), (row0, ro + 1)
                valid = masked.lt(key, bound) if bound is not None else None
                if p.causal:
                    query = masked.add(*past_query)
                    if p.causal_rows:  # its position: (row mod causal_rows) + 1
                        query = masked.add(masked.rem(masked.add(past_query[0], past_query[1] - 1), p.causal_rows), 1)
                    ok = masked.lt(key, query)  # key <= query
                    valid = ok if valid is None else masked.and_(valid, ok)
                out.append(masked.select(valid, s, neg_inf))
        with sm.loc, ir.InsertionPoint(branch.then_block):
            scf.YieldOp(out)
        res = list(branch.results)
        return [res[j * c.elements : (j + 1) * c.elements] for j in range(len(scores))]

    def first_position(self, em: Emitter, q_first, span: int) -> ir.Value:
        """A lower bound of the positions of the ``span`` queries from row ``q_first`` on (a warp's or a
        block's): the row itself; with ``causal_rows``, its position, or 0 where they cross a restart."""
        rows = self.p.causal_rows
        if not rows:
            return q_first
        if span >= rows:  # (they always reach a restart, or cover several)
            return em.const(0)
        pos = em.rem(q_first, rows)
        return em.select(em.lt(em.const(rows - span), pos), em.const(0), pos)  # (pos + span > rows: crosses)

    def causal_tiles(self, em: Emitter, q0, rows: int, block_n: int, tiles) -> ir.Value:
        """``tiles`` capped to those holding a key at or before the last query position of rows
        [q0, q0 + rows): row q0 + rows - 1 itself, or with ``causal_rows`` the largest position (the
        run's end where the rows cross a restart)."""
        period = self.p.causal_rows
        if period:
            end = em.min_index(em.add(em.rem(q0, period), rows), period)
        else:
            end = em.add(q0, rows)
        return em.min_index(em.div(em.add(end, block_n - 1), block_n), tiles)

    # ---- the online softmax's statistics, per query row a lane holds -------------------------------
    def by_row(self, tiles: list) -> list[list[ir.Value]]:
        """Per row a lane holds (``self.rows``), its values of ``tiles`` ([...][instruction][C
        element]; an instruction's elements in C-layout order), in order."""
        return [
            [v for tile in tiles for inst in tile for e, v in enumerate(inst) if self.row_of[e] == ri]
            for ri in range(len(self.rows))
        ]

    def online_max(self, rows: list[list[ir.Value]], m_old: list) -> tuple[list, list, list]:
        """From each row's scores (this lane's) and running max: the new max (the lane's, then
        across the row's lanes), the value to subtract (the max; 0 while a masked row's max is
        still -inf, so that exp2 gives 0, not NaN) and alpha = exp2(m_old - that)."""
        em, neg_inf = self.em, self.fconst(-math.inf)
        m_new, m_sub, alpha = [], [], []
        for ri, mine in enumerate(rows):
            mx = mine[0]
            for s in mine[1:]:
                mx = self.f(arith.MaximumFOp, mx, s)
            mn = self.f(arith.MaximumFOp, m_old[ri], self.row_reduce(mx, arith.MaximumFOp))
            m_new.append(mn)
            sub = mn
            # (a split rank's tiles, or a warp's share of them, may all lie past K2)
            if self.p.mask or getattr(self.p, "split_kv", 1) > 1 or getattr(self.p, "warp_keys", False):
                with em.loc, em.ip:
                    dead = arith.CmpFOp(arith.CmpFPredicate.OEQ, mn, neg_inf).result
                sub = em.select(dead, self.fconst(0.0), mn)
            m_sub.append(sub)
            alpha.append(self.exp2(self.f(arith.SubFOp, m_old[ri], sub)))
        return m_new, m_sub, alpha

    def running_sums(self, rows: list[list[ir.Value]], l_old: list, alpha: list) -> list:
        """Each row's partial sum of P (this lane's): alpha * l + its P values, in order."""
        out = []
        for ri, mine in enumerate(rows):
            acc = self.f(arith.MulFOp, l_old[ri], alpha[ri])
            for pv in mine:
                acc = self.f(arith.AddFOp, acc, pv)
            out.append(acc)
        return out

    # ---- global addressing: logical (batch..., row, col) -> the tensor's storage order ----------
    def at(self, which: int, bidx: list, row, col) -> list:
        logical = list(bidx) + [row, col]
        return [logical[i] for i in self.orders[which]]

    def bounds(self, which: int, row_bound) -> list:
        logical = [None] * len(self.bdims) + [row_bound, None]
        return [logical[i] for i in self.orders[which]]

    def mask_at(self, bidx: list, row, key) -> list:
        logical = list(bidx) + [row, key]
        return [logical[i] for i in self.mask_order]

    def mask_bounds(self) -> list:
        p = self.p
        logical = [None] * len(self.bdims) + [p.m if p.m % p.block_m else None, self.key_bound(p.block_n)]
        return [logical[i] for i in self.mask_order]

    def load_mask(self, em: Emitter, mask_mem, batch, q_base, key0, lane) -> list[list[ir.Value]]:
        """The additive mask at this lane's S elements of tile ``key0`` ([n-instruction][C element],
        16-bit scalars), straight from global memory (each element is read by one lane, once):
        queries past M and keys past K2 read 0 (those scores are -inf or never stored anyway). With
        the keys innermost and K2 even, each C run of consecutive keys is one vector load (aligned:
        even key, even row stride); otherwise one load per element."""
        p, intr, c = self.p, self.intr, self.intr.c
        em = em.named("load_mask")
        row0 = em.add(q_base, em.lane_part(c, lane, ROW))
        col0 = em.add(key0, em.lane_part(c, lane, COL))
        runs = (
            c.runs(COL)
            if self.mask_order[-1] == len(self.bdims) + 1 and self.keys_even()
            else [_Run1(e, ro, co) for e, (ro, co) in enumerate(c.element_offsets())]
        )
        bounds = self.mask_bounds()
        out = []
        for j in range(p.tile_keys // intr.n):
            vals = [None] * c.elements
            for run in runs:
                idx = self.mask_at(batch, em.add(row0, run.row), em.add(col0, j * intr.n + run.col))
                v = em.bounded_global_load(mask_mem, idx, ir.VectorType.get([run.length], self.mask_t), bounds)
                for i in range(run.length):
                    vals[run.first + i] = self.mask_value(em, v, i)
            out.append(vals)
        return out

    def mask_value(self, em: Emitter, v: ir.Value, i: int) -> ir.Value:
        """Element ``i`` of a loaded mask vector in the additive form, of the inputs' type: as
        it is for an additive mask; for an i1 mask (bytes) IREE's ``arith.trunci`` to i1 (bit 0)
        and ``select(m, 0, -inf)`` (LinalgExt ``applyMask``), so that the rest is the additive
        path."""
        x = em.extract(v, i)
        if self.p.mask != "i1":
            return x
        with em.loc, em.ip:
            bit = arith.TruncIOp(ir.IntegerType.get_signless(1), x).result
            zero = arith.ConstantOp(self.t, ir.FloatAttr.get(self.t, 0.0)).result
            neg_inf = arith.ConstantOp(self.t, ir.FloatAttr.get(self.t, -math.inf)).result
        return em.select(bit, zero, neg_inf)

    def batch_index(self, em: Emitter, y) -> list:
        """The workgroup's batch entry (grid y) as one index per batch dim."""
        out = []
        for i, size in enumerate(self.bdims):
            inner = math.prod(self.bdims[i + 1 :])
            v = em.div(y, inner) if inner > 1 else y
            out.append(em.rem(v, size) if i > 0 else v)
        return out

    # ---- the kernel -------------------------------------------------------------------------
    def build(self, q_mem, k_mem, v_mem, o_mem, mask_mem=None) -> None:
        p, em, intr = self.p, self.em, self.intr
        d = p.head_dim
        tid = em.thread_id()
        with em.loc, em.ip:
            block, batch_y = hal.interface_workgroup_id(0), hal.interface_workgroup_id(1)
        rank = None
        if p.split_kv > 1:  # x = block * split_kv + rank: the cluster spans x, rank is %cluster_ctarank
            block, rank = em.div(block, p.split_kv), em.rem(block, p.split_kv)
        batch = self.batch_index(em, batch_y)
        warp, lane = em.div(tid, p.wave_size), em.rem(tid, p.wave_size)
        # the warp's first query row (with warp_keys every warp holds the same queries, the only ones)
        q_base = em.mul(block, BLOCK_M) if p.warp_keys else em.add(em.mul(block, BLOCK_M), em.mul(warp, intr.m))
        self.warp = warp

        # 1. Q in A fragments, for the whole loop.
        a = intr.a
        a_row, a_col = em.lane_part(a, lane, ROW), em.lane_part(a, lane, COL)
        q_row0 = em.add(q_base, a_row)
        q_frags = []
        for kk in range(d // intr.k):
            frag = em.zero_vector(ir.VectorType.get([a.elements], self.t))
            for run in a.runs(COL):
                idx = self.at(0, batch, em.add(q_row0, run.row), em.add(a_col, kk * intr.k + run.col))
                part = em.bounded_global_load(
                    q_mem, idx, ir.VectorType.get([run.length], self.t), self.bounds(0, p.m if p.m % BLOCK_M else None)
                )
                frag = em.insert_slice(part, frag, run.first)
            q_frags.append(em.shape_cast(frag, intr.a_shape))
        self._q = q_frags

        ring = [p.stages] if p.stages > 1 else []  # a leading slot dimension for the async ring
        k_lds = em.named("lds_k").alloc_lds(ring + [p.block_n, p.lds_row], self.t)
        v_tile = [d, p.block_n + p.lds_pad] if p.v_transposed else [p.block_n, p.lds_row]
        v_lds = em.named("lds_v").alloc_lds(ring + v_tile, self.t)
        self.k_lds = k_lds
        if p.v_transposed:
            self.vt_aligned = self.vt_rows_aligned(em, v_mem)

        # Loop-carried: per row a lane holds, the running max and the lane's partial sum; O.
        neg_inf = self.fconst(-math.inf)
        zero = self.fconst(0.0)
        n_o = d // intr.n
        inits = [neg_inf] * len(self.rows) + [zero] * len(self.rows) + [em.zero_vector(self.c_t)] * n_o
        tiles = self.key_tiles(em)
        if p.causal:  # tiles holding a key <= this block's last query
            tiles = self.causal_tiles(em, em.mul(block, BLOCK_M), BLOCK_M, p.block_n, tiles)
        first, trips = None, tiles
        if rank is not None:
            # This rank's share: C = ceil(T / S) tiles from rank * C (the last ranks' may lie past K2,
            # masked whole). Every workgroup loops C times, so the loop's bounds are uniform.
            trips = em.div(em.add(tiles, p.split_kv - 1), p.split_kv)
            first = em.mul(rank, trips)
            tiles = em.add(first, trips)
        self.tiles = tiles  # the first tile past this workgroup's share
        tid = em.thread_id()
        if p.stages > 1:  # the first stages - 1 tiles' copies, in flight before the loop
            start = em.const(0) if first is None else first
            self.first_group = self.issue_tile(
                em,
                start,
                em.rem(start, p.stages) if first is not None else start,
                None,
                batch,
                tid,
                k_mem,
                v_mem,
                k_lds,
                v_lds,
            )
            for j in range(1, p.stages - 1):
                kt = em.add(start, j)
                self.issue_tile(em, kt, em.rem(kt, p.stages), em.lt(kt, tiles), batch, tid, k_mem, v_mem, k_lds, v_lds)
        with em.loc, em.ip:
            loop = scf.ForOp(em.const(0), trips, em.const(1), inits)
        # Fragment loaders for K and V (``kernels/common/fragments.py``: ldmatrix, .trans for V's K-outer
        # tile); their lane addresses are computed once, before the loop.
        lanes = LaneIndex(em.at(ir.InsertionPoint(loop.operation)), lane, p.wave_size)
        self.k_loader = FragmentLoader(p.k_fragments, k_lds, self.t, lanes)
        self.v_loader = FragmentLoader(p.v_fragments, v_lds, self.t, lanes)
        body = em.at(ir.InsertionPoint(loop.body))
        self.em = body
        carried = list(loop.inner_iter_args)
        r = len(self.rows)
        kt = loop.induction_variable if first is None else body.add(first, loop.induction_variable)
        m_new, l_new, o_new = self.step(
            kt,
            carried[:r],
            carried[r : 2 * r],
            carried[2 * r :],
            batch,
            q_base,
            lane,
            k_mem,
            v_mem,
            k_lds,
            v_lds,
            mask_mem,
        )
        with body.loc, body.ip:
            scf.YieldOp(m_new + l_new + o_new)
        self.em = em
        if p.stages > 1:  # the last iteration's (empty) prefetch
            em.async_wait(self.first_group, 0)
        results = list(loop.results)
        if rank is None and not p.warp_keys:
            self.store(results[r : 2 * r], results[2 * r :], batch, q_base, lane, o_mem)
        else:
            self.combine(results[:r], results[r : 2 * r], results[2 * r :], rank, warp, tid, batch, q_base, lane, o_mem)

    # Mutation hooks for the tests (e2e_tests/test_decode_attention.py): False leaves out a cluster barrier.
    _combine_syncs = (True, True)
    _combine_warp_barrier = True  # (the barrier before warp 0 reads the other warps' partials)
    _combine_ring_barrier = True  # (the barrier before the partials overwrite the K ring)

    def combine(self, m_lane, l_lane, o_acc, rank, warp, tid, batch, q_base, lane, o_mem) -> None:
        """Partial results over disjoint keys combined, and O stored: with ``warp_keys`` first the W
        warps' (each its share of every key tile; all hold the same queries), then with split-KV the
        cluster's S ranks' (each its share of the key tiles):

            (partials in the K ring: barrier, every warp done reading it)
            LDS partial [(c * threads + t) * 16] <- thread t's chunk c: its rows' max m and sum l, its O
            warp_keys: barrier; warp 0 merges the W warps' chunks (its lanes' own) and, split, stores
                       the result at its own threads' chunks
            split:     barrier.cluster.arrive; barrier.cluster.wait  (every rank's partial stored)
                       the owners (warp 0 of rank 0 with warp_keys; else warp w of rank w % S, its
                       queries below M) merge the S ranks' chunks (ld.shared::cluster via mapa)
            the owners store O / l as without a split
            split:     barrier.cluster.arrive; barrier.cluster.wait  (no rank exits while read)

        The partials live in the K ring where they fit (``FlashAttentionPlan.partials_in_ring``: the
        loop is over, its copies waited for), else in an allocation of their own; either way they are
        read and written through shared-memory pointers (``ld.shared`` / ``st.shared``, and a rank's
        through ``mapa``). A merge: M = max_i m_i, w_i = exp2(m_i - M) (0 for a share with no key:
        m_i = -inf), l = sum_i w_i l_i, O = sum_i w_i O_i, in a fixed order (warps, ranks), so every
        run gives the same bits. The scores were scaled by log2(e): exp2 of a difference of maxima
        rescales."""
        p, em = self.p, self.em.named("split_kv")
        s, threads, wave = p.split_kv, p.workgroup_size, p.wave_size
        if p.partials_in_ring:
            part = self.k_lds
            if self._combine_ring_barrier:
                em.barrier()
        else:
            part = em.alloc_lds([p.partial_chunks * threads * 4], self.f32)
        chunk_t = ir.VectorType.get([4], self.f32)
        i64 = ir.IntegerType.get_signless(64)
        p3, p7 = ir.Type.parse("!llvm.ptr<3>"), ir.Type.parse("!llvm.ptr<7>")
        with em.loc, em.ip:
            base = ir.Operation.create("memref.extract_aligned_pointer_as_index", results=[em.index], operands=[part])

        def ptr(e: Emitter, thread, i: int) -> ir.Value:  # thread's chunk i, in this CTA's shared memory
            addr = e.add(base.result, e.mul(e.add(thread, i * threads), 16))
            with e.loc, e.ip:
                return llvm.IntToPtrOp(p3, arith.IndexCastOp(i64, addr).result).result

        def load(e: Emitter, thread, i: int) -> ir.Value:
            with e.loc, e.ip:
                return llvm.LoadOp(chunk_t, ptr(e, thread, i)).result

        def store(e: Emitter, chunks: list) -> None:
            for i, chunk in enumerate(chunks):
                where = ptr(e, tid, i)
                with e.loc, e.ip:
                    llvm.StoreOp(chunk, where)

        store(em, self._pack(em, m_lane, l_lane, o_acc))
        if p.warp_keys:
            if self._combine_warp_barrier:
                em.barrier()
            first = em.if_then(em.eq(warp, 0))
            self.em = first
            threads_of = [first.add(lane, w * wave) for w in range(threads // wave)]
            merged = self._merge(first, lambda e, w, i: load(e, threads_of[w], i), len(threads_of), len(m_lane))
            if s == 1:
                self.store(merged[1], merged[2], batch, q_base, lane, o_mem)
                self.em = em
                return
            store(first, self._pack(first, *merged))  # (its own lanes' chunks: read above)
            self.em = em
        if self._combine_syncs[0]:
            em.cluster_sync()
        if p.warp_keys:
            owner = em.and_(em.eq(warp, 0), em.eq(rank, 0))
        else:
            owner = em.and_(em.eq(em.rem(warp, s), rank), em.lt(q_base, p.m))
        inside = em.if_then(owner)
        self.em = inside

        def remote(e: Emitter, r: int, i: int) -> ir.Value:  # rank r's chunk i of this thread
            with e.loc, e.ip:
                peer = arith.ConstantOp(self.i32, r).result
                return llvm.LoadOp(chunk_t, nvvm.MapaOp(p7, ptr(e, tid, i), peer).result).result

        _, l_out, o_out = self._merge(inside, remote, s, len(m_lane))
        self.store(l_out, o_out, batch, q_base, lane, o_mem)
        self.em = em
        if self._combine_syncs[1]:
            em.cluster_sync()

    def _pack(self, em: Emitter, m_lane, l_lane, o_acc) -> list[ir.Value]:
        """A thread's partial as 16-byte chunks: its rows' maxima and sums (padded), then its O."""
        c = self.intr.c
        chunk_t = ir.VectorType.get([4], self.f32)
        stats = list(m_lane) + list(l_lane)
        stats += [self.fconst(0.0)] * (-len(stats) % 4)
        chunks = [em.from_elements(chunk_t, stats[i : i + 4]) for i in range(0, len(stats), 4)]
        for o in o_acc:
            flat = em.shape_cast(o, [c.elements])
            chunks += [em.extract_slice(flat, i, 4) for i in range(0, c.elements, 4)]
        assert len(chunks) == self.p.partial_chunks
        return chunks

    def _merge(self, em: Emitter, chunk, shares: int, rows: int) -> tuple[list, list, list]:
        """Partials (maxima, sums, O) over disjoint keys merged, in share order; ``chunk(e, share, i)``
        loads a share's chunk i (``_pack``'s order) at ``e``. Each O chunk is loaded where it is
        accumulated. (A loop over the shares, one share's chunks live at a time, took ptxas's spills
        away at 8 ranks and head dim 128 but was slower: flash_attention.md, "Tried".)"""
        self.em = em
        c = self.intr.c
        first = math.ceil(2 * rows / 4)
        stats = []
        for sh in range(shares):
            loaded = [chunk(em, sh, i) for i in range(first)]
            stats.append([em.extract(ch, j) for ch in loaded for j in range(4)])
        neg_inf = self.fconst(-math.inf)
        maxima, subtract = [], []
        for ri in range(rows):
            mx = stats[0][ri]
            for st in stats[1:]:
                mx = self.f(arith.MaximumFOp, mx, st[ri])
            maxima.append(mx)
            with em.loc, em.ip:  # a row no share saw a key of (every one masked): subtract 0, not -inf
                dead = arith.CmpFOp(arith.CmpFPredicate.OEQ, mx, neg_inf).result
            subtract.append(em.select(dead, self.fconst(0.0), mx))
        weights = [[self.exp2(self.f(arith.SubFOp, st[ri], subtract[ri])) for ri in range(rows)] for st in stats]
        sums = []
        for ri in range(rows):
            acc = None
            for w, st in zip(weights, stats):
                term = self.f(arith.MulFOp, w[ri], st[rows + ri])
                acc = term if acc is None else self.f(arith.AddFOp, acc, term)
            sums.append(acc)
        chunk_t = ir.VectorType.get([4], self.f32)
        per = c.elements // 4
        outs = []
        for dn in range(self.p.head_dim // self.intr.n):
            pieces = []
            for q in range(per):
                acc = None
                for sh, w in enumerate(weights):
                    scale = em.from_elements(chunk_t, [w[self.row_of[self._element_at(q * 4 + k)]] for k in range(4)])
                    term = self.f(arith.MulFOp, scale, chunk(em, sh, first + dn * per + q))
                    acc = term if acc is None else self.f(arith.AddFOp, acc, term)
                pieces.append(acc)
            outs.append(em.shape_cast(em.concat(pieces), list(self.c_t.shape)))
        return maxima, sums, outs

    def copy_tile(self, em: Emitter, src, which, dst, batch, key0, tid) -> None:
        """Keys key0 .. key0 + block_n of ``src`` (global) into ``dst`` (LDS), 16-byte chunks;
        keys past K2 read 0."""
        p = self.p
        if which == 2 and p.v_transposed:
            self.copy_vt(em, src, dst, [], batch, key0, tid, None)
            return
        per_chunk = CHUNK_BYTES // 2
        chunks_per_row = p.head_dim // per_chunk
        total = p.block_n * chunks_per_row
        assert total % p.workgroup_size == 0
        vt = ir.VectorType.get([per_chunk], self.t)
        for i in range(total // p.workgroup_size):
            cid = em.add(tid, i * p.workgroup_size)
            row, col = em.div(cid, chunks_per_row), em.mul(em.rem(cid, chunks_per_row), per_chunk)
            val = em.bounded_global_load(
                src,
                self.at(which, batch, em.add(key0, row), col),
                vt,
                self.bounds(which, self.key_bound()),
            )
            em.lds_store(val, dst, [row, col])

    def issue_tile(self, em: Emitter, kt, slot, valid, batch, tid, k_mem, v_mem, k_lds, v_lds) -> ir.Value:
        """Tile ``kt`` of K and V into ring slot ``slot`` by cp.async (``nvgpu.device_async_copy``,
        16 bytes a chunk), one commit group; keys past K2, and every key where ``valid`` (an i1,
        or None) is false, are zero-filled without a read. Returns the group's token."""
        p = self.p
        per_chunk = CHUNK_BYTES // 2
        chunks_per_row = p.head_dim // per_chunk
        total = p.block_n * chunks_per_row
        key0 = em.mul(kt, p.block_n)
        tokens = []
        for src, which, dst, what in ((k_mem, 1, k_lds, "copy_k"), (v_mem, 2, v_lds, "copy_v")):
            c_em = em.named(what)
            if which == 2 and p.v_transposed:  # through registers, into the same slot
                self.copy_vt(c_em, src, dst, [slot], batch, key0, tid, valid)
                continue
            for i in range(total // p.workgroup_size):
                cid = c_em.add(tid, i * p.workgroup_size)
                row, col = c_em.div(cid, chunks_per_row), c_em.mul(c_em.rem(cid, chunks_per_row), per_chunk)
                key = c_em.add(key0, row)
                ok = c_em.lt(key, self.key_bound()) if self.key_bound() is not None else None
                if valid is not None:
                    ok = valid if ok is None else c_em.and_(ok, valid)
                tokens.append(
                    c_em.async_copy(src, self.at(which, batch, key, col), dst, [slot, row, col], per_chunk, ok)
                )
        return em.async_group(tokens)

    # ---- V stored head dim outer: its tiles along the keys, through registers ---------------------
    def vt_rows_aligned(self, em: Emitter, v_mem) -> bool | ir.Value:
        """Whether V's rows (one head-dim index, the keys along them) start 16 bytes apart: K2 (its row
        length) a multiple of 8 -- known when K2 is static, else an i1 computed once from V's own length."""
        if self.p.k2 is not None:
            return self.p.k2 % 8 == 0
        key_dim = self.orders[2].index(len(self.bdims))
        with em.loc, em.ip:
            length = memref_d.DimOp(v_mem, em.const(key_dim)).result
        return em.eq(em.rem(length, 8), 0)

    def load_vt(self, em: Emitter, v_mem, batch, key, hd) -> ir.Value:
        """Keys key .. key + 7 of V's head-dim row ``hd`` (``key`` a multiple of 8) as one vector; keys
        past K2 read 0. One 16-byte load where V's rows are 16-byte aligned (``vt_aligned``), else eight
        16-bit loads (a run-time K2: an scf.if on the i1, uniform across the workgroup)."""
        vt8, vt1 = ir.VectorType.get([8], self.t), ir.VectorType.get([1], self.t)
        bounds = self.bounds(2, self.key_bound())
        elem_bounds = self.bounds(2, self.k2)  # (each key on its own: the last chunk may straddle K2)

        def wide(e: Emitter) -> ir.Value:
            return e.bounded_global_load(v_mem, self.at(2, batch, key, hd), vt8, bounds)

        def narrow(e: Emitter) -> ir.Value:
            parts = [
                e.bounded_global_load(v_mem, self.at(2, batch, e.add(key, j), hd), vt1, elem_bounds) for j in range(8)
            ]
            return e.concat(parts)

        aligned = self.vt_aligned
        if isinstance(aligned, bool):
            return wide(em) if aligned else narrow(em)
        with em.loc, em.ip:
            branch = scf.IfOp(aligned, [vt8], has_else=True)
        for block, build in ((branch.then_block, wide), (branch.else_block, narrow)):
            inner = em.at(ir.InsertionPoint(block))
            value = build(inner)
            with inner.loc, inner.ip:
                scf.YieldOp([value])
        return branch.results[0]

    def copy_vt(self, em: Emitter, v_mem, v_lds, slot: list, batch, key0, tid, valid) -> None:
        """V's tile at ``key0`` into its [head dim][key] LDS tile (ring ``slot``, or none): each thread
        its 16-byte chunks (8 keys of one head-dim row: 8 lanes a row, 128 contiguous bytes), loaded
        (``load_vt``) and stored. ``valid`` false (an i1, or None): zeros stored, nothing read."""
        p = self.p
        per_row = p.block_n // 8
        total = p.head_dim * per_row
        assert total % p.workgroup_size == 0
        for i in range(total // p.workgroup_size):
            cid = em.add(tid, i * p.workgroup_size)
            hd, col = em.div(cid, per_row), em.mul(em.rem(cid, per_row), 8)
            if valid is None:
                val = self.load_vt(em, v_mem, batch, em.add(key0, col), hd)
            else:
                with em.loc, em.ip:
                    branch = scf.IfOp(valid, [ir.VectorType.get([8], self.t)], has_else=True)
                inner = em.at(ir.InsertionPoint(branch.then_block))
                loaded = self.load_vt(inner, v_mem, batch, inner.add(key0, col), hd)
                with inner.loc, inner.ip:
                    scf.YieldOp([loaded])
                other = em.at(ir.InsertionPoint(branch.else_block))
                zeros = other.zero_vector(ir.VectorType.get([8], self.t))
                with other.loc, other.ip:
                    scf.YieldOp([zeros])
                val = branch.results[0]
            em.lds_store(val, v_lds, list(slot) + [hd, col])

    def step(self, kt, m_old, l_old, o_old, batch, q_base, lane, k_mem, v_mem, k_lds, v_lds, mask_mem=None):
        """Key tile ``kt``: its copies (or the ring's wait, barrier and next issue), then ``compute``."""
        p, em = self.p, self.em
        key0 = em.mul(kt, p.block_n)
        tid = em.thread_id()
        slot = None
        # The additive mask's elements for this tile, loaded first: in flight during the copies'
        # wait and S's mma.sync.
        mask_vals = self.load_mask(em, mask_mem, batch, q_base, self.warp_key0(em, kt)[0], lane) if p.mask else None
        if p.stages == 1:
            # 2. K and V tiles into LDS (the barrier first: the previous tile's reads are done).
            em.barrier()
            self.copy_tile(em.named("copy_k"), k_mem, 1, k_lds, batch, key0, tid)
            self.copy_tile(em.named("copy_v"), v_mem, 2, v_lds, batch, key0, tid)
            em.barrier()
        else:
            # 2. This thread's copies of tile kt have landed; after the one barrier every
            # thread's have, and every thread is done reading the other slot (tile kt - 1), so
            # tile kt + 1 goes there now, in flight while this tile is computed.
            # With more slots, tiles kt + 1 .. kt + stages - 2 stay in flight and kt + stages - 1
            # goes into the slot tile kt - 1 held.
            em.async_wait(self.first_group, p.stages - 2)
            em.barrier()
            slot = em.rem(kt, p.stages)
            nxt = em.add(kt, p.stages - 1)
            self.issue_tile(
                em, nxt, em.rem(nxt, p.stages), em.lt(nxt, self.tiles), batch, tid, k_mem, v_mem, k_lds, v_lds
            )
        if p.m % BLOCK_M == 0 or p.warp_keys:
            return self.compute(kt, slot, mask_vals, m_old, l_old, o_old, q_base, lane)
        # A warp whose queries all lie past M (a decoder step's few queries) computes nothing: it only
        # copies and meets the barriers. (Uniform per warp.)
        carried = list(m_old) + list(l_old) + list(o_old)
        with em.loc, em.ip:
            branch = scf.IfOp(em.lt(q_base, p.m), [x.type for x in carried], has_else=True)
        with em.loc, ir.InsertionPoint(branch.else_block):
            scf.YieldOp(carried)
        inside = em.at(ir.InsertionPoint(branch.then_block))
        self.em = inside
        m_new, l_new, o_new = self.compute(kt, slot, mask_vals, m_old, l_old, o_old, q_base, lane)
        with inside.loc, inside.ip:
            scf.YieldOp(list(m_new) + list(l_new) + list(o_new))
        self.em = em
        res, r = list(branch.results), len(m_old)
        return res[:r], res[r : 2 * r], res[2 * r :]

    def compute(self, kt, slot, mask_vals, m_old, l_old, o_old, q_base, lane):
        """One key tile's S = Q K^T, online softmax and O += P V for this warp (K and V in LDS ``slot``)."""
        p, em, intr = self.p, self.em, self.intr
        d = p.head_dim
        key0, first = self.warp_key0(em, kt)  # this warp's first key: in the tile, and in K2

        # 3. S = Q K^T: B = K^T (rows: head dim, cols: keys) read from K's LDS rows.
        c = intr.c
        n_s = p.tile_keys // intr.n
        k_steps = d // intr.k
        origin = {ROW: em.const(0), COL: first}
        frags = self.k_loader.load_each(em, origin, [(kk, j) for j in range(n_s) for kk in range(k_steps)], slot)
        s_acc = []
        for j in range(n_s):
            acc = em.zero_vector(self.c_t)
            for kk in range(k_steps):
                acc = em.mma(intr, self._q[kk], frags[j * k_steps + kk], acc)
            s_acc.append(acc)

        # 4. Online softmax on C, f32, exp2 with log2(e) folded into the scale.
        sm = em.named("softmax")
        self.em = sm
        c_row, c_col = sm.lane_part(c, lane, ROW), sm.lane_part(c, lane, COL)
        factor = self.fconst(p.scale * LOG2E)
        log2e = self.fconst(LOG2E) if p.mask else None
        scores = []  # [instruction][element] f32 scalars
        for j, acc in enumerate(s_acc):
            row = []
            for e in range(c.elements):
                with sm.loc, sm.ip:
                    s = vector.ExtractOp(
                        acc, static_position=_op_pos(self.c_t, c.op_index(e)), dynamic_position=[]
                    ).result
                s = self.f(arith.MulFOp, s, factor)
                if mask_vals is not None:  # + mask * log2(e), as IREE adds a float mask (exp2 form)
                    with sm.loc, sm.ip:
                        mv = arith.ExtFOp(self.f32, mask_vals[j][e]).result
                    s = self.f(arith.AddFOp, s, self.f(arith.MulFOp, mv, log2e))
                row.append(s)
            scores.append(row)
        span = BLOCK_M if p.warp_keys else intr.m  # the queries from q_base: the block's, or the warp's
        scores = self.mask_keys(
            sm, scores, key0, q_base, sm.add(q_base, c_row), sm.add(key0, c_col), p.tile_keys, q_span=span
        )
        m_new, m_sub, alpha = self.online_max(self.by_row([scores]), m_old)
        probs = [
            [self.exp2(self.f(arith.SubFOp, s, m_sub[self.row_of[e]])) for e, s in enumerate(inst)] for inst in scores
        ]
        l_new = self.running_sums(self.by_row([probs]), l_old, alpha)
        alpha_vec = sm.from_elements(
            self.c_t, [alpha[self.row_of[self._element_at(i)]] for i in range(c.op_vector_length)]
        )
        o_scaled = [self.f(arith.MulFOp, o, alpha_vec) for o in o_old]

        # 5. P (C layout, f32) -> A operands (16-bit): the planned register route.
        conv = em.named("convert_p")
        self.em = conv
        plan = p.conversion.plan
        per_src = plan.source.elements
        src_vec = ir.VectorType.get([per_src], self.f32)
        n_src = p.conversion.source_batch[1]
        p_frags = []
        for g in range(len(probs) // n_src):
            sources = []
            for inst in probs[g * n_src : (g + 1) * n_src]:
                by_pos = [inst[self._element_at(i)] for i in range(per_src)]
                sources.append(conv.from_elements(src_vec, by_pos))
            with conv.loc, conv.ip:
                (a_op,) = emit_register_route(
                    plan, sources, lane, elem_type=self.t, narrow=lambda v: conv.convert(v, self.t)
                )
            p_frags.append(conv.shape_cast(a_op, intr.a_shape))

        # 6. O += P V: B = V (rows: keys, cols: head dim) from V's LDS rows.
        pv = em.named("pv")
        self.em = pv
        n_g = len(p_frags)
        origin = {ROW: first, COL: pv.const(0)}
        frags = self.v_loader.load_each(pv, origin, [(g, dn) for g in range(n_g) for dn in range(len(o_scaled))], slot)
        o_new = []
        for dn, o in enumerate(o_scaled):
            for g, pa in enumerate(p_frags):
                o = pv.mma(intr, pa, frags[g * len(o_scaled) + dn], o)
            o_new.append(o)
        self.em = em
        return m_new, l_new, o_new

    def warp_key0(self, em: Emitter, kt) -> tuple[ir.Value, ir.Value]:
        """(the first key this warp computes on in tile ``kt``, its offset in the tile): the tile's
        first, or with ``warp_keys`` its share's."""
        key0 = em.mul(kt, self.p.block_n)
        if not self.p.warp_keys:
            return key0, em.const(0)
        first = em.mul(self.warp, self.p.warp_keys)
        return em.add(key0, first), first

    def _element_at(self, pos: int) -> int:
        """The C layout's logical element at op-vector position ``pos``."""
        c = self.intr.c
        return next(e for e in range(c.elements) if c.op_index(e) == pos)

    def store(self, l_lane, o_acc, batch, q_base, lane, o_mem) -> None:
        """7. O / l, converted, stored from the C layout; rows past M dropped."""
        p, intr = self.p, self.intr
        em = self.em.named("store_o")
        self.em = em
        c = intr.c
        c_row, c_col = em.lane_part(c, lane, ROW), em.lane_part(c, lane, COL)
        inv = [self.f(arith.DivFOp, self.fconst(1.0), self.row_reduce(l, arith.AddFOp)) for l in l_lane]
        inv_vec = em.from_elements(self.c_t, [inv[self.row_of[self._element_at(i)]] for i in range(c.op_vector_length)])
        row0 = em.add(q_base, c_row)
        for dn, o in enumerate(o_acc):
            out = em.convert(em.shape_cast(self.f(arith.MulFOp, o, inv_vec), [c.op_vector_length]), self.t)
            for run in c.runs(COL):
                piece = em.extract_slice(out, c.op_index(run.first), run.length)
                idx = self.at(3, batch, em.add(row0, run.row), em.add(c_col, dn * intr.n + run.col))
                em.bounded_global_store(piece, o_mem, idx, self.bounds(3, p.m if p.m % BLOCK_M else None))


def _global_type(
    plan: FlashAttentionPlan, bdims: tuple[int, ...], order: tuple[int, ...], rows: int | None, elem: ir.Type
) -> ir.MemRefType:
    """The tensor as stored: logical (batch..., rows, head dim) in ``order``, row-major."""
    logical = list(bdims) + [rows, plan.head_dim]
    return buffer_type([logical[i] for i in order], elem)


def emit_flash_attention(
    plan: FlashAttentionPlan,
    *,
    name: str,
    q: Placement,
    k: Placement,
    v: Placement,
    o: Placement,
    layout: ir.Attribute,
    ip: ir.InsertionPoint,
    loc: ir.Location,
    mask: Placement | None = None,
    key_lengths: dict[str, ir.Value] | None = None,
    prologue: list[ir.Operation] = (),
) -> ir.Operation:
    """The kernel as ``func.func @name()`` at ``ip``: bindings through
    ``hal.interface.binding.subspan`` of ``layout`` at the placements' byte offsets (kept as
    the subspans' offset operands; the memrefs' layout offsets are dynamic, as IREE's
    bufferization types them). ``mask``: where the additive mask lives (the plan has one), its
    order over (batch..., queries, keys), batch dims possibly missing (broadcast). A plan with a
    run-time key length: ``key_lengths`` gives K2 as K's, V's (and the mask's) subspans carry it
    (index values the ``prologue`` ops, the dispatch's own, define; moved ahead of the kernel); the
    kernel runs to the smallest, so that no read passes any of the three tensors' ends."""
    if (plan.k2 is None) != bool(key_lengths) or (
        key_lengths and set(key_lengths) != {"K", "V"} | ({"mask"} if mask is not None else set())
    ):
        raise UnsupportedError(
            "a run-time key length needs K2's value for K, V and the mask (and a static one none): "
            f"given {sorted(key_lengths or ())}"
        )
    if (mask is None) != (plan.mask is None):
        raise UnsupportedError(
            f"the plan has {'an additive mask' if plan.mask else 'no mask'}, the placements "
            f"{'do not place one' if mask is None else 'place one'}"
        )
    for what, pl in (("Q", q), ("K", k), ("V", v), ("O", o)) + ((("mask", mask),) if mask else ()):
        if pl.offset is None and pl.offset_value is None:
            raise UnsupportedError(f"{what} at a run-time byte offset whose value the placement does not give")
        if pl.offset is not None and pl.offset % CHUNK_BYTES:
            raise UnsupportedError(
                f"{what} at byte offset {pl.offset}: the kernel's 16-byte copies need a multiple of {CHUNK_BYTES}"
            )
    with loc, ip:
        fn = func.FuncOp(name, ir.FunctionType.get([], []))
    entry = fn.add_entry_block()
    body_ip = ir.InsertionPoint(entry)
    em = Emitter(body_ip, loc, get_target(plan.target).vendor)
    elem = ir.Type.parse(plan.elem)
    written = {o.binding}
    # Stored (batch, rows, head dim) with the batch flattened, unless a placement gives its order.
    flat = all(pl.order is None for pl in (q, k, v, o)) and (mask is None or mask.order is None)
    bdims = (plan.batch,) if flat else (plan.batch_dims or (plan.batch,))
    orders = [pl.order or tuple(range(len(bdims) + 2)) for pl in (q, k, v, o)]
    for what, order in zip("QKVO", orders):
        inner = len(bdims) if what == "V" and plan.v_transposed else len(bdims) + 1
        if sorted(order) != list(range(len(bdims) + 2)) or order[-1] != inner:
            raise UnsupportedError(
                f"{what} stored in order {order}: the kernel reads a permutation of (batch..., "
                f"rows, head dim) with the head dim innermost (V: the keys, where the plan says so)"
            )
    mems = []
    lengths = key_lengths or {}
    for pl, order, rows, what in zip((q, k, v, o), orders, (plan.m, plan.k2, plan.k2, plan.m), "QKVO"):
        flags = _INDIRECT | (0 if pl.binding in written else _READ_ONLY)
        with loc, body_ip:
            mems.append(
                hal.InterfaceBindingSubspanOp(
                    _global_type(plan, bdims, order, rows, elem),
                    layout,
                    pl.binding,
                    [lengths[what]] if what in lengths else [],
                    byte_offset=em.const(pl.offset) if pl.offset is not None else pl.offset_value,
                    alignment=64,
                    descriptor_flags=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), flags),
                ).result
            )
    mask_order = None
    if mask is not None:
        nb = len(bdims)
        mask_order = mask.order or tuple(range(nb + 2))
        if (
            len(set(mask_order)) != len(mask_order)
            or not set(mask_order) <= set(range(nb + 2))
            or nb not in mask_order
            or nb + 1 not in mask_order
        ):
            raise UnsupportedError(
                f"mask stored in order {mask_order}: the kernel reads (batch..., queries, keys) "
                f"in any order, batch dims possibly broadcast, queries and keys present"
            )
        with loc, body_ip:
            m_elem = ir.IntegerType.get_signless(8) if plan.mask == "i1" else elem  # i1: one byte each
            logical = list(bdims) + [plan.m, plan.k2]
            mtype = buffer_type([logical[i] for i in mask_order], m_elem)
            mems.append(
                hal.InterfaceBindingSubspanOp(
                    mtype,
                    layout,
                    mask.binding,
                    [lengths["mask"]] if "mask" in lengths else [],
                    byte_offset=em.const(mask.offset) if mask.offset is not None else mask.offset_value,
                    alignment=64,
                    descriptor_flags=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), _INDIRECT | _READ_ONLY),
                ).result
            )
    with loc:
        kernel = _Kernel(plan, em, bdims, orders, mask_order)
        kernel.fn = fn  # (the kernel function: where a module global is declared beside it)
        if lengths:  # the smallest of the lengths the tensors carry (IREE gives each its own)
            values = [lengths[w] for w in ("K", "V", "mask") if w in lengths]
            kernel.k2 = values[0]
            for x in values[1:]:
                kernel.k2 = em.min_index(kernel.k2, x)
        if plan.transposed:
            kernel = AmdKernel(kernel)
        elif isinstance(plan, HopperAttentionPlan):
            kernel = HopperKernel(kernel)
        kernel.build(*mems)
    with loc, body_ip:
        func.ReturnOp([])
    if getattr(plan, "split_kv", 1) > 1:  # the cluster the partials are combined in
        attrs.write_cluster_dim(fn.operation, (plan.split_kv, 1, 1))
    anchor = entry.operations[0]
    for op in prologue:  # ahead of everything, in their order (they define the key lengths)
        op.move_before(anchor)
    return fn.operation


def pipeline_layout(placements: list[Placement], output: Placement, constants: int = 0) -> ir.Attribute:
    """``#hal.pipeline.layout`` with one storage-buffer binding per binding number used (the
    output's writable, the others read-only), and ``constants`` push constants, as IREE gives a dispatch."""
    n = max(pl.binding for pl in placements) + 1
    flags = ['"ReadOnly|Indirect"'] * n
    flags[output.binding] = "Indirect"
    bindings = ", ".join(f"#hal.pipeline.binding<storage_buffer, {f}>" for f in flags)
    pushed = f"constants = {constants}, " if constants else ""
    return ir.Attribute.parse(f"#hal.pipeline.layout<{pushed}bindings = [{bindings}], flags = Indirect>")


def _key_length_prologue(layout: ir.Attribute, names: list[str]) -> tuple[dict, list, ir.Operation]:
    """A run-time key length as IREE passes it: push constant i (one 32-bit value) for each of
    ``names`` (K, V, the mask), cast to index. Built in a scratch function (its ops are moved into
    the kernel, which then erases it): (the values by name, the ops, the scratch function)."""
    i32, index = ir.IntegerType.get_signless(32), ir.IndexType.get()
    scratch = func.FuncOp("key_length_prologue", ir.FunctionType.get([], []))
    with ir.InsertionPoint(scratch.add_entry_block()):
        values = {}
        for i, name in enumerate(names):
            raw = hal.InterfaceConstantLoadOp(i32, layout, ir.IntegerAttr.get(ir.IndexType.get(), i)).result
            values[name] = arith.IndexCastUIOp(index, raw).result
    ops = [o.operation for o in scratch.regions[0].blocks[0].operations]
    return values, ops, scratch


def standalone_module(
    plan: FlashAttentionPlan,
    *,
    q: Placement,
    k: Placement,
    v: Placement,
    o: Placement,
    ctx: ir.Context,
    name: str = "flash_attention",
    mask: Placement | None = None,
) -> tuple[ir.Module, ir.Operation]:
    """A module holding only the kernel function (what the lane executor runs). A plan with a
    run-time key length reads it from push constants 0 (K's), 1 (V's) and 2 (the mask's), as IREE
    gives each tensor its own."""
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        loc = ir.Location.name("mmaflow.flash_attention", childLoc=ir.Location.unknown())
        names = [] if plan.k2 is not None else ["K", "V"] + (["mask"] if mask else [])
        layout = pipeline_layout([q, k, v, o] + ([mask] if mask else []), o, constants=len(names))
        extra, scratch = {}, None
        if names:
            with ir.InsertionPoint(module.body):
                lengths, ops, scratch = _key_length_prologue(layout, names)
            extra = dict(key_lengths=lengths, prologue=ops)
        fn = emit_flash_attention(
            plan,
            name=name,
            q=q,
            k=k,
            v=v,
            o=o,
            layout=layout,
            ip=ir.InsertionPoint(module.body),
            loc=loc,
            mask=mask,
            **extra,
        )
        if scratch is not None:
            scratch.erase()
    return module, fn


# ---------------------------------------------------------------------------------------------
# An IREE dispatch holding one attention op, replaced by the kernel.


def _dims(attr: ir.Attribute) -> list[int]:
    return [ir.AffineDimExpr(e).position for e in ir.AffineMapAttr(attr).value.results]


def _whole(access: ir.Operation, tensor: ir.Type) -> bool:
    """A dispatch.tensor.load/store of the whole tensor: offsets 0, full sizes, unit strides, all
    static."""

    def arr(name):
        return list(ir.DenseI64ArrayAttr(access.attributes[name]))

    full = list(ir.RankedTensorType(tensor).shape)
    return (
        all(o == 0 for o in arr("static_offsets"))
        and arr("static_sizes") == full
        and all(s == 1 for s in arr("static_strides"))
    )


def _int_width(t: ir.Type) -> int | None:
    return t.width if isinstance(t, ir.IntegerType) else None


def _subspan_placement(sub: ir.Operation | None, what: str, order: tuple[int, ...] | None = None) -> Placement:
    if sub is None or sub.name != "hal.interface.binding.subspan":
        raise UnsupportedError(f"attention's {what} does not come from a binding")
    offset = subspan_constant_offset(sub)
    if offset is not None:
        return Placement(subspan_binding(sub), offset, order)
    value = subspan_offset(sub)
    divisor = dynamic.promised_divisor(value)
    if divisor % CHUNK_BYTES:
        raise UnsupportedError(
            f"attention's {what} is at a run-time byte offset promised a multiple of {divisor} "
            f"(util.assume.int udiv); the kernel's 16-byte accesses need a multiple of {CHUNK_BYTES}"
        )
    return Placement(subspan_binding(sub), None, order, offset_value=value)


def _permutation_copy(op: ir.Operation) -> tuple[list[int], list[int]] | None:
    """(input map dims, output map dims) when ``op`` is a linalg.generic that only permutes its one
    input (IREE fuses the transpose of attention's output into the dispatch), else None."""
    if op.name != "linalg.generic" or len(op.operands) != 2 or len(op.results) != 1:
        return None
    iters = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    if any("parallel" not in t for t in iters):
        return None
    try:
        ins, outs = (_dims(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"]))
    except ValueError:
        return None
    if sorted(ins) != list(range(len(iters))) or sorted(outs) != list(range(len(iters))):
        return None
    block = op.regions[0].blocks[0]
    body = [x.operation for x in block.operations]
    if len(body) != 1 or list(body[0].operands) != [block.arguments[0]]:
        return None
    return ins, outs


def attention_placements(op: ir.Operation) -> tuple[dict[str, Placement], ir.Attribute, ir.Operation, list]:
    """Where an attention op's Q, K, V and O (and its mask, under "mask", when it has one) live (each a whole binding
    tensor: loaded, or stored, whole through iree_tensor_ext.dispatch.tensor.load/store; O possibly through one
    linalg.generic that permutes it), each with its storage order when it is not (batch, rows, head dim); the
    bindings' pipeline layout; the store; the ops besides the attention the kernel
    replaces (that permutation). UnsupportedError when the dispatch is anything else."""
    if op.name != "iree_linalg_ext.attention" or len(op.operands) not in (5, 6) or len(op.results) != 1:
        raise UnsupportedError(
            f"{op.name} with {len(op.operands)} operands: the kernel takes attention(Q, K, V, scale[, mask])"
        )
    maps = [_dims(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    has_mask = len(op.operands) == 6
    q, k, v, _ = maps[:4]
    mask_dims, o = (maps[4], maps[5]) if has_mask else (None, maps[4])
    qs, ks, vs, os_ = (set(x) for x in (q, k, v, o))
    batch = [d for d in o if d in qs & ks & vs]  # O's order, as describe_attention reads it
    roles = {
        "M": [d for d in q if d in os_ and d not in ks],
        "K1": [d for d in q if d in ks and d not in os_],
        "K2": [d for d in k if d in vs and d not in qs],
        "N": [d for d in v if d in os_ and d not in qs],
    }
    roles["M"] = roles["M"] or [None]  # no M loop: one query (Q and O stored without a rows dim)
    if any(len(x) != 1 for x in roles.values()):
        raise UnsupportedError(f"attention indexing maps {maps}: not one loop each for M, K1, K2, N")
    m, k1, k2, n = (roles[r][0] for r in ("M", "K1", "K2", "N"))
    logical = {"Q": batch + [m, k1], "K": batch + [k2, k1], "V": batch + [k2, n], "O": batch + [m, n]}
    nb = len(batch)

    def with_unit_rows(found: list[int]) -> tuple[int, ...]:
        """A storage order lacking the one query's rows dim (nb), with it as a unit dim just outside the
        innermost logical dim (nb + 1: the head dim, or the mask's keys)."""
        if nb not in found:
            found.insert(found.index(nb + 1), nb)
        return tuple(found)

    def order(what: str, dims: list[int]) -> tuple[int, ...]:
        want = logical[what]
        present = [x for x in want if x is not None]
        if sorted(dims) != sorted(present):
            raise UnsupportedError(
                f"attention's {what} map {dims} is not a permutation of its (batch..., rows, head dim) loops {want}"
            )
        found = with_unit_rows([want.index(x) for x in dims])
        if found[-1] != nb + 1 and not (what == "V" and found[-1] == nb):
            raise UnsupportedError(
                f"attention's {what} is stored with its head dim not innermost (indexing map "
                f"{dims}); the kernel's 16-byte copies read along the head dim (V's: or along the keys)"
            )
        return found

    body = op.regions[0].blocks[0] if len(op.regions) and len(op.regions[0].blocks) else None
    if body is not None:
        ops = [x.operation for x in body.operations]
        if len(ops) != 1 or list(ops[0].operands) != [body.arguments[0]]:
            raise UnsupportedError("attention's score region modifies the scores (the kernel takes them as they are)")
    orders, subspans = {}, {}
    for what, value, dims in zip("QKV", list(op.operands)[:3], (q, k, v)):
        load = defining_op(value)
        if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load" or not _whole(load, value.type):
            raise UnsupportedError(f"attention's {what} is not a whole binding tensor")
        subspans[what] = defining_op(load.operands[0])
        orders[what] = order(what, dims)
    mask_order = None
    if has_mask:  # (batch..., M, K2) in any order; a batch dim it lacks is a broadcast
        value = op.operands[4]
        load = defining_op(value)
        if _int_width(ir.ShapedType(value.type).element_type) == 1:
            # IREE stores an i1 tensor one byte per element at a dispatch boundary: the dispatch
            # loads tensor<...xi8> and truncates it (arith.trunci, bit 0) to i1. An i1 load is the
            # packed layout (--iree-experimental-packed-i1-storage), 8 elements a byte: refused.
            if load is not None and load.name == "iree_tensor_ext.dispatch.tensor.load":
                raise UnsupportedError(
                    "attention's i1 mask is stored packed (8 per byte, "
                    "--iree-experimental-packed-i1-storage); the kernel reads one byte per element"
                )
            if (
                load is None
                or load.name != "arith.trunci"
                or _int_width(ir.ShapedType(load.operands[0].type).element_type) != 8
            ):
                raise UnsupportedError(
                    "attention's i1 mask is not an i8 binding tensor truncated to i1 (IREE's "
                    "byte-per-element storage; computed in the dispatch?)"
                )
            value = load.operands[0]
            load = defining_op(value)
        if load is None or load.name != "iree_tensor_ext.dispatch.tensor.load" or not _whole(load, value.type):
            raise UnsupportedError("attention's mask is not a whole binding tensor (computed in the dispatch?)")
        subspans["mask"] = defining_op(load.operands[0])
        mask_logical = batch + [m, k2]
        if (
            len(set(mask_dims)) != len(mask_dims)
            or any(x not in mask_logical for x in mask_dims)
            or (m is not None and m not in mask_dims)
            or k2 not in mask_dims
        ):
            raise UnsupportedError(
                f"attention's mask map {mask_dims} is not over (batch..., queries, keys) "
                f"{mask_logical} with the queries and keys"
            )
        mask_order = with_unit_rows([mask_logical.index(x) for x in mask_dims])
    result, o_dims, consumers = op.results[0], o, []
    users = [user_of(u) for u in result.uses]
    perm = _permutation_copy(users[0]) if len(users) == 1 else None
    if (
        perm is not None
        and ir.ShapedType(users[0].results[0].type).element_type == ir.ShapedType(result.type).element_type
    ):
        ins, outs = perm  # output dim j holds generic loop outs[j], read from input dim ins.index(outs[j])
        o_dims = [o[ins.index(loop)] for loop in outs]
        consumers.append(users[0])
        result = users[0].results[0]
        users = [user_of(u) for u in result.uses]
    if len(users) != 1 or users[0].name != "iree_tensor_ext.dispatch.tensor.store" or not _whole(users[0], result.type):
        raise UnsupportedError(
            "attention's output is not stored whole to a binding (fused consumers other than a transpose?)"
        )
    subspans["O"] = defining_op(users[0].operands[1])
    orders["O"] = order("O", o_dims)
    flat = all(x == tuple(range(len(batch) + 2)) for x in orders.values()) and mask_order in (
        None,
        tuple(range(len(batch) + 2)),
    )
    placements = {}
    for what in "QKVO":
        placements[what] = _subspan_placement(subspans[what], what, None if flat else orders[what])
    if has_mask:
        placements["mask"] = _subspan_placement(subspans["mask"], "mask", None if flat else mask_order)
    return placements, subspans["Q"].attributes["layout"], users[0], consumers


def key_lengths(op: ir.Operation) -> dict[str, ir.Value]:
    """A run-time key length as the dispatch gives it: for K, V and the mask (when it has one), the
    dynamic size its binding subspan carries, which must be K2 (IREE gives each tensor its own
    workload entry; a decoder step's KV cache). Empty when K2 is static; UnsupportedError for any
    other dynamic size."""
    maps = [_dims(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    has_mask = len(op.operands) == 6
    k_loop = next(d for d in maps[1] if d in maps[2] and d not in maps[0])  # in K and V, not in Q
    found = {}
    for what, index in (("K", 1), ("V", 2)) + ((("mask", 4),) if has_mask else ()):
        value = op.operands[index]
        t = ir.ShapedType(value.type)
        dyn = [i for i in range(t.rank) if t.is_dynamic_dim(i)]
        if not dyn:
            continue
        if dyn != [maps[index].index(k_loop)]:
            raise UnsupportedError(f"attention's {what} has a run-time size other than the key length")
        load = defining_op(value)
        if load is not None and load.name == "arith.trunci":  # an i1 mask: its i8 bytes' load
            load = defining_op(load.operands[0])
        sub = defining_op(load.operands[0]) if load is not None else None
        if sub is None or sub.name != "hal.interface.binding.subspan" or len(subspan_dims(sub)) != 1:
            raise UnsupportedError(f"attention's {what}: its run-time key length is not its binding's one dynamic size")
        found[what] = subspan_dims(sub)[0]
    if found and set(found) != {"K", "V"} | ({"mask"} if has_mask else set()):
        raise UnsupportedError(f"attention's key length is run-time for {sorted(found)} only")
    return found


def rewrite_dispatch(
    fn: ir.Operation, *, target: str = "sm_80", causal: bool = False, stages: int | None = None, **plan_options
) -> FlashAttentionPlan:
    """Replace the dispatch function ``fn`` (IREE's executable-sources IR: one attention op between
    whole-tensor loads and a store) by the kernel, under the same name; returns the plan
    (``plan_options``: ``plan_flash_attention``'s). The caller hands it back
    (``stages.hand_back.install`` with ``constant_grid(plan.grid)``)."""
    found = [x for x in walk_ops(fn) if x.name.startswith("iree_linalg_ext.") and x.name != "iree_linalg_ext.yield"]
    if len(found) != 1 or found[0].name != "iree_linalg_ext.attention":
        raise UnsupportedError(
            f"the dispatch holds {[x.name for x in found]}: the kernel replaces one iree_linalg_ext.attention"
        )
    op = found[0]
    plan = plan_flash_attention(describe_attention(op), target=target, causal=causal, stages=stages, **plan_options)
    placements, layout, _, _ = attention_placements(op)
    lengths = key_lengths(op)
    extra = dict(key_lengths=lengths) if lengths else {}
    if lengths or any(pl.offset is None for pl in placements.values()):  # (the values the kernel reads)
        extra["prologue"] = scalar_prologue(fn)
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    with fn.context:
        emit_flash_attention(
            plan,
            name=name,
            q=placements["Q"],
            k=placements["K"],
            v=placements["V"],
            o=placements["O"],
            mask=placements.get("mask") if plan.mask else None,  # (a causal one proven so: not read)
            layout=layout,
            ip=ir.InsertionPoint(fn),
            loc=ir.Location.name("mmaflow.flash_attention", childLoc=fn.location),
            **extra,
        )
    fn.erase()
    return plan
