"""Result files: golden v1 file, round trip, refusal of unknown versions, upgrade hook, atomic
writes, and resuming an interrupted sweep."""
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from hisparse.bench import measure
from hisparse.results import model as results
from hisparse.errors import ResultFormatError
from hisparse.bench.floors import NOT_APPLICABLE
from hisparse.results.model import CaseResult, RunRecord, RunWriter, load_run, write_run
from hisparse.stats import summary

GOLDEN = Path(__file__).parents[1] / "data" / "results_v1.json"


def _record(cases=(), **kw):
    base = dict(run_id="r1", created="2026-11-29T20:15:00Z", backend="reference",
                config={"name": "t", "path": "t.yaml", "hash": "abc", "ci": False},
                environment={"machine": "m", "gpu": None, "torch": "2.13.0", "git_commit": "0" * 40},
                floors=NOT_APPLICABLE.to_dict(), cases=tuple(cases))
    base.update(kw)
    return RunRecord(**base)


def _ok_case(case_id, samples=(3.0, 1.0, 2.0) * 4, impl="multi_step"):
    return CaseResult(case_id=case_id, params={"implementation": impl, "batch": 1}, status="ok",
                      timing={"calls_per_graph": 2, "replays": 12, "warmup_calls": 1, "l2_flush": False},
                      samples_us=samples, stats=summary(samples).to_dict(),
                      work={"unique_misses_per_call": 4, "hits_per_call": 10, "bytes_per_call": 256},
                      floor={"pcie_floor_us": None, "gather_floor_us": 1.5, "gather_samples_us": [1.5] * 12},
                      derived={"gbps": 0.1, "over_pcie_floor": None, "over_gather_floor": 1.33,
                               "speedup_vs_lru_sequential": None},
                      clocks={"source": "n/a", "sm_mhz": [], "mem_mhz": [], "throttle_reasons": []}, wall_s=0.5)


# ---------------------------------------------------------------------------------------------
# golden file: tests/data/results_v1.json must load forever


def test_golden_v1_loads():
    run = load_run(GOLDEN)
    assert run.schema_version == results.SCHEMA_VERSION == 1
    assert run.backend == "cuda" and run.environment["gpu"] == "NVIDIA H200"
    assert run.floors["pinned_h2d_gbps"] == 55.3
    assert [c.status for c in run.cases] == ["ok", "ok", "failed"]
    lru, multi, planned = run.cases
    assert lru.case_id == "lru_sequential/distinct/b64/s4/k2048/h4096/i576/pdl0"
    assert len(multi.samples_us) == 10 and multi.timing["calls_per_graph"] == 100
    assert planned.reason.startswith("invariant 1 (data) failed for request 3")
    assert planned.samples_us == () and planned.stats is None


def test_golden_v1_stats_and_derived_are_recomputable_from_raw_samples():
    run = load_run(GOLDEN)
    for c in run.cases:
        if not c.ok:
            continue
        s = summary(c.samples_us)
        assert c.stats["median_us"] == pytest.approx(s.median)
        assert c.stats["iqr_us"] == pytest.approx(s.iqr)
        assert c.floor["gather_floor_us"] == pytest.approx(summary(c.floor["gather_samples_us"]).median)
        assert c.derived["over_gather_floor"] == pytest.approx(s.median / c.floor["gather_floor_us"])
        assert c.derived["gbps"] == pytest.approx(c.work["bytes_per_call"] / (s.median * 1e3))
    lru, multi, _ = run.cases
    assert multi.derived["speedup_vs_lru_sequential"] == pytest.approx(lru.median_us / multi.median_us)


# ---------------------------------------------------------------------------------------------
# round trip and versions


def test_round_trip(tmp_path):
    rec = _record([_ok_case("a"), CaseResult.failed("b", {"implementation": "lru_sequential"}, "boom")],
                  finished="2026-11-29T20:21:10Z")
    path = write_run(rec, tmp_path / "run.json")
    loaded = load_run(path)
    assert loaded == rec
    assert json.loads(path.read_text())["schema_version"] == 1
    assert list(json.loads(path.read_text())) == ["schema_version", "run_id", "created", "finished", "backend",
                                                  "config", "environment", "floors", "cases"]


def test_golden_round_trips_through_the_writer(tmp_path):
    run = load_run(GOLDEN)
    assert load_run(write_run(run, tmp_path / "again.json")) == run


def test_nan_is_written_as_null(tmp_path):
    c = _ok_case("a")
    c = CaseResult(**{**c.__dict__, "derived": {**c.derived, "gbps": float("nan")}})
    loaded = load_run(write_run(_record([c]), tmp_path / "r.json"))
    assert loaded.cases[0].derived["gbps"] is None


@pytest.mark.parametrize("version", [2, 0, "1", None, True])
def test_unknown_schema_version_is_refused(tmp_path, version):
    data = json.loads(GOLDEN.read_text())
    data["schema_version"] = version
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match="schema_version"):
        load_run(path)


def test_missing_field_and_garbage_are_refused(tmp_path):
    data = json.loads(GOLDEN.read_text())
    del data["cases"][0]["status"]
    (tmp_path / "a.json").write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match="status"):
        load_run(tmp_path / "a.json")
    (tmp_path / "b.json").write_text("{not json")
    with pytest.raises(ResultFormatError):
        load_run(tmp_path / "b.json")


