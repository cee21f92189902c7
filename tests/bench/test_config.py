"""Sweep configs: validation messages, expansion and pruning (counts by hand), CI subsets, filters,
case ids, the config hash, and the shipped configs."""
from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import pytest

from hisparse.bench import case as config
from hisparse.bench.case import Case, TimingSettings, pattern_geometry
from hisparse.bench.config import load_config, parse_config
from hisparse.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def config_error(tmp_path: Path, text: str) -> tuple[str, Path]:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    return str(e.value), p


# ---------------------------------------------------------------------------------------------
# Limits agree with the rest of the package


def test_upstream_geometry_is_the_reference_benchmark():
    # docs/semantics.md §5.1: 196 misses per step, 1852 hits, 782 unique over 4 steps, +800, roll 137, 4096
    assert tuple(pattern_geometry(2048, 4)) == (196, 1852, 782, 800, 137, 4096)
    assert pattern_geometry(2048, 1).unique == 196
    assert pattern_geometry(2048, 2).unique == 392
    assert pattern_geometry(2048, 3).unique == 196 + 196 + 195


def test_timing_defaults_and_replays_floor():
    t = TimingSettings()
    assert (t.warmup_calls, t.calls_per_graph, t.replays, t.l2_flush, t.check_calls) == (5, 100, 10, True, 2)
    assert t.rounds == 1 and t.to_dict()["rounds"] == 1
    with pytest.raises(ConfigError, match=r"timing\.replays.*\[10, "):
        TimingSettings(replays=9)


@pytest.mark.parametrize("bad, shown", [("0", "int 0"), ("21", "int 21"), ("x", "str 'x'"),
                                        ("true", "bool True"), ("2.5", "float 2.5")])
def test_bad_timing_rounds_names_the_key_and_range(tmp_path, bad, shown):
    msg, p = config_error(tmp_path, f"timing: {{rounds: {bad}}}\n")
    assert msg.startswith(f"{p}: timing.rounds: ") and shown in msg
    assert msg.endswith("an integer in [1, 20]") or msg.endswith(f"an integer in [1, 20], got {shown}")
    with pytest.raises(ConfigError, match=r"timing\.rounds.*\[1, 20\]"):
        TimingSettings(rounds=0)


def test_timing_rounds_is_read_and_changes_the_hash(tmp_path):
    one = load_config(write(tmp_path, "timing: {rounds: 1}\n", "one.yaml"))
    three = load_config(write(tmp_path, "timing: {rounds: 3}\n", "three.yaml"))
    assert one.timing.rounds == 1 and three.timing.rounds == 3
    assert all(c.timing.rounds == 3 for c in three.expand())
    assert one.config_hash != three.config_hash  # a different measurement, not resumable into


def test_timing_replays_per_sample_is_read_and_checked(tmp_path):
    five = load_config(write(tmp_path, "timing: {calls_per_graph: 20, replays_per_sample: 5}\n", "five.yaml"))
    assert all(c.timing.replays_per_sample == 5 for c in five.expand())
    assert TimingSettings().replays_per_sample == 1  # one replay per sample unless a config asks
    # a config that does not set it hashes as before the key existed (history stays comparable)
    assert "replays_per_sample" not in TimingSettings().to_dict()
    assert TimingSettings.from_dict(five.timing.to_dict()) == five.timing
    assert load_config(write(tmp_path, "timing: {calls_per_graph: 20}\n", "one.yaml")).config_hash != five.config_hash
    msg, p = config_error(tmp_path, "timing: {replays_per_sample: 0}\n")
    assert msg.startswith(f"{p}: timing.replays_per_sample: ") and "[1, 1000]" in msg


# ---------------------------------------------------------------------------------------------
# Expansion and pruning, counted by hand

SMALL = """\
    axes:
      implementation: [lru_sequential, multi_step]
      workload: [upstream, distinct]
      batch: {values: [1, 8], ci: [8]}
      steps: [2, 4]
      top_k: 2048
      hot_buffer_size: [2048, 4096]
      pdl: [on, off]
    workloads: {upstream: {}, distinct: {layers: 1}}  # the warm regime: ids as before layers existed
    """


