#!/bin/bash
# Run 20 call 4 preparation (with tile256.patch applied: wgmma_plan.TILE_M admits 256): 256x128 tiles, four
# MMA warpgroups of m64n128 (cuBLAS's tile shape), warp-specialized, persistent 4
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/c4
rm -rf $D && mkdir -p $D
P="--config intrinsic=WGMMA_F32_64x128x16_F16 --config tile_m=256 --config producer=1 --config copy=tma-wide --config persistent=4"
nice .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config raster=8 --prepare-only $D/t256 > /dev/null 2>&1
nice .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config raster=4 --config cluster=2 --prepare-only $D/t256c > /dev/null 2>&1
MMAFLOW_EXP_NOEPI=1 nice .venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a --variants $P --config raster=8 --prepare-only $D/t256floor > /dev/null 2>&1
cp -r .devrun/pp/c3/def $D/def
for d in t256 t256c t256floor; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3", "bias+gelu -> f16 4096^3", "bias+relu -> f16 4096^3") if "floor" not in sys.argv[1] else ("static 4096^3",)
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
