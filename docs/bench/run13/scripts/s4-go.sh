#!/bin/bash
# Session 3 device call 4: fp8 e4m3 (128x128x128 tiles) with 5 and 6 ring slots (cuBLAS: 6).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in s5 s6; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/s4/$d --out /tmp/o/$d --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL|PASS" | grep -v "scaled_mm.*fast"
done
cd /tmp/o && tar czf $OUT/s4.tgz .
