#!/bin/bash
# Run 15 call 7: 8192^3, the default against the warp-specialized kernel (raster 8, 4, 16), then
# ncu --set full of the default and of the warp-specialized kernel (raster 8).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in d8 w8 w8r4 w8r16; do
  timeout 80 $B --from-dir .devrun/r15/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only" $OUT/$d.log | grep -v "f32 out"
done
for d in d8 w8; do
  timeout 120 ncu --set full --kernel-name regex:matmul --launch-skip 1 --launch-count 1 python3 -m mmaflow.runtime.bench --from-dir .devrun/r15/$d --driver cuda --out - --profile-one mmaflow_sm_90a_8192.vmfb 8192 > $OUT/ncu-$d.txt 2>&1; echo "ncu $d rc $?"
  grep -E "Duration|L2 Hit|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput|Registers Per" $OUT/ncu-$d.txt
done
