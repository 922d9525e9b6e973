#!/bin/bash
# Run 19 call 7 preparation: the --checks epilogue cases (erf_scaled, added after the review: the
# two-piece erf no GELU takes any more) on sm_90a and sm_80.
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/r19f
rm -rf $D && mkdir -p $D
for t in sm_90a sm_80; do
  .venv/bin/mmaflow bench --target $t --checks --prepare-only $D/$t
  python3 - $D/$t/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["checks"] = [c for c in m["checks"] if c["name"].startswith("epilogue")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
