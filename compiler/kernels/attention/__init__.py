"""The flash-attention family: mma.sync on NVIDIA (``nvidia``), MFMA/WMMA on AMD (``amd``),
built directly rather than through the transform script (docs/kernels/flash_attention.md)."""
