#!/bin/bash
# Run 14 call 9: the bf16 default at 4096^3 three times in one call, against cuBLAS's bf16 output each time
# (the 0.9x target sits within the call-to-call spread: run 13 call 7 0.893x, run 14 call 5 0.903x).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for i in 1 2 3; do
  echo "=== bf $i"; timeout 100 $B --from-dir .devrun/w6/bf --out /tmp/o7/bf$i --kernel-time > $OUT/bf$i.log 2>&1; echo "rc $?"
  grep -E "kernel-only|FAIL|PASS" $OUT/bf$i.log | grep -v "torch vs float64" | head -8
  cp /tmp/o7/bf$i/results.json $OUT/bf$i-results.json 2>/dev/null
done
