#!/bin/bash
# Run 21 call 3 preparation (tmastore.patch applied to ff737c6 here and reverted at exit): the default kernel
# against the same kernel with MMAFLOW_EXP_TMASTORE=1 (the epilogue through shared memory and TMA stores), 4096^3
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/r21c3
rm -rf $D && mkdir -p $D
git apply docs/bench/run21/scripts/tmastore.patch
trap 'git apply -R docs/bench/run21/scripts/tmastore.patch' EXIT
X="nice .venv/bin/python docs/bench/run21/scripts/exp.py bench --target sm_90a --variants"
$X --prepare-only $D/def > /dev/null 2>&1
MMAFLOW_EXP_TMASTORE=1 $X --prepare-only $D/tmastore > $D/tmastore.prep.log 2>&1
for d in def tmastore; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3", "bias+gelu -> f16 4096^3", "bias+relu -> f16 4096^3")
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
assert len(m["checks"]) == len(keep), [c["name"] for c in m["checks"]]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
