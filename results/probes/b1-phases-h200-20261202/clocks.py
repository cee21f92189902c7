"""Medians of the phase clocks (p5-phase-clock-v*.patch) per kernel and miss count, from PROBE lines.

usage: python clocks.py RUN_LOG   (lines 'PROBE commit e=.. misses=.. hot=.. | wait N init N ... | total N cycles')
"""
import re
import statistics
import sys
from collections import defaultdict

groups = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    if not line.startswith("PROBE"):
        continue
    kind = line.split()[1]
    head, body, _ = line.split("|")
    key = (kind, re.search(r"(misses=\d+|tile=\d+/\d+)", head).group(1))
    for name, val in re.findall(r"([A-Za-z+]+) (-?\d+)", body):
        groups[key][name].append(int(val))
for (kind, key), fields in sorted(groups.items()):
    n = len(next(iter(fields.values())))
    print(f"{kind:7} {key:14} n={n:3} " + " ".join(f"{k} {statistics.median(v):.0f}" for k, v in fields.items()))
