#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
mkdir -p /tmp/o4
# fp8 small sizes: the default (warp-specialized) and the cp.async ring, same call
for d in e4defs e4cps; do
  echo "=== $d"; timeout 110 $B --from-dir .devrun/w3/$d --out /tmp/o4/$d --kernel-time > $OUT/$d.log 2>&1; echo "rc $?"
  grep -E "kernel-only|FAIL|PASS" $OUT/$d.log | grep -v "fast accum\|torch vs float64" | head -12
done
# bias+gelu -> f16: the default and the warp-specialized persistent kernel
for d in vardef varws; do
  echo "=== $d"; timeout 120 $B --from-dir .devrun/w3/$d --out /tmp/o4/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "rc $?"
  grep -E "^check|rror|kernel-only" $OUT/$d.log | head -12
done
# where the fp8 default's time goes
echo "=== ncu"
timeout 150 ncu --set full --kernel-name regex:matmul --launch-skip 1 --launch-count 1 python3 -m mmaflow.runtime.bench --from-dir .devrun/w3/e4defs --driver cuda --out - --profile-one mmaflow_sm_90a_4096.vmfb 4096 > $OUT/ncu-fp8-ws-4096.txt 2>&1; echo "rc $?"
grep -E "Duration|Tensor|Registers Per|Achieved Occ|Compute \(SM\) Throughput" $OUT/ncu-fp8-ws-4096.txt | head
cd /tmp/o4 && tar czf $OUT/w4.tgz .
