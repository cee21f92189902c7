"""The recorded history made ready to show: every series with its change points (``load_history``).

Detection lives here, in ``track``, so the dashboard (``hisparse.render.dashboard``) only draws what
it is handed. A series is one case on one machine *and one backend*: a PyTorch-on-CPU reference run
recorded on a GPU machine is a series of its own and never the latest point of a GPU series.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hisparse import stats
from hisparse.track import changepoint
from hisparse.track.changepoint import ChangePoint
from hisparse.track.compare import Pair as SamplesPair
from hisparse.track.compare import floor_step
from hisparse.track.history import RunFile, Series, build_series, order_commits, scan_runs, timing_key

REGRESSION = changepoint.REGRESSION
IMPROVEMENT = changepoint.IMPROVEMENT


def detect(series: Series) -> list[ChangePoint]:
    """Change points of a series (time: lower is better), indexed into ``points``; failed commits
    are skipped by the detector, not counted as a level (hisparse.track.changepoint.change_points)."""
    return changepoint.change_points([p.samples_us if p.ok else None for p in series.points],
                                     direction=changepoint.METRIC_DIRECTION["time_us"])


@dataclass
class TrackedSeries:
    """A series, its change points and its floors per commit (None where not recorded)."""

    series: Series
    changes: list[ChangePoint] = field(default_factory=list)
    floor_us: list[float | None] = field(default_factory=list)  # the PCIe floor, one per point
    # The bare gather of the case's rows, one per point: it moves with the node's host (two H100 nodes of
    # 2026-12-06 gathered the same rows 1.49x apart), so a step in the case that it shares is the node's.
    gather_floor_us: list[float | None] = field(default_factory=list)

    @property
    def key(self) -> str:
        # backend in the key: the reference and the cuda series of one case on one machine stay apart
        s = self.series
        return f"{s.machine}/{s.backend}/{s.case_id}" + (f"@{s.timing}" if s.timing else "")

    @property
    def regressions(self) -> list[ChangePoint]:
        return [c for c in self.changes if c.kind == REGRESSION]

    def gather_floor_step(self, c: ChangePoint) -> float | None:
        """The gather floor at the change's first commit over the one before it (the nearest recorded on
        each side), where it moved beyond compare's floor (track.compare.floor_step); else None. A change point with
        such a step is not the kernels' alone: the node, the case's rows or the floor moved with it."""
        after = next((f for f in self.gather_floor_us[c.index:] if f), None)
        before = next((f for f in reversed(self.gather_floor_us[:c.index]) if f), None)
        return floor_step(before, after)


@dataclass
class History:
    """What the dashboard shows: the runs, the files that could not be read, commit dates, tracked series."""

    runs: list[RunFile]
    skipped: list[tuple[Path, str]]
    dates: dict[str, datetime]  # commit (or "run:<id>") -> ordering date
    tracked: list[TrackedSeries]

    @property
    def regressions(self) -> list[tuple[TrackedSeries, ChangePoint]]:
        return [(t, c) for t in self.tracked for c in t.regressions]


FLOOR_KEYS = ("pcie_floor_us", "gather_floor_us")  # TrackedSeries.floor_us, .gather_floor_us


def _floors(series: Series, runs: list[RunFile]) -> list[list[float | None]]:
    """Per floor of FLOOR_KEYS, the median recorded value of the series' case in each point's runs."""
    by_id = {r.run_id: r for r in runs}
    out: list[list[float | None]] = [[] for _ in FLOOR_KEYS]
    for p in series.points:
        floors = [c.get("floor") or {} for rid in p.run_ids for c in by_id[rid].cases
                  if c["case_id"] == series.case_id and str(by_id[rid].data.get("backend") or "") == series.backend
                  and timing_key(c.get("timing")) == series.timing]
        for key, column in zip(FLOOR_KEYS, out):
            vals = [float(f[key]) for f in floors if f.get(key)]
            column.append(stats.median(vals) if vals else None)
    return out


def track(runs: list[RunFile], *, repo: str | os.PathLike | None = None) -> list[TrackedSeries]:
    """Every series of ``runs`` with its change points and floors."""
    return [TrackedSeries(s, detect(s), *_floors(s, runs)) for s in build_series(runs, repo=repo)]


def load_history(results_dir: str | os.PathLike, *, repo: str | os.PathLike | None = None,
                 machine: str | None = None) -> History:
    """Read every run under ``results_dir`` (only ``machine``'s when given) and track its series."""
    runs, skipped = scan_runs(results_dir, machine=machine)
    return History(runs, skipped, order_commits(runs, repo), track(runs, repo=repo))


@dataclass(frozen=True)
class Pair:
    """Our series and sglang's doing the same work (same machine, backend, timing; sglang's case id is
    ours with the implementation prefixed "sglang_", the implementation table's naming), with
    ours/sglang per commit where both timed it, and at the latest such commit the pair's verdict: that
    ratio and the Mann-Whitney p of the two points' samples (each pooled over the commit's runs), so a
    page counts the pair faster or slower only where the samples differ, as the run summary does."""

    ours: TrackedSeries
    theirs: TrackedSeries
    ratios: list[tuple[str, float]]  # (commit, median ours / median sglang), oldest first
    latest: SamplesPair | None = None  # None: no commit where both timed it


def sglang_pairs(tracked: list[TrackedSeries]) -> list[Pair]:
    by_key = {(t.series.machine, t.series.backend, t.series.timing, t.series.case_id): t for t in tracked}
    out = []
    for t in tracked:
        s = t.series
        theirs = by_key.get((s.machine, s.backend, s.timing, "sglang_" + s.case_id))
        if theirs is None or s.case_id.startswith("sglang_"):
            continue
        mine = {p.commit: p for p in s.points if p.ok}
        # (sglang's point, ours, ours / sglang) at each commit where both timed it, oldest first
        rated = [(p, mine[p.commit], stats.median(mine[p.commit].samples_us) / m) for p in theirs.series.points
                 if p.ok and p.commit in mine for m in [stats.median(p.samples_us)] if m]
        ratios = [(p.commit, r) for p, _, r in rated]
        latest = None
        if rated:
            p, ours, r = rated[-1]
            latest = SamplesPair.of_samples(r, ours.samples_us, p.samples_us)
        out.append(Pair(t, theirs, ratios, latest))
    return out
