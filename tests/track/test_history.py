"""hisparse.track.history on a temp git repo of 3 commits: per-commit worktrees, that tree's own code,
results recorded under each commit, measured commits skipped, trees without a harness skipped."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from _regression_data import T0, fake_commit, make_run
from _regression_data import git as _git
from hisparse.track import history as hist
from hisparse.cli import main as cli_main

MACHINE = "test-gpu"

# The harness of the fake project: `python -m hisparse run CONFIG --ci --out DIR` writes one run file
# whose multi_step level comes from LEVEL in the tree, so each commit measures "its own kernels".
FAKE_MAIN = r'''
import json, subprocess, sys
from pathlib import Path
from hisparse.level import LEVEL
args = sys.argv[1:]
assert args[0] == "run" and "--ci" in args, args
out = Path(args[args.index("--out") + 1])
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
case = {"case_id": "multi_step/x", "params": {"implementation": "multi_step", "workload": "distinct", "batch": 1},
        "status": "ok", "samples_us": [LEVEL] * 10, "stats": {"median_us": LEVEL}, "work": {"bytes_per_call": 1000}}
run = {"schema_version": 1, "run_id": "r_" + commit[:12], "created": "2026-11-01T00:00:00Z",
       "finished": "2026-11-01T00:01:00Z", "backend": "cuda", "config": {"name": "ci"},
       "environment": {"machine": "ignored", "git_commit": commit, "python": "3.11.7"}, "cases": [case]}
(out / ("r_" + commit[:12] + ".json")).write_text(json.dumps(run))
'''


@pytest.fixture
def repo(tmp_path):
    """c1: no harness; c2: harness, LEVEL 100; c3: LEVEL 120."""
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "README").write_text("x\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-q", "-m", "c1", date="2026-10-01T00:00:00+00:00")
    (r / "hisparse" / "commands").mkdir(parents=True)
    (r / "hisparse" / "__init__.py").write_text("")
    (r / "hisparse" / "commands" / "run.py").write_text("")
    (r / "hisparse" / "__main__.py").write_text(FAKE_MAIN)
    (r / "hisparse" / "level.py").write_text("LEVEL = 100.0\n")
    (r / "configs").mkdir()
    (r / "configs" / "ci.yaml").write_text("name: ci\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-q", "-m", "c2", date="2026-10-02T00:00:00+00:00")
    (r / "hisparse" / "level.py").write_text("LEVEL = 120.0\n")
    _git(r, "commit", "-q", "-am", "c3", date="2026-10-03T00:00:00+00:00")
    commits = _git(r, "rev-list", "--reverse", "HEAD").split()
    return r, commits


class StubRunner:
    """Writes a synthetic run for the tree's HEAD; records what it was given."""

    def __init__(self):
        self.calls = []

    def __call__(self, tree: Path, out_dir: Path, config: str, env: dict) -> None:
        commit = _git(tree, "rev-parse", "HEAD")
        self.calls.append({"commit": commit, "tree": tree, "config": config, "pythonpath": env["PYTHONPATH"],
                           "machine": env["HISPARSE_MACHINE"], "level": (tree / "hisparse" / "level.py").read_text()})
        run = make_run(commit, T0, {"multi_step": 100.0, "lru_sequential": 300.0}, machine=MACHINE)
        (out_dir / f"{run['run_id']}.json").write_text(json.dumps(run))


def test_resolve_commits(repo):
    r, (c1, c2, c3) = repo
    assert hist.resolve_commits(r, f"{c1}..{c3}") == [c2, c3]
    assert hist.resolve_commits(r, "HEAD") == [c3]
    assert hist.resolve_commits(r, "HEAD~1") == [c2]


def test_measures_each_commit_in_its_own_tree_and_skips_measured(repo, tmp_path):
    r, (c1, c2, c3) = repo
    results, wt = tmp_path / "results", tmp_path / "wt"
    stub = StubRunner()
    first = hist.measure_history(r, c3, results_dir=results, machine=MACHINE, runner=stub, worktree_root=wt)
    assert [(o.commit, o.status) for o in first] == [(c3, "measured")]
    assert stub.calls[0]["commit"] == c3 and stub.calls[0]["level"] == "LEVEL = 120.0\n"
    assert stub.calls[0]["pythonpath"].split(os.pathsep)[0] == str(stub.calls[0]["tree"])
    assert stub.calls[0]["machine"] == MACHINE and stub.calls[0]["config"] == "configs/ci.yaml"
    assert hist.is_measured(results, MACHINE, c3) and not hist.is_measured(results, "other-machine", c3)

    outcomes = hist.measure_history(r, f"{c1}..{c3}", results_dir=results, machine=MACHINE, runner=stub,
                                    worktree_root=wt)
    assert [(o.commit, o.status) for o in outcomes] == [(c2, "measured"), (c3, "already-measured")]
    assert [c["commit"] for c in stub.calls] == [c3, c2]  # c3 was not run again
    assert stub.calls[1]["level"] == "LEVEL = 100.0\n"

    runs, skipped = hist.scan_runs(results)
    assert skipped == [] and sorted(run.commit for run in runs) == sorted([c2, c3])
    assert all(run.machine == MACHINE for run in runs)
    for c in (c2, c3):
        assert list((results / "asv" / MACHINE).glob(f"{c[:8]}-existing-*.json"))
    assert not list(wt.iterdir())  # worktrees removed
    assert c2[:12] not in _git(r, "worktree", "list")


