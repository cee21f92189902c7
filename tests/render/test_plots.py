"""render/plots.py: every figure is written as a non-empty PNG; figures without data are skipped."""
import statistics
from pathlib import Path

import pytest

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
    assert names == ["floor_fraction.png", "hot_buffer_size.png", "latency_vs_batch.png", "pdl.png",
                     "speedup_vs_batch.png", "throughput_vs_batch.png"]
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


# ---------------------------------------------------------------------------------------------
# What the figures draw (read back from the matplotlib figure before it is saved)


def _capture(monkeypatch):
    """Record every saved figure: per panel its title, axis scales and the legend's lines."""
    from matplotlib.container import ErrorbarContainer

    figures = {}
    original = plots._save

    def save(fig, path, title):
        panels = []
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            lines = {}
            for h, label in zip(*ax.get_legend_handles_labels()):
                line = h[0] if isinstance(h, ErrorbarContainer) else h
                lines[label] = {"color": line.get_color(), "linestyle": line.get_linestyle(),
                                "marker": line.get_marker(), "mfc": line.get_markerfacecolor(),
                                "x": list(line.get_xdata()), "y": [float(v) for v in line.get_ydata()]}
            panels.append({"title": ax.get_title(), "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
                           "xticks": [t.get_text() for t in ax.get_xticklabels()], "lines": lines})
        figures[path.name] = panels
        return original(fig, path, title)

    monkeypatch.setattr(plots, "_save", save)
    return figures


def _same_floor_run():
    """Every implementation moves the same bytes: one PCIe floor, 5 us per batch entry."""
    from dataclasses import replace

    run = _full_run()
    cases = [replace(c, floor={**c.floor, "pcie_floor_us": 5.0 * c.params["batch"]}) if c.ok else c
             for c in run.cases]
    return replace(run, cases=tuple(cases), floors={"pinned_h2d_gbps": 55.1})


