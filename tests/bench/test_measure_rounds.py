"""``timing.rounds``: one case timed in several rounds, each on a freshly built workload, on the
reference backend with the real workload, implementations and invariant checker."""
import gc
import json
import weakref

import pytest
import torch

from hisparse.bench import calls as implementations
from hisparse.bench import measure
from hisparse.bench import timing
from hisparse.bench.backends import get_backend
from hisparse.bench.case import Case, TimingSettings
from hisparse.bench.floors import NOT_APPLICABLE
from hisparse.results.model import RunRecord, load_run, write_run
from hisparse.stats import summary
from hisparse.bench.workload import TOKEN_SCALE, make_workload

TINY_TIMING = dict(warmup_calls=1, calls_per_graph=2, replays=10, l2_flush=False, check_calls=1)


def _case(rounds, implementation="multi_step"):
    return Case(implementation, "distinct", batch=1, steps=2, top_k=16, hot_buffer_size=64, item_size_bytes=64,
                timing=TimingSettings(**TINY_TIMING, rounds=rounds))


class _CountingMake:
    """make_workload that counts its calls, keeps a weak reference to each workload and its device
    buffer, records what it was asked for and built, and (optionally) fails on one call."""

    def __init__(self, fail_on=None):
        self.workloads, self.device_rows, self.alive_at_build, self.buffers_at_build = [], [], [], []
        self.offsets, self.schedules, self.host_first_words = [], [], []
        self.fail_on = fail_on

    @property
    def calls(self):
        return len(self.alive_at_build)

    def __call__(self, case, device, **kw):
        gc.collect()
        self.alive_at_build.append(sum(ref() is not None for ref in self.workloads))
        self.buffers_at_build.append(sum(ref() is not None for ref in self.device_rows))
        if self.fail_on == self.calls - 1:
            raise RuntimeError("out of memory (stand-in)")
        self.offsets.append(kw.get("host_offset_rows", 0))
        w = make_workload(case, device, **kw)
        self.workloads.append(weakref.ref(w))
        self.device_rows.append(weakref.ref(w.buffers.device_buffer))
        self.schedules.append(torch.stack([w.call_tokens(c) for c in range(case.timing.calls_per_graph)]))
        self.host_first_words.append(int(w.buffers.host_cache[0, 0]))
        return w


@pytest.fixture
def counted_calls(monkeypatch):
    counts = {"checked": 0, "recorded": 0}
    checked, recorded = implementations.BoundCall.checked_call, implementations.BoundCall.recorded_call

    def checked_call(self):
        counts["checked"] += 1
        return checked(self)

    def recorded_call(self):
        counts["recorded"] += 1
        return recorded(self)

    monkeypatch.setattr(implementations.BoundCall, "checked_call", checked_call)
    monkeypatch.setattr(implementations.BoundCall, "recorded_call", recorded_call)
    return counts


def test_three_rounds_pool_samples_and_check_once(counted_calls):
    make = _CountingMake()
    r = measure.run_case(_case(3), get_backend("reference"), floors=NOT_APPLICABLE, make_workload=make)
    assert r.ok, r.reason
    assert make.calls == 3  # round 0 + two fresh workloads
    assert counted_calls == {"checked": 1, "recorded": 2}  # check_calls and calls_per_graph, round 0 only
    assert r.timing["rounds"] == 3 and r.timing["samples_per_round"] == [10, 10, 10]
    assert sum(r.timing["samples_per_round"]) == len(r.samples_us) == 30 == r.stats["n"]
    assert r.timing["replays"] == 10  # per round
    assert len(r.timing["warmup_us"]) == 3 * TINY_TIMING["warmup_calls"]
    assert r.stats == summary(r.samples_us).to_dict()  # statistics over the pooled samples
    assert r.floor["gather_floor_us"] > 0 and len(r.floor["gather_samples_us"]) == 10  # measured once
    # One round's workload alive at a time: when a round builds, the previous one is gone; only the
    # earlier rounds' device buffers stay (their addresses taken), and all are released at the end.
    assert make.alive_at_build == [0, 0, 0]
    assert make.buffers_at_build == [0, 1, 2]
    gc.collect()
    assert not any(ref() is not None for ref in make.workloads + make.device_rows)
    # Same seed: the same schedule each round; the host rows are read from further into the pool.
    assert all(torch.equal(s, make.schedules[0]) for s in make.schedules)
    shift = measure.round_host_offset_rows(_case(3), 1)
    assert make.offsets == [0, shift, 2 * shift] and shift * 64 >= measure.ROUND_HOST_SHIFT_BYTES
    assert make.host_first_words == [o * TOKEN_SCALE for o in make.offsets]  # row o of the pattern


def test_one_round_is_todays_behaviour(counted_calls):
    make = _CountingMake()
    r = measure.run_case(_case(1), get_backend("reference"), floors=NOT_APPLICABLE, make_workload=make)
    assert r.ok and make.calls == 1 and counted_calls["checked"] == 1
    assert r.timing["rounds"] == 1 and r.timing["samples_per_round"] == [len(r.samples_us)] == [10]


def test_a_failing_later_round_fails_the_case_with_its_reason():
    make = _CountingMake(fail_on=2)
    r = measure.run_case(_case(3), get_backend("reference"), floors=NOT_APPLICABLE, make_workload=make)
    assert r.status == "failed" and r.samples_us == () and r.stats is None
    assert r.reason == "round 2: RuntimeError: out of memory (stand-in)"
    assert r.timing["rounds"] == 3


