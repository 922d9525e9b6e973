"""Run 21 call 7: the sampled warp stall reasons (smsp__pcsamp_warps_issue_stalled_*) and instruction counts
per pipe of ncu --page raw --csv files, one column per file. Usage: python3 stalls.py DIR"""
import csv, io, pathlib, sys
res = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.csv")):
    text = f.read_text(); at = text.find('"ID"')
    head, _units, vals = list(csv.reader(io.StringIO(text[at:])))[:3]
    d = {}
    for h, v in zip(head, vals):
        key = (h.replace("smsp__pcsamp_warps_issue_stalled_", "stall ") if "pcsamp_warps_issue_stalled" in h
               and not h.endswith("not_issued") else h if h.startswith("sm__inst_executed_pipe_") and h.endswith(".sum")
               or h == "sm__cycles_elapsed.avg" else None)
        if key:
            try:
                d[key] = float(v.replace(",", ""))
            except ValueError:
                pass
    res[f.stem] = d
keys = sorted(set().union(*[d.keys() for d in res.values()]), key=lambda k: (not k.startswith("sm__cycles"), not k.startswith("stall"), -max(d.get(k, 0) for d in res.values())))
print("metric".ljust(44), *[n.rjust(12) for n in res])
for k in keys:
    if max(d.get(k, 0) for d in res.values()) > 0:
        print(k[:44].ljust(44), *[f"{res[n].get(k, 0):12,.0f}" for n in res])