def test_tree_without_harness_is_skipped_with_reason(repo, tmp_path):
    r, (c1, _, _) = repo
    stub = StubRunner()
    (o,) = hist.measure_history(r, c1, results_dir=tmp_path / "res", machine=MACHINE, runner=stub,
                                worktree_root=tmp_path / "wt")
    assert o.status == "skipped" and "hisparse/__main__.py" in o.reason
    assert stub.calls == []


def test_max_measures_the_newest(repo, tmp_path):
    r, (c1, c2, c3) = repo
    stub = StubRunner()
    outcomes = hist.measure_history(r, f"{c1}..{c3}", results_dir=tmp_path / "res", machine=MACHINE,
                                    max_count=1, runner=stub, worktree_root=tmp_path / "wt")
    assert [(o.commit, o.status) for o in outcomes] == [(c2, "skipped"), (c3, "measured")]
    assert "--max 1" in outcomes[0].reason


def test_runner_runs_the_trees_own_code(repo, tmp_path):
    """The default runner: `python -m hisparse run` from the worktree, which wins over the installed
    hisparse; each commit records its own level under its own hash."""
    r, (c1, c2, c3) = repo
    results = tmp_path / "results"
    outcomes = hist.measure_history(r, f"{c1}..{c3}", results_dir=results, machine=MACHINE,
                                    worktree_root=tmp_path / "wt", convert_asv=False)
    assert [o.status for o in outcomes] == ["measured", "measured"], [o.reason for o in outcomes]
    runs, _ = hist.scan_runs(results)
    levels = {run.commit: run.cases[0]["samples_us"][0] for run in runs}
    assert levels == {c2: 100.0, c3: 120.0}
    assert {run.machine for run in runs} == {MACHINE}  # filed under the machine history was given
    series = hist.build_series(runs, repo=r)
    assert [p.commit for p in series[0].points] == [c2, c3]  # git committer-date order


def test_cli_history(repo, tmp_path, monkeypatch):
    r, (c1, c2, c3) = repo
    monkeypatch.setenv("HISPARSE_MACHINE", MACHINE)
    res = CliRunner().invoke(cli_main, ["history", f"{c1}..{c3}", "--repo", str(r), "--results",
                                        str(tmp_path / "res"), "--worktree-dir", str(tmp_path / "wt"), "--no-asv"])
    assert res.exit_code == 0, res.output
    assert f"{c2[:12]}  measured" in res.output and f"{c3[:12]}  measured" in res.output
    res = CliRunner().invoke(cli_main, ["history", c1, "--repo", str(r), "--results", str(tmp_path / "res"),
                                        "--worktree-dir", str(tmp_path / "wt")])
    assert res.exit_code == 0 and "skipped: no hisparse/__main__.py" in res.output
    res = CliRunner().invoke(cli_main, ["history", c3, "--repo", str(r), "--results", str(tmp_path / "res"),
                                        "--worktree-dir", str(tmp_path / "wt")])
    assert res.exit_code == 0 and "already-measured" in res.output


def test_failing_harness_is_reported_not_recorded(repo, tmp_path):
    r, (_, _, c3) = repo

    def broken(tree, out_dir, config, env):
        raise hist.HisparseError("boom")

    (o,) = hist.measure_history(r, c3, results_dir=tmp_path / "res", machine=MACHINE, runner=broken,
                                worktree_root=tmp_path / "wt")
    assert o.status == "failed" and "boom" in o.reason
    assert not hist.is_measured(tmp_path / "res", MACHINE, c3)


def test_scan_runs_skips_unknown_schema(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "future.json").write_text(json.dumps({"schema_version": 99, "cases": []}))
    (tmp_path / "runs" / "junk.json").write_text("{nope")
    runs, skipped = hist.scan_runs(tmp_path)
    assert runs == [] and len(skipped) == 2
    assert any("schema_version" in reason for _, reason in skipped)


