"""asv round trips: our runs -> asv results v2 read by asv's own loader and `asv compare`; the suite in
benchmarks/ discovered by asv with our gpu_time_ benchmark type; and a real `asv run` on the CPU."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from _regression_data import CASES, T0, fake_commit, make_run
from hisparse.results.model import run_from_dict
from hisparse.files import write_atomic
from hisparse.track import asv as ar

asv_results_mod = pytest.importorskip("asv.results")
json5 = pytest.importorskip("json5")

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
ASV = [PY, "-m", "asv"]


def _convert(run, results_dir, **kw):
    # asv.py writes nothing itself (it imports nothing of hisparse): its callers hand it the writer.
    return ar.convert_run(run, results_dir, write=write_atomic, **kw)


def _read(run: dict) -> dict:
    """What convert_run is given in the tree: the results reader's record as a dict (schema v2)."""
    return run_from_dict(json.loads(json.dumps(run))).to_dict()


def _ms(days: int) -> int:
    return int((T0 + timedelta(days=days)).timestamp() * 1000)


@pytest.fixture
def converted(tmp_path):
    """Three commits: multi_step 100 -> 100 -> 120 us; lru_sequential failed at the middle one."""
    results = tmp_path / "results" / "asv"
    runs = []
    for i, level in enumerate((100.0, 100.0, 120.0)):
        run = make_run(fake_commit(i), T0 + timedelta(days=i), {"multi_step": level, "lru_sequential": 300.0},
                       seed=i, failed=("lru_sequential",) if i == 1 else ())
        runs.append(run)
        _convert(_read(run), results, machine="h200-sxm", python="/opt/py/bin/python3", commit_date_ms=_ms(i))
    return tmp_path, results, runs


def test_layout_names_and_params_by_hand():
    layout = ar.suite_layout(CASES)
    assert sorted(layout) == ["bench_swap.LruSequential.gpu_time_swap", "bench_swap.MultiStep.gpu_time_swap"]
    ms = layout["bench_swap.MultiStep.gpu_time_swap"]
    assert ms.param_names == list(ar.AXES)
    assert ms.params == [["'distinct'"], ["8"], ["4"], ["64"], ["128"], ["64"], ["True"], ["0"]]
    trace = dict(CASES[0], workload="trace", workload_params={"miss_rate": 0.1, "locality": 0.5})
    assert ar.grid_point(trace)[0] == "trace:locality=0.5,miss_rate=0.1"
    assert ar.env_name("/opt/py/bin/python3") == "existing-py_opt_py_bin_python3"


def test_results_load_through_asv_loader(converted):
    _, results, runs = converted
    assert (results / "h200-sxm" / "machine.json").is_file()
    assert (results / "benchmarks.json").is_file()
    name = "bench_swap.MultiStep.gpu_time_swap"
    by_commit = {r.commit_hash: r for r in asv_results_mod.iter_results(str(results))}
    assert sorted(by_commit) == [fake_commit(i) for i in range(3)]
    r2 = by_commit[fake_commit(2)]
    assert r2.env_name == "existing-py_opt_py_bin_python3" and r2.date == _ms(2)
    params = r2.get_result_params(name)
    assert params == ar.suite_layout(CASES)[name].params
    samples = r2.get_result_samples(name, params)[0]
    want = [x * 1e-6 for x in runs[2]["cases"][0]["samples_us"]]
    assert samples == pytest.approx(want)  # raw per-replay samples, seconds
    stats = r2.get_result_stats(name, params)[0]
    assert stats["repeat"] == 10 and stats["number"] == 1
    assert stats["q_25"] <= r2.get_result_value(name, params)[0] <= stats["q_75"]
    assert r2.get_result_value(name, params)[0] == pytest.approx(sorted(want)[4:6][0], rel=0.01)
    # a failed case is None (asv: failed), not a number
    r1 = by_commit[fake_commit(1)]
    lru = "bench_swap.LruSequential.gpu_time_swap"
    assert r1.get_result_value(lru, r1.get_result_params(lru)) == [None]


