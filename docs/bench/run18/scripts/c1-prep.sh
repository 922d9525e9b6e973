#!/bin/bash
# Run 18 call 1 preparation: how fast is the main loop with 128x128 tiles (two MMA warpgroups of
# 64x128, the producer warpgroup, persistent)? Its floor (NOEPI) against the default 128x256's, in
# 4 and 6 slots; the bias+gelu variant of each, with torch eager in the same run.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a"
C="--config intrinsic=WGMMA_F32_64x128x16_F16 --config tile=128x128x64 --config producer=1 --config copy=tma-wide --config raster=8"
D=.devrun/r18a
rm -rf $D && mkdir -p $D
$M --sizes 4096 --prepare-only $D/def
MMAFLOW_EXP_NOEPI=1 $M --sizes 4096 --prepare-only $D/noepi
$M --sizes 4096 $C --config persistent=8 --prepare-only $D/c128s4
$M --sizes 8192 $C --config persistent=32 --prepare-only $D/c128s4-8192
MMAFLOW_EXP_NOEPI=1 $M --sizes 4096 $C --config persistent=8 --prepare-only $D/c128s4noepi
MMAFLOW_EXP_STAGES=6 $M --sizes 4096 $C --config persistent=8 --config stages=6 --prepare-only $D/c128s6
MMAFLOW_EXP_STAGES=6 MMAFLOW_EXP_NOEPI=1 $M --sizes 4096 $C --config persistent=8 --config stages=6 --prepare-only $D/c128s6noepi
$M --variants --prepare-only $D/vdef
$M --variants $C --config persistent=8 --prepare-only $D/vc128s4
MMAFLOW_EXP_STAGES=6 $M --variants $C --config persistent=8 --config stages=6 --prepare-only $D/vc128s6
for d in noepi c128s4 c128s4-8192 c128s4noepi c128s6 c128s6noepi; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
for d in vdef vc128s4 vc128s6; do  # the static kernel and bias+gelu only
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["checks"] = [c for c in m["checks"] if c["name"] in ("static 4096^3", "bias+gelu -> f16 4096^3")]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
