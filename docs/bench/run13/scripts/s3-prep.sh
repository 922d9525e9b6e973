#!/bin/bash
# Session 3 call 3 preparation: fp8 (e4m3) with one-warpgroup 64x128 tiles (2-3 blocks per SM, whose
# promotion phases are not held together by a shared barrier) vs the default 128x128.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a --dtype e4m3 --sizes 4096,8192"
$M --prepare-only .devrun/s3/def &
$M --config tile_m=64 --config stages=4 --prepare-only .devrun/s3/m64s4 &
$M --config tile_m=64 --config stages=2 --prepare-only .devrun/s3/m64s2 &
$M --config tile_m=64 --config stages=3 --prepare-only .devrun/s3/m64s3 &
wait
