"""Medians of the gather's per-thread lookup clocks (p-gather-clock.patch) per case, tile and class.

usage: python gclk.py RUN_LOG
Lines: 'PROBE gclk e=.. tile=T/N cls=C n=.. spins=.. | mean state .. in .. ... | max state .. ...' (cycles from
each thread's kernel entry). Classes: 0 hit, 1 claimed miss, 2 miss found claimed by another lane, 3 other
(pending, tail, invalid). The run prints a case's line when the case ends, so the PROBE lines before it are its.
"""
import re
import statistics
import sys
from collections import defaultdict

CLS = {0: "hit", 1: "claimed", 2: "found", 3: "other"}


def parse(line):
    head, mean, mx = line.split("|")
    fields = {"n": int(re.search(r" n=(\d+)", head).group(1))}
    fields["spins/n"] = int(re.search(r"spins=(\d+)", head).group(1)) / fields["n"]
    for label, part in (("mean", mean), ("max", mx)):
        for name, val in re.findall(r"([a-z0-9]+) (\d+)", part.replace(label, "")):
            fields[f"{label} {name}"] = int(val)
    tile = re.search(r"tile=(\d+/\d+)", head).group(1)
    return tile, CLS[int(re.search(r"cls=(\d)", head).group(1))], fields


rows = defaultdict(lambda: defaultdict(list))
waiting = []
for line in open(sys.argv[1]):
    if line.startswith("PROBE gclk"):
        waiting.append(parse(line))
        continue
    m = re.match(r"\[\d+/\d+\] (\S+)", line)
    if m:
        for tile, cls, fields in waiting:
            for name, val in fields.items():
                rows[(m.group(1), tile, cls)][name].append(val)
        waiting = []
for (case, tile, cls), f in sorted(rows.items()):
    print(f"{case[:48]:48} tile {tile:6} {cls:8} calls={len(f['n']):3} " +
          " ".join(f"{name}={statistics.median(v):.2f}" if name == "spins/n" else f"{name}={statistics.median(v):.0f}"
                   for name, v in f.items()))
