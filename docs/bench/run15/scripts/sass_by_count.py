import csv,sys,collections
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
S='Warp Stall Sampling (All Samples)'
tot=sum(int(r[ix[S]] or 0) for r in data)
g=collections.Counter(); n=collections.Counter()
for r in data:
    k=r[ix['Instructions Executed']]; g[k]+=int(r[ix[S]] or 0); n[k]+=1
for k,v in g.most_common(12): print(k, n[k], 'instrs', round(v/tot*100,1),'%')
