#!/bin/bash
# Run 16 call 1: 4096^3 f16 default vs clusters of 2 (raster 8, 4), kernel-only; the variants
# (static, unaligned, B^T, bias+relu, bias+gelu; the dynamic ones are refused) with clusters of 2.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def cl2r8 cl2r4; do
  timeout 100 $B --from-dir .devrun/r16/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror" $OUT/$d.log | grep -v "f32 out" | head -6
done
timeout 300 $B --from-dir .devrun/r16/vcl --out /tmp/o/vcl --time-checks 20 --kernel-time > $OUT/vcl.log 2>&1; echo "vcl rc $?"
cp /tmp/o/vcl/checks.json $OUT/vcl-checks.json 2>/dev/null
grep -E "^check|rror|not built" $OUT/vcl.log | head -14
