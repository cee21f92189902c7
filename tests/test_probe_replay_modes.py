"""scripts/probe_replay_modes.py's kernel-row analysis (split_calls, call_timeline), on the CPU.

On synthetic rows and on the committed CUPTI dumps of 2026-12-01
(results/probes/gather-groups-h200-20261201/kernel-split/): expected values are read off the rows by
hand. The first version took a fixed 3 kernels per call, which for a workload whose advance is no
kernel (PDL off, `serving`) put 150 calls and the next replay's flush into one "replay".
"""
import gzip
import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPLIT = REPO / "results" / "probes" / "gather-groups-h200-20261201" / "kernel-split"


def _module():
    spec = importlib.util.spec_from_file_location("probe_replay_modes", REPO / "scripts" / "probe_replay_modes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(name: str) -> list:
    return json.load(gzip.open(SPLIT / name))["kernels"][0]


def test_calls_start_at_a_gather_and_other_kernels_go_to_the_next_call():
    rows = [("other", 0.0, 1.0, "advance"), ("gather", 2.0, 10.0, "g"), ("commit", 5.0, 8.0, "c"),
            ("other", 14.0, 0.5, "advance a"), ("other", 14.5, 0.5, "advance b"),
            ("gather", 16.0, 9.0, "g"), ("commit", 18.0, 8.0, "c"),
            ("other", 30.0, 3.0, "flush of the next replay")]
    calls = _module().split_calls(rows, calls=2)
    assert [c["pre"] for c in calls] == [1.0, 1.0]
    assert [c["gather"] for c in calls] == [(2.0, 10.0), (16.0, 9.0)]
    assert [c["commit"] for c in calls] == [(5.0, 8.0), (18.0, 8.0)]


def test_no_more_calls_than_the_graph_holds():
    rows = [r for i in range(5) for r in (("gather", 10.0 * i, 5.0), ("commit", 10.0 * i + 5, 4.0))]
    assert len(_module().split_calls(rows, calls=3)) == 3
    assert _module().split_calls([("other", 0.0, 1.0)], calls=3) == []


def test_timeline_of_the_first_two_calls_with_pdl():
    """serving b1, PDL on: an advance kernel, the gather, the commit overlapping it."""
    t = _module().call_timeline(_rows("kernels-pdl1.json.gz"), calls=2)
    # call 0: gather 5287939421803.776 + 21.984, commit 5287939421813.632 + 12.512, advance 1.12 before;
    # call 1: advance 1.408, gather 5287939421827.776 + 20.64, commit 5287939421836.352 + 12.992
    assert t["calls"] == 2
    assert t["pre"] == pytest.approx((1.12 + 1.408) / 2)
    assert t["gather"] == pytest.approx((21.984 + 20.64) / 2)
    assert t["commit"] == pytest.approx((12.512 + 12.992) / 2)
    assert t["commit_start"] == pytest.approx((9.856 + 8.576) / 2, abs=1e-3)
    assert t["commit_end"] == pytest.approx((0.384 + 0.928) / 2, abs=1e-3)
    assert t["next_gather"] == pytest.approx(5287939421827.776 - 5287939421826.144, abs=1e-3)


def test_timeline_without_pdl_and_without_an_advance_kernel():
    """serving b1, PDL off: the dump holds no advance kernel (its copy is not a kernel), and the
    commit starts after the gather ends."""
    t = _module().call_timeline(_rows("kernels-pdl0.json.gz"), calls=2)
    assert t["pre"] == 0.0
    assert t["gather"] == pytest.approx((21.504 + 20.543) / 2)
    assert t["commit_start"] == pytest.approx((21.568 + 20.832) / 2, abs=1e-3)
    assert t["commit_start"] > t["gather"]


def test_a_whole_dump_gives_the_graphs_calls():
    rows = _rows("kernels-pdl0.json.gz")  # 300 rows: the first version's window, 150 calls
    calls = _module().split_calls(rows)
    assert len(calls) == 100
    assert all(c["commit"][0] >= c["gather"][0] + c["gather"][1] for c in calls)  # PDL off: in order


def test_probe_cases_hold_the_probes_100_calls_with_misses_to_the_last():
    # The probe captures 100 calls; default.yaml's cases hold 20. Built for 20, `upstream`'s calls
    # 21-100 asked for tokens past its host rows (no misses: a 4.2 us gather against the engine's ~17).
    mod = _module()
    cases = mod.probe_cases()
    assert all(c.timing.max_calls_per_reset >= mod.CALLS for c in cases.values())
    from hisparse.bench.workload import make_workload

    case = cases["multi_step/upstream/b1/s4/k2048/h4096/i576/pdl1"]
    assert case.timing.calls_per_graph == mod.CALLS == 100
    w = make_workload(case, "cpu")
    for _ in range(mod.CALLS):
        w.advance()
    locs = w.buffers.host_cache_locs
    for toks in w.fresh_tokens(mod.CALLS - 1):  # the last call's fresh tokens: 782 unique misses
        assert toks.numel() == 782
        assert int(toks.max()) < locs.shape[1]
        assert bool((locs[0, toks] >= 0).all())
