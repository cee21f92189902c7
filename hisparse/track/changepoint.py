"""Regression detection: the A/B gate and trend change points. Pure Python, no I/O, CPU-tested.

Two questions, two tools (harness.md §5):

- **A/B gate** (a change against its base, the nightly check): ``gate(base, head, ...)`` runs a
  Mann-Whitney U test on the raw per-replay samples *and* requires a minimum relative change of the
  medians. A failing gate is only a suspicion: the caller re-measures and ``confirm(first, second)``
  fails the check only when the re-run fails the gate too, in the same direction.
- **Trend alerts** (the per-commit history on the dashboard): ``detect_changes(medians, ...)`` finds
  level shifts in a series of per-commit medians by binary segmentation. Each candidate split is the
  maximum of the CUSUM (least-squares single step) scan; its significance comes from a permutation
  test (the series reshuffled, the scan maximum recomputed), which assumes nothing about the noise
  distribution. Accepted splits must also move the *median* of the neighbouring segments by more than
  the case's own noise, which keeps a single outlying commit from raising an alert. We did not use
  ``asv.step_detect`` (an L1 piecewise-constant fit with a fixed penalty): it has no significance
  level, so its false-alarm rate cannot be set, and it treats every benchmark as lower-is-better.

Noise is case-dependent (0.03% to 2.9% run-to-run spread on one H200, harness.md §5), so no threshold
here is a fixed percentage: every effect threshold is ``max(min_effect, noise_factor * noise)`` where
``noise`` is the relative standard deviation of the compared quantity, estimated per case from its
samples (within a run) or from its re-runs / neighbouring commits (between runs), whichever is larger.
``min_effect`` is only a floor: the smallest change worth an alert at all.

Directions are explicit: ``LOWER`` (times: lower is better) or ``HIGHER`` (GB/s: higher is better).
``METRIC_DIRECTION`` maps the result-file metrics to theirs.
"""
from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from hisparse import stats

LOWER = "lower"  # lower is better: latencies (every *_us metric)
HIGHER = "higher"  # higher is better: throughput (gbps)
METRIC_DIRECTION = {"time_us": LOWER, "median_us": LOWER, "gbps": HIGHER}

# Floors below which a change is not worth an alert even when it is statistically certain. The
# effective thresholds come from each case's noise (see the module docstring); these only stop the
# quietest cases (0.03% spread) from alerting on 0.1% changes nobody would act on.
DEFAULT_MIN_EFFECT = {"time_us": 0.005, "median_us": 0.005, "gbps": 0.005}
DEFAULT_ALPHA = 0.01  # A/B gate: Mann-Whitney on 10+10 samples, then a confirming re-run
# Trend detection: a permutation test over per-commit medians cannot reach p < 0.01 with fewer than
# ~12 commits (a clean step in 8 commits has p ~ 0.04), and the noise-scaled effect filter is what
# keeps false alarms down (docs/regression.md has the measured rates), so the trend alpha is 0.05.
DEFAULT_TREND_ALPHA = 0.05
DEFAULT_NOISE_FACTOR = 3.0

# Robust-scale constants: MAD -> sigma for a normal, and the sd of a sample median relative to the
# sd of one observation (sqrt(pi/2) for a normal, large n).
_MAD_TO_SD = 1.4826
_MEDIAN_SE = math.sqrt(math.pi / 2.0)

REGRESSION, IMPROVEMENT, UNCHANGED, INSUFFICIENT = "regression", "improvement", "unchanged", "insufficient"


def _check_direction(direction: str) -> None:
    if direction not in (LOWER, HIGHER):
        raise ValueError(f"direction: must be {LOWER!r} (lower is better) or {HIGHER!r}, got {direction!r}")


def _floats(name: str, values: Sequence[float]) -> list[float]:
    xs = [float(v) for v in values]
    if any(math.isnan(v) or math.isinf(v) for v in xs):
        raise ValueError(f"{name}: NaN or infinite value")
    return xs


median = stats.median  # re-exported: callers of the gate/trend API use cp.median


def worse_by(before: float, after: float, direction: str) -> float:
    """Relative change from ``before`` to ``after``, signed so that > 0 means worse."""
    _check_direction(direction)
    if before == 0:
        return math.nan
    change = (after - before) / abs(before)
    return change if direction == LOWER else -change


# ---------------------------------------------------------------------------------------------
# Noise estimates (all relative to the median: 0.01 = 1%)


