#!/bin/bash
# Run 18 call 6: the mma.sync kernel with and without lane-pair stores (kernel-only), alternated.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/r18f
B="python3 -m mmaflow.runtime.bench --driver cuda"
i=0
for d in pairs nopairs pairs nopairs; do
  i=$((i + 1))
  timeout 120 $B --from-dir $D/$d --out /tmp/o/$i-$d --kernel-time > $OUT/$i-$d.log 2>&1; echo "$i-$d rc $?"
  grep -E "kernel-only" $OUT/$i-$d.log | grep -v "iree-default" | head -4
done
for d in vpairs vnopairs; do
  timeout 150 $B --from-dir $D/$d --out /tmp/o/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  cp /tmp/o/$d/checks.json $OUT/$d-checks.json 2>/dev/null
  grep -E "^check|rror" $OUT/$d.log | head -4
done