def test_a_failing_check_builds_no_more_rounds(monkeypatch):
    monkeypatch.setattr(implementations.BoundCall, "checked_call",
                        lambda self: [type("V", (), dict(invariant="1 (data)", request=0, entry=None,
                                                         detail="wrong row"))()])
    make = _CountingMake()
    r = measure.run_case(_case(3), get_backend("reference"), floors=NOT_APPLICABLE, make_workload=make)
    assert r.status == "failed" and r.reason.startswith("check call 0: invariant 1 (data)")
    assert make.calls == 1


def test_result_file_round_trips_with_the_round_keys(tmp_path):
    r = measure.run_case(_case(2, "lru_sequential"), get_backend("reference"), floors=NOT_APPLICABLE)
    assert r.ok, r.reason
    rec = RunRecord(run_id="r", created="2026-11-29T20:15:00Z", backend="reference",
                    config={"name": "t", "hash": "abc"}, environment={"machine": "m", "git_commit": "0" * 40},
                    floors=NOT_APPLICABLE.to_dict(), cases=(r,))
    path = write_run(rec, tmp_path / "run.json")
    raw = json.loads(path.read_text())["cases"][0]
    assert raw["settings"]["rounds"] == 2 and [len(r["samples_us"]) for r in raw["runs"]] == [10, 10]
    assert [(r["process"], r["round"]) for r in raw["runs"]] == [(0, 0), (0, 1)]
    assert all(r["replay_us"] == [] for r in raw["runs"])  # one replay per sample: stored once, as samples
    loaded = load_run(path)
    assert loaded == rec
    c = loaded.cases[0]
    n0 = c.timing["samples_per_round"][0]
    assert c.samples_us[:n0] + c.samples_us[n0:] == c.samples_us and len(c.samples_us) == 20


def test_each_round_records_where_its_buffers_landed():
    """Round r's host rows start r x (2 MiB + 4 KiB) further into the shared pool: the recorded
    host_cache addresses say so; device_buffer addresses are recorded for every round too."""
    case = _case(3)
    r = measure.run_case(case, get_backend("reference"), floors=NOT_APPLICABLE)
    assert r.ok, r.reason
    places = r.timing["placements"]
    assert len(places) == 3 and all(set(p) == {"host_cache", "device_buffer"} for p in places)
    host = [int(p["host_cache"], 16) for p in places]
    step = measure.round_host_offset_rows(case, 1) * case.item_size_bytes
    assert [h - host[0] for h in host] == [0, step, 2 * step]


def test_replays_per_sample_keeps_every_replay_and_reports_their_modes(tmp_path, monkeypatch):
    """Three replays per sample, two rounds: samples are means of their replays, every replay is in
    ``timing.replay_us`` (through the file and a retime merge), and ``stats.modes`` describes the
    replays, whose two states the averaged samples no longer show."""
    from hisparse.bench import retime as repeat  # noqa: PLC0415

    case = Case("lru_sequential", "distinct", batch=1, steps=2, top_k=16, hot_buffer_size=64, item_size_bytes=64,
                timing=TimingSettings(**TINY_TIMING, rounds=2, replays_per_sample=3))
    state = iter(range(10_000))
    # every replay on its own: 53.2 or 55.2 us per call, alternating in runs of 1..3 (no sample is all one mode)
    replay_times = [53.2 if (next(state) * 7 // 3) % 2 else 55.2 for _ in range(200)]
    times = iter(replay_times)

    def fake_sampled(replay_once, samples, per_sample):
        per_replay = tuple(next(times) for _ in range(samples * per_sample))
        return tuple(sum(per_replay[i:i + per_sample]) / per_sample for i in range(0, len(per_replay), per_sample)), per_replay

    monkeypatch.setattr(timing, "_sampled", fake_sampled)
    r = measure.run_case(case, get_backend("reference"), floors=NOT_APPLICABLE)
    assert r.ok, r.reason
    assert r.timing["replays_per_sample"] == 3 and len(r.timing["replay_us"]) == 3 * len(r.samples_us) == 60
    assert r.replay_us == pytest.approx(replay_times[:60])
    assert r.samples_us[0] == pytest.approx(sum(replay_times[:3]) / 3)
    centers = [m["center_us"] for m in r.stats["modes"]]
    assert centers == pytest.approx([53.2, 55.2])
    rec = RunRecord(run_id="r", created="2026-11-30T01:00:00Z", backend="reference",
                    config={"name": "t", "hash": "abc"}, environment={"machine": "m", "git_commit": "0" * 40},
                    floors=NOT_APPLICABLE.to_dict(), cases=(r,))
    loaded = load_run(write_run(rec, tmp_path / "run.json")).cases[0]
    assert loaded.replay_us == r.replay_us
    more, _ = measure.time_rounds(case, get_backend("reference"), make_workload, timing.Settings.of(case.timing),
                                  range(2, 3))
    merged = repeat.merge(loaded, more, [{}])
    assert merged.replay_us == pytest.approx(replay_times[:90]) and len(merged.samples_us) == 30
    assert merged.timing["replays_per_sample"] == 3
    assert [(r.process, r.round) for r in merged.runs] == [(0, 0), (0, 1), (1, 0)] and merged.runs[2].placement == {}
