"""The copy family: IREE's ``slow_memcpy`` dispatches as full-width vector copies (docs/kernels/copy.md)."""
