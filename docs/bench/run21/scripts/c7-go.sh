#!/bin/bash
# Run 21 call 7 (H100): the warp stall reasons (ncu's sampled smsp__pcsamp_warps_issue_stalled_*) and the tensor
# pipe's active cycles of call 6's four kernels, one launch each (clocks locked at base)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
mkdir -p /tmp/o
D=.devrun/pp/r21c6
for d in def pp6; do
  for k in "f32:matmul_dispatch_0_matmul_4096" "gelu:matmul_like"; do
    n=${k%%:*}; r=${k#*:}
    timeout 240 ncu --section WarpStateStats --section SourceCounters --metrics "regex:sm__pipe_tensor.*cycles_active.avg$,regex:sm__inst_executed_pipe_.*sum$,sm__cycles_elapsed.avg" \
      -k regex:$r --launch-skip 3 --launch-count 1 --page raw --csv \
      python3 -m mmaflow.runtime.bench --driver cuda --from-dir $D/$d --out /tmp/o/$d$n --time-checks 3 > $OUT/$d-$n.csv 2>&1
    echo "== $d $n rc $?"
  done
done
python3 - $OUT <<'PY'
import csv, io, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.csv")):
    text = f.read_text(); at = text.find('"ID"')
    rows = list(csv.reader(io.StringIO(text[at:])))
    if len(rows) < 3: print(f.name, "no data"); continue
    head, units, vals = rows[0], rows[1], rows[2]
    out = {h: v for h, v in zip(head, vals) if ("stalled" in h and "pcsamp" in h) or "pipe_tensor" in h or "cycles_elapsed" in h or "inst_executed_pipe" in h}
    top = sorted(((float(v.replace(",", "")), h) for h, v in out.items() if v.replace(",", "").replace(".", "").isdigit()), reverse=True)[:22]
    print("==", f.name); [print(f"  {h} {v:,.0f}") for v, h in top]
PY
