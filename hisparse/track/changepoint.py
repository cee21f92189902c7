"""Trend change points: where in a case's per-commit history did its level shift? Pure Python, no I/O.

The A/B question (is tonight's commit slower than its base?) is the regression policy's
(track/policy.py, used by compare and the gate). This module answers the trend question for the
dashboard with the same noise scaling: ``detect_changes(medians, ...)`` finds level shifts in a series
of per-commit medians by binary segmentation. Each candidate split is the maximum of the CUSUM
(least-squares single step) scan; its significance comes from a permutation test (the series
reshuffled, the scan maximum recomputed), which assumes nothing about the noise distribution.
Accepted splits must also move the *median* of the neighbouring segments by more than
``max(policy.min_effect, policy.noise_factor * noise)``, ``noise`` estimated per case, which keeps a
single outlying commit from raising an alert. We did not use ``asv.step_detect`` (an L1
piecewise-constant fit with a fixed penalty): it has no significance level, so its false-alarm rate
cannot be set, and it treats every benchmark as lower-is-better.

``change_points(samples_per_commit)`` is the entry point for the dashboard.
Directions are explicit: ``LOWER`` (times: lower is better) or ``HIGHER`` (GB/s: higher is better).
"""
from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hisparse.track import policy as pol
from hisparse.track.policy import (  # noqa: F401  HIGHER, METRIC_DIRECTION: detect_changes' directions
    HIGHER, LOWER, METRIC_DIRECTION, effect_threshold, median, median_noise, series_noise, worse_by,
)

REGRESSION, IMPROVEMENT = "regression", "improvement"  # ChangePoint.kind


# ---------------------------------------------------------------------------------------------
# Trend change points


@dataclass(frozen=True)
class ChangePoint:
    """A level shift: ``index`` is the first point (commit) of the new level."""

    index: int
    before_median: float  # median of the segment before (back to the previous change point)
    after_median: float  # median of the segment after (up to the next change point)
    change: float  # (after - before) / before, unsigned by direction
    worse_by: float  # signed: > 0 worse
    kind: str  # "regression" | "improvement"
    p_value: float  # permutation p of the split when it was found
    threshold: float
    direction: str

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _scan(values: Sequence[float], min_size: int) -> tuple[float, int]:
    """Max over splits of the CUSUM statistic |mean(left) - mean(right)| * sqrt(m (n-m) / n), i.e.
    the least-squares single-step fit; returns (stat, split index = size of the left part)."""
    n = len(values)
    total = math.fsum(values)
    best, best_at, s = -1.0, -1, 0.0
    for m in range(1, n - min_size + 1):
        s += values[m - 1]
        if m < min_size:
            continue
        diff = s / m - (total - s) / (n - m)
        stat = abs(diff) * math.sqrt(m * (n - m) / n)
        if stat > best:
            best, best_at = stat, m
    return best, best_at


def _best_split(values: Sequence[float], min_size: int, permutations: int, alpha: float,
                rng: random.Random) -> tuple[int, float] | None:
    """(split index, permutation p) of the strongest split, or None when not significant."""
    n = len(values)
    if n < 2 * min_size or max(values) == min(values):
        return None
    # Centre and scale once: the statistic is shift/scale invariant and this keeps sums exact enough.
    m0 = median(values)
    scale = max(abs(v - m0) for v in values)
    xs = [(v - m0) / scale for v in values]
    stat, at = _scan(xs, min_size)
    # Sequential permutation test: stop as soon as p can no longer fall below alpha.
    limit = alpha * (permutations + 1) - 1
    exceed = 0
    shuffled = list(xs)
    for _ in range(permutations):
        rng.shuffle(shuffled)
        if _scan(shuffled, min_size)[0] >= stat * (1 - 1e-12):
            exceed += 1
            if exceed > limit:
                return None
    return at, (exceed + 1) / (permutations + 1)


def estimate_series_noise(medians: Sequence[float], samples: Sequence[Sequence[float]] | None = None) -> float:
    """Relative sd of one per-commit median: the larger of the between-commit estimate
    (``series_noise``) and the typical within-run estimate (median over commits of ``median_noise``)."""
    noise = series_noise(medians)
    if samples:
        within = [median_noise(s) for s in samples if len(s) >= 2]
        if within:
            noise = max(noise, median(within))
    return noise


