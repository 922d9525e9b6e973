#!/bin/bash
# Run 16 call 3: default vs clusters of 2 at 6144^3 / 8192^3 (kernel-only), the variants with clusters.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def2 cl6144 cl8192 cl8192r8; do
  timeout 150 $B --from-dir .devrun/r16/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror" $OUT/$d.log | grep -v "f32 out\|iree-default" | head -6
done
timeout 300 $B --from-dir .devrun/r16/vcl4 --out /tmp/o/vcl4 --time-checks 20 --kernel-time > $OUT/vcl4.log 2>&1; echo "vcl4 rc $?"
cp /tmp/o/vcl4/checks.json $OUT/vcl4-checks.json 2>/dev/null
grep -E "^check|rror" $OUT/vcl4.log | grep -v "NOT BUILT" | head -8
