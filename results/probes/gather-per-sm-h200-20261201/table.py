"""Table of the per-SM probe: multi-step at 2 and 1 gather CTAs per SM against sequential LRU.

usage: python table.py A.json B.json [LABEL_A LABEL_B]   (run files of probe-per-sm.yaml; labels
default to "2/SM" and "1/SM"; the LRU column comes from A)
"""
import sys

from hisparse.results.model import load_run


def medians(path):
    run = load_run(path)
    out = {}
    for c in run.cases:
        if c.status != "ok":
            out[c.case_id] = (None, None, c.status)
            continue
        d = c.derived
        out[c.case_id] = (c.stats["median_us"], d.get("over_pcie_floor"), d.get("over_gather_floor"))
    return out


two, one = medians(sys.argv[1]), medians(sys.argv[2])
la, lb = sys.argv[3:5] if len(sys.argv) >= 5 else ("2/SM", "1/SM")
print(f"{'case (multi_step)':58} {la + ' us':>8} {lb + ' us':>8} {'B/A':>6} {'LRU us':>8} {'pcie(B)':>7} {'gfl(B)':>7}")
for cid, (m2, _, _) in two.items():
    if not cid.startswith("multi_step"):
        continue
    m1, p1, g1 = one.get(cid, (None, None, None))
    lru = two.get(cid.replace("multi_step", "lru_sequential").replace("pdl1", "pdl0"), (None,))[0]
    f = lambda x, w=8, d=1: f"{x:{w}.{d}f}" if isinstance(x, float) else f"{'-':>{w}}"
    ratio = m1 / m2 if m1 and m2 else None
    print(f"{cid[len('multi_step/'):]:58} {f(m2)} {f(m1)} {f(ratio, 6, 3)} {f(lru)} {f(p1, 7, 2)} {f(g1, 7, 2)}")
