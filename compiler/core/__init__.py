"""Layer 1, core: errors, MLIR helpers, the attribute schema, problem records, ``KernelConfig``.

Imports nothing of mmaflow outside this package (checked by the import contracts in pyproject.toml)."""
