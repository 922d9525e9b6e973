import csv,sys,collections
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
S='Warp Stall Sampling (All Samples)'
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot=sum(int(r[ix[S]] or 0) for r in data)
sel=[r for r in data if r[ix['Instructions Executed']]==sys.argv[2]]
agg=collections.Counter()
for r in sel:
    for s in stalls: agg[s]+=int(r[ix[s]] or 0)
print([(s[6:],round(v/tot*100,1)) for s,v in agg.most_common(8)])
for r in sorted(sel,key=lambda r:-int(r[ix[S]] or 0))[:int(sys.argv[3])]:
    n=int(r[ix[S]]); st=sorted(((int(r[ix[s]] or 0),s) for s in stalls),reverse=True)[:3]
    print(r[0][-5:], f"{n/tot*100:5.2f}%", r[1].strip()[:70], [(s[6:],v) for v,s in st if v])
