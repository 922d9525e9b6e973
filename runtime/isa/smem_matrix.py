"""Shared-memory operands of wgmma.mma_async: the matrix descriptor and the canonical layouts.

Transcribed from the NVIDIA PTX ISA [PTX-WG], 9.7.15.5.1.2 "Shared Memory Matrix Layout" and
9.7.15.5.1.2.2 "Matrix Descriptor Format"; independent of the compiler's ``target/smem_layout.py``
(which states the same layouts as tiles of swizzle atoms; tests make the two agree).

Descriptor, a 64-bit register:

    bits 13-0   matrix-descriptor-encode(matrix start address)
    bits 29-16  matrix-descriptor-encode(leading dimension byte offset, LBO)
    bits 45-32  matrix-descriptor-encode(stride dimension byte offset, SBO)
    bits 51-49  matrix base offset (swizzled modes whose repeating pattern does not start on its
                boundary: (pattern start address >> 7) & 7)
    bits 63-62  swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
    where matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4

(CUTLASS ``cute/arch/mma_sm90_desc.hpp`` GmmaDescriptor: the same fields, layout_type_
SWIZZLE_NONE = 0, SWIZZLE_128B = 1, SWIZZLE_64B = 2, SWIZZLE_32B = 3.)

Canonical layouts (PTX table "Canonical Layouts", CuTe notation, in elements; T = 128 / element
bits, LBO and SBO in elements, m and k repeat without bound):

    MN-major, none   ((T,1,m),(8,k)) : ((1,T,SBO),(T,LBO))     Swizzle<0,4,3>
    MN-major, 32B    ((T,2,m),(8,k)) : ((1,T,LBO),(2T,SBO))    Swizzle<1,4,3>
    MN-major, 64B    ((T,4,m),(8,k)) : ((1,T,LBO),(4T,SBO))    Swizzle<2,4,3>
    MN-major, 128B   ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))    Swizzle<3,4,3>
    K-major,  none   ((8,m),(T,2k))  : ((T,SBO),(1,LBO))       Swizzle<0,4,3>
    K-major,  32B    ((8,m),(T,2k))  : ((2T,SBO),(1,T))        Swizzle<1,4,3>
    K-major,  64B    ((8,m),(T,2k))  : ((4T,SBO),(1,T))        Swizzle<2,4,3>
    K-major,  128B   ((8,m),(T,2k))  : ((8T,SBO),(1,T))        Swizzle<3,4,3>

The first mode is the operand's M (for A) or N (for B) coordinate, the second its K coordinate.
K-major is imm-trans = 0 (A stored as M rows of K, B as N rows of K), MN-major imm-trans = 1.
Swizzle<B,4,3> acts on the byte address: bits [4, 4+B) ^= bits [7, 7+B) (the 16-byte chunk within
a 128-byte line XOR the line's index in the repeating pattern: 1024, 512, 256 bytes for 128B,
64B, 32B). The swizzle is applied to the whole shared-memory address, start address included, so
a start address moved by less than 128 bytes (the next K step inside a swizzled K-major row) is
swizzled as part of its pattern. The base offset's effect on the swizzle is not stated by the
document beyond its encoding: this model refuses a descriptor whose base offset is not 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmaflow.runtime.isa.execute import IsaError

SWIZZLE_BY_CODE = {0: "none", 1: "128B", 2: "64B", 3: "32B"}
CODE_BY_SWIZZLE = {v: k for k, v in SWIZZLE_BY_CODE.items()}
_SWIZZLE_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}  # B of Swizzle<B,4,3>
_PATTERN_BYTES = {"128B": 1024, "64B": 512, "32B": 256}  # where a repeating pattern starts


def descriptor_encode(x: int) -> int:
    """matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4."""
    return (x & 0x3FFFF) >> 4


@dataclass(frozen=True)
class Descriptor:
    """The fields of a matrix descriptor, byte values as the descriptor encodes them (multiples of
    16, below 256 KiB)."""

    start_address: int
    leading_byte_offset: int
    stride_byte_offset: int
    base_offset: int
    swizzle: str  # "none" | "32B" | "64B" | "128B"


def decode_descriptor(value: int) -> Descriptor:
    if not 0 <= value < 2**64:
        raise IsaError(f"a matrix descriptor is a 64-bit value, got {value:#x}")
    return Descriptor(
        start_address=(value & 0x3FFF) << 4,
        leading_byte_offset=((value >> 16) & 0x3FFF) << 4,
        stride_byte_offset=((value >> 32) & 0x3FFF) << 4,
        base_offset=(value >> 49) & 0x7,
        swizzle=SWIZZLE_BY_CODE[(value >> 62) & 0x3],
    )


def encode_descriptor(d: Descriptor) -> int:
    for name in ("start_address", "leading_byte_offset", "stride_byte_offset"):
        v = getattr(d, name)
        if v % 16 or not 0 <= v < 2**18:
            raise IsaError(f"descriptor {name} {v} is not a multiple of 16 below 2^18")
    if not 0 <= d.base_offset < 8:
        raise IsaError(f"descriptor base offset {d.base_offset} does not fit 3 bits")
    return (
        descriptor_encode(d.start_address)
        | descriptor_encode(d.leading_byte_offset) << 16
        | descriptor_encode(d.stride_byte_offset) << 32
        | d.base_offset << 49
        | CODE_BY_SWIZZLE[d.swizzle] << 62
    )


def _canonical(k_major: bool, swizzle: str, t: int, lbo: int, sbo: int):
    """(mn shape, mn stride, k shape, k stride) of the PTX table; the last extent of each mode is
    None (unbounded)."""
    s = 1 << _SWIZZLE_BITS[swizzle]  # 16-byte units per line of the pattern: 1, 2, 4, 8
    if not k_major:
        if swizzle == "none":
            return (t, 1, None), (1, t, sbo), (8, None), (t, lbo)
        return (t, s, None), (1, t, lbo), (8, None), (s * t, sbo)
    if swizzle == "none":
        return (8, None), (t, sbo), (t, None), (1, lbo)
    return (8, None), (s * t, sbo), (t, None), (1, t)


def _evaluate(shape, stride, x):
    """A CuTe layout mode at integer coordinate x (colexicographic: first extent fastest)."""
    out = 0
    for extent, step in zip(shape, stride):
        if extent is None:
            out = out + x * step
            break
        out = out + (x % extent) * step
        x = x // extent
    return out


def swizzle_address(address, swizzle: str):
    """Swizzle<B,4,3> on byte addresses: bits [4, 4+B) ^= bits [7, 7+B)."""
    mask = (1 << _SWIZZLE_BITS[swizzle]) - 1
    return address ^ (((address >> 7) & mask) << 4)


def operand_address(desc: Descriptor, *, k_major: bool, element_bits: int, mn, k):
    """Shared-memory byte address of element (mn, k) of the operand a descriptor describes
    (``mn`` = the M row of A or the N column of B). ``mn`` and ``k`` may be numpy arrays."""
    if element_bits not in (8, 16, 32):
        raise IsaError(f"no wgmma operand has {element_bits}-bit elements")
    if desc.base_offset:
        raise IsaError(
            f"descriptor base offset {desc.base_offset}: how the hardware applies a non-zero base "
            f"offset is not modelled (the PTX ISA gives its encoding only); start each swizzle "
            f"pattern on its {_PATTERN_BYTES.get(desc.swizzle, 0)}-byte boundary"
        )
    if desc.start_address % 16:
        raise IsaError(f"matrix start address {desc.start_address} is not 16-byte aligned")
    t = 128 // element_bits
    ebytes = element_bits // 8
    lbo, sbo = desc.leading_byte_offset, desc.stride_byte_offset
    if lbo % ebytes or sbo % ebytes:
        raise IsaError(f"LBO {lbo} / SBO {sbo} are not whole {element_bits}-bit elements")
    mn_shape, mn_stride, k_shape, k_stride = _canonical(k_major, desc.swizzle, t, lbo // ebytes, sbo // ebytes)
    elements = _evaluate(mn_shape, mn_stride, mn) + _evaluate(k_shape, k_stride, k)
    return swizzle_address(desc.start_address + elements * ebytes, desc.swizzle)


def read_operand(
    smem: np.ndarray, desc: Descriptor, *, k_major: bool, dtype: np.dtype, rows: int, cols: int, mn_axis: int
) -> np.ndarray:
    """The rows x cols operand (A: M x K with mn_axis 0; B: K x N with mn_axis 1) read from
    ``smem`` (uint8) through ``desc``."""
    if smem.dtype != np.uint8 or smem.ndim != 1:
        raise IsaError(f"shared memory must be a 1-D uint8 array, got {smem.dtype} {smem.shape}")
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    mn, k = (r, c) if mn_axis == 0 else (c, r)
    ebytes = dtype.itemsize
    addr = operand_address(desc, k_major=k_major, element_bits=8 * ebytes, mn=mn, k=k)
    if addr.min() < 0 or addr.max() + ebytes > smem.size:
        raise IsaError(
            f"the descriptor addresses shared memory bytes {addr.min()}..{addr.max() + ebytes - 1}, "
            f"outside the {smem.size} bytes given"
        )
    raw = smem[addr[..., None] + np.arange(ebytes)]
    return raw.view(dtype).reshape(rows, cols)
