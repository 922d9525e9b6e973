"""Experiment driver (run 16): `mmaflow` with TmaRing hooks set from MMAFLOW_EXP_* (not landed)."""
import os, sys
from mmaflow.compiler.tma import TmaRing
if "MMAFLOW_EXP_SCOPE" in os.environ:
    TmaRing._remote_scope = os.environ["MMAFLOW_EXP_SCOPE"] or None
if "MMAFLOW_EXP_TICKS" in os.environ:
    TmaRing._wait_ticks = int(os.environ["MMAFLOW_EXP_TICKS"]) or None
from mmaflow.compiler.cli import main
sys.exit(main(sys.argv[1:]))
