"""The static dashboard: built from synthetic runs, parsed back, checked for data and for any external URL."""
from __future__ import annotations

import html
import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from _regression_data import T0, fake_commit, make_run, write_run
from _regression_data import git as _git
from hisparse.cli import main as cli_main
from hisparse.render.dashboard import build_site as _build
from hisparse.track.series import load_history


def build_site(results, out, *, repo=None, machine=None, make_plots=True):
    """What the CLI does: track detects, render draws."""
    return _build(load_history(results, repo=repo, machine=machine), out, make_plots=make_plots)

EXTERNAL = re.compile(rb"(?i)https?://|(?:src|href)\s*=\s*[\"']//")


class Page(HTMLParser):
    """Collects svg elements (class + circles inside), links, tables and titles."""

    def __init__(self, text: str):
        super().__init__()
        self.svgs: list[dict] = []
        self.refs: list[str] = []
        self.rows: list[list[str]] = []
        self._cell = None
        self._depth = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("href", "src"):
            if key in a:
                self.refs.append(a[key])
        if tag == "svg":
            self.svgs.append({"class": a.get("class", ""), "circles": 0, "polygons": 0, "changes": 0})
        elif self.svgs and tag == "circle":
            self.svgs[-1]["circles"] += 1
        elif self.svgs and tag == "polygon":
            self.svgs[-1]["polygons"] += 1
        elif self.svgs and tag == "line" and "change" in a.get("class", ""):
            self.svgs[-1]["changes"] += 1
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(self._cell.strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


@pytest.fixture
def five_commits(tmp_path):
    """5 commits; the multi_step level steps up 20% at commit 3; lru_sequential fails at commit 2."""
    results = tmp_path / "results"
    for i in range(5):
        level = 100.0 * (1.2 if i >= 3 else 1.0)
        write_run(results, make_run(fake_commit(i), T0 + timedelta(days=i),
                                    {"multi_step": level, "lru_sequential": 300.0},
                                    seed=i, failed=("lru_sequential",) if i == 2 else ()))
    return results


def _all_files(site: Path):
    return [p for p in site.rglob("*") if p.is_file()]


def test_site_pages_have_data_and_no_external_urls(five_commits, tmp_path):
    out = tmp_path / "site"
    site = build_site(five_commits, out, make_plots=False)
    assert {p.name for p in out.iterdir()} >= {"index.html", "regressions.html", "commits.html", "bench", "commit"}
    assert len(list((out / "commit").glob("*.html"))) == 5
    assert len(list((out / "bench").glob("*.html"))) == 2 == len(site.tracked)

    index = Page((out / "index.html").read_text())
    sparks = [s for s in index.svgs if s["class"] == "spark"]
    assert len(sparks) == 2
    assert sorted(s["circles"] for s in sparks) == [4, 5]  # lru_sequential has no point at the failed commit

    for page in (out / "bench").glob("*.html"):
        p = Page(page.read_text())
        (trend,) = [s for s in p.svgs if s["class"] == "trend"]
        table = [r for r in p.rows if r and r[0] in {fake_commit(i)[:12] for i in range(5)}]
        assert len(table) == 5  # commit, date, median, q1, q3, IQR, n, GB/s, runs
        ok_rows = [r for r in table if not r[2].startswith("failed")]
        assert trend["circles"] == len(ok_rows) >= 4 and trend["polygons"] == 1  # points + IQR band
        for r in ok_rows:
            assert r[6] == "10" and r[2].endswith(" us")

    for f in _all_files(out):
        assert not EXTERNAL.search(f.read_bytes()), f
    for page in out.rglob("*.html"):
        for ref in Page(page.read_text()).refs:
            assert ref.startswith("data:") or not re.match(r"^[a-z][a-z0-9+.-]*:", ref), (page, ref)
            if not ref.startswith("data:"):
                assert (page.parent / ref.split("#")[0]).resolve().is_file(), (page, ref)  # no dead link


def test_commit_page_has_summary_and_failed_case(five_commits, tmp_path):
    out = tmp_path / "site"
    build_site(five_commits, out, make_plots=False)
    p = Page((out / "commit" / f"{fake_commit(2)[:12]}.html").read_text())
    statuses = {r[0]: r[1] for r in p.rows if len(r) >= 2 and "/" in r[0]}
    assert statuses == {"multi_step/distinct/b8/s4/k64/h128/i64/pdl1": "ok",
                        "lru_sequential/distinct/b8/s4/k64/h128/i64/pdl0": "failed"}
    reg = (out / "regressions.html").read_text()
    assert "invariant 1 (data) failed" in reg and fake_commit(2)[:12] in reg


def test_commit_page_embeds_engine_plots(five_commits, tmp_path):
    # the engine's PNGs next to a run file are copied into the site and linked, loaded lazily (inlined
    # as base64 they made commit pages 2-6 MB; changed deliberately)
    run_file = next((five_commits / "runs").glob(f"*_{fake_commit(4)[:12]}_*.json"))
    plots = run_file.with_suffix("")
    plots.mkdir()
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
    (plots / "latency_vs_batch.png").write_bytes(png)
    out = tmp_path / "site"
    build_site(five_commits, out, make_plots=False)
    page = (out / "commit" / f"{fake_commit(4)[:12]}.html").read_text()
    ref = re.search(r'<img loading="lazy" alt="latency_vs_batch" src="([^"]+)"', page).group(1)
    assert (out / "commit" / ref).resolve().read_bytes() == png and "base64" not in page


def test_regression_change_point_on_trend_and_regressions_page(tmp_path):
    results = tmp_path / "results"
    for i in range(12):
        level = 100.0 * (1.15 if i >= 8 else 1.0)
        write_run(results, make_run(fake_commit(i), T0 + timedelta(days=i),
                                    {"multi_step": level, "lru_sequential": 300.0}, seed=i))
    out = tmp_path / "site"
    site = build_site(results, out, make_plots=False)
    ((tracked, change),) = site.regressions
    series = tracked.series
    assert series.case_id.startswith("multi_step/") and series.points[change.index].commit == fake_commit(8)
    assert change.change == pytest.approx(0.15, abs=0.01)
    bench_page = next(p for p in (out / "bench").iterdir() if "multi_step" in p.name)
    bench = Page(bench_page.read_text())
    assert [s["changes"] for s in bench.svgs if s["class"] == "trend"] == [1]
    reg = Page((out / "regressions.html").read_text())
    row = next(r for r in reg.rows if r and r[0].startswith("multi_step/"))
    assert row[1:4] == ["h200-sxm", "cuda", fake_commit(8)[:12]]
    assert float(row[6].rstrip("%")) == pytest.approx(15.0, abs=1.0)


def test_commits_ordered_by_git_date_not_run_time(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    commits = []
    for i in range(3):  # committed on days 1, 2, 3
        (repo / "f").write_text(str(i))
        _git(repo, "add", "f")
        _git(repo, "commit", "-q", "-m", str(i), date=f"2026-10-0{i + 1}T00:00:00+00:00")
        commits.append(_git(repo, "rev-parse", "HEAD"))
    results = tmp_path / "results"
    for k, c in enumerate(reversed(commits)):  # ... but measured newest first
        write_run(results, make_run(c, T0 + timedelta(days=k), {"multi_step": 100.0, "lru_sequential": 300.0}))
    site = build_site(results, tmp_path / "site", repo=repo, make_plots=False)
    assert [p.commit for p in site.tracked[0].series.points] == commits
    site = build_site(results, tmp_path / "site2", repo=None, make_plots=False)  # no git: run created time
    assert [p.commit for p in site.tracked[0].series.points] == list(reversed(commits))


def test_cli_dashboard(five_commits, tmp_path):
    out = tmp_path / "site"
    res = CliRunner().invoke(cli_main, ["dashboard", "--results", str(five_commits), "--out", str(out), "--no-plots"])
    assert res.exit_code == 0, res.output
    assert "2 benchmark(s)" in res.output and (out / "index.html").is_file()


def test_commit_page_notes_a_bimodal_case(tmp_path):
    results = tmp_path / "results"
    run = make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0})
    bimodal = run["cases"][0]
    bimodal["samples_us"] = [53.2] * 12 + [55.2] * 18  # 40% / 60%, 2 us apart
    write_run(results, run)
    out = tmp_path / "site"
    build_site(results, out, make_plots=False)
    rows = Page((out / "commit" / f"{fake_commit(0)[:12]}.html").read_text()).rows
    notes = {r[0]: r[-1] for r in rows if len(r) >= 8 and "/" in r[0]}
    assert notes[bimodal["case_id"]] == "bimodal: 53.2 us x40% | 55.2 us x60%"
    assert [n for cid, n in notes.items() if cid != bimodal["case_id"]] == [""]


