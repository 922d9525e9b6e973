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
                       (two LDS slots: ``ring_slots``)
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

It round-trips through JSON and through an MLIR dictionary attribute (``mmaflow.config``) so every
stage can resume from printed IR.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields, replace

from mmaflow.compiler.core.errors import ConfigError, UnsupportedError
from mmaflow.compiler.target.intrinsics import TYPE_BITS, Intrinsic
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.target.targets import Family, Target, Vendor
from mmaflow.compiler.target.wgmma import FP8, WarpgroupIntrinsic


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
    copy: str | None = None  # the wgmma ring's copies: None = cp.async, "tma"/"tma-wide" = cp.async.bulk.tensor (kernels/wgmma/tma.py)
    persistent: int | None = None  # the wgmma kernel: output tiles per workgroup, in turn (None: one each)
    producer: int = 0  # the wgmma kernel's TMA ring: 1 = a producer warpgroup issues the copies (warp-specialized)
    cluster: int = 1  # the warp-specialized kernel: 2 = clusters of 2 workgroups sharing B's K tiles by TMA multicast

    @property
    def wave_tile_m(self) -> int:
        return self.tile_m // self.waves_m

    @property
    def wave_tile_n(self) -> int:
        return self.tile_n // self.waves_n

    @property
    def num_waves(self) -> int:
        return self.waves_m * self.waves_n

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
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(d: dict) -> "KernelConfig":
        names = {f.name for f in fields(KernelConfig)}
        unknown = set(d) - names
        if unknown:
            raise ConfigError(f"unknown config keys: {', '.join(sorted(unknown))}; "
                              f"valid keys: {', '.join(sorted(names))}")
        missing = {f.name for f in fields(KernelConfig) if f.default is MISSING} - set(d)
        if missing:
            raise ConfigError(f"config lacks: {', '.join(sorted(missing))}")
        return KernelConfig(**d)

    def describe(self) -> str:
        return (f"{self.intrinsic} wave{self.wave_size}, tile {self.tile_m}x{self.tile_n}x{self.tile_k}, "
                f"waves {self.waves_m}x{self.waves_n} (wave tile {self.wave_tile_m}x{self.wave_tile_n}), "
                f"{self.workgroup_size} threads, lds_pad {self.lds_pad}"
                + (f", {self.stages}-stage LDS ring" if self.stages > 1 else "")
                + (f", workgroups in groups of {self.raster} tile rows" if self.raster > 1 and self.cluster == 1 else "")
                + (f", clusters in groups of {self.raster} pairs of tile rows" if self.raster > 1 and self.cluster > 1
                   else "")
                + (f", {self.copy} copies" if self.copy else "")
                + (f", persistent: {self.persistent} tiles per workgroup" if self.persistent else "")
                + (f", a producer warpgroup of {PRODUCER_THREADS} threads (warp-specialized)" if self.producer else "")
                + (f", clusters of {self.cluster} sharing B by TMA multicast" if self.cluster > 1 else ""))


PRODUCER_THREADS = 128  # one warpgroup issues the copies (``producer=1``)
COPY_KINDS = ("cp.async", "tma", "tma-wide")  # --config copy=...: "cp.async" is the default (stored as None)
_INT_KEYS = {"wave_size", "tile_m", "tile_n", "tile_k", "waves_m", "waves_n", "lds_pad", "stages", "raster", "persistent",
             "producer", "cluster"}


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
            raise ConfigError(f"config value {item!r} is malformed (expected an integer, "
                              f"tile=MxNxK or waves=MxN)") from None
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
                raise ConfigError(f"config value {key}={value!r} is a {type(value).__name__}: give an integer "
                                  f"(or for tile/waves/intrinsic a string such as '64x64x32')")
            items.append(f"{key}={value}")
        return parse_overrides(items)
    if isinstance(config, (list, tuple)) and all(isinstance(x, str) for x in config):
        return parse_overrides(list(config))
    raise ConfigError(f"config must be a dict {{key: value}} or a list of 'KEY=VALUE' strings, got "
                      f"{type(config).__name__} {config!r}")


# --------------------------------------------------------------------------------------------
# Intrinsic choice and validation.

def matching_intrinsics(target: Target, problem: Contraction, wave_size: int | None = None) -> list[Intrinsic]:
    out = []
    for intr in target.intrinsics(wave_size):
        if (intr.a_type, intr.b_type, intr.c_type) != (problem.a_type, problem.b_type, problem.c_type):
            continue
        if intr.a_type == "i8" and (intr.unsigned_a, intr.unsigned_b) != (problem.unsigned_a, problem.unsigned_b):
            continue
        out.append(intr)
    return out


def require_intrinsic(target: Target, problem: Contraction) -> None:
    if not matching_intrinsics(target, problem):
        have = sorted({f"{i.a_type}x{i.b_type}->{i.c_type}" for i in target.intrinsics()})
        sign = ""
        if problem.a_type == "i8":
            sign = f" ({'unsigned' if problem.unsigned_a else 'signed'} x {'unsigned' if problem.unsigned_b else 'signed'})"
        raise UnsupportedError(
            f"no matrix instruction on {target.name} computes {problem.a_type} x {problem.b_type} -> "
            f"{problem.c_type}{sign}; {target.name} has: {', '.join(have)}")


def k_outer(problem: Contraction, operand: str) -> bool:
    """Whether the operand's global tile has K outermost (B of a plain matmul, A transposed)."""
    return problem.a_transposed if operand == "A" else not problem.b_transposed


def async_ring(cfg: KernelConfig, target: Target) -> bool:
    """Whether the LDS tiles are a ring filled by asynchronous copies (NVIDIA's cp.async, which
    store the global tile as it is); AMD's ring is filled through registers, like one stage."""
    return cfg.stages > 1 and target.vendor is Vendor.NVIDIA


def lds_tile(cfg: KernelConfig, problem: Contraction, operand: str, target: Target) -> tuple[int, int]:
    """One stage's LDS tile of an operand, padded rows last: K-innermost ``[non-K][K + pad]``,
    except in an asynchronously filled LDS ring (``async_ring``), where the copies store the
    global tile as it is: a K-outer operand keeps ``[K][non-K + pad]`` (its fragments come from
    ``ldmatrix .trans``)."""
    nonk = cfg.tile_m if operand == "A" else cfg.tile_n
    if async_ring(cfg, target) and k_outer(problem, operand):
        return cfg.tile_k, nonk + cfg.lds_pad
    return nonk, cfg.tile_k + cfg.lds_pad