def test_pruned_grid_points_are_nan(tmp_path):
    run = make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0})
    extra = json.loads(json.dumps(run["cases"][0]))
    extra["params"]["batch"] = 64
    extra["params"]["pdl"] = False
    extra["case_id"] = "multi_step/distinct/b64/pdl0"
    run["cases"].append(extra)
    path = _convert(_read(run), tmp_path, machine="m1", python="/p/python")
    res = asv_results_mod.Results.load(str(path))
    name = "bench_swap.MultiStep.gpu_time_swap"
    values = res.get_result_value(name, res.get_result_params(name))
    assert len(values) == 4  # batch {8, 64} x pdl {False, True}
    assert sum(1 for v in values if v is not None and not math.isnan(v)) == 2
    assert sum(1 for v in values if v is not None and math.isnan(v)) == 2  # pruned: skipped


def test_asv_compare_reads_converted_results(converted):
    tmp, results, _ = converted
    conf = json5.loads((REPO / "asv.conf.json").read_text())
    conf.update(repo=str(tmp), results_dir=str(results), html_dir=str(tmp / "html"))
    (tmp / "asv.conf.json").write_text(json.dumps(conf))
    subprocess.run(["git", "init", "-q", str(tmp)], check=True)  # asv compare opens conf.repo (a git repo)
    out = subprocess.run(ASV + ["compare", "--machine", "h200-sxm", "--split", fake_commit(0)[:8], fake_commit(2)[:8]],
                         cwd=tmp, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "MultiStep.gpu_time_swap" in ln)
    assert "1.2" in line and line.lstrip().startswith("|") and "+" in line.split("|")[1]  # slower: flagged


def test_converting_twice_merges_and_widens(tmp_path):
    a = make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0})
    _convert(_read(a), tmp_path, machine="m1", python="/p/python")
    b = json.loads(json.dumps(a))
    for c in b["cases"]:
        c["params"]["batch"] = 64
    _convert(_read(b), tmp_path, machine="m1", python="/p/python")
    bench = json.loads((tmp_path / "benchmarks.json").read_text())
    assert bench["bench_swap.MultiStep.gpu_time_swap"]["params"][1] == ["8", "64"]
    assert bench["version"] == 2


def test_convert_refuses_a_run_without_commit(tmp_path):
    run = make_run(fake_commit(0), T0, {"multi_step": 1.0, "lru_sequential": 1.0})
    run["environment"]["git_commit"] = None
    with pytest.raises(ValueError, match="git commit"):
        _convert(_read(run), tmp_path, machine="m1")


def test_convert_refuses_a_dict_not_from_the_results_reader(tmp_path):
    """A raw v1 file's dict (samples beside no runs) would convert to empty results: refused instead."""
    run = make_run(fake_commit(0), T0, {"multi_step": 1.0, "lru_sequential": 1.0})
    with pytest.raises(ValueError, match="schema_version 2"):
        _convert(run, tmp_path, machine="m1")
    assert not any(tmp_path.iterdir())


def test_samples_are_every_runs_pooled(tmp_path):
    run = _read(make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0}))
    case = run["cases"][0]
    case["runs"] = [{**case["runs"][0], "samples_us": [100.0] * 10},
                    {**case["runs"][0], "process": 1, "samples_us": [110.0] * 10}]
    res = asv_results_mod.Results.load(str(_convert(run, tmp_path, machine="m1", python="/p/python")))
    name = ar.benchmark_name(case["params"]["implementation"])
    (samples,) = res.get_result_samples(name, res.get_result_params(name))
    assert samples == pytest.approx([100e-6] * 10 + [110e-6] * 10)


# ------------------------------------------------------------------ the suite under asv


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory):
    """PYTHONPATH entry that makes the asv_bench_hisparse distribution visible: "" when it is installed,
    else a site directory holding a copy of plugins/asv_bench_hisparse and its .dist-info (what pip
    installs; asv_runner finds plugins through importlib.metadata), made without pip or network."""
    try:
        importlib.metadata.distribution("asv_bench_hisparse")
        return ""
    except importlib.metadata.PackageNotFoundError:
        pass
    site = tmp_path_factory.mktemp("plugin")
    src = REPO / "plugins" / "asv_bench_hisparse"
    shutil.copytree(src / "asv_bench_hisparse", site / "asv_bench_hisparse")
    version = re.search(r'^version = "([^"]+)"', (src / "pyproject.toml").read_text(), re.M).group(1)
    info = site / f"asv_bench_hisparse-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: asv_bench_hisparse\nVersion: {version}\n")
    return str(site)


