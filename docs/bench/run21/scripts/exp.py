"""Experiment driver (run 21): run 18's hooks (`docs/bench/run18/scripts/exp.py`, which runs run 17's)
plus MMAFLOW_EXP_NOSTORE=1: every global store of the epilogue is guarded by `if (the stored
vector's first element, as bits, == 0x7E01)`, a NaN payload no epilogue of finite data produces.
The epilogue's arithmetic all runs, its stores never do: the kernel's time without its output
traffic (the result is wrong; a bound, not a kernel). MMAFLOW_EXP_SMSPLIT=1: run 20's register
split, sized against the SM's 65536 registers instead of the launch pool (a kernel that hangs
in its .inc where the two differ: four MMA warpgroups). Not landed. Run from the repository root."""
import os
import runpy

if os.environ.get("MMAFLOW_EXP_NOSTORE"):
    from iree.compiler import ir
    from iree.compiler.dialects import arith, vector
    from mmaflow.compiler.emit import Emitter
    _store = Emitter.bounded_global_store

    def _never(self, val, mem, idx, limits, extent0=None):
        vt = ir.VectorType(val.type)
        bits = vt.element_type.width
        it = ir.IntegerType.get_signless(bits)
        with self.loc, self.ip:
            first = vector.ExtractOp(val, [], [0]).result
            word = arith.BitcastOp(it, first).result
            c = arith.CmpIOp(arith.CmpIPredicate.eq, word, arith.ConstantOp(it, 0x7E01).result).result
        _store(self.if_then(c), val, mem, idx, limits, extent0)
    Emitter.bounded_global_store = _never
if os.environ.get("MMAFLOW_EXP_SMSPLIT"):
    from mmaflow.compiler import tma
    tma.consumer_registers = lambda warpgroups: min(256, (65536 - 128 * tma.PRODUCER_REGISTERS) // (128 * warpgroups) // 8 * 8)
runpy.run_path("docs/bench/run18/scripts/exp.py", run_name="__main__")
