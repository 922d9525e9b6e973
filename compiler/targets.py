"""Target catalogue: the GPUs mmaflow generates code for, as checked data.

Numbers come from IREE 3.13's own target descriptions (``#iree_gpu.target`` in the
executable-sources IR: LDS size, bank count, subgroup sizes) and the vendors' ISA guides.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UnsupportedError
from .intrinsics import CATALOGUE, Intrinsic


@dataclass(frozen=True)
class Target:
    name: str  # what users type: gfx1100, sm_90a, ...
    vendor: str  # "amd" | "nvidia"
    family: str  # key into intrinsics.CATALOGUE
    description: str
    iree_device: str  # --iree-hal-target-device
    iree_target_flag: str  # --iree-rocm-target / --iree-cuda-target
    iree_arch: str  # value passed to that flag
    wave_sizes: tuple[int, ...]
    lds_bytes: int  # max workgroup memory
    lds_banks: int
    vgprs_per_lane: int  # architectural VGPRs (+AGPRs on CDNA) one lane may use
    compute_units: int = 0  # CUs / WGPs / SMs of the reference part (heuristic: enough workgroups)
    lds_bank_bytes: int = 4
    max_workgroup_size: int = 1024
    # The variant's target attribute needs rewriting (IREE 3.13 lacks a GPU target for sm_90a).
    retarget_variant: bool = False

    def __post_init__(self):
        assert self.vendor in ("amd", "nvidia")
        assert self.family in CATALOGUE, f"{self.name}: no intrinsic family {self.family!r}"
        assert self.wave_sizes and all(w in (32, 64) for w in self.wave_sizes)
        assert self.lds_bytes > 0 and self.lds_banks in (32, 64)

    @property
    def default_wave_size(self) -> int:
        return self.wave_sizes[0]

    @property
    def is_amd(self) -> bool:
        return self.vendor == "amd"

    def iree_flags(self) -> list[str]:
        return [f"--iree-hal-target-device={self.iree_device}", f"{self.iree_target_flag}={self.iree_arch}"]

    def intrinsics(self, wave_size: int | None = None) -> tuple[Intrinsic, ...]:
        items = CATALOGUE[self.family]
        if wave_size is not None:
            items = tuple(i for i in items if i.wave_size == wave_size)
        return items

    def intrinsic(self, name: str) -> Intrinsic:
        for i in CATALOGUE[self.family]:
            if i.name == name:
                return i
        names = ", ".join(i.name for i in CATALOGUE[self.family])
        raise UnsupportedError(f"{self.name} has no intrinsic {name!r}; valid choices: {names}")


_AMD = dict(vendor="amd", iree_device="hip", iree_target_flag="--iree-rocm-target")
_NV = dict(vendor="nvidia", iree_device="cuda", iree_target_flag="--iree-cuda-target", family="nvidia",
           wave_sizes=(32,), lds_banks=32, vgprs_per_lane=255)

TARGETS: dict[str, Target] = {t.name: t for t in [
    Target("gfx1100", family="rdna3", description="AMD RDNA3 (Radeon RX 7900), WMMA",
           iree_arch="gfx1100", wave_sizes=(32, 64), lds_bytes=65536, lds_banks=64,
           vgprs_per_lane=256, **_AMD),
    Target("gfx1201", family="rdna4", description="AMD RDNA4 (Radeon RX 9070), WMMA",
           iree_arch="gfx1201", wave_sizes=(32,), lds_bytes=65536, lds_banks=64,
           vgprs_per_lane=256, **_AMD),
    Target("gfx942", family="cdna3", description="AMD CDNA3 (Instinct MI300), MFMA",
           iree_arch="gfx942", wave_sizes=(64,), lds_bytes=65536, lds_banks=32,
           vgprs_per_lane=512, **_AMD),
    Target("gfx950", family="cdna4", description="AMD CDNA4 (Instinct MI350), MFMA",
           iree_arch="gfx950", wave_sizes=(64,), lds_bytes=163840, lds_banks=64,
           vgprs_per_lane=512, **_AMD),
    Target("sm_80", description="NVIDIA Ampere (A100), mma.sync", iree_arch="sm_80",
           lds_bytes=166912, compute_units=108, **_NV),
    Target("sm_90a", description="NVIDIA Hopper (H100) through mma.sync, PTX .target sm_90a",
           iree_arch="sm_90a", lds_bytes=232448, retarget_variant=True, compute_units=132, **_NV),
]}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        known = ", ".join(TARGETS)
        raise UnsupportedError(f"unknown target {name!r}; known targets: {known}") from None