def test_small_expansion_counts_and_reasons(tmp_path):
    cfg = load_config(write(tmp_path, SMALL))
    exp = cfg.expand()
    # Valid: hot 4096 only (hot 2048 < 2*top_k for both workloads). lru_sequential: 2 workloads x
    # 2 batches x 2 steps = 8 (PDL does not apply, one case); multi_step: 2 x 2 x 2 x 2 PDL = 16.
    assert len(exp.cases) == 24
    assert sum(c.implementation == "lru_sequential" for c in exp.cases) == 8
    assert all(not c.pdl for c in exp.cases if c.implementation == "lru_sequential")
    # Pruned ids: hot 2048 (x steps 2, 4) = 2 per (impl, workload, batch, pdl):
    # lru 2*2*2 = 8, multi_step 2*2*2*2 = 16.
    assert len(exp.pruned) == 24
    assert len({p.case_id for p in exp.pruned}) == 24
    reasons = {p.case_id: p.reason for p in exp.pruned}
    assert "upstream has a fixed shape" in reasons["lru_sequential/upstream/b8/s2/k2048/h2048/i576/pdl0"]
    assert "hot_buffer_size >= 4096" in reasons["lru_sequential/upstream/b8/s2/k2048/h2048/i576/pdl0"]
    assert "distinct needs hot_buffer_size >= 2*top_k = 4096" in reasons[
        "multi_step/distinct/b8/s4/k2048/h2048/i576/pdl1"]
    for p in exp.pruned:  # a pruned record carries the full params of its case
        assert set(p.params) == set(Case("multi_step", "distinct").to_dict())


def test_small_expansion_ci_subset(tmp_path):
    exp = load_config(write(tmp_path, SMALL)).expand(ci=True)
    assert len(exp.cases) == 12  # batch 8 only: half of 24
    assert {c.batch for c in exp.cases} == {8}
    assert len(exp.pruned) == 12  # half of 24


def test_prune_rules_top_k_and_occurrences(tmp_path):
    cfg = load_config(write(tmp_path, """\
        axes: {implementation: multi_step, workload: trace, top_k: 4096,
               hot_buffer_size: [2048, 8192], steps: [1, 2, 4], batch: 1}
        workloads: {trace: {layers: 1}}
        """))
    exp = cfg.expand()
    # hot 2048: top_k > hot (3); hot 8192: steps 4 -> 16384 occurrences (1); steps 1 and 2 run.
    assert sorted(c.case_id for c in exp.cases) == [
        "multi_step/trace/b1/s1/k4096/h8192/i576/pdl1", "multi_step/trace/b1/s2/k4096/h8192/i576/pdl1"]
    reasons = sorted(p.reason for p in exp.pruned)
    assert len(reasons) == 4
    assert reasons.count("top_k 4096 > hot_buffer_size 2048 (one step's top-k must fit in the hot buffer)") == 3
    assert "steps*top_k = 4*4096 = 16384 > 8192 (multi-step occurrence limit)" in reasons


def test_prune_lru_int16_limit_and_trace_rates(tmp_path):
    cfg = load_config(write(tmp_path, """\
        axes: {workload: trace, top_k: 2048, hot_buffer_size: [4096, 32768], steps: 4}
        workloads:
          trace: {miss_rate: [0.1, 0.3], step_overlap: 0.8, layers: 1}
        """))
    exp = cfg.expand()
    # 3 implementations x 2 hot x 2 miss rates = 12 combos; miss_rate 0.3 + 0.8 > 1 prunes 6;
    # lru_sequential at hot 32768 prunes 1 more (int16 lru_slots).
    assert len(exp.cases) == 5
    reasons = {p.case_id: p.reason for p in exp.pruned}
    assert reasons["lru_sequential/trace/b1/s4/k2048/h32768/i576/pdl0"].startswith(
        "lru_sequential needs hot_buffer_size <= 32767")
    assert reasons["multi_step/trace/b1/s4/k2048/h4096/i576/pdl1/miss_rate=0.3"] == (
        "trace needs miss_rate + step_overlap <= 1, got 0.3 + 0.8")


def test_exclude_rules_and_slices(tmp_path):
    cfg = load_config(write(tmp_path, """\
        axes: {implementation: [lru_sequential, multi_step], workload: distinct, batch: [1, 2], pdl: on}
        slices:
          - {implementation: multi_step, batch: 64, item_size_bytes: {values: [576, 1152], ci: []}}
        exclude:
          - {implementation: lru_sequential, batch: 1, reason: not interesting}
          - {batch: 64, item_size_bytes: 1152}
        workloads: {distinct: {layers: 1}}
        """))
    exp = cfg.expand()
    assert exp.ids == ["lru_sequential/distinct/b2/s4/k2048/h4096/i576/pdl0",
                       "multi_step/distinct/b1/s4/k2048/h4096/i576/pdl1",
                       "multi_step/distinct/b2/s4/k2048/h4096/i576/pdl1",
                       "multi_step/distinct/b64/s4/k2048/h4096/i576/pdl1"]
    assert {p.case_id: p.reason for p in exp.pruned} == {
        "lru_sequential/distinct/b1/s4/k2048/h4096/i576/pdl0": "not interesting",
        "multi_step/distinct/b64/s4/k2048/h4096/i1152/pdl1": "excluded by exclude[1]"}
    # An empty CI list drops the slice from --ci.
    assert all(c.batch != 64 for c in cfg.expand(ci=True))


