#!/bin/bash
# Run 15 call 11: Nsight Compute's per-instruction view of the new default (warp-specialized,
# persistent) at 4096^3: static f16 -> f32 and bias+gelu -> f16 (.devrun/r15/vnew of c5-prep.sh,
# checks 0 and 4).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
P="--driver cuda --out -"
mkdir -p /tmp/o
for c in 0 4; do
  timeout 150 ncu --set full --import-source no --kernel-name regex:matmul --launch-skip 1 --launch-count 1 -o /tmp/o/ncu-ws$c -f python3 -m mmaflow.runtime.bench --from-dir .devrun/r15/vnew $P --profile-check $c > $OUT/ncu-ws$c.run.txt 2>&1; echo "ncu $c rc $?"
  ncu -i /tmp/o/ncu-ws$c.ncu-rep --page details > $OUT/ncu-ws$c.txt 2>&1
  ncu -i /tmp/o/ncu-ws$c.ncu-rep --page source --csv --print-source sass > $OUT/ncu-ws$c-sass.csv 2>&1; echo "src $c rc $?"
  grep -E "Duration|Registers Per" $OUT/ncu-ws$c.txt
done
