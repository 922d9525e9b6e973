#!/bin/bash
# Run 18 call 5: 16-byte f32 stores by lane pairs (PAIR32) against the default, kernel-only.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/r18e
B="python3 -m mmaflow.runtime.bench --driver cuda"
i=0
for d in def pair32 noepi pair32 def; do
  i=$((i + 1))
  timeout 150 $B --from-dir $D/$d --out /tmp/o/$i-$d --kernel-time > $OUT/$i-$d.log 2>&1; echo "$i-$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror|trap" $OUT/$i-$d.log | grep -v "f32 out\|iree-default" | head -6
done
for d in vdef vpair32; do
  timeout 200 $B --from-dir $D/$d --out /tmp/o/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  cp /tmp/o/$d/checks.json $OUT/$d-checks.json 2>/dev/null
  grep -E "^check|rror" $OUT/$d.log | head -8
done
