#!/bin/bash
# Run 18 call 2: floors with 2, 3, 4 slots (kernel-only), and the kernels with their f32 epilogue.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/r18b
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in noepi4 noepi3 noepi2 s4 s3 s2 noepi4; do
  timeout 120 $B --from-dir $D/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|rror|trap" $OUT/$d.log | grep -v "f32 out\|iree-default" | head -3
done
