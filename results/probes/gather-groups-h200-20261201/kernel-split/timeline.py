"""Per-call timeline of the multi-step swap's kernels from a `probe_replay_modes.py --kernels` row dump.

usage: python timeline.py kernels-*.json.gz   (one replay of 100 calls per entry of "kernels"; medians
over every call of every replay, in us: each kernel's duration, when the commit starts and ends
relative to the gather, and the gap to the next call's gather)
"""
import gzip
import json
import statistics as st
import sys

for path in sys.argv[1:]:
    d = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    calls = []
    for replay in d["kernels"]:
        cur = {}
        for kind, ts, dur in replay:
            cur[kind] = (ts, dur)
            if kind == "commit":
                calls.append(cur)
                cur = {}
    g = [c["gather"] for c in calls]
    m = [c["commit"] for c in calls]
    end = lambda k: k[0] + k[1]  # noqa: E731
    nxt = [calls[i + 1]["gather"][0] - end(calls[i]["commit"]) for i in range(len(calls) - 1)
           if calls[i + 1]["gather"][0] > end(calls[i]["commit"])]
    print(f"{d['case_id']} ({len(calls)} gather+commit pairs)")
    print(f"  gather {st.median(x[1] for x in g):6.2f}   commit {st.median(x[1] for x in m):6.2f}   "
          f"commit starts {st.median(b[0] - a[0] for a, b in zip(g, m)):6.2f} after the gather, "
          f"ends {st.median(end(b) - end(a) for a, b in zip(g, m)):5.2f} after it   "
          f"next gather {st.median(nxt):5.2f} after the commit")
