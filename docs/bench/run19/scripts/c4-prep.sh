#!/bin/bash
# Run 19 call 4 preparation (at af082b6, the one-piece 1 + erf in): every --checks case on sm_90a
# and on sm_80 (numerics on the GPU against the float64 reference), and bf16 sizes kernel-only.
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/r19d
rm -rf $D && mkdir -p $D
.venv/bin/mmaflow bench --target sm_90a --checks --prepare-only $D/chk90
.venv/bin/mmaflow bench --target sm_80 --checks --prepare-only $D/chk80
.venv/bin/mmaflow bench --target sm_90a --dtype bf16 --sizes 1024,2048,4096,8192 --prepare-only $D/bf16
