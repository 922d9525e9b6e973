#!/bin/bash
# Run 18 call 3 preparation: the default kernel's f16-out epilogues from the cast alone to bias+gelu
# (decompose.py), and the floor (NOEPI) in the same call.
set -e
export MMAFLOW_CODEGEN_SERVER=0
rm -rf .devrun/r18c && mkdir -p .devrun/r18c
.venv/bin/python docs/bench/run18/scripts/decompose.py bench --target sm_90a --variants --prepare-only .devrun/r18c/v
MMAFLOW_EXP_NOEPI=1 .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --sizes 4096 --prepare-only .devrun/r18c/noepi
