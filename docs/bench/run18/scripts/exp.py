"""Experiment driver (run 18): run 17's (`docs/bench/run17/scripts/exp.py`: the STAGES5, LAG2,
NOEPI and SPLITN hooks, set from MMAFLOW_EXP_*; not landed) plus MMAFLOW_EXP_STAGES=N, which lets
the warpgroup kernel take rings of up to N slots, and MMAFLOW_EXP_PAIR32=1, which merges 32-bit
outputs' runs across lane pairs too (16-byte stores; ``plan.PAIRED_BITS``; the default since
44ea374), and MMAFLOW_EXP_NOPAIRS=1, which merges none (the stores as before run 18). Run from the
repository root."""
import os
import runpy

from mmaflow.compiler import wgmma_plan

if os.environ.get("MMAFLOW_EXP_STAGES"):
    wgmma_plan.STAGES = tuple(range(1, int(os.environ["MMAFLOW_EXP_STAGES"]) + 1))
if os.environ.get("MMAFLOW_EXP_PAIR32"):
    from mmaflow.compiler import plan
    plan.PAIRED_BITS = (16, 32)
if os.environ.get("MMAFLOW_EXP_NOPAIRS"):
    from mmaflow.compiler import plan
    plan.PAIRED_BITS = ()
runpy.run_path("docs/bench/run17/scripts/exp.py", run_name="__main__")