def test_slices_dedupe_against_the_main_grid(tmp_path):
    cfg = load_config(write(tmp_path, """\
        axes: {implementation: multi_step, workload: distinct, batch: [1, 64]}
        slices: [{batch: 64}, {batch: 64, steps: [2, 4]}]
        workloads: {distinct: {layers: 1}}
        """))
    assert cfg.expand().ids == ["multi_step/distinct/b1/s4/k2048/h4096/i576/pdl1",
                                "multi_step/distinct/b64/s4/k2048/h4096/i576/pdl1",
                                "multi_step/distinct/b64/s2/k2048/h4096/i576/pdl1"]


def test_sweep_order_groups_item_sizes_keeping_expansion_order_within(tmp_path):
    # The host pool holds one item size's rows at a time: cases of a size run together, sizes in the
    # order they first appear, each block in expansion order.
    cfg = load_config(write(tmp_path, """\
        axes: {implementation: [lru_sequential, multi_step], workload: distinct, batch: [1, 2],
               item_size_bytes: [576, 1152], pdl: on}
        workloads: {distinct: {layers: 1}}
        """))
    assert cfg.expand().ids == [
        "lru_sequential/distinct/b1/s4/k2048/h4096/i576/pdl0", "lru_sequential/distinct/b2/s4/k2048/h4096/i576/pdl0",
        "multi_step/distinct/b1/s4/k2048/h4096/i576/pdl1", "multi_step/distinct/b2/s4/k2048/h4096/i576/pdl1",
        "lru_sequential/distinct/b1/s4/k2048/h4096/i1152/pdl0", "lru_sequential/distinct/b2/s4/k2048/h4096/i1152/pdl0",
        "multi_step/distinct/b1/s4/k2048/h4096/i1152/pdl1", "multi_step/distinct/b2/s4/k2048/h4096/i1152/pdl1"]


def test_expansion_iterates_like_a_list(tmp_path):
    exp = load_config(write(tmp_path, SMALL)).expand()
    assert list(exp) == exp.cases and len(exp) == 24


# ---------------------------------------------------------------------------------------------
# Filters


def test_filters(tmp_path):
    cfg = load_config(write(tmp_path, SMALL))
    assert len(cfg.expand(filters=["batch=8"])) == 12
    assert len(cfg.expand(filters=["batch=1,8"])) == 24
    # pdl=off is every lru_sequential case (8) and multi_step's PDL-off ones (8).
    off = cfg.expand(filters=["pdl=off"])
    assert len(off) == 16 and all(not c.pdl for c in off)
    both = cfg.expand(filters=["workload=distinct", "/b8/", "multi_step/"])
    assert sorted(both.ids) == sorted(
        f"multi_step/distinct/b8/s{s}/k2048/h4096/i576/pdl{p}" for s in (2, 4) for p in (0, 1))
    assert both.filtered_out == 20
    assert len(cfg.expand(filters=["nothing-matches-this"])) == 0
    # the pruned combinations are those of the selection (24 in all, counted in the test above)
    assert cfg.expand(filters=["hot_buffer_size=4096"]).pruned == []
    assert len(cfg.expand(filters=["hot_buffer_size=2048", "lru_sequential/"]).pruned) == 8
    assert len(cfg.expand(filters=["batch=8", "workload=distinct"]).pruned) == 6  # lru 2 steps + multi 2x2


def test_filter_errors_name_the_allowed_keys(tmp_path):
    cfg = load_config(write(tmp_path, SMALL))
    with pytest.raises(ConfigError, match=r"unknown key 'bs'.*batch.*hot_buffer_size.*miss_rate"):
        cfg.expand(filters=["bs=8"])
    with pytest.raises(ConfigError, match=r"batch.*expected an integer"):
        cfg.expand(filters=["batch=eight"])


def test_filter_on_workload_parameters(tmp_path):
    cfg = load_config(write(tmp_path, """\
        axes: {implementation: multi_step, workload: [distinct, trace], top_k: 64, hot_buffer_size: 256}
        workloads:
          trace: {miss_rate: [0.05, 0.2], host_layout: [scattered, contiguous], layers: 1}
          distinct: {layers: 1}
        """))
    assert len(cfg.expand()) == 5
    assert len(cfg.expand(filters=["miss_rate=0.2"])) == 2
    assert cfg.expand(filters=["host_layout=contiguous", "miss_rate=0.05"]).ids == [
        "multi_step/trace/b1/s4/k64/h256/i576/pdl1/host_layout=contiguous/miss_rate=0.05"]


