"""hisparse.render.text: the run summary names bimodal cases; compare's footer counts re-run agreement."""
import random

from hisparse.track.compare import compare
from hisparse.render import text
from hisparse.results.model import CaseResult, RunRecord
from hisparse.stats import summary


def _case(case_id, samples):
    return CaseResult(case_id=case_id, params={"implementation": "multi_step"}, status="ok",
                      samples_us=tuple(samples), stats=summary(samples).to_dict())


def _run(run_id, cases):
    return RunRecord(run_id=run_id, created="2026-11-29T23:00:00Z", backend="cuda", config={"name": "t", "hash": "h"},
                     environment={"machine": "m", "gpu": "NVIDIA H200"}, floors={}, cases=tuple(cases))


def test_run_summary_lists_bimodal_cases_with_their_modes():
    rng = random.Random(0)
    steady = [100 + rng.uniform(-0.2, 0.2) for _ in range(30)]
    two = [53.2] * 12 + [55.2] * 18  # 40% / 60%
    run = _run("r", [_case("steady", steady), _case("two", two)])
    out = text.run_summary(run)
    assert "1 case(s) bimodal" in out
    assert "  two: 53.2 us x40% | 55.2 us x60%" in out
    assert "steady:" not in out
    assert text.bimodal_table(_run("r", [_case("steady", steady)])) == ""


def test_compare_table_footer_counts_medians_within_threshold():
    a = _run("A", [_case("x", [100.0] * 10), _case("y", [100.0] * 10)])
    b = _run("B", [_case("x", [101.0] * 10), _case("y", [104.0] * 10)])
    out = text.compare_table(compare(a, b, threshold=0.02), threshold=0.02, alpha=0.01)
    assert out.rstrip().endswith("medians within 2.0%: 1 of 2")


def test_bimodal_replays_are_listed_when_their_samples_average_them():
    from dataclasses import replace  # noqa: PLC0415

    replays = [53.2, 55.2, 55.2] * 10 + [55.2, 53.2, 53.2] * 10  # 50/50 over 60 replays
    samples = [sum(replays[i:i + 3]) / 3 for i in range(0, 60, 3)]  # 54.53 and 53.87 us
    case = replace(_case("two", samples), timing={"replays_per_sample": 3, "replay_us": replays})
    # the modes named are the replays' (53.2 / 55.2), not those of the averaged samples (53.9 / 54.5)
    assert "  two: 53.2 us x50% | 55.2 us x50%" in text.run_summary(_run("r", [case]))
    (v,) = compare(_run("A", [case]), _run("B", [case]))
    assert v.note == "bimodal in both, modes B/A 1.000, 1.000"
