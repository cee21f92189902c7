"""hisparse.track.compare on synthetic samples (same distribution -> unchanged, 10% slower -> regressed), and
`hisparse-bench compare` as a gate: incomparable runs and runs without a common case exit 2."""
import random
from dataclasses import replace

import pytest

from click.testing import CliRunner

from hisparse.cli import main
from hisparse.results.model import write_run
from hisparse.track import policy as pol
from hisparse.track.compare import (any_regression, compare, compare_samples, comparability_warnings,
                                    floor_warnings, gather_floor_shift, incomparable, only_in, resume_warnings,
                                    translation_shift, warm_gather_shift, within)
from hisparse.results.model import CaseResult, RunRecord
from hisparse.stats import summary


def _noisy(center, rel_noise, n=10, seed=0):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-rel_noise, rel_noise)) for _ in range(n)]


def _case(case_id, samples, status="ok"):
    if status != "ok":
        return CaseResult.failed(case_id, {"implementation": "multi_step"}, "invariant 1 failed")
    return CaseResult(case_id=case_id, params={"implementation": "multi_step"}, status="ok",
                      samples_us=tuple(samples), stats=summary(samples).to_dict())


def _run(run_id, cases, backend="cuda", gpu="NVIDIA H200"):
    return RunRecord(run_id=run_id, created="2026-11-29T20:15:00Z", backend=backend,
                     config={"name": "t", "hash": "h"}, environment={"machine": "m", "gpu": gpu},
                     floors={}, cases=tuple(cases))


def test_identical_distributions_are_unchanged():
    for seed in range(5):
        v = compare_samples("c", _noisy(100, 0.01, seed=seed), _noisy(100, 0.01, seed=seed + 100))
        assert v.status == "unchanged"
        assert 0.97 < v.ratio < 1.03


def test_ten_percent_slower_with_low_noise_is_regressed():
    v = compare_samples("c", _noisy(100, 0.005, seed=1), _noisy(110, 0.005, seed=2))
    assert v.status == "regressed" and v.significant and v.regressed
    assert v.ratio == pytest.approx(1.10, abs=0.01)
    assert v.ci_low > 1.05 and v.ci_high < 1.15
    # complete separation of 10 vs 10 samples: exact two-sided p = 2 / C(20, 10)
    assert v.p_value == pytest.approx(2 / 184756)


def test_ten_percent_faster_is_improved():
    v = compare_samples("c", _noisy(100, 0.005, seed=1), _noisy(90, 0.005, seed=2))
    assert v.status == "improved"


def test_significant_but_below_threshold_is_unchanged():
    v = compare_samples("c", _noisy(100, 0.001, seed=1), _noisy(102, 0.001, seed=2), threshold=0.05)
    assert v.significant and v.status == "unchanged"


def test_large_shift_with_too_few_samples_is_never_a_regression():
    v = compare_samples("c", [100.0, 101.0], [120.0, 121.0], alpha=0.01)  # below the policy's 3 samples
    assert v.status == "insufficient" and not v.regressed and v.p_value is None
    # 3 vs 3, completely separated: exact two-sided p = 2 / C(6, 3) = 0.1, not below alpha
    v3 = compare_samples("c", [100.0, 101.0, 102.0], [120.0, 121.0, 122.0], alpha=0.01)
    assert v3.p_value == pytest.approx(0.1) and v3.status == "unchanged"


def test_compare_runs_common_cases_and_failures():
    a = _run("A", [_case("x", _noisy(100, 0.005, seed=1)), _case("y", _noisy(50, 0.005, seed=3)),
                   _case("only_a", [1.0] * 10), _case("z", _noisy(10, 0.01))])
    b = _run("B", [_case("y", _noisy(50, 0.005, seed=4)), _case("x", _noisy(110, 0.005, seed=2)),
                   _case("only_b", [1.0] * 10), _case("z", [], status="failed")])
    verdicts = compare(a, b)
    assert [v.case_id for v in verdicts] == ["x", "y", "z"]
    by = {v.case_id: v for v in verdicts}
    assert by["x"].status == "regressed"
    assert by["y"].status == "unchanged"
    assert by["z"].status == "failed" and by["z"].newly_failed
    assert any_regression(verdicts)
    assert only_in(a, b) == (["only_a"], ["only_b"])


def test_compare_a_with_itself_is_all_unchanged():
    a = _run("A", [_case("x", _noisy(100, 0.02, seed=1)), _case("y", _noisy(5, 0.1, seed=2))])
    verdicts = compare(a, a)
    assert all(v.status == "unchanged" and v.ratio == 1.0 for v in verdicts)
    assert not any_regression(verdicts)