def _env(plugin: str, **extra) -> dict:
    env = dict(os.environ, HISPARSE_ASV_CONFIG=str(REPO / "configs" / "cpu-small.yaml"), **extra)
    if plugin:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (plugin, env.get("PYTHONPATH")) if p)
    return env


def test_asv_discovers_suite_with_gpu_time_type(plugin_path, tmp_path):
    import asv  # noqa: PLC0415

    script = Path(asv.__file__).parent / "benchmark.py"
    out_file = tmp_path / "discovered.json"
    proc = subprocess.run([PY, str(script), "discover", str(REPO / "benchmarks"), str(out_file)],
                          env=_env(plugin_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found = {b["name"]: b for b in json.loads(out_file.read_text())}
    sys.path.insert(0, str(REPO))
    try:
        from hisparse.bench.config import load_config  # noqa: PLC0415

        cases = load_config(str(REPO / "configs" / "cpu-small.yaml")).expand(ci=True).cases
        expected = ar.suite_layout({k: v for k, v in c.to_dict().items() if k != "timing"} for c in cases)
    finally:
        sys.path.remove(str(REPO))
    assert set(found) == set(expected)
    for name, cls in expected.items():
        entry = ar.benchmark_entry(cls)
        for key in ("type", "unit", "version", "params", "param_names"):
            assert found[name][key] == entry[key], (name, key)


@pytest.mark.slow
def test_asv_run_round_trip_on_cpu(plugin_path, tmp_path):
    """`asv run -E existing` on the reference backend: samples reach asv as a timing result."""
    pytest.importorskip("hisparse.bench.workload", reason="the engine's workload module is not in this tree yet")
    conf = json5.loads((REPO / "asv.conf.json").read_text())
    conf.update(repo=str(REPO), benchmark_dir=str(REPO / "benchmarks"), results_dir=str(tmp_path / "results"),
                html_dir=str(tmp_path / "html"), env_dir=str(tmp_path / "env"))
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    (tmp_path / "home").mkdir()
    env = _env(plugin_path, HOME=str(tmp_path / "home"), HISPARSE_ASV_BACKEND="reference")
    subprocess.run(ASV + ["machine", "--yes", "--machine", "cpu-test"], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=120)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    proc = subprocess.run(ASV + ["run", "-E", f"existing:{PY}", "--set-commit-hash", commit, "--machine", "cpu-test",
                                 "--bench", "MultiStep.gpu_time_swap", "--record-samples", "--show-stderr"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (result,) = [r for r in asv_results_mod.iter_results(str(tmp_path / "results"))]
    name = "bench_swap.MultiStep.gpu_time_swap"
    values = result.get_result_value(name, result.get_result_params(name))
    samples = result.get_result_samples(name, result.get_result_params(name))
    stats = result.get_result_stats(name, result.get_result_params(name))
    timed = [i for i, v in enumerate(values) if v is not None and not math.isnan(v)]
    assert timed, proc.stdout[-3000:]
    for i in timed:
        assert len(samples[i]) >= 10 and stats[i]["q_25"] <= values[i] <= stats[i]["q_75"]


def test_asv_samples_pool_the_timing_rounds_like_the_engine(tmp_path, monkeypatch):
    """benchmarks/common.py times ``timing.rounds`` rounds (fresh workload each) like `hisparse-bench run`:
    2 rounds x 10 replays on the reference backend give 20 samples per call."""
    config = tmp_path / "two-rounds.yaml"
    config.write_text((REPO / "configs" / "cpu-small.yaml").read_text().replace("  replays: 10\n",
                                                                                 "  replays: 10\n  rounds: 2\n"))
    monkeypatch.setenv("HISPARSE_ASV_CONFIG", str(config))
    monkeypatch.setenv("HISPARSE_ASV_BACKEND", "reference")
    spec = importlib.util.spec_from_file_location("_asv_common_two_rounds", REPO / "benchmarks" / "common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    (case, *_) = [c for c in common.regression_set()[0] if c.implementation == "multi_step"]
    assert int(case.timing.rounds) == 2
    samples = common.Prepared(case).sample_seconds()
    assert len(samples) == 20 and all(0 < s < 1 for s in samples)


@pytest.mark.parametrize("name", ["ci", "default", "cpu-small"])
def test_asv_suite_drops_workloads_the_commit_under_test_does_not_know(name):
    """An old commit's config parser refuses `serving` (added 2026-12-01): the suite hands it the shipped
    config without it, which expands to exactly the shipped cases that are not `serving`, in order."""
    import yaml  # noqa: PLC0415

    from hisparse.bench.config import load_config, parse_config  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("_asv_common_drop", REPO / "benchmarks" / "common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    data = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    assert common._drop_unknown_workloads(data, {"upstream", "distinct", "trace"}) is True
    old = parse_config(data)
    full = load_config(name)
    for ci in (False, True):
        assert old.expand(ci=ci).ids == [i for i in full.expand(ci=ci).ids if "/serving/" not in i]
    # nothing to drop: the config is left alone
    again = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    assert common._drop_unknown_workloads(again, {"serving", "upstream", "distinct", "trace"}) is False


OLD_LAYOUT_COMMIT = "8165cd7"  # the last commit of the flat layout (before the wings, 2026-12-01)


@pytest.mark.slow
def test_asv_replays_a_commit_from_before_the_move(plugin_path, tmp_path):
    """This tree's suite measures an old tree (flat hisparse/ layout) named first in HISPARSE_ASV_PATH, as
    `asv run` of an old commit does: the old modules are found and a sample lands."""
    full = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "-q", f"{OLD_LAYOUT_COMMIT}^{{commit}}"],
                          capture_output=True, text=True).stdout.strip()
    if not full:
        pytest.skip(f"commit {OLD_LAYOUT_COMMIT} is not in this clone (shallow?)")
    old = tmp_path / "old"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(old), full],
                   check=True, capture_output=True)
    try:
        assert (old / "hisparse" / "config.py").is_file() and not (old / "hisparse" / "bench").exists()
        # a marker in the old tree's config module says which tree the benchmark process imported
        probe = tmp_path / "imported-from.txt"
        with (old / "hisparse" / "config.py").open("a") as f:
            f.write(f"\nopen({str(probe)!r}, 'a').write(__file__ + '\\n')\n")
        conf = json5.loads((REPO / "asv.conf.json").read_text())
        conf.update(repo=str(REPO), benchmark_dir=str(REPO / "benchmarks"), results_dir=str(tmp_path / "results"),
                    html_dir=str(tmp_path / "html"), env_dir=str(tmp_path / "env"))
        (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
        (tmp_path / "home").mkdir()
        env = _env(plugin_path, HOME=str(tmp_path / "home"), HISPARSE_ASV_BACKEND="reference",
                   HISPARSE_ASV_PATH=str(old))
        subprocess.run(ASV + ["machine", "--yes", "--machine", "cpu-test"], cwd=tmp_path, env=env, check=True,
                       capture_output=True, timeout=120)
        proc = subprocess.run(ASV + ["run", "-E", f"existing:{PY}", "--set-commit-hash", full, "--machine", "cpu-test",
                                     "--bench", "MultiStep.gpu_time_swap", "--record-samples", "--show-stderr"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (result,) = [r for r in asv_results_mod.iter_results(str(tmp_path / "results"))]
        assert result.commit_hash == full
        assert probe.read_text().split() and set(probe.read_text().split()) == {str(old / "hisparse" / "config.py")}
        name = "bench_swap.MultiStep.gpu_time_swap"
        values = result.get_result_value(name, result.get_result_params(name))
        assert any(v is not None and not math.isnan(v) for v in values), proc.stdout[-3000:]
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], capture_output=True)


def test_asv_module_imports_no_hisparse_reads_no_environment_and_writes_through_its_caller(tmp_path):
    # benchmarks/common.py loads asv.py by path, also against old trees: it must stand alone.
    import ast  # noqa: PLC0415

    tree = ast.parse((REPO / "hisparse" / "track" / "asv.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m == "hisparse" or m.startswith("hisparse.") for m in imported)
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    os_calls = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == "os"}
    assert not attrs & {"environ", "getenv", "write_text", "write_bytes"} and "replace" not in os_calls
    assert "open" not in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    run = _read(make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0}))
    written = {}
    path = ar.convert_run(run, tmp_path, machine="m1", python="/p/python", write=written.__setitem__)
    assert not any(tmp_path.iterdir())  # nothing written behind the caller's back
    assert list(written) == [path, tmp_path / "m1" / "machine.json", tmp_path / "benchmarks.json"]
    assert json.loads(written[path])["commit_hash"] == fake_commit(0)
