#!/bin/bash
# Run 21 call 6 preparation (at 74b3e48): run 20's ping-pong kernel (pingpong.patch applied, then reverted; 6 slots, its best)
# and the default, f32 out and bias+gelu -> f16 at 4096^3, for Nsight Compute's full set: why GELU's arithmetic
# beside the other warpgroup's wgmmas is not hidden
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/r21c6
rm -rf $D && mkdir -p $D
X="nice .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants"
$X --prepare-only $D/def > /dev/null 2>&1
git apply docs/bench/run20/scripts/pingpong.patch
trap 'git apply -R docs/bench/run20/scripts/pingpong.patch' EXIT
$X --config intrinsic=WGMMA_F32_64x128x16_F16 --config pingpong=1 --config raster=8 --config stages=6 --prepare-only $D/pp6 > /dev/null 2>&1
for d in def pp6; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3", "bias+gelu -> f16 4096^3")
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
assert len(m["checks"]) == len(keep)
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
