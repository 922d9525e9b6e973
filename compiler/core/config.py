"""Kernel configuration: a small frozen dataclass, chosen by a heuristic, overridable by the user.

A config fixes everything the Script and Distribute stages need:

    intrinsic          the matrix instruction (catalogue name)
    wave_size          32 or 64
    tile_m, tile_n     workgroup tile of the output
    tile_k             K extent staged through LDS per main-loop iteration
    waves_m, waves_n   wave grid inside the workgroup; each wave owns a
                       (tile_m/waves_m) x (tile_n/waves_n) register tile
    lds_pad            elements appended to each LDS row (bank-conflict padding)
    stages             K tiles in the pipeline: 1 (one LDS tile, the next prefetched in registers)
                       or an LDS ring with one barrier per K tile and S - 1 tiles in flight: in
                       S slots through async copies on NVIDIA (cp.async), in registers on AMD
                       (two LDS slots: ``ring_slots``). The decode kernel (``waves_k`` > 1) has no
                       LDS for its operands: 1 issues a wave's K tile's loads right before their
                       instructions, 2 issues the next K tile's before the current one's (in registers)
    raster             workgroup order: 1 = row by row of output tiles (IREE's grid order);
                       G > 1 = groups of G tile rows walked column by column, so the workgroups
                       running together share A and B tiles in L2
    persistent         the warpgroup-MMA kernel: W output tiles per workgroup, computed in turn
                       by a grid of tiles / W workgroups, the next tile's first K tiles copied
                       while this one's epilogue runs (0: one tile per workgroup; unset: the
                       heuristic's choice)
    copy               the warpgroup-MMA kernel's shared-memory copies: unset (cp.async, 16 bytes a
                       thread) or "tma" (cp.async.bulk.tensor from device-built tensor maps,
                       ``compiler/kernels/wgmma/tma.py``; "tma-wide": MN-major tiles with K-atoms fastest, one
                       box per 64-column atom); f16/bf16 and fp8 of one type (A and B K-major:
                       one box per operand and K tile); other kernels refuse it
    producer           the warpgroup-MMA kernel with TMA copies: 1 = warp-specialized, one more
                       warpgroup of 128 threads only issues the copies into mbarrier-guarded
                       slots ("full" and "empty" per slot) and the MMA warpgroups never meet at a
                       CTA barrier in the K loop (``tma.TmaRing.specialized``); 0 (default): the
                       MMA warpgroups issue the copies, one CTA barrier per K tile
    cluster            the warp-specialized persistent kernel: 2 = thread block clusters of two
                       workgroups on the two output tiles of one B column block (tile rows 2p
                       and 2p + 1), each copying its own A and half of B's boxes with a TMA
                       multicast to both (``tma.TmaRing``, "Clusters"); 1 (default): none
    split_k            the warpgroup-MMA kernel: S = 2..8 workgroups per output tile, each a
                       1/S share of the K tiles, in a thread block cluster of S that adds its
                       partial sums in shared memory (each warp's rows read by rank w % S over
                       distributed shared memory, in rank order: deterministic) and stores once;
                       1 (default)
    waves_k            waves splitting K inside a workgroup: the decode kernel
                       (``compiler/kernels/decode/``) when > 1; each wave runs every waves_k-th
                       K tile of ``tile_k`` into its own accumulators, added through LDS in a
                       fixed order at the end (1, the default: every other kernel)

It round-trips through JSON and through an MLIR dictionary attribute (``mmaflow.config``) so every
stage can resume from printed IR.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields

from mmaflow.compiler.core.errors import ConfigError


@dataclass(frozen=True)
class KernelConfig:
    intrinsic: str
    wave_size: int
    tile_m: int
    tile_n: int
    tile_k: int
    waves_m: int
    waves_n: int
    lds_pad: int
    stages: int = 1  # K tiles in the pipeline: 1 = one LDS tile, the next prefetched in registers
    raster: int = 1  # tile rows per workgroup group (1: IREE's grid order)
    copy: str | None = (
        None  # the wgmma ring's copies: None = cp.async, "tma"/"tma-wide" = cp.async.bulk.tensor (kernels/wgmma/tma.py)
    )
    persistent: int | None = None  # the wgmma kernel: output tiles per workgroup, in turn (None: one each)
    producer: int = 0  # the wgmma kernel's TMA ring: 1 = a producer warpgroup issues the copies (warp-specialized)
    cluster: int = 1  # the warp-specialized kernel: 2 = clusters of 2 workgroups sharing B's K tiles by TMA multicast
    waves_k: int = 1  # waves splitting K inside a workgroup (> 1: the decode kernel, kernels/decode/)
    split_k: int = 1  # the wgmma kernel: workgroups (a cluster) splitting K per output tile, reduced in the cluster

    @property
    def wave_tile_m(self) -> int:
        return self.tile_m // self.waves_m

    @property
    def wave_tile_n(self) -> int:
        return self.tile_n // self.waves_n

    @property
    def num_waves(self) -> int:
        return self.waves_m * self.waves_n * self.waves_k

    @property
    def script_threads(self) -> int:
        """The threads the transform script maps its wave grid onto (the decode kernel's other
        ``waves_k`` - 1 waves join at distribution)."""
        return self.waves_m * self.waves_n * self.wave_size

    @property
    def compute_threads(self) -> int:
        """The threads of the waves that compute (the script's thread mapping)."""
        return self.num_waves * self.wave_size

    @property
    def workgroup_size(self) -> int:
        """The launched threads: the computing waves, plus the producer warpgroup if any."""
        return self.compute_threads + PRODUCER_THREADS * self.producer

    def to_dict(self) -> dict:
        d = asdict(self)
        if not d["producer"]:  # (unset unless warp-specialized: printed IR of other kernels unchanged)
            del d["producer"]
        if d["cluster"] == 1:  # (likewise: unset without clusters)
            del d["cluster"]
        if d["waves_k"] == 1:  # (likewise: unset but in the decode kernel)
            del d["waves_k"]
        if d["split_k"] == 1:  # (likewise: unset without split-K)
            del d["split_k"]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(d: dict) -> "KernelConfig":
        names = {f.name for f in fields(KernelConfig)}
        unknown = set(d) - names
        if unknown:
            raise ConfigError(
                f"unknown config keys: {', '.join(sorted(unknown))}; valid keys: {', '.join(sorted(names))}"
            )
        missing = {f.name for f in fields(KernelConfig) if f.default is MISSING} - set(d)
        if missing:
            raise ConfigError(f"config lacks: {', '.join(sorted(missing))}")
        return KernelConfig(**d)

    def describe(self) -> str:
        """One line, in the vendor's words: AMD waves (and their size); NVIDIA warps, or for the
        warpgroup-MMA kernel its MMA warpgroups of 128 threads (warps of 32, so no size)."""
        nvidia = self.intrinsic.startswith(("WGMMA", "MMA_SYNC"))
        if self.intrinsic.startswith("WGMMA"):
            groups = max(1, self.compute_threads // WARPGROUP_THREADS)
            grid = (
                f"{groups} MMA warpgroup{'s' if groups > 1 else ''} (warpgroup tile "
                f"{self.tile_m // groups}x{self.tile_n})"
            )
            head = self.intrinsic
        elif self.intrinsic.startswith("MMA_SYNC"):
            grid = f"warps {self.waves_m}x{self.waves_n} (warp tile {self.wave_tile_m}x{self.wave_tile_n})"
            head = self.intrinsic
        else:
            grid = f"waves {self.waves_m}x{self.waves_n} (wave tile {self.wave_tile_m}x{self.wave_tile_n})"
            head = f"{self.intrinsic} wave{self.wave_size}"
        if self.waves_k > 1:
            word = "warps" if nvidia else "waves"
            grid = f"{self.waves_k} {word} splitting K (each the whole {self.tile_m}x{self.tile_n} tile)"
        return (
            f"{head}, tile {self.tile_m}x{self.tile_n}x{self.tile_k}, {grid}, "
            f"{self.workgroup_size} threads, lds_pad {self.lds_pad}"
            + (
                (
                    ", each K tile's loads issued a tile ahead (in registers)"
                    if self.waves_k > 1
                    else f", {self.stages}-stage {'shared-memory' if nvidia else 'LDS'} ring"
                )
                if self.stages > 1
                else ""
            )
            + (f", workgroups in groups of {self.raster} tile rows" if self.raster > 1 and self.cluster == 1 else "")
            + (
                f", clusters in groups of {self.raster} pairs of tile rows"
                if self.raster > 1 and self.cluster > 1
                else ""
            )
            + (f", {self.copy} copies" if self.copy else "")
            + (f", persistent: {self.persistent} tiles per workgroup" if self.persistent else "")
            + (f", a producer warpgroup of {PRODUCER_THREADS} threads (warp-specialized)" if self.producer else "")
            + (f", clusters of {self.cluster} sharing B by TMA multicast" if self.cluster > 1 else "")
            + (
                f", K split {self.split_k} ways by a cluster of {self.split_k} workgroups per tile (partial sums "
                f"added in distributed shared memory)"
                if self.split_k > 1
                else ""
            )
        )


WARPGROUP_THREADS = 128  # NVIDIA: four warps of 32
PRODUCER_THREADS = WARPGROUP_THREADS  # one warpgroup issues the copies (``producer=1``)
COPY_KINDS = ("cp.async", "tma", "tma-wide")  # --config copy=...: "cp.async" is the default (stored as None)
_INT_KEYS = {
    "wave_size",
    "tile_m",
    "tile_n",
    "tile_k",
    "waves_m",
    "waves_n",
    "lds_pad",
    "stages",
    "raster",
    "persistent",
    "producer",
    "cluster",
    "waves_k",
    "split_k",
}


def parse_overrides(items: list[str]) -> dict:
    """Parse CLI ``KEY=VALUE`` items; ``tile=MxNxK`` and ``waves=MxN`` are shorthands."""
    out: dict = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"config override {item!r} is not KEY=VALUE")
        key, value = (s.strip() for s in item.split("=", 1))
        try:
            if key == "tile":
                parts = [int(v) for v in value.lower().split("x")]
                if len(parts) != 3:
                    raise ValueError
                out["tile_m"], out["tile_n"], out["tile_k"] = parts
            elif key == "waves":
                parts = [int(v) for v in value.lower().split("x")]
                if len(parts) != 2:
                    raise ValueError
                out["waves_m"], out["waves_n"] = parts
            elif key == "persistent":  # 0: one tile per workgroup, held as None (as an unset field)
                out[key] = int(value) or None
            elif key in _INT_KEYS:
                out[key] = int(value)
            elif key == "intrinsic":
                out[key] = value
            elif key == "copy":  # (None: cp.async, as a config already parsed once carries it)
                if value is not None and value not in COPY_KINDS:
                    raise ConfigError(f"copy={value}: the copies are one of {', '.join(COPY_KINDS)}")
                out[key] = None if value in (None, "cp.async") else value
            else:
                valid = sorted(_INT_KEYS | {"intrinsic", "tile", "waves", "copy"})
                raise ConfigError(f"unknown config key {key!r}; valid keys: {', '.join(valid)}")
        except ValueError:
            raise ConfigError(
                f"config value {item!r} is malformed (expected an integer, tile=MxNxK or waves=MxN)"
            ) from None
    return out


def overrides_from(config) -> dict:
    """The API's ``config``: None, a dict {key: value} (ints, or the strings the CLI takes:
    ``{"tile": "64x64x32"}``) or a list of "KEY=VALUE" strings; validated like --config."""
    if config is None:
        return {}
    if isinstance(config, dict):
        items = []
        for key, value in config.items():
            if not isinstance(key, str):
                raise ConfigError(f"config keys are strings, got {key!r}")
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise ConfigError(
                    f"config value {key}={value!r} is a {type(value).__name__}: give an integer "
                    f"(or for tile/waves/intrinsic a string such as '64x64x32')"
                )
            items.append(f"{key}={value}")
        return parse_overrides(items)
    if isinstance(config, (list, tuple)) and all(isinstance(x, str) for x in config):
        return parse_overrides(list(config))
    raise ConfigError(
        f"config must be a dict {{key: value}} or a list of 'KEY=VALUE' strings, got {type(config).__name__} {config!r}"
    )
