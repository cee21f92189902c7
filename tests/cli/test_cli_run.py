"""`hisparse-bench run/list/compare/plot` end to end on the reference backend, with the real
config, workload, reference ops and invariant checker."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hisparse.bench import backends
from hisparse.cli import main
from hisparse.results.model import load_run
from _tiny_config import tiny_config

TINY = tiny_config("tiny", implementation="[lru_sequential, multi_step, multi_step_planned]", batch="[1, 2]",
                   axes_extra="  shared_layers: 1\n",
                   extra='exclude:\n  - {implementation: multi_step_planned, batch: 2, reason: "kept small for the test"}\n')


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    cfg = d / "tiny.yaml"
    cfg.write_text(TINY)
    return d, cfg


@pytest.fixture(scope="module")
def first_run(tiny):
    d, cfg = tiny
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--out", str(d / "runs")])
    files = sorted((d / "runs").glob("*.json"))
    return result, files


def test_run_writes_a_valid_result_file(first_run):
    result, files = first_run
    assert result.exit_code == 0, result.output
    assert "not kernel times" in result.output
    assert len(files) == 1
    run = load_run(files[0])
    assert run.backend == "reference" and run.finished is not None
    assert run.floors["pinned_h2d_gbps"] is None and "n/a" in run.floors["note"]
    assert run.config["name"] == "tiny" and len(run.config["hash"]) == 64
    assert [p["reason"] for p in run.config["pruned"]] == ["kept small for the test"]
    assert len(run.cases) == 5 and all(c.ok for c in run.cases)
    for c in run.cases:
        assert len(c.samples_us) >= 10 and c.timing["method"] == "cpu-perf-counter"
        assert c.work["unique_misses_per_call"] > 0 and c.work["bytes_per_call"] > 0
        assert c.floor["pcie_floor_us"] is None and c.floor["gather_floor_us"] > 0
        assert c.derived["over_pcie_floor"] is None and c.derived["over_gather_floor"] > 0
    multi = run.case("multi_step/distinct/b1/s2/k16/h64/i64/pdl1")
    lru = run.case("lru_sequential/distinct/b1/s2/k16/h64/i64/pdl0")
    assert multi.derived["speedup_vs_lru_sequential"] == pytest.approx(lru.median_us / multi.median_us)
    # both implementations copy the same misses of the same data
    assert multi.work["unique_misses_per_call"] == lru.work["unique_misses_per_call"]
    planned = run.case("multi_step_planned/distinct/b1/s2/k16/h64/i64/pdl1/shared_layers=1")
    assert planned.work["bytes_per_call"] == 2 * multi.work["bytes_per_call"]  # + one shared layer
    # summary table and plots
    assert "time/call us" in result.output and "1 pruned" in result.output
    pngs = sorted(files[0].with_suffix("").glob("*.png"))
    assert {p.name for p in pngs} >= {"latency_vs_batch.png", "speedup_vs_batch.png"}
    assert all(p.stat().st_size > 0 for p in pngs)


def test_list_shows_cases_and_pruned(tiny):
    _, cfg = tiny
    result = CliRunner().invoke(main, ["list", str(cfg)])
    assert result.exit_code == 0, result.output
    assert "5 case(s)" in result.output and "lru_sequential/distinct/b2/s2/k16/h64/i64/pdl0" in result.output
    assert "1 pruned" in result.output and "kept small for the test" in result.output
    result = CliRunner().invoke(main, ["list", str(cfg), "--filter", "implementation=multi_step"])
    assert "2 case(s)" in result.output


def test_compare_a_with_a_exits_0(first_run):
    _, files = first_run
    result = CliRunner().invoke(main, ["compare", str(files[0]), str(files[0])])
    assert result.exit_code == 0, result.output
    assert "5 unchanged" in result.output


def test_compare_exits_1_on_regression(first_run, tmp_path):
    _, files = first_run
    data = json.loads(files[0].read_text())
    slow = data["cases"][0]
    # CPU timings of a loaded machine can spread past 1.5x, so the slowed case gets fixed samples:
    # complete separation (p = 2/C(20,10)); identical samples elsewhere.
    slow["runs"] = [{**slow["runs"][0], "samples_us": [100.0 + i for i in range(10)], "clocks": None}]
    a = tmp_path / "a.json"
    a.write_text(json.dumps(data))
    slow["runs"][0]["samples_us"] = [x * 1.5 for x in slow["runs"][0]["samples_us"]]
    b = tmp_path / "b.json"
    b.write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["compare", str(a), str(b)])
    assert result.exit_code == 1, result.output
    assert "REGRESSION: 1 case(s)" in result.output and slow["case_id"] in result.output


def test_plot_command(first_run, tmp_path):
    _, files = first_run
    result = CliRunner().invoke(main, ["plot", str(files[0]), "--out", str(tmp_path / "figs")])
    assert result.exit_code == 0, result.output
    pngs = list((tmp_path / "figs").glob("*.png"))
    assert pngs and all(p.stat().st_size > 0 for p in pngs)


def test_resume_skips_finished_cases(first_run, tiny):
    _, files = first_run
    _, cfg = tiny
    before = load_run(files[0])
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--resume", str(files[0]),
                                       "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "5 case(s) done, 0 to run" in result.output
    after = load_run(files[0])
    assert [c.samples_us for c in after.cases] == [c.samples_us for c in before.cases]
    # a different sweep cannot be resumed into this file
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--resume", str(files[0]),
                                       "--filter", "batch=1"])
    assert result.exit_code == 2 and "cannot resume" in result.output


def test_failing_case_is_recorded_without_timing_and_exits_1(tiny, monkeypatch):
    """A wrong multi-step swap fails its cases with the invariant's reason; the sweep goes on."""
    d, cfg = tiny
    from hisparse.kernels.reference.swap_multi import swap_multi_step

    def broken(**kw):
        stats = swap_multi_step(**kw)
        kw["top_k_device_locs"][0, 0, 0] = kw["top_k_device_locs"][0, 0, 1]  # two tokens, one row
        return stats

    real = backends._reference
    monkeypatch.setattr(backends, "_reference", lambda: real().__class__(
        **{**real().__dict__, "swap_multi_step": broken}))
    out = d / "broken"
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--out", str(out),
                                       "--filter", "batch=1", "--no-plots"])
    assert result.exit_code == 1, result.output
    run = load_run(next(out.glob("*.json")))
    by = {c.params["implementation"]: c for c in run.cases}
    assert by["lru_sequential"].ok
    for impl in ("multi_step", "multi_step_planned"):
        c = by[impl]
        assert c.status == "failed" and c.samples_us == () and c.stats is None
        assert c.reason.startswith("check call 0: invariant") and "request 0" in c.reason
    assert "FAILED multi_step/distinct/b1" in result.output


