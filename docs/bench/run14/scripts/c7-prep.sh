#!/bin/bash
# Run 14 call 7 preparation (manifests then without IREE's default).
set -e
export MMAFLOW_CODEGEN_SERVER=0
.venv/bin/mmaflow bench --target sm_90a --sizes 4000,4096 --dtype f8E4M3FN --prepare-only .devrun/w4/e4un
.venv/bin/mmaflow bench --target sm_90a --sizes 4000 --config producer=1 --prepare-only .devrun/w4/f16un
