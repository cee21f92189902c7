"""hisparse.stats: summary, Mann-Whitney U (hand-computed cases), bootstrap CI of a ratio, modes."""
import itertools
import math
import random
from collections import Counter

import pytest

from hisparse import stats


def test_summary_matches_hand_computation():
    s = stats.summary([4, 1, 3, 2, 10])
    # sorted 1 2 3 4 10; type-7 quartiles at positions 1 and 3 -> 2 and 4
    assert (s.n, s.median, s.q1, s.q3, s.iqr, s.min, s.max, s.mean) == (5, 3, 2, 4, 2, 1, 10, 4)


def test_quantile_interpolates():
    assert stats.quantile([1, 2, 3, 4], 0.5) == 2.5
    assert stats.quantile([1, 2, 3, 4], 0.25) == pytest.approx(1.75)
    assert stats.median([7]) == 7


def test_summary_to_dict_names_units():
    d = stats.summary([1.0, 2.0]).to_dict()
    assert set(d) == {"n", "median_us", "q1_us", "q3_us", "iqr_us", "min_us", "max_us", "mean_us"}


def test_summary_rejects_empty_and_nan():
    with pytest.raises(ValueError):
        stats.summary([])
    with pytest.raises(ValueError):
        stats.summary([1.0, math.nan])


def _brute_u_distribution(n1, n2):
    counts = Counter()
    for pos in itertools.combinations(range(n1 + n2), n1):
        others = [i for i in range(n1 + n2) if i not in pos]
        counts[sum(1 for a in pos for b in others if a > b)] += 1
    return [counts[u] for u in range(n1 * n2 + 1)]


@pytest.mark.parametrize("n1,n2", [(1, 1), (1, 4), (2, 3), (3, 3), (4, 2), (5, 4)])
def test_u_distribution_matches_enumeration(n1, n2):
    assert list(stats.u_distribution(n1, n2)) == _brute_u_distribution(n1, n2)
    assert sum(stats.u_distribution(n1, n2)) == math.comb(n1 + n2, n1)


def test_u_statistic_complete_separation():
    # x entirely below y: U1 = 0; exact P(U <= 0) = 1/C(6,3) = 1/20, two-sided 0.1
    r = stats.mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert (r.u1, r.u2, r.method) == (0, 9, "exact")
    assert r.p_value == pytest.approx(0.1)
    assert stats.mann_whitney_u([1, 2, 3], [4, 5, 6], alternative="less").p_value == pytest.approx(0.05)
    assert stats.mann_whitney_u([4, 5, 6], [1, 2, 3], alternative="greater").p_value == pytest.approx(0.05)


def test_u_statistic_interleaved_by_hand():
    # x = 1, 5, 6 ; y = 2, 3, 4. Pairs x > y: 1 -> 0, 5 -> 3, 6 -> 3 => U1 = 6.
    r = stats.mann_whitney_u([1, 5, 6], [2, 3, 4])
    assert r.u1 == 6 and r.u2 == 3
    # P(U >= 6) for n1 = n2 = 3: counts [1,1,2,3,3,3,3,2,1,1] -> (3+2+1+1)/20 = 7/20; two-sided 0.7
    assert r.p_value == pytest.approx(0.7)


def test_u_statistic_with_ties_uses_midranks_and_tie_correction():
    # pooled: 1x 2x 2x 2y 3x 4y 5y; the three 2s share rank 3. R1 = 1+3+3+5 = 12, U1 = 12 - 10 = 2.
    r = stats.mann_whitney_u([1, 2, 2, 3], [2, 4, 5])
    assert r.u1 == 2 and r.method == "asymptotic"
    # var = n1 n2 / 12 * ((n+1) - sum(t^3-t)/(n(n-1))) = 1 * (8 - 24/42); z = (|2-6| - 0.5)/sqrt(var)
    z = 3.5 / math.sqrt(8 - 24 / 42)
    assert r.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_all_identical_samples_give_p_one():
    assert stats.mann_whitney_u([5.0] * 10, [5.0] * 10).p_value == 1.0


def test_large_samples_fall_back_to_normal_approximation():
    x = [float(i) for i in range(60)]
    y = [float(i) + 0.5 for i in range(60)]
    r = stats.mann_whitney_u(x, y)
    assert r.method == "asymptotic" and 0.5 < r.p_value <= 1.0


def test_exact_rejects_ties():
    with pytest.raises(ValueError):
        stats.mann_whitney_u([1, 1], [2, 3], method="exact")


def test_exact_and_asymptotic_agree_roughly_for_moderate_n():
    x = [10.0 + 0.1 * i for i in range(10)]
    y = [10.35 + 0.1 * i for i in range(10)]
    e = stats.mann_whitney_u(x, y, method="exact").p_value
    a = stats.mann_whitney_u(x, y, method="asymptotic").p_value
    assert e == pytest.approx(a, abs=0.05)