def test_views_name_filter_lists(tmp_path):
    cfg = load_config(write(tmp_path, SMALL.rstrip(" ") + """\
    views:
      b8: [batch=8]
      pair:
        - workload=distinct
        - /b8/
        - multi_step/
    """))
    assert cfg.views == {"b8": ("batch=8",), "pair": ("workload=distinct", "/b8/", "multi_step/")}
    # the view's filters act as --filter's: the same 12 and 4 cases as test_filters counts by hand
    assert len(cfg.expand(filters=cfg.selection("b8"))) == 12
    assert cfg.selection("pair", ["pdl=on"]) == ("workload=distinct", "/b8/", "multi_step/", "pdl=on")
    assert sorted(cfg.expand(filters=cfg.selection("pair", ["pdl=on"])).ids) == sorted(
        f"multi_step/distinct/b8/s{s}/k2048/h4096/i576/pdl1" for s in (2, 4))
    assert cfg.selection(None, ["batch=1"]) == ("batch=1",)
    with pytest.raises(ConfigError, match=r"view 'nope': not a view of config 'sweep'; its views: b8, pair"):
        cfg.selection("nope")
    bare = load_config(write(tmp_path, SMALL, "bare.yaml"))
    with pytest.raises(ConfigError, match=r"view 'b8'.*declares no `views:`"):
        bare.selection("b8")


@pytest.mark.parametrize("views, key, shown", [
    ("views: [batch=8]", "views", "expected a mapping of view name -> list of filters"),
    ("views: {b8: []}", "views.b8", "expected a non-empty list of filters"),
    ("views: {b8: [batch=eight]}", "views.b8[0]", "batch"),
    ("views: {b8: [bs=8]}", "views.b8[0]", "unknown key 'bs'"),
    ("views: {b8: [3]}", "views.b8[0]", "expected a filter string"),
    ("views: {'a b': [batch=8]}", "views.a b", "without spaces"),
])
def test_bad_views_name_the_key(tmp_path, views, key, shown):
    msg, p = config_error(tmp_path, SMALL + views + "\n")  # SMALL ends in its indent
    assert msg.startswith(f"{p}: {key}: ") and shown in msg, msg


def test_shipped_views_select_what_their_comments_say():
    """The counts in configs/*.yaml's comments (and the docs that quote them)."""
    default, vs = load_config(REPO / "configs/default.yaml"), load_config(REPO / "configs/vs-sglang.yaml")
    assert len(default.expand(filters=default.selection("serving"))) == 61
    headline = default.expand(filters=default.selection("headline"))
    assert len(headline) == 24 and {c.workload for c in headline} == {"upstream", "distinct"}
    assert len(vs.expand(filters=vs.selection("headline"))) == 72
    assert len(vs.expand(filters=vs.selection("serving"))) == 32  # both regimes


def test_decode_layouts_config_is_what_its_comment_says():
    """configs/decode-layouts.yaml: 28 cases, equal 192k contexts with the budget's layer caps, trace at 61."""
    cases = load_config(REPO / "configs/decode-layouts.yaml").expand()
    assert len(cases) == 28
    layers = {(c.workload, c.batch): c.workload_params_dict["layers"] for c in cases}
    assert [layers["serving", b] for b in (1, 2, 4, 8, 16, 32, 64)] == [61, 61, 61, 56, 28, 14, 7]
    assert {layers["trace", b] for b in (1, 2, 4, 8, 16, 32, 64)} == {61}
    serving = [c for c in cases if c.workload == "serving"]
    assert {(c.workload_params_dict["context_min"], c.workload_params_dict["context_max"]) for c in serving} == {
        (196608, 196608)}


def test_lru_copy_config_is_what_its_comment_says():
    """configs/lru-copy.yaml: 28 cases, both copy structures of the sequential LRU on `serving`, the
    decode regime with configs/default.yaml's layer caps and the warm slice."""
    cases = load_config(REPO / "configs/lru-copy.yaml").expand()
    assert len(cases) == 28
    assert {c.implementation for c in cases} == {"lru_sequential", "lru_sequential_grid"}
    layers = {(c.implementation, c.batch, c.workload_params_dict["layers"]) for c in cases}
    for impl in ("lru_sequential", "lru_sequential_grid"):
        decode = sorted((b, n) for i, b, n in layers if i == impl and n > 1)
        assert decode == [(1, 61), (2, 61), (4, 61), (8, 61), (16, 42), (32, 21), (64, 10)]
        assert sorted(b for i, b, n in layers if i == impl and n == 1) == [1, 2, 4, 8, 16, 32, 64]


# ---------------------------------------------------------------------------------------------
# Case ids and round trips


