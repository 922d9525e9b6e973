#!/bin/bash
# Run 21 call 4 (H100): the default kernel (4 and 3 slots) against the TMA-store epilogue, modes 2 and 3, alternated, kernel-only
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
D=.devrun/pp/r21c4
B="python3 -m mmaflow.runtime.bench --driver cuda"
i=0
for d in def tms2 tms3 def3 def tms2 tms3 def3; do
  i=$((i+1))
  timeout 150 $B --from-dir $D/$d --out /tmp/o/$d$i --time-checks 20 --kernel-time > $OUT/$d$i.log 2>&1; echo "== $d rc $?"
  grep -o "^check sm_90a [^:]*: [A-Z]*\|kernel-only [0-9.]* ms[^]]*" $OUT/$d$i.log | head -8
done
