"""Write the AMD side-by-side tables of docs/BENCHMARKS.md (mmaflow vs IREE's default pipeline).

    python docs/bench/amd_report_tables.py > /tmp/tables.md

Runs `mmaflow report --baseline iree --json` for each target and size; no GPU needed.
"""

import json
import subprocess
import sys

TARGETS = ["gfx1100", "gfx1201", "gfx942", "gfx950"]
SIZES = [1024, 4096]
ROWS = ["vgprs", "agprs", "vgpr_spills", "scratch_bytes", "lds_bytes", "waves_per_simd"]
COUNTS = ["matrix", "global_load_b128", "lds_load_b128", "lds_load_b64", "lds_load_narrow", "lds_store_b128",
          "lds_store_b64", "lds_store_narrow", "barrier", "cache_invalidate", "scratch"]


def report(target, size):
    out = subprocess.run([sys.executable, "-m", "mmaflow.compiler.cli", "report", f"examples/matmul_{size}_f16.mlir",
                          "--target", target, "--baseline", "iree", "--json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    return {who: next(iter(data[who].values())) for who in ("mmaflow", "iree")}


def main():
    for t in TARGETS:
        data = {s: report(t, s) for s in SIZES}
        cols = [(s, w) for s in SIZES for w in ("mmaflow", "iree")]
        print(f"\n#### {t}\n")
        print("| | " + " | ".join(f"{s}³ {'mmaflow' if w == 'mmaflow' else 'IREE default'}" for s, w in cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for r in ROWS:
            print(f"| {r} | " + " | ".join(str(data[s][w].get(r) if data[s][w].get(r) is not None else "-")
                                         for s, w in cols) + " |")
        vals = [(data[s][w]["matrix_behind_lds_wait"], data[s][w]["loop_counts"].get("matrix", 0)) for s, w in cols]
        print("| matrix behind an LDS wait (of K loop's) | " + " | ".join(f"{a} of {b}" for a, b in vals) + " |")
        for c in COUNTS:
            vals = [(data[s][w]["counts"].get(c, 0), data[s][w]["loop_counts"].get(c, 0)) for s, w in cols]
            if any(v[0] for v in vals):
                print(f"| {c}: kernel (K loop) | " + " | ".join(f"{a} ({b})" for a, b in vals) + " |")


if __name__ == "__main__":
    main()
