"""Markdown tables of docs/benchmarks-h200.md, computed from committed run files.

    python scripts/h200_tables.py default RUN_A.json RUN_B.json
        configs/default.yaml run A and its re-run B: per workload the batch 1..64 grid (4 steps, top-k
        2048, hot 4096, 576 B), and the batch-64 `distinct` slice over steps x item size x
        hot_buffer_size. Figures are A's; "re-run" = median B / median A - 1. A run of part of the
        config (--filter, or a config run in several files) gives the rows it has; a missing case
        leaves its row or its table out, and a case missing from B reads "-".
    python scripts/h200_tables.py shared RUN.json
        configs/shared-layers.yaml: multi_step_planned against lru_sequential_planned per batch."""
from __future__ import annotations

import sys

from hisparse.results.model import load_run

GRID = dict(steps=4, top_k=2048, hot_buffer_size=4096, item_size_bytes=576)


def index(run):
    return {c.case_id: c for c in run.cases if c.ok}


def find(cases, **want):
    for c in cases.values():
        if all(c.params.get(k) == v for k, v in want.items()):
            return c
    return None


def rerun(a, b) -> str:
    if a is None or b is None:
        return "-"
    return f"{b.median_us / a.median_us - 1:+.1%}"


def fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def grid_table(A, B, workload: str) -> str:
    head = ("| batch | seq. LRU us | multi-step us (PDL on) | PDL off | speedup | multi / PCIe floor | "
            "multi / gather floor | LRU / gather floor | gather floor us | re-run (LRU, PDL on, PDL off) |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for batch in (1, 2, 4, 8, 16, 32, 64):
        key = dict(GRID, workload=workload, batch=batch)
        lru = find(A, implementation="lru_sequential", **key)
        on = find(A, implementation="multi_step", pdl=True, **key)
        off = find(A, implementation="multi_step", pdl=False, **key)
        if lru is None or on is None:
            continue
        lru_b = find(B, implementation="lru_sequential", **key)
        on_b = find(B, implementation="multi_step", pdl=True, **key)
        off_b = find(B, implementation="multi_step", pdl=False, **key)
        rows.append(
            f"| {batch} | {fmt(lru.median_us)} | {fmt(on.median_us)} | {fmt(off and off.median_us)} | "
            f"{lru.median_us / on.median_us:.2f}x | {fmt(on.derived['over_pcie_floor'], '.2f')} | "
            f"{fmt(on.derived['over_gather_floor'], '.2f')} | {fmt(lru.derived['over_gather_floor'], '.2f')} | "
            f"{fmt(on.floor['gather_floor_us'])} | {rerun(lru, lru_b)}, {rerun(on, on_b)}, {rerun(off, off_b)} |")
    return "\n".join([head, *rows]) if rows else ""


def slice_table(A, B) -> str:
    head = ("| steps | item B | hot | seq. LRU us | multi-step us | speedup | multi / gather floor | re-run (LRU, multi) |\n"
            "|---|---|---|---|---|---|---|---|")
    rows = []
    for steps in (1, 2, 4):
        for item in (576, 656, 1152):
            for hot in (4096, 8192, 32768):
                key = dict(workload="distinct", batch=64, steps=steps, top_k=2048, hot_buffer_size=hot,
                           item_size_bytes=item)
                on = find(A, implementation="multi_step", pdl=True, **key)
                if on is None:
                    continue
                lru = find(A, implementation="lru_sequential", **key)
                lru_txt = fmt(lru.median_us) if lru else "pruned (int16 LRU)"
                speed = f"{lru.median_us / on.median_us:.2f}x" if lru else "-"
                rows.append(f"| {steps} | {item} | {hot} | {lru_txt} | {fmt(on.median_us)} | {speed} | "
                            f"{fmt(on.derived['over_gather_floor'], '.2f')} | "
                            f"{rerun(lru, find(B, implementation='lru_sequential', **key))}, "
                            f"{rerun(on, find(B, implementation='multi_step', pdl=True, **key))} |")
    return "\n".join([head, *rows]) if rows else ""


def shared_table(R) -> str:
    head = ("| workload | batch | seq. LRU + planned us | multi-step + planned us | speedup | "
            "multi / PCIe floor | multi / gather floor | LRU / gather floor |\n|---|---|---|---|---|---|---|---|")
    rows = []
    for workload in ("upstream", "distinct"):
        for batch in (1, 2, 4, 8, 16, 32, 64):
            lru = find(R, implementation="lru_sequential_planned", workload=workload, batch=batch)
            multi = find(R, implementation="multi_step_planned", workload=workload, batch=batch)
            if lru is None or multi is None:
                continue
            rows.append(f"| {workload} | {batch} | {fmt(lru.median_us)} | {fmt(multi.median_us)} | "
                        f"{lru.median_us / multi.median_us:.2f}x | {fmt(multi.derived['over_pcie_floor'], '.2f')} | "
                        f"{fmt(multi.derived['over_gather_floor'], '.2f')} | "
                        f"{fmt(lru.derived['over_gather_floor'], '.2f')} |")
    return "\n".join([head, *rows])


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "default":
        A, B = index(load_run(argv[1])), index(load_run(argv[2]))
        for workload in ("serving", "upstream", "distinct"):
            table = grid_table(A, B, workload)
            if table:
                print(f"#### `{workload}`\n\n{table}\n")
        table = slice_table(A, B)
        if table:
            print(f"#### Batch 64, `distinct`: steps x hot_buffer_size x item size (PDL on)\n\n{table}")
    elif len(argv) == 2 and argv[0] == "shared":
        print(shared_table(index(load_run(argv[1]))))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
