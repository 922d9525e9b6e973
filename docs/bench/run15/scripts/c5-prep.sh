#!/bin/bash
# Run 15 call 5 preparation: the new f16/bf16 default (warp-specialized from 2 to 9 persistent tiles
# per workgroup), square sizes and the variants, with IREE's default in the first directory.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
$M --sizes 4096,6144,8192 --prepare-only .devrun/r15/new &
$M --variants --prepare-only .devrun/r15/vnew &
wait
