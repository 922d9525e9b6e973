#!/bin/bash
# Run 15 call 6: the stagger experiment (c6-prep.sh).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in s0 s1000 s2500 s6000; do
  timeout 120 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "^check|rror" $OUT/$d.log | sed -e 's/max |err| \/ tolerance.*elements outside tolerance//'
done
