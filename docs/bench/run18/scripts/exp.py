"""Experiment driver (run 18): run 17's (`docs/bench/run17/scripts/exp.py`: the STAGES5, LAG2,
NOEPI and SPLITN hooks, set from MMAFLOW_EXP_*; not landed) plus MMAFLOW_EXP_STAGES=N, which lets
the warpgroup kernel take rings of up to N slots. Run from the repository root."""
import os
import runpy

from mmaflow.compiler import wgmma_plan

if os.environ.get("MMAFLOW_EXP_STAGES"):
    wgmma_plan.STAGES = tuple(range(1, int(os.environ["MMAFLOW_EXP_STAGES"]) + 1))
runpy.run_path("docs/bench/run17/scripts/exp.py", run_name="__main__")
