#!/bin/bash
# Run 18 call 2 preparation: the default 128x256 kernel's floor (NOEPI) with 2, 3 and 4 slots: how
# much ring a shared-memory staging buffer for the epilogue (f32: 128 KB, f16: 64 KB) may take.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/python docs/bench/run18/scripts/exp.py bench --target sm_90a"
C="--config intrinsic=WGMMA_F32_64x256x16_F16 --config producer=1 --config copy=tma-wide --config persistent=4 --config raster=8"
D=.devrun/r18b
rm -rf $D && mkdir -p $D
for s in 2 3 4; do
  MMAFLOW_EXP_NOEPI=1 $M --sizes 4096 $C --config stages=$s --prepare-only $D/noepi$s
  $M --sizes 4096 $C --config stages=$s --prepare-only $D/s$s
done
for d in noepi2 noepi3 noepi4 s2 s3 s4; do
python3 - $D/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
