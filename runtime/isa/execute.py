"""Execute one matrix instruction on per-lane registers held as numpy arrays.

Registers have shape ``(..., wave, slots)``: any leading axes are independent waves executed at
once (the lane executor runs every wave of every workgroup in lockstep).

Numerics (what the ISA guides specify, modelled conservatively):
- floating-point inputs are widened exactly (f16, bf16 and fp8 are exact in float64); products
  and the sum over K plus C are formed in float64 and rounded once to the result type
  (f32, f16 or bf16, round-to-nearest-even);
- 8- and 4-bit integer inputs are sign- or zero-extended per the instruction's signedness, the dot
  product plus C is formed exactly and wrapped to 32 bits (two's complement), as AMD's 32-bit
  integer accumulators do, or clamped to the s32 range for PTX .satfinite instructions;
- lanes that the instruction reads as replicas (RDNA3 A/B) must hold identical data: the
  hardware reads one copy, so a disagreement means the program is wrong, and is reported;
- result slots the instruction does not write (the unused OPSEL half) keep C's value.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from mmaflow.runtime.isa.tables import INSTRUCTIONS


class IsaError(Exception):
    pass


_NP_TYPES = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "i32": np.dtype(np.int32),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i8": np.dtype(np.int8),
    "i4": np.dtype(ml_dtypes.int4),
    "f8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f6E2M3FN": np.dtype(ml_dtypes.float6_e2m3fn),
    "f6E3M2FN": np.dtype(ml_dtypes.float6_e3m2fn),
    "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
}
# Which register dtypes an instruction accepts for A/B (CDNA fp8 depends on the architecture).
_ACCEPTS = {
    "fp8": {"f8E4M3FNUZ", "f8E4M3FN"},
    "bf8": {"f8E5M2FNUZ", "f8E5M2"},
}


XF32_MANTISSA = 10  # [C3] xf32: f32's sign and 8 exponent bits, 10 of its 23 mantissa bits


def to_xf32(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to xf32, to nearest with ties to even, as f32. The ISA guide names the
    format, not its rounding: this model rounds to nearest (as TF32's conversions do); the
    numerics' tolerance for xf32 kernels (``numerics.XF32_INPUT_ROUNDOFF``) covers truncation as
    well. NaN and infinity pass unchanged; a value that rounds past f32's largest becomes
    infinity, as any f32 overflow."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    drop = 23 - XF32_MANTISSA
    half = np.uint64(1 << (drop - 1))
    lsb = (bits >> np.uint64(drop)) & np.uint64(1)
    rounded = ((bits + half - np.uint64(1) + lsb) >> np.uint64(drop)) << np.uint64(drop)
    special = (bits & np.uint64(0x7F800000)) == np.uint64(0x7F800000)
    out = np.where(special, bits, rounded).astype(np.uint32).view(np.float32)
    return out.reshape(np.shape(x))


def np_dtype(name: str) -> np.dtype:
    return _NP_TYPES[name]


class _Placement:
    """Index arrays for one operand: which (lane, slot) feeds which (row, col)."""

    def __init__(self, place, wave: int, slots: int):
        lanes, sl, rows, cols = [], [], [], []
        for lane in range(wave):
            for s in range(slots):
                rc = place(lane, s)
                if rc is not None:
                    lanes.append(lane)
                    sl.append(s)
                    rows.append(rc[0])
                    cols.append(rc[1])
        self.lanes, self.slots = np.array(lanes), np.array(sl)
        self.rows, self.cols = np.array(rows), np.array(cols)


_PLACEMENTS: dict[tuple[str, str], _Placement] = {}


def _operand_fields(instr, operand: str):
    """(placement function, slots) of a register operand (a wgmma instruction has no B registers)."""
    op = operand.lower()
    if not hasattr(instr, f"{op}_place"):
        raise IsaError(f"{instr.key}: operand {operand} is not held in registers")
    return getattr(instr, f"{op}_place"), getattr(instr, f"{op}_slots")


def placement(instr, operand: str) -> _Placement:
    """Index arrays of a register operand of an IsaInstruction or a WgmmaInstruction."""
    key = (instr.key, operand)
    if key not in _PLACEMENTS:
        place, slots = _operand_fields(instr, operand)
        _PLACEMENTS[key] = _Placement(place, instr.wave, slots)
    return _PLACEMENTS[key]


def check_dtype(instr, operand: str, regs: np.ndarray, expected: str):
    allowed = _ACCEPTS.get(expected, {expected})
    names = {n for n, d in _NP_TYPES.items() if d == regs.dtype}
    if operand in "AB" and expected == "i8" and regs.dtype == np.uint8:
        return
    if operand in "AB" and expected == "i4" and regs.dtype == np.dtype(ml_dtypes.uint4):
        return
    if not names & allowed:
        raise IsaError(
            f"{instr.key}: operand {operand} registers are {regs.dtype}, expected {' or '.join(sorted(allowed))}"
        )


def gather_operand(instr, operand: str, regs: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    p = placement(instr, operand)
    slots = _operand_fields(instr, operand)[1]
    if regs.shape[-2:] != (instr.wave, slots):
        raise IsaError(
            f"{instr.key}: operand {operand} registers have shape {regs.shape[-2:]}, "
            f"expected (wave={instr.wave}, slots={slots})"
        )
    vals = regs[..., p.lanes, p.slots]
    out = np.zeros(regs.shape[:-2] + shape, dtype=vals.dtype)
    out[..., p.rows, p.cols] = vals
    # Replicas (several lanes feeding one element) must agree.
    if len(p.rows) > shape[0] * shape[1]:
        back = out[..., p.rows, p.cols]
        same = (back == vals) | (np.isnan(back) & np.isnan(vals)) if vals.dtype.kind == "f" else back == vals
        if not np.all(same):
            bad = np.argwhere(~same.reshape(-1, len(p.rows)))[0][1]
            raise IsaError(
                f"{instr.key}: operand {operand} lane {p.lanes[bad]} slot {p.slots[bad]} "
                f"disagrees with another lane holding the same element "
                f"({p.rows[bad]}, {p.cols[bad]}); replicated lanes must hold equal data"
            )
    return out


def _scales(instr, operand: str, scales, shape: tuple[int, int]) -> np.ndarray:
    """A block-scaled instruction's per-lane E8M0 scales (..., wave) as the factor of each element
    of A (B): lane l's scale multiplies every value lane l holds."""
    if scales is None:
        raise IsaError(f"{instr.key}: a block-scaled instruction without {operand} scales")
    scales = np.asarray(scales)
    if scales.dtype != np.dtype(ml_dtypes.float8_e8m0fnu) or scales.shape[-1] != instr.wave:
        raise IsaError(f"{instr.key}: {operand} scales must be one f8E8M0FNU a lane, not {scales.dtype} {scales.shape}")
    slots = _operand_fields(instr, operand)[1]
    per_slot = np.repeat(scales[..., :, None], slots, axis=-1).astype(np.float64)  # 2^(e-127); NaN at 0xFF
    return gather_operand(instr, operand, per_slot, shape)


