"""hisparse.track.changepoint on synthetic series with known change points (expected values by hand);
the A/B verdict and its noise estimates are tests/track/test_policy.py's."""
from __future__ import annotations

import random

import pytest

from hisparse.track import changepoint as cp


def noisy_series(n, *, noise, step_at=None, step=0.0, level=100.0, seed=0):
    rng = random.Random(seed)
    return [level * (1 + (step if step_at is not None and i >= step_at else 0.0)) * (1 + rng.gauss(0, noise))
            for i in range(n)]


def samples(level, noise, n=10, seed=0):
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for _ in range(n)]


# ------------------------------------------------------------------ trend change points


@pytest.mark.parametrize("direction,step,kind", [
    (cp.LOWER, 0.05, cp.REGRESSION),  # time up 5%: regression
    (cp.LOWER, -0.05, cp.IMPROVEMENT),
    (cp.HIGHER, 0.05, cp.IMPROVEMENT),  # GB/s up 5%: improvement
    (cp.HIGHER, -0.05, cp.REGRESSION),
])
def test_step_found_at_index_with_direction(direction, step, kind):
    xs = noisy_series(30, noise=0.003, step_at=18, step=step, seed=11)
    found = cp.detect_changes(xs, direction=direction)
    assert [c.index for c in found] == [18]
    c = found[0]
    assert c.kind == kind
    assert c.change == pytest.approx(step, abs=0.006)
    assert c.before_median == pytest.approx(100.0, rel=0.006)
    assert c.after_median == pytest.approx(100.0 * (1 + step), rel=0.006)


def test_two_steps_both_found():
    xs = noisy_series(40, noise=0.002, seed=12)
    xs = [x * (1.08 if 12 <= i < 28 else 1.0) for i, x in enumerate(xs)]  # up at 12, back down at 28
    found = cp.detect_changes(xs, direction=cp.LOWER)
    assert [(c.index, c.kind) for c in found] == [(12, cp.REGRESSION), (28, cp.IMPROVEMENT)]


def test_step_at_the_end_found_with_min_size_2():
    xs = noisy_series(20, noise=0.002, step_at=17, step=0.10, seed=13)
    assert [c.index for c in cp.detect_changes(xs, direction=cp.LOWER)] == [17]


def test_single_outlier_is_not_a_change_point():
    xs = noisy_series(30, noise=0.002, seed=14)
    xs[15] *= 1.5
    assert cp.detect_changes(xs, direction=cp.LOWER) == []


def test_step_below_case_noise_is_not_reported():
    # 2% step in a case whose per-commit noise is 3%: permutation may see it, the effect filter must not
    xs = noisy_series(30, noise=0.03, step_at=15, step=0.02, seed=15)
    assert cp.detect_changes(xs, direction=cp.LOWER) == []


def test_detector_is_deterministic_for_a_seed():
    xs = noisy_series(30, noise=0.01, step_at=10, step=0.06, seed=16)
    assert cp.detect_changes(xs, direction=cp.LOWER, seed=3) == cp.detect_changes(xs, direction=cp.LOWER, seed=3)


# Stated rates (docs/regression.md): on pure noise, at most 2% of 30-commit series raise any alarm,
# at every realistic noise level (docs/semantics.md §H5: 0.03%..2.9% spread).
FALSE_ALARM_BOUND = 0.02


@pytest.mark.parametrize("noise", [0.0003, 0.003, 0.014])
def test_false_alarm_rate_on_pure_noise(noise):
    n_series = 150
    alarms = 0
    for k in range(n_series):
        rng = random.Random(1000 + k)
        meds, per_commit = [], []
        for _ in range(30):  # commit-level offset (between runs) + 10 samples (within a run)
            off = rng.gauss(0, noise)
            s = [100 * (1 + off + rng.gauss(0, noise)) for _ in range(10)]
            per_commit.append(s)
            meds.append(cp.median(s))
        alarms += bool(cp.detect_changes(meds, direction=cp.LOWER, samples=per_commit, seed=k))
    assert alarms / n_series <= FALSE_ALARM_BOUND


def test_change_points_index_into_the_commits_and_skip_untimed_ones():
    # 12 commits, a 6% step at commit 7; commits 2 and 9 have no timing (None / empty)
    per_commit = [samples(100.0 * (1.06 if i >= 7 else 1.0), 0.002, seed=40 + i) for i in range(12)]
    per_commit[2], per_commit[9] = None, []
    (c,) = cp.change_points(per_commit)
    assert c.index == 7 and c.kind == cp.REGRESSION
    assert c.change == pytest.approx(0.06, abs=0.004)
    # the same as detecting on the 10 timed commits, where the step is the 6th point
    timed = [s for s in per_commit if s]
    (d,) = cp.detect_changes([cp.median(s) for s in timed], direction=cp.LOWER, samples=timed)
    assert d.index == 6 and d.p_value == c.p_value and d.threshold == c.threshold
    assert cp.change_points([[1.0, 1.0]] * 3 + [None] * 5) == []  # fewer than 4 timed commits
