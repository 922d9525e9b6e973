"""Layer 4, pipeline: the per-executable stages in order (``pipeline.STAGES``), their runner and
results. It names no kernel family: it asks ``kernels.registry``."""
