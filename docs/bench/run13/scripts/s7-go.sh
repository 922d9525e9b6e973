#!/bin/bash
# Session 3 device call 7: the final defaults (persistent grid where it serves): bf16 4096/8192 beside
# cuBLAS, and every --variants case (static, unaligned, B^T, bias+relu, bias+gelu vs torch eager, dynamic) checked.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/.devrun/pkg PYTHONUNBUFFERED=1
B="python3 -m mmaflow.runtime.bench --driver cuda"
echo "=== bf16"; timeout 100 $B --from-dir .devrun/s7/bf16 --out /tmp/o/bf16 --kernel-time 2>&1 | grep -E "kernel-only|rror|FAIL"
echo "=== var"; timeout 200 $B --from-dir .devrun/s7/var --out /tmp/o/var --time-checks 20 --kernel-time 2>&1 | grep -E "^check|rror"
cd /tmp/o && tar czf $OUT/s7.tgz .
