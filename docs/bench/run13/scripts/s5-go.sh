#!/bin/bash
# Session 3 device call 5: fp8 through the TMA ring (copy=tma: one box per operand per K tile) vs torch._scaled_mm.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in e4tma e4tmar1 e5tma; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/s5/$d --out /tmp/o/$d --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL|PASS|not run" | grep -v "scaled_mm.*fast"
done
cd /tmp/o && tar czf $OUT/s5.tgz .
