#!/bin/bash
# Run 19 call 1 (H100): staggered MMA warpgroups (D = 0..3) on the static 4096^3 kernel, bias+relu
# and bias+gelu -> f16 (torch eager beside it), their floors; then the default's variants.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
D=.devrun/r19a
B="python3 -m mmaflow.runtime.bench --driver cuda"
START=$(date +%s)
for d in noepi0 noepi2 noepi1 noepi3; do
  timeout 60 $B --from-dir $D/$d --out /tmp/o/$d --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "kernel-only|rror|trap" $OUT/$d.log | grep -v "f32 out\|iree-default" | head -3
done
for d in v0 v2 v1 v3 v0; do
  timeout 100 $B --from-dir $D/$d --out /tmp/o/$d --time-checks 20 --kernel-time > $OUT/$d.log 2>&1; echo "$d rc $?"
  grep -E "^check|rror|trap" $OUT/$d.log | sed 's/max |err| \/ tolerance.*outside tolerance//' | head -4
done
echo "elapsed $(( $(date +%s) - START )) s"
timeout 150 $B --from-dir $D/vall --out /tmp/o/vall --time-checks 20 --kernel-time > $OUT/vall.log 2>&1; echo "vall rc $?"
grep -E "^check|rror" $OUT/vall.log | sed 's/max |err| \/ tolerance.*outside tolerance//' | head -9
echo "elapsed $(( $(date +%s) - START )) s"
