#!/bin/bash
# Run 21 call 5 preparation (tile256.patch of run 20 applied, then reverted): the 256x128 kernel with run 20's
# register split (MMAFLOW_EXP_SMSPLIT=1: 4 x 112 + 40 per thread in a 640 x 96 pool), which hangs in its .inc
# on the device: the DeviceFault path of `python -m mmaflow.runtime.bench` on a real fault
set -e
export MMAFLOW_CODEGEN_SERVER=0
D=.devrun/pp/r21c5
rm -rf $D && mkdir -p $D
git apply docs/bench/run20/scripts/tile256.patch
trap 'git apply -R docs/bench/run20/scripts/tile256.patch' EXIT
P="--config intrinsic=WGMMA_F32_64x128x16_F16 --config tile_m=256 --config producer=1 --config copy=tma-wide --config persistent=4 --config raster=8"
MMAFLOW_EXP_SMSPLIT=1 nice .venv/bin/python docs/bench/run21/scripts/exp.py bench --target sm_90a --variants $P --prepare-only $D/fault > /dev/null 2>&1
python3 - $D/fault/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["checks"] = [c for c in m["checks"] if c["name"] == "static 4096^3"]
assert len(m["checks"]) == 1
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
grep -a -o "setmaxnreg.inc.sync.aligned.u32[^;]*" $D/fault/*.vmfb | sort | uniq -c
