#!/bin/bash
# Run 14 calls 2-5 preparation (call 2 ran all of them and was cut at 600 s; calls 3-5 re-ran them in parts with DIRS=... T=... c3-5-go.sh; e4big / e4cpbig are e4def / e4cp with the 1024/2048 entries removed from the manifest). The e4def build was made before FP8_PRODUCER_TILE_M (its 1024 and 2048 entries are warp-specialized).
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
$M --sizes 4096,8192 --prepare-only .devrun/w2/def > /tmp/ws/q1.log 2>&1 &
$M --sizes 4096,8192 --config producer=1 --config copy=tma-wide --prepare-only .devrun/w2/wsp > /tmp/ws/q2.log 2>&1 &
wait
$M --sizes 1024,2048,4096,8192 --dtype f8E4M3FN --prepare-only .devrun/w2/e4def > /tmp/ws/q3.log 2>&1 &
$M --sizes 4096,8192 --dtype f8E4M3FN --config producer=1 --config persistent=0 --prepare-only .devrun/w2/e4wsnp > /tmp/ws/q4.log 2>&1 &
wait
$M --sizes 1024,2048,4096,8192 --dtype f8E4M3FN --config producer=0 --prepare-only .devrun/w2/e4cp > /tmp/ws/q5.log 2>&1 &
$M --sizes 4096,8192 --dtype bf16 --prepare-only .devrun/w2/bfdef > /tmp/ws/q6.log 2>&1 &
$M --sizes 4096,8192 --dtype bf16 --config producer=1 --config copy=tma-wide --prepare-only .devrun/w2/bfwsp > /tmp/ws/q7.log 2>&1 &
wait
