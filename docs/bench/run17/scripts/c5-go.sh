#!/bin/bash
# Run 17 call 5: Nsight Compute (full set, per-SASS-instruction stall samples) of the ping-pong
# 4096^3 kernel (call 4's .devrun/r17d/ppsplit without SPLITN: call 1's pp4096, rebuilt by c5-prep.sh)
# and of the default kernel, for where ping-pong's time goes.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
P="--driver cuda --out -"
for r in def pp; do
  timeout 150 ncu --set full --import-source no --kernel-name regex:matmul --launch-skip 1 --launch-count 1 -o /tmp/o/ncu-$r -f python3 -m mmaflow.runtime.bench --from-dir .devrun/r17e/$r $P --profile-one mmaflow_sm_90a_4096.vmfb 4096 > $OUT/ncu-$r.run.txt 2>&1; echo "ncu $r rc $?"
  ncu -i /tmp/o/ncu-$r.ncu-rep --page details > $OUT/ncu-$r.txt 2>&1
  ncu -i /tmp/o/ncu-$r.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$r-sass.csv 2>&1; echo "src $r rc $? $(wc -l < $OUT/ncu-$r-sass.csv)"
  gzip -f $OUT/ncu-$r-sass.csv
done