def test_commit_page_marks_a_pcie_floor_whose_rows_are_read_more_than_once(tmp_path):
    # work.host_bytes_per_call (distinct host rows' bytes) under 99% of bytes_per_call: "*" and a tooltip
    # with the share, as the text summary does; a case without the count (older files) is unmarked.
    results = tmp_path / "results"
    run = make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0})
    shared, own = run["cases"][0], run["cases"][1]
    shared["work"]["host_bytes_per_call"] = shared["work"]["bytes_per_call"] / 4
    own["work"]["host_bytes_per_call"] = own["work"]["bytes_per_call"]
    write_run(results, run)
    out = tmp_path / "site"
    build_site(results, out, make_plots=False)
    html_text = (out / "commit" / f"{fake_commit(0)[:12]}.html").read_text()
    rows = {r[0]: r for r in Page(html_text).rows if len(r) >= 8 and "/" in r[0]}
    cell = rows[shared["case_id"]][6]
    assert cell.endswith("*") and float(cell[:-1]) > 0
    assert all(not r[6].endswith("*") for cid, r in rows.items() if cid != shared["case_id"])
    assert "rows read more than once: 25% of the copied rows are distinct host rows" in html_text


# ---------------------------------------------------------------------------------------------
# Issue 11: render is handed change points; issue 14: machines/backends apart, readable pages

