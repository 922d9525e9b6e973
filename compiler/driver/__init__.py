"""Layer 6, driver: the IREE bridge (in-process compile), the iree-compile hook client and
codegen server, and reading .vmfb files."""
