"""hisparse/bench/retime.py and `run --processes` / `retime`: more timing processes merged into a finished
run, on the reference backend with the real engine."""
import json
import statistics
from dataclasses import replace

import pytest
from click.testing import CliRunner

from hisparse.bench import retime as repeat
from hisparse.bench.backends import get_backend
from hisparse.cli import main
from hisparse.results.model import load_run
from _tiny_config import tiny_config

TINY = tiny_config("tiny-repeat", batch="[1, 2]", timing_extra=", rounds: 2")  # warm: rounds are the config's


@pytest.fixture
def finished_run(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--no-plots",
                                       "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "runs").glob("*.json")
    return cfg, path


def test_retime_adds_a_process_of_rounds_to_every_case(finished_run):
    _, path = finished_run
    before = load_run(path)
    merged = dict(repeat.retime_run(path, get_backend("reference")))
    after = load_run(path)
    assert set(merged) == {c.case_id for c in before.cases}
    assert after.finished == before.finished  # still a finished run
    for old, new in zip(before.cases, after.cases):
        t = new.timing
        assert list(new.samples_us[: len(old.samples_us)]) == list(old.samples_us)  # kept, new ones appended
        assert len(new.samples_us) == 40 and t["samples_per_process"] == [20, 20] and t["processes"] == 2
        assert t["samples_per_round"] == [10, 10, 10, 10] and t["rounds"] == 4 and len(t["placements"]) == 4
        assert new.runs[:2] == old.runs and [(r.process, r.round) for r in new.runs[2:]] == [(1, 0), (1, 1)]
        assert new.stats["n"] == 40 and new.stats["median_us"] == pytest.approx(statistics.median(new.samples_us))
        assert new.derived["over_gather_floor"] == pytest.approx(new.stats["median_us"] / new.floor["gather_floor_us"])
        assert new.work == old.work and new.floor == old.floor  # round-0 quantities are not re-measured
    base = next(c for c in after.cases if c.case_id.startswith("lru_sequential/distinct/b1"))
    multi = next(c for c in after.cases if c.case_id.startswith("multi_step/distinct/b1"))
    assert multi.derived["speedup_vs_lru_sequential"] == pytest.approx(base.stats["median_us"] / multi.stats["median_us"])


def test_a_case_that_fails_in_the_retime_process_keeps_its_samples(finished_run, monkeypatch):
    _, path = finished_run
    before = {c.case_id: c for c in load_run(path).cases}
    real = repeat.measure.time_round

    def flaky(case, *args, **kw):
        if case.implementation == "multi_step":
            raise RuntimeError("CUDA out of memory (stand-in)")
        return real(case, *args, **kw)

    monkeypatch.setattr(repeat.measure, "time_round", flaky)
    list(repeat.retime_run(path, get_backend("reference")))
    for c in load_run(path).cases:
        if c.case_id.startswith("multi_step"):
            assert c.samples_us == before[c.case_id].samples_us
            assert c.timing["retime_errors"] == ["RuntimeError: CUDA out of memory (stand-in)"]
        else:
            assert c.timing["processes"] == 2


def test_a_changed_config_is_refused(finished_run):
    cfg, path = finished_run
    cfg.write_text(TINY.replace("replays: 10", "replays: 12"))
    with pytest.raises(repeat.RetimeError, match="config changed"):
        list(repeat.retime_run(path, get_backend("reference")))


def test_cli_run_with_processes_and_its_usage_error(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY.replace("batch: [1, 2]", "batch: 1").replace("[lru_sequential, multi_step]", "multi_step"))
    out = tmp_path / "runs"
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--no-plots", "--out", str(out),
                                       "--processes", "2"])
    assert result.exit_code == 0, result.output
    (path,) = out.glob("*.json")
    (case,) = json.loads(path.read_text())["cases"]
    assert [(r["process"], r["round"]) for r in case["runs"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert sum(len(r["samples_us"]) for r in case["runs"]) == 40
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--resume", str(path),
                                       "--processes", "2"])
    assert result.exit_code == 2 and "--processes cannot be combined with --resume" in result.output


def test_merge_refuses_rounds_timed_with_other_settings(finished_run):
    from hisparse.bench import timing  # noqa: PLC0415

    _, path = finished_run
    case = load_run(path).cases[0]
    other = timing.Measurement(method=case.settings["method"], samples_us=(1.0,) * 10, warmup_us=(), calls_per_graph=3,
                               replays=10, warmup_calls=1, l2_flush=False, clocks=timing.Clocks("n/a"))
    with pytest.raises(ValueError, match="calls_per_graph"):
        repeat.merge(case, [other], [{}])
    same = replace(other, calls_per_graph=case.settings["calls_per_graph"])
    merged = repeat.merge(case, [same], [{"host_cache": "0x1"}])
    assert merged.runs[-1].process == 1 and merged.runs[-1].placement == {"host_cache": "0x1"}  # the next process
    assert merged.samples_us == case.samples_us + (1.0,) * 10
