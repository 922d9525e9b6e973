#!/bin/bash
# Run 20 call 1 (H100): c1-prep.sh's builds, alternated, kernel-only, torch eager beside the gelu case
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/o
D=.devrun/pp/c1
B="python3 -m mmaflow.runtime.bench --driver cuda"
i=0
for d in def pp7 pp6 pp6c pp7floor deffloor def pp7; do
  i=$((i+1))
  timeout 150 $B --from-dir $D/$d --out /tmp/o/$d$i --time-checks 20 --kernel-time > /tmp/o/$d$i.log 2>&1; echo "== $d rc $?"
  grep -E "^check|rror|trap|kernel|torch" /tmp/o/$d$i.log | cut -c1-250 | head -8
done
tar czf $OUT/logs.tgz -C /tmp/o .
