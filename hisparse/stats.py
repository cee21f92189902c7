"""Statistics over raw samples: pure functions, no I/O, no torch (pyperf practice 8: statistics are
derived from the stored samples, never stored instead of them).

- ``summary``: median, quartiles (linear interpolation between order statistics, numpy's default
  "type 7" definition), IQR, min, max, mean.
- ``mann_whitney_u``: two-sample rank test. Exact null distribution (Gaussian binomial coefficients,
  integer arithmetic) when there are no ties and the samples are small; otherwise the normal
  approximation with tie correction and continuity correction. Same definitions as
  ``scipy.stats.mannwhitneyu`` (``method="exact"`` / ``"asymptotic"``, ``use_continuity=True``);
  scipy is not a dependency, so the tests check hand-computed cases.
- ``bootstrap_ratio_ci``: percentile bootstrap CI of median(b) / median(a); with each side's round
  sizes it resamples rounds first, then samples within them (a two-level bootstrap: samples of one
  round share a placement and are not independent).
- ``modes``: a two-mode split of the samples when they clearly fall into two separated groups (the
  median of such a sample sits in whichever group holds more than half, so it moves with their mix).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

# Exact U distribution up to this many (n1 * n2) cells: the polynomial has n1*n2+1 integer
# coefficients and is built in O(min(n1,n2) * n1 * n2) additions (2,500 -> well under 10 ms).
EXACT_MAX_CELLS = 2500


# A two-mode split (``modes``) needs each group to hold at least this share of the samples (and 3
# samples), a gap between the groups of at least MODE_MIN_GAP x the median, and at least
# MODE_SEPARATION x the wider group's IQR. On normal samples (n = 30..90) the largest gap inside the
# middle 80% stays well under one group's IQR, so the rule does not split unimodal noise; an H200 case
# whose replays alternated between 53.2 and 55.2 us (gap 1.4 us, group IQRs <= 0.3 us) is split.
MODE_MIN_FRACTION = 0.1
MODE_MIN_SAMPLES = 20  # with 10 normal samples the rule split ~3% of them (seeded check, 2000 draws)
MODE_MIN_GAP = 0.01
MODE_SEPARATION = 2.0


@dataclass(frozen=True)
class Mode:
    center: float  # median of the group
    fraction: float  # share of the samples in the group
    low: float
    high: float

    def to_dict(self, unit: str = "us") -> dict[str, float]:
        return {f"center_{unit}": self.center, "fraction": self.fraction,
                f"low_{unit}": self.low, f"high_{unit}": self.high}


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    mean: float
    modes: tuple[Mode, ...] = ()  # two groups when the samples are bimodal, else empty

    def to_dict(self, unit: str = "us") -> dict[str, Any]:
        """The ``stats`` object of a result file: ``{"n", "median_us", "q1_us", ...}``, plus ``modes``
        (list of ``{"center_us", "fraction", "low_us", "high_us"}``) only for a bimodal sample."""
        out: dict[str, Any] = {"n": self.n}
        for key in ("median", "q1", "q3", "iqr", "min", "max", "mean"):
            out[f"{key}_{unit}"] = getattr(self, key)
        if self.modes:
            out["modes"] = [m.to_dict(unit) for m in self.modes]
        return out


def _as_floats(name: str, samples: Sequence[float]) -> list[float]:
    values = [float(x) for x in samples]
    if not values:
        raise ValueError(f"{name}: needs at least one sample")
    if any(math.isnan(x) for x in values):
        raise ValueError(f"{name}: NaN in samples")
    return values


def quantile(samples: Sequence[float], q: float) -> float:
    """Quantile ``q`` in [0, 1] by linear interpolation between order statistics (numpy's default)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q: must be in [0, 1], got {q}")
    xs = sorted(_as_floats("samples", samples))
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(samples: Sequence[float]) -> float:
    return quantile(samples, 0.5)


def summary(samples: Sequence[float], replays: Sequence[float] | None = None) -> Summary:
    """Median, quartiles, IQR, min, max and mean of raw samples (at least one); ``modes`` of
    ``replays`` where each sample averaged several replays (their modes are what a reader needs to
    see), else of the samples."""
    xs = _as_floats("samples", samples)
    q1, q3 = quantile(xs, 0.25), quantile(xs, 0.75)
    return Summary(
        n=len(xs), median=quantile(xs, 0.5), q1=q1, q3=q3, iqr=q3 - q1,
        min=min(xs), max=max(xs), mean=math.fsum(xs) / len(xs), modes=modes(replays or xs),
    )


def modes(samples: Sequence[float], *, min_fraction: float = MODE_MIN_FRACTION, min_gap: float = MODE_MIN_GAP,
          separation: float = MODE_SEPARATION) -> tuple[Mode, ...]:
    """Two groups (low, high) when the samples split at one gap into clearly separated modes, else ().

    Needs at least MODE_MIN_SAMPLES samples. The split is at the largest gap between consecutive sorted samples that leaves each side at least
    ``max(3, min_fraction * n)`` samples; it counts when that gap is >= ``min_gap`` x the median and
    >= ``separation`` x the larger of the two sides' IQRs. Why report it: a median of such a sample
    lies in the group that holds the majority, so two runs with the same two modes but a different
    mix can disagree by up to the gap; the mode centres are the stable figures."""
    xs = sorted(_as_floats("samples", samples))
    n = len(xs)
    least = max(3, math.ceil(min_fraction * n))
    if n < max(MODE_MIN_SAMPLES, 2 * least):
        return ()
    cut = max(range(least, n - least + 1), key=lambda i: xs[i] - xs[i - 1])
    low, high = xs[:cut], xs[cut:]
    gap = high[0] - low[-1]
    spread = max(quantile(low, 0.75) - quantile(low, 0.25), quantile(high, 0.75) - quantile(high, 0.25))
    if gap < min_gap * abs(quantile(xs, 0.5)) or gap < separation * spread or gap <= 0:
        return ()
    return tuple(Mode(center=quantile(g, 0.5), fraction=len(g) / n, low=g[0], high=g[-1]) for g in (low, high))


# ---------------------------------------------------------------------------------------------
# Mann-Whitney U


@dataclass(frozen=True)
class MannWhitneyResult:
    u1: float  # U statistic of the first sample: #{(i, j): x_i > y_j} + 0.5 * #{x_i == y_j}
    u2: float  # n1 * n2 - u1
    p_value: float
    method: str  # "exact" | "asymptotic"
    alternative: str


def rank_sum(x: Sequence[float], y: Sequence[float]) -> tuple[float, bool]:
    """Sum of the (mid)ranks of ``x`` in the pooled sample, and whether there were ties."""
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    r1, ties, i = 0.0, False, 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        if j > i:
            ties = True
        mid = (i + j) / 2 + 1  # ranks are 1-based
        r1 += mid * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        i = j + 1
    return r1, ties


def _tie_term(values: Sequence[float]) -> float:
    """sum over tie groups of (t^3 - t)."""
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return float(sum(t**3 - t for t in counts.values()))


def u_distribution(n1: int, n2: int) -> tuple[int, ...]:
    """Number of arrangements with U = u, for u = 0..n1*n2 (no ties); they sum to C(n1+n2, n1).

    These are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q =
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), m = min(n1, n2), n = max(n1, n2); each division by
    (1 - q^i) is exact, i.e. a running sum with stride i.
    """
    return _u_distribution(min(n1, n2), max(n1, n2))


# Cached by sizes: a dashboard judges thousands of pairs of a few sizes (10 vs 10 samples, 30 vs 30
# with rounds), and recomputing this O(m^2 n) loop for each made `hisparse-bench dashboard --no-plots`
# over the 70 committed run files take 11.5 s instead of 7.2 (same pages).
@lru_cache(maxsize=256)
def _u_distribution(m: int, n: int) -> tuple[int, ...]:
    size = m * n + 1
    coeffs = [0] * size
    coeffs[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        for u in range(size - 1, shift - 1, -1):  # multiply by (1 - q^(n+i)), truncated: degree stays <= m*n
            coeffs[u] -= coeffs[u - shift]
        for u in range(i, size):  # divide by (1 - q^i)
            coeffs[u] += coeffs[u - i]
    return tuple(coeffs)


def _exact_p(u1: float, n1: int, n2: int, alternative: str) -> float:
    counts = u_distribution(n1, n2)
    total = sum(counts)
    u = int(round(u1))
    p_le = sum(counts[: u + 1]) / total  # P(U <= u1)
    p_ge = sum(counts[u:]) / total  # P(U >= u1)
    if alternative == "less":
        return p_le
    if alternative == "greater":
        return p_ge
    return min(1.0, 2.0 * min(p_le, p_ge))


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _asymptotic_p(u1: float, n1: int, n2: int, tie_term: float, alternative: str) -> float:
    n = n1 + n2
    mu = n1 * n2 / 2.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0.0:  # every value identical: no evidence of any shift
        return 1.0
    sigma = math.sqrt(var)
    if alternative == "greater":
        return _normal_sf((u1 - mu - 0.5) / sigma)
    if alternative == "less":
        return _normal_sf((mu - u1 - 0.5) / sigma)
    z = (abs(u1 - mu) - 0.5) / sigma
    return min(1.0, 2.0 * _normal_sf(z))


def mann_whitney_u(
    x: Sequence[float], y: Sequence[float], *, alternative: str = "two-sided", method: str = "auto"
) -> MannWhitneyResult:
    """Mann-Whitney U test of ``x`` against ``y``.

    ``alternative``: "two-sided", "greater" (x tends to be larger), "less". ``method``: "auto" (exact
    when there are no ties and n1*n2 <= EXACT_MAX_CELLS, else asymptotic), "exact", "asymptotic".
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative: must be 'two-sided', 'greater' or 'less', got {alternative!r}")
    if method not in ("auto", "exact", "asymptotic"):
        raise ValueError(f"method: must be 'auto', 'exact' or 'asymptotic', got {method!r}")
    xs, ys = _as_floats("x", x), _as_floats("y", y)
    n1, n2 = len(xs), len(ys)
    r1, ties = rank_sum(xs, ys)
    u1 = r1 - n1 * (n1 + 1) / 2.0
    u2 = n1 * n2 - u1
    if method == "exact" and ties:
        raise ValueError("method='exact': the exact distribution assumes no ties; use 'asymptotic'")
    use_exact = method == "exact" or (method == "auto" and not ties and n1 * n2 <= EXACT_MAX_CELLS)
    if use_exact:
        p = _exact_p(u1, n1, n2, alternative)
    else:
        p = _asymptotic_p(u1, n1, n2, _tie_term(xs + ys), alternative)
    return MannWhitneyResult(u1=u1, u2=u2, p_value=p, method="exact" if use_exact else "asymptotic",
                             alternative=alternative)


# ---------------------------------------------------------------------------------------------
# Bootstrap


def _split(samples: np.ndarray, sizes: Sequence[int] | None) -> list[np.ndarray]:
    """``samples`` cut into consecutive groups of ``sizes`` (one group when sizes is None or does not add up)."""
    if not sizes or sum(sizes) != samples.size or any(int(k) <= 0 for k in sizes):
        return [samples]
    edges = np.cumsum([0, *[int(k) for k in sizes]])
    return [samples[edges[i]:edges[i + 1]] for i in range(len(sizes))]


def _resampled_medians(groups: list[np.ndarray], n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``n_resamples`` bootstrap samples: pick len(groups) groups with replacement, then
    resample each picked group's values with replacement (one group: the ordinary bootstrap)."""
    if len(groups) == 1:
        x = groups[0]
        return np.median(x[rng.integers(0, x.size, size=(n_resamples, x.size))], axis=1)
    if len({g.size for g in groups}) == 1:  # the usual case (equal rounds): vectorised
        table, (g, n) = np.stack(groups), (len(groups), groups[0].size)
        picked = rng.integers(0, g, size=(n_resamples, g, 1))
        values = table[picked, rng.integers(0, n, size=(n_resamples, g, n))]
        return np.median(values.reshape(n_resamples, g * n), axis=1)
    out = np.empty(n_resamples)
    for r in range(n_resamples):
        picked = rng.integers(0, len(groups), size=len(groups))
        out[r] = np.median(np.concatenate([(g := groups[k])[rng.integers(0, g.size, size=g.size)] for k in picked]))
    return out


def bootstrap_ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    rounds_a: Sequence[int] | None = None,
    rounds_b: Sequence[int] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap CI of median(b) / median(a) (a = base, b = head; > 1 means b is slower).

    Both samples are resampled independently with replacement; deterministic for a given seed.
    ``rounds_a`` / ``rounds_b``: the side's samples per timing round, in order (a result file's
    ``timing.samples_per_round``); with two or more rounds that side is resampled in two levels, so
    a placement that moved one round widens the interval as it should. Returns (nan, nan) when a
    resampled base median can be 0.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples: must be >= 1, got {n_resamples}")
    xa = np.asarray(_as_floats("a", a))
    xb = np.asarray(_as_floats("b", b))
    rng = np.random.default_rng(seed)
    ma = _resampled_medians(_split(xa, rounds_a), n_resamples, rng)
    mb = _resampled_medians(_split(xb, rounds_b), n_resamples, rng)
    if np.any(ma == 0):
        return (math.nan, math.nan)
    ratios = mb / ma
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return float(lo), float(hi)


def ratio_of_medians(a: Sequence[float], b: Sequence[float]) -> float:
    """median(b) / median(a); nan when median(a) is 0."""
    ma = median(a)
    return median(b) / ma if ma != 0 else math.nan
