#!/bin/bash
# Run 17 call 4 preparation: two accumulator chains per warpgroup (SPLITN: each m64n256k16 as two
# m64n128k16 into the accumulator's halves), in the default kernel and in ping-pong; the variants.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run17/scripts/exp.py bench --target sm_90a"
P="--config intrinsic=WGMMA_F32_64x256x16_F16 --config tile_m=64 --config producer=1 --config copy=tma-wide --config pingpong=1"
rm -rf .devrun/r17d && mkdir -p .devrun/r17d
$M --sizes 4096 --prepare-only .devrun/r17d/def &
MMAFLOW_EXP_SPLITN=1 $M --sizes 4096 --prepare-only .devrun/r17d/split &  # (8192: the cp.async ring, whose verify counts wgmmas per barrier)
MMAFLOW_EXP_SPLITN=1 $M --sizes 4096 $P --config persistent=8 --config raster=8 --prepare-only .devrun/r17d/ppsplit &
MMAFLOW_EXP_SPLITN=1 $M --sizes 8192 $P --config persistent=32 --config raster=8 --prepare-only .devrun/r17d/ppsplit8192 &
wait
MMAFLOW_EXP_SPLITN=1 $M --variants $P --config persistent=8 --config raster=8 --prepare-only .devrun/r17d/vppsplit &
MMAFLOW_EXP_SPLITN=1 $M --variants --config intrinsic=WGMMA_F32_64x256x16_F16 --config producer=1 --config copy=tma-wide --config persistent=4 --config raster=8 --prepare-only .devrun/r17d/vsplit &  # (the default kernel at 4096^3, as configured by the heuristic)
wait
for d in split ppsplit ppsplit8192; do
python3 - .devrun/r17d/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
