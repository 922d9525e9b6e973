#!/bin/bash
# Run 15 call 2 preparation: what a ping-pong kernel or a staged epilogue would stand on.
#  ws     the warp-specialized persistent kernel (2 MMA warpgroups, 128x256 tiles, 4 slots)
#  ws3    the same with 3 slots (room for a 64 KB epilogue buffer)
#  m64    one MMA warpgroup, 64x256 tiles (a ping-pong consumer's tile), 4 slots, persistent
# (then the manifests drop IREE's default)
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
W="--config producer=1 --config copy=tma-wide --config intrinsic=WGMMA_F32_64x256x16_F16 --config raster=8"
$M --sizes 4096,8192 --config producer=1 --config copy=tma-wide --prepare-only .devrun/r15/ws &
$M --sizes 4096 $W --config stages=3 --config persistent=4 --prepare-only .devrun/r15/ws3-4096 &
wait
$M --sizes 8192 $W --config stages=3 --config persistent=16 --prepare-only .devrun/r15/ws3-8192 &
$M --sizes 4096 $W --config tile_m=64 --config persistent=8 --prepare-only .devrun/r15/m64-4096 &
wait
$M --sizes 8192 $W --config tile_m=64 --config persistent=32 --prepare-only .devrun/r15/m64-8192 &
wait