def test_default_config_without_gpu_is_cpu_small(tmp_path):
    result = CliRunner().invoke(main, ["run", "--out", str(tmp_path), "--no-plots",
                                       "--filter", "multi_step/distinct/b1/"])
    if backends.resolve_name("auto") == "cuda":
        pytest.skip("a GPU is visible: the default config is the full one")
    assert result.exit_code == 0, result.output
    assert "configs/cpu-small.yaml" in result.output and "not kernel times" in result.output
    run = load_run(next(Path(tmp_path).glob("*.json")))
    assert run.config["name"] == "cpu-small" and run.case_ids() == ["multi_step/distinct/b1/s4/k64/h256/i576/pdl1"]


def test_the_grid_copy_lru_runs_beside_lru_sequential_on_the_reference(tmp_path):
    # lru_sequential_grid on the reference backend runs the plain swap (no launch to spread): its cases
    # pass the same checks and move the same rows as lru_sequential's.
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(tiny_config("grid", implementation="[lru_sequential, lru_sequential_grid]", batch="[1, 2]"))
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--no-plots",
                                       "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "runs").glob("*.json")
    run = load_run(path)
    assert len(run.cases) == 4
    for b in (1, 2):
        plain = run.case(f"lru_sequential/distinct/b{b}/s2/k16/h64/i64/pdl0")
        grid = run.case(f"lru_sequential_grid/distinct/b{b}/s2/k16/h64/i64/pdl0")
        assert plain.ok and grid.ok
        assert grid.speedup is None and grid.work == plain.work


def test_planned_copy_is_compared_with_its_lru_baseline(tmp_path):
    cfg = tmp_path / "planned.yaml"
    cfg.write_text(TINY.replace("[lru_sequential, multi_step, multi_step_planned]",
                                "[lru_sequential_planned, multi_step_planned]").replace(
        "exclude:\n  - {implementation: multi_step_planned, batch: 2, reason: \"kept small for the test\"}\n", ""))
    result = CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--no-plots",
                                       "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "runs").glob("*.json")
    run = load_run(path)
    for b in (1, 2):
        base = run.case(f"lru_sequential_planned/distinct/b{b}/s2/k16/h64/i64/pdl0/shared_layers=1")
        planned = run.case(f"multi_step_planned/distinct/b{b}/s2/k16/h64/i64/pdl1/shared_layers=1")
        assert planned.derived["speedup_baseline"] == base.case_id
        assert planned.speedup == pytest.approx(base.median_us / planned.median_us)
        assert base.speedup is None and base.work["bytes_per_call"] == planned.work["bytes_per_call"]
