#!/bin/bash
# Run 15 call 3 preparation (then bunws drops IREE's default): every matmul variant through the default (persistent cp.async ring)
# and the warp-specialized persistent kernel, in one call; bf16 4000^3 likewise.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
W="--config producer=1 --config copy=tma-wide"
$M --variants --prepare-only .devrun/r15/vdef &
$M --variants $W --prepare-only .devrun/r15/vws &
wait
$M --sizes 4000 --dtype bf16 --prepare-only .devrun/r15/bun &
$M --sizes 4000 --dtype bf16 $W --prepare-only .devrun/r15/bunws &
wait
