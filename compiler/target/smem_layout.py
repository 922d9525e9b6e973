"""Descriptor-addressed operands: how a wgmma operand tile lies in shared memory.

A warpgroup MMA (``target/intrinsics.py``) reads B, and A unless A is in registers, straight from shared
memory: no lane holds it, so the batch-lane-vector model has nothing to say about it. What the
compiler must decide instead is the tile's byte layout (which its copies write) and, for each
instruction, a 64-bit matrix descriptor (start address, two byte offsets, swizzle mode) that tells
the hardware where the operand's pieces are.

The layout, in the terms the copies need (NVIDIA PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix
Layout", its Table 38 of swizzle atoms, and 9.7.15.5.1.2.2 "Matrix Descriptor Format"):

- An **atom** is 8 lines of ``width`` bytes, one line per row of the operand's major order: a
  K-major tile (A stored as M rows of K, B as N rows of K; imm-trans = 0) has one M/N index per
  line and K along it; an MN-major tile (imm-trans = 1, 16-bit types only) has one K index per line
  and M/N along it. ``width`` is 16 bytes without swizzle (the atom is one 8 x 16-byte "core
  matrix") and 32, 64 or 128 bytes for the 32B/64B/128B swizzle modes; an atom is ``8 * width``
  bytes and starts on a multiple of its size.
- **Swizzle**: in line ``r`` of an atom, the 16-byte chunk ``c`` is stored at chunk
  ``c ^ ((r // (8 / S)) % S)``, S = width / 16 chunks per line (128B: c ^ r; 64B: c ^ (r // 2) % 4;
  32B: c ^ (r // 4) % 2). A 16-byte piece never straddles chunks, so 16-byte accesses stay whole.
- **Tile**: ``mn x k`` elements as a grid of atoms, M/N-atoms fastest (atom (i, j) at
  ``(j * mn_atoms + i) * atom bytes``), so one instruction's slab of M/N is contiguous atoms.
- **Descriptor** of the instruction operand starting at (mn0, k0): start = tile base + the
  unswizzled offset of (mn0, k0); the two byte offsets are the strides between atoms the
  instruction crosses: along M/N (8 lines, or one atom width of MN-major elements) and along K
  (two 16-byte core matrices of a K-major 16-byte atom, or 8 K lines of an MN-major one). Which
  of them the descriptor calls "leading" (LBO) and which "stride" (SBO) depends on the mode
  (PTX 9.7.15.5.1.2.1): K-major: LBO = K step (unused, 1, when swizzled: K stays inside a line),
  SBO = M/N step; MN-major without swizzle: LBO = K step, SBO = M/N step; MN-major swizzled:
  LBO = M/N step, SBO = K step.
- A K step inside a swizzled K-major line moves the start address by less than 128 bytes; the
  hardware swizzles the whole address, so the lines keep their pattern (the tile base must be
  atom-aligned: base offset 0).

The runtime's ISA model (``mmaflow.runtime.isa.smem_matrix``) transcribes the same document as
CuTe canonical layouts of the descriptor's fields; tests check the two agree element by element.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from mmaflow.compiler.core.errors import UnsupportedError


class Swizzle(str, Enum):
    """Shared-memory swizzle mode of a descriptor-addressed operand."""

    NONE = "none"
    B32 = "32B"
    B64 = "64B"
    B128 = "128B"

    @property
    def width(self) -> int:
        """Bytes per atom line: 16 (a core matrix line) or the swizzle span."""
        return {"none": 16, "32B": 32, "64B": 64, "128B": 128}[self.value]

    @property
    def chunks(self) -> int:
        """16-byte chunks per atom line (S)."""
        return self.width // 16

    @property
    def atom_bytes(self) -> int:
        return 8 * self.width

    @property
    def descriptor_code(self) -> int:
        """Bits 63-62 of the matrix descriptor."""
        return {"none": 0, "128B": 1, "64B": 2, "32B": 3}[self.value]

    @classmethod
    def from_code(cls, code: int) -> "Swizzle":
        return next(s for s in cls if s.descriptor_code == code)

    def chunk(self, line: int, chunk: int) -> int:
        """Where chunk ``chunk`` of atom line ``line`` is stored."""
        s = self.chunks
        return chunk ^ ((line // (8 // s)) % s) if s > 1 else chunk


class Major(str, Enum):
    K = "K"  # imm-trans = 0
    MN = "MN"  # imm-trans = 1


DESCRIPTOR_FIELD_LIMIT = 2**18  # matrix-descriptor-encode keeps address bits 17..4


@dataclass(frozen=True)
class MatrixDescriptor:
    """The 64-bit wgmma matrix descriptor, as fields (byte values)."""

    start_address: int
    leading_byte_offset: int
    stride_byte_offset: int
    swizzle: Swizzle
    base_offset: int = 0

    def __post_init__(self):
        for name in ("start_address", "leading_byte_offset", "stride_byte_offset"):
            v = getattr(self, name)
            if v % 16 or not 0 <= v < DESCRIPTOR_FIELD_LIMIT:
                raise UnsupportedError(
                    f"matrix descriptor {name} = {v}: must be a multiple of 16 below "
                    f"{DESCRIPTOR_FIELD_LIMIT} (the descriptor keeps bits 17..4)"
                )
        if not 0 <= self.base_offset < 8:
            raise UnsupportedError(f"matrix descriptor base offset {self.base_offset} does not fit 3 bits")

    def encode(self) -> int:
        """bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset, 62-63 swizzle."""
        return (
            (self.start_address >> 4)
            | (self.leading_byte_offset >> 4) << 16
            | (self.stride_byte_offset >> 4) << 32
            | self.base_offset << 49
            | self.swizzle.descriptor_code << 62
        )

    @classmethod
    def decode(cls, value: int) -> "MatrixDescriptor":
        field = (1 << 14) - 1
        return cls(
            start_address=(value & field) << 4,
            leading_byte_offset=(value >> 16 & field) << 4,
            stride_byte_offset=(value >> 32 & field) << 4,
            base_offset=value >> 49 & 7,
            swizzle=Swizzle.from_code(value >> 62 & 3),
        )


@dataclass(frozen=True)
class SmemLayout:
    """An ``mn x k`` operand tile in shared memory (A: mn = M rows; B: mn = N columns)."""

    major: Major
    swizzle: Swizzle
    element_bits: int
    mn: int
    k: int
    # Atom order: M/N-atoms fastest (atom (i, j) at j * mn_atoms + i: the cp.async kernel's tiles),
    # or K-atoms fastest (i * k_atoms + j: one M/N atom's K lines contiguous, one TMA box per
    # 64-column atom; ``--config copy=tma-wide``). The descriptor strides follow the order.
    k_atoms_fastest: bool = False

    def __post_init__(self):
        if self.element_bits not in (8, 16, 32):
            raise UnsupportedError(f"no descriptor operand has {self.element_bits}-bit elements")
        if self.major is Major.MN and self.element_bits != 16:
            raise UnsupportedError(
                f"MN-major shared-memory operands (imm-trans) exist for 16-bit types only, "
                f"not {self.element_bits}-bit ones"
            )
        if self.mn % self.atom_mn or self.k % self.atom_k:
            raise UnsupportedError(
                f"a {self.mn}x{self.k} tile is not whole {self.atom_mn}x{self.atom_k} "
                f"{self.major.value}-major {self.swizzle.value} atoms"
            )

    # ---- the atom ------------------------------------------------------------------------------
    @property
    def element_bytes(self) -> int:
        return self.element_bits // 8

    @property
    def line_elements(self) -> int:
        return self.swizzle.width // self.element_bytes

    @property
    def atom_mn(self) -> int:
        """M/N extent of one atom."""
        return 8 if self.major is Major.K else self.line_elements

    @property
    def atom_k(self) -> int:
        return self.line_elements if self.major is Major.K else 8

    @property
    def mn_atoms(self) -> int:
        return self.mn // self.atom_mn

    @property
    def k_atoms(self) -> int:
        return self.k // self.atom_k

    @property
    def bytes(self) -> int:
        return self.mn * self.k * self.element_bytes

    @property
    def alignment(self) -> int:
        """The tile base's alignment: an atom (a swizzle pattern) starts on its own size."""
        return self.swizzle.atom_bytes

    # ---- addresses -----------------------------------------------------------------------------
    def _place(self, mn: int, k: int) -> tuple[int, int, int]:
        """(atom index, line, element within the line) of element (mn, k)."""
        if not (0 <= mn < self.mn and 0 <= k < self.k):
            raise ValueError(f"({mn}, {k}) is outside the {self.mn}x{self.k} tile")
        i, j = mn // self.atom_mn, k // self.atom_k
        line, along = (mn % 8, k % self.atom_k) if self.major is Major.K else (k % 8, mn % self.atom_mn)
        return (i * self.k_atoms + j if self.k_atoms_fastest else j * self.mn_atoms + i), line, along

    def linear_offset(self, mn: int, k: int) -> int:
        """Byte offset of (mn, k) before the swizzle."""
        atom, line, along = self._place(mn, k)
        return atom * self.swizzle.atom_bytes + line * self.swizzle.width + along * self.element_bytes

    def offset(self, mn: int, k: int) -> int:
        """Byte offset of element (mn, k) from the tile base (an ``alignment`` multiple)."""
        atom, line, along = self._place(mn, k)
        byte = along * self.element_bytes
        chunk = self.swizzle.chunk(line, byte // 16)
        return atom * self.swizzle.atom_bytes + line * self.swizzle.width + chunk * 16 + byte % 16

    # ---- descriptors ---------------------------------------------------------------------------
    def strides(self) -> tuple[int, int]:
        """(LBO, SBO) in bytes, per the PTX definitions for this major-ness and swizzle."""
        mn_step = self.swizzle.atom_bytes  # the next atom along M/N (atoms are M/N-fastest)
        k_step = self.mn_atoms * self.swizzle.atom_bytes  # the next atom along K
        if self.k_atoms_fastest:
            mn_step, k_step = self.k_atoms * self.swizzle.atom_bytes, self.swizzle.atom_bytes
        if self.major is Major.K:
            return (k_step if self.swizzle is Swizzle.NONE else 16), mn_step
        if self.swizzle is Swizzle.NONE:
            return k_step, mn_step
        return mn_step, k_step

    def descriptor(self, base: int, mn0: int, k0: int, inst_mn: int, inst_k: int) -> MatrixDescriptor:
        """The descriptor of the inst_mn x inst_k instruction operand at (mn0, k0) of this tile,
        the tile at shared-memory byte address ``base``."""
        if base % self.alignment:
            raise UnsupportedError(
                f"a {self.swizzle.value} tile must start on a {self.alignment}-byte boundary, not {base}"
            )
        if mn0 % self.atom_mn or mn0 + inst_mn > self.mn:
            raise UnsupportedError(
                f"an instruction's M/N rows {mn0}..{mn0 + inst_mn - 1} must start on an atom "
                f"({self.atom_mn}) inside the tile's {self.mn}"
            )
        if k0 % inst_k or k0 + inst_k > self.k:
            raise UnsupportedError(
                f"an instruction's K {k0}..{k0 + inst_k - 1} must start on a K step inside the tile's {self.k}"
            )
        if self.major is Major.K and self.swizzle is not Swizzle.NONE and self.line_elements % inst_k:
            raise UnsupportedError(
                f"K = {inst_k} does not divide a {self.swizzle.value} line of {self.line_elements} elements"
            )
        lbo, sbo = self.strides()
        return MatrixDescriptor(base + self.linear_offset(mn0, k0), lbo, sbo, self.swizzle)

    # ---- presentation --------------------------------------------------------------------------
    def describe(self) -> str:
        lbo, sbo = self.strides()
        swizzle = "no swizzle" if self.swizzle is Swizzle.NONE else f"{self.swizzle.value} swizzle"
        return (
            f"{self.mn}x{self.k} ({self.major.value}-major, {swizzle}, "
            f"{self.element_bits}-bit): atoms of 8 lines x {self.swizzle.width} B ({self.atom_mn}x{self.atom_k} "
            f"elements, {self.swizzle.atom_bytes} B), {'K' if self.k_atoms_fastest else 'M/N'}-atoms fastest; "
            f"LBO {lbo}, SBO {sbo}, "
            f"descriptor mode {self.swizzle.descriptor_code}, base aligned to {self.alignment} B"
        )

    def atom_view(self) -> str:
        """The first atom: one row per line, one column per stored 16-byte chunk, each cell naming
        the logical elements it holds (k0:7 = K 0..7 of that line's M/N row)."""
        per_chunk = 16 // self.element_bytes
        axis = "k" if self.major is Major.K else "mn"
        out = ["line | " + " | ".join(f"chunk{c}".rjust(8) for c in range(self.swizzle.chunks))]
        for line in range(8):
            cells = {}
            for c in range(self.swizzle.chunks):
                first = c * per_chunk
                stored = self.swizzle.chunk(line, c)
                cells[stored] = f"{axis}{first}:{first + per_chunk - 1}"
            row = f"r{line}" if self.major is Major.K else f"k{line}"
            out.append(f"{row:>4} | " + " | ".join(cells[c].rjust(8) for c in range(self.swizzle.chunks)))
        return "\n".join(out)