def test_incomparable_names_backend_gpu_and_config():
    a = _run("A", [], backend="cuda")
    b = _run("B", [], backend="reference", gpu=None)
    assert incomparable(a, b) == ["backend: 'cuda' != 'reference'", "gpu: 'NVIDIA H200' != None"]
    c = replace(_run("C", []), config={"name": "other", "hash": "h"})
    assert incomparable(a, c) == ["config name: 't' != 'other'"]
    assert incomparable(a, _run("D", [])) == []
    # a driver difference is a warning, not a reason to refuse
    e = replace(_run("E", []), environment={"machine": "m", "gpu": "NVIDIA H200", "driver": "580"})
    assert incomparable(a, e) == [] and comparability_warnings(a, e) == ["driver: None != '580'"]


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        compare_samples("c", [1.0], [1.0], alpha=0)
    with pytest.raises(ValueError):
        compare_samples("c", [1.0], [1.0], threshold=-1)


def _bimodal(low_share, n=30, low=53.2, high=55.2, seed=0):
    """n samples, round(low_share * n) of them near ``low`` and the rest near ``high`` (+-0.1)."""
    rng = random.Random(seed)
    k = round(low_share * n)
    return [low + rng.uniform(-0.1, 0.1) for _ in range(k)] + [high + rng.uniform(-0.1, 0.1) for _ in range(n - k)]


def test_bimodal_runs_name_the_mode_ratio_not_just_the_median():
    # same two modes, the mix flips from 40/60 to 60/40: the median jumps ~3.7%, the modes do not move
    a, b = _bimodal(0.4, seed=1), _bimodal(0.6, seed=2)
    v = compare_samples("c", a, b, threshold=0.02)
    assert v.ratio < 0.98  # the median moved past 2%
    assert v.note.startswith("bimodal in both, modes B/A ")
    low_ratio, high_ratio = (float(x) for x in v.note.split("B/A ")[1].split(", "))
    assert low_ratio == pytest.approx(1.0, abs=0.005) and high_ratio == pytest.approx(1.0, abs=0.005)
    assert compare_samples("c", a, _noisy(55.2, 0.001, n=30)).note == "bimodal in A"
    assert compare_samples("c", _noisy(100, 0.01, n=30), _noisy(100, 0.01, n=30, seed=3)).note is None


def test_within_counts_re_run_agreement_of_medians():
    a = _run("A", [_case("x", _noisy(100, 0.001)), _case("y", _noisy(100, 0.001)), _case("z", [1.0], "failed")])
    b = _run("B", [_case("x", _noisy(101, 0.001)), _case("y", _noisy(103, 0.001)), _case("z", [1.0], "failed")])
    assert within(compare(a, b), 0.02) == (1, 2)  # x 1% in, y 3% out, z has no ratio
    assert within(compare(a, b), 0.05) == (2, 2)


def test_compare_uses_each_runs_rounds_for_the_ci():
    rng = random.Random(4)
    moved = [100 + rng.gauss(0, 0.2) for _ in range(20)] + [103 + rng.gauss(0, 0.2) for _ in range(10)]
    steady = [100 + rng.gauss(0, 0.2) for _ in range(30)]

    def with_rounds(case_id, samples, rounds):
        return replace(_case(case_id, samples), timing={"samples_per_round": rounds})

    a = _run("A", [with_rounds("x", moved, [10, 10, 10])])
    b = _run("B", [with_rounds("x", steady, [10, 10, 10])])
    (v,) = compare(a, b)
    plain = compare_samples("x", moved, steady)
    assert (v.ratio, v.p_value) == (plain.ratio, plain.p_value)  # only the CI changes
    assert v.ci_high - v.ci_low > 1.5 * (plain.ci_high - plain.ci_low)


