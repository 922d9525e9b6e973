#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
mkdir -p /tmp/o
for d in ws def wsw e4ws e4def bfws; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/w1/$d --out /tmp/o/$d --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL|PASS|mismatch|wrong" | grep -v "scaled_mm.*fast\|torch vs float64" | head -20
done
cd /tmp/o && tar czf $OUT/w1.tgz .
