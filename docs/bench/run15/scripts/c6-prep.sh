#!/bin/bash
# Run 15 call 6 preparation (an experiment, not landed: a local patch in _roles_outside that puts
# `nanosleep.u32 NS` before the second MMA warpgroup's tile loop when MMAFLOW_EXP_STAGGER=NS):
# does a second MMA warpgroup that runs a few K tiles behind the first overlap one's epilogue with
# the other's wgmmas? The variants, cut to static 4096^3 and bias+gelu -> f16.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a --variants"
$M --prepare-only .devrun/r15/s0 &
MMAFLOW_EXP_STAGGER=1000 $M --prepare-only .devrun/r15/s1000 &
wait
MMAFLOW_EXP_STAGGER=2500 $M --prepare-only .devrun/r15/s2500 &
MMAFLOW_EXP_STAGGER=6000 $M --prepare-only .devrun/r15/s6000 &
wait
for d in s0 s1000 s2500 s6000; do
python3 - .devrun/r15/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["checks"] = [m["checks"][0], m["checks"][4]]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
