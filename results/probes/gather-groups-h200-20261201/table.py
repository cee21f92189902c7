"""Table of the copy-group probe: multi-step at 1, 2, 4 gather copy groups per CTA (README.md).

usage: python table.py [--labels A,B,...] RUN.json RUN.json ...   (run files of probe-groups.yaml;
labels default to G1, G2, G4, ...; the sglang and LRU columns come from the first file that has them)
"""
import sys

from hisparse.results.model import load_run


def medians(path):
    return {c.case_id: (c.stats["median_us"] if c.status == "ok" else None) for c in load_run(path).cases}


args = sys.argv[1:]
labels = None
if args and args[0] == "--labels":
    labels, args = args[1].split(","), args[2:]
runs = [medians(p) for p in args]
first = runs[0]
others = {k: v for r in runs for k, v in r.items() if not k.startswith("multi_step/")}
heads = [f"{lab} us" for lab in (labels or [f"G{2 ** i}" for i in range(len(runs))])]
print(f"{'case (multi_step)':44} " + " ".join(f"{h:>8}" for h in heads) + f" {'best/1st':>8} {'sglang':>8} {'LRU':>8}")
for cid in first:
    if not cid.startswith("multi_step/"):
        continue
    vals = [r.get(cid) for r in runs]
    sg = others.get("sglang_" + cid)
    lru = others.get(cid.replace("multi_step", "lru_sequential").replace("pdl1", "pdl0"))
    f = lambda x, w=8, d=1: f"{x:{w}.{d}f}" if isinstance(x, float) else f"{'-':>{w}}"
    ok = [v for v in vals if v]
    best = min(ok) / vals[0] if vals[0] and ok else None
    print(f"{cid[len('multi_step/'):]:44} " + " ".join(f(v) for v in vals) + f" {f(best, 8, 3)} {f(sg)} {f(lru)}")