def test_dashboard_imports_no_detector():
    """render draws what track found: dashboard.py never imports the change point detector."""
    import ast

    import hisparse.render.dashboard as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "hisparse.track.changepoint" not in imported
    assert "hisparse.track.series" in imported


def test_build_site_draws_the_change_points_it_is_handed(five_commits, tmp_path):
    from hisparse.track.series import ChangePoint, History

    history = load_history(five_commits)
    target = next(t for t in history.tracked if t.series.case_id.startswith("lru_sequential/"))
    planted = ChangePoint(index=3, before_median=300.0, after_median=345.0, change=0.15, worse_by=0.15,
                          kind="regression", p_value=0.001, threshold=0.02, direction="lower")
    target.changes = [planted]  # a change the detector did not find (the level is flat)
    site = _build(History(history.runs, history.skipped, history.dates, history.tracked), tmp_path / "s",
                  make_plots=False)
    assert [(t.series.case_id, c) for t, c in site.regressions] == [(target.series.case_id, planted)]
    reg = Page((tmp_path / "s" / "regressions.html").read_text())
    row = next(r for r in reg.rows if r and r[0] == target.series.case_id)
    assert row[3] == fake_commit(3)[:12] and row[6] == "+15.00%"


@pytest.fixture
def gpu_and_cpu(tmp_path):
    """3 cuda runs, then a reference (CPU) run of the same cases on the same machine at a later commit."""
    results = tmp_path / "results"
    for i in range(3):
        write_run(results, make_run(fake_commit(i), T0 + timedelta(days=i),
                                    {"multi_step": 100.0, "lru_sequential": 300.0}, seed=i))
    cpu = make_run(fake_commit(3), T0 + timedelta(days=3), {"multi_step": 9000.0, "lru_sequential": 7000.0},
                   backend="reference", config="ci")
    for key in ("gpu", "driver", "compute_capability", "gpu_count"):
        cpu["environment"].pop(key)
    write_run(results, cpu)
    return results


def test_reference_run_is_never_the_latest_point_of_a_gpu_series(gpu_and_cpu, tmp_path):
    out = tmp_path / "site"
    site = build_site(gpu_and_cpu, out, make_plots=False)
    by = {(t.series.backend, t.series.case_id.split("/")[0]): t for t in site.tracked}
    assert sorted(by) == [("cuda", "lru_sequential"), ("cuda", "multi_step"),
                          ("reference", "lru_sequential"), ("reference", "multi_step")]
    assert [p.commit for p in by["cuda", "multi_step"].series.points] == [fake_commit(i) for i in range(3)]
    assert [p.commit for p in by["reference", "multi_step"].series.points] == [fake_commit(3)]
    assert len(list((out / "bench").glob("*.html"))) == 4  # one page each, none overwritten
    # (the index gained timing and regime columns after the benchmark: the columns after them moved by two)
    rows = {(r[0], r[4]): r for r in Page((out / "index.html").read_text()).rows if len(r) >= 7 and "/" in r[0]}
    cuda_ms = next(r for (cid, be), r in rows.items() if be == "cuda" and cid.startswith("multi_step/"))
    ref_ms = next(r for (cid, be), r in rows.items() if be == "reference" and cid.startswith("multi_step/"))
    assert cuda_ms[2] == "warm"  # no `layers` in these files
    assert float(cuda_ms[6].split()[0]) == pytest.approx(100.0, rel=0.02)  # latest GPU median, not 9000
    assert ref_ms[5] == "1" and float(ref_ms[6].split()[0]) == pytest.approx(9000.0, rel=0.02)


