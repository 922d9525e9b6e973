#!/bin/bash
# Run 15 call 3: the variants, default vs warp-specialized, and bf16 4000^3, in one call.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in bun bunws; do
  timeout 90 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only" $OUT/$d.log | grep -v "f32 out"
done
for d in vdef vws; do
  timeout 230 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  cp /tmp/o/$d/checks.json $OUT/$d-checks.json
  grep -E "^check|rror" $OUT/$d.log | head -12
done
