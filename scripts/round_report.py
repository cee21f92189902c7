"""Per-round medians of the same cases across several run files: is a case's variance within one
run (between its timing rounds) or between runs (per process)?

    python scripts/round_report.py RUN.json RUN.json ...

Per case: each run's round medians (us), then the spread of the round medians within runs (max/min
- 1, worst run) and between runs (max/min of the run medians - 1). Between >> within means a
per-process effect that more rounds inside one process cannot average out.
"""
from __future__ import annotations

import statistics as st
import sys

from hisparse.results.model import CaseResult, load_run


def round_medians(case: CaseResult) -> list[float]:
    return [st.median(r.samples_us) for r in case.runs]


def main(paths: list[str]) -> int:
    if paths[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    runs = [load_run(p) for p in paths]  # the results reader: any schema version
    ids = [c.case_id for c in runs[0].cases if c.ok]
    print(f"{'case':<52} {'within':>7} {'between':>8}  round medians per run (us)")
    for cid in ids:
        per_run = []
        for run in runs:
            case = next((c for c in run.cases if c.case_id == cid and c.ok), None)
            if case is not None:
                per_run.append((round_medians(case), case.median_us))
        if not per_run:
            continue
        within = max(max(r) / min(r) - 1 for r, _ in per_run)
        meds = [m for _, m in per_run]
        between = max(meds) / min(meds) - 1
        rounds = " | ".join(" ".join(f"{x:.1f}" for x in r) for r, _ in per_run)
        print(f"{cid:<52} {within * 100:6.1f}% {between * 100:7.1f}%  {rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
