#!/bin/bash
# Run 19 call 4 (H100): --checks on sm_90a and sm_80 (no timing), bf16 sizes kernel-only.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/r19d
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in chk90 chk80; do
  timeout 200 $B --from-dir $D/$d --out /tmp/o/$d > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -cE "^check.*PASS" $OUT/$d.log; grep -E "^check" $OUT/$d.log | grep -v PASS | head -30
done
timeout 200 $B --from-dir $D/bf16 --out /tmp/o/bf16 --kernel-time > $OUT/bf16.log 2>&1; echo "bf16 rc $?"
grep -E "kernel-only|rror" $OUT/bf16.log
