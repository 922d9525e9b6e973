#!/bin/bash
# Run 15 call 4: f16 at 2048/6144/8192 and bf16 at 4096/8192, default vs warp-specialized.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in f16def f16ws bfdef bfws; do
  timeout 140 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only" $OUT/$d.log | grep -v "f32 out"
done
