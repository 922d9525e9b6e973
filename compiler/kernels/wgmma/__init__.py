"""The Hopper warpgroup-MMA matmul family (sm_90a): wgmma from swizzled shared memory, a ring fed
by cp.async or TMA, warp-specialized and persistent variants (docs/kernels/hopper_wgmma.md)."""
