#!/bin/bash
# Session 3 device call 3: fp8 e4m3 in 64x128 tiles (several blocks per SM) vs the default 128x128.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def m64s4 m64s3 m64s2; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/s3/$d --out /tmp/o/$d --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL|PASS" | grep -v "scaled_mm.*fast"
done
cd /tmp/o && tar czf $OUT/s3.tgz .