def ring_slots(cfg: KernelConfig, target: Target) -> int:
    """K tiles the LDS holds. NVIDIA's ring: ``stages`` (the async copies of S - 1 tiles in flight
    land in LDS). AMD's ring keeps its S - 1 tiles in flight in registers and stores each into
    LDS one tile before it is read: with one barrier per K tile two slots are all it can use
    (the tile being read and the next), a third would sit idle."""
    if cfg.stages == 1:
        return 1
    return cfg.stages if target.vendor is Vendor.NVIDIA else 2


def lds_bytes(cfg: KernelConfig, problem: Contraction, target: Target) -> int:
    return ring_slots(cfg, target) * sum(r * c * TYPE_BITS[t] // 8 for r, c, t in
                            (lds_tile(cfg, problem, "A", target) + (problem.a_type,),
                             lds_tile(cfg, problem, "B", target) + (problem.b_type,)))


def ring_problem(cfg: KernelConfig, target: Target, problem: Contraction) -> str | None:
    """Why an LDS ring of ``cfg.stages`` K tiles cannot serve this problem, or None. On AMD the
    ring is filled through registers by the copies of one stage (any problem they serve). On
    NVIDIA it is filled by cp.async (``nvgpu.device_async_copy``: 4, 8 or 16 bytes per thread,
    straight to shared memory), so: 16-bit operands where a tile is K-outer (``ldmatrix .trans``
    transposes 16-bit elements only), and chunks of at least 4 bytes that divide the global
    rows."""
    if target.vendor is Vendor.AMD:
        return None
    for op, t in (("A", problem.a_type), ("B", problem.b_type)):
        bits = TYPE_BITS[t]
        if k_outer(problem, op) and bits != 16:
            return f"{op} is {t} with K outermost: ldmatrix .trans transposes 16-bit elements only"
        rows, cols = (cfg.tile_k, cfg.tile_m if op == "A" else cfg.tile_n) if k_outer(problem, op) else \
            (cfg.tile_m if op == "A" else cfg.tile_n, cfg.tile_k)
        dim = "k" if not k_outer(problem, op) else ("m" if op == "A" else "n")
        dyn = problem.dynamic_dim(dim)  # (the heuristic sees dynamic sizes as DYNAMIC_ESTIMATE)
        row_len = dyn.divisor if dyn is not None else getattr(problem, dim)
        v = 128 // bits
        while cols % v or row_len % v:
            v //= 2
        if v * bits < 32:
            return (f"{op}'s rows ({row_len} elements) allow only {v * bits}-bit chunks; cp.async copies "
                    f"4, 8 or 16 bytes")
    return None


def validate(cfg: KernelConfig, target: Target, problem: Contraction) -> Intrinsic:
    """Check a config against the target and the problem; return its intrinsic."""
    intr = target.intrinsic(cfg.intrinsic)
    if cfg.wave_size not in target.wave_sizes:
        raise ConfigError(f"wave_size={cfg.wave_size} is not available on {target.name} "
                          f"(choices: {', '.join(map(str, target.wave_sizes))})")
    if intr.wave_size != cfg.wave_size:
        raise ConfigError(f"intrinsic {intr.name} runs at wave{intr.wave_size}, config says "
                          f"wave_size={cfg.wave_size}")
    if intr not in matching_intrinsics(target, problem, cfg.wave_size):
        raise ConfigError(f"intrinsic {intr.name} computes {intr.a_type}x{intr.b_type}->{intr.c_type}, "
                          f"the matmul is {problem.a_type}x{problem.b_type}->{problem.c_type}")
    for name in ("tile_m", "tile_n", "tile_k", "waves_m", "waves_n"):
        if getattr(cfg, name) <= 0:
            raise ConfigError(f"{name} must be positive, got {getattr(cfg, name)}")
    if cfg.lds_pad < 0:
        raise ConfigError(f"lds_pad must be >= 0, got {cfg.lds_pad}")
    if cfg.tile_m % cfg.waves_m or cfg.wave_tile_m % intr.m:
        raise ConfigError(f"tile_m={cfg.tile_m} must split into waves_m={cfg.waves_m} wave tiles that are "
                          f"multiples of the instruction's M={intr.m}")
    if cfg.tile_n % cfg.waves_n or cfg.wave_tile_n % intr.n:
        raise ConfigError(f"tile_n={cfg.tile_n} must split into waves_n={cfg.waves_n} wave tiles that are "
                          f"multiples of the instruction's N={intr.n}")
    if cfg.tile_k % intr.k:
        raise ConfigError(f"tile_k={cfg.tile_k} must be a multiple of the instruction's K={intr.k}")
    if cfg.workgroup_size > target.max_workgroup_size:
        raise ConfigError(f"{cfg.num_waves} waves of {cfg.wave_size} = {cfg.workgroup_size} threads exceed "
                          f"{target.name}'s {target.max_workgroup_size}")
    if not 1 <= cfg.raster <= 64:
        raise ConfigError(f"raster must be 1 to 64 (tile rows per workgroup group), got {cfg.raster}")
    if not 1 <= cfg.stages <= 4:
        raise ConfigError(f"stages must be 1 to 4 (K tiles in LDS at once), got {cfg.stages}")
    if cfg.persistent is not None:
        raise ConfigError(f"persistent={cfg.persistent}: the persistent grid is the warpgroup-MMA kernel's only (sm_90a, "
                          f"--config intrinsic=WGMMA_...)")
    if cfg.producer:
        raise ConfigError(f"producer={cfg.producer}: the producer warpgroup feeds the warpgroup-MMA kernel's TMA ring "
                          f"only (sm_90a, --config intrinsic=WGMMA_...)")
    if cfg.cluster != 1:
        raise ConfigError(f"cluster={cfg.cluster}: clusters are the warp-specialized warpgroup-MMA kernel's only "
                          f"(sm_90a, --config intrinsic=WGMMA_... producer=1 persistent=W)")
    if cfg.copy is not None:
        raise ConfigError(f"copy={cfg.copy}: TMA copies feed the warpgroup-MMA kernel only (sm_90a, "
                          f"--config intrinsic=WGMMA_...); {cfg.intrinsic} is filled by cp.async or loads")
    if cfg.stages > 1:
        why = ring_problem(cfg, target, problem)
        if why:
            raise ConfigError(f"stages={cfg.stages}: {why}")
    for op, t in (("A", problem.a_type), ("B", problem.b_type)):
        row = lds_tile(cfg, problem, op, target)[1]
        row_bytes = row * TYPE_BITS[t] // 8
        if row_bytes % 16:
            raise ConfigError(f"an LDS row of {op} ({row} elements with lds_pad={cfg.lds_pad}) is {row_bytes} "
                              f"bytes; it must be a multiple of 16 so 128-bit LDS accesses stay aligned")
    need = lds_bytes(cfg, problem, target)
    if need > target.lds_bytes:
        raise ConfigError(f"the config needs {need} bytes of LDS, {target.name} has {target.lds_bytes}")
    return intr


