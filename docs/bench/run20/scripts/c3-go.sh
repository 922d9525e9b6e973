#!/bin/bash
# Run 20 call 3 (H100): ping-pong's ring depth, kernel-only, the default beside it
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/pp/c3
B="python3 -m mmaflow.runtime.bench --driver cuda"
i=0
for d in def pp4 pp5 pp6 pp4floor pp6floor def pp4; do
  i=$((i+1))
  timeout 150 $B --from-dir $D/$d --out /tmp/o/$d$i --time-checks 20 --kernel-time > $OUT/$d$i.log 2>&1; echo "== $d rc $?"
  grep -o "^check sm_90a [^:]*: [A-Z]*\|kernel-only [0-9.]* ms[^]]*" $OUT/$d$i.log | head -6
done
