"""THE regression policy: one rule for "is B slower than A", used by `hisparse-bench compare` and by the
nightly gate (`hisparse-bench gate`, track/gate.py). Pure Python, no I/O. docs/regression.md says what it
promises and what was measured.

A verdict on one case compares the raw samples of a base run (A) and a head run (B):

- "regressed": Mann-Whitney U two-sided p < ``alpha`` AND the medians moved in the bad direction by
  more than ``threshold = max(floor, noise_factor * noise)``;
- "improved":  the same in the good direction;
- "unchanged": anything else (a significant shift below the threshold is noise for a gate);
- "insufficient": fewer than ``min_samples`` on a side (never a regression);
- "failed": a side has no timing (built by compare/gate, not here).

``noise`` is the relative sd of the difference of the two medians: ``sqrt(2) *`` the case's run-to-run
noise when it is known, never less than the within-run noise the samples show. ``floor`` is
``min_effect`` when the run-to-run noise is known (a history of earlier runs, or the spread of a
confirming re-run) or a confirming re-run will decide; ``min_effect_unknown_noise`` when nothing about
the case's run-to-run noise is known (a lone A/B pair: compare). The within-run noise underestimates
the run-to-run noise, so a lone pair needs the higher floor: on 9 re-runs of one tree on an H200 the
0.5% floor flags 10% of the case verdicts, the 5% floor 0.6% (docs/regression.md).

The confirm rule (``confirm``): a first regressed verdict is only "suspect"; it stands ("confirmed")
when a re-measured head is regressed against the same base too. compare is this policy without history
and without the confirm re-run; the gate is the same policy with history noise and the confirm re-run.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

from hisparse import stats

LOWER = "lower"  # lower is better: latencies (every *_us metric)
HIGHER = "higher"  # higher is better: throughput (gbps)
METRIC_DIRECTION = {"time_us": LOWER, "median_us": LOWER, "gbps": HIGHER}

REGRESSED, IMPROVED, UNCHANGED, INSUFFICIENT, FAILED = "regressed", "improved", "unchanged", "insufficient", "failed"
STATUSES = (REGRESSED, IMPROVED, UNCHANGED, INSUFFICIENT, FAILED)

# Robust-scale constants: MAD -> sigma for a normal, and the sd of a sample median relative to the
# sd of one observation (sqrt(pi/2) for a normal, large n).
_MAD_TO_SD = 1.4826
MEDIAN_SE = math.sqrt(math.pi / 2.0)


@dataclass(frozen=True)
class RegressionPolicy:
    """Every number of the regression rule (module docstring). Defaults are the shipped policy."""

    alpha: float = 0.01  # Mann-Whitney U significance on the raw samples (10+ per side)
    noise_factor: float = 3.0  # an effect must exceed this many sd of the difference of medians
    # Floor when the case's run-to-run noise is known, or a confirming re-run decides: stops the
    # quietest cases (0.03% spread) from alerting on 0.1% changes nobody would act on.
    min_effect: float = 0.005
    # Floor when it is not (a lone A/B pair): the within-run noise misses run-to-run shifts of up to
    # 2.4% (measured on the H200), so the rule falls back to the 5% compare always used.
    min_effect_unknown_noise: float = 0.05
    min_samples: int = 3  # fewer on a side: "insufficient"
    confirm: bool = True  # the gate: a first regression is suspect until a re-run regresses too
    history_min_runs: int = 3  # earlier runs needed for a run-to-run noise estimate
    history_window: int = 30  # the newest earlier runs used for it (a month of nights)
    # Trend change points (dashboard): a permutation test over per-commit medians cannot reach
    # p < 0.01 with fewer than ~12 commits; the noise-scaled effect filter keeps false alarms down.
    trend_alpha: float = 0.05

    def __post_init__(self) -> None:
        for name in ("alpha", "trend_alpha"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name}: must be in (0, 1), got {getattr(self, name)}")
        for name in ("noise_factor", "min_effect", "min_effect_unknown_noise"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
        for name, low in (("min_samples", 2), ("history_min_runs", 2), ("history_window", 2)):
            if getattr(self, name) < low:
                raise ValueError(f"{name}: must be >= {low}, got {getattr(self, name)}")

    def floor(self, *, noise_known: bool) -> float:
        return self.min_effect if noise_known else self.min_effect_unknown_noise

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEFAULT_POLICY = RegressionPolicy()


@dataclass(frozen=True)
class Verdict:
    """One case (one metric) of B against A under the policy. ``worse_by`` > 0 means B is worse."""

    case_id: str | None
    status: str  # one of STATUSES
    base_median: float | None
    head_median: float | None
    worse_by: float | None  # relative change of the medians, signed by direction: > 0 worse
    p_value: float | None  # two-sided Mann-Whitney U on the raw samples
    threshold: float | None  # relative change needed: max(floor, noise_factor * noise)
    noise: float | None  # relative sd of the difference of the medians behind the threshold
    alpha: float
    n_base: int
    n_head: int
    direction: str = LOWER
    metric: str = "time_us"
    ci_low: float | None = None  # bootstrap CI of the head/base median ratio (compare fills it)
    ci_high: float | None = None
    note: str | None = None  # "failed in B", "bimodal in A", ...

    @property
    def ratio(self) -> float | None:
        """head / base median (> 1: B is larger; for times, slower)."""
        if self.base_median is None or self.head_median is None:
            return None
        return self.head_median / self.base_median if self.base_median else math.nan

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < self.alpha

    @property
    def regressed(self) -> bool:
        return self.status == REGRESSED

    @property
    def newly_failed(self) -> bool:
        """The base timed this case and the head did not (e.g. a correctness failure)."""
        return self.status == FAILED and self.note == "failed in B"

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# ---------------------------------------------------------------------------------------------
# Noise estimates (all relative to the median: 0.01 = 1%)


def check_direction(direction: str) -> None:
    if direction not in (LOWER, HIGHER):
        raise ValueError(f"direction: must be {LOWER!r} (lower is better) or {HIGHER!r}, got {direction!r}")


def floats(name: str, values: Sequence[float]) -> list[float]:
    xs = [float(v) for v in values]
    if any(math.isnan(v) or math.isinf(v) for v in xs):
        raise ValueError(f"{name}: NaN or infinite value")
    return xs


median = stats.median


def worse_by(before: float, after: float, direction: str) -> float:
    """Relative change from ``before`` to ``after``, signed so that > 0 means worse."""
    check_direction(direction)
    if before == 0:
        return math.nan
    change = (after - before) / abs(before)
    return change if direction == LOWER else -change


def sample_noise(samples: Sequence[float]) -> float:
    """Relative robust sd of single samples: 1.4826 * MAD / |median| (0 for fewer than 2)."""
    xs = floats("samples", samples)
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    if m == 0:
        return math.nan
    return _MAD_TO_SD * median([abs(x - m) for x in xs]) / abs(m)


def median_noise(samples: Sequence[float]) -> float:
    """Relative sd of the median of ``samples`` (within-run noise only): sqrt(pi/2) * sd / sqrt(n)."""
    xs = floats("samples", samples)
    if len(xs) < 2:
        return 0.0
    return MEDIAN_SE * sample_noise(xs) / math.sqrt(len(xs))


def rerun_noise(medians: Sequence[float]) -> float:
    """Relative sd of a run's median across re-runs of one commit (between-run noise).

    Sample sd for 2-4 re-runs, the robust MAD form from 5 on. 0 for fewer than 2.
    """
    xs = floats("medians", medians)
    if len(xs) >= 5:
        return sample_noise(xs)
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    if m == 0:
        return math.nan
    mean = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) / abs(m)


def series_noise(values: Sequence[float]) -> float:
    """Relative sd of one point of a series with level shifts, from successive differences.

    A step changes one difference, so the median absolute difference stays a noise estimate:
    for iid normal points, median |x[i+1] - x[i]| = 0.6745 * sqrt(2) * sd. 0 for fewer than 3 points.
    """
    xs = floats("values", values)
    if len(xs) < 3:
        return 0.0
    m = median(xs)
    if m == 0:
        return math.nan
    diffs = [abs(b - a) for a, b in zip(xs, xs[1:])]
    return median(diffs) / (0.6745 * math.sqrt(2.0)) / abs(m)


def effect_threshold(min_effect: float, noise: float, noise_factor: float) -> float:
    """The relative change a verdict needs: ``max(min_effect, noise_factor * noise)``."""
    if math.isnan(noise):
        return min_effect
    return max(min_effect, noise_factor * noise)


# ---------------------------------------------------------------------------------------------
# The verdict and the confirm rule


def judge(
    base_samples: Sequence[float],
    head_samples: Sequence[float],
    policy: RegressionPolicy = DEFAULT_POLICY,
    *,
    run_noise: float | None = None,
    screening: bool = False,
    direction: str = LOWER,
    case_id: str | None = None,
    metric: str = "time_us",
) -> Verdict:
    """The policy's verdict on raw samples (module docstring).

    ``run_noise``: the case's run-to-run noise, relative sd of one run's median (from a history or
    a re-run; None when unknown). ``screening``: this verdict only decides whether to re-measure (the
    gate's first look, a confirming re-run follows), so the known-noise floor applies."""
    check_direction(direction)
    base, head = floats("base_samples", base_samples), floats("head_samples", head_samples)
    mb = median(base) if base else None
    mh = median(head) if head else None
    if len(base) < policy.min_samples or len(head) < policy.min_samples:
        w = worse_by(mb, mh, direction) if base and head else None
        return Verdict(case_id, INSUFFICIENT, mb, mh, w, None, None, None, policy.alpha, len(base), len(head),
                       direction, metric)
    within = math.hypot(median_noise(base), median_noise(head))
    between = math.sqrt(2.0) * run_noise if run_noise is not None else 0.0
    noise = max(within, between)
    floor = policy.floor(noise_known=run_noise is not None or screening)
    threshold = effect_threshold(floor, noise, policy.noise_factor)
    p = stats.mann_whitney_u(base, head).p_value
    w = worse_by(mb, mh, direction)
    if p < policy.alpha and w > threshold:
        status = REGRESSED
    elif p < policy.alpha and -w > threshold:
        status = IMPROVED
    else:
        status = UNCHANGED
    return Verdict(case_id, status, mb, mh, w, p, threshold, noise, policy.alpha, len(base), len(head),
                   direction, metric)


@dataclass(frozen=True)
class Decision:
    """The confirm rule's outcome for one case.

    ``status``: "pass" (the first verdict is not a regression), "suspect" (it is and no re-run was
    given yet: re-measure the head), "confirmed" (the re-run regressed too: a regression),
    "unconfirmed" (the re-run did not: noise). Only "confirmed" fails.
    """

    status: str
    first: Verdict
    second: Verdict | None = None

    @property
    def failed(self) -> bool:
        return self.status == "confirmed"

    @property
    def needs_rerun(self) -> bool:
        return self.status == "suspect"

    @property
    def final(self) -> Verdict:
        return self.second or self.first


def confirm(first: Verdict, second: Verdict | None = None) -> Decision:
    """A regression stands only if the re-measured head regresses again (only "regressed" fails, so
    the direction must agree). Without ``second`` a regressed first verdict is "suspect"."""
    if not first.regressed:
        return Decision("pass", first, second)
    if second is None:
        return Decision("suspect", first)
    return Decision("confirmed" if second.regressed else "unconfirmed", first, second)


def judge_with_confirm(
    base_samples: Sequence[float],
    head_samples: Sequence[float],
    rerun_samples: Sequence[float] | None = None,
    policy: RegressionPolicy = DEFAULT_POLICY,
    *,
    noise: float | None = None,
    direction: str = LOWER,
    case_id: str | None = None,
    metric: str = "time_us",
) -> Decision:
    """The gate's protocol for one case: judge the head; if it regressed and a re-measured head is
    given, judge that too and ``confirm``. ``noise``: the case's run-to-run noise from its history
    (None when too few earlier runs exist); without it the confirming verdict uses the spread between
    the two head runs, the only between-run evidence there is. With ``policy.confirm`` off the first
    verdict is final: it is judged as a lone pair when no history noise is known."""
    kw = dict(direction=direction, case_id=case_id, metric=metric)
    first = judge(base_samples, head_samples, policy, run_noise=noise, screening=policy.confirm, **kw)
    if not policy.confirm:
        return Decision("confirmed" if first.regressed else "pass", first)
    if not first.regressed or rerun_samples is None:
        return confirm(first)
    if noise is None:
        head, rerun = floats("head_samples", head_samples), floats("rerun_samples", rerun_samples)
        noise = rerun_noise([median(head), median(rerun)])
    second = judge(base_samples, rerun_samples, policy, run_noise=noise, **kw)
    return confirm(first, second)
