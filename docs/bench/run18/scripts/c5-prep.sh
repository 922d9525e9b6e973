#!/bin/bash
# Run 18 call 5 preparation: f32 outputs through lane pairs too (PAIR32: each lane stores 4
# contiguous f32, 16 bytes) against the default (8-byte runs), 4096^3 and 8192^3 and the variants.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a"
D=.devrun/r18e
rm -rf $D && mkdir -p $D
$M --sizes 4096,8192 --prepare-only $D/def
MMAFLOW_EXP_PAIR32=1 $M --sizes 4096,8192 --prepare-only $D/pair32
MMAFLOW_EXP_NOEPI=1 $M --sizes 4096 --prepare-only $D/noepi
$M --variants --prepare-only $D/vdef
MMAFLOW_EXP_PAIR32=1 $M --variants --prepare-only $D/vpair32
for d in pair32 noepi; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
for d in vdef vpair32; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["checks"] = [c for c in m["checks"] if not c["name"].startswith("dynamic")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
