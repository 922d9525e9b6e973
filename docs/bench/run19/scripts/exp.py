"""Experiment driver (run 19): run 18's (`docs/bench/run18/scripts/exp.py`, itself run 17's hooks:
NOEPI, STAGES, ...) plus MMAFLOW_EXP_STAGGER=D: in the warp-specialized kernel the second MMA
warpgroup starts its first tile once the first has issued K tile D - 1 (``TmaRing._stagger``, a
"go" mbarrier; 8 more bytes of shared memory reserved here), so that one warpgroup's epilogue can
run under the other's MMAs; and MMAFLOW_EXP_DESYNC=NS: odd workgroups start NS ns late (nanosleep).
Run from the repository root."""
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
if os.environ.get("MMAFLOW_EXP_DESYNC"):
    # Odd workgroups sleep MMAFLOW_EXP_DESYNC ns (nanosleep: within [0, 2x]) before anything else,
    # so that the two halves of the persistent grid do not store their tiles at the same time.
    from iree.compiler import ir
    from iree.compiler.dialects import arith, hal, nvvm
    from mmaflow.compiler.emit import Emitter
    from mmaflow.compiler.stages.distribute_wgmma import WgmmaRewriter
    _ns = int(os.environ["MMAFLOW_EXP_DESYNC"])
    _run = WgmmaRewriter.run

    def _desync(self):
        _run(self)
        first = list(self.func.regions[0].blocks[0].operations)[0].operation
        em = Emitter(ir.InsertionPoint(first), first.location, self.vendor).named("exp.desync")
        with em.loc, em.ip:
            wid = hal.interface_workgroup_id(0)
        late = em.if_then(em.eq(em.rem(wid, 2), 1))
        with late.loc, late.ip:
            nvvm.NanosleepOp(arith.ConstantOp(ir.IntegerType.get_signless(32), _ns).result)
    WgmmaRewriter.run = _desync
runpy.run_path("docs/bench/run18/scripts/exp.py", run_name="__main__")