def test_latency_is_log_log_one_panel_per_workload_with_the_pcie_floor(monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    plots.latency_vs_batch(_same_floor_run(), tmp_path)
    panels = figs["latency_vs_batch.png"]
    assert [p["title"] for p in panels] == ["workload distinct", "workload upstream"]
    for p in panels:
        assert (p["xscale"], p["yscale"]) == ("log", "log")
        floor = p["lines"]["PCIe floor"]
        assert floor["x"] == [1, 8, 64] and floor["y"] == [5.0, 40.0, 320.0]
        # the hot-8192 case is one point: no line (drawn as a marker without a legend entry); the
        # distinct panel's failed case is marked at its batch
        failed = {"failed check (not timed)"} if p["title"] == "workload distinct" else set()
        assert set(p["lines"]) == {"PCIe floor", "lru_sequential · PDL off", "multi_step · PDL on",
                                   "multi_step · PDL off"} | failed


def test_a_slice_over_few_batches_is_left_to_its_own_figure(monkeypatch, tmp_path):
    """default.yaml's serving panel: a 7-batch grid at 576 B, and 584 B rows at batch 1 and 64 only.
    The slice is item_size.png's subject; in a plot vs batch it would be a straight b1-b64 line."""
    from dataclasses import replace

    grid = [_case("multi_step", "serving", b, True, base=60 + b) for b in (1, 2, 4, 8, 16, 32, 64)]
    odd = [replace(c, params={**c.params, "item_size_bytes": 584}, case_id=c.case_id + "/i584",
                   floor={**c.floor, "pcie_floor_us": 1.0})
           for c in (_case("multi_step", "serving", b, True, base=70 + b) for b in (1, 64))]
    figs = _capture(monkeypatch)
    plots.latency_vs_batch(_run(grid + odd), tmp_path)
    lines = figs["latency_vs_batch.png"][0]["lines"]
    assert set(lines) == {"PCIe floor", "multi_step"}  # no 584 B line, floor or label word
    assert lines["multi_step"]["x"] == [1, 2, 4, 8, 16, 32, 64]
    # Where every series has the same few batches (configs/ci.yaml: 1 and 64), all are drawn.
    figs = _capture(monkeypatch)
    plots.latency_vs_batch(_run([c for c in grid if c.params["batch"] in (1, 64)] + odd), tmp_path)
    assert set(figs["latency_vs_batch.png"][0]["lines"]) == {
        "PCIe floor (576 B items)", "PCIe floor (584 B items)",
        "multi_step · 576 B items", "multi_step · 584 B items"}  # two floors, told apart by their variant


def test_a_floor_per_distinct_byte_count_named_by_implementation(monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    plots.latency_vs_batch(_full_run(), tmp_path)  # _case: floor = 0.6 x its own base time
    lines = figs["latency_vs_batch.png"][0]["lines"]
    assert lines["PCIe floor (lru_sequential)"]["y"] == pytest.approx([0.6 * 101, 0.6 * 108, 0.6 * 164])
    assert lines["PCIe floor (multi_step)"]["y"] == pytest.approx([0.6 * 61, 0.6 * 68, 0.6 * 124])


def test_styles_colour_per_implementation_line_style_per_variant(monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    plots.latency_vs_batch(_same_floor_run(), tmp_path)
    lines = figs["latency_vs_batch.png"][0]["lines"]
    on, off, lru = lines["multi_step · PDL on"], lines["multi_step · PDL off"], lines["lru_sequential · PDL off"]
    assert on["color"] == off["color"] != lru["color"] and on["marker"] == off["marker"] != lru["marker"]
    assert (on["linestyle"], off["linestyle"], lru["linestyle"]) == ("-", "--", "--")  # dashed = PDL off
    assert on["x"] == [1, 8, 64] and on["y"] == pytest.approx([statistics.median(_samples(60 + b)) for b in (1, 8, 64)])


def _samples(base):
    return [base * (1 + 0.01 * i) for i in range(10)]


def test_throughput_against_the_pinned_copy_ceiling(monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    plots.throughput_vs_batch(_same_floor_run(), tmp_path)
    panel = figs["throughput_vs_batch.png"][0]
    ceiling = panel["lines"]["pinned H2D copy ceiling 55.1 GB/s"]
    assert ceiling["y"] == [55.1, 55.1]
    got = panel["lines"]["multi_step · PDL on"]["y"]
    assert got == pytest.approx([782 * b * 576 / (statistics.median(_samples(60 + b)) * 1e3) for b in (1, 8, 64)])


def test_hot_buffer_plot_has_a_panel_per_step_count_and_item_size_lines(monkeypatch, tmp_path):
    from dataclasses import replace

    cases = [replace(_case("multi_step", "distinct", 64, True, hot=h, base=100 * s + i),
                     params={**_case("multi_step", "distinct", 64, True, hot=h).params, "steps": s,
                             "item_size_bytes": i})
             for h in (4096, 8192) for s in (1, 4) for i in (576, 1152)]
    figs = _capture(monkeypatch)
    plots.hot_buffer_effect(_run(cases), tmp_path)
    panels = figs["hot_buffer_size.png"]
    assert [p["title"] for p in panels] == ["workload distinct, 1 step, batch 64",
                                            "workload distinct, 4 steps, batch 64"]
    for p in panels:
        assert set(p["lines"]) == {"multi_step · 576 B items", "multi_step · 1152 B items"}
        assert p["lines"]["multi_step · 576 B items"]["x"] == [4096, 8192]


def test_sglang_implementations_are_hollow_in_the_hue_of_their_counterpart(monkeypatch, tmp_path):
    ours, theirs = plots.impl_style("multi_step"), plots.impl_style("sglang_multi_step")
    assert theirs.hollow and not ours.hollow and theirs.marker == ours.marker and theirs.color != ours.color
    known = {s.color for s in plots.IMPL_STYLES.values()}
    assert len(known) == len(plots.IMPL_STYLES)  # no two implementations share a colour
    unknown = plots.impl_style("some_new_impl")
    assert unknown == plots.impl_style("some_new_impl") and unknown.color not in known and not unknown.hollow
    assert plots.impl_style("sglang_something_else").hollow

    from dataclasses import replace

    sg = [replace(c, params={**c.params, "implementation": "sglang_multi_step"})
          for c in (_case("multi_step", "upstream", b, True) for b in (1, 8))]
    figs = _capture(monkeypatch)
    plots.latency_vs_batch(_run([_case("multi_step", "upstream", b, True) for b in (1, 8)] + sg), tmp_path)
    lines = figs["latency_vs_batch.png"][0]["lines"]
    assert lines["sglang_multi_step"]["mfc"] == "white" and lines["multi_step"]["mfc"] != "white"
    assert lines["sglang_multi_step"]["marker"] == lines["multi_step"]["marker"] == "o"


def _vs_run():
    """multi_step (PDL on, hot 4096 and 8192) and multi_step_planned, each next to sglang's case with
    the link the engine stores (ratio written by hand); one sglang case not timed (ratio None)."""
    from dataclasses import replace

    from hisparse.results.model import CounterpartLink

    ratios = {("multi_step", 4096): (0.9, 1.2), ("multi_step", 8192): (0.8, 1.1), ("multi_step_planned", 4096): (0.7, 0.6)}
    cases = []
    for (impl, hot), by_batch in ratios.items():
        for b, r in zip((1, 64), by_batch):
            ours = _case(impl, "upstream", b, True, hot=hot)
            theirs = replace(_case(impl, "upstream", b, True, hot=hot),
                             case_id="sglang_" + ours.case_id, params={**ours.params, "implementation": "sglang_" + impl})
            cases += [replace(ours, counterpart_link=CounterpartLink(theirs.case_id, r)), theirs]
    cases.append(replace(_case("lru_sequential", "upstream", 1, False),
                         counterpart_link=CounterpartLink("sglang_lru_sequential/upstream/b1/h4096/pdl0", None)))
    return _run(cases)


def test_vs_sglang_draws_the_stored_ratio_per_pair_and_variant(monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    path = plots.vs_sglang(_vs_run(), tmp_path)
    _assert_png(path)
    (panel,) = figs["vs_sglang.png"]
    assert panel["title"] == "workload upstream" and panel["xscale"] == "log"
    lines = panel["lines"]
    assert set(lines) == {"multi_step · hot 4096", "multi_step · hot 8192", "multi_step_planned · hot 4096",
                          "same as sglang (below: ours faster)"}
    assert lines["multi_step · hot 4096"]["x"] == [1, 64] and lines["multi_step · hot 4096"]["y"] == [0.9, 1.2]
    assert lines["multi_step · hot 8192"]["y"] == [0.8, 1.1]
    assert lines["multi_step_planned · hot 4096"]["y"] == [0.7, 0.6]
    assert lines["same as sglang (below: ours faster)"]["y"] == [1.0, 1.0]
    assert lines["multi_step · hot 4096"]["color"] == plots.impl_style("multi_step").color  # styled as ours


def test_vs_sglang_only_for_runs_with_pairs(tmp_path):
    assert plots.vs_sglang(_full_run(), tmp_path) is None
    assert "vs_sglang.png" not in {p.name for p in plots.plot_run(_full_run(), tmp_path)}
    assert "vs_sglang.png" in {p.name for p in plots.plot_run(_vs_run(), tmp_path)}


def test_cli_plot_links_a_file_written_before_the_link(tmp_path):
    """`hisparse-bench plot` pairs an older file's cases through the engine (render reads only stored links)."""
    from click.testing import CliRunner

    from hisparse.bench.case import Case
    from hisparse.bench.measure import case_params
    from hisparse.cli import main
    from hisparse.results.model import Run, write_run

    cases = []
    for impl, base in (("multi_step", 20.0), ("sglang_multi_step", 25.0)):
        for b in (1, 64):
            case = Case(impl, "upstream", batch=b)
            cases.append(CaseResult(case.case_id, case_params(case), "ok", settings={"rounds": 1},
                                    runs=(Run(0, 0, (base * b,) * 5),)))
    path = write_run(_run(cases), tmp_path / "old.json")
    assert "counterpart_link" not in path.read_text()
    figs = tmp_path / "figs"
    result = CliRunner().invoke(main, ["plot", str(path), "--out", str(figs)])
    assert result.exit_code == 0, result.output
    assert (figs / "vs_sglang.png").is_file()
    assert "counterpart_link" not in path.read_text()  # the file itself is left as it was


def test_item_size_plot_shows_time_per_kib_per_panel_of_workload_steps_and_batch(monkeypatch, tmp_path):
    from dataclasses import replace

    def case(impl, batch, item, us):
        c = _case(impl, "serving", batch, impl != "lru_sequential", base=us)
        work = {**c.work, "bytes_per_call": 1000 * batch * item}
        return replace(c, params={**c.params, "item_size_bytes": item}, work=work)

    cases = [case(i, b, item, 10.0 * b + item / 100) for i in ("lru_sequential", "multi_step")
             for b in (1, 64) for item in (100, 576, 584)]
    figs = _capture(monkeypatch)
    plots.item_size_effect(_run(cases), tmp_path)
    panels = figs["item_size.png"]
    assert [p["title"] for p in panels] == ["workload serving, 4 steps, batch 1", "workload serving, 4 steps, batch 64"]
    line = panels[1]["lines"]["multi_step"]
    assert line["x"] == [0, 1, 2] and panels[1]["xticks"] == ["100", "576", "584"]  # evenly spaced
    # ns per KiB: median us * 1e3 * 1024 / bytes per call
    want = [statistics.median(_samples(640 + item / 100)) * 1e3 * 1024 / (64000 * item) for item in (100, 576, 584)]
    assert line["y"] == pytest.approx(want)
    assert plots.item_size_effect(_run([case("multi_step", 1, 576, 10.0)]), tmp_path / "none") is None


def test_pool_size_plot_and_legends_name_only_the_workload_parameters_that_vary(monkeypatch, tmp_path):
    """configs/host-side.yaml varies serving's context_max, positions and read_order: the pool-size
    figure draws GB/s against context_max, a panel per batch in batch order, and the legend words are
    the varying workload parameters only (not the whole workload_params dict)."""
    from dataclasses import replace

    def case(impl, batch, ctx, positions, us):
        c = _case(impl, "serving", batch, impl != "lru_sequential", base=us)
        wp = {"context_min": 16384, "context_max": ctx, "positions": positions, "miss_rate": 0.0957}
        return replace(c, params={**c.params, "workload_params": wp})

    cases = [case(i, b, ctx, pos, 10.0 * b + ctx / 4096) for i in ("lru_sequential", "multi_step")
             for b in (8, 64) for ctx in (32768, 262144) for pos in ("scattered", "consecutive")]
    figs = _capture(monkeypatch)
    plots.pool_size_effect(_run(cases), tmp_path)
    panels = figs["pool_size.png"]
    assert [p["title"] for p in panels] == ["workload serving, batch 8", "workload serving, batch 64"]
    assert set(panels[1]["lines"]) == {f"{i} · positions {pos}" for i in ("lru_sequential", "multi_step")
                                       for pos in ("consecutive", "scattered")}
    line = panels[1]["lines"]["multi_step · positions scattered"]
    assert line["x"] == [0, 1] and panels[1]["xticks"] == ["32768", "262144"]
    want = [782 * 64 * 576 / (statistics.median(_samples(640 + ctx / 4096)) * 1e3) for ctx in (32768, 262144)]
    assert line["y"] == pytest.approx(want)
    plots.latency_vs_batch(_run(cases), tmp_path)
    assert "multi_step · context_max 262144 · positions scattered" in figs["latency_vs_batch.png"][0]["lines"]
    assert plots.pool_size_effect(_run(cases[:1]), tmp_path / "none") is None


def test_a_floor_whose_rows_are_read_more_than_once_says_so(monkeypatch, tmp_path):
    # work.host_bytes_per_call under 99% of bytes_per_call (`upstream`'s shared rows): the PCIe floor
    # counts rows copied, and its legend must not call it a floor there.
    from dataclasses import replace

    run = _same_floor_run()
    cases = [replace(c, work={**c.work, "host_bytes_per_call": c.work["bytes_per_call"] / 64})
             if c.ok and c.params["workload"] == "upstream" else c for c in run.cases]
    figs = _capture(monkeypatch)
    plots.latency_vs_batch(replace(run, cases=tuple(cases)), tmp_path)
    by_title = {p["title"]: p["lines"] for p in figs["latency_vs_batch.png"]}
    assert "PCIe floor [rows re-read: not a floor]" in by_title["workload upstream"]
    assert "PCIe floor" in by_title["workload distinct"]
    assert not any("re-read" in name for name in by_title["workload distinct"])


def test_every_point_failed_cases_identity_and_floors_in_the_implementations_colour(monkeypatch, tmp_path):
    """Issue 39's plot rules: no point dropped, failed cases marked at their x, one thin dotted floor per
    implementation in its colour, the run's identity in the title, bandwidth above the ceiling explained."""
    from dataclasses import replace

    titles = {}
    original = plots._save

    def save(fig, path, title):
        titles[path.name] = title
        return original(fig, path, title)

    monkeypatch.setattr(plots, "_save", save)
    run = replace(_full_run(), environment={"gpu": "NVIDIA H200", "git_commit": "3239c1072567abcd"},
                  config={"name": "default"}, floors={"pinned_h2d_gbps": 0.5})
    cases = [replace(c, work={**c.work, "host_bytes_per_call": c.work["bytes_per_call"] / 4})
             if c.ok and c.params["batch"] == 64 and c.params["workload"] == "upstream" else c for c in run.cases]
    run = replace(run, cases=tuple(cases))
    import matplotlib.pyplot as plt
    drawn = {}
    real_line_figure = plots._line_figure

    def keep(run_, out_dir, spec, cases_=None):
        real_close = plt.close
        monkeypatch.setattr(plt, "close", lambda fig: drawn.setdefault(spec.name, fig))
        try:
            return real_line_figure(run_, out_dir, spec, cases_)
        finally:
            monkeypatch.setattr(plt, "close", real_close)

    monkeypatch.setattr(plots, "_line_figure", keep)
    plots.latency_vs_batch(run, tmp_path)
    plots.throughput_vs_batch(run, tmp_path)
    assert titles["latency_vs_batch.png"].splitlines()[1] == \
        "commit 3239c1072567 · NVIDIA H200 · config default · 2026-11-29 20:15 UTC"
    latency = {ax.get_title(): ax for ax in drawn["latency_vs_batch.png"].axes if ax.get_visible()}
    distinct = latency["workload distinct"]
    cross = [ln for ln in distinct.get_lines() if ln.get_label() == "failed check (not timed)"]
    assert len(cross) == 1 and list(cross[0].get_xdata()) == [2]
    # the one-point hot-8192 series is drawn, as a marker without a line
    loose = [ln for ln in distinct.get_lines() if ln.get_label() == "_nolegend_" and ln.get_linestyle() == "None"
             and ln.get_marker() not in ("_", "|")]  # not the IQR bars' caps
    assert [(list(ln.get_xdata()), ln.get_gid()) for ln in loose] == [([8], "multi_step")]
    floors = {ln.get_label(): ln for ln in distinct.get_lines() if ln.get_label().startswith("PCIe floor")}
    assert floors["PCIe floor (multi_step)"].get_color() == plots.impl_style("multi_step").color
    assert floors["PCIe floor (multi_step)"].get_linestyle() == ":" and floors["PCIe floor (multi_step)"].get_linewidth() < 2
    # GB/s above the 0.5 GB/s ceiling: the b64 upstream points name their re-read rows
    notes = [t.get_text() for ax in drawn["throughput_vs_batch.png"].axes for t in ax.texts]
    assert "rows re-read: 25% distinct" in notes and "above the link's ceiling" in notes


def test_layer_regime_is_a_facet(monkeypatch, tmp_path):
    # tests/data/run_layers.json: warm (no `layers`) and decode (layers 8) cases of one workload
    from hisparse.results.model import load_run

    figs = _capture(monkeypatch)
    plots.latency_vs_batch(load_run(Path(__file__).resolve().parents[1] / "data" / "run_layers.json"), tmp_path)
    panels = {p["title"]: p for p in figs["latency_vs_batch.png"]}
    assert set(panels) == {"workload serving, decode L=8", "workload serving, warm"}
    assert panels["workload serving, decode L=8"]["lines"]["multi_step"]["x"] == [1, 8]
    assert "failed check (not timed)" in panels["workload serving, decode L=8"]["lines"]


HOST_ALLOC_RUN = Path(__file__).resolve().parents[2] / "results" / "runs" / "20261204-150801_448007b_host-alloc.json"


def test_host_alloc_bars_per_allocation_with_the_skipped_kinds_named(monkeypatch, tmp_path):
    from hisparse.results.model import load_run

    run = load_run(HOST_ALLOC_RUN)
    drawn = {}
    real = plots._host_alloc_bars

    def spy(ax, cases, groups, kinds, y_of):
        drawn.setdefault("groups", groups)
        drawn.setdefault("kinds", kinds)
        drawn.setdefault("panels", []).append(len(cases))
        return real(ax, cases, groups, kinds, y_of)

    titles = []
    monkeypatch.setattr(plots, "_host_alloc_bars", spy)
    monkeypatch.setattr(plots, "_save", lambda fig, path, title: titles.append(title) or path)
    assert plots.host_alloc_effect(run, tmp_path) == tmp_path / "host_alloc.png"
    assert drawn["kinds"] == ["pinned", "registered", "hugetlb-2m", "hugetlb-1g", "vmm"]
    assert [(gb, layout) for _, gb, layout in drawn["groups"]] == [(1, "scattered"), (3, "scattered"),
                                                                   (12, "scattered"), (12, "chunks"), (12, "pool")]
    # multi_step, lru_sequential, and the gather floor of multi_step's cases: 4 measured kinds x 5 groups
    assert drawn["panels"] == [20, 20, 20]
    assert "skipped hugetlb-1g: needs" in titles[0] and "skipped pinned" not in titles[0]


def test_host_alloc_figure_only_for_runs_of_several_allocations(tmp_path):
    from hisparse.results.model import load_run

    run = load_run(HOST_ALLOC_RUN)
    pinned_only = RunRecord(**{**run.__dict__, "cases": [c for c in run.cases
                                                         if c.params.get("host_alloc", "pinned") == "pinned"]})
    assert plots.host_alloc_effect(pinned_only, tmp_path) is None
