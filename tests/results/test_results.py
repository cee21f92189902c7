"""Result files: golden v1 and v2 files, every committed run file, the v1 -> v2 upgrade, round trip,
refusal of unknown versions and bad runs, upgrade hook, atomic writes, and resuming an interrupted sweep."""
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from hisparse.bench import measure
from hisparse.results import model as results
from hisparse.errors import ResultFormatError
from hisparse.bench.floors import NOT_APPLICABLE
from hisparse.results.model import CaseResult, Run, RunRecord, RunWriter, SpeedupLink, load_run, write_run

DATA = Path(__file__).parents[1] / "data"
GOLDEN = DATA / "results_v1.json"
GOLDEN_V2 = DATA / "results_v2.json"
RESULTS = Path(__file__).parents[2] / "results"
CLOCKS = {"source": "n/a", "sm_mhz": [], "mem_mhz": [], "throttle_reasons": []}


def _record(cases=(), **kw):
    base = dict(run_id="r1", created="2026-11-29T20:15:00Z", backend="reference",
                config={"name": "t", "path": "t.yaml", "hash": "abc", "ci": False},
                environment={"machine": "m", "gpu": None, "torch": "2.13.0", "git_commit": "0" * 40},
                floors=NOT_APPLICABLE.to_dict(), cases=tuple(cases))
    base.update(kw)
    return RunRecord(**base)


def _ok_case(case_id, samples=(3.0, 1.0, 2.0) * 4, impl="multi_step"):
    return CaseResult(case_id=case_id, params={"implementation": impl, "batch": 1}, status="ok",
                      settings={"calls_per_graph": 2, "replays": 12, "warmup_calls": 1, "l2_flush": False, "rounds": 1},
                      runs=(Run(process=0, round=0, samples_us=samples, warmup_us=(9.0,), clocks=CLOCKS),),
                      work={"unique_misses_per_call": 4, "hits_per_call": 10, "bytes_per_call": 256},
                      floor={"pcie_floor_us": None, "gather_floor_us": 1.5, "gather_samples_us": [1.5] * 12},
                      wall_s=0.5)


# ---------------------------------------------------------------------------------------------
# golden v1 file: tests/data/results_v1.json must load forever (upgraded to v2 on load)


def test_golden_v1_loads():
    run = load_run(GOLDEN)
    assert run.schema_version == results.SCHEMA_VERSION == 2
    assert run.backend == "cuda" and run.environment["gpu"] == "NVIDIA H200"
    assert run.floors["pinned_h2d_gbps"] == 55.3
    assert [c.status for c in run.cases] == ["ok", "ok", "failed"]
    lru, multi, planned = run.cases
    assert lru.case_id == "lru_sequential/distinct/b64/s4/k2048/h4096/i576/pdl0"
    assert len(multi.samples_us) == 10 and multi.timing["calls_per_graph"] == 100
    assert planned.reason.startswith("invariant 1 (data) failed for request 3")
    assert planned.samples_us == () and planned.stats is None and planned.derived is None and planned.runs == ()


def test_golden_v1_upgrades_to_one_run_per_case():
    lru, multi, planned = load_run(GOLDEN).cases
    (only,) = lru.runs
    assert (only.process, only.round) == (0, 0)
    assert only.samples_us[:3] == (640.9, 641.8, 640.2) and len(only.samples_us) == 10
    assert only.clocks["sm_mhz"] == [1980] * 10 and only.placement is None and only.replay_us == ()
    assert lru.settings == {"calls_per_graph": 100, "replays": 10, "warmup_calls": 5, "l2_flush": True, "rounds": 1}
    assert planned.settings == {"calls_per_graph": 100, "replays": 10, "warmup_calls": 5, "l2_flush": True}


