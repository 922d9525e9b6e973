#!/bin/bash
# Session 3 device call 8: Nsight Compute --set full of the default (persistent) 4096^3 f16 wgmma kernel.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p $OUT
timeout 240 ncu --set full --kernel-name regex:matmul --launch-skip 1 --launch-count 1 python3 -m mmaflow.runtime.bench --from-dir .devrun/s8/sq --driver cuda --out - --profile-one mmaflow_sm_90a_4096.vmfb 4096 > $OUT/ncu4096.txt 2>&1; echo "ncu rc $?"
grep -E "Duration|Registers Per|Achieved Occ|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit Rate|Issue Slots Busy|Shared is the highest|highest-utilized|Waves Per SM|Grid Size" $OUT/ncu4096.txt | head -30
