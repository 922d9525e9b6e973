#!/bin/bash
# Run 21 call 5 (H100): a real kernel fault through `python -m mmaflow.runtime.bench` (the hanging .inc of run 20's
# register split), then a fresh process on the default kernel
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
B="python3 -m mmaflow.runtime.bench --driver cuda"
s=$(date +%s.%N)
timeout 150 $B --from-dir .devrun/pp/r21c5/fault --out /tmp/o/fault --time-checks 20 --kernel-time > $OUT/fault.log 2>&1
rc=$?
echo "== fault rc $rc in $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
tail -n 12 $OUT/fault.log
timeout 150 $B --from-dir .devrun/pp/r21c2/def --out /tmp/o/def --time-checks 20 --kernel-time > $OUT/def.log 2>&1; echo "== def rc $?"
grep -o "^check sm_90a [^:]*: [A-Z]*\|kernel-only [0-9.]* ms[^]]*" $OUT/def.log | head -8
