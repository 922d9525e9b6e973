#!/bin/bash
# Run 15 call 1 preparation: the f16 default at 4096^3 and the variants (then the manifest of var
# was cut to "static 4096^3" and "bias+gelu -> f16 4096^3", so --profile-check 1 is bias+gelu).
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
$M --sizes 4096 --prepare-only .devrun/r15/def &
$M --variants --prepare-only .devrun/r15/var &
wait
