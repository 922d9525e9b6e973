#!/bin/bash
# Run 17 call 2: ping-pong MMA warpgroups in clusters of 2 against the default (kernel-only); the variants.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def ppc4096 ppc4096r8 ppc8192; do
  timeout 120 $B --from-dir .devrun/r17b/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror|trap" $OUT/$d.log | grep -v "f32 out\|iree-default" | head -6
done
for d in vppc; do
timeout 200 $B --from-dir .devrun/r17b/$d --out /tmp/o/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
cp /tmp/o/$d/checks.json $OUT/$d-checks.json 2>/dev/null
grep -E "^check|rror" $OUT/$d.log | grep -v "NOT BUILT" | head -8
done