def test_bootstrap_ratio_ci_brackets_the_ratio_and_is_deterministic():
    a = [100.0 + (i % 5) * 0.2 for i in range(20)]
    b = [110.0 + (i % 5) * 0.2 for i in range(20)]
    lo, hi = stats.bootstrap_ratio_ci(a, b, seed=1)
    assert lo <= stats.ratio_of_medians(a, b) <= hi
    assert 1.09 < lo < hi < 1.11
    assert stats.bootstrap_ratio_ci(a, b, seed=1) == (lo, hi)


def test_bootstrap_ratio_ci_of_identical_runs_contains_one():
    a = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.01, 0.99, 1.0]
    lo, hi = stats.bootstrap_ratio_ci(a, list(reversed(a)))
    assert lo <= 1.0 <= hi


# ---------------------------------------------------------------------------------------------
# Modes


def _two_groups(low_n, high_n):
    """low_n samples 53.0, 53.1, ... 53.0+0.1*(low_n-1) cycling through 5 values, high_n likewise from 55.0."""
    return [53.0 + 0.1 * (i % 5) for i in range(low_n)] + [55.0 + 0.1 * (i % 5) for i in range(high_n)]


def test_modes_split_two_separated_groups():
    xs = _two_groups(13, 17)
    random.Random(0).shuffle(xs)  # order must not matter
    low, high = stats.modes(xs)
    # by hand: low group 13 values of 53.0..53.4 cycling -> sorted median is the 7th = 53.2;
    # high group 17 values of 55.0..55.4 -> the 9th sorted = 55.2
    assert (low.center, low.low, low.high) == pytest.approx((53.2, 53.0, 53.4))
    assert (high.center, high.low, high.high) == pytest.approx((55.2, 55.0, 55.4))
    assert (low.fraction, high.fraction) == pytest.approx((13 / 30, 17 / 30))
    d = stats.summary(xs).to_dict()
    assert [m["center_us"] for m in d["modes"]] == pytest.approx([53.2, 55.2])


def test_modes_leave_unimodal_noise_alone():
    rng = random.Random(1)
    for n in (20, 30, 90):
        for _ in range(200):
            assert stats.modes([100 + rng.gauss(0, 1) for _ in range(n)]) == ()
    assert "modes" not in stats.summary([100 + rng.gauss(0, 1) for _ in range(30)]).to_dict()


def test_modes_need_enough_samples_on_each_side_and_a_real_gap():
    assert stats.modes(_two_groups(28, 2)) == ()  # 2 outliers are not a mode (needs max(3, 10%))
    assert stats.modes(_two_groups(9, 9)) == ()  # fewer than MODE_MIN_SAMPLES
    close = [100.0 + 0.01 * (i % 5) for i in range(15)] + [100.5 + 0.01 * (i % 5) for i in range(15)]
    assert stats.modes(close) == ()  # gap 0.46 < 1% of the median
    assert len(stats.modes(close, min_gap=0.001)) == 2
    wide = [50 + i * 0.5 for i in range(15)] + [60 + i * 0.5 for i in range(15)]
    assert stats.modes(wide) == ()  # gap 3.0 < 2 x the groups' IQR (3.5)


def test_bootstrap_ci_with_rounds_widens_for_a_moved_round_and_matches_iid_without():
    rng = random.Random(3)
    a = [100 + rng.gauss(0, 0.2) for _ in range(20)] + [103 + rng.gauss(0, 0.2) for _ in range(10)]  # round 3 moved
    b = [100 + rng.gauss(0, 0.2) for _ in range(30)]
    iid = stats.bootstrap_ratio_ci(a, b)
    assert stats.bootstrap_ratio_ci(a, b, rounds_a=None, rounds_b=None) == iid  # same draws without rounds
    two_level = stats.bootstrap_ratio_ci(a, b, rounds_a=[10, 10, 10], rounds_b=[10, 10, 10])
    assert two_level[1] - two_level[0] > 1.5 * (iid[1] - iid[0])
    # a round pick that is all the moved round (prob 1/27) puts the base median at ~103: ratio ~0.97
    assert two_level[0] < 0.975 < iid[0]
    assert stats.bootstrap_ratio_ci(a, b, rounds_a=[10, 10, 10], rounds_b=[10, 10, 10]) == two_level  # seeded
    assert stats.bootstrap_ratio_ci(a, b, rounds_a=[5, 15, 10], rounds_b=[10, 10, 10]) != two_level  # unequal: loop
    assert stats.bootstrap_ratio_ci(a, b, rounds_a=[10, 10], rounds_b=None) == iid  # sizes not adding up: one group
