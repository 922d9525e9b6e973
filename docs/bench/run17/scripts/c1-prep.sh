#!/bin/bash
# Run 17 call 1 preparation: ping-pong MMA warpgroups (64x256 tiles each, in turn) against the default
# at 4096^3 and 8192^3, 4 and 5 slots, and the 4096-class variants with ping-pong.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run17/scripts/exp.py bench --target sm_90a"
P="--config intrinsic=WGMMA_F32_64x256x16_F16 --config tile_m=64 --config producer=1 --config copy=tma-wide --config pingpong=1"
rm -rf .devrun/r17 && mkdir -p .devrun/r17
$M --sizes 4096,8192 --prepare-only .devrun/r17/def &
$M --sizes 4096 $P --config persistent=8 --config raster=8 --prepare-only .devrun/r17/pp4096 &
MMAFLOW_EXP_STAGES5=1 $M --sizes 4096 $P --config persistent=8 --config raster=8 --config stages=5 --prepare-only .devrun/r17/pp4096s5 &
$M --sizes 8192 $P --config persistent=32 --config raster=8 --prepare-only .devrun/r17/pp8192 &
MMAFLOW_EXP_STAGES5=1 $M --sizes 8192 $P --config persistent=32 --config raster=8 --config stages=5 --prepare-only .devrun/r17/pp8192s5 &
wait
$M --variants $P --config persistent=8 --config raster=8 --prepare-only .devrun/r17/vpp8
MMAFLOW_EXP_STAGES5=1 $M --variants $P --config persistent=8 --config raster=8 --config stages=5 --prepare-only .devrun/r17/vpp8s5
for d in pp4096 pp4096s5 pp8192 pp8192s5; do
python3 - .devrun/r17/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
