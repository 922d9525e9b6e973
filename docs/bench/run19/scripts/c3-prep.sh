#!/bin/bash
# Run 19 call 3 preparation: the bias+gelu -> f16 4096^3 variant (and the static kernel, unchanged
# by it) before (29fdbfa, from c2-prep.sh's worktree /tmp/wt) and after the one-piece 1 + erf (d6ca917).
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/r19c
rm -rf $D && mkdir -p $D
(cd /tmp/wt && PYTHONPATH=/tmp/wtpkg "$OLDPWD/.venv/bin/python" docs/bench/run18/scripts/exp.py bench --target sm_90a --variants --prepare-only "$OLDPWD/$D/before")
.venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants --prepare-only $D/after
for d in before after; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["checks"] = [c for c in m["checks"] if c["name"] in ("static 4096^3", "bias+gelu -> f16 4096^3")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
