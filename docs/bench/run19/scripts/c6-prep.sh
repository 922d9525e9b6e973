#!/bin/bash
# Run 19 call 6 preparation: the default 4096^3 static (f32 out) and bias+gelu -> f16 kernels with
# the odd workgroups starting late (exp.py DESYNC=NS, not landed): do the grid's simultaneous
# stores of every SM cost the epilogue its time?
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/r19e
rm -rf $D && mkdir -p $D
for ns in 0 1500 3000 6000; do
  if [ $ns = 0 ]; then E=""; else E="MMAFLOW_EXP_DESYNC=$ns"; fi
  env $E .venv/bin/python docs/bench/run19/scripts/exp.py bench --target sm_90a --variants --prepare-only $D/d$ns
  python3 - $D/d$ns/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["checks"] = [c for c in m["checks"] if c["name"] in ("static 4096^3", "bias+gelu -> f16 4096^3")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
