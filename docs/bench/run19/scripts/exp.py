"""Experiment driver (run 19): run 18's (`docs/bench/run18/scripts/exp.py`, itself run 17's hooks:
NOEPI, STAGES, ...) plus MMAFLOW_EXP_STAGGER=D: in the warp-specialized kernel the second MMA
warpgroup starts its first tile once the first has issued K tile D - 1 (``TmaRing._stagger``, a
"go" mbarrier; 8 more bytes of shared memory reserved here), so that one warpgroup's epilogue can
run under the other's MMAs. Run from the repository root."""
import os
import runpy

if os.environ.get("MMAFLOW_EXP_STAGGER"):
    from mmaflow.compiler import tma, wgmma_plan
    if not hasattr(tma.TmaRing, "_stagger"):
        raise SystemExit("STAGGER: apply docs/bench/run19/scripts/stagger.patch first (not landed)")
    tma.TmaRing._stagger = int(os.environ["MMAFLOW_EXP_STAGGER"])
    _bytes = wgmma_plan.plan_bytes

    def _plus_go(cfg, elem, allocations=1):
        return _bytes(cfg, elem, allocations) + (8 if cfg.producer else 0)
    wgmma_plan.plan_bytes = _plus_go
runpy.run_path("docs/bench/run18/scripts/exp.py", run_name="__main__")
