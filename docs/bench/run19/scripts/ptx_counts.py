"""Run 19: PTX instruction counts and ptxas registers of the bias+gelu -> f16 4096^3 sm_90a kernel
before (29fdbfa) and after (d6ca917) the one-piece 1 + erf, read out of the .vmfb files that
call 3 timed (c3-prep.sh's .devrun/r19c/{before,after}/check_sm_90a_4.vmfb):

    .venv/bin/python docs/bench/run19/scripts/ptx_counts.py .devrun/r19c/before/check_sm_90a_4.vmfb \\
        .devrun/r19c/after/check_sm_90a_4.vmfb

Counts are over the whole kernel, per thread (the kernel has no loop around its epilogue; the K
loop's instructions are the same in both)."""
import re
import sys
from pathlib import Path

from mmaflow.compiler.report import ptxas_info
from mmaflow.compiler.vmfb import executables, ptx_text

OPS = ("fma.rn.f32", "mul.rn.f32", "add.rn.f32", "sub.rn.f32", "selp.f32", "setp", "ex2.approx.ftz.f32",
       "min.f32", "neg.f32", "abs.f32")
for path in sys.argv[1:]:
    (blob,) = executables(Path(path).read_bytes()).values()
    ptx = ptx_text(blob)
    body = [ln.strip() for ln in ptx.splitlines() if ln.strip() and not ln.strip().startswith(("//", ".", "$", "{", "}"))]
    counts = {op: sum(1 for ln in body if re.match(rf"(@!?%p\d+ )?{re.escape(op)}\b", ln)) for op in OPS}
    info = ptxas_info(ptx, "sm_90a", 384)
    print(path, f"instructions {len(body)}", " ".join(f"{k} {v}" for k, v in counts.items()),
          f"ptxas: registers {info.get('vgprs')} spill bytes {info.get('vgpr_spills', 0)}")
