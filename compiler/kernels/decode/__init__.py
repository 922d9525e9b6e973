"""The decode family: M up to two instruction row tiles, B streamed once, K split across waves
(docs/kernels/decode.md)."""
