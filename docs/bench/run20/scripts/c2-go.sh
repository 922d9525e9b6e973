#!/bin/bash
# Run 20 call 2 (H100): SM cycles and clocks of call 1's builds under ncu, clocks unlocked and locked (base)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
D=.devrun/pp/c1
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second
for d in def pp7 deffloor pp7floor; do
  for cc in none base; do
    timeout 120 ncu --metrics $M --clock-control $cc --cache-control none --csv python3 -m mmaflow.runtime.bench --driver cuda --from-dir $D/$d --out /tmp/o/$d --time-checks 5 > /tmp/$d-$cc.csv 2>/dev/null; echo "== $d clocks $cc rc $?"
    python3 .devrun/pp/clk.py /tmp/$d-$cc.csv | grep -v -i "reduce\|fill\|elementwise_kernel\|distribution\|copy" | cut -c1-400
  done
done
