"""mmaflow.runtime: running compiled modules (IREE drivers, the CPU lane executor) and measuring them."""
