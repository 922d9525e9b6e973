"""Target catalogue: the GPUs mmaflow generates code for, as checked data.

Numbers come from IREE 3.13's own target descriptions (``#iree_gpu.target`` in the
executable-sources IR: LDS size, subgroup sizes), the vendors' ISA guides (LDS banks, register
files) and the PTX ISA (registers per thread). Each record asserts its invariants when built.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from iree.compiler import ir

from mmaflow.compiler.core import attrs
from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.target.intrinsics import (
    CATALOGUE,
    SCALED_CATALOGUE,
    WGMMA_CATALOGUE,
    Intrinsic,
    WarpgroupIntrinsic,
    all_wgmma,
)


class Vendor(str, Enum):
    """Who makes the GPU, and with it how IREE and mmaflow name everything about it."""

    AMD = "amd"
    NVIDIA = "nvidia"

    @property
    def iree_backend(self) -> str:
        """The backend of IREE's ``#hal.executable.target<"...">``."""
        return {"amd": "rocm", "nvidia": "cuda"}[self.value]

    @property
    def iree_device(self) -> str:
        """``--iree-hal-target-device`` and the runtime driver."""
        return {"amd": "hip", "nvidia": "cuda"}[self.value]

    @property
    def iree_target_flag(self) -> str:
        return {"amd": "--iree-rocm-target", "nvidia": "--iree-cuda-target"}[self.value]

    @property
    def isa(self) -> str:
        """The ISA IREE dumps for the target, and the dump's file suffix."""
        return {"amd": "amdgcn", "nvidia": "ptx"}[self.value]

    @property
    def isa_suffix(self) -> str:
        return {"amd": "rocmasm", "nvidia": "ptx"}[self.value]


class Family(str, Enum):
    """The instruction family: the key into ``intrinsics.CATALOGUE``."""

    RDNA3 = "rdna3"
    RDNA4 = "rdna4"
    CDNA3 = "cdna3"
    CDNA4 = "cdna4"
    NVIDIA = "nvidia"


