"""The mma.sync / WMMA / MFMA matmul family: every target, every dtype pair of the catalogue
(docs/kernels/matmul.md)."""
