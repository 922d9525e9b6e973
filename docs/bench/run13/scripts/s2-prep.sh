#!/bin/bash
# Session 3 call 2 preparation: the TMA ring without a barrier per K tile (empty mbarriers) vs
# the same ring at 547bb47 (one barrier per K tile) vs the cp.async default; gelu with each.
set -e
export MMAFLOW_CODEGEN_SERVER=0
M="bench --target sm_90a --sizes 4096,8192"
NEW=".venv/bin/mmaflow"; OLD="env PYTHONPATH=/work/wt-old-pkg .venv/bin/python -m mmaflow.compiler.cli"
$NEW $M --prepare-only .devrun/s2/def &
$NEW $M --config copy=tma-wide --prepare-only .devrun/s2/tmanew &
$OLD $M --config copy=tma-wide --prepare-only .devrun/s2/tmaold &
$NEW bench --target sm_90a --variants --config copy=tma-wide --prepare-only .devrun/s2/varnew &
$OLD bench --target sm_90a --variants --config copy=tma-wide --prepare-only .devrun/s2/varold &
wait
# IREE's default and torch are timed once (in def): drop them from the other manifests;
# variants: static, bias+relu, bias+gelu only
python3 - <<'PY'
import json, pathlib
for d in ("tmanew", "tmaold"):
    p = pathlib.Path(".devrun/s2", d, "manifest.json"); m = json.loads(p.read_text())
    print(d, list(m)[:10])
PY
