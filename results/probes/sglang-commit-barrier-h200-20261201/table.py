"""Table of the sglang barrier probe: sglang's multi-step swap unpatched vs patched, and ours (README.md).

usage: python table.py UNPATCHED.json PATCHED.json
"""
import sys

from hisparse.results.model import load_run


def cases(path):
    return {c.case_id: c for c in load_run(path).cases}


def cell(c):
    if c is None:
        return f"{'-':>10}"
    return f"{c.stats['median_us']:10.1f}" if c.status == "ok" else f"{'FAIL(' + c.status[:4] + ')':>10}"


old, new = cases(sys.argv[1]), cases(sys.argv[2])
print(f"{'case':40} {'unpatched':>10} {'patched':>10} {'ours':>10}")
for cid in old:
    if not cid.startswith("sglang_multi_step/"):
        continue
    rest = cid[len("sglang_multi_step/"):]
    print(f"{rest:40} {cell(old[cid])} {cell(new.get(cid))} {cell(new.get('multi_step/' + rest))}")
