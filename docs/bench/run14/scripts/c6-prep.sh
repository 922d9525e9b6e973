#!/bin/bash
# Run 14 call 6 preparation (then the manifests of varws/vardef were cut to "static 4096^3" and
# "bias+gelu -> f16 4096^3"; see BENCHMARKS.md run 14).
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
$M --sizes 1024,2048 --dtype f8E4M3FN --config producer=0 --prepare-only .devrun/w3/e4cps &
$M --sizes 1024,2048,4096 --dtype f8E4M3FN --prepare-only .devrun/w3/e4defs &
wait
$M --variants --config producer=1 --config copy=tma-wide --prepare-only .devrun/w3/varws &
$M --variants --prepare-only .devrun/w3/vardef &
wait
