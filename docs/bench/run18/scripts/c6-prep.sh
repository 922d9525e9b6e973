#!/bin/bash
# Run 18 call 6 preparation: the mma.sync kernel (--target sm_80 on the H200) with and without
# lane-pair stores (NOPAIRS: the stores as before run 18), f32 out and the f16-out variants.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_80"
D=.devrun/r18f
rm -rf $D && mkdir -p $D
$M --sizes 2048,4096 --prepare-only $D/pairs
MMAFLOW_EXP_NOPAIRS=1 $M --sizes 2048,4096 --prepare-only $D/nopairs
$M --variants --prepare-only $D/vpairs
MMAFLOW_EXP_NOPAIRS=1 $M --variants --prepare-only $D/vnopairs
python3 - $D/nopairs/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
for d in vpairs vnopairs; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["checks"] = [c for c in m["checks"] if c["name"] in ("static 4096^3", "bias+relu -> f16 4096^3", "bias+gelu -> f16 4096^3")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