def test_commits_page_names_machine_and_backend(gpu_and_cpu, tmp_path):
    out = tmp_path / "site"
    build_site(gpu_and_cpu, out, make_plots=False)
    rows = Page((out / "commits.html").read_text()).rows
    assert rows[0] == ["commit", "date", "machine", "backend", "runs", "failed cases"]
    by_commit = {r[0]: r for r in rows[1:]}
    assert by_commit[fake_commit(3)[:12]][2:4] == ["h200-sxm", "reference"]
    assert by_commit[fake_commit(0)[:12]][2:4] == ["h200-sxm", "cuda"]


def test_cpu_commit_page_has_no_none_driver(gpu_and_cpu, tmp_path):
    out = tmp_path / "site"
    build_site(gpu_and_cpu, out, make_plots=False)
    cpu = (out / "commit" / f"{fake_commit(3)[:12]}.html").read_text()
    assert "None" not in cpu and "driver" not in cpu
    assert "machine h200-sxm; backend reference; torch 2.11.0+cu130; config ci" in cpu
    gpu = (out / "commit" / f"{fake_commit(0)[:12]}.html").read_text()
    assert "NVIDIA H200 driver 580.159.04" in gpu


def _batch_sweep(tmp_path, impls=("multi_step", "lru_sequential"), batches=(1, 2, 4, 16, 64), commits=4):
    """Runs whose cases sweep batch; multi_step and lru_sequential both with pdl off (the same case)."""
    import random

    from _regression_data import make_case

    results = tmp_path / "results"
    base = {"workload": "distinct", "steps": 4, "top_k": 64, "hot_buffer_size": 128, "item_size_bytes": 64,
            "pdl": False, "shared_layers": 0, "workload_params": {}, "seed": 0}
    for i in range(commits):
        run = make_run(fake_commit(i), T0 + timedelta(days=i), {"multi_step": 1.0, "lru_sequential": 1.0})
        rng = random.Random(i)
        run["cases"] = [make_case({**base, "implementation": impl, "batch": b},
                                  (100.0 if impl == "multi_step" else 200.0) * b, rng=rng)
                        for impl in impls for b in batches]
        write_run(results, run)
    return results


def test_cases_sorted_numerically_everywhere(tmp_path):
    results = _batch_sweep(tmp_path, impls=("multi_step",), commits=1)
    out = tmp_path / "site"
    build_site(results, out, make_plots=False)
    index = [r[0] for r in Page((out / "index.html").read_text()).rows if r and r[0].startswith("multi_step/")]
    commit = [r[0] for r in Page((out / "commit" / f"{fake_commit(0)[:12]}.html").read_text()).rows
              if r and r[0].startswith("multi_step/")]
    want = [f"multi_step/distinct/b{b}/s4/k64/h128/i64/pdl0" for b in (1, 2, 4, 16, 64)]
    assert index == want and commit == want


def test_bench_page_parameters_as_a_table_and_floor_on_trend(five_commits, tmp_path):
    out = tmp_path / "site"
    build_site(five_commits, out, make_plots=False)
    page = next(p for p in (out / "bench").iterdir() if "multi_step" in p.name)
    text = page.read_text()
    rows = Page(text).rows
    params = {r[0]: r[1] for r in rows if len(r) == 2}
    assert params["pdl"] == "on" and params["batch"] == "8" and params["workload_params"] == "-"
    assert params["implementation"] == "multi_step"
    assert "{" not in "".join(params.values()) and "workload_params={" not in text
    trend = re.search(r'<svg class="trend".*?</svg>', text, re.S).group(0)
    assert trend.count('<polyline class="floor"') == 1 and "PCIe floor" in trend


