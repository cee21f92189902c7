"""hisparse.track.policy: the one regression rule of compare and the gate (expected values by hand)."""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from hisparse.results.model import load_run
from hisparse.track import policy as pol


def samples(level, noise, n=10, seed=0):
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for _ in range(n)]


# ------------------------------------------------------------------ noise estimates and helpers


def test_worse_by_respects_direction():
    assert pol.worse_by(100.0, 110.0, pol.LOWER) == pytest.approx(0.10)  # slower time: worse
    assert pol.worse_by(100.0, 110.0, pol.HIGHER) == pytest.approx(-0.10)  # more GB/s: better
    assert pol.worse_by(50.0, 40.0, pol.HIGHER) == pytest.approx(0.20)
    with pytest.raises(ValueError, match="direction"):
        pol.worse_by(1.0, 2.0, "up")


def test_noise_estimates_by_hand():
    # median 10, |deviations| 1,0,1 -> MAD 1 -> 1.4826 / 10
    assert pol.sample_noise([9.0, 10.0, 11.0]) == pytest.approx(0.14826)
    # re-runs 99 and 101: sd = sqrt(2) (n-1 = 1), median 100
    assert pol.rerun_noise([99.0, 101.0]) == pytest.approx(math.sqrt(2) / 100)
    # one step in a flat series changes one difference: median |diff| is 0 -> no noise
    assert pol.series_noise([10, 10, 10, 20, 20, 20]) == 0.0
    # alternating 99/101: every |diff| is 2 -> 2 / (0.6745 sqrt 2), relative to the median 99
    assert pol.series_noise([99, 101, 99, 101, 99]) == pytest.approx(2 / (0.6745 * math.sqrt(2)) / 99)
    assert pol.effect_threshold(0.005, 0.01, 3.0) == pytest.approx(0.03)
    assert pol.effect_threshold(0.005, 0.0001, 3.0) == 0.005


# ------------------------------------------------------------------ the policy itself


def test_policy_defaults_are_the_documented_ones():
    p = pol.DEFAULT_POLICY
    assert (p.alpha, p.noise_factor, p.min_effect, p.min_effect_unknown_noise) == (0.01, 3.0, 0.005, 0.05)
    assert (p.confirm, p.history_min_runs, p.history_window, p.trend_alpha) == (True, 3, 30, 0.05)


@pytest.mark.parametrize("field,value,message", [
    ("alpha", 0.0, "alpha: must be in (0, 1), got 0.0"),
    ("trend_alpha", 1.5, "trend_alpha: must be in (0, 1), got 1.5"),
    ("min_effect", -0.01, "min_effect: must be a finite number >= 0, got -0.01"),
    ("noise_factor", math.nan, "noise_factor: must be a finite number >= 0, got nan"),
    ("min_samples", 1, "min_samples: must be >= 2, got 1"),
])
def test_bad_policy_names_the_field(field, value, message):
    with pytest.raises(ValueError) as e:
        replace(pol.DEFAULT_POLICY, **{field: value})
    assert str(e.value) == message


def test_floor_depends_on_what_is_known_of_the_run_to_run_noise():
    # 3% slower, 0.1% within-run noise: past the 0.5% floor, short of the lone-pair 5% floor
    base, head = samples(100.0, 0.001, seed=21), samples(103.0, 0.001, seed=22)
    lone = pol.judge(base, head)
    assert lone.status == pol.UNCHANGED and lone.threshold == 0.05 and lone.significant
    screening = pol.judge(base, head, screening=True)  # the gate's first look: a re-run follows
    assert screening.status == pol.REGRESSED and screening.threshold == 0.005
    known = pol.judge(base, head, run_noise=0.001)  # history: 3 * sqrt(2) * 0.1% = 0.42% < 0.5%
    assert known.status == pol.REGRESSED and known.threshold == 0.005


# ------------------------------------------------------------------ the verdict + confirm


def test_judge_flags_slowdown_and_respects_direction():
    base = samples(100.0, 0.002, seed=1)
    slow = samples(105.0, 0.002, seed=2)
    v = pol.judge(base, slow, screening=True)
    assert v.status == pol.REGRESSED and v.regressed
    assert v.worse_by == pytest.approx(0.05, abs=0.005)
    assert v.ratio == pytest.approx(1.05, abs=0.005)
    assert v.p_value < 0.001
    # same numbers as GB/s (higher is better): an improvement, not a failure
    g = pol.judge(base, slow, screening=True, direction=pol.HIGHER)
    assert g.status == pol.IMPROVED and not g.regressed


