"""Hardware limits the kernels size themselves against, each with the document that states it.

Per-target sizes that IREE also knows (LDS bytes, wave sizes, compute units) live in the target
records (``targets.py``); these are the limits of one NVIDIA SM that the Hopper kernels and the
reports need besides."""

from __future__ import annotations

# Compute capability 9.0 (CUDA C++ Programming Guide, "Technical Specifications per Compute
# Capability"): 228 KB of shared memory per SM, at most 227 KB per block, 1 KB reserved per block.
SM_SHARED_BYTES = 228 * 1024
SHARED_RESERVED_PER_BLOCK = 1024
# The same table, compute capability 8.0 and 9.0: 64K 32-bit registers per SM, 255 per thread,
# 2048 resident threads per SM, 32 resident blocks per SM.
SM_REGISTERS = 65536
THREAD_REGISTERS = 255
SM_THREADS = 2048
SM_BLOCKS = 32
# PTX ISA, setmaxnreg: per-thread register counts move in multiples of 8.
REGISTER_GRANULE = 8


def resident_by_shared(shared: int, most: int) -> int:
    """Workgroups of ``shared`` bytes an SM holds at once, where one workgroup may have ``most``
    (an SM has a workgroup's most plus the reserve: 227 + 1 KB on compute capability 9.0, 163 + 1
    on 8.0), each taking the reserve beside its own."""
    return (most + SHARED_RESERVED_PER_BLOCK) // (shared + SHARED_RESERVED_PER_BLOCK)
