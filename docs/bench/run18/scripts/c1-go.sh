#!/bin/bash
# Run 18 call 1: 128x128 tiles' main loop and floor against the default's (kernel-only), bias+gelu.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/r18a
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def noepi c128s4 c128s4-8192 c128s4noepi c128s6 c128s6noepi; do
  timeout 120 $B --from-dir $D/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror|trap" $OUT/$d.log | grep -v "f32 out\|iree-default" | head -6
done
for d in vdef vc128s4 vc128s6; do
  timeout 150 $B --from-dir $D/$d --out /tmp/o/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  cp /tmp/o/$d/checks.json $OUT/$d-checks.json 2>/dev/null
  grep -E "^check|rror" $OUT/$d.log | grep -v "NOT BUILT" | head -8
done
