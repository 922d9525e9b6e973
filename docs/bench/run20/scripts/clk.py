"""Per kernel name: median gpu__time_duration (us), SM cycles, SM clock (GHz) from an ncu --csv file."""
import csv, io, statistics, sys
from collections import defaultdict
text = open(sys.argv[1]).read()
at = text.find('"ID"')
rows = list(csv.DictReader(io.StringIO(text[at:])))
vals = defaultdict(lambda: defaultdict(list))
for r in rows:
    try:
        v = float(r["Metric Value"].replace(",", ""))
    except ValueError:
        continue
    vals[r["Kernel Name"][:60]][(r["Metric Name"], r["Metric Unit"])].append(v)
for k, m in vals.items():
    print(k, " | ".join(f"{n} [{u}] {statistics.median(v):.4g} (n={len(v)})" for (n, u), v in sorted(m.items())))