def sample_noise(samples: Sequence[float]) -> float:
    """Relative robust sd of single samples: 1.4826 * MAD / |median| (0 for fewer than 2)."""
    xs = _floats("samples", samples)
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    if m == 0:
        return math.nan
    return _MAD_TO_SD * median([abs(x - m) for x in xs]) / abs(m)


def median_noise(samples: Sequence[float]) -> float:
    """Relative sd of the median of ``samples`` (within-run noise only): sqrt(pi/2) * sd / sqrt(n)."""
    xs = _floats("samples", samples)
    if len(xs) < 2:
        return 0.0
    return _MEDIAN_SE * sample_noise(xs) / math.sqrt(len(xs))


def rerun_noise(medians: Sequence[float]) -> float:
    """Relative sd of a run's median across re-runs of one commit (between-run noise).

    Sample sd for 2-4 re-runs, the robust MAD form from 5 on. 0 for fewer than 2.
    """
    xs = _floats("medians", medians)
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    if m == 0:
        return math.nan
    if len(xs) < 5:
        mean = math.fsum(xs) / len(xs)
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    else:
        sd = _MAD_TO_SD * median([abs(x - m) for x in xs])
    return sd / abs(m)


def series_noise(values: Sequence[float]) -> float:
    """Relative sd of one point of a series with level shifts, from successive differences.

    A step changes one difference, so the median absolute difference stays a noise estimate:
    for iid normal points, median |x[i+1] - x[i]| = 0.6745 * sqrt(2) * sd. 0 for fewer than 3 points.
    """
    xs = _floats("values", values)
    if len(xs) < 3:
        return 0.0
    m = median(xs)
    if m == 0:
        return math.nan
    diffs = [abs(b - a) for a, b in zip(xs, xs[1:])]
    return median(diffs) / (0.6745 * math.sqrt(2.0)) / abs(m)


def effect_threshold(min_effect: float, noise: float, noise_factor: float = DEFAULT_NOISE_FACTOR) -> float:
    """The relative change a verdict needs: ``max(min_effect, noise_factor * noise)``."""
    if math.isnan(noise):
        return min_effect
    return max(min_effect, noise_factor * noise)


# ---------------------------------------------------------------------------------------------
# A/B gate


@dataclass(frozen=True)
class GateVerdict:
    """One A/B comparison of one metric of one case. ``worse_by`` > 0 means head is worse."""

    status: str  # "regression" | "improvement" | "unchanged" | "insufficient"
    direction: str
    base_median: float
    head_median: float
    worse_by: float  # relative change of medians, signed: > 0 worse
    p_value: float  # two-sided Mann-Whitney U on the raw samples
    threshold: float  # relative change needed: max(min_effect, noise_factor * noise)
    noise: float  # relative sd of the difference of medians used for the threshold
    alpha: float
    n_base: int
    n_head: int
    case_id: str | None = None
    metric: str = "time_us"

    @property
    def failed(self) -> bool:
        return self.status == REGRESSION

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def gate(
    base_samples: Sequence[float],
    head_samples: Sequence[float],
    *,
    direction: str = LOWER,
    min_effect: float = DEFAULT_MIN_EFFECT["time_us"],
    alpha: float = DEFAULT_ALPHA,
    noise: float | None = None,
    noise_factor: float = DEFAULT_NOISE_FACTOR,
    min_samples: int = 3,
    case_id: str | None = None,
    metric: str = "time_us",
) -> GateVerdict:
    """A/B verdict on raw samples: Mann-Whitney U (p < ``alpha``) AND a median change beyond threshold.

    ``noise``: the case's between-run noise, relative sd of one run's median (from re-runs of one
    commit or from the history: ``rerun_noise`` / ``series_noise``). The noise of the difference of
    two medians is then ``sqrt(2) * noise``; when ``noise`` is None, or smaller than what the samples
    themselves show, the within-run estimate ``sqrt(median_noise(base)^2 + median_noise(head)^2)``
    is used. Fewer than ``min_samples`` on either side gives "insufficient" (never a failure).
    """
    _check_direction(direction)
    base, head = _floats("base_samples", base_samples), _floats("head_samples", head_samples)
    if len(base) < min_samples or len(head) < min_samples:
        mb = median(base) if base else math.nan
        mh = median(head) if head else math.nan
        return GateVerdict(INSUFFICIENT, direction, mb, mh, worse_by(mb, mh, direction) if base and head else math.nan,
                           math.nan, math.nan, math.nan, alpha, len(base), len(head), case_id, metric)
    mb, mh = median(base), median(head)
    within = math.hypot(median_noise(base), median_noise(head))
    between = math.sqrt(2.0) * noise if noise is not None else 0.0
    diff_noise = max(within, between)
    threshold = effect_threshold(min_effect, diff_noise, noise_factor)
    p = stats.mann_whitney_u(base, head).p_value  # two-sided
    w = worse_by(mb, mh, direction)
    if p < alpha and w > threshold:
        status = REGRESSION
    elif p < alpha and -w > threshold:
        status = IMPROVEMENT
    else:
        status = UNCHANGED
    return GateVerdict(status, direction, mb, mh, w, p, threshold, diff_noise, alpha, len(base), len(head),
                       case_id, metric)


