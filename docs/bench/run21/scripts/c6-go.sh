#!/bin/bash
# Run 21 call 6 (H100): Nsight Compute's full set on one launch each of the default's and ping-pong's f32-out and
# bias+gelu -> f16 kernels at 4096^3 (clocks locked at base, ncu's default)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
D=.devrun/pp/r21c6
for d in def pp6; do
  for k in "f32:matmul_dispatch_0_matmul_4096" "gelu:matmul_like"; do
    n=${k%%:*}; r=${k#*:}
    timeout 240 ncu --set full -k regex:$r --launch-skip 3 --launch-count 1 --page details --print-units base \
      python3 -m mmaflow.runtime.bench --driver cuda --from-dir $D/$d --out /tmp/o/$d$n --time-checks 3 > $OUT/$d-$n.txt 2>&1
    echo "== $d $n rc $?"
    grep -E "^ +(Duration|Elapsed Cycles|SM Frequency|Compute \(SM\) Throughput|Executed Ipc Active|Issue Slots Busy|No Eligible|Registers Per Thread|Warp Cycles Per Issued Instruction) " $OUT/$d-$n.txt | head -12
  done
done