def test_compare_is_the_policy_without_history_or_confirm():
    # the same pair judged by compare and by the gate's protocol with the confirm rule off and no
    # history noise: one policy, one verdict (docs/regression.md)
    lone = replace(pol.DEFAULT_POLICY, confirm=False)
    for slow, seed in ((0.0, 1), (0.03, 2), (0.08, 3), (-0.08, 4)):
        base, head = _noisy(100, 0.01, seed=seed), _noisy(100 * (1 + slow), 0.01, seed=seed + 50)
        v = compare_samples("c", base, head)
        d = pol.judge_with_confirm(base, head, policy=lone, case_id="c")
        assert (v.status, v.threshold, v.p_value) == (d.first.status, d.first.threshold, d.first.p_value)
    # an 8% slowdown is past compare's 5% floor, a 3% one is not (noise 1%: 3 x within-run noise < 5%)
    assert compare_samples("c", _noisy(100, 0.01, seed=3), _noisy(108, 0.01, seed=53)).regressed
    v3 = compare_samples("c", _noisy(100, 0.01, seed=2), _noisy(103, 0.01, seed=52))
    assert v3.significant and v3.status == "unchanged" and v3.threshold == 0.05


# ------------------------------------------------------------------ the CLI as a gate (issue 14)


def _write(tmp_path, run):
    return str(write_run(run, tmp_path / f"{run.run_id}.json"))


def _cli(*args):
    return CliRunner().invoke(main, ["compare", *args])


def test_cli_cuda_against_reference_fails_unless_allowed(tmp_path):
    a = _write(tmp_path, _run("A", [_case("x", _noisy(100, 0.005, seed=1))]))
    b = _write(tmp_path, _run("B", [_case("x", _noisy(29000, 0.005, seed=2))], backend="reference", gpu=None))
    r = _cli(a, b)
    assert r.exit_code == 2
    assert "incomparable runs: backend: 'cuda' != 'reference'; gpu: 'NVIDIA H200' != None" in r.output
    assert "--allow-incomparable" in r.output and "REGRESSION" not in r.output
    allowed = _cli(a, b, "--allow-incomparable")
    assert allowed.exit_code == 1 and "REGRESSION: 1 case(s)" in allowed.output
    assert "warning: runs differ in backend" in allowed.output


def test_cli_other_config_is_incomparable(tmp_path):
    a = _write(tmp_path, _run("A", [_case("x", _noisy(100, 0.005, seed=1))]))
    b = _write(tmp_path, replace(_run("B", [_case("x", _noisy(100, 0.005, seed=2))]),
                                 config={"name": "ci", "hash": "h2"}))
    r = _cli(a, b)
    assert r.exit_code == 2 and "config name: 't' != 'ci'" in r.output


def test_cli_no_common_cases_is_an_error_even_when_allowed(tmp_path):
    a = _write(tmp_path, _run("A", [_case("x", _noisy(100, 0.005, seed=1))]))
    b = _write(tmp_path, _run("B", [_case("y", _noisy(100, 0.005, seed=2))]))
    for extra in ((), ("--allow-incomparable",)):
        r = _cli(a, b, *extra)
        assert r.exit_code == 2 and "no common cases: A and B share no case id" in r.output


def test_cli_same_series_exit_codes(tmp_path):
    a = _write(tmp_path, _run("A", [_case("x", _noisy(100, 0.005, seed=1))]))
    same = _write(tmp_path, _run("B", [_case("x", _noisy(100, 0.005, seed=2))]))
    slow = _write(tmp_path, _run("C", [_case("x", _noisy(110, 0.005, seed=3))]))
    ok = _cli(a, same)
    assert ok.exit_code == 0 and "1 unchanged" in ok.output
    bad = _cli(a, slow)
    assert bad.exit_code == 1 and "REGRESSION: 1 case(s) slower beyond the threshold: x" in bad.output


def test_cli_bad_threshold_is_a_clear_error(tmp_path):
    a = _write(tmp_path, _run("A", [_case("x", _noisy(100, 0.005, seed=1))]))
    r = _cli(a, a, "--threshold", "-1")
    assert r.exit_code == 2 and "min_effect_unknown_noise: must be a finite number >= 0, got -1" in r.output


def _linked(case, other_id, ratio):
    from hisparse.results.model import CounterpartLink  # noqa: PLC0415

    return replace(case, counterpart_link=CounterpartLink(other_id, ratio))


