#!/bin/bash
# Run 15 call 1: baselines, then Nsight Compute's per-instruction (SASS) view of the f16 default
# 4096^3 kernel and of the fused bias+gelu -> f16 kernel.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
D=.devrun/r15
timeout 100 $B --from-dir $D/def --out /tmp/o/def --kernel-time > $OUT/def.log 2>&1; echo "def rc $?"
timeout 100 $B --from-dir $D/var --out /tmp/o/var --time-checks 20 --kernel-time > $OUT/var.log 2>&1; echo "var rc $?"
P="--driver cuda --out -"
timeout 120 ncu --set full --import-source no --kernel-name regex:matmul --launch-skip 1 --launch-count 1 -o /tmp/o/ncu-def -f python3 -m mmaflow.runtime.bench --from-dir $D/def $P --profile-one mmaflow_sm_90a_4096.vmfb 4096 > $OUT/ncu-def.run.txt 2>&1; echo "ncu def rc $?"
timeout 120 ncu --set full --import-source no --kernel-name regex:matmul --launch-skip 1 --launch-count 1 -o /tmp/o/ncu-gelu -f python3 -m mmaflow.runtime.bench --from-dir $D/var $P --profile-check 1 > $OUT/ncu-gelu.run.txt 2>&1; echo "ncu gelu rc $?"
for r in def gelu; do
  ncu -i /tmp/o/ncu-$r.ncu-rep --page details > $OUT/ncu-$r.txt 2>&1
  ncu -i /tmp/o/ncu-$r.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$r-sass.csv 2>&1; echo "src $r rc $? $(wc -l < $OUT/ncu-$r-sass.csv)"
done
cp /tmp/o/*/*.json $OUT/ 2>/dev/null; ls /tmp/o
