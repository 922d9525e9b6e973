#!/bin/bash
# Run 21 call 2 preparation (at 04b0a03): the default kernel, its floor (no epilogue: run 17's NOEPI),
# and its epilogues without their stores (NOSTORE: the arithmetic runs, no store does), 4096^3
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/r21c2
rm -rf $D && mkdir -p $D
X="nice .venv/bin/python docs/bench/run21/scripts/exp.py bench --target sm_90a --variants"
$X --prepare-only $D/def > /dev/null 2>&1
MMAFLOW_EXP_NOEPI=1 $X --prepare-only $D/floor > /dev/null 2>&1
MMAFLOW_EXP_NOSTORE=1 $X --prepare-only $D/nostore > /dev/null 2>&1
for d in def floor nostore; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3",) if "floor" in sys.argv[1] else ("static 4096^3", "bias+gelu -> f16 4096^3", "bias+relu -> f16 4096^3")
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
assert len(m["checks"]) == len(keep), [c["name"] for c in m["checks"]]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
