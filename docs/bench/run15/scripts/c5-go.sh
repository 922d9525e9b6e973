#!/bin/bash
# Run 15 call 5: the new default, square sizes and the variants.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
timeout 170 $B --from-dir .devrun/r15/new --out /tmp/o/new --kernel-time > $OUT/new.log 2>&1; echo "new rc $?"
grep -E "kernel-only|FAIL" $OUT/new.log | grep -v "f32 out"
timeout 260 $B --from-dir .devrun/r15/vnew --out /tmp/o/vnew --time-checks 20 --kernel-time > $OUT/vnew.log 2>&1; echo "vnew rc $?"
cp /tmp/o/vnew/checks.json $OUT/vnew-checks.json
grep -E "^check|rror" $OUT/vnew.log | sed -e 's/max |err| \/ tolerance.*elements outside tolerance//'
