#!/bin/bash
# Run 16 call 2: e1, e3 and the default, kernel-only; then Nsight Compute per instruction of e1.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def e1 e3; do
  timeout 100 $B --from-dir .devrun/r16/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|PASS|FAIL|rror" $OUT/$d.log | grep -v "f32 out\|iree-default" | head -3
done
timeout 150 ncu --set full --import-source no --kernel-name regex:matmul --launch-skip 1 --launch-count 1 -o /tmp/o/ncu-e1 -f python3 -m mmaflow.runtime.bench --from-dir .devrun/r16/e1 --driver cuda --out - --profile-one mmaflow_sm_90a_4096.vmfb 4096 > $OUT/ncu-e1.run.txt 2>&1; echo "ncu rc $?"
ncu -i /tmp/o/ncu-e1.ncu-rep --page details > $OUT/ncu-e1.txt 2>&1
ncu -i /tmp/o/ncu-e1.ncu-rep --page source --csv --print-source sass > $OUT/ncu-e1-sass.csv 2>&1; echo "src rc $? $(wc -l < $OUT/ncu-e1-sass.csv)"
python3 docs/bench/run15/scripts/sass_stalls.py $OUT/ncu-e1-sass.csv 30