def execute(
    key: str,
    a_regs: np.ndarray,
    b_regs: np.ndarray,
    c_regs: np.ndarray,
    *,
    unsigned_a: bool = False,
    unsigned_b: bool = False,
    scales_a: np.ndarray | None = None,
    scales_b: np.ndarray | None = None,
) -> np.ndarray:
    """D = A x B + C for instruction ``key``; returns D registers shaped like ``c_regs``.
    ``scales_a`` / ``scales_b``: a block-scaled instruction's E8M0 scale of each lane (..., wave)."""
    try:
        instr = INSTRUCTIONS[key]
    except KeyError:
        raise IsaError(f"the ISA model has no instruction {key!r}") from None
    if (scales_a is not None or scales_b is not None) and not instr.scaled:
        raise IsaError(f"{key} takes no scales")
    check_dtype(instr, "A", a_regs, instr.a_type)
    check_dtype(instr, "B", b_regs, getattr(instr, "b_elem", instr.a_type))
    check_dtype(instr, "C", c_regs, instr.c_type)
    a = gather_operand(instr, "A", a_regs, (instr.m, instr.k))
    b = gather_operand(instr, "B", b_regs, (instr.k, instr.n))
    c = gather_operand(instr, "C", c_regs, (instr.m, instr.n))
    if instr.scaled:  # exact in float64: E8M0 scales are powers of two, the values few-bit floats
        a = a.astype(np.float64) * _scales(instr, "A", scales_a, (instr.m, instr.k))
        b = b.astype(np.float64) * _scales(instr, "B", scales_b, (instr.k, instr.n))
    if instr.c_type == "i32" and instr.a_type == "i4":
        # iu4: each 4-bit value read as unsigned (0..15) or two's complement (-8..7) per unsignedA/B
        a64, b64 = (
            (x.astype(np.int64) & 0xF) if unsigned else ((x.astype(np.int64) & 0xF) ^ 8) - 8
            for x, unsigned in ((a, unsigned_a), (b, unsigned_b))
        )
        d = a64 @ b64 + c.astype(np.int64)
        d = ((d + 2**31) % 2**32 - 2**31).astype(np.int32)
    elif instr.c_type == "i32":
        a64 = (a.view(np.uint8) if unsigned_a else a.view(np.int8)).astype(np.int64)
        b64 = (b.view(np.uint8) if unsigned_b else b.view(np.int8)).astype(np.int64)
        d = a64 @ b64 + c.astype(np.int64)
        if instr.saturate:
            d = np.clip(d, -(2**31), 2**31 - 1).astype(np.int32)
        else:
            d = ((d + 2**31) % 2**32 - 2**31).astype(np.int32)
    else:
        if getattr(instr, "round_inputs", "") == "xf32":
            a, b = to_xf32(a), to_xf32(b)
        d = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)).astype(c_regs.dtype)
    p = placement(instr, "C")
    out = c_regs.copy()
    out[..., p.lanes, p.slots] = d[..., p.rows, p.cols]
    return out
