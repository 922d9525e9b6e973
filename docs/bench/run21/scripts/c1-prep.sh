#!/bin/bash
# Run 21 call 1 preparation (at 04b0a03, whose setmaxnreg split comes from the CTA's launch pool; run 20's
# tile256.patch applied here and reverted at exit: wgmma_plan.TILE_M admits 256): 256x128 tiles in four MMA
# warpgroups of m64n128 (cuBLAS's tile shape), warp-specialized, persistent 4, against the default
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/r21c1
rm -rf $D && mkdir -p $D
P="--config intrinsic=WGMMA_F32_64x128x16_F16 --config tile_m=256 --config producer=1 --config copy=tma-wide --config persistent=4"
X="nice .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants"
$X --prepare-only $D/def > /dev/null 2>&1
MMAFLOW_EXP_NOEPI=1 $X --prepare-only $D/deffloor > /dev/null 2>&1
git apply docs/bench/run20/scripts/tile256.patch
trap 'git apply -R docs/bench/run20/scripts/tile256.patch' EXIT
$X $P --config raster=8 --prepare-only $D/t256 > /dev/null 2>&1
$X $P --config raster=4 --config cluster=2 --prepare-only $D/t256c > /dev/null 2>&1
MMAFLOW_EXP_NOEPI=1 $X $P --config raster=8 --prepare-only $D/t256floor > /dev/null 2>&1
for d in def deffloor t256 t256c t256floor; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3",) if "floor" in sys.argv[1] else ("static 4096^3", "bias+gelu -> f16 4096^3", "bias+relu -> f16 4096^3")
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
assert len(m["checks"]) == len(keep), [c["name"] for c in m["checks"]]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
