#!/bin/bash
# Run 16 call 4: kernel duration under Nsight Compute's locked (base) clocks and at the GPU's own
# clocks, same call: the 4096^3 f16 default (warp-specialized), clusters of 2 (call 2's e1 build,
# the landed kernel) and cuBLAS (torch.matmul, f16 out). Is the gap to cuBLAS cycles or clocks?
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
cat > /tmp/tm.py <<'PY'
import torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16); b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
for _ in range(8):
    c = a @ b
torch.cuda.synchronize()
PY
for cc in base none; do
  for d in def e1; do
    timeout 120 ncu --clock-control $cc --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__throughput.avg.pct_of_peak_sustained_elapsed --kernel-name regex:matmul --launch-skip 1 --launch-count 3 python3 -m mmaflow.runtime.bench --from-dir .devrun/r16/$d --driver cuda --out - --profile-one mmaflow_sm_90a_4096.vmfb 4096 > $OUT/ncu-$cc-$d.txt 2>&1; echo "$cc $d rc $?"
    grep -E "gpu__time_duration|sm__cycles_elapsed" $OUT/ncu-$cc-$d.txt | head -6
  done
  timeout 120 ncu --clock-control $cc --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__throughput.avg.pct_of_peak_sustained_elapsed --kernel-name regex:nvjet --launch-skip 2 --launch-count 3 python3 /tmp/tm.py > $OUT/ncu-$cc-cublas.txt 2>&1; echo "$cc cublas rc $?"
  grep -E "nvjet|gpu__time_duration|sm__cycles_elapsed" $OUT/ncu-$cc-cublas.txt | head -9
done