@dataclass(frozen=True)
class Decision:
    """Outcome of the confirm protocol for one case.

    ``status``: "pass" (the first gate did not fail), "suspect" (it failed and no re-run was given
    yet: re-measure the head), "confirmed" (the re-run failed too: a regression), "unconfirmed" (the
    re-run passed: noise). Only "confirmed" fails.
    """

    status: str
    first: GateVerdict
    second: GateVerdict | None = None

    @property
    def failed(self) -> bool:
        return self.status == "confirmed"

    @property
    def needs_rerun(self) -> bool:
        return self.status == "suspect"


def confirm(first: GateVerdict, second: GateVerdict | None = None) -> Decision:
    """Decide after a confirming re-run. A regression stands only if the re-measured head fails the
    gate again (only "regression" fails, so the direction must agree). Without ``second`` a failed
    first verdict is "suspect": never a failure on one measurement."""
    if not first.failed:
        return Decision("pass", first, second)
    if second is None:
        return Decision("suspect", first)
    return Decision("confirmed" if second.failed else "unconfirmed", first, second)


def gate_with_confirm(
    base_samples: Sequence[float],
    head_samples: Sequence[float],
    rerun_samples: Sequence[float] | None = None,
    *,
    direction: str = LOWER,
    noise: float | None = None,
    **gate_kwargs,
) -> Decision:
    """The whole A/B protocol for one case: gate the head; if it fails and a re-measured head is given,
    gate that too and ``confirm``. ``noise`` is the case's run-to-run noise from its history (None
    when fewer than 3 earlier runs exist); without it the confirming gate uses the spread between the
    two head runs, the only between-run evidence there is."""
    first = gate(base_samples, head_samples, direction=direction, noise=noise, **gate_kwargs)
    if not first.failed or rerun_samples is None:
        return confirm(first)
    if noise is None:
        head, rerun = _floats("head_samples", head_samples), _floats("rerun_samples", rerun_samples)
        noise = rerun_noise([median(head), median(rerun)])
    second = gate(base_samples, rerun_samples, direction=direction, noise=noise, **gate_kwargs)
    return confirm(first, second)


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
    min_effect: float = DEFAULT_MIN_EFFECT["time_us"],
    alpha: float = DEFAULT_TREND_ALPHA,
    noise_factor: float = DEFAULT_NOISE_FACTOR,
    min_size: int = 2,
    permutations: int = 199,
    seed: int = 0,
) -> list[ChangePoint]:
    """Change points in a series of per-commit medians (oldest first).

    Binary segmentation: the strongest split of a segment (CUSUM scan, segments of at least
    ``min_size`` points) is kept when its permutation p-value is below ``alpha``; both halves
    are then searched again. Afterwards each split must move the median of its neighbouring segments
    by more than ``max(min_effect, noise_factor * noise * 1.25 * sqrt(1/n_before + 1/n_after))``
    (``noise``: relative sd of one point, default ``estimate_series_noise(medians, samples)``); splits
    that do not are dropped and the neighbours re-measured until none changes. Deterministic for a
    given ``seed``.
    """
    _check_direction(direction)
    xs = _floats("medians", medians)
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
        split = _best_split(xs[lo:hi], min_size, permutations, alpha, rng)
        if split is None:
            continue
        at, p = split
        found[lo + at] = p
        stack += [(lo, lo + at), (lo + at, hi)]
    return _filter_by_effect(xs, found, direction, noise, min_effect, noise_factor)


def _filter_by_effect(xs: list[float], found: dict[int, float], direction: str, noise: float,
                      min_effect: float, noise_factor: float) -> list[ChangePoint]:
    splits = sorted(found)
    while True:
        bounds = [0] + splits + [len(xs)]
        points, weakest = [], None
        for i, at in enumerate(splits):
            before, after = xs[bounds[i]:at], xs[at:bounds[i + 2]]
            mb, ma = median(before), median(after)
            sd = _MEDIAN_SE * noise * math.sqrt(1.0 / len(before) + 1.0 / len(after))
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
