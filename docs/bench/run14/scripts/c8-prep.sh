#!/bin/bash
# Run 14 call 8 preparation (the persistent grid on partial tiles of the warp-specialized ring; manifests then without IREE's default).
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
$M --sizes 4000,4096 --dtype f8E4M3FN --prepare-only .devrun/w5/e4un
$M --sizes 4000 --dtype f8E4M3FN --config producer=1 --config persistent=0 --prepare-only .devrun/w5/e4unnp
$M --sizes 4000 --config producer=1 --prepare-only .devrun/w5/f16un
