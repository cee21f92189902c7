"""Table of the batch-1 probe (README.md): median us per call of each case in each run file.

usage: python table.py --labels A,B,... RUN.json RUN.json ...
The last columns: the best of the other trees' medians over head's best, per tree (t1..t4).
"""
import sys

from hisparse.results.model import load_run


def medians(path):
    return {c.case_id: (c.stats["median_us"] if c.status == "ok" else None) for c in load_run(path).cases}


args = sys.argv[1:]
labels = args[1].split(",") if args and args[0] == "--labels" else None
files = args[2:] if labels else args
labels = labels or [f"r{i}" for i in range(len(files))]
runs = dict(zip(labels, (medians(p) for p in files)))
trees = sorted({lab.rsplit("-", 1)[0] for lab in labels}, key=lambda t: (t != "head", t))
cases = list(next(iter(runs.values())))


def best(tree, cid):
    vals = [r.get(cid) for lab, r in runs.items() if lab.rsplit("-", 1)[0] == tree]
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None


print(f"{'case':58} " + " ".join(f"{lab:>7}" for lab in labels) + " " + " ".join(f"{t + '/h':>7}" for t in trees[1:]))
for cid in cases:
    vals = [runs[lab].get(cid) for lab in labels]
    h = best("head", cid)
    ratios = [(best(t, cid) / h if h and best(t, cid) else None) for t in trees[1:]]
    cell = lambda x, d=1: f"{x:7.{d}f}" if isinstance(x, float) else f"{'-':>7}"
    print(f"{cid:58} " + " ".join(cell(v) for v in vals) + " " + " ".join(cell(r, 3) for r in ratios))
