#!/bin/bash
# Session 3 device call 2: TMA ring with empty mbarriers (no barrier per K tile) vs 547bb47's TMA ring vs cp.async.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
for d in def tmanew tmaold; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/s2/$d --out /tmp/o/$d --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL"
done
for d in varnew varold; do
  echo "=== $d"; timeout 100 $B --from-dir .devrun/s2/$d --out /tmp/o/$d --time-checks 20 --kernel-time 2>&1 | grep -E "^check|rror"
done
cd /tmp/o && tar czf $OUT/s2.tgz .
