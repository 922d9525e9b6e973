#!/bin/bash
# Run 20 call 3 preparation (pingpong.patch applied to d8f93b9): ping-pong with 4, 5, 6 slots, and floors
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/c3
rm -rf $D && mkdir -p $D
P="--config intrinsic=WGMMA_F32_64x128x16_F16 --config pingpong=1 --config raster=8"
for s in 4 5 6; do
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config stages=$s --prepare-only $D/pp$s > /dev/null 2>&1
done
MMAFLOW_EXP_NOEPI=1 .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config stages=6 --prepare-only $D/pp6floor > /dev/null 2>&1
MMAFLOW_EXP_NOEPI=1 .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config stages=4 --prepare-only $D/pp4floor > /dev/null 2>&1
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants --prepare-only $D/def > /dev/null 2>&1
for d in pp4 pp5 pp6 pp6floor pp4floor def; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3", "bias+gelu -> f16 4096^3") if "floor" not in sys.argv[1] else ("static 4096^3",)
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
