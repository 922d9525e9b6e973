"""Warpgroup MMA (Hopper, sm_90a ``wgmma.mma_async``): catalogue records, not yet emitted.

One instruction is issued by a warpgroup, 4 consecutive warps = 128 threads, and computes a
64 x N x K product (N = 8, 16, ..., 256; K = 16 for f16/bf16, 32 for fp8). The accumulator and,
optionally, A live in registers and have batch-lane-vector layouts over the 128 threads (the
``Layout`` model with wave_size 128: LaneX = threadID_in_group (4), LaneY = groupID (8),
LaneZ = warp in the warpgroup (4)); B, and A when it is not in registers, are read from shared
memory through a matrix descriptor (``target/smem_layout.py``).

Source: NVIDIA PTX ISA 9.7.15.5.1.1 "Register Fragments" (Figures 148/149 .m64nNk16, 152/153
.m64nNk32), checked against CUTLASS cute/atom/mma_traits_sm90_gmma.hpp (ALayout_64x16,
ALayout_64x32, CLayout_64xN):

    A, 16-bit (a0..a7):  row = 16*warp + groupID + 8*((i/2)%2), col = 2*tig + i%2 + 8*(i/4)
        rows = LaneY(8) . VectorZ(2) . LaneZ(4)   cols = VectorX(2) . LaneX(4) . VectorY(2)
        element order VectorX, VectorZ, VectorY  (mma.sync m16n8k16's A, one 16-row slab per warp)
    A, 8-bit (a0..a15):  row = 16*warp + groupID + 8*((i/4)%2), col = 4*tig + i%4 + 16*(i/8)
    D, f32 (d0..d(N/2-1)): row = 16*warp + groupID + 8*((i/2)%2), col = 8*(i/4) + 2*tig + i%2
        rows = LaneY(8) . VectorY(2) . LaneZ(4)   cols = VectorX(2) . LaneX(4) . VectorZ(N/8)

Worked example (A, f16): thread 37 is warp 1, groupID 1, tig 1; its a6 (VectorX 0, VectorZ 1,
VectorY 1) is A[16 + 1 + 8][2 + 0 + 8] = A[25][10].

These records are deliberately not in ``intrinsics.CATALOGUE`` (``Target.intrinsics()``, what
the mma.sync heuristic chooses from): configure reaches them only through
``config.warpgroup_default`` (the measured sm_90a rule) or ``--config intrinsic=NAME``.
``Target.intrinsic(name)`` returns any of them on sm_90a, the kernel of ``kernels/wgmma/plan.py`` (fp8:
K-major A and B only, as the instruction has no transpose for 8-bit types: ``majors``).
``mmaflow layout sm_90a`` prints them, and ``e2e_tests/test_wgmma_layout.py`` checks each against
the runtime's independent ISA model.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.target.intrinsics import BF16, F8E4M3FN, F8E5M2, F16, F32, TYPE_BITS
from mmaflow.compiler.target.layout import Layout, make_layout
from mmaflow.compiler.target.smem_layout import Major, SmemLayout, Swizzle

WARPGROUP = 128
WGMMA_N = tuple(range(8, 257, 8))  # PTX "Matrix Shape": .m64nNk16 / .m64nNk32, N = 8*i, i = 1..32
_PTX_NAME = {F16: "f16", BF16: "bf16", F8E4M3FN: "e4m3", F8E5M2: "e5m2"}
WGMMA_CODEGEN_TYPES = (F16, BF16, F8E4M3FN, F8E5M2)  # what the warpgroup kernel (kernels/wgmma/plan.py) emits
FP8 = (F8E4M3FN, F8E5M2)


@dataclass(frozen=True)
class WarpgroupIntrinsic:
    """One wgmma.mma_async shape and type: register layouts of A and D, and the shared-memory
    major orders its descriptor operands may take."""

    name: str
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    mnemonic: str
    isa_key: str
    a: Layout  # A from registers (the RS form)
    c: Layout
    a_shape: tuple[int, ...]
    c_shape: tuple[int, ...]
    family: str = "wgmma"
    unsigned_a: bool = False  # (the epilogue's conversions ask; no wgmma is unsigned)
    unsigned_b: bool = False
    wave_size: int = WARPGROUP
    op: str = "nvvm.wgmma.mma_async"

    def __post_init__(self):
        assert self.m == 64 and self.n in WGMMA_N, f"{self.name}: m64nN with N in 8..256 step 8"
        assert self.k * TYPE_BITS[self.a_type] == 256, f"{self.name}: K is 32 bytes of A"
        assert (self.a.rows, self.a.cols) == (self.m, self.k), f"{self.name}: A is not MxK"
        assert (self.c.rows, self.c.cols) == (self.m, self.n), f"{self.name}: C is not MxN"
        for lay, shape in ((self.a, self.a_shape), (self.c, self.c_shape)):
            assert lay.wave_size == WARPGROUP and lay.replication == 1, f"{self.name}: {lay.operand} spans 128 threads"
            assert math.prod(shape) == lay.op_vector_length, f"{self.name}: {lay.operand} vector shape {shape}"

    # ---- what the record answers -----------------------------------------------------------------
    @property
    def majors(self) -> tuple[Major, ...]:
        """Shared-memory orders of A and B: MN-major (imm-trans) exists for 16-bit types only."""
        return (Major.K, Major.MN) if TYPE_BITS[self.a_type] == 16 else (Major.K,)

    def operand(self, which: str) -> Layout:
        if which == "A":
            return self.a
        if which == "C":
            return self.c
        raise UnsupportedError(f"{self.name}: {which} is read from shared memory through a matrix descriptor, it "
                               f"has no register layout (see shared_layout)")

    def element_type(self, which: str) -> str:
        return {"A": self.a_type, "B": self.b_type, "C": self.c_type}[which]

    def ptx_type(self, which: str) -> str:
        """The PTX / NVVM name of an operand's type (``#nvvm.wgmma_type<e4m3>``)."""
        return _PTX_NAME[self.element_type(which)] if which != "C" else "f32"

    def shared_layout(self, which: str, major: Major, swizzle: Swizzle) -> SmemLayout:
        """The smallest tile of this instruction's A (M x K) or B (N x K) in shared memory."""
        if which not in ("A", "B"):
            raise UnsupportedError(f"{self.name}: only A and B can be read from shared memory, not {which}")
        if major not in self.majors:
            raise UnsupportedError(f"{self.name}: {major.value}-major shared-memory operands need 16-bit inputs")
        bits = TYPE_BITS[self.element_type(which)]
        mn = self.m if which == "A" else self.n
        line = swizzle.width * 8 // bits  # elements per atom line
        atom_mn, atom_k = (8, line) if major is Major.K else (line, 8)
        return SmemLayout(major, swizzle, bits, -(-mn // atom_mn) * atom_mn, -(-self.k // atom_k) * atom_k)

    def vgprs(self, which: str) -> int:
        """32-bit registers each thread spends on A (register form) or the accumulator."""
        lay = self.operand(which)
        return math.ceil(lay.op_vector_length * TYPE_BITS[self.element_type(which)] / 32)

    def describe(self) -> str:
        majors = "/".join(m.value for m in self.majors)
        return (f"{self.name}: {self.m}x{self.n}x{self.k} {self.a_type} x {self.b_type} -> {self.c_type}, "
                f"warpgroup{self.wave_size}, op {self.op}, ISA {self.mnemonic}; A in registers or shared memory, "
                f"B in shared memory ({majors}-major, swizzle none/32B/64B/128B) "
                f"[codegen: sm_90a default where it fits, or --config intrinsic={self.name}]")


def _a_layout(bits: int) -> Layout:
    per = 32 // bits  # elements per 32-bit register: 2 (16-bit) or 4 (8-bit)
    return make_layout("A", WARPGROUP, rows=[("LaneY", 8), ("VectorZ", 2), ("LaneZ", 4)],
                       cols=[("VectorX", per), ("LaneX", 4), ("VectorY", 2)],
                       vector_order=("VectorX", "VectorZ", "VectorY"))


def _c_layout(n: int) -> Layout:
    return make_layout("C", WARPGROUP, rows=[("LaneY", 8), ("VectorY", 2), ("LaneZ", 4)],
                       cols=[("VectorX", 2), ("LaneX", 4), ("VectorZ", n // 8)])


def wgmma(n: int, a_type: str, b_type: str | None = None) -> WarpgroupIntrinsic:
    """The m64nNk(16|32) f32-accumulating wgmma for any legal N and input types."""
    b_type = b_type or a_type
    if n not in WGMMA_N:
        raise UnsupportedError(f"wgmma has no N = {n}; N is a multiple of 8 from 8 to 256")
    sixteen = {F16, BF16}
    eight = {F8E4M3FN, F8E5M2}
    if not ((a_type == b_type and a_type in sixteen) or (a_type in eight and b_type in eight)):
        raise UnsupportedError(f"no f32-accumulating wgmma takes {a_type} x {b_type}; it takes f16 x f16, "
                               f"bf16 x bf16 or any pair of f8E4M3FN / f8E5M2")
    bits = TYPE_BITS[a_type]
    k = 256 // bits
    ptx = f"m64n{n}k{k}.f32.{_PTX_NAME[a_type]}.{_PTX_NAME[b_type]}"
    suffix = a_type.upper() if a_type == b_type else f"{a_type.upper()}_{b_type.upper()}"
    name = f"WGMMA_F32_64x{n}x{k}_{suffix}"
    return WarpgroupIntrinsic(name, 64, n, k, a_type, b_type, F32, f"wgmma.mma_async.sync.aligned.{ptx}",
                              f"ptx.wgmma.mma_async.sync.aligned.{ptx}", _a_layout(bits), _c_layout(n),
                              (4, 32 // bits), (n // 2,))


@functools.cache
def all_wgmma() -> tuple[WarpgroupIntrinsic, ...]:
    """Every f32-accumulating wgmma: each legal N for f16, bf16 and the four fp8 pairs."""
    pairs = [(F16, F16), (BF16, BF16)] + [(a, b) for a in (F8E4M3FN, F8E5M2) for b in (F8E4M3FN, F8E5M2)]
    return tuple(wgmma(n, a, b) for a, b in pairs for n in WGMMA_N)


# What ``mmaflow layout sm_90a`` lists: the N a kernel is likely to use, per input type. Any other
# legal N is ``wgmma(n, type)``.
WGMMA_CATALOGUE: tuple[WarpgroupIntrinsic, ...] = tuple(
    wgmma(n, t) for t in (F16, BF16, F8E4M3FN, F8E5M2) for n in (64, 128, 256))
