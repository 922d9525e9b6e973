"""What the TMA probe (``tma_probe.py``) must leave in shared memory: a 64x64 f16 box under TMA's
128B swizzle, written from the PTX ISA's description, independent of mmaflow. The lane executor's
run of the probe is checked against it (``e2e_tests/test_tma_ring.py``); on the H100 the same image
was read back exactly."""

from __future__ import annotations

import numpy as np

BOX = 64


def expected_image(x: np.ndarray, row0: int, col0: int, swizzle: bool = True) -> np.ndarray:
    """The 8192 bytes a 64x64 f16 box of x at (row0, col0) occupies in shared memory under TMA's
    128B swizzle (written here from the PTX ISA's description, independent of mmaflow)."""
    box = np.ascontiguousarray(x[row0 : row0 + BOX, col0 : col0 + BOX]).view(np.uint8).reshape(BOX, 8, 16)
    out = np.zeros((BOX, 8, 16), np.uint8)
    for r in range(BOX):
        for c in range(8):
            out[r, (c ^ (r % 8)) if swizzle else c] = box[r, c]
    return out.reshape(-1)
