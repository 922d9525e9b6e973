import csv,sys,collections
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot=sum(int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in data)
print('total samples',tot, 'instrs',len(data))
agg=collections.Counter()
for r in data:
    for s in stalls: agg[s]+=int(r[ix[s]] or 0)
print([(s,round(v/tot*100,1)) for s,v in agg.most_common(10)])
# top instructions
top=sorted(data,key=lambda r:-int(r[ix['Warp Stall Sampling (All Samples)']] or 0))[:int(sys.argv[2]) if len(sys.argv)>2 else 25]
for r in top:
    n=int(r[ix['Warp Stall Sampling (All Samples)']]); 
    st=sorted(((int(r[ix[s]] or 0),s) for s in stalls),reverse=True)[:3]
    print(r[0][-5:], f"{n/tot*100:5.1f}%", r[ix['Instructions Executed']], r[1].strip()[:60], [(s[6:],v) for v,s in st if v])
