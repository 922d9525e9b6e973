#!/bin/bash
# Run 20 call 1 preparation (with pingpong.patch applied to d8f93b9): the default, ping-pong with 7 and 6 slots,
# with clusters, and the floors (NOEPI) of the default and of 7-slot ping-pong; static and bias+gelu 4096^3 only
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/c1
rm -rf $D && mkdir -p $D
P="--config intrinsic=WGMMA_F32_64x128x16_F16 --config pingpong=1 --config raster=8"
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants --prepare-only $D/def > /dev/null 2>&1
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --prepare-only $D/pp7 > /dev/null 2>&1
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config stages=6 --prepare-only $D/pp6 > /dev/null 2>&1
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config stages=6 --config cluster=2 --config raster=4 --prepare-only $D/pp6c > /dev/null 2>&1
MMAFLOW_EXP_NOEPI=1 .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --prepare-only $D/pp7floor > /dev/null 2>&1
MMAFLOW_EXP_NOEPI=1 .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants --prepare-only $D/deffloor > /dev/null 2>&1
for d in def pp7 pp6 pp6c pp7floor deffloor; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3", "bias+gelu -> f16 4096^3") if "floor" not in sys.argv[1] else ("static 4096^3",)
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
du -sh $D/*