def test_golden_v1_stats_and_derived_recomputed_equal_the_stored_ones():
    """v1 stored stats and derived beside the samples; v2 drops them and recomputes: the same figures."""
    raw = json.loads(GOLDEN.read_text())["cases"]
    run = load_run(GOLDEN)
    for c, stored in zip(run.cases, raw):
        if not c.ok:
            continue
        assert c.median_us == stored["stats"]["median_us"]  # exactly: the same samples, the same quantile rule
        for key, value in stored["stats"].items():
            assert c.stats[key] == pytest.approx(value)
        for key in ("gbps", "over_pcie_floor", "over_gather_floor"):
            assert c.derived[key] == pytest.approx(stored["derived"][key], rel=1e-6)  # the file rounded to 7 digits
    lru, multi, _ = run.cases
    # a pre-link file: multi_step's ratio is kept against the legacy baseline; its value is the stored one
    assert multi.speedup == 1.036812 == pytest.approx(lru.median_us / multi.median_us, rel=1e-6)
    assert multi.speedup_link.baseline == results.LEGACY_SPEEDUP_BASELINE
    assert lru.speedup_link is None and lru.derived["speedup_vs_lru_sequential"] is None


# ---------------------------------------------------------------------------------------------
# golden v2 file: tests/data/results_v2.json must load forever


def test_golden_v2_loads_with_every_figure_computed_from_its_runs():
    lru, multi, planned = load_run(GOLDEN_V2).cases
    assert [(r.process, r.round) for r in lru.runs] == [(0, 0), (0, 1), (1, 0)]
    assert lru.samples_us == tuple(float(x) for x in range(640, 652))  # pooled in run order
    # 12 samples 640..651: median between the 6th and 7th, quartiles at positions 2.75 and 8.25
    assert lru.stats == {"n": 12, "median_us": 645.5, "q1_us": 642.75, "q3_us": 648.25, "iqr_us": 5.5,
                         "min_us": 640.0, "max_us": 651.0, "mean_us": 645.5}
    assert lru.derived["gbps"] == pytest.approx(28827648 / 645.5e3)
    assert lru.derived["over_gather_floor"] == pytest.approx(645.5 / 588.3)
    assert lru.derived["over_pcie_floor"] == pytest.approx(645.5 / 521.295624)
    assert lru.processes == 2 and lru.samples_per_process == [8, 4] and lru.samples_per_round == [4, 4, 4]
    assert lru.timing["placements"][2] == {"host_cache": "0x7f9b00000000", "device_buffer": "0x7e1c00000000"}
    assert len(lru.timing["warmup_us"]) == 18 and lru.clocks["sm_mhz"] == [1980] * 12 and lru.clocks["source"] == "nvml"
    # two replays per sample: the replays are kept and the samples are their means
    assert multi.replay_us[:4] == (617.0, 619.0, 618.0, 620.0) and len(multi.replay_us) == 16
    assert multi.median_us == 621.5 and multi.timing["replays_per_sample"] == 2
    assert multi.speedup == pytest.approx(645.5 / 621.5) and multi.derived["speedup_baseline"] == lru.case_id
    assert multi.retime_errors == ("RuntimeError: CUDA out of memory (stand-in)",)
    assert multi.timing["retime_errors"] == list(multi.retime_errors) and "processes" not in multi.timing
    assert not planned.ok and planned.runs == () and planned.stats is None and planned.timing["rounds"] == 2


def test_golden_v2_is_what_the_writer_writes(tmp_path):
    """Read and written again, byte for byte: the writer stores nothing the golden file does not."""
    assert write_run(load_run(GOLDEN_V2), tmp_path / "again.json").read_text() == GOLDEN_V2.read_text()


def test_golden_v2_stores_no_statistics():
    for case in json.loads(GOLDEN_V2.read_text())["cases"]:
        assert not {"stats", "derived", "samples_us", "timing", "clocks"} & set(case)


# ---------------------------------------------------------------------------------------------
# every committed run file loads


def _committed_run_files():
    """Every JSON object under results/ that is a run file (it has ``cases``): results/runs, the
    stability and process probes, the detector's runs."""
    out = []
    for path in sorted(RESULTS.rglob("*.json")):
        if "asv" in path.relative_to(RESULTS).parts:
            continue
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "cases" in data:
            out.append(path)
    return out


