"""Helpers the kernel families share: the emitter, LDS copies, fragments, prologue and epilogue,
the script-based contraction rewriter (``contraction``) and its plan."""
