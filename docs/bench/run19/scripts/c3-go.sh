#!/bin/bash
# Run 19 call 3 (H100): bias+gelu -> f16 4096^3 before / after the one-piece 1 + erf, alternated,
# torch eager beside each (kernel-only).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/r19c
B="python3 -m mmaflow.runtime.bench --driver cuda"
i=0
for d in before after before after before after; do
  i=$((i+1))
  timeout 90 $B --from-dir $D/$d --out /tmp/o/$d$i --time-checks 20 --kernel-time > $OUT/$d$i.log 2>&1; echo "$d rc $?"
  grep -E "^check|rror|trap" $OUT/$d$i.log | sed 's/max |err| \/ tolerance.*outside tolerance//' | head -3
done
