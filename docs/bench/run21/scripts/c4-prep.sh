#!/bin/bash
# Run 21 call 4 preparation (tmastore.patch applied to ff737c6 here and reverted at exit): the default kernel against the
# TMA-store epilogue in modes 2 (one box a phase, two alternating 8 KB buffers per warpgroup, wait_group.read 1)
# and 3 (a 3-slot ring, 32 KB per warpgroup: an f16 tile's 64 rows in one phase), 4096^3
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/r21c4
rm -rf $D && mkdir -p $D
git apply docs/bench/run21/scripts/tmastore.patch
trap 'git apply -R docs/bench/run21/scripts/tmastore.patch' EXIT
W="--config intrinsic=WGMMA_F32_64x256x16_F16 --config producer=1 --config copy=tma-wide --config persistent=4 --config raster=8 --config stages=3"
X="nice .venv/bin/python docs/bench/run21/scripts/exp.py bench --target sm_90a --variants"
$X --prepare-only $D/def > /dev/null 2>&1
$X $W --prepare-only $D/def3 > /dev/null 2>&1
MMAFLOW_EXP_TMASTORE=2 $X --prepare-only $D/tms2 > $D/tms2.prep.log 2>&1
MMAFLOW_EXP_TMASTORE=3 $X $W --prepare-only $D/tms3 > $D/tms3.prep.log 2>&1
for d in def def3 tms2 tms3; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = ("static 4096^3", "bias+gelu -> f16 4096^3", "bias+relu -> f16 4096^3")
m["checks"] = [c for c in m["checks"] if c["name"] in keep]
assert len(m["checks"]) == len(keep), [c["name"] for c in m["checks"]]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