def test_counterpart_ratios_pair_the_stored_links_of_both_runs():
    from hisparse.track.compare import PairRatio, counterpart_ratios  # noqa: PLC0415

    a = _run("A", [_linked(_case("ms/b1", [10.0] * 10), "sg/b1", 0.9), _linked(_case("ms/b8", [10.0] * 10), "sg/b8", 1.1),
                   _linked(_case("ms/b64", [10.0] * 10), "sg/b64", 1.3), _case("sg/b1", [11.0] * 10)])
    b = _run("B", [_linked(_case("ms/b1", [10.0] * 10), "sg/b1", 0.8), _linked(_case("ms/b8", [10.0] * 10), "sg/b8", None),
                   _case("ms/b64", [10.0] * 10)])  # B has no sglang counterpart for b64: not a pair
    # A's b1 pair: all 10 of ours below all 10 of sglang's, so the samples differ (p far below 0.01); no p
    # where a side's sglang case is missing
    (b1, b8) = counterpart_ratios(a, b)
    assert (b1.case_id, b1.counterpart, b1.ratio_a, b1.ratio_b, b1.p_b) == ("ms/b1", "sg/b1", 0.9, 0.8, None)
    assert b1.p_a < 1e-3 and b1.pair_a.differs and not b1.pair_b.differs
    assert b8 == PairRatio("ms/b8", "sg/b8", 1.1, None, None, None)
    assert counterpart_ratios(a, _run("C", [_case("ms/b1", [10.0] * 10)])) == []


def test_cli_compare_prints_ours_vs_sglang_when_both_runs_have_pairs(tmp_path):
    a = _write(tmp_path, _run("A", [_linked(_case("ms/b1", _noisy(100, 0.005, seed=1)), "sg/b1", 0.9),
                                    _case("sg/b1", _noisy(111, 0.005, seed=3))]))
    b = _write(tmp_path, _run("B", [_linked(_case("ms/b1", _noisy(100, 0.005, seed=2)), "sg/b1", 1.05),
                                    _case("sg/b1", _noisy(95, 0.005, seed=4))]))
    r = _cli(a, b)
    assert "| ms/b1 | 0.900 | 1.050 |" in r.output.splitlines()
    assert "ours faster in A: 1 of 1 pairs, in B: 0 of 1" in r.output


def test_a_different_host_is_a_warning_where_both_runs_describe_their_host():
    env = {"machine": "h100-sxm", "gpu": "NVIDIA H200", "cpu": "AMD EPYC 9654", "iommu": "off", "hypervisor": False}
    a = replace(_run("A", []), environment=env)
    b = replace(_run("B", []), environment={**env, "cpu": "Intel(R) Xeon(R) Platinum 8480C", "iommu": "on (iommu=pt)"})
    assert incomparable(a, b) == []
    assert comparability_warnings(a, b) == [
        "cpu: 'AMD EPYC 9654' != 'Intel(R) Xeon(R) Platinum 8480C'", "iommu: 'off' != 'on (iommu=pt)'"]
    assert comparability_warnings(a, replace(a, run_id="A2")) == []
    # a file from before the host was recorded holds the architecture in "cpu": no warning from it
    old = replace(_run("O", []), environment={"machine": "h100-sxm", "gpu": "NVIDIA H200", "cpu": "x86_64"})
    assert comparability_warnings(a, old) == []


def test_a_resumed_run_is_named_with_the_share_of_cases_a_resume_timed():
    from hisparse.results.model import Resume  # noqa: PLC0415

    a = _run("A", [_case("ms/b1", _noisy(100, 0.005, seed=1)), _case("ms/b2", _noisy(100, 0.005, seed=2))])
    b = replace(a, run_id="B", resumes=(Resume("2026-12-06T06:20:00Z", {}, ("ms/b2",)),))
    assert resume_warnings(a, replace(a, run_id="A2")) == []
    assert resume_warnings(a, b) == [
        "B (B) was resumed 1 time(s): 1 of its 2 case(s) were timed by a resume, possibly on another machine start"]


def _floored(case_id, seed, gather_us):
    """A case of ~100 us whose bare gather of its rows took ``gather_us`` in its run."""
    samples = _noisy(100, 0.005, seed=seed)
    return CaseResult(case_id=case_id, params={"implementation": "multi_step"}, status="ok",
                      samples_us=tuple(samples), stats=summary(samples).to_dict(),
                      floor={"pcie_floor_us": 8.0, "gather_floor_us": gather_us})


