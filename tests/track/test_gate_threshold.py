"""The gate without history: the floor that re-runs of one tree pass (5%, compare's), said in its
output, and the wording that names faster and slower. The re-run pair is the committed default runs
of 87584c8 and 3239c10 (H200, same config; 3239c10 changed only multi_step's small-batch launch),
which the 0.5% floor failed with 7 suspects."""
from __future__ import annotations

import random
from pathlib import Path

from click.testing import CliRunner

from hisparse.cli import main
from hisparse.results.model import CaseResult, RunRecord, write_run
from hisparse.track import gate as g
from hisparse.track.policy import DEFAULT_POLICY

RUNS = Path(__file__).resolve().parents[2] / "results" / "runs"
BASE = RUNS / "20261203-114544_87584c8298f6_default.json"
HEAD = RUNS / "20261203-170254_3239c1072567_default.json"
ENV = {"BASELINE": "", "HISPARSE_INJECT_SLOWDOWN": "", "HISPARSE_NIGHTLY_MIN_EFFECT": "", "NO_COLOR": "1"}


def test_no_history_floor_is_compares_lone_pair_floor():
    assert g.no_history_floor() == DEFAULT_POLICY.min_effect_unknown_noise == 0.05


def test_committed_re_runs_pass_the_gate_without_history_and_it_says_so():
    r = CliRunner().invoke(main, ["gate", "--base", str(BASE), "--head", str(HEAD), "-v"], env=ENV)
    assert r.exit_code == 0, r.output
    assert "gated with the 5.0% floor that two re-runs of one tree pass" in r.output
    assert "pass: 160 case(s) compared" in r.output
    assert "% worse" not in r.output
    assert ("multi_step/serving/b1/s4/k2048/h4096/i584/pdl1: 22.38 -> 19.59 us (1.14x faster, threshold 5.00%"
            in r.output)


def _run(tmp, name, level, commit, created, seed):
    rng = random.Random(seed)
    samples = [level * (1 + rng.gauss(0, 0.001)) for _ in range(10)]
    case = CaseResult(case_id="multi_step/serving/b1", params={"implementation": "multi_step"}, status="ok",
                      samples_us=tuple(samples))
    rec = RunRecord(run_id=name, created=created, finished=created, backend="cuda", config={"name": "ci", "hash": "h"},
                    environment={"machine": "h200", "gpu": "NVIDIA H200", "git_commit": commit}, floors={},
                    cases=(case,))
    return str(write_run(rec, Path(tmp) / "runs" / f"{name}.json"))


def test_a_3_percent_slowdown_passes_without_history_and_is_suspect_with_it(tmp_path):
    for i in range(4):  # four quiet nights of history: run-to-run noise about 0.1%
        _run(tmp_path, f"h{i}", 100.0, f"{i}aaa1111", f"2026-11-0{i + 1}T00:00:00Z", seed=i)
    base = _run(tmp_path / "x", "base", 100.0, "bbbb2222", "2026-11-06T00:00:00Z", seed=10)
    head = _run(tmp_path / "x", "head", 103.0, "cccc3333", "2026-11-07T00:00:00Z", seed=11)
    lone = CliRunner().invoke(main, ["gate", "--base", base, "--head", head], env=ENV)
    assert lone.exit_code == 0, lone.output
    with_history = CliRunner().invoke(main, ["gate", "--base", base, "--head", head, "--results", str(tmp_path)],
                                      env=ENV)
    assert with_history.exit_code == 4, with_history.output
    assert "suspect      multi_step/serving/b1: 99.95 -> 103.0 us (1.03x slower, threshold 0.50%" in with_history.output


def test_asv_results_merge_the_runs_of_one_commit(tmp_path):
    """Two configs run at one commit (default, vs-sglang) give one asv result file holding both."""
    import json

    def run(name, impl, created):
        case = CaseResult(case_id=f"{impl}/serving/b1/s4/k2048/h4096/i576/pdl0",
                          params={"implementation": impl, "workload": "serving", "batch": 1, "steps": 4, "top_k": 2048,
                                  "hot_buffer_size": 4096, "item_size_bytes": 576, "pdl": False},
                          status="ok", samples_us=tuple(10.0 + 0.1 * i for i in range(10)))
        rec = RunRecord(run_id=name, created=created, finished=created, backend="cuda", config={"name": name, "hash": "h"},
                        environment={"machine": "h200", "gpu": "NVIDIA H200", "git_commit": "c" * 40}, floors={},
                        cases=(case,))
        return str(write_run(rec, tmp_path / "runs" / f"{name}.json"))

    paths = [run("default", "multi_step", "2026-12-03T10:00:00Z"), run("vs-sglang", "lru_sequential", "2026-12-03T11:00:00Z")]
    lines = g.write_asv(tmp_path, paths, tmp_path)
    assert len(lines) == 1 and "skipped" not in lines[0]
    (result,) = (tmp_path / "asv" / "h200").glob("cccccccc-*.json")
    names = set(json.loads(result.read_text())["results"])
    assert any("multi_step" in n.lower() or "MultiStep" in n for n in names) and len(names) == 2