def test_every_committed_run_file_loads():
    paths = _committed_run_files()
    assert len([p for p in paths if p.parent == RESULTS / "runs"]) >= 16
    assert any("stability" in p.parts for p in paths) and any("processes" in p.parts for p in paths)
    for path in paths:
        data = json.loads(path.read_text())
        raw = data["cases"]
        run = load_run(path)
        assert len(run.cases) == len(raw), path
        for c, stored in zip(run.cases, raw):
            if data["schema_version"] >= 2:  # samples live in the runs, in order; nothing stored twice
                runs = stored.get("runs") or []
                assert list(c.samples_us) == [s for r in runs for s in r["samples_us"]], (path, c.case_id)
                assert [len(r.samples_us) for r in c.runs] == [len(r["samples_us"]) for r in runs], (path, c.case_id)
                continue
            assert list(c.samples_us) == (stored.get("samples_us") or []), (path, c.case_id)
            if stored.get("stats"):
                assert c.median_us == stored["stats"]["median_us"], (path, c.case_id)
            assert c.timing.get("samples_per_round", [len(c.samples_us)]) == \
                (stored.get("timing") or {}).get("samples_per_round", [len(c.samples_us)]), (path, c.case_id)


# ---------------------------------------------------------------------------------------------
# the v1 -> v2 upgrade of rounds, processes, replays


def _v1_case(**timing):
    return {"case_id": "c", "params": {"implementation": "multi_step"}, "status": "ok", "reason": None,
            "timing": {"calls_per_graph": 10, "replays": 2, "warmup_calls": 1, "l2_flush": True, **timing},
            "samples_us": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "stats": {"median_us": 999.0},
            "clocks": {"source": "nvml", "sm_mhz": [1, 2, 3, 4, 5, 6], "mem_mhz": [], "throttle_reasons": []},
            "derived": {"gbps": 999.0, "speedup_vs_lru_sequential": 2.0, "speedup_baseline": "lru/c"}}


def _v1_file(*cases):
    data = json.loads(GOLDEN.read_text())
    return {**data, "cases": list(cases)}


def test_v1_rounds_and_processes_become_runs():
    case = _v1_case(rounds=3, samples_per_round=[2, 2, 2], processes=2, samples_per_process=[4, 2],
                    warmup_us=[9.0, 8.0, 7.0], placements=[{"host_cache": "0x1"}, {"host_cache": "0x2"}, {"host_cache": "0x3"}],
                    retime_errors=["boom"])
    (c,) = results.run_from_dict(_v1_file(case)).cases
    assert [(r.process, r.round, r.samples_us) for r in c.runs] == [(0, 0, (1.0, 2.0)), (0, 1, (3.0, 4.0)),
                                                                     (1, 0, (5.0, 6.0))]
    assert [r.warmup_us for r in c.runs] == [(9.0,), (8.0,), (7.0,)]
    assert [r.placement["host_cache"] for r in c.runs] == ["0x1", "0x2", "0x3"]
    assert [r.clocks["sm_mhz"] for r in c.runs] == [[1, 2], [3, 4], [5, 6]]
    assert c.settings["rounds"] == 2  # per process: v1 counted every round of every process
    assert c.timing["rounds"] == 3 and c.timing["samples_per_process"] == [4, 2] and c.retime_errors == ("boom",)
    assert c.median_us == 3.5 and c.derived["gbps"] is None  # the stored 999s are not read
    assert c.speedup_link == SpeedupLink("lru/c", 2.0)


def test_v1_replays_split_with_their_samples():
    case = _v1_case(samples_per_round=[3, 3], replays_per_sample=2, replay_us=[float(x) for x in range(1, 13)])
    (c,) = results.run_from_dict(_v1_file(case)).cases
    assert [r.replay_us for r in c.runs] == [tuple(float(x) for x in range(1, 7)), tuple(float(x) for x in range(7, 13))]
    assert c.settings["replays_per_sample"] == 2 and c.replay_us == tuple(float(x) for x in range(1, 13))


def test_v1_clock_lists_that_do_not_line_up_stay_with_the_first_run():
    case = _v1_case(samples_per_round=[3, 3])
    case["clocks"] = {"source": "nvml+unavailable", "sm_mhz": [1, 2, 3], "mem_mhz": [], "throttle_reasons": []}
    (c,) = results.run_from_dict(_v1_file(case)).cases
    assert [r.clocks["sm_mhz"] for r in c.runs] == [[1, 2, 3], []]
    assert c.clocks == case["clocks"]