def test_case_id_format_and_baseline():
    c = Case("multi_step", "distinct", batch=64)
    assert c.case_id == "multi_step/distinct/b64/s4/k2048/h4096/i576/pdl1"
    assert c.baseline_id() == "lru_sequential/distinct/b64/s4/k2048/h4096/i576/pdl0"
    planned = Case("multi_step_planned", "upstream", batch=8, pdl=False)
    assert planned.shared_layers == 3
    assert planned.case_id == "multi_step_planned/upstream/b8/s4/k2048/h4096/i576/pdl0"
    # its baseline does the same work: sequential LRU plus the same planned copies into 3 layers
    assert planned.baseline_id() == "lru_sequential_planned/upstream/b8/s4/k2048/h4096/i576/pdl0"
    wide = Case("multi_step_planned", "distinct", shared_layers=5)
    assert wide.baseline_id() == "lru_sequential_planned/distinct/b1/s4/k2048/h4096/i576/pdl0/shared_layers=5"
    base = Case("lru_sequential_planned", "distinct", pdl=True)
    assert (base.pdl, base.shared_layers, base.baseline_id()) == (False, 3, None)
    assert Case("lru_sequential", "distinct").baseline_id() is None
    lru = Case("lru_sequential", "upstream", pdl=True, shared_layers=5)
    assert (lru.pdl, lru.shared_layers) == (False, 0)
    t = Case("multi_step_planned", "trace", {"step_overlap": 0.5, "miss_rate": 0.2}, shared_layers=1, seed=7)
    assert t.case_id == ("multi_step_planned/trace/b1/s4/k2048/h4096/i576/pdl1/shared_layers=1/"
                         "miss_rate=0.2/step_overlap=0.5/seed=7")
    assert t.workload_params_dict == {"host_layout": "scattered", "locality": 0.5, "miss_rate": 0.2,
                                      "step_overlap": 0.5, "layers": 1}
    # stored params leave out layers 1 (the warm regime), as files written before it existed
    assert t.to_dict()["workload_params"] == {"host_layout": "scattered", "locality": 0.5, "miss_rate": 0.2,
                                              "step_overlap": 0.5}


def test_results_format_params_round_trip():
    # The `params` object of docs/results-format.md, verbatim.
    params = {"implementation": "multi_step", "workload": "distinct", "batch": 64, "steps": 4,
              "top_k": 2048, "hot_buffer_size": 4096, "item_size_bytes": 576, "pdl": True,
              "shared_layers": 0, "workload_params": {}, "seed": 0}
    c = Case.from_dict(params)
    assert c.case_id == "multi_step/distinct/b64/s4/k2048/h4096/i576/pdl1"
    assert c.to_dict() == params


def test_every_shipped_case_round_trips():
    for name in ("default", "ci", "cpu-small", "upstream"):
        cfg = load_config(name)
        for c in cfg.expand():
            assert Case.from_dict(c.to_dict(), c.timing) == c
            assert Case.from_id(c.case_id, c.timing) == c
            assert Case.from_dict(c.to_dict()).case_id == c.case_id


def test_case_errors():
    with pytest.raises(ConfigError, match="implementation.*lru_sequential, multi_step, multi_step_planned"):
        Case("lru", "distinct")
    with pytest.raises(ConfigError, match="workload_params.miss_rate.*upstream takes no parameters"):
        Case("multi_step", "upstream", {"miss_rate": 0.1})
    with pytest.raises(ConfigError, match="case id"):
        Case.from_id("multi_step/distinct/b64")
    with pytest.raises(ConfigError, match="unknown key"):
        Case.from_dict({"implementation": "multi_step", "workload": "distinct", "bs": 1})


# ---------------------------------------------------------------------------------------------
# Config hash


def test_config_hash_is_stable_and_canonical(tmp_path):
    a = load_config(write(tmp_path, SMALL, "a.yaml"))
    b = load_config(write(tmp_path, SMALL, "a.yaml"))
    assert a.config_hash == b.config_hash
    assert re.fullmatch(r"[0-9a-f]{64}", a.config_hash)
    # Same sweep written differently (flow style, other key order, a name): same hash.
    c = load_config(write(tmp_path, """\
        name: other-name
        axes:
          pdl: [true, false]
          hot_buffer_size: [2048, 4096]
          top_k: [2048]
          steps: [2, 4]
          batch: {ci: [8], values: [1, 8]}
          workload: [upstream, distinct]
          implementation: [lru_sequential, multi_step]
        workloads: {distinct: {layers: [1]}, upstream: {}}
        """, "c.yaml"))
    assert c.config_hash == a.config_hash
    # Anything that changes the cases changes the hash: timing, seed, an axis value.
    for extra in ("timing: {calls_per_graph: 50}\n", "seed: 1\n"):
        d = load_config(write(tmp_path, SMALL + extra, "d.yaml"))
        assert d.config_hash != a.config_hash
    assert a.expand(ci=True).config_hash != a.config_hash


