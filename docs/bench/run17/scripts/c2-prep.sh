#!/bin/bash
# Run 17 call 2 preparation: ping-pong MMA warpgroups in clusters of 2 (B multicast: the 64x256
# tiles' L2 -> SM bytes per MMA back to the 128x256 kernel's), 4096^3 / 8192^3 and the variants.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run17/scripts/exp.py bench --target sm_90a"
P="--config intrinsic=WGMMA_F32_64x256x16_F16 --config tile_m=64 --config producer=1 --config copy=tma-wide --config pingpong=1 --config cluster=2"
rm -rf .devrun/r17b && mkdir -p .devrun/r17b
$M --sizes 4096,8192 --prepare-only .devrun/r17b/def &
$M --sizes 4096 $P --config persistent=8 --config raster=4 --prepare-only .devrun/r17b/ppc4096 &
$M --sizes 4096 $P --config persistent=8 --config raster=8 --prepare-only .devrun/r17b/ppc4096r8 &
$M --sizes 8192 $P --config persistent=32 --config raster=4 --prepare-only .devrun/r17b/ppc8192 &
wait
$M --variants $P --config persistent=8 --config raster=4 --prepare-only .devrun/r17b/vppc
for d in ppc4096 ppc4096r8 ppc8192; do
python3 - .devrun/r17b/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
