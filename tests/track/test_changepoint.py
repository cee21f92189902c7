"""hisparse.track.changepoint on synthetic series with known change points (expected values by hand)."""
from __future__ import annotations

import math
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


# ------------------------------------------------------------------ noise estimates and helpers


def test_worse_by_respects_direction():
    assert cp.worse_by(100.0, 110.0, cp.LOWER) == pytest.approx(0.10)  # slower time: worse
    assert cp.worse_by(100.0, 110.0, cp.HIGHER) == pytest.approx(-0.10)  # more GB/s: better
    assert cp.worse_by(50.0, 40.0, cp.HIGHER) == pytest.approx(0.20)
    with pytest.raises(ValueError, match="direction"):
        cp.worse_by(1.0, 2.0, "up")


def test_noise_estimates_by_hand():
    # median 10, |deviations| 1,0,1 -> MAD 1 -> 1.4826 / 10
    assert cp.sample_noise([9.0, 10.0, 11.0]) == pytest.approx(0.14826)
    # re-runs 99 and 101: sd = sqrt(2) (n-1 = 1), median 100
    assert cp.rerun_noise([99.0, 101.0]) == pytest.approx(math.sqrt(2) / 100)
    # one step in a flat series changes one difference: median |diff| is 0 -> no noise
    assert cp.series_noise([10, 10, 10, 20, 20, 20]) == 0.0
    # alternating 99/101: every |diff| is 2 -> 2 / (0.6745 sqrt 2), relative to the median 99
    assert cp.series_noise([99, 101, 99, 101, 99]) == pytest.approx(2 / (0.6745 * math.sqrt(2)) / 99)
    assert cp.effect_threshold(0.005, 0.01, 3.0) == pytest.approx(0.03)
    assert cp.effect_threshold(0.005, 0.0001, 3.0) == 0.005


# ------------------------------------------------------------------ A/B gate + confirm


def test_gate_flags_slowdown_and_respects_direction():
    base = samples(100.0, 0.002, seed=1)
    slow = samples(105.0, 0.002, seed=2)
    v = cp.gate(base, slow, direction=cp.LOWER)
    assert v.status == cp.REGRESSION and v.failed
    assert v.worse_by == pytest.approx(0.05, abs=0.005)
    assert v.p_value < 0.001
    # same numbers as GB/s (higher is better): an improvement, not a failure
    g = cp.gate(base, slow, direction=cp.HIGHER)
    assert g.status == cp.IMPROVEMENT and not g.failed


def test_gate_needs_effect_beyond_noise_not_just_significance():
    base = samples(100.0, 0.0005, seed=3)
    head = samples(100.3, 0.0005, seed=4)  # +0.3%: significant with this little noise, below the 0.5% floor
    v = cp.gate(base, head, direction=cp.LOWER)
    assert v.p_value < 0.01 and v.status == cp.UNCHANGED
    # a case whose run-to-run noise is 2% needs more than 3 * sqrt(2) * 2% = 8.5%
    base2, head2 = samples(100.0, 0.001, seed=5), samples(106.0, 0.001, seed=6)
    assert cp.gate(base2, head2, direction=cp.LOWER).failed
    v2 = cp.gate(base2, head2, direction=cp.LOWER, noise=0.02)
    assert not v2.failed and v2.threshold == pytest.approx(3 * math.sqrt(2) * 0.02)


def test_gate_insufficient_samples_never_fails():
    v = cp.gate([1.0, 1.0], [5.0, 5.0], direction=cp.LOWER)
    assert v.status == cp.INSUFFICIENT and not v.failed


def test_confirm_protocol():
    base = samples(100.0, 0.002, seed=7)
    bad = cp.gate(base, samples(110.0, 0.002, seed=8), direction=cp.LOWER)
    good = cp.gate(base, samples(100.0, 0.002, seed=9), direction=cp.LOWER)
    assert cp.confirm(good).status == "pass"
    suspect = cp.confirm(bad)
    assert suspect.status == "suspect" and suspect.needs_rerun and not suspect.failed
    assert cp.confirm(bad, bad).failed
    un = cp.confirm(bad, good)
    assert un.status == "unconfirmed" and not un.failed


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
# at every realistic noise level (harness.md §5: 0.03%..2.9% spread).
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


def test_gate_false_alarms_on_reruns_of_one_commit():
    # 300 re-run pairs of one commit with 1.4% run-to-run noise, noise known from history: the
    # confirmed false-alarm rate must be ~0 (docs/regression.md)
    rng = random.Random(5)

    def run(slow=0.0):
        off = rng.gauss(0, 0.014)
        return [100 * (1 + slow) * (1 + off + rng.gauss(0, 0.014)) for _ in range(10)]

    confirmed = 0
    for _ in range(300):
        base = run()
        first = cp.gate(base, run(), direction=cp.LOWER, noise=0.014)
        second = cp.gate(base, run(), direction=cp.LOWER, noise=0.014) if first.failed else None
        confirmed += cp.confirm(first, second).failed
    assert confirmed / 300 <= 0.01
