"""mmaflow.compiler: catalogue, layout model, the stage pipeline and the IREE bridge."""