# --------------------------------------------------------------------------------------------
# The heuristic.

def _waves_for(tile: int, waves: int, quantum: int, wave_tile: int) -> int | None:
    """The most waves (<= ``waves``) that split ``tile`` into equal wave tiles that are multiples
    of the instruction's ``quantum`` and no larger than ``wave_tile``; None if there are none."""
    for w in range(min(waves, tile // quantum), 0, -1):
        if tile % w == 0 and (tile // w) % quantum == 0 and tile // w <= wave_tile:
            return w
    return None


def _fit_tile(dim: int, preferred: int, grid: int, quantum: int) -> int:
    """A workgroup tile for a dimension of ``dim``.

    ``grid`` is the wave grid's granularity (waves x instruction size): tiles that are multiples of
    it keep the whole wave grid busy. The largest such tile dividing ``dim`` wins if it is at least
    half the preferred size; otherwise the preferred tile, with a partial last tile (the normalize stage
    and the bounds checks handle it) -- 4000 gets 128, not an 80 that no wave grid splits. A
    dimension smaller than the preferred tile gets the smallest multiple of the instruction's
    ``quantum`` covering it that some number of waves splits without any wave's tile outgrowing
    the preferred per-wave tile (100 gets 2 x 64, not 1 x 112: a 112x112 wave tile spills hundreds
    of registers; 33 gets 3 x 16)."""
    if dim < preferred:
        waves = grid // quantum
        wave_tile = preferred // waves
        t = -(-dim // quantum) * quantum
        while _waves_for(t, waves, quantum, wave_tile) is None:
            t += quantum
        return t
    t = preferred
    while t >= max(grid, preferred // 2):
        if dim % t == 0:
            return t
        t -= grid
    return preferred


def default_config(target: Target, problem: Contraction, wave_size: int | None = None,
                   intrinsic: str | None = None, why: list | None = None) -> KernelConfig:
    """Pick a config sized to the target's register file so that large matmuls do not spill.

    Per-wave register tiles (f32 accumulators in VGPRs): RDNA wave32 64x32 (8 WMMA, 64 VGPRs),
    RDNA3 wave64 64x64 (16 WMMA, 64 VGPRs), CDNA 64x64 (16 MFMA 16x16, 64 VGPRs), mma.sync 64x32
    (16 instructions, 64 registers); on NVIDIA 64x64 in 128x256 workgroup tiles (256x128 without
    an LDS ring) when the problem has at least two such tiles per SM, and 32x32 in 64x128 tiles
    when 128x128 ones would be fewer than the SMs. Workgroups are 2 x 4, 4 x 2 or 2 x 2 waves, K
    staged 32 (16-bit) or 64 (8-bit) deep; each dimension shrinks to fit small problems. An LDS
    ring on NVIDIA where cp.async can fill it (``_ring``); on AMD only where measured better
    (``_amd_ring``: gfx950 with both operands K-innermost).
    """
    why = why if why is not None else []
    require_intrinsic(target, problem)
    wave = wave_size or target.default_wave_size
    candidates = matching_intrinsics(target, problem, wave)
    if not candidates:
        raise UnsupportedError(f"{target.name} has no wave{wave} instruction for {problem.describe()}")
    intr = candidates[0] if intrinsic is None else target.intrinsic(intrinsic)
    why.append(f"{intr.name}: " + ("as asked" if intrinsic else
               f"the first of {target.name}'s wave{wave} instructions for {problem.a_type} x {problem.b_type} -> "
               f"{problem.c_type} ({', '.join(c.name for c in candidates)})"))
    bits = TYPE_BITS[problem.a_type]
    if target.vendor is Vendor.NVIDIA:
        # Measured on the H100 (docs/BENCHMARKS.md, run 2): 64x64 warp tiles beat 64x32 ones by
        # 1.3x at 4096^3, once there are >= 2 256x128 workgroups per SM; with the LDS ring, in a
        # 128x256 tile (2x4 warps) rather than 256x128 (4x2): 4096^3 359 -> 395 TFLOP/s, 8192^3
        # 393 -> 412 (run 8).
        # Fewer 128x128 tiles than SMs: 64x128 ones (32x32 per warp) put twice as many SMs to
        # work; measured 152 vs 127 TFLOP/s at 1024^3 (BENCHMARKS run 8; 128x64 the same, 64x64 127).
        big = (problem.m // 256) * (problem.n // 128) >= 2 * target.compute_units
        # (sizes known at compile time only: a dynamic size is an estimate here, a dynamic batch 1)
        few = not problem.dynamic and problem.n >= 128 and \
            -(-problem.m // 128) * -(-problem.n // 128) * problem.batch < target.compute_units and \
            _fit_tile(problem.m, 64, 2 * intr.m, intr.m) == 64  # (not 32 rows: a 4000-row M keeps 128)
        waves_m, waves_n, wt_m, wt_n = (2, 4, 64, 64) if big else (2, 4, 32, 32) if few else (2, 4, 64, 32)
        why.append(f"{waves_m}x{waves_n} warps of {wt_m}x{wt_n}: " + (
            f"at least two 256x128 workgroup tiles per SM ({target.compute_units} SMs): 64x64 warp tiles measured "
            f"1.3x faster at 4096^3 (BENCHMARKS run 2), 128x256 1.1x faster than 256x128 with a ring (run 8)"
            if big else
            f"fewer 128x128 tiles than SMs ({target.compute_units}): 64x128 tiles keep twice as many SMs busy "
            f"(1.2x at 1024^3, BENCHMARKS run 8)" if few else
            f"fewer than two 256x128 tiles per SM ({target.compute_units} SMs): smaller tiles keep every SM busy"))
    elif intr.family.startswith("wmma") and wave == 32:
        waves_m, waves_n, wt_m, wt_n = 2, 4, 64, 32
        why.append("2x4 waves of 64x32: 8 WMMA accumulators (64 VGPRs) per wave32 leave room for fragments "
                   "and prefetched tiles in 256 VGPRs")
    else:
        waves_m, waves_n, wt_m, wt_n = 2, 2, 64, 64
        why.append(f"2x2 waves of 64x64: {(64 // intr.m) * (64 // intr.n)} instructions' accumulators per wave "
                   f"within the register budget")
    tile_k = max(intr.k, 32 * 16 // bits)
    why.append(f"K staged {tile_k} deep: {tile_k * bits // 8} bytes per LDS row, 128-bit copies")
    tm = _fit_tile(problem.m, waves_m * wt_m, waves_m * intr.m, intr.m)
    tn = _fit_tile(problem.n, waves_n * wt_n, waves_n * intr.n, intr.n)
    tk = _fit_tile(problem.k, tile_k, intr.k, intr.k)
    for dim, size, want, got in (("M", problem.m, waves_m * wt_m, tm), ("N", problem.n, waves_n * wt_n, tn),
                                 ("K", problem.k, tile_k, tk)):
        if got != want:
            why.append(f"tile {dim} {got} instead of {want}: fitted to {dim} = {size}"
                       + (" (a multiple that divides it)" if size % got == 0 else " (the last tile partial)"))
        elif size % got:
            why.append(f"tile {dim} {got}: {dim} = {size} leaves a partial last tile (bounded accesses, no padding)")
    # Fewer waves when the tile shrank below the wave grid.
    wm = _waves_for(tm, waves_m, intr.m, wt_m)
    wn = _waves_for(tn, waves_n, intr.n, wt_n)
    if (wm, wn) != (waves_m, waves_n):
        why.append(f"{wm}x{wn} waves: the smaller tile splits into no more")
    pad = 128 // bits  # one 16-byte chunk per row: staggers rows across banks
    why.append(f"lds_pad {pad}: one 16-byte chunk per LDS row staggers rows across banks")
    cfg = KernelConfig(intr.name, wave, tm, tn, tk, wm, wn, pad)
    if target.vendor is Vendor.AMD:
        cfg = _amd_ring(cfg, target, problem, why)
    if target.vendor is Vendor.NVIDIA:
        cfg = _ring(cfg, target, problem, why)
        if big and cfg.stages > 1 and bits == 16 and problem.k >= 2 * tile_k and \
                problem.m >= waves_m * wt_m and problem.n >= waves_n * wt_n:
            # H100 kernel-only (BENCHMARKS run 9, the ring's copies unguarded in a main loop with a
            # drain): 128x256 tiles staged 64 deep in 3 stages (153 KB) 407.7 / 434.3 TFLOP/s at
            # 4096^3 / 8192^3, against 385.8 / 408.9 staged 32 deep in 4 (108 KB); 64 deep in 4
            # stages 402.1 / 433.6; 256x128x64 in 3 404.5 / 430.9. The full tile even where a
            # smaller one would divide the problem: 4000^3 378.9 with partial 128x256x64 tiles,
            # 310.5 with the dividing 128x160x32 (static 4096^3: 406.5 in the same run).
            deep = replace(cfg, tile_m=waves_m * wt_m, tile_n=waves_n * wt_n, tile_k=2 * tile_k,
                           waves_m=waves_m, waves_n=waves_n, stages=3)
            if not ring_problem(deep, target, problem) and lds_bytes(deep, problem, target) <= target.lds_bytes:
                if (deep.tile_m, deep.tile_n, deep.tile_k) != (cfg.tile_m, cfg.tile_n, 2 * cfg.tile_k):
                    why.append(f"tile {deep.tile_m}x{deep.tile_n} kept (the last tiles partial) rather than one "
                               f"dividing the problem: 1.22x at 4000^3 on the H100")
                cfg = deep
                why.append(f"K staged {cfg.tile_k} deep in a 3-stage ring instead ({lds_bytes(cfg, problem, target)} bytes): "
                           f"half the barriers per MMA, 1.06x at 4096^3 and 8192^3 on the H100")
        if big and cfg.stages == 1:
            # Without a ring the 256x128 orientation: 53.0 vs 38.0 TFLOP/s for a 4096^3 matmul of
            # dynamic sizes with no divisibility promise (BENCHMARKS run 8, final- / n256-variants.log).
            tm, tn = _fit_tile(problem.m, 256, 4 * intr.m, intr.m), _fit_tile(problem.n, 128, 2 * intr.n, intr.n)
            cfg = replace(cfg, tile_m=tm, tile_n=tn, waves_m=_waves_for(tm, 4, intr.m, 64),
                          waves_n=_waves_for(tn, 2, intr.n, 64))
            why.append(f"no LDS ring: tile {tm}x{tn} (4x2 warps) instead, measured faster without one")
        tiles = -(-problem.m // cfg.tile_m) * -(-problem.n // cfg.tile_n)  # per batch: grouping is within one
        if not problem.dynamic and tiles >= 8 * target.compute_units and -(-problem.m // cfg.tile_m) > RASTER:
            # H100 (BENCHMARKS run 8): 8192^3 (2048 tiles) 371 -> 390 TFLOP/s in groups of 8 (4: 388,
            # 16: 386); 4096^3 (512 tiles) the same either way, 2048^3 279 vs 288 without. Not
            # measured on AMD: IREE's order there.
            cfg = replace(cfg, raster=RASTER)
            why.append(f"workgroups in groups of {RASTER} tile rows: with {tiles} tiles (8+ per SM) those "
                       f"running together share A and B tiles in L2 (1.05x at 8192^3)")
        if cfg.stages == 1 and cfg.waves_m == 4 and problem.k >= 8192:
            # H100, 8192^3 without a ring: 234 vs 194 TFLOP/s with K staged 64 deep (BENCHMARKS.md,
            # run 3). With the ring, 32 deep in 3 stages is faster (371 vs 287, run 7).
            cfg = replace(cfg, tile_k=_fit_tile(problem.k, 2 * tile_k, intr.k, intr.k))
            why.append(f"K staged {cfg.tile_k} deep instead: K >= 8192 without an LDS ring measured faster so")
    validate(cfg, target, problem)
    return cfg


# NVIDIA's LDS ring, measured kernel-only on the H100 (docs/BENCHMARKS.md, run 7): at 4096^3
# (256x128x32 tiles) 3 stages (87.5 KB) ran 295 TFLOP/s, 2 stages 283, 4 stages (114 KB) 273;
# at 8192^3 (256x128x64) 2 stages (106 KB) ran 346, 3 stages (159 KB) 309; with the fragments
# pipelined, 2048^3 (128x128x32) ran 167 / 265 / 284 with 2 / 3 / 4 stages (74 KB). So: the
# deepest ring of up to RING_STAGES that fits in RING_BYTES.
RING_STAGES = 4
RING_BYTES = 112 * 1024
RASTER = 8  # NVIDIA: tile rows per workgroup group, for grids with more tile rows than that


def _ring(cfg: KernelConfig, target: Target, problem: Contraction, why: list) -> KernelConfig:
    """The deepest LDS ring up to RING_STAGES that the problem allows and RING_BYTES (and the
    target's shared memory) hold; stages=1 (the next tile prefetched in registers) with the
    reason when none does."""
    reason = None
    budget = min(RING_BYTES, target.lds_bytes)
    for stages in range(RING_STAGES, 1, -1):
        ring = replace(cfg, stages=stages)
        reason = ring_problem(ring, target, problem)
        if reason:
            break
        if lds_bytes(ring, problem, target) <= budget:
            why.append(f"{stages}-stage LDS ring: {stages - 1} K tiles in flight through cp.async, one barrier "
                       f"per K tile ({lds_bytes(ring, problem, target)} bytes of shared memory; deeper rings or more "
                       f"than {RING_BYTES} bytes measured slower on the H100)")
            return ring
        reason = f"{stages} stages need {lds_bytes(ring, problem, target)} bytes of shared memory, more than {budget}"
    why.append(f"stages 1 (the next K tile prefetched in registers): {reason}")
    return cfg


# AMD's LDS ring (--config stages=2..4), final ISA of f16 1024^3 and 4096^3 (docs/BENCHMARKS.md,
# "AMD: the LDS ring"): it halves the K loop's barriers (2 -> 1 per K tile) and removes the matrix
# instructions right behind an LDS wait on RDNA (2 of 32 -> 0), 0 LDS bank conflicts either way,
# but its two LDS slots (20 -> 40 KB) and its tiles in flight cost waves. Waves/SIMD counting
# whole workgroups and the LDS of a WGP/CU, stages 1 -> 2 -> 3: gfx1100 6 -> 6 -> 6 (193, 193, 206
# VGPRs), gfx1201 8 -> 6 -> 6, gfx942 3 -> 1 -> 1 (128 -> 132 -> 146 VGPRs), gfx950 4 -> 3 -> 3.
# gfx1100's plain f16 kernel loses nothing only because it needs 193 VGPRs with one stage, one
# over the 192 of 8 waves; its transposed, batched, unaligned and dynamic variants (187-192)
# and i8 (143) drop from 8 (10) to 6 waves/SIMD. One case is better on every figure: gfx950 with
# A and B both K-innermost (B transposed, as a linear layer's weight), where both copies are
# direct: one stage takes 142 VGPRs (3 waves; LLVM unrolls its K loop by 2), the 2-stage ring 128
# (4 waves, 4 workgroups in the 160 KB of LDS), for f16, bf16, i8 and fp8 at 1024^3, 2048^3 and
# 4096^3, 4000^3 (156 -> 128) and batch 4. There the heuristic builds the ring; elsewhere on AMD
# one stage, until hardware timings weigh barriers against waves.
AMD_RING_WORKGROUPS = 4  # gfx950: the waves/SIMD its 2-stage ring's registers allow, one per workgroup


def _amd_ring(cfg: KernelConfig, target: Target, problem: Contraction, why: list) -> KernelConfig:
    """A 2-stage LDS ring on gfx950 when both operands are K-innermost in memory and its LDS
    leaves room for AMD_RING_WORKGROUPS workgroups; one stage otherwise (see above)."""
    ring = replace(cfg, stages=2)
    if target.family is not Family.CDNA4:
        why.append("stages 1 (one LDS tile, the next prefetched in registers): on this target an LDS ring's LDS and "
                   "registers cost waves (BENCHMARKS.md, AMD: the LDS ring)")
        return cfg
    if k_outer(problem, "A") or k_outer(problem, "B"):
        why.append("stages 1: an operand is K-outer in memory (transposed on its way into LDS); gfx950's LDS ring "
                   "measured no better there (BENCHMARKS.md, AMD: the LDS ring)")
        return cfg
    if problem.k <= cfg.tile_k:
        why.append("stages 1: one K tile, nothing to pipeline")
        return cfg
    if AMD_RING_WORKGROUPS * lds_bytes(ring, problem, target) > target.lds_bytes:
        why.append(f"stages 1: a 2-stage LDS ring needs {lds_bytes(ring, problem, target)} bytes, more than a "
                   f"{AMD_RING_WORKGROUPS}th of {target.lds_bytes}")
        return cfg
    why.append(f"2-stage LDS ring: A and B are K-innermost (direct copies), measured 128 VGPRs instead of 142 "
               f"(4 waves/SIMD instead of 3) and one barrier per K tile instead of two "
               f"({lds_bytes(ring, problem, target)} bytes of LDS: {AMD_RING_WORKGROUPS} workgroups per CU)")
    return ring


# Hopper: the warpgroup-MMA kernel (kernels/wgmma/plan.py) where it was measured faster than mma.sync.
# H100, kernel-only TFLOP/s, same runs (BENCHMARKS.md, "Hopper: the wgmma kernel on the H100"):
#   f16 -> f32    WGMMA N256 in 128x256 tiles   WGMMA N128 in 64x128 tiles   mma.sync (default then)
#   8192^3        597.4                         -                            460.6
#   4096^3        572.6                         -                            424.6
#   2048^3        503.2 (128 tiles)             -                            293.7
#   1024^3        124.7 (32 tiles)              227.5 (128 tiles)            170.7
# (bf16 the same within 3%; at 1024^3 N64 in 128x64 tiles 211.0, N128 in 128x128 173.9.) So the
# first shape below that gives at least one tile per two SMs; mma.sync below that (unmeasured).
WARPGROUP_SHAPES = ((256, 128), (128, 64))  # (N of the instruction = tile_n, tile_m), preferred first
WARPGROUP_MIN_TILES_PER_SM = 0.5
# Workgroups in groups of RASTER tile rows from two waves of tiles on: H200, 128x256 tiles, kernel-only
# (BENCHMARKS.md, 2026-11-26 call 1): 8192^3 700.4 -> 733.7 TFLOP/s (groups of 4: 710.4, 16: 734.1),
# 4096^3 673.3 -> 679.8 (4 and 16 the same).
WARPGROUP_RASTER_WAVES = 2
# fp8: N 128 at most (wgmma_plan.FP8_MAX_N: the f32 accumulator plus two K tiles' partials must fit
# in 255 registers), so 128x128 tiles where they give one tile per two SMs, else 64x128. The
# ring: 4 slots of (128 + 128) x 128 B = 128 KiB.
FP8_WARPGROUP_SHAPES = ((128, 128), (128, 64))
# fp8: the warp-specialized kernel (producer=1: a producer warpgroup issues TMA copies into slots
# guarded by "full" and "empty" mbarriers; the MMA warpgroups promote each K tile's partial with no
# CTA barrier holding them together) where the TMA ring serves, persistent from two waves of
# tiles as the cp.async ring (``_warpgroup_persistent``). H200, kernel-only TFLOP/s (BENCHMARKS.md
# run 14): e4m3 4096^3 / 8192^3, persistent cp.async ring 950.4 / 1076.3, warp-specialized
# persistent 1085.7 / 1206.3 (0.87x / 0.85x torch._scaled_mm), one call (call 5); one tile per
# workgroup 1017.5 / 1177.5 (call 1).
FP8_PRODUCER = 1
# ... for tiles of two MMA warpgroups (fp8 and f16/bf16 alike): with one (64x128 fp8 tiles, the
# 1024^3 choice) the producer warpgroup lost, 313.5 against 355.0 TFLOP/s (run 14 call 6; 2048^3
# in 128x128 tiles: 795.4 against 742.4).
PRODUCER_TILE_M = 128


def warpgroup_only(target: Target, problem: Contraction) -> bool:
    """Whether only the warpgroup kernel computes ``problem``'s types on ``target``: fp8 x fp8 ->
    f32 on sm_90a, which no mma.sync instruction mmaflow emits takes."""
    return (target.warpgroup_mma and problem.a_type in FP8 and problem.b_type in FP8 and problem.c_type == "f32"
            and not matching_intrinsics(target, problem))


def warpgroup_refusal(target: Target, problem: Contraction) -> str | None:
    """For a ``warpgroup_only`` problem: why the warpgroup kernel does not take it (None: it does)."""
    try:
        warpgroup_default(target, problem, {})
    except (UnsupportedError, ConfigError) as e:
        return str(e)
    return None


def warpgroup_default(target: Target, problem: Contraction, overrides: dict,
                      why: list | None = None) -> tuple[KernelConfig, WarpgroupIntrinsic] | None:
    """The warpgroup-MMA kernel's config where the heuristic picks it (see WARPGROUP_SHAPES), or
    None with the reason in ``why``: not Hopper, other types, too few tiles, or a problem the
    kernel does not take (its refusal is quoted). fp8 (``warpgroup_only``) has no mma.sync to
    fall back to: the kernel takes it with the overrides, in the smallest shape where the tiles
    are few, and its refusal is raised (select leaves such dispatches to IREE beforehand)."""
    from mmaflow.compiler.kernels.wgmma.plan import warpgroup_config
    why = why if why is not None else []
    if not target.warpgroup_mma:
        return None
    types = (problem.a_type, problem.b_type, problem.c_type)
    if warpgroup_only(target, problem):
        return _warpgroup_fp8(target, problem, overrides, why)
    if problem.a_type not in ("f16", "bf16") or types[1:] != (problem.a_type, "f32"):
        why.append(f"mma.sync, not wgmma: the warpgroup kernel takes f16/bf16 -> f32 (and fp8 -> f32), this is "
                   f"{' x '.join(types[:2])} -> {types[2]}")
        return None
    names = [f"WGMMA_F32_64x{n}x16_{problem.a_type.upper()}" for n, _ in WARPGROUP_SHAPES]
    # copy=tma, persistent=W, producer=1 or cluster=2 alone ask for the heuristic's wgmma kernel
    copy = {k: v for k, v in overrides.items() if k in ("copy", "persistent", "producer", "cluster")}
    overrides = {k: v for k, v in overrides.items() if k not in copy}
    if overrides:
        why.append(f"mma.sync, not wgmma: --config {', '.join(sorted(overrides))} configures the mma.sync kernel "
                   f"(--config intrinsic={names[0]} asks for the warpgroup kernel)")
        return None
    # (a dynamic size counts as its estimate, as in default_config; a dynamic batch as 1)
    est = problem.estimate()
    dyn = (f", dynamic {'/'.join(d.dim.upper() for d in problem.dynamic)} estimated as "
           f"{Contraction.DYNAMIC_ESTIMATE}" if problem.is_dynamic else "")
    counts = []
    for name, (n, tile_m) in zip(names, WARPGROUP_SHAPES):
        tiles = (-(-est.m // tile_m)) * (-(-est.n // n)) * (est.batch or 1)
        counts.append(f"{tiles} tiles of {tile_m}x{n}")
        if tiles >= WARPGROUP_MIN_TILES_PER_SM * target.compute_units:
            break
    else:
        why.append(f"mma.sync, not wgmma: {' or '.join(counts)} for {target.compute_units} SMs{dyn} (the warpgroup "
                   f"kernel is chosen from one tile per two SMs)")
        return None
    try:
        cfg = warpgroup_config(target, problem, target.intrinsic(name), {"tile_m": tile_m, **copy})
    except (UnsupportedError, ConfigError) as e:
        why.append(f"mma.sync, not wgmma: {str(e).removeprefix(f'{name}: ')}")
        return None
    why.append(f"{name}: the warpgroup-MMA kernel, {cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k} tiles, {cfg.stages}-slot "
               f"{'TMA' if cfg.copy else 'cp.async'} ring ({counts[-1]} for {target.compute_units} SMs{dyn}; measured faster than mma.sync on "
               f"the H100 from 1024^3)")
    cfg = _warpgroup_raster(target, problem, cfg, why)
    if "persistent" in copy:
        return cfg, target.intrinsic(name)
    if not copy:
        specialized = _warpgroup_specialized(target, problem, cfg, why)
        if specialized is not None:
            return specialized, target.intrinsic(name)
    return _warpgroup_persistent(target, problem, cfg, why), target.intrinsic(name)


# f16/bf16: the warp-specialized kernel (producer=1, copy=tma-wide) where its persistent grid has
# 2 to PRODUCER_MAX_TILES tiles per workgroup. H200, kernel-only TFLOP/s, default -> warp-specialized
# in the same call (BENCHMARKS.md run 15, calls 3 and 4): f16 4096^3 689.9 -> 698.8, 6144^3 (9 tiles
# per workgroup) 670.6 -> 709.9, unaligned 4000^3 628.0 -> 650.7 (the default there was the TMA ring
# with one tile per workgroup: the cp.async ring's persistent grid takes whole tiles only), B^T
# 683.6 -> 695.6, bias+gelu -> f16 0.2100 -> 0.2067 ms, bias+relu 666.1 -> 672.1; bf16 4096^3
# 702.4 -> 710.1, 4000^3 640.3 -> 665.8. Not where it lost: 8192^3 (16 tiles per workgroup) f16
# 728.1 -> 716.9, bf16 759.8 -> 746.5; one tile per workgroup (2048^3 588.8 -> 579.8; dynamic sizes
# with divisibility promises 668.7 -> 629.6, dynamic rows 670.6 -> 661.7). 3072^3 (3 tiles per
# workgroup, call 8): f16 493.5 -> 530.0, bf16 498.2 -> 539.6.
PRODUCER_MAX_TILES = 9


def _warpgroup_specialized(target: Target, problem: Contraction, cfg: KernelConfig,
                           why: list) -> KernelConfig | None:
    """The f16/bf16 warp-specialized persistent kernel where it measured faster (see
    PRODUCER_MAX_TILES), else None: silently for what it never takes (dynamic sizes: no persistent
    grid; 64-row tiles: one MMA warpgroup, as for fp8; what the TMA ring refuses), with the reason
    in ``why`` where only its tile count per workgroup decides."""
    from mmaflow.compiler.kernels.wgmma.plan import tma_refusal, warpgroup_config
    if problem.is_dynamic or cfg.tile_m != PRODUCER_TILE_M or tma_refusal(target, problem, cfg) is not None:
        return None
    ws = warpgroup_config(target, problem, target.intrinsic(cfg.intrinsic),
                          {"tile_m": cfg.tile_m, "raster": cfg.raster, "copy": "tma-wide", "producer": 1})
    trial: list[str] = []
    ws = _warpgroup_persistent(target, problem, ws, trial)
    if not ws.persistent or ws.persistent > PRODUCER_MAX_TILES:
        tiles = f"{ws.persistent} tiles per workgroup" if ws.persistent else "one tile per workgroup"
        why.append(f"not warp-specialized: its persistent grid would run {tiles} (measured faster with 3 to "
                   f"{PRODUCER_MAX_TILES} on the H200; slower with 16 at 8192^3 and with one)")
        return None
    why.append(f"instead, the {ws.stages}-slot tma-wide ring fed by a producer warpgroup (warp-specialized: 1.01x-1.08x "
               f"that ring at 3072^3 to 6144^3 f16/bf16 on the H200, both persistent)")
    why.extend(trial)
    return ws


# The persistent grid (wgmma_plan.persistent_refusal, distribute_wgmma._persist): from two waves of
# tiles, W = ceil(tiles / SMs) tiles per workgroup where W divides the tile count (the makespan of
# W tiles is the plain grid's too). H200, kernel-only TFLOP/s, one call (BENCHMARKS.md run 13,
# call 6): f16 4096^3 676.9 -> 687.7, 8192^3 720.1 -> 729.3, bias+gelu -> f16 0.2118 -> 0.2092 ms;
# e4m3 4096^3 922.0 -> 960.0, 8192^3 1064.5 -> 1075.2.
PERSISTENT_MIN_WAVES = 2


def _warpgroup_persistent(target: Target, problem: Contraction, cfg: KernelConfig, why: list) -> KernelConfig:
    """The persistent grid where it serves (static sizes; whole tiles with the cp.async ring,
    partial ones too with the warp-specialized TMA ring; two waves or more, a tile count that W
    divides: ``wgmma_plan.persistent_refusal``); else the plain grid, the reason in ``why`` when
    the problem has the waves for it. Warp-specialized e4m3 4000^3: 908.3 -> 971.1 TFLOP/s (run
    14 call 8)."""
    from mmaflow.compiler.kernels.wgmma.plan import output_tiles, persistent_refusal
    if problem.is_dynamic or problem.m is None or problem.n is None:
        return cfg
    tiles = output_tiles(cfg, problem)
    if tiles < PERSISTENT_MIN_WAVES * target.compute_units:
        return cfg
    w = -(-tiles // target.compute_units)
    refusal = persistent_refusal(replace(cfg, persistent=w), problem, target.intrinsic(cfg.intrinsic))
    if refusal:
        why.append(f"one tile per workgroup, not a persistent grid: {refusal}")
        return cfg
    gain = ("the producer copying the next tile's K tiles during this one's epilogue (1.07x at 4096^3 e4m3, "
            "warp-specialized, on the H200)" if cfg.producer else
            "the next tile's first K tiles copied during this one's epilogue (1.02x at 4096^3 f16, 1.04x e4m3, "
            "on the H200)")
    why.append(f"persistent grid: {tiles // w} workgroups of {w} tiles each ({tiles} tiles, {target.compute_units} "
               f"SMs), {gain}")
    return replace(cfg, persistent=w)


def _warpgroup_raster(target: Target, problem: Contraction, cfg: KernelConfig, why: list) -> KernelConfig:
    """Workgroups in groups of RASTER tile rows from WARPGROUP_RASTER_WAVES waves of tiles on
    (static sizes: a dynamic one's tile count is only an estimate)."""
    rows = -(-problem.m // cfg.tile_m) if problem.m is not None else 0
    tiles = rows * -(-problem.n // cfg.tile_n) if problem.n is not None else 0
    if problem.dynamic or tiles < WARPGROUP_RASTER_WAVES * target.compute_units or rows <= RASTER:
        return cfg
    why.append(f"workgroups in groups of {RASTER} tile rows: with {tiles} tiles ({WARPGROUP_RASTER_WAVES}+ waves) "
               f"those running together share A and B tiles in L2 (1.05x at 8192^3 on the H200)")
    return replace(cfg, raster=RASTER)


def _warpgroup_fp8(target: Target, problem: Contraction, overrides: dict,
                   why: list) -> tuple[KernelConfig, WarpgroupIntrinsic]:
    """fp8 x fp8 -> f32 on sm_90a: the warpgroup kernel, the first FP8_WARPGROUP_SHAPES shape that
    gives one tile per two SMs (else the smallest: no mma.sync kernel computes fp8), with the
    user's overrides (``warpgroup_config`` refuses the ones it cannot take)."""
    from mmaflow.compiler.target.wgmma import wgmma
    from mmaflow.compiler.kernels.wgmma.plan import warpgroup_config
    est = problem.estimate()
    counts = []
    for n, tile_m in FP8_WARPGROUP_SHAPES:
        tiles = (-(-est.m // tile_m)) * (-(-est.n // n)) * (est.batch or 1)
        counts.append(f"{tiles} tiles of {tile_m}x{n}")
        if tiles >= WARPGROUP_MIN_TILES_PER_SM * target.compute_units:
            break
    intr = wgmma(n, problem.a_type, problem.b_type)
    over = {k: v for k, v in overrides.items() if k != "intrinsic"}
    cfg = warpgroup_config(target, problem, intr, {"tile_m": tile_m, **over})
    not_specialized = None
    if not {"producer", "copy", "persistent"} & set(over) and cfg.stages > 1:
        from mmaflow.compiler.kernels.wgmma.plan import tma_refusal
        refusal = tma_refusal(target, problem, cfg)
        if refusal is None and cfg.tile_m < PRODUCER_TILE_M:
            not_specialized = (f"{cfg.tile_m}-row tiles have one MMA warpgroup (measured slower with a producer: "
                               f"313.5 against 355.0 TFLOP/s at 1024^3 e4m3 on the H200)")
        elif refusal is None:
            cfg = warpgroup_config(target, problem, intr, {"tile_m": tile_m, **over, "producer": FP8_PRODUCER})
        else:
            not_specialized = refusal
    ring = (f"{cfg.copy} ring fed by a producer warpgroup (warp-specialized: 1.14x / 1.12x the cp.async ring at "
            f"4096^3 / 8192^3 e4m3 on the H200, both persistent)" if cfg.producer else f"{cfg.copy or 'cp.async'} ring")
    why.append(f"{intr.name}: the warpgroup-MMA kernel, {cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k} tiles, {cfg.stages}-slot "
               f"{ring} ({counts[-1]} for {target.compute_units} SMs; fp8: no mma.sync instruction computes "
               f"{problem.a_type} x {problem.b_type})")
    if not_specialized:
        why.append(f"fp8 on the cp.async ring, not warp-specialized: {not_specialized}")
    cfg = cfg if "raster" in overrides else _warpgroup_raster(target, problem, cfg, why)
    return (cfg if "persistent" in overrides else _warpgroup_persistent(target, problem, cfg, why)), intr


def explain(target: Target, problem: Contraction, overrides: dict | None = None) -> list[str]:
    """Why the config of ``problem`` is what it is: the heuristic's reasons, then the overrides."""
    overrides = dict(overrides or {})
    why: list[str] = []
    intr = overrides.get("intrinsic")
    if intr and isinstance(target.intrinsic(intr), WarpgroupIntrinsic):
        why.append(f"{intr}: as asked; the warpgroup-MMA kernel's fixed shape (kernels/wgmma/plan.py)")
    elif not intr and warpgroup_default(target, problem, overrides, why):
        pass
    elif not {f.name for f in fields(KernelConfig)} <= set(overrides):
        wave = overrides.get("wave_size") or (target.intrinsic(intr).wave_size if intr else None)
        default_config(target, problem, wave, intr, why)
    why += [f"{k} = {v}: from --config" for k, v in sorted(overrides.items())]
    return why


def resolve(target: Target, problem: Contraction, overrides: dict | None = None) -> tuple[KernelConfig, Intrinsic]:
    """The heuristic's config with user overrides applied, validated."""
    overrides = dict(overrides or {})
    wave = overrides.get("wave_size")
    intrinsic = overrides.get("intrinsic")
    if intrinsic is not None:
        intr = target.intrinsic(intrinsic)
        if isinstance(intr, WarpgroupIntrinsic):  # the warpgroup-MMA kernel, asked for: its own config
            from mmaflow.compiler.kernels.wgmma.plan import warpgroup_config
            return warpgroup_config(target, problem, intr, overrides), intr
        wave = wave or intr.wave_size
    else:
        chosen = warpgroup_default(target, problem, overrides)
        if chosen:
            return chosen
    full = {f.name for f in fields(KernelConfig)} <= set(overrides)
    if full:  # a complete config: the heuristic has nothing to add
        cfg = KernelConfig(**overrides)
    else:
        cfg = replace(default_config(target, problem, wave, intrinsic), **overrides)
    return cfg, validate(cfg, target, problem)
