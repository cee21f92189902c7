"""The dashboard in a real browser: headless Chromium renders index, a benchmark page and a commit page
from file://, the rendered DOM holds the SVG points, and the pages make no network request.

Network check: Chromium runs with every host name mapped to NOTFOUND (nothing can leave the machine)
and writes a NetLog; every URL request the *page* starts (initiator = the file:// page's opaque origin
"null", as opposed to the browser's own background requests, "not an origin") is collected. A control
page with planted CDN references proves the check sees them. Skipped only when no Chromium is
installed (ci/install_browser.sh installs it).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from _regression_data import T0, fake_commit, make_run, write_run
from hisparse.render.dashboard import build_site
from hisparse.track.series import load_history

BROWSER = os.environ.get("HISPARSE_CHROMIUM") or next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium installed: run ci/install_browser.sh")

PNG_1X1 = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def render(url: str, tmp: Path, name: str) -> tuple[str, list[str]]:
    """(DOM after load, URLs the page requested) of ``url`` in headless Chromium."""
    netlog = tmp / f"{name}.netlog.json"
    profile = tmp / f"{name}.profile"
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-default-apps", "--disable-extensions", f"--user-data-dir={profile}",
           "--host-resolver-rules=MAP * ~NOTFOUND", f"--log-net-log={netlog}", "--virtual-time-budget=3000",
           "--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = json.loads(netlog.read_text())
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requested = []
    for e in log["events"]:
        p = e.get("params") or {}
        if types.get(e["type"]) == "URL_REQUEST_START_JOB" and p.get("initiator") not in (None, "not an origin"):
            requested.append(p.get("url", ""))
    return proc.stdout, requested


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    results = tmp / "results"
    for i in range(5):
        path = write_run(results, make_run(fake_commit(i), T0 + timedelta(days=i),
                                           {"multi_step": 100.0 * (1.2 if i >= 3 else 1.0), "lru_sequential": 300.0},
                                           seed=i))
        plots = path.with_suffix("")
        plots.mkdir()
        (plots / "latency_vs_batch.png").write_bytes(PNG_1X1)
    out = tmp / "site"
    build_site(load_history(results), out, make_plots=False)
    return tmp, out


def test_control_page_requests_are_detected(tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="stylesheet" href="https://cdn.example.com/x.css">'
                    '<script src="http://cdn.example.com/jquery.js"></script></head><body>'
                    '<img src="http://hisparse-test.invalid/a.png"><svg><circle r="2"></circle></svg></body></html>')
    dom, requested = render(page.as_uri(), tmp_path, "control")
    assert "<circle" in dom
    assert {u.rstrip("/") for u in requested} >= {"https://cdn.example.com/x.css", "http://cdn.example.com/jquery.js",
                                                  "http://hisparse-test.invalid/a.png"}


def test_index_renders_sparklines_offline(site):
    tmp, out = site
    dom, requested = render((out / "index.html").as_uri(), tmp, "index")
    assert requested == []
    assert len(re.findall(r'<svg class="spark"', dom)) == 2
    assert len(re.findall(r'<circle class="pt"', dom)) == 10  # 2 benchmarks x 5 commits


def test_benchmark_page_renders_trend_offline(site):
    tmp, out = site
    page = next(p for p in (out / "bench").iterdir() if "multi_step" in p.name)
    dom, requested = render(page.as_uri(), tmp, "bench")
    assert requested == []
    trend = re.search(r'<svg class="trend".*?</svg>', dom, re.S).group(0)
    assert len(re.findall(r'<circle class="pt"', trend)) == 5
    assert '<polygon class="iqr"' in trend and "<title>" in trend
    assert all(fake_commit(i)[:12] in dom for i in range(5))  # table rows


def test_commit_page_renders_plots_offline(site):
    tmp, out = site
    # plots are files of the site now, loaded lazily (deliberate: inlined they made pages 2-6 MB); the
    # only requests are for them, inside the site
    dom, requested = render((out / "commit" / f"{fake_commit(3)[:12]}.html").as_uri(), tmp, "commit")
    assert all(u.startswith((out / "plots").as_uri()) for u in requested), requested
    assert re.search(r'<img loading="lazy" alt="latency_vs_batch" src="\.\./plots/[^"]+/latency_vs_batch\.png"', dom)
    assert "multi_step/distinct/b8/s4/k64/h128/i64/pdl1" in dom
    # the change against the parent: multi_step 1.2x slower at commit 3 (levels x 1.2 from commit 3)
    changes = dom.split("Change against the parent and the baseline")[1].split("</table>")[0]
    assert "1.20x slower" in changes and "regressed" in changes


def test_index_has_sortable_change_column_and_sglang_page_renders_offline(site):
    tmp, out = site
    dom, requested = render((out / "index.html").as_uri(), tmp, "index-sort")
    assert requested == [] and '<table class="sortable">' in dom and "change vs previous" in dom
    dom, requested = render((out / "sglang.html").as_uri(), tmp, "sglang")
    assert requested == [] and "no pair of ours and sglang's in these runs" in dom


@pytest.fixture(scope="module")
def rich_site(tmp_path_factory):
    """Two implementations measuring the same cases (batch 1, 2, 16) over 4 commits, then a reference
    (CPU) run without GPU facts at a fifth commit, on the same machine."""
    import random

    from _regression_data import make_case

    tmp = tmp_path_factory.mktemp("browser-rich")
    results = tmp / "results"
    base = {"workload": "distinct", "steps": 4, "top_k": 64, "hot_buffer_size": 128, "item_size_bytes": 64,
            "pdl": False, "shared_layers": 0, "workload_params": {}, "seed": 0}
    for i in range(5):
        backend = "reference" if i == 4 else "cuda"
        run = make_run(fake_commit(i), T0 + timedelta(days=i), {"multi_step": 1.0, "lru_sequential": 1.0},
                       backend=backend)
        if backend == "reference":
            for key in ("gpu", "driver"):
                run["environment"].pop(key)
        rng = random.Random(i)
        run["cases"] = [make_case({**base, "implementation": impl, "batch": b},
                                  (100.0 if impl == "multi_step" else 200.0) * b, rng=rng)
                        for impl in ("multi_step", "lru_sequential") for b in (16, 2, 1)]
        write_run(results, run)
    out = tmp / "site"
    build_site(load_history(results), out, make_plots=False)
    return tmp, out


def test_index_sorts_cases_numerically_and_keeps_backends_apart(rich_site):
    tmp, out = rich_site
    dom, requested = render((out / "index.html").as_uri(), tmp, "rich-index")
    assert requested == []
    cases = re.findall(r">(multi_step/distinct/b\d+)/", dom)
    assert cases == ["multi_step/distinct/b1", "multi_step/distinct/b1", "multi_step/distinct/b2",
                     "multi_step/distinct/b2", "multi_step/distinct/b16", "multi_step/distinct/b16"]  # cuda, reference
    assert len(re.findall(r'<svg class="spark"', dom)) == 12  # 6 cases x {cuda, reference}


def test_benchmark_page_renders_implementations_floor_and_params_offline(rich_site):
    tmp, out = rich_site
    page = next(p for p in (out / "bench").iterdir() if p.name.startswith("h200-sxm_cuda_multi_step_distinct_b16"))
    dom, requested = render(page.as_uri(), tmp, "rich-bench")
    assert requested == []
    trend = re.search(r'<svg class="trend".*?</svg>', dom, re.S).group(0)
    assert len(re.findall(r'<circle class="pt"', trend)) == 4  # the 4 cuda commits; the CPU run is not here
    assert '<polyline class="floor"' in trend
    compare = re.search(r'<svg class="compare".*?</svg>', dom, re.S).group(0)
    assert sorted(re.findall(r'data-impl="([^"]+)"', compare)) == ["lru_sequential", "multi_step"]
    assert len(re.findall(r'<circle class="pt"', compare)) == 8
    params = re.search(r'<table class="params">.*?</table>', dom, re.S).group(0)
    assert re.search(r"<td[^>]*>pdl</td><td[^>]*>off</td>", params)
    assert re.search(r"<td[^>]*>batch</td><td[^>]*>16</td>", params)


def test_commits_and_cpu_commit_page_render_offline(rich_site):
    tmp, out = rich_site
    dom, requested = render((out / "commits.html").as_uri(), tmp, "rich-commits")
    assert requested == []
    row = re.search(rf"<tr>.*?{fake_commit(4)[:12]}.*?</tr>", dom, re.S).group(0)
    assert ">h200-sxm<" in row and ">reference<" in row
    dom, requested = render((out / "commit" / f"{fake_commit(4)[:12]}.html").as_uri(), tmp, "rich-cpu")
    assert requested == []
    assert "Reference backend: PyTorch on the CPU" in dom
    assert "None" not in dom and "driver" not in dom
    cases = re.findall(r">(multi_step/distinct/b\d+)/", dom)
    assert cases == ["multi_step/distinct/b1", "multi_step/distinct/b2", "multi_step/distinct/b16"]
