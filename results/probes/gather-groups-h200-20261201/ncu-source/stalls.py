"""Warp-stall samples of the gather and commit at batch 1 by SASS opcode, and the hottest instructions.

usage: python stalls.py source-sass.csv   (`ncu -i b1.ncu-rep --page source --csv --print-source sass`;
b1.ncu-rep.gz beside this file: gunzip it first)
"""
import csv
import sys
from collections import Counter

rows = list(csv.reader(open(sys.argv[1])))
heads = [i for i, r in enumerate(rows) if r and r[0] == "Address"]
names = [rows[i - 1][1] for i in heads]
seen = set()
for k, h in enumerate(heads):
    if names[k] in seen:  # ncu prints each kernel's page twice (all / not-issued samples share a table)
        continue
    seen.add(names[k])
    end = heads[k + 1] - 1 if k + 1 < len(heads) else len(rows)
    sec = [r for r in rows[h + 1:end] if len(r) > 3 and r[0].startswith("0x")]
    total = sum(int(r[2]) for r in sec)
    ops = Counter()
    for r in sec:
        words = r[1].split()
        op = words[1] if words and words[0].startswith("@") else (words[0] if words else "")
        ops[op.split(".")[0]] += int(r[2])
    print(f"{names[k][:90]}\n  {len(sec)} instructions, {total} stall samples; by opcode: "
          + ", ".join(f"{o} {n}" for o, n in ops.most_common(6)))
    for i in sorted(range(len(sec)), key=lambda i: -int(sec[i][2]))[:5]:
        print(f"    {int(sec[i][2]):5d} samples  {sec[i][1].strip()[:70]}")