# ---------------------------------------------------------------------------------------------
# Validation: the message names the file, the key and what is allowed


def test_unknown_top_level_key(tmp_path):
    msg, p = config_error(tmp_path, "axis: {batch: 1}\n")
    assert msg.startswith(f"{p}: axis: unknown key; allowed keys: name, description, track, seed, axes,")


def test_steps_outside_the_kernels_range_is_a_config_error(tmp_path):
    """steps 5 is no combination to prune: no kernel can run it, so the config is wrong (issue 14)."""
    msg, p = config_error(tmp_path, "axes: {steps: [2, 5]}\n")
    assert str(p) in msg and "steps" in msg and "5" in msg and "[1, 4]" in msg


def test_unknown_axis_key(tmp_path):
    msg, p = config_error(tmp_path, "axes: {batchsize: 4}\n")
    assert str(p) in msg and "axes.batchsize: unknown key" in msg
    assert "implementation, workload, batch, steps, top_k, hot_buffer_size, item_size_bytes, pdl" in msg


def test_wrong_type(tmp_path):
    msg, p = config_error(tmp_path, "timing: {replays: ten}\n")
    assert msg == f"{p}: timing.replays: expected an integer in [10, 100000], got str 'ten'"
    msg, p = config_error(tmp_path, "axes: {batch: [1, 2.5]}\n")
    assert msg == f"{p}: axes.batch[1]: expected an integer in [1, 4096], got float 2.5"
    msg, p = config_error(tmp_path, "axes: {pdl: maybe}\n")
    assert "axes.pdl" in msg and "true/false (or on/off)" in msg
    msg, p = config_error(tmp_path, "axes: [1, 2]\n")
    assert msg.startswith(f"{p}: axes: expected a mapping")


def test_out_of_range_hot_buffer_size(tmp_path):
    msg, p = config_error(tmp_path, "axes:\n  hot_buffer_size: {values: [4096, 40000]}\n")
    assert msg == (f"{p}: axes.hot_buffer_size.values[1]: int 40000 is out of range; "
                   "allowed: an integer in [1, 32768]")
    msg, p = config_error(tmp_path, "timing: {replays: 5}\n")
    assert "timing.replays" in msg and "[10, " in msg


def test_unknown_implementation_and_workload(tmp_path):
    msg, p = config_error(tmp_path, "axes: {implementation: [multi_step, spec_4_full]}\n")
    assert msg == (f"{p}: axes.implementation[1]: str 'spec_4_full' is not allowed; "
                   "allowed: lru_sequential, multi_step, multi_step_planned, lru_sequential_planned, "
                   "lru_sequential_grid, sglang_lru_sequential, sglang_multi_step, sglang_multi_step_planned")
    msg, p = config_error(tmp_path, "workloads: {zipf: {}}\n")
    assert msg == f"{p}: workloads.zipf: unknown key; allowed keys: serving, upstream, distinct, trace"
    msg, p = config_error(tmp_path, "workloads: {trace: {miss: 0.1}}\n")
    assert msg == (f"{p}: workloads.trace.miss: unknown key; allowed keys: "
                   "miss_rate, step_overlap, locality, host_layout, layers")
    msg, p = config_error(tmp_path, "workloads: {trace: {host_layout: striped}}\n")
    assert "workloads.trace.host_layout" in msg and "scattered, contiguous" in msg
    msg, p = config_error(tmp_path, "workloads: {trace: {miss_rate: 1.5}}\n")
    assert "workloads.trace.miss_rate" in msg and "in [0.0, 1.0]" in msg
    msg, p = config_error(tmp_path, "workloads: {serving: {positions: sorted}}\n")
    assert "workloads.serving.positions" in msg and "scattered, consecutive" in msg
    msg, p = config_error(tmp_path, "workloads: {serving: {context_max: 32}}\n")
    assert "workloads.serving.context_max" in msg and "in [64, 16777216]" in msg


def test_ci_must_be_a_subset(tmp_path):
    msg, p = config_error(tmp_path, "axes:\n  batch: {values: [1, 2], ci: [4]}\n")
    assert msg == f"{p}: axes.batch.ci[0]: 4 is not one of axes.batch.values (1, 2)"
    msg, p = config_error(tmp_path, "axes:\n  batch: {ci: [1]}\n")
    assert "axes.batch: missing key 'values'" in msg


