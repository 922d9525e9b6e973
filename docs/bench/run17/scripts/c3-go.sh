#!/bin/bash
# Run 17 call 3: the default without its epilogue (floor), ping-pong with wait_group 2.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def noepi pplag2 pplag2s5; do
  timeout 120 $B --from-dir .devrun/r17c/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror|trap" $OUT/$d.log | grep -v "f32 out\|iree-default" | head -6
done
