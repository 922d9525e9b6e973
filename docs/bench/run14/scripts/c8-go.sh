#!/bin/bash
# Run 14 call 8: the warp-specialized kernel on partial tiles on the GPU (4000^3: every tile edge
# overhangs), fp8 default and f16 producer=1, checked against float64.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in e4un e4unnp f16un; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/w5/$d --out /tmp/o5/$d --kernel-time > $OUT/$d.log 2>&1; echo "rc $?"
  grep -E "kernel-only|FAIL|PASS" $OUT/$d.log | grep -v "fast accum\|torch vs float64\|torch.mm (" | head -12
  cp /tmp/o5/$d/results.json $OUT/$d-results.json 2>/dev/null
done