def test_run_file_is_a_view_of_the_results_record(tmp_path):
    """read_run reads through hisparse.results (v1 upgraded); RunFile keeps its attribute names, its
    cases are flat dicts with every figure computed, its data is the v2 dict asv converts."""
    from hisparse.results.model import load_run  # noqa: PLC0415

    v1 = make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0}, machine=MACHINE)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(v1))
    run = hist.read_run(path)
    assert run.record == load_run(path)
    assert (run.run_id, run.commit, run.machine, run.finished, run.dirty) == (v1["run_id"], fake_commit(0), MACHINE,
                                                                               True, False)
    assert run.created == T0 and run.data["schema_version"] == 2 and "runs" in run.data["cases"][0]
    flat = run.cases[0]
    assert flat["samples_us"] == v1["cases"][0]["samples_us"]
    assert flat["stats"]["median_us"] == pytest.approx(v1["cases"][0]["stats"]["median_us"])
    assert flat["derived"]["gbps"] == pytest.approx(v1["cases"][0]["derived"]["gbps"])
    assert flat["timing"]["samples_per_round"] == [10]
    with pytest.raises(hist.ResultFormatError, match="not a readable"):
        hist.read_run(tmp_path / "missing.json")


def test_recorded_runs_are_written_by_the_results_writer_in_the_current_schema(tmp_path):
    """A v1 run file from an older commit's harness is recorded (under the commit and machine) as v2."""

    out = tmp_path / "out"
    out.mkdir()
    v1 = make_run(fake_commit(1), T0, {"multi_step": 100.0, "lru_sequential": 300.0}, machine="elsewhere")
    (out / "r.json").write_text(json.dumps(v1))
    o = hist._record(out, fake_commit(1), tmp_path / "results", MACHINE, tmp_path, convert_asv=False)
    assert o.status == "measured"
    (written,) = o.run_files
    data = json.loads(written.read_text())
    assert data["schema_version"] == 2 and data["environment"]["machine"] == MACHINE
    assert [x for r in data["cases"][0]["runs"] for x in r["samples_us"]] == v1["cases"][0]["samples_us"]



def test_exported_trees_run_without_git_and_are_recorded_under_their_commit(repo, tmp_path):
    """A node without git: scripts/run_trees.sh runs `git archive` trees (HISPARSE_GIT_COMMIT says
    which commit), then record_run_dir files the runs as `history` would."""
    r, (_, c2, c3) = repo
    trees, out, results = tmp_path / "trees", tmp_path / "out", tmp_path / "results"
    trees.mkdir()
    for c in (c2, c3):
        _git(r, "archive", "--format=tar", "-o", str(trees / f"{c}.tar"), c)
    # The fake harness asks git for HEAD; a tree has no .git, so it must use HISPARSE_GIT_COMMIT.
    main_py = FAKE_MAIN.replace(
        'commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()',
        'import os; commit = os.environ["HISPARSE_GIT_COMMIT"]')
    for c in (c2, c3):
        with_main = tmp_path / "patch"
        shutil.rmtree(with_main, ignore_errors=True)
        (with_main / "hisparse").mkdir(parents=True)
        (with_main / "hisparse" / "__main__.py").write_text(main_py)
        subprocess.run(["tar", "rf", str(trees / f"{c}.tar"), "-C", str(with_main), "hisparse/__main__.py"], check=True)
    script = Path(__file__).resolve().parents[2] / "scripts" / "run_trees.sh"
    env = {**os.environ, "SITE": "", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(script), str(trees), str(out)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for c, level in ((c2, 100.0), (c3, 120.0)):
        o = hist.record_run_dir(out / c, c[:10], results, MACHINE, repo=r)
        assert o.status == "measured" and o.commit == c
        assert hist.is_measured(results, MACHINE, c)
    runs, _ = hist.scan_runs(results)
    assert {run.commit: run.cases[0]["samples_us"][0] for run in runs} == {c2: 100.0, c3: 120.0}


@pytest.mark.parametrize("layout", ["cli", "commands"])
def test_history_measures_trees_of_either_layout(tmp_path, layout):
    # the wings layout (hisparse/cli/run.py) and the flat one of commits before 2026-12-01 (hisparse/commands/run.py)
    from hisparse.track.history import HarnessUnavailable, check_harness

    (tmp_path / "hisparse" / layout).mkdir(parents=True)
    (tmp_path / "hisparse" / "__main__.py").write_text("")
    (tmp_path / "hisparse" / layout / "run.py").write_text("")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "ci.yaml").write_text("name: ci\n")
    check_harness(tmp_path, "configs/ci.yaml")
    (tmp_path / "hisparse" / layout / "run.py").unlink()
    with pytest.raises(HarnessUnavailable, match="no `run` command"):
        check_harness(tmp_path, "configs/ci.yaml")
