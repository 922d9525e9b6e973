#!/bin/bash
# Run 14 call 1 preparation: the warp-specialized kernel (producer=1) against the defaults.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a --sizes 4096,8192"
$M --prepare-only .devrun/w1/def > /tmp/ws/p1.log 2>&1 &
$M --config producer=1 --prepare-only .devrun/w1/ws > /tmp/ws/p2.log 2>&1 &
wait
$M --config producer=1 --config copy=tma-wide --prepare-only .devrun/w1/wsw > /tmp/ws/p3.log 2>&1 &
$M --dtype f8E4M3FN --config producer=1 --prepare-only .devrun/w1/e4ws > /tmp/ws/p4.log 2>&1 &
wait
$M --dtype f8E4M3FN --prepare-only .devrun/w1/e4def > /tmp/ws/p5.log 2>&1 &
$M --dtype bf16 --config producer=1 --prepare-only .devrun/w1/bfws > /tmp/ws/p6.log 2>&1 &
wait
