import csv, sys, re
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
stall_cols = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
tot = 0; per = {h: 0 for h in stall_cols}
lines = []
for r in data:
    if len(r) < len(hdr): continue
    s = int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
    tot += s
    for h in stall_cols: per[h] += int(r[ix[h]] or 0)
    lines.append((s, r[ix["Address"]][-5:], r[ix["Source"]].strip(), {h: int(r[ix[h]] or 0) for h in stall_cols}))
print("total samples", tot)
print(sorted(((v, k) for k, v in per.items() if v), reverse=True)[:10])
# cumulative by address region: print the sass with samples in order, grouping
acc = 0
for i, (s, a, src, st) in enumerate(lines):
    acc += s
    if s >= int(sys.argv[2]) if len(sys.argv) > 2 else 20:
        top = sorted(((v, k[6:]) for k, v in st.items() if v), reverse=True)[:3]
        print(f"{i:5d} {a} {s:6d} cum{acc:7d} {src[:60]:60s} {top}")
