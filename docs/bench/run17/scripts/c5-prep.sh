#!/bin/bash
# Run 17 call 5 preparation: the default and the ping-pong 4096^3 kernels (as call 1's).
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
P="--config intrinsic=WGMMA_F32_64x256x16_F16 --config tile_m=64 --config producer=1 --config copy=tma-wide --config pingpong=1"
rm -rf .devrun/r17e && mkdir -p .devrun/r17e
$M --sizes 4096 --prepare-only .devrun/r17e/def &
$M --sizes 4096 $P --config persistent=8 --config raster=8 --prepare-only .devrun/r17e/pp &
wait