def test_yaml_problems_name_the_file(tmp_path):
    msg, p = config_error(tmp_path, "axes: {batch: [1, 2}\n")
    assert msg.startswith(f"{p}: invalid YAML")
    msg, p = config_error(tmp_path, "seed: 1\nseed: 2\n")
    assert msg.startswith(f"{p}: invalid YAML") and "duplicate key 'seed'" in msg
    msg, p = config_error(tmp_path, "")
    assert msg.startswith(f"{p}: the config is empty")


def test_a_slice_replaces_workload_parameters_for_its_own_grid_only():
    cfg = parse_config({
        "axes": {"implementation": "multi_step", "workload": "serving", "batch": [1, 64]},
        "workloads": {"serving": {"context_max": 131072, "positions": "scattered"}},
        "slices": [{"batch": 64, "workloads": {"serving": {"context_max": [32768, 262144]}}}],
    })
    got = {(c.batch, c.workload_params_dict["context_max"], c.workload_params_dict["positions"]) for c in cfg.expand()}
    # the slice's override replaces context_max only; positions comes from the top-level workloads
    assert got == {(1, 131072, "scattered"), (64, 131072, "scattered"), (64, 32768, "scattered"),
                   (64, 262144, "scattered")}
    with pytest.raises(ConfigError, match=r"slices\[0\]\.workloads\.serving\.context_mx: unknown key"):
        parse_config({"axes": {"workload": "serving"},
                      "slices": [{"workloads": {"serving": {"context_mx": 1}}}]})
    with pytest.raises(ConfigError, match=r"slices\[0\]\.workloads\.upstream\.x: unknown key; upstream takes no parameters"):
        parse_config({"slices": [{"workloads": {"upstream": {"x": 1}}}]})
    with pytest.raises(ConfigError, match=r"slices\[0\]\.colour: unknown key; allowed keys: .*workloads"):
        parse_config({"slices": [{"colour": 1}]})


def test_exclude_and_slice_validation(tmp_path):
    msg, p = config_error(tmp_path, "exclude: [{batchsize: 1}]\n")
    assert "exclude[0].batchsize: unknown key" in msg and "reason" in msg
    msg, p = config_error(tmp_path, "slices: [{batch: 0}]\n")
    assert "slices[0].batch: int 0 is out of range" in msg


def test_parse_config_without_a_file():
    cfg = parse_config({"axes": {"implementation": "multi_step", "batch": [1, 2]}}, name="inline")
    assert cfg.name == "inline" and cfg.path is None
    assert [c.workload for c in cfg.expand()] == ["distinct", "distinct"]  # the default workload
    with pytest.raises(ConfigError, match=r"^<config>: seed: "):
        parse_config({"seed": -1})


# ---------------------------------------------------------------------------------------------
# Config names and the shipped configs


def test_load_by_name():
    cfg = load_config("default")
    assert cfg.name == "default"
    assert cfg.path.resolve() == (REPO / "configs" / "default.yaml").resolve()
    assert load_config("ci.yaml").name == "ci"
    with pytest.raises(ConfigError, match=r"no-such-sweep: config not found.*default"):
        load_config("no-such-sweep")


