#!/bin/bash
# Run 18 call 3: f16-out epilogues of the default 4096^3 kernel, kernel-only, against the floor.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
python3 -m mmaflow.runtime.bench --driver cuda --from-dir .devrun/r18c/noepi --out /tmp/o/noepi --kernel-time > $OUT/noepi.log 2>&1
grep -E "kernel-only" $OUT/noepi.log | head -3
python3 docs/bench/run18/scripts/decompose.py dev --driver cuda --from-dir .devrun/r18c/v --out /tmp/o/v --time-checks 20 --kernel-time > $OUT/v.log 2>&1; echo "v rc $?"
cp /tmp/o/v/checks.json $OUT/v-checks.json 2>/dev/null
grep -E "^check|rror" $OUT/v.log | head -8
python3 -m mmaflow.runtime.bench --driver cuda --from-dir .devrun/r18c/noepi --out /tmp/o/noepi2 --kernel-time > $OUT/noepi2.log 2>&1
grep -E "kernel-only" $OUT/noepi2.log | head -3
