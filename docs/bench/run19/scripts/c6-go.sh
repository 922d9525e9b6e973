#!/bin/bash
# Run 19 call 6 (H100): odd workgroups late by 0 / 1500 / 3000 / 6000 ns (nanosleep), static f32 out
# and bias+gelu -> f16 at 4096^3, kernel-only, runs alternated.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/r19e
B="python3 -m mmaflow.runtime.bench --driver cuda"
i=0
for d in d0 d3000 d1500 d6000 d0 d3000; do
  i=$((i+1))
  timeout 80 $B --from-dir $D/$d --out /tmp/o/$d$i --time-checks 20 --kernel-time > $OUT/$d-$i.log 2>&1; echo "$d rc $?"
  grep -E "^check|rror|trap" $OUT/$d-$i.log | sed 's/max |err| \/ tolerance.*outside tolerance//' | head -3
done