def test_upgrade_on_load_hook(monkeypatch, tmp_path):
    """A future v2 reader upgrades v1 files through _UPGRADES[1]."""
    def v1_to_v2(data):
        data = dict(data)
        data["floors"] = {**data["floors"], "upgraded": True}
        return data

    monkeypatch.setattr(results, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(results._UPGRADES, 1, v1_to_v2)
    run = load_run(GOLDEN)
    assert run.schema_version == 2 and run.floors["upgraded"] is True


# ---------------------------------------------------------------------------------------------
# atomic writes


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = write_run(_record([_ok_case("a")]), tmp_path / "run.json")
    before = path.read_text()
    with pytest.raises(TypeError):
        results.write_json_atomic(path, {"bad": object()})
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["run.json"]  # no temp file left behind


# ---------------------------------------------------------------------------------------------
# resume after an interrupted sweep


@dataclass(frozen=True)
class _FakeCase:
    case_id: str
    implementation: str = "multi_step"


class _Interrupt(Exception):
    pass


def _fake_run(fail_at=None, seen=None):
    def run(case, backend, *, floors):
        if seen is not None:
            seen.append(case.case_id)
        if case.case_id == fail_at:
            raise _Interrupt(case.case_id)
        impl = "lru_sequential" if case.case_id.startswith("lru") else "multi_step"
        samples = (4.0,) * 10 if impl == "lru_sequential" else (2.0,) * 10
        return _ok_case(case.case_id, samples, impl)
    return run


def _baseline_of(params):
    return "lru/1"


def test_resume_after_interrupted_sweep(tmp_path):
    cases = [_FakeCase("lru/1"), _FakeCase("ms/1"), _FakeCase("ms/2"), _FakeCase("ms/3")]
    path = tmp_path / "run.json"
    writer = RunWriter.create(path, _record())
    with pytest.raises(_Interrupt):
        for _ in measure.run_sweep(cases, None, writer, floors=NOT_APPLICABLE, run=_fake_run(fail_at="ms/2"),
                                   baseline_of=_baseline_of):
            pass
    partial = load_run(path)
    assert partial.finished is None
    assert partial.case_ids() == ["lru/1", "ms/1"]  # every finished case kept
    assert partial.case("ms/1").derived["speedup_vs_lru_sequential"] == pytest.approx(2.0)

    with pytest.raises(ResultFormatError, match="config hash"):
        RunWriter.resume(path, config_hash="other", backend="reference")
    with pytest.raises(ResultFormatError, match="backend"):
        RunWriter.resume(path, config_hash="abc", backend="cuda")
    with pytest.raises(ResultFormatError, match="environment"):
        RunWriter.resume(path, config_hash="abc", backend="reference",
                         environment={**partial.environment, "machine": "elsewhere"})

    seen = []
    writer = RunWriter.resume(path, config_hash="abc", backend="reference", environment=partial.environment)
    outcomes = list(measure.run_sweep(cases, None, writer, floors=NOT_APPLICABLE, run=_fake_run(seen=seen),
                                      baseline_of=_baseline_of))
    writer.finish()
    assert seen == ["ms/2", "ms/3"]  # finished cases skipped
    assert [r is None for _, r in outcomes] == [True, True, False, False]
    final = load_run(path)
    assert final.case_ids() == ["lru/1", "ms/1", "ms/2", "ms/3"] and final.finished is not None
    assert all(final.case(c).derived["speedup_vs_lru_sequential"] == pytest.approx(2.0)
               for c in ("ms/1", "ms/2", "ms/3"))


def test_link_speedups_needs_an_ok_baseline():
    rec = _record([CaseResult.failed("lru/1", {"implementation": "lru_sequential"}, "x"),
                   _ok_case("ms/1", (2.0,) * 10)])
    linked = measure.link_speedups(rec, _baseline_of)
    assert linked.case("ms/1").derived["speedup_vs_lru_sequential"] is None


def test_make_run_id():
    from datetime import datetime
    rid = results.make_run_id(datetime(2026, 11, 29, 20, 15, 0), "1a2b3c4d5e6f7890", "my config")
    assert rid == "20261129-201500_1a2b3c4d5e6f_my-config"
    assert results.make_run_id(datetime(2026, 1, 1), None, "x").endswith("_nogit_x")


def test_an_explicit_commit_wins_over_the_checkouts_git(tmp_path, monkeypatch):
    """A tree copied to a GPU node may carry a stale .git: HISPARSE_GIT_COMMIT names the real commit."""
    import os
    import subprocess

    from hisparse.results import metadata

    repo = tmp_path / "r"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "c"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **env})
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    monkeypatch.delenv("HISPARSE_GIT_COMMIT", raising=False)
    monkeypatch.delenv("HISPARSE_GIT_DIRTY", raising=False)
    assert metadata.git_info(repo) == (head, False)
    monkeypatch.setenv("HISPARSE_GIT_COMMIT", "9" * 40)
    monkeypatch.setenv("HISPARSE_GIT_DIRTY", "0")
    assert metadata.git_info(repo) == ("9" * 40, False)
    monkeypatch.setenv("HISPARSE_GIT_DIRTY", "maybe")
    assert metadata.git_info(repo) == ("9" * 40, None)
    monkeypatch.delenv("HISPARSE_GIT_COMMIT")
    assert metadata.git_info(tmp_path / "nowhere") == (None, None)
