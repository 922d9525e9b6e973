#!/bin/bash
# Run 19 call 7 (H100): the --checks epilogue cases on sm_90a and sm_80 (numerics, no timing).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
for t in sm_90a sm_80; do
  timeout 150 python3 -m mmaflow.runtime.bench --driver cuda --from-dir .devrun/r19f/$t --out /tmp/o-$t > $OUT/chk-$t.log 2>&1; echo "$t rc $?"
  grep -E "^check" $OUT/chk-$t.log | cut -c1-160
done
