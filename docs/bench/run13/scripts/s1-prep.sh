#!/bin/bash
# Session 3 call 1 preparation: tile shapes that let 2 CTAs share an SM (epilogue of one under the other's main loop).
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a --sizes 4096,8192"
W=WGMMA_F32_64x256x16_F16; N=WGMMA_F32_64x128x16_F16
$M --prepare-only .devrun/s1/def &
$M --config intrinsic=$N --config tile_m=128 --config stages=3 --prepare-only .devrun/s1/n128s3 &
$M --config intrinsic=$N --config tile_m=128 --config stages=3 --config raster=8 --prepare-only .devrun/s1/n128s3r8 &
wait
$M --config intrinsic=$N --config tile_m=128 --config stages=2 --config raster=8 --prepare-only .devrun/s1/n128s2r8 &
$M --config intrinsic=$W --config tile_m=64 --config stages=2 --config raster=8 --prepare-only .devrun/s1/w64s2r8 &
.venv/bin/mmaflow bench --target sm_90a --variants --config intrinsic=$N --config tile_m=128 --config stages=3 --config raster=8 --prepare-only .devrun/s1/var128 &
wait
