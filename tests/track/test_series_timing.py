"""A dashboard series is a case *and its timing settings*: runs of one case with 20-call and 100-call
graphs are two series, never pooled into one commit's point (track/history.py timing_key)."""
from __future__ import annotations

from hisparse.results.model import CaseResult, RunRecord, write_run
from hisparse.track.history import build_series, scan_runs, timing_key

CASE = "multi_step/serving/b1/s4/k2048/h4096/i576/pdl1"


def _write(root, name, commit, calls, level, created):
    case = CaseResult(CASE, {"implementation": "multi_step"}, "ok",
                      settings={"calls_per_graph": calls, "replays": 10, "l2_flush": True},
                      runs=[{"process": 0, "round": 0, "samples_us": [level + 0.01 * i for i in range(10)]}])
    rec = RunRecord(run_id=name, created=created, finished=created, backend="cuda", config={"name": "c", "hash": "h"},
                    environment={"machine": "h200", "gpu": "NVIDIA H200", "git_commit": commit}, floors={},
                    cases=(case,))
    write_run(rec, root / "runs" / f"{name}.json")


def test_timing_key_names_what_a_sample_measures():
    assert timing_key({"calls_per_graph": 20, "replays_per_sample": 5, "rounds": 3}) == "g20x5"
    assert timing_key({"calls_per_graph": 100, "replays_per_sample": 1, "rounds": 1}) == "g100"
    assert timing_key({"calls_per_graph": 100, "l2_flush": False}) == "g100+warm-l2"
    assert timing_key({}) == ""


def test_runs_of_other_timing_are_other_series(tmp_path):
    _write(tmp_path, "a", "a" * 40, 20, 19.25, "2026-12-03T16:00:00Z")
    _write(tmp_path, "b", "a" * 40, 100, 18.09, "2026-12-03T16:30:00Z")
    _write(tmp_path, "c", "b" * 40, 20, 19.14, "2026-12-03T17:00:00Z")
    runs, _ = scan_runs(tmp_path)
    series = {s.timing: s for s in build_series(runs)}
    assert set(series) == {"g20", "g100"}
    assert [len(p.samples_us) for p in series["g20"].points] == [10, 10]  # one run per commit, not pooled
    assert [p.commit[0] for p in series["g20"].points] == ["a", "b"]
    assert series["g100"].key.endswith(f"{CASE}@g100")
