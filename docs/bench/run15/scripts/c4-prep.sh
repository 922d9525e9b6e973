#!/bin/bash
# Run 15 call 4 preparation: where the warp-specialized persistent kernel beats the f16/bf16
# default (the persistent cp.async ring) across sizes, in one call. Manifests then drop IREE's default.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
W="--config producer=1 --config copy=tma-wide"
$M --sizes 2048,6144,8192 --prepare-only .devrun/r15/f16def &
$M --sizes 2048,6144,8192 $W --prepare-only .devrun/r15/f16ws &
wait
$M --sizes 4096,8192 --dtype bf16 --prepare-only .devrun/r15/bfdef &
$M --sizes 4096,8192 --dtype bf16 $W --prepare-only .devrun/r15/bfws &
wait
