"""Medians of the phase-D diagnostic's clocks (pX-phase-d-diag.patch), per variant, from PROBE commit lines.

usage: python diag.py LOG...   (each log: the PROBE lines of one variant's eager calls)
Fields: cycles of each commit phase (thread 0's clock64 after each barrier), and in phase D thread 0's
own view: Dload0 = its loads back, Dend0 = its work done (before D's barrier), from the start of D.
"""
import re
import statistics
import sys

for path in sys.argv[1:]:
    rows = [line for line in open(path) if line.startswith("PROBE commit")]
    fields: dict[str, list[int]] = {}
    for line in rows:
        body = line.split("|", 1)[1].rsplit("|", 1)[0]
        for name, val in re.findall(r"([A-Za-z][A-Za-z0-9+]*) (-?\d+)", body):
            fields.setdefault(name, []).append(int(val))
    misses = sorted({int(m) for line in rows for m in re.findall(r"misses=(\d+)", line)})
    summary = " ".join(f"{k} {statistics.median(v):.0f}" for k, v in fields.items() if k != "fin+wait")
    print(f"{path.split('/')[-1]:22} n={len(rows):3} misses {misses[:1]}..{misses[-1:]} | {summary}")
