#!/bin/bash
# Run 19 call 2 (H100): the model corpus at 29fdbfa (lane-pair stores, the warp-specialized
# default) against torch's float32 CPU reference and torch eager; then the sizes, kernel-only,
# against IREE's default and torch.matmul. Prepared by c2-prep.sh.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o $OUT/models
START=$(date +%s)
timeout 330 python3 -m mmaflow.runtime.model_bench --from-dir .devrun/r19m --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"
tail -40 $OUT/models.log
echo "elapsed $(( $(date +%s) - START )) s"
timeout 200 python3 -m mmaflow.runtime.bench --driver cuda --from-dir .devrun/r19a/sizes --out /tmp/o/sizes --kernel-time > $OUT/sizes.log 2>&1; echo "sizes rc $?"
grep -E "kernel-only|rror" $OUT/sizes.log
echo "elapsed $(( $(date +%s) - START )) s"
