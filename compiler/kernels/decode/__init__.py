"""The decode family: M up to one instruction's rows, B streamed once, K split across waves
(docs/kernels/decode.md)."""
