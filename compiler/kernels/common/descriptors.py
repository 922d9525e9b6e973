"""Descriptor-addressed shared-memory tiles, as index arithmetic and NVVM ops: what every Hopper
warpgroup-MMA kernel (the matmul's ``kernels/wgmma``, the attention's ``kernels/attention/hopper.py``)
emits the same way.

- ``swizzled_offset``: ``SmemLayout.offset`` of a chunk-aligned element as index values (the
  copies' and stores' addresses);
- ``shared_start``: an allocation's address rounded up to 1024 bytes (IREE declares dynamic shared
  memory ``.align 16``; a 128B-swizzled tile must start on its atom) and its descriptor start field;
- ``wgmma_attributes``: the ``nvvm.wgmma.mma_async`` attributes of one instruction record and the
  operands' major orders.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith

from mmaflow.compiler.kernels.common.emit import Emitter
from mmaflow.compiler.target.smem_layout import Major, SmemLayout

ALIGN = 1024  # a 128B-swizzle atom: tiles start on it, so the descriptors' base-offset field stays 0
CHUNK_BYTES = 16
SHARED_FIELD = 0x3FFFF  # matrix-descriptor-encode keeps address bits 17..4


def swizzled_offset(em: Emitter, lay: SmemLayout, mn, k) -> ir.Value:
    """``SmemLayout.offset(mn, k)`` in bytes from the tile base, for an element at the start of a
    16-byte chunk (K-major: k a multiple of a chunk's elements; MN-major: mn): atom (M/N-atoms
    fastest: the layouts the cp.async copies and the attention kernel fill), line, and the chunk
    XOR the swizzle of the line."""
    mn, k = (em.const(x) if isinstance(x, int) else x for x in (mn, k))
    line_e, s = lay.line_elements, lay.swizzle.chunks
    per_chunk = CHUNK_BYTES // lay.element_bytes
    if lay.major is Major.K:
        atom = em.add(em.mul(em.div(k, line_e), lay.mn_atoms), em.div(mn, 8))
        line, chunk = em.rem(mn, 8), em.div(em.rem(k, line_e), per_chunk)
    else:
        atom = em.add(em.mul(em.div(k, 8), lay.mn_atoms), em.div(mn, line_e))
        line, chunk = em.rem(k, 8), em.div(em.rem(mn, line_e), per_chunk)
    if s > 1:
        with em.loc, em.ip:
            chunk = arith.XOrIOp(chunk, em.rem(em.div(line, 8 // s), s)).result
    return em.add(em.mul(atom, lay.swizzle.atom_bytes), em.mul(line, lay.swizzle.width), em.mul(chunk, CHUNK_BYTES))


def shared_start(em: Emitter, smem: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(the allocation's address rounded up to ``ALIGN``, the padding in bytes, the descriptor's
    start field of that address: ``(address & 0x3FFFF) >> 4`` as an i64)."""
    with em.loc, em.ip:
        ptr = ir.Operation.create("memref.extract_aligned_pointer_as_index", results=[em.index], operands=[smem]).result
    pad = em.rem(em.sub(em.const(ALIGN), em.rem(ptr, ALIGN)), ALIGN)
    address = em.add(ptr, pad)
    i64 = ir.IntegerType.get_signless(64)
    with em.loc, em.ip:
        base64 = arith.IndexCastOp(i64, address).result
        masked = arith.AndIOp(base64, arith.ConstantOp(i64, SHARED_FIELD).result).result
        start = arith.ShRUIOp(masked, arith.ConstantOp(i64, 4).result).result
    return address, pad, start


def wgmma_attributes(intr, a_k_major: bool, b_k_major: bool, zero_d: bool = False) -> dict[str, str]:
    """``nvvm.wgmma.mma_async``'s attributes for ``intr`` (a ``WarpgroupIntrinsic``): K-major A is
    row-major M x K, K-major B column-major K x N (imm-trans 0); MN-major operands the other way
    (imm-trans 1). ``zero_d``: scale-d 0, D = A B (the input accumulator is not read)."""
    return {
        "shape": f"#nvvm.shape<m = {intr.m}, n = {intr.n}, k = {intr.k}>",
        "typeA": f"#nvvm.wgmma_type<{intr.ptx_type('A')}>",
        "typeB": f"#nvvm.wgmma_type<{intr.ptx_type('B')}>",
        "typeD": "#nvvm.wgmma_type<f32>",
        "scaleD": f"#nvvm.wgmma_scale_out<{'zero' if zero_d else 'one'}>",
        "scaleA": "#nvvm.wgmma_scale_in<one>",
        "scaleB": "#nvvm.wgmma_scale_in<one>",
        "layoutA": f"#nvvm.mma_layout<{'row' if a_k_major else 'col'}>",
        "layoutB": f"#nvvm.mma_layout<{'col' if b_k_major else 'row'}>",
    }
