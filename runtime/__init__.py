"""mmaflow.runtime: running compiled modules (IREE drivers, the CPU lane executor) and measuring them.

The Python API (``matmul``, ``compile_module``, ``run_module``) lives in ``mmaflow.runtime.api``
and is re-exported here lazily, so that importing the runtime on a machine with only
iree-base-runtime (no compiler) stays possible.
"""

__all__ = ["matmul", "compile_module", "run_module"]


def __getattr__(name):
    if name in __all__:
        from mmaflow.runtime import api

        return getattr(api, name)
    raise AttributeError(name)