def test_floor_is_drawn_where_the_run_recorded_it(five_commits, tmp_path):
    """The floor line's y is the recorded 1 us (the trend's y axis reaches down to it)."""
    from hisparse.render.dashboard import trend_chart

    history = load_history(five_commits)
    t = next(t for t in history.tracked if t.series.case_id.startswith("multi_step/"))
    assert t.floor_us == [1.0] * 5  # _regression_data records pcie_floor_us = 1.0
    svg = trend_chart(t)
    ys = {pt.split(",")[1] for pt in re.search(r'class="floor" points="([^"]+)"', svg).group(1).split()}
    assert len(ys) == 1  # flat: the same floor at every commit


def test_the_gather_floor_is_drawn_beside_the_case_and_steps_with_a_slower_node(tmp_path):
    """Commits 8-11 ran on a node whose host gathers 1.4x slower: the case and its gather floor step
    together, and the trend and the implementations' chart draw that floor as its own line."""
    from hisparse.render.dashboard import _bench_href, compare_chart, trend_chart

    results = tmp_path / "results"
    for i in range(12):
        slow = 1.4 if i >= 8 else 1.0
        run = make_run(fake_commit(i), T0 + timedelta(days=i), {"multi_step": 100.0 * slow, "lru_sequential": 300.0},
                       seed=i)
        for c in run["cases"]:
            c["floor"]["gather_floor_us"] = 2.0 * slow
        write_run(results, run)
    history = load_history(results)
    t = next(t for t in history.tracked if t.series.case_id.startswith("multi_step/"))
    assert t.gather_floor_us == pytest.approx([2.0] * 8 + [2.8] * 4) and t.floor_us == [1.0] * 12
    for svg in (trend_chart(t), compare_chart([t])):
        line = re.search(r'class="gather-floor" points="([^"]+)"', svg).group(1).split()
        ys = [float(pt.split(",")[1]) for pt in line]
        assert len(ys) == 12 and len(set(ys[:8])) == len(set(ys[8:])) == 1 and ys[8] < ys[0]  # more time: up
        assert ">gather floor</text>" in svg and svg.count('<polyline class="floor"') == 1
    # the change point at commit 8 says the node moved with it, on the bench page, on the regressions
    # page and in the command's output
    (c,) = t.regressions
    assert c.index == 8 and t.gather_floor_step(c) == pytest.approx(1.4)
    note = "its gather floor moved 1.40x at the same commit: the node, the case's rows or the floor changed too"
    r = CliRunner().invoke(cli_main, ["dashboard", "--results", str(results), "--out", str(tmp_path / "site"),
                                      "--no-plots"])
    assert r.exit_code == 0, r.output
    assert f"regression: {t.key} at {fake_commit(8)[:12]}: " in r.output and note in r.output
    bench = (tmp_path / "site" / _bench_href(t)).read_text()
    assert note in html.unescape(bench)
    rows = Page((tmp_path / "site" / "regressions.html").read_text()).rows
    assert [r[-1] for r in rows if r and r[0] == t.series.case_id] == ["1.40x"]
    # lru_sequential kept its level and its floor stepped too: no change point, nothing to say
    lru = next(t for t in history.tracked if t.series.case_id.startswith("lru_sequential/"))
    assert lru.changes == []


def test_implementations_of_one_case_share_a_chart(tmp_path):
    results = _batch_sweep(tmp_path)
    out = tmp_path / "site"
    build_site(results, out, make_plots=False)
    page = next(p for p in (out / "bench").iterdir() if p.name.startswith("h200-sxm_cuda_multi_step_distinct_b16"))
    text = page.read_text()
    chart = re.search(r'<svg class="compare".*?</svg>', text, re.S).group(0)
    assert sorted(re.findall(r'data-impl="([^"]+)"', chart)) == ["lru_sequential", "multi_step"]
    assert len(re.findall(r'<circle class="pt"', chart)) == 8  # 2 implementations x 4 commits
    assert "All implementations of this case" in text
    # a case measured by one implementation only has no such chart
    solo = _batch_sweep(tmp_path / "solo", impls=("multi_step",))
    build_site(solo, tmp_path / "solo_site", make_plots=False)
    assert all('class="compare"' not in p.read_text() for p in (tmp_path / "solo_site" / "bench").iterdir())


