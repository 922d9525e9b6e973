"""Run 15 call 10: time a prepared module's calls back to back for a few seconds and print the wall
window, so that nvidia-smi's samples (clock, power) inside it can be picked out.

    python3 clocks.py DIR FILE SIZE SECONDS
"""
import json
import sys
import time
from datetime import datetime
from pathlib import Path

from mmaflow.runtime.bench import _inputs
from mmaflow.runtime.iree_runner import CompiledModule

d, file, size, seconds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
manifest = json.loads((d / "manifest.json").read_text())
mod = CompiledModule((d / file).read_bytes(), "cuda")
a, b = _inputs(size, manifest["a_type"])
mod.time(manifest["function"], a, b, warmup=5, repeat=5)  # uploads, warm-up
start = datetime.now()
calls, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    calls += len(mod.time(manifest["function"], a, b, warmup=0, repeat=50, warmup_seconds=0))
elapsed = time.perf_counter() - t0
print(json.dumps({"dir": str(d), "start": start.isoformat(), "end": datetime.now().isoformat(),
                  "calls": calls, "ms_per_call_sync": 1e3 * elapsed / calls}))