@dataclass(frozen=True)
class RegisterFile:
    """AMD's per-SIMD register model, from which occupancy (waves per SIMD) follows.

    ``pools``: (wave size, registers per lane one SIMD holds, allocation granule). RDNA3/RDNA4
    (RDNA3 ISA guide, "VGPR allocation"): 1536 VGPRs per lane-slice at wave32 in granules of 24,
    768 at wave64 in granules of 12, at most 16 waves per SIMD. CDNA3/CDNA4 (MI300 ISA guide):
    512 registers per lane shared by VGPRs and AGPRs (``unified``), granules of 8, at most 8
    waves per SIMD."""

    pools: tuple[tuple[int, int, int], ...]
    max_waves: int
    unified: bool = False  # AGPRs come out of the same pool

    def __post_init__(self):
        assert self.pools and self.max_waves > 0
        for wave, regs, granule in self.pools:
            assert wave in (32, 64) and regs % granule == 0, (wave, regs, granule)

    def waves_per_simd(self, wave_size: int, vgprs: int, agprs: int = 0) -> int:
        pool = next((p for p in self.pools if p[0] == wave_size), None)
        if pool is None:
            raise UnsupportedError(f"no register model for wave{wave_size}")
        _, regs, granule = pool
        used = -(-vgprs // granule) * granule
        if self.unified:
            used += -(-agprs // granule) * granule
        return min(self.max_waves, regs // max(used, 1))


RDNA_REGISTERS = RegisterFile(pools=((32, 1536, 24), (64, 768, 12)), max_waves=16)
CDNA_REGISTERS = RegisterFile(pools=((64, 512, 8),), max_waves=8, unified=True)


@dataclass(frozen=True)
class Target:
    name: str  # what users type: gfx1100, sm_90a, ...
    vendor: Vendor
    family: Family
    description: str
    iree_arch: str  # the value of --iree-rocm-target / --iree-cuda-target
    wave_sizes: tuple[int, ...]
    lds_bytes: int  # max workgroup memory
    lds_banks: int  # 4-byte banks
    vgprs_per_lane: int  # architectural VGPRs (+AGPRs on CDNA) one lane may use
    registers: RegisterFile | None = None  # AMD occupancy model (NVIDIA: ptxas decides)
    compute_units: int = 0  # CUs / WGPs / SMs of the reference part (heuristic: enough workgroups)
    lds_bank_bytes: int = 4
    max_workgroup_size: int = 1024
    # IREE 3.13 has no GPU target for this arch: IREE compiles for ``iree_arch`` and mmaflow
    # rewrites the variant (``variant_target``); IREE's own pipeline runs as ``baseline_arch``.
    retarget_variant: bool = False
    ptx_version: int = 0  # NVIDIA: the +ptxNN feature the variant target needs
    # Hopper's warpgroup MMA (``target/intrinsics.py``): the warpgroup kernel of ``kernels/wgmma/plan.py``.
    warpgroup_mma: bool = False
    # The most CTAs a thread block cluster may hold portably (sm_90: 8, CUDA Programming Guide, "Thread
    # Block Clusters"; 1: no clusters). The kernels that reduce across a cluster's distributed shared memory
    # (split-K, split-KV attention) stay within it.
    max_cluster: int = 1

    def __post_init__(self):
        assert isinstance(self.vendor, Vendor) and isinstance(self.family, Family)
        assert self.family.value in CATALOGUE, f"{self.name}: no intrinsic family {self.family!r}"
        assert self.wave_sizes and all(w in (32, 64) for w in self.wave_sizes)
        assert self.lds_bytes > 0 and self.lds_banks in (32, 64)
        assert (self.registers is not None) == (self.vendor is Vendor.AMD), self.name
        if self.registers is not None:
            assert {p[0] for p in self.registers.pools} >= set(self.wave_sizes), self.name
        assert not self.retarget_variant or self.ptx_version, self.name
        for intr in CATALOGUE[self.family.value]:
            assert intr.wave_size in self.wave_sizes, (self.name, intr.name)

    @property
    def default_wave_size(self) -> int:
        return self.wave_sizes[0]

    @property
    def is_amd(self) -> bool:
        return self.vendor is Vendor.AMD

    @property
    def iree_device(self) -> str:
        return self.vendor.iree_device

    @property
    def baseline_arch(self) -> str:
        """The arch IREE's own pipeline compiles this target's code for (the baseline)."""
        return "sm_80" if self.retarget_variant else self.iree_arch

    def iree_flags(self, arch: str | None = None) -> list[str]:
        """The iree-compile flags for this target (or for ``arch``, e.g. the baseline's)."""
        return [
            f"--iree-hal-target-device={self.vendor.iree_device}",
            f"{self.vendor.iree_target_flag}={arch or self.iree_arch}",
        ]

    @property
    def variant_target(self) -> str | None:
        """The ``#hal.executable.target`` mmaflow gives the variants of a target IREE cannot
        describe: IREE 3.13's sm_80 description with this arch, its PTX version and LDS size."""
        if not self.retarget_variant:
            return None
        return (
            f'#hal.executable.target<"{self.vendor.iree_backend}", "cuda-nvptx-fb", {{iree_codegen.target_info = '
            f'#iree_gpu.target<arch = "{self.iree_arch}", features = "+ptx{self.ptx_version}", wgp = <compute = '
            "fp64|fp32|fp16|int64|int32|int16|int8, storage = b64|b32|b16|b8, subgroup = shuffle|arithmetic, "
            "dot = dp4xi8toi32, mma = [<NV_MMA_SYNC_F32_16x8x16_F16>, <NV_MMA_SYNC_F16_16x8x16_F16>, "
            "<NV_MMA_SYNC_F32_16x8x16_BF16>], subgroup_size_choices = [32], max_workgroup_sizes = [1024, 1024, "
            f"1024], max_thread_count_per_workgroup = {self.max_workgroup_size}, max_workgroup_memory_bytes = "
            f"{self.lds_bytes}, max_workgroup_counts = [2147483647, 65535, 65535]>>}}>"
        )

    def intrinsics(self, wave_size: int | None = None) -> tuple[Intrinsic, ...]:
        """The instructions codegen emits (what the heuristic chooses from). Warpgroup MMAs are
        not among them: ``warpgroup_intrinsics``."""
        items = CATALOGUE[self.family.value]
        if wave_size is not None:
            items = tuple(i for i in items if i.wave_size == wave_size)
        return items

    def scaled_intrinsics(self) -> tuple[Intrinsic, ...]:
        """The block-scaled instructions (CDNA4's ``v_mfma_scale_*``): catalogued, in the ISA model and
        in ``mmaflow layout``, not among ``intrinsics()``: only block-scaled (MXFP) problems take them."""
        return SCALED_CATALOGUE.get(self.family.value, ())

    def intrinsic(self, name: str) -> Intrinsic | WarpgroupIntrinsic:
        """A codegen instruction by name, or a block-scaled one. On a warpgroup-MMA target, a wgmma
        by name (``WGMMA_F32_64x<N>x16_F16``, ``WGMMA_F32_64x<N>x32_F8E4M3FN``: the warpgroup kernel
        of ``kernels/wgmma/plan.py``)."""
        for i in CATALOGUE[self.family.value] + self.scaled_intrinsics():
            if i.name == name:
                return i
        if self.warpgroup_mma:
            for w in all_wgmma():
                if w.name == name:
                    return w  # not in intrinsics(): configure reaches it through wgmma.heuristic.warpgroup_default
        names = ", ".join(i.name for i in CATALOGUE[self.family.value])
        raise UnsupportedError(f"{self.name} has no intrinsic {name!r}; valid choices: {names}")

    def warpgroup_intrinsics(self) -> tuple[WarpgroupIntrinsic, ...]:
        """The warpgroup MMAs ``mmaflow layout`` lists for this target (none before Hopper)."""
        return WGMMA_CATALOGUE if self.warpgroup_mma else ()

    def layout_intrinsic(self, name: str) -> Intrinsic | WarpgroupIntrinsic:
        """Any instruction whose layouts ``mmaflow layout`` can print: codegen's, or a warpgroup
        MMA of any legal N (``WGMMA_F32_64x<N>x16_F16``)."""
        if self.warpgroup_mma:
            for w in all_wgmma():
                if w.name == name:
                    return w
            if not any(i.name == name for i in CATALOGUE[self.family.value]):
                names = ", ".join(i.name for i in CATALOGUE[self.family.value] + WGMMA_CATALOGUE)
                raise UnsupportedError(
                    f"{self.name} has no intrinsic {name!r}; valid choices: {names} (warpgroup "
                    f"MMAs: any N = 8..256 step 8)"
                )
        return self.intrinsic(name)

    def waves_per_simd(self, wave_size: int, vgprs: int, agprs: int = 0) -> int | None:
        """Occupancy from the register file (None on NVIDIA or when the count is unknown)."""
        if self.registers is None or not vgprs:
            return None
        return self.registers.waves_per_simd(wave_size, vgprs, agprs)


_AMD = dict(vendor=Vendor.AMD)
_NV = dict(vendor=Vendor.NVIDIA, family=Family.NVIDIA, wave_sizes=(32,), lds_banks=32, vgprs_per_lane=255)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target(
            "gfx1100",
            family=Family.RDNA3,
            description="AMD RDNA3 (Radeon RX 7900), WMMA",
            iree_arch="gfx1100",
            wave_sizes=(32, 64),
            lds_bytes=65536,
            lds_banks=64,
            vgprs_per_lane=256,
            registers=RDNA_REGISTERS,
            **_AMD,
        ),
        Target(
            "gfx1201",
            family=Family.RDNA4,
            description="AMD RDNA4 (Radeon RX 9070), WMMA",
            iree_arch="gfx1201",
            wave_sizes=(32,),
            lds_bytes=65536,
            lds_banks=64,
            vgprs_per_lane=256,
            registers=RDNA_REGISTERS,
            **_AMD,
        ),
        Target(
            "gfx942",
            family=Family.CDNA3,
            description="AMD CDNA3 (Instinct MI300), MFMA",
            iree_arch="gfx942",
            wave_sizes=(64,),
            lds_bytes=65536,
            lds_banks=32,
            vgprs_per_lane=512,
            registers=CDNA_REGISTERS,
            **_AMD,
        ),
        Target(
            "gfx950",
            family=Family.CDNA4,
            description="AMD CDNA4 (Instinct MI350), MFMA",
            iree_arch="gfx950",
            wave_sizes=(64,),
            lds_bytes=163840,
            lds_banks=64,
            vgprs_per_lane=512,
            registers=CDNA_REGISTERS,
            **_AMD,
        ),
        Target(
            "sm_80",
            description="NVIDIA Ampere (A100), mma.sync",
            iree_arch="sm_80",
            lds_bytes=166912,
            compute_units=108,
            **_NV,
        ),
        Target(
            "sm_90a",
            description="NVIDIA Hopper (H100) through mma.sync, PTX .target sm_90a",
            iree_arch="sm_90a",
            lds_bytes=232448,
            retarget_variant=True,
            # PTX ISA 8.3 for every kernel, the TMA ring's need (tensormap.replace): variants of two
            # PTX versions link into two executables, and a module with both failed to load on the
            # H200 (IREE 3.13 runtime: "function ... not found in executable").
            ptx_version=83,
            compute_units=132,
            warpgroup_mma=True,
            max_cluster=8,
            **_NV,
        ),
    ]
}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        known = ", ".join(TARGETS)
        raise UnsupportedError(f"unknown target {name!r}; known targets: {known}") from None


def target_for_arch(arch: str | None) -> Target | None:
    """The target IREE describes as ``arch`` (None if none of ours)."""
    return next((t for t in TARGETS.values() if t.iree_arch == arch and not t.retarget_variant), None)


def read_target(func: ir.Operation) -> Target:
    """The ``Target`` a tagged dispatch function was selected for (``mmaflow.target``)."""
    return get_target(attrs.read_target_name(func))