def _vs_sglang_history(tmp_path, ratios=(0.9, 1.1)):
    """Two commits of multi_step next to sglang_multi_step (same case otherwise); our case carries the
    link the engine stores, with the ratio written by hand (not the medians': render shows the link)."""
    import random
    from dataclasses import replace

    from _regression_data import make_case
    from hisparse.results.model import CounterpartLink, run_from_dict
    from hisparse.results.model import write_run as write_v2

    base = {"workload": "upstream", "batch": 1, "steps": 4, "top_k": 64, "hot_buffer_size": 128,
            "item_size_bytes": 64, "pdl": True, "shared_layers": 0, "workload_params": {}, "seed": 0}
    theirs = "sglang_multi_step/upstream/b1/s4/k64/h128/i64/pdl1"
    for i, ratio in enumerate(ratios):
        run = make_run(fake_commit(i), T0 + timedelta(days=i), {"multi_step": 1.0, "lru_sequential": 1.0})
        rng = random.Random(i)
        run["cases"] = [make_case({**base, "implementation": impl}, level, rng=rng)
                        for impl, level in (("multi_step", 100.0), ("sglang_multi_step", 120.0))]
        rec = run_from_dict(run)
        cases = [replace(c, counterpart_link=CounterpartLink(theirs, ratio)) if c.params["implementation"] == "multi_step"
                 else c for c in rec.cases]
        write_v2(replace(rec, cases=tuple(cases)), tmp_path / "results" / "runs" / f"{rec.run_id}.json")
    return tmp_path / "results"


def test_case_page_shows_ours_over_sglang_per_commit(tmp_path):
    out = tmp_path / "site"
    build_site(_vs_sglang_history(tmp_path), out, make_plots=False)
    ours = next(p for p in (out / "bench").iterdir() if p.name.startswith("h200-sxm_cuda_multi_step_upstream"))
    text = ours.read_text()
    table = re.search(r'<table class="vs-sglang">.*?</table>', text, re.S).group(0)
    rows = Page(table).rows
    assert rows == [["commit", "date", "sglang case", "ours/sglang", "runs"],
                    [fake_commit(0)[:12], "2026-11-01 02:00", "sglang_multi_step/upstream/b1/s4/k64/h128/i64/pdl1",
                     "0.900", "1"],
                    [fake_commit(1)[:12], "2026-11-02 02:00", "sglang_multi_step/upstream/b1/s4/k64/h128/i64/pdl1",
                     "1.100", "1"]]
    # sglang's case page is linked, and both share the "All implementations of this case" chart
    sglang_page = next(p for p in (out / "bench").iterdir() if p.name.startswith("h200-sxm_cuda_sglang_multi_step"))
    assert f'href="../bench/{sglang_page.name}"' in table
    chart = re.search(r'<svg class="compare".*?</svg>', text, re.S).group(0)
    assert sorted(re.findall(r'data-impl="([^"]+)"', chart)) == ["multi_step", "sglang_multi_step"]
    assert "<h2>Ours vs sglang</h2>" not in sglang_page.read_text()  # the link is on our case only


def test_case_page_without_a_stored_link_has_no_ratio_table(tmp_path):
    out = tmp_path / "site"
    build_site(_batch_sweep(tmp_path, commits=1), out, make_plots=False)
    assert all("Ours vs sglang" not in p.read_text() for p in (out / "bench").iterdir())


def test_commit_page_names_its_subject_and_change_against_parent_and_baseline(tmp_path):
    results = tmp_path / "results"
    for i, level in enumerate((100.0, 100.0, 115.0)):
        write_run(results, make_run(fake_commit(i), T0 + timedelta(days=i), {"multi_step": level, "lru_sequential": 300.0},
                                    seed=i))
    out = tmp_path / "site"
    _build(load_history(results), out, make_plots=False, subjects={fake_commit(2): "Gather: wider tiles"})
    page = (out / "commit" / f"{fake_commit(2)[:12]}.html").read_text()
    assert "<b>Gather: wider tiles</b>" in page
    changes = page.split("Change against the parent and the baseline")[1].split("</table>")[0]
    row = next(r for r in Page(changes).rows if r and r[0].startswith("multi_step/"))
    assert row[1] == fake_commit(1)[:12] and row[2] == "1.15x slower" and row[3] == "regressed" and row[4] == "1.15x slower"
    assert "1 of 2 series unchanged (not listed)" in page  # lru_sequential: same level
    # the index: sortable, the change against the previous commit, sparklines on one relative scale
    index = (out / "index.html").read_text()
    assert '<table class="sortable">' in index
    rows = {r[0]: r for r in Page(index).rows if r and "/" in r[0]}
    ms = next(r for k, r in rows.items() if k.startswith("multi_step/"))
    assert ms[7] == "1.15x slower"
    assert next(r for k, r in rows.items() if k.startswith("lru_sequential/"))[7] == "same"
    # shared scale: latest 115 at mid-height, earlier 100 (-13%) clipped to the bottom edge (+-10% range)
    spark = re.findall(r'<svg class="spark".*?</svg>', index)[0 if "multi_step" in list(rows)[0] else 1]
    ys = [float(y) for y in re.findall(r'cy="([0-9.]+)"', spark)]
    assert ys == [26.0, 26.0, 15.0]


