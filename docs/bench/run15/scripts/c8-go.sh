#!/bin/bash
# Run 15 call 8: 3072^3 f16 and bf16, the new default against producer=0.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in n3072 c3072 bn3072 bc3072; do
  timeout 80 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|FAIL" $OUT/$d.log | grep -v "f32 out"
done
