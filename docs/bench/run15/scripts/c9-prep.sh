#!/bin/bash
# Run 15 call 9 preparation (an experiment, not landed: a local patch in WgmmaRewriter.run put
# MMAFLOW_EXP_CLUSTER's attribute, nvvm.cluster_dim = array<i32: 2, 1, 1>, on the dispatch function;
# IREE 3.13 lowers it to ".explicitcluster .reqnctapercluster 2, 1, 1"): does IREE's CUDA launch
# run a kernel with a compile-time cluster shape, and what does the shape cost by itself?
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a --sizes 4096"
$M --prepare-only .devrun/r15/cl0 &
MMAFLOW_EXP_CLUSTER="array<i32: 2, 1, 1>" $M --prepare-only .devrun/r15/cl2 &
wait
python3 - .devrun/r15/cl2/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
