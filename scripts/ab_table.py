"""Table of an A/B of trees run alternately on one node (scripts/ab_patch.sh): each case's median us per
call in each run file, then per tree the best of its medians over the head's best.

    python scripts/ab_table.py --labels head-a,tV-a,head-b,tV-b RUN.json RUN.json RUN.json RUN.json

A label is TREE-REP; the tree named `head` is the reference (labels without it compare against the
first tree). Why bests, not means: alternated runs of one tree differ by the node's drift and by single
outlier samples (a replay that lands in the slow mode), and the best of each tree is the figure least
moved by either; the table keeps every median, so a reader can see whether one run carried the ratio.
A case that failed or was not run in a file reads "-".

Below the table, each run's floors against the first run's (hisparse/track/compare.py: the pinned copy,
the bare gather of each case's rows, and its warm gather; time ratios, geometric means over the cases ok
in both): a node whose host drifted during the A/B moves every tree's times with it, and a ratio of
bests smaller than that drift says nothing about the patch.
"""
from __future__ import annotations

import sys

from hisparse.results.model import load_run
from hisparse.track.compare import gather_floor_shift, pinned_copy_shift, warm_gather_shift

DRIFTS = (("pinned copy", pinned_copy_shift), ("bare gather", gather_floor_shift), ("warm gather", warm_gather_shift))


def medians(run) -> dict[str, float | None]:
    return {c.case_id: (c.stats["median_us"] if c.status == "ok" else None) for c in run.cases}


def tree_of(label: str) -> str:
    return label.rsplit("-", 1)[0]


def best(runs: dict[str, dict], tree: str, case_id: str) -> float | None:
    vals = [r.get(case_id) for lab, r in runs.items() if tree_of(lab) == tree]
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None


def table(labels: list[str], runs: dict[str, dict]) -> list[str]:
    trees = list(dict.fromkeys(tree_of(lab) for lab in labels))
    ref = "head" if "head" in trees else trees[0]
    others = [t for t in trees if t != ref]
    cases = list(dict.fromkeys(cid for r in runs.values() for cid in r))
    width = max([len("case"), *map(len, cases)])
    cell = lambda x, d=1: f"{x:8.{d}f}" if isinstance(x, float) else f"{'-':>8}"
    lines = [f"{'case':{width}} " + " ".join(f"{lab:>8}" for lab in labels) + " " +
             " ".join(f"{t + '/' + ref[:1]:>8}" for t in others)]
    for cid in cases:
        h = best(runs, ref, cid)
        ratios = [(b / h if h and (b := best(runs, t, cid)) else None) for t in others]
        lines.append(f"{cid:{width}} " + " ".join(cell(runs[lab].get(cid)) for lab in labels) + " " +
                     " ".join(cell(r, 3) for r in ratios))
    return lines


def drift(labels: list[str], records: dict) -> list[str]:
    """One row per run after the first: its floors over the first run's ("-": not measured in both)."""
    first = labels[0]
    width = max(len("run"), *map(len, labels))
    lines = [f"node drift against {first} (time ratios, > 1: slower; geometric means over the cases ok in both):",
             f"{'run':{width}} " + " ".join(f"{name:>12}" for name, _ in DRIFTS)]
    for lab in labels[1:]:
        shifts = [f(records[first], records[lab]) for _, f in DRIFTS]
        lines.append(f"{lab:{width}} " + " ".join(f"{s.ratio:12.3f}" if s else f"{'-':>12}" for s in shifts))
    return lines


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(argv) < 3 or argv[0] != "--labels":
        print(__doc__, file=sys.stderr)
        return 2
    labels, files = argv[1].split(","), argv[2:]
    if len(labels) != len(files):
        print(f"ab_table: {len(labels)} labels for {len(files)} run files", file=sys.stderr)
        return 2
    records = {lab: load_run(path) for lab, path in zip(labels, files)}
    runs = {lab: medians(run) for lab, run in records.items()}
    print("\n".join(table(labels, runs)))
    if len(labels) > 1:
        print("\n" + "\n".join(drift(labels, records)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