def test_judge_needs_effect_beyond_noise_not_just_significance():
    base = samples(100.0, 0.0005, seed=3)
    head = samples(100.3, 0.0005, seed=4)  # +0.3%: significant with this little noise, below the 0.5% floor
    v = pol.judge(base, head, screening=True)
    assert v.p_value < 0.01 and v.status == pol.UNCHANGED
    # a case whose run-to-run noise is 2% needs more than 3 * sqrt(2) * 2% = 8.5%
    base2, head2 = samples(100.0, 0.001, seed=5), samples(106.0, 0.001, seed=6)
    assert pol.judge(base2, head2, screening=True).regressed
    v2 = pol.judge(base2, head2, run_noise=0.02)
    assert not v2.regressed and v2.threshold == pytest.approx(3 * math.sqrt(2) * 0.02)


def test_judge_insufficient_samples_never_fails():
    v = pol.judge([1.0, 1.0], [5.0, 5.0])
    assert v.status == pol.INSUFFICIENT and not v.regressed and v.worse_by == 4.0


def test_confirm_protocol():
    base = samples(100.0, 0.002, seed=7)
    bad = pol.judge(base, samples(110.0, 0.002, seed=8), screening=True)
    good = pol.judge(base, samples(100.0, 0.002, seed=9), screening=True)
    assert pol.confirm(good).status == "pass"
    suspect = pol.confirm(bad)
    assert suspect.status == "suspect" and suspect.needs_rerun and not suspect.failed
    assert pol.confirm(bad, bad).failed
    un = pol.confirm(bad, good)
    assert un.status == "unconfirmed" and not un.failed and un.final is good


def test_judge_with_confirm_uses_the_rerun_spread_without_history():
    base = samples(100.0, 0.001, seed=30)
    head, rerun = samples(104.0, 0.001, seed=31), samples(100.5, 0.001, seed=32)
    d = pol.judge_with_confirm(base, head, rerun)
    # the two head medians differ by ~3.5%: that spread is the noise of the confirming verdict
    spread = pol.rerun_noise([pol.median(head), pol.median(rerun)])
    assert d.status == "unconfirmed" and d.second.noise == pytest.approx(math.sqrt(2) * spread)
    assert pol.judge_with_confirm(base, head).status == "suspect"
    # with the confirm rule off, the first verdict is final and judged as a lone pair (5% floor)
    off = replace(pol.DEFAULT_POLICY, confirm=False)
    assert pol.judge_with_confirm(base, head, policy=off).status == "pass"
    assert pol.judge_with_confirm(base, samples(108.0, 0.001, seed=33), policy=off).status == "confirmed"


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
        confirmed += pol.judge_with_confirm(base, run(), run(), noise=0.014).failed
    assert confirmed / 300 <= 0.01


def test_lone_pair_false_alarms_on_reruns_of_one_commit():
    # compare's situation: one pair, no history, no re-run. Runs with 1.4% run-to-run noise and only
    # 0.3% within-run noise (the within-run noise hides the between-run shifts): the 5% lone-pair floor
    # keeps false alarms rare, the 0.5% floor would flag most pairs.
    rng = random.Random(6)

    def run():
        off = rng.gauss(0, 0.014)
        return [100 * (1 + off + rng.gauss(0, 0.003)) for _ in range(10)]

    pairs = [(run(), run()) for _ in range(300)]
    lone = sum(pol.judge(a, b).regressed for a, b in pairs) / 300
    screening = sum(pol.judge(a, b, screening=True).regressed for a, b in pairs) / 300
    assert lone <= 0.03 and screening >= 0.25  # expected: P(N(0, 1.98%) > 5%) = 0.6%; about 40%


H200_RERUNS = Path(__file__).resolve().parents[2] / "results" / "detector" / "h200-sxm-2026-11-29" / "runs"


def test_lone_pair_false_alarms_on_nine_h200_reruns_of_one_tree():
    # docs/regression.md "What the policy promises": every ordered pair of 9 re-runs of one tree on an
    # H200 (16 cases) judged as compare does. 5% floor: 7 of 1152 case verdicts (0.6%) are false
    # alarms, all in lru_sequential/upstream/b64 (2.4% run-to-run sd); the 0.5% floor flags 10%.
    runs = [load_run(p) for p in sorted(H200_RERUNS.glob("*.json"))]
    assert len(runs) == 9
    pairs = [(a.case(c).samples_us, b.case(c).samples_us, c)
             for a, b in itertools.permutations(runs, 2) for c in a.case_ids()]
    assert len(pairs) == 72 * 16
    lone = [c for a, b, c in pairs if pol.judge(a, b).regressed]
    assert len(lone) / len(pairs) <= 0.01
    assert set(lone) == {"lru_sequential/upstream/b64/s4/k2048/h4096/i576/pdl0"}
    low_floor = sum(pol.judge(a, b, screening=True).regressed for a, b, _ in pairs)
    assert low_floor / len(pairs) >= 0.05
