#!/bin/bash
# Session 3 device call 1: 2-CTA-per-SM tile shapes vs the default (kernel-only), and the variants with 128x128 tiles.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
mkdir -p $OUT/s1
for d in def n128s3 n128s3r8 n128s2r8 w64s2r8; do
  echo "=== $d"; timeout 110 $B --from-dir .devrun/s1/$d --out /tmp/o/$d --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL" ; cp /tmp/o/$d/*.json $OUT/s1/ 2>/dev/null
done
echo "=== var128"; timeout 150 $B --from-dir .devrun/s1/var128 --out /tmp/o/var --time-checks 20 --kernel-time 2>&1 | grep -E "^check|kernel-only|rror"
cd /tmp/o && tar czf $OUT/s1.tgz . 
