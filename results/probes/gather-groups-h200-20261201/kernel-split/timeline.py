"""Per-call timeline of the multi-step swap's kernels from a `probe_replay_modes.py --kernels` row dump.

usage: python timeline.py kernels-*.json.gz   (from the repository root's scripts/ the calls are split
by probe_replay_modes.split_calls; medians over every call of every replay, in us: each kernel's
duration, when the commit starts and ends relative to the gather, and the gap to the next call's gather)
"""
import gzip
import importlib.util
import json
import statistics as st
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "probe_replay_modes", Path(__file__).resolve().parents[4] / "scripts" / "probe_replay_modes.py")
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)

for path in sys.argv[1:]:
    d = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    per_replay = [probe.split_calls(replay) for replay in d["kernels"]]
    calls = [c for cs in per_replay for c in cs]
    end = lambda k: k[0] + k[1]  # noqa: E731
    nxt = [b["gather"][0] - end(a["commit"]) for cs in per_replay for a, b in zip(cs, cs[1:])]
    print(f"{d['case_id']} ({len(calls)} calls)")
    print(f"  gather {st.median(c['gather'][1] for c in calls):6.2f}   commit {st.median(c['commit'][1] for c in calls):6.2f}   "
          f"commit starts {st.median(c['commit'][0] - c['gather'][0] for c in calls):6.2f} after the gather, "
          f"ends {st.median(end(c['commit']) - end(c['gather']) for c in calls):5.2f} after it   "
          f"next gather {st.median(nxt):5.2f} after the commit")