@pytest.mark.parametrize("timing, field", [
    ({"samples_per_round": [2, 2]}, "samples_per_round"),
    ({"samples_per_round": [3, 3], "replays_per_sample": 2, "replay_us": [1.0] * 5}, "replay_us"),
    ({"samples_per_round": [3, 3], "samples_per_process": [2, 4]}, "samples_per_process"),
])
def test_inconsistent_v1_splits_are_refused_naming_the_field(tmp_path, timing, field):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_v1_file(_v1_case(**timing))))
    with pytest.raises(ResultFormatError, match=field):
        load_run(path)


# ---------------------------------------------------------------------------------------------
# the model


def test_round_trip(tmp_path):
    rec = _record([_ok_case("a"), CaseResult.failed("b", {"implementation": "lru_sequential"}, "boom")],
                  finished="2026-11-29T20:21:10Z")
    path = write_run(rec, tmp_path / "run.json")
    loaded = load_run(path)
    assert loaded == rec
    assert json.loads(path.read_text())["schema_version"] == 2
    assert list(json.loads(path.read_text())) == ["schema_version", "run_id", "created", "finished", "backend",
                                                  "config", "environment", "floors", "cases"]
    assert list(json.loads(path.read_text())["cases"][0]) == ["case_id", "params", "status", "reason", "settings",
                                                              "runs", "work", "floor", "speedup_link",
                                                              "retime_errors", "wall_s"]


def test_golden_v1_round_trips_through_the_writer_as_v2(tmp_path):
    run = load_run(GOLDEN)
    again = write_run(run, tmp_path / "again.json")
    assert json.loads(again.read_text())["schema_version"] == 2
    assert load_run(again) == run


def test_statistics_are_computed_from_the_runs():
    c = _ok_case("a", samples=(3.0, 1.0, 2.0, 10.0))
    assert c.median_us == 2.5 and c.stats["q1_us"] == 1.75 and c.stats["n"] == 4
    assert c.derived == {"gbps": 256 / 2.5e3, "over_pcie_floor": None, "over_gather_floor": 2.5 / 1.5,
                         "over_gather_warm": None, "translation_cost": None, "speedup_vs_lru_sequential": None}
    more = replace(c, runs=c.runs + (Run(process=1, round=0, samples_us=(4.0, 5.0)),))
    assert more.median_us == 3.5 and more.processes == 2 and more.samples_per_process == [4, 2]


def test_the_v1_constructor_is_upgraded_like_a_v1_file():
    """CaseResult(samples_us=..., timing=..., stats=...) (v1's fields): the stats given are not taken."""
    v1 = CaseResult(case_id="a", params={}, status="ok", samples_us=(1.0, 2.0, 3.0, 4.0), stats={"median_us": 99.0},
                    timing={"calls_per_graph": 2, "samples_per_round": [2, 2]}, clocks={"sm_mhz": [5, 6, 7, 8]},
                    derived={"speedup_vs_lru_sequential": 1.5, "speedup_baseline": "b"})
    assert [r.samples_us for r in v1.runs] == [(1.0, 2.0), (3.0, 4.0)] and [r.clocks for r in v1.runs] == \
        [{"sm_mhz": [5, 6]}, {"sm_mhz": [7, 8]}]
    assert v1.median_us == 2.5 and v1.speedup == 1.5 and v1.settings == {"calls_per_graph": 2, "rounds": 2}
    # dataclasses.replace with a v1 field replaces that field of the v1 view
    one_round = replace(v1, timing={"calls_per_graph": 2})
    assert len(one_round.runs) == 1 and one_round.samples_us == v1.samples_us and one_round.speedup == 1.5
    with pytest.raises(TypeError, match="unexpected"):
        CaseResult(case_id="a", params={}, status="ok", samples=(1.0,))


@pytest.mark.parametrize("run, match", [
    (dict(process=0, round=0, samples_us=[]), "samples_us is empty"),
    (dict(process=0, round=0, samples_us=[1.0, 2.0], replay_us=[1.0, 2.0, 3.0]), "multiple"),
    (dict(process=-1, round=0, samples_us=[1.0]), "process"),
    (dict(process=0, round=0, samples_us="fast"), "samples_us: expected a list"),
    (dict(process=0, samples_us=[1.0]), "missing field 'round'"),
])
def test_bad_runs_are_refused_naming_the_field(tmp_path, run, match):
    data = json.loads(GOLDEN_V2.read_text())
    data["cases"][0]["runs"] = [run]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match=match):
        load_run(path)