def test_default_config_fits_the_budget():
    # configs/default.yaml's header: 35 serving cases (lru 7 + 2 multi-step x 7 batches x PDL on/off)
    # + 14 warm, then 42 main-grid cases on upstream/distinct + 26 multi_step + 17 lru_sequential in the
    # batch-64 slice + 8 on serving at 584 / 100 B + 4 on serving's pool sizes = 146; 9 pruned (lru at
    # hot 32768).
    cfg = load_config("default")
    exp = cfg.expand()
    assert len(exp) == 146
    assert len(exp.pruned) == 9 and all("int16 lru_slots" in p.reason for p in exp.pruned)
    pools = [c for c in exp if c.workload_params_dict.get("context_max", 131072) != 131072]
    # the budget (48 GiB) caps the layers by the pool: 4.8 GiB at most at 128k tokens, 9.7 at 256k
    assert sorted(c.case_id for c in pools) == sorted(
        f"{i}/serving/b64/s4/k2048/h4096/i576/pdl{p}/context_max={m}/layers={n}"
        for i, p in (("lru_sequential", 0), ("multi_step", 1)) for m, n in ((32768, 42), (262144, 5)))
    decode = [c for c in exp if c.workload == "serving" and c.item_size_bytes == 576 and c not in pools
              and c.layers > 1]
    assert len(decode) == 35 and list(exp)[:35] == decode  # serving first, in the decode regime
    assert {(c.batch, c.layers) for c in decode if c.implementation == "multi_step"} == {
        (1, 61), (2, 61), (4, 61), (8, 61), (16, 42), (32, 21), (64, 10)}
    warm = [c for c in exp if c.workload == "serving" and c.layers == 1]
    assert len(warm) == 14 and list(exp)[35:49] == warm  # then its warm slice
    assert {c.baseline_id() for c in warm if c.implementation == "multi_step"} <= {c.case_id for c in warm}
    serving = decode
    assert sorted({c.batch for c in serving}) == [1, 2, 4, 8, 16, 32, 64]
    odd_items = [c for c in exp if c.item_size_bytes in (584, 100)]
    assert len(odd_items) == 8 and {c.workload for c in odd_items} == {"serving"}
    assert {(c.implementation, c.batch) for c in odd_items} == {
        (i, b) for i in ("lru_sequential", "multi_step") for b in (1, 64)}
    assert all(c.case_id.count("/") == 8 for c in serving)  # default parameters: only layers after pdlN
    main = [c for c in exp if c.steps == 4 and c.hot_buffer_size == 4096 and c.item_size_bytes == 576
            and c.workload != "serving"]
    assert len(main) == 42 and {c.implementation for c in main} == {"lru_sequential", "multi_step"}
    assert {c.workload for c in exp} == {"serving", "upstream", "distinct"}
    assert all(c.layers == 1 for c in exp if c.workload != "serving")  # published patterns: warm
    assert len(cfg.expand(ci=True)) == 20
    # one block per item size, in the order they first appear: the host pool is refilled once per size
    runs = [size for size, _ in itertools.groupby(c.item_size_bytes for c in exp)]
    assert runs == [576, 656, 1152, 584, 100]
    # every multi_step case has its sequential-LRU baseline in the sweep (for the speedup), except at
    # hot 32768 (int16 lru_slots); multi_step_planned's baseline is in configs/shared-layers.yaml
    ids = set(exp.ids)
    missing = [c.case_id for c in exp if c.implementation == "multi_step" and c.baseline_id() not in ids]
    assert all("/h32768/" in c for c in missing)


def test_shipped_configs():
    ci = load_config("ci")
    assert ci.track is True
    cases = list(ci.expand())
    assert len(cases) == 26
    assert {c.case_id for c in cases if c.batch == 16 and c.workload == "upstream"} == {
        "lru_sequential/upstream/b16/s4/k2048/h4096/i576/pdl0", "multi_step/upstream/b16/s4/k2048/h4096/i576/pdl1"}
    # serving first: lru_sequential and multi_step at batch 1 and 64, upstream's shape, default parameters
    assert [c.case_id for c in cases[:8]] == [
        "lru_sequential/serving/b1/s4/k2048/h4096/i576/pdl0/layers=61",
        "lru_sequential/serving/b64/s4/k2048/h4096/i576/pdl0/layers=10",
        "multi_step/serving/b1/s4/k2048/h4096/i576/pdl1/layers=61",
        "multi_step/serving/b64/s4/k2048/h4096/i576/pdl1/layers=10",
        "lru_sequential/serving/b1/s4/k2048/h4096/i576/pdl0", "lru_sequential/serving/b64/s4/k2048/h4096/i576/pdl0",
        "multi_step/serving/b1/s4/k2048/h4096/i576/pdl1", "multi_step/serving/b64/s4/k2048/h4096/i576/pdl1"]
    assert [c.workload for c in cases].count("serving") == 8
    assert len(ci.expand(ci=True)) == 26
    assert ci.timing.rounds == 3 and load_config("default").timing.rounds == 3
    small = load_config("cpu-small")
    assert small.timing.calls_per_graph == 2 and small.timing.rounds == 1
    assert all(c.top_k == 64 and c.hot_buffer_size == 256 and 1 <= c.batch <= 4 for c in small.expand())
    serving = [c for c in small.expand() if c.workload == "serving"]
    assert len(serving) == 2 and all(c.param("context_max") <= 4096 for c in serving)  # CPU scale
    host = load_config("host-side")
    cases = host.expand()
    assert len(cases) == 48 and {c.workload for c in cases} == {"serving"} and not cases.pruned
    assert {(c.param("context_max"), c.param("positions"), c.param("read_order")) for c in cases} == {
        (m, p, o) for m in (32768, 131072, 262144) for p in ("scattered", "consecutive")
        for o in ("indexer", "host_row")}
    assert len(host.expand(ci=True)) == 8
    up = load_config("upstream")
    cases = up.expand()
    assert len(cases) == 21 and all(c.workload == "upstream" for c in cases)
    assert all((c.steps, c.top_k, c.hot_buffer_size, c.item_size_bytes) == (4, 2048, 4096, 576) for c in cases)
    assert (up.timing.calls_per_graph, up.timing.replays, up.timing.warmup_calls) == (100, 10, 5)
    assert sorted({c.batch for c in cases}) == [1, 2, 4, 8, 16, 32, 64]
