#!/bin/bash
# Run 19 call 5 (H100): fast_math's erf pieces with the hardware ex2.approx (erf_sweep.py's .cu,
# built here with nvcc, or the binary built from it on the preparing machine).
nvidia-smi --query-gpu=name --format=csv,noheader
if command -v nvcc >/dev/null; then nvcc -O3 -arch=sm_90a -o /tmp/s .devrun/erf_sweep.cu && S=/tmp/s; else S=.devrun/erf_sweep.bin; fi
echo "sweep: $S"; $S | tee $OUT/erf_sweep.txt
