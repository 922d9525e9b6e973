#!/bin/bash
# Run 15 call 8 preparation: 3072^3 (3 tiles per workgroup), the new default (warp-specialized)
# against the persistent cp.async ring (producer=0). Manifests then drop IREE's default.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a --sizes 3072"
$M --prepare-only .devrun/r15/n3072 &
$M --config producer=0 --prepare-only .devrun/r15/c3072 &
$M --dtype bf16 --prepare-only .devrun/r15/bn3072 &
$M --dtype bf16 --config producer=0 --prepare-only .devrun/r15/bc3072 &
wait
for d in n3072 c3072 bn3072 bc3072; do
python3 - .devrun/r15/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
