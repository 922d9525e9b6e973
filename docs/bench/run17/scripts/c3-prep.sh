#!/bin/bash
# Run 17 call 3 preparation: the default 4096^3 kernel without its epilogue (a floor: NOEPI), and
# ping-pong with two wgmma groups running (LAG2) in 4 and 5 slots.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run17/scripts/exp.py bench --target sm_90a"
P="--config intrinsic=WGMMA_F32_64x256x16_F16 --config tile_m=64 --config producer=1 --config copy=tma-wide --config pingpong=1"
rm -rf .devrun/r17c && mkdir -p .devrun/r17c
$M --sizes 4096 --prepare-only .devrun/r17c/def &
MMAFLOW_EXP_NOEPI=1 $M --sizes 4096,8192 --prepare-only .devrun/r17c/noepi &
MMAFLOW_EXP_LAG2=1 $M --sizes 4096 $P --config persistent=8 --config raster=8 --prepare-only .devrun/r17c/pplag2 &
MMAFLOW_EXP_LAG2=1 MMAFLOW_EXP_STAGES5=1 $M --sizes 4096 $P --config persistent=8 --config raster=8 --config stages=5 --prepare-only .devrun/r17c/pplag2s5 &
wait
for d in noepi pplag2 pplag2s5; do
python3 - .devrun/r17c/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
