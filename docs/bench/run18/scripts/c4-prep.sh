#!/bin/bash
# Run 18 call 4 preparation (after the 8-byte lane-pair stores): the default kernel's f16-out epilogues from the cast alone to bias+gelu
# (decompose.py), and the floor (NOEPI) in the same call.
set -e
export MMAFLOW_CODEGEN_SERVER=0
rm -rf .devrun/r18d && mkdir -p .devrun/r18d
.venv/bin/python docs/bench/run18/scripts/decompose.py bench --target sm_90a --variants --prepare-only .devrun/r18d/v
MMAFLOW_EXP_NOEPI=1 .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --sizes 4096 --prepare-only .devrun/r18d/noepi
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants --prepare-only .devrun/r18d/vdef
python3 - .devrun/r18d/vdef/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["checks"] = [c for c in m["checks"] if not c["name"].startswith("dynamic")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
