#!/bin/bash
# Session 3 device call 6: the persistent grid (the next tile's first K tiles copied under this tile's epilogue)
# vs the default wgmma kernel, f16 and fp8, and the fused bias+gelu against torch eager.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def p4096 p8192 e4def e4p4096 e4p8192; do
  echo "=== $d"; timeout 90 $B --from-dir .devrun/s6/$d --out /tmp/o/$d --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL|PASS" | grep -v "scaled_mm.*fast\|torch vs float64"
done
for d in var pvar; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/s6/$d --out /tmp/o/$d --time-checks 20 --kernel-time 2>&1 | grep -E "^check|rror"
done
cd /tmp/o && tar czf $OUT/s6.tgz .
