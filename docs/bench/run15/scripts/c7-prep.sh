#!/bin/bash
# Run 15 call 7 preparation: why the warp-specialized kernel loses at 8192^3 (16 tiles per
# workgroup): the default (persistent cp.async ring) and the warp-specialized kernel with groups of
# 8 (as the default), 4 and 16 tile rows. Manifests then drop IREE's default.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a --sizes 8192"
W="--config intrinsic=WGMMA_F32_64x256x16_F16 --config producer=1 --config copy=tma-wide --config persistent=16"
$M --prepare-only .devrun/r15/d8 &
$M $W --config raster=8 --prepare-only .devrun/r15/w8 &
wait
$M $W --config raster=4 --prepare-only .devrun/r15/w8r4 &
$M $W --config raster=16 --prepare-only .devrun/r15/w8r16 &
wait
for d in d8 w8 w8r4 w8r16; do
python3 - .devrun/r15/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
