"""render/plots.py: every figure is written as a non-empty PNG; figures without data are skipped."""
from pathlib import Path

from hisparse.render import plots
from hisparse.results.model import CaseResult, RunRecord
from hisparse.stats import summary

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _case(impl, workload, batch, pdl, hot=4096, base=100.0, linked=True):
    samples = [base * (1 + 0.01 * i) for i in range(10)]
    median = summary(samples).median
    params = {"implementation": impl, "workload": workload, "batch": batch, "steps": 4, "top_k": 2048,
              "hot_buffer_size": hot, "item_size_bytes": 576, "pdl": pdl, "shared_layers": 0,
              "workload_params": {}, "seed": 0}
    return CaseResult(
        case_id=f"{impl}/{workload}/b{batch}/h{hot}/pdl{int(pdl)}", params=params, status="ok",
        samples_us=samples, stats=summary(samples).to_dict(),
        work={"unique_misses_per_call": 782 * batch, "hits_per_call": 0, "bytes_per_call": 782 * batch * 576},
        floor={"pcie_floor_us": base * 0.6, "gather_floor_us": base * 0.8, "gather_samples_us": [base * 0.8] * 10},
        derived={"gbps": 1.0, "over_pcie_floor": median / (base * 0.6), "over_gather_floor": median / (base * 0.8),
                 "speedup_vs_lru_sequential": None if impl == "lru_sequential" else 1.5,
                 **({"speedup_baseline": f"lru_sequential/{workload}/b{batch}/h{hot}/pdl0"}
                    if linked and impl != "lru_sequential" else {})},
    )


def _run(cases, backend="cuda"):
    return RunRecord(run_id="r", created="2026-11-29T20:15:00Z", backend=backend, config={"name": "t"},
                     environment={}, floors={}, cases=tuple(cases))


def _full_run():
    cases = []
    for workload in ("upstream", "distinct"):
        for b in (1, 8, 64):
            cases.append(_case("lru_sequential", workload, b, False, base=100 + b))
            for pdl in (True, False):
                cases.append(_case("multi_step", workload, b, pdl, base=60 + b))
        cases.append(_case("multi_step", workload, 8, True, hot=8192, base=70))
    cases.append(CaseResult.failed("broken", {"implementation": "multi_step", "workload": "distinct", "batch": 2}, "x"))
    return _run(cases)


def _assert_png(path: Path):
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_all_figures_are_written(tmp_path):
    paths = plots.plot_run(_full_run(), tmp_path / "figs")
    names = sorted(p.name for p in paths)
    assert names == ["hot_buffer_size.png", "latency_vs_batch.png", "pdl.png", "speedup_vs_batch.png",
                     "throughput_vs_batch.png"]
    for p in paths:
        _assert_png(p)


def test_figures_without_data_are_skipped(tmp_path):
    run = _run([_case("lru_sequential", "distinct", b, False) for b in (1, 2)], backend="reference")
    names = sorted(p.name for p in plots.plot_run(run, tmp_path))
    # no multi-step (no speedup), no PDL pairs, one hot size
    assert names == ["latency_vs_batch.png", "throughput_vs_batch.png"]


def test_run_without_timed_cases_gives_no_figures(tmp_path):
    run = _run([CaseResult.failed("x", {"implementation": "multi_step"}, "boom")])
    assert plots.plot_run(run, tmp_path) == []


def test_planned_copy_has_no_speedup_even_when_an_older_file_carries_one(tmp_path):
    """multi_step_planned swaps one layer and copies into shared_layers more: no like-for-like LRU
    case, so neither the table nor the speedup figure shows the ratio an older engine stored."""
    from dataclasses import replace

    from hisparse.render.text import run_table

    from hisparse.results.model import run_from_dict

    # an older file: speedups stored for every implementation, no speedup_baseline; read back
    planned = [_case("multi_step_planned", "upstream", b, True, base=300, linked=False) for b in (1, 8)]
    planned = [replace(c, params={**c.params, "shared_layers": 3}) for c in planned]
    written = _run([_case("lru_sequential", "upstream", b, False) for b in (1, 8)] + planned).to_dict()
    run = run_from_dict(written)
    rows = [line for line in run_table(run).splitlines() if "multi_step_planned" in line]
    assert len(rows) == 2 and all("1.50x" not in r for r in rows)
    assert plots.speedup_vs_batch(run, tmp_path) is None  # only planned cases: nothing to draw
    with_multi = _run(list(run.cases) + [_case("multi_step", "upstream", b, True) for b in (1, 8)])
    assert plots.speedup_vs_batch(with_multi, tmp_path).read_bytes().startswith(PNG_MAGIC)
