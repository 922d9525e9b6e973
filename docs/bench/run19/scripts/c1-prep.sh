#!/bin/bash
# Run 19 call 1 preparation (H100): the current default's H100 figures (sizes, variants with torch
# eager), and the staggered MMA warpgroups (exp.py STAGGER=D: the second warpgroup starts D K tiles
# behind the first) on the static 4096^3 kernel and the fused bias+gelu -> f16 one, with floors.
set -e
# stagger.patch (TmaRing._stagger, not landed) on 29fdbfa: git apply docs/bench/run19/scripts/stagger.patch
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run19/scripts/exp.py bench --target sm_90a"
D=.devrun/r19a
rm -rf $D && mkdir -p $D
$M --sizes 1024,2048,4096,8192 --prepare-only $D/sizes
$M --variants --prepare-only $D/vall
for s in 0 1 2 3; do
  MMAFLOW_EXP_STAGGER=$s $M --variants --prepare-only $D/v$s
  MMAFLOW_EXP_STAGGER=$s MMAFLOW_EXP_NOEPI=1 $M --sizes 4096 --prepare-only $D/noepi$s
done
for d in noepi0 noepi1 noepi2 noepi3; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
for d in v0 v1 v2 v3; do  # the static kernel, bias+relu and bias+gelu only
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["checks"] = [c for c in m["checks"] if c["name"] in ("static 4096^3", "bias+relu -> f16 4096^3", "bias+gelu -> f16 4096^3")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
du -sh $D