def detect_changes(
    medians: Sequence[float],
    *,
    direction: str,
    samples: Sequence[Sequence[float]] | None = None,
    noise: float | None = None,
    policy: pol.RegressionPolicy = pol.DEFAULT_POLICY,
    min_size: int = 2,
    permutations: int = 199,
    seed: int = 0,
) -> list[ChangePoint]:
    """Change points in a series of per-commit medians (oldest first).

    Binary segmentation: the strongest split of a segment (CUSUM scan, segments of at least
    ``min_size`` points) is kept when its permutation p-value is below ``policy.trend_alpha``; both
    halves are then searched again. Afterwards each split must move the median of its neighbouring
    segments by more than ``max(min_effect, noise_factor * noise * 1.25 * sqrt(1/n_before + 1/n_after))``
    (``noise``: relative sd of one point, default ``estimate_series_noise(medians, samples)``); splits
    that do not are dropped and the neighbours re-measured until none changes. Deterministic for a
    given ``seed``.
    """
    pol.check_direction(direction)
    xs = pol.floats("medians", medians)
    if samples is not None and len(samples) != len(xs):
        raise ValueError(f"samples: one list per point expected ({len(xs)}), got {len(samples)}")
    if min_size < 1:
        raise ValueError(f"min_size: must be >= 1, got {min_size}")
    if noise is None:
        noise = estimate_series_noise(xs, samples)
    rng = random.Random(seed)
    found: dict[int, float] = {}
    stack = [(0, len(xs))]
    while stack:
        lo, hi = stack.pop()
        split = _best_split(xs[lo:hi], min_size, permutations, policy.trend_alpha, rng)
        if split is None:
            continue
        at, p = split
        found[lo + at] = p
        stack += [(lo, lo + at), (lo + at, hi)]
    return _filter_by_effect(xs, found, direction, noise, policy.min_effect, policy.noise_factor)


def _filter_by_effect(xs: list[float], found: dict[int, float], direction: str, noise: float,
                      min_effect: float, noise_factor: float) -> list[ChangePoint]:
    splits = sorted(found)
    while True:
        bounds = [0] + splits + [len(xs)]
        points, weakest = [], None
        for i, at in enumerate(splits):
            before, after = xs[bounds[i]:at], xs[at:bounds[i + 2]]
            mb, ma = median(before), median(after)
            sd = pol.MEDIAN_SE * noise * math.sqrt(1.0 / len(before) + 1.0 / len(after))
            threshold = effect_threshold(min_effect, sd, noise_factor)
            w = worse_by(mb, ma, direction)
            margin = abs(w) / threshold if threshold > 0 else math.inf
            if weakest is None or margin < weakest[0]:
                weakest = (margin, at)
            points.append(ChangePoint(at, mb, ma, (ma - mb) / abs(mb) if mb else math.nan, w,
                                      REGRESSION if w > 0 else IMPROVEMENT, found[at], threshold, direction))
        if weakest is None or weakest[0] > 1.0:
            return points
        splits.remove(weakest[1])  # drop the weakest split only, then re-measure its neighbours


def change_points(samples_per_commit: Sequence[Sequence[float] | None], *, direction: str = LOWER,
                  policy: pol.RegressionPolicy = pol.DEFAULT_POLICY, seed: int = 0) -> list[ChangePoint]:
    """The dashboard's change points of one case: ``samples_per_commit`` holds each commit's raw
    samples, oldest first (None or empty for a commit without timing, which is skipped). Each
    ChangePoint's ``index`` points into ``samples_per_commit``. Fewer than 4 timed commits: none
    (a split needs 2 commits on each side)."""
    idx = [i for i, s in enumerate(samples_per_commit) if s]
    if len(idx) < 4:
        return []
    timed = [pol.floats("samples", samples_per_commit[i]) for i in idx]
    found = detect_changes([median(s) for s in timed], direction=direction, samples=timed, policy=policy, seed=seed)
    return [replace(c, index=idx[c.index]) for c in found]
