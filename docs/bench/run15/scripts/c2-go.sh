#!/bin/bash
# Run 15 call 2: the warp-specialized kernel with 4 or 3 slots, and with one MMA warpgroup (64x256).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in ws ws3-4096 ws3-8192 m64-4096 m64-8192; do
  timeout 100 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only" $OUT/$d.log | grep -v "f32 out"
done
