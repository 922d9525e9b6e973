#!/bin/bash
# Run 15 call 10: the SM clock and power while 8192^3 runs back to back for 4 s (clocks.py), the
# default (persistent cp.async ring, .devrun/r15/d8 of c7-prep.sh) against the warp-specialized
# kernel (w8), twice each, nvidia-smi sampling every 50 ms.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 50 > $OUT/smi.csv &
S=$!
sleep 1
for d in d8 w8 d8 w8; do
  python3 docs/bench/run15/scripts/clocks.py .devrun/r15/$d mmaflow_sm_90a_8192.vmfb 8192 4 >> $OUT/windows.jsonl 2> $OUT/err-$d.txt; echo "$d rc $?"
  sleep 2
done
kill $S
cat $OUT/windows.jsonl; wc -l $OUT/smi.csv; head -3 $OUT/smi.csv