def test_a_bad_settings_or_link_is_refused(tmp_path):
    for field, value, match in (("settings", ["rounds", 2], "settings must be objects"),
                                ("speedup_link", {"value": 1.0}, "speedup_link")):
        data = json.loads(GOLDEN_V2.read_text())
        data["cases"][0][field] = value
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(data))
        with pytest.raises(ResultFormatError, match=match):
            load_run(path)


def test_runs_out_of_order_are_refused():
    with pytest.raises(ResultFormatError, match="order"):
        CaseResult(case_id="a", params={}, status="ok", runs=(Run(1, 0, (1.0,)), Run(0, 0, (1.0,))))
    with pytest.raises(ResultFormatError, match="needs runs"):
        CaseResult(case_id="a", params={}, status="ok")


def test_nan_is_written_as_null(tmp_path):
    c = _ok_case("a")
    c = replace(c, floor={**c.floor, "pcie_floor_us": float("nan")})
    loaded = load_run(write_run(_record([c]), tmp_path / "r.json"))
    assert loaded.cases[0].floor["pcie_floor_us"] is None


@pytest.mark.parametrize("version", [3, 0, "1", None, True])
def test_unknown_schema_version_is_refused(tmp_path, version):
    data = json.loads(GOLDEN_V2.read_text())
    data["schema_version"] = version
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match="schema_version"):
        load_run(path)


def test_missing_field_and_garbage_are_refused(tmp_path):
    for golden in (GOLDEN, GOLDEN_V2):
        data = json.loads(golden.read_text())
        del data["cases"][0]["status"]
        (tmp_path / "a.json").write_text(json.dumps(data))
        with pytest.raises(ResultFormatError, match="status"):
            load_run(tmp_path / "a.json")
    (tmp_path / "b.json").write_text("{not json")
    with pytest.raises(ResultFormatError):
        load_run(tmp_path / "b.json")