def test_a_node_whose_bare_gather_is_slower_is_named_with_the_geometric_mean_of_the_floors():
    a = _run("A", [_floored("b1", 1, 10.0), _floored("b2", 2, 20.0), _floored("b4", 3, 40.0)])
    slower = _run("B", [_floored("b1", 4, 15.0), _floored("b2", 5, 30.0), _floored("b4", 6, 60.0)])
    shift = gather_floor_shift(a, slower)
    assert shift.ratio == pytest.approx(1.5) and shift.cases == 3
    assert floor_warnings(a, slower) == [
        "the bare gather floor takes 1.50x A's time in B (geometric mean over 3 case(s)): the nodes, the cases' "
        "rows or the floor's own code differ, so each case's change mixes that with the kernels'; compare each "
        "case against its floor (`/ gather floor`), or runs of one node"]
    # within the lone pair's 5%: the floors of one node from run to run (1.01 here) say nothing
    same_node = _run("C", [_floored("b1", 7, 10.1), _floored("b2", 8, 20.2), _floored("b4", 9, 40.4)])
    assert floor_warnings(a, same_node) == []
    # a case failed in one run, or without a floor, is not in the mean
    partly = replace(slower, cases=(slower.cases[0], _case("b2", [], status="failed"), _floored("b4", 6, 40.0)))
    assert gather_floor_shift(a, partly).cases == 2 and gather_floor_shift(a, partly).ratio == pytest.approx(1.5 ** 0.5)
    assert gather_floor_shift(a, _run("D", [_case("b1", _noisy(100, 0.005, seed=1))])) is None


def _decode(case_id, seed, cold_us, warm_us):
    """A decode-regime case: its rows' bare gather took ``cold_us`` with the translations cold and
    ``warm_us`` warm."""
    return replace(_floored(case_id, seed, cold_us), floor={"pcie_floor_us": 8.0, "gather_floor_us": cold_us,
                                                            "gather_warm_us": warm_us})


def test_a_node_whose_translations_cost_less_is_told_apart_from_a_node_whose_host_is_slower():
    # A pays 1.18x for cold translations at both batches (as the H200 and one H100 SXM node did), B pays
    # nothing with the same warm gathers: the bare gather and the translations moved, the warm gather not
    a = _run("A", [_decode("b32", 1, 354.0, 300.0), _decode("b64", 2, 708.0, 600.0)])
    b = _run("B", [_decode("b32", 3, 300.0, 300.0), _decode("b64", 4, 600.0, 600.0)])
    assert warm_gather_shift(a, b).ratio == pytest.approx(1.0)
    assert translation_shift(a, b).ratio == pytest.approx(1 / 1.18) and translation_shift(a, b).cases == 2
    assert floor_warnings(a, b) == [
        "the bare gather floor takes 0.85x A's time in B (geometric mean over 2 case(s)): the nodes, the cases' "
        "rows or the floor's own code differ, so each case's change mixes that with the kernels'; compare each "
        "case against its floor (`/ gather floor`), or runs of one node",
        "the decode-regime cases' cold over warm bare gather is 0.85x in B what it is in A (geometric mean over 2 "
        "case(s)): cold host-address translations cost the two nodes differently, so those cases move with the "
        "node as well as with the kernels; compare them against their floor (`/ gather floor`), or runs of one "
        "node"]
    # C's host gathers 1.2x slower with the same translation cost: both gathers moved, the translations not
    c = _run("C", [_decode("b32", 5, 424.8, 360.0), _decode("b64", 6, 849.6, 720.0)])
    assert translation_shift(a, c).ratio == pytest.approx(1.0)
    assert [w.split(" (")[0] for w in floor_warnings(a, c)] == [
        "the bare gather floor takes 1.20x A's time in B", "the warm bare gather floor takes 1.20x A's time in B"]
    # warm-regime cases have no warm gather of their own: nothing to say about translations
    warm_only = _run("W", [_floored("b64", 7, 600.0)])
    assert translation_shift(warm_only, warm_only) is None and warm_gather_shift(warm_only, warm_only) is None


def test_a_different_pinned_copy_rate_is_a_warning_and_the_cli_prints_the_floor_warnings(tmp_path):
    a = replace(_run("A", [_floored("b1", 1, 10.0)]), floors={"pinned_h2d_gbps": 55.0})
    b = replace(_run("B", [_floored("b1", 2, 10.0)]), floors={"pinned_h2d_gbps": 40.0})
    assert floor_warnings(a, b) == [
        "the pinned host->device copy floor takes 1.38x A's time in B: the nodes, the cases' rows or the "
        "floor's own code differ, so each case's change mixes that with the kernels'; compare each case against "
        "its floor (`/ gather floor`), or runs of one node"]
    assert floor_warnings(a, replace(b, floors={})) == []
    slow_host = replace(_run("S", [_floored("b1", 3, 14.0)]), floors={"pinned_h2d_gbps": 55.0})
    r = _cli(_write(tmp_path, a), _write(tmp_path, slow_host))
    assert "warning: the bare gather floor takes 1.40x A's time in B (geometric mean over 1 case(s))" in r.output

