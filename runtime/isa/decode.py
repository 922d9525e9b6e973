"""Decode an MLIR matrix op into the ISA-model instruction the hardware would execute.

Like a disassembler: from the op name, the architecture and the operand vector types alone
(never from the compiler's catalogue), pick the instruction in ``tables.INSTRUCTIONS``.
"""

from __future__ import annotations

from mmaflow.runtime.isa.execute import IsaError
from mmaflow.runtime.isa.tables import F8F6F4_FORMATS

_FAMILY = {"gfx11": "rdna3", "gfx12": "rdna4", "gfx94": "cdna", "gfx95": "cdna", "sm_": "ptx"}


def arch_family(arch: str) -> str:
    for prefix, fam in _FAMILY.items():
        if arch.startswith(prefix):
            return fam
    raise IsaError(f"the ISA model does not know architecture {arch!r}")


_FP8 = {"f8E4M3FNUZ": "fp8", "f8E4M3FN": "fp8", "f8E5M2FNUZ": "bf8", "f8E5M2": "bf8"}
_TYPE_NAME = {"f16": "f16", "bf16": "bf16", "i8": "i8", "f32": "f32", "f64": "f64"}


def decode(
    op_name: str,
    arch: str,
    wave: int,
    mnk: tuple[int, int, int],
    a_elem: str,
    c_elem: str,
    b_elem: str | None = None,
    reduce_precision: bool = False,
) -> str:
    """Return the ISA-model key for one matrix op instance (``b_elem``: B's element type, where
    it may differ from A's: the fp8 x bf8 forms; ``reduce_precision``: ``amdgpu.mfma``'s
    reducePrecision, xf32 for f32 inputs on gfx94x)."""
    fam = arch_family(arch)
    m, n, k = mnk
    b_elem = b_elem or a_elem
    if op_name == "amdgpu.scaled_mfma" and (m, n, k) not in ((16, 16, 128), (32, 32, 64)):
        raise IsaError(f"amdgpu.scaled_mfma {m}x{n}x{k} does not exist (16x16x128 and 32x32x64 do)")
    if op_name in ("amdgpu.mfma", "amdgpu.scaled_mfma") and (m, n, k) in ((16, 16, 128), (32, 32, 64)):
        # CDNA4's f8f6f4: any OCP 8/6/4-bit format on either side, the codes in cbsz / blgp; the
        # block-scaled form (v_mfma_scale_*) too
        if not arch.startswith("gfx95") or wave != 64:
            raise IsaError(f"{op_name} {m}x{n}x{k} (f8f6f4) does not exist on {arch}")
        codes = {t: c for c, t in F8F6F4_FORMATS.items()}
        for elem in (a_elem, b_elem):
            if elem not in codes:
                raise IsaError(f"mfma {m}x{n}x{k} f8f6f4 does not read {elem} (fp8, bf8, fp6, bf6, fp4 in OCP formats)")
        scale = "scale_" if op_name == "amdgpu.scaled_mfma" else ""
        return f"cdna.v_mfma_{scale}f32_{m}x{n}x{k}_f8f6f4.{codes[a_elem]}.{codes[b_elem]}"
    if b_elem != a_elem and not (a_elem in _FP8 and b_elem in _FP8):
        raise IsaError(f"{op_name} with {a_elem} x {b_elem} inputs does not exist (only fp8 x bf8 pairs mix)")
    if op_name == "amdgpu.wmma":
        if (m, n, k) == (16, 16, 32) and fam == "rdna4" and a_elem == "i4":
            return "rdna4.v_wmma_i32_16x16x32_iu4"
        if fam not in ("rdna3", "rdna4") or (m, n, k) != (16, 16, 16):
            raise IsaError(f"amdgpu.wmma {m}x{n}x{k} does not exist on {arch}")
        if a_elem in _FP8:
            if fam != "rdna4" or {a_elem, b_elem} - {"f8E4M3FN", "f8E5M2"}:
                raise IsaError(f"wmma with {a_elem} x {b_elem} inputs does not exist on {arch}")
            mnemonic = f"v_wmma_f32_16x16x16_{_FP8[a_elem]}_{_FP8[b_elem]}"
        elif a_elem == "i8":
            mnemonic = "v_wmma_i32_16x16x16_iu8"
        elif a_elem == "i4":
            mnemonic = "v_wmma_i32_16x16x16_iu4"
        else:
            mnemonic = f"v_wmma_{c_elem}_16x16x16_{a_elem}"
        return f"rdna3.{mnemonic}.w{wave}" if fam == "rdna3" else f"rdna4.{mnemonic}"
    if op_name == "amdgpu.mfma":
        if fam != "cdna" or wave != 64:
            raise IsaError(f"amdgpu.mfma does not exist on {arch}")
        if a_elem in _FP8:
            for elem in (a_elem, b_elem):
                if (elem in ("f8E4M3FN", "f8E5M2")) != arch.startswith("gfx95"):
                    raise IsaError(
                        f"mfma with {elem} inputs does not exist on {arch} "
                        f"({'OCP' if arch.startswith('gfx95') else 'FNUZ'} fp8 only)"
                    )
            mnemonic = f"v_mfma_f32_{m}x{n}x{k}_{_FP8[a_elem]}_{_FP8[b_elem]}"
        elif reduce_precision:
            if a_elem != "f32" or not arch.startswith("gfx94"):
                raise IsaError(f"mfma with reducePrecision ({a_elem} inputs) does not exist on {arch}")
            mnemonic = f"v_mfma_{c_elem}_{m}x{n}x{k}_xf32"
        elif a_elem in _TYPE_NAME:
            # CDNA4's double-K shapes ([C4]): f16/bf16 16x16x32 and 32x32x16, i8 16x16x64 and 32x32x32
            doubled = {"f16": ((16, 32), (32, 16)), "bf16": ((16, 32), (32, 16)), "i8": ((16, 64), (32, 32))}
            if (m, k) in doubled.get(a_elem, ()) and not arch.startswith("gfx95"):
                raise IsaError(f"mfma {m}x{n}x{k} with {a_elem} inputs does not exist on {arch} (gfx950 only)")
            mnemonic = f"v_mfma_{c_elem}_{m}x{n}x{k}_{_TYPE_NAME[a_elem]}"
        else:
            raise IsaError(f"mfma with {a_elem} inputs is not in the ISA model")
        return f"cdna.{mnemonic}"
    if op_name == "nvgpu.mma.sync":
        if fam != "ptx":
            raise IsaError(f"nvgpu.mma.sync does not exist on {arch}")
        if a_elem == "i8":
            return "ptx.mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32"
        return f"ptx.mma.sync.aligned.m{m}n{n}k{k}.row.col.{c_elem}.{a_elem}.{a_elem}.{c_elem}"
    raise IsaError(f"{op_name} is not a matrix instruction")