def test_sglang_page_lists_every_pair_with_its_latest_ratio_and_trend(tmp_path):
    results = tmp_path / "results"
    import copy

    for i, ours in enumerate((80.0, 90.0)):
        run = make_run(fake_commit(i), T0 + timedelta(days=i), {"multi_step": ours, "lru_sequential": 300.0}, seed=i)
        for impl, scale in (("multi_step", 100.0 / ours), ("lru_sequential", 1.0)):
            c = next(c for c in run["cases"] if c["params"]["implementation"] == impl)
            theirs = copy.deepcopy(c)  # sglang's case: the same work at 100 us, or with our very samples
            theirs["case_id"] = "sglang_" + c["case_id"]
            theirs["params"]["implementation"] = "sglang_" + impl
            theirs["samples_us"] = [x * scale for x in c["samples_us"]]
            theirs.pop("stats", None)
            run["cases"].append(theirs)
        write_run(results, run)
    out = tmp_path / "site"
    build_site(results, out, make_plots=False)
    page = (out / "sglang.html").read_text()
    rows = [r for r in Page(page).rows if r and r[0].startswith("multi_step/")]
    assert len(rows) == 1 and rows[0][2] == "sglang_multi_step"
    assert float(rows[0][3]) == pytest.approx(0.9, rel=0.02) and rows[0][4] == "2"
    # the lru pair's samples are the same: ratio 1, Mann-Whitney p 1, neither faster nor slower
    lru = next(r for r in Page(page).rows if r and r[0].startswith("lru_sequential/"))
    assert lru[3] == "1.000 ~"
    assert "ours faster in 1 of 2, slower in 0, not distinguishable in 1" in page
    assert len(re.findall(r'<circle class="pt"', page)) == 4


def test_index_names_the_layer_regime_of_each_benchmark(tmp_path):
    import shutil

    (tmp_path / "results" / "runs").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "run_layers.json", tmp_path / "results" / "runs")
    out = tmp_path / "site"
    build_site(tmp_path / "results", out, make_plots=False)
    rows = {r[0]: r for r in Page((out / "index.html").read_text()).rows if r and "/" in r[0]}
    assert rows["multi_step/serving/b1/s4/k2048/h4096/i576/pdl1/layers=8"][2] == "decode L=8"
    assert rows["multi_step/serving/b1/s4/k2048/h4096/i576/pdl1"][2] == "warm"


def test_commit_page_names_the_host_where_the_run_recorded_it(tmp_path):
    results = tmp_path / "results"
    medians = {"multi_step": 100.0, "lru_sequential": 300.0}
    old = make_run(fake_commit(0), T0, medians)
    new = make_run(fake_commit(1), T0 + timedelta(days=1), medians)
    new["environment"].update(cpu="AMD EPYC 9654", iommu="off", hypervisor=False)
    write_run(results, old)
    write_run(results, new)
    out = tmp_path / "site"
    build_site(results, out, make_plots=False)
    assert "host " not in (out / "commit" / f"{fake_commit(0)[:12]}.html").read_text()
    assert "host AMD EPYC 9654, IOMMU off, hypervisor no" in (out / "commit" / f"{fake_commit(1)[:12]}.html").read_text()


def test_commit_page_says_a_run_was_resumed(tmp_path):
    """A resumed run's cases may come from different machine starts (2026-12-06): its page says so."""
    results = tmp_path / "results"
    run = make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0})
    run["resumes"] = [{"started": "2026-12-06T06:20:00Z", "environment": {"cpu": "other"},
                       "cases": [run["cases"][-1]["case_id"]]}]
    write_run(results, run)
    out = tmp_path / "site"
    build_site(results, out, make_plots=False)
    assert "resumed 1 time(s), 1 case(s) timed by a resume" in (out / "commit" / f"{fake_commit(0)[:12]}.html").read_text()
