#!/bin/bash
# Run 16 call 1 preparation: the warp-specialized persistent kernel in clusters of 2 (cluster=2:
# B's K tiles shared by TMA multicast) against the default, 4096^3 f16, and the variants with it.
# The kernel then released the peer's slot at .release.cluster; the landed one uses the default
# scope (.cta): to rebuild call 1's kernels, run `python3 docs/bench/run16/scripts/exp.py bench ...`
# with MMAFLOW_EXP_SCOPE=cluster instead of `mmaflow bench`.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M=".venv/bin/mmaflow bench --target sm_90a"
C="--config intrinsic=WGMMA_F32_64x256x16_F16 --config producer=1 --config copy=tma-wide --config persistent=4 --config cluster=2"
$M --sizes 4096 --prepare-only .devrun/r16/def &
$M --sizes 4096 $C --config raster=8 --prepare-only .devrun/r16/cl2r8 &
$M --sizes 4096 $C --config raster=4 --prepare-only .devrun/r16/cl2r4 &
wait
$M --variants $C --config raster=8 --prepare-only .devrun/r16/vcl
for d in cl2r8 cl2r4; do
python3 - .devrun/r16/$d/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["entries"] = [e for e in m["entries"] if e["variant"] != "iree-default"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
done
