#!/bin/bash
# Run 16 call 3 preparation: clusters of 2 (remote release at the default .cta scope, as landed)
# against the default at 6144^3 and 8192^3, and the variants with clusters of 2 at 4096^3.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
C="--config intrinsic=WGMMA_F32_64x256x16_F16 --config producer=1 --config copy=tma-wide --config cluster=2"
$M --sizes 6144,8192 --prepare-only .devrun/r16/def2 &
$M --sizes 6144 $C --config persistent=9 --config raster=4 --prepare-only .devrun/r16/cl6144 &
$M --sizes 8192 $C --config persistent=16 --config raster=4 --prepare-only .devrun/r16/cl8192 &
$M --sizes 8192 $C --config persistent=16 --config raster=8 --prepare-only .devrun/r16/cl8192r8 &
wait
$M --variants $C --config persistent=4 --config raster=4 --prepare-only .devrun/r16/vcl4
for d in cl6144 cl8192 cl8192r8; do
python3 - .devrun/r16/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
