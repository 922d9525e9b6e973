"""One module per pipeline stage; ``mmaflow.compiler.pipeline`` lists them in order."""
