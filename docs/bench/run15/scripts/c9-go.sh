#!/bin/bash
# Run 15 call 9: the default 4096^3 kernel with and without a compile-time cluster of 2, then
# Nsight Compute's launch statistics of the clustered one (its cluster size as launched).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in cl0 cl2; do
  timeout 80 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror" $OUT/$d.log | grep -v "f32 out" | head -5
done
timeout 100 ncu --section LaunchStats --section Occupancy --kernel-name regex:matmul --launch-skip 1 --launch-count 1 python3 -m mmaflow.runtime.bench --from-dir .devrun/r15/cl2 --driver cuda --out - --profile-one mmaflow_sm_90a_4096.vmfb 4096 > $OUT/ncu-cl2.txt 2>&1; echo "ncu rc $?"
grep -iE "cluster|Grid Size|Block Size|Waves" $OUT/ncu-cl2.txt | head -12