def test_upgrade_on_load_hook(monkeypatch):
    """A future v3 reader upgrades v2 files through _UPGRADES[2], and v1 files through both."""
    def v2_to_v3(data):
        data = dict(data)
        data["floors"] = {**data["floors"], "upgraded": True}
        return data

    monkeypatch.setattr(results, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(results._UPGRADES, 2, v2_to_v3)
    for golden in (GOLDEN, GOLDEN_V2):
        run = load_run(golden)
        assert run.schema_version == 3 and run.floors["upgraded"] is True


def test_derived_figures_by_hand():
    work, floor = {"bytes_per_call": 1000}, {"pcie_floor_us": 2.0, "gather_floor_us": None}
    none = {"over_gather_warm": None, "translation_cost": None}
    assert results.derived_figures(4.0, work, floor) == {"gbps": 1000 / 4e3, "over_pcie_floor": 2.0,
                                                         "over_gather_floor": None, **none}
    assert results.derived_figures(None, None, None) == {"gbps": None, "over_pcie_floor": None,
                                                         "over_gather_floor": None, **none}
    # a decode-regime case: its gather floor in its own regime (cold) and the same gather warm
    decode = {"pcie_floor_us": 2.0, "gather_floor_us": 3.0, "gather_warm_us": 1.5}
    got = results.derived_figures(4.5, work, decode)
    assert got["over_gather_floor"] == 1.5 and got["over_gather_warm"] == 3.0 and got["translation_cost"] == 2.0


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


def _interrupted_sweep(path, cases, fail_at):
    """A sweep of ``cases`` into a new run file at ``path``, interrupted when it reaches ``fail_at``."""
    writer = RunWriter.create(path, _record())
    with pytest.raises(_Interrupt):
        for _ in measure.run_sweep(cases, None, writer, floors=NOT_APPLICABLE, run=_fake_run(fail_at=fail_at),
                                   baseline_of=_baseline_of):
            pass


def test_resume_after_interrupted_sweep(tmp_path):
    cases = [_FakeCase("lru/1"), _FakeCase("ms/1"), _FakeCase("ms/2"), _FakeCase("ms/3")]
    path = tmp_path / "run.json"
    _interrupted_sweep(path, cases, fail_at="ms/2")
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


def _fake_host(root, cpuinfo=None, cmdline=None, groups=None):
    """A /proc and /sys under ``root`` holding what host_description reads."""
    (root / "proc").mkdir(parents=True)
    (root / "sys" / "kernel").mkdir(parents=True)
    if cpuinfo is not None:
        (root / "proc" / "cpuinfo").write_text(cpuinfo)
    if cmdline is not None:
        (root / "proc" / "cmdline").write_text(cmdline)
    if groups is not None:
        (root / "sys" / "kernel" / "iommu_groups").mkdir()
        for g in range(groups):
            (root / "sys" / "kernel" / "iommu_groups" / str(g)).mkdir()
    return root


CPUINFO = (
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\nflags\t\t: fpu vme sse2 hypervisor\n\n"
    "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\nflags\t\t: fpu vme sse2 hypervisor\n"
)


def test_host_description_reads_the_cpu_model_iommu_and_hypervisor(tmp_path):
    from hisparse.results import metadata

    host = _fake_host(tmp_path / "a", CPUINFO, "BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt quiet\n", groups=3)
    assert metadata.host_description(host) == {
        "cpu": "Intel(R) Xeon(R) Platinum 8480C", "iommu": "on (intel_iommu=on iommu=pt)", "hypervisor": True}
    bare = _fake_host(tmp_path / "b", "model name\t: AMD EPYC 9654\nflags\t\t: fpu sse2\n", "ro quiet\n", groups=0)
    assert metadata.host_description(bare) == {"cpu": "AMD EPYC 9654", "iommu": "off", "hypervisor": False}


def test_host_description_is_none_where_the_files_are_absent(tmp_path):
    import platform

    from hisparse.results import metadata

    got = metadata.host_description(tmp_path / "nothing")
    assert got["iommu"] is None and got["hypervisor"] is None
    assert got["cpu"] == (platform.processor() or platform.machine() or None)
    assert metadata.validate(got) == []


def test_a_resumed_run_names_the_cases_each_session_timed(tmp_path):
    """2026-12-06: a vs-sglang run finished on a second machine start; the file must say which cases
    that start timed, so a ratio across the two starts is shown as such."""
    from hisparse.render.text import run_summary  # noqa: PLC0415

    cases = [_FakeCase("lru/1"), _FakeCase("ms/1"), _FakeCase("ms/2")]
    path = tmp_path / "run.json"
    _interrupted_sweep(path, cases, fail_at="ms/2")
    assert "resumes" not in json.loads(path.read_text())  # a run never resumed reads as before the key
    first = load_run(path)
    text = run_summary(first)
    assert "resumed" not in text and "across sessions" not in text

    elsewhere = {**first.environment, "cpu": "another host"}  # not a checked key: the resume goes ahead
    writer = RunWriter.resume(path, config_hash="abc", backend="reference", environment=elsewhere)
    list(measure.run_sweep(cases, None, writer, floors=NOT_APPLICABLE, run=_fake_run(), baseline_of=_baseline_of))
    writer.finish()

    final = load_run(path)
    assert len(final.resumes) == 1
    assert final.resumes[0].cases == ("ms/2",)
    assert final.resumes[0].environment == {"cpu": "another host"}
    assert [final.session_of(c) for c in ("lru/1", "ms/1", "ms/2")] == [0, 0, 1]
    text = run_summary(final)
    assert "1 case(s) timed then, environment differs: cpu 'another host'" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ms/")}
    assert "2.00x+" in rows["ms/2"] and "2.00x+" not in rows["ms/1"]  # ms/2 against lru/1, timed when the file was created
    assert "across sessions" in text


@pytest.mark.parametrize("resumes, named", [
    ({"started": "x"}, "resumes must be a list"),
    (["x"], "resumes[0] must be an object"),
    ([{"started": 5, "environment": {}, "cases": []}], "resumes[0].started"),
    ([{"started": "t", "environment": [], "cases": []}], "resumes[0].environment"),
    ([{"started": "t", "environment": {}, "cases": [1]}], "resumes[0].cases"),
])
def test_a_malformed_resumes_entry_is_refused_naming_the_field(tmp_path, resumes, named):
    data = _record([_ok_case("ms/1")]).to_dict()
    data["resumes"] = resumes
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match=named.replace("[", r"\[").replace("]", r"\]")):
        load_run(path)
