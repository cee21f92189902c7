"""A run as a table other tools read: one row per case, one column per axis (implementation, workload,
regime, batch, ..., each workload parameter as ``wp.<name>``), then the figures (median, quartiles,
relative noise, GB/s, the floor ratios) and the timing settings. ``pandas.read_csv`` gets typed axes
to group by, where the case id is one string to parse."""
from __future__ import annotations

import csv
import io

from hisparse.results import axes
from hisparse.results.model import CaseResult, RunRecord

AXES = ("implementation", "workload", "batch", "steps", "top_k", "hot_buffer_size", "item_size_bytes", "pdl",
        "shared_layers")
FIGURES = ("status", "n", "median_us", "q1_us", "q3_us", "noise", "gbps", "over_pcie_floor", "over_gather_floor",
           "gather_warm_us", "calls_per_graph", "replays_per_sample")


def _row(c: CaseResult, wp_keys: list[str]) -> dict:
    p, wp = c.params or {}, (c.params or {}).get("workload_params") or {}
    s, d = c.summary, c.derived or {}
    row = {"case_id": c.case_id, **{k: p.get(k) for k in AXES}, "regime": axes.regime(p), "layers": axes.layers(p)}
    row.update({f"wp.{k}": wp.get(k) for k in wp_keys if k != "layers"})
    row.update(status=c.status, n=s.n if s else 0, median_us=s.median if s else None, q1_us=s.q1 if s else None,
               q3_us=s.q3 if s else None, noise=axes.relative_noise(s), gbps=d.get("gbps"),
               over_pcie_floor=d.get("over_pcie_floor"), over_gather_floor=d.get("over_gather_floor"),
               gather_warm_us=axes.gather_warm_us(c.floor), calls_per_graph=c.settings.get("calls_per_graph"),
               replays_per_sample=c.settings.get("replays_per_sample", 1))
    return row


def to_csv(run: RunRecord) -> str:
    wp_keys = sorted({k for c in run.cases for k in ((c.params or {}).get("workload_params") or {})})
    columns = ["case_id", *AXES, "regime", "layers", *(f"wp.{k}" for k in wp_keys if k != "layers"), *FIGURES]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for c in run.cases:
        w.writerow(_row(c, wp_keys))
    return buf.getvalue()
