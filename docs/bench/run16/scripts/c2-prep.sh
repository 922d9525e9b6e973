#!/bin/bash
# Run 16 call 2 preparation (experiments through docs/bench/run16/scripts/exp.py, TmaRing hooks, not landed): clusters
# of 2 at 4096^3 with the remote release at the instruction's default scope (.cta, as CUTLASS's
# ClusterBarrier::arrive) instead of .cluster (e1), and also without try_wait's suspend-time hint (e3).
set -e
export MMAFLOW_CODEGEN_SERVER=0
C="--target sm_90a --sizes 4096 --config intrinsic=WGMMA_F32_64x256x16_F16 --config producer=1 --config copy=tma-wide --config persistent=4 --config cluster=2 --config raster=4"
MMAFLOW_EXP_SCOPE= .venv/bin/python docs/bench/run16/scripts/exp.py bench $C --prepare-only .devrun/r16/e1
MMAFLOW_EXP_SCOPE= MMAFLOW_EXP_TICKS=0 .venv/bin/python docs/bench/run16/scripts/exp.py bench $C --prepare-only .devrun/r16/e3
