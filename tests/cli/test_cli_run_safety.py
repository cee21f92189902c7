"""`hisparse-bench run` on the reference backend: it never overwrites a run file, refuses a sweep with
nothing to time, puts CPU runs in a git-ignored folder, reports one line per case off a terminal,
warns before a long reference run, and prints no meaningless floor columns (issue 14)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from hisparse import env
from hisparse.bench import backends, session
from hisparse.cli import main
from hisparse.results.model import load_run
from _tiny_config import tiny_config

REPO = Path(__file__).resolve().parents[2]

TWO = tiny_config("two")


def run(*args: str):
    return CliRunner().invoke(main, ["run", *args, "--backend", "reference", "--no-plots"])


def test_existing_run_file_is_never_overwritten(two, tmp_path):
    out = tmp_path / "run.json"
    first = run(str(two), "--out", str(out))
    assert first.exit_code == 0, first.output
    before = out.read_bytes()
    assert len(load_run(out).cases) == 2

    again = run(str(two), "--out", str(out), "--filter", "multi_step")
    assert again.exit_code == 2, again.output
    assert str(out) in again.output and "refusing to overwrite" in again.output
    for way_out in (f"--resume {out}", "new name", "--force"):
        assert way_out in again.output
    assert out.read_bytes() == before  # not touched

    forced = run(str(two), "--out", str(out), "--filter", "multi_step", "--force")
    assert forced.exit_code == 0, forced.output
    assert load_run(out).case_ids() == ["multi_step/distinct/b1/s2/k16/h64/i64/pdl1"]


def test_filter_matching_nothing_exits_2_and_writes_no_file(two, tmp_path):
    out = tmp_path / "runs"
    result = run(str(two), "--out", str(out), "--filter", "batch=7")
    assert result.exit_code == 2, result.output
    assert "nothing to time" in result.output and "batch=7" in result.output and "none of its 2" in result.output
    assert not out.exists() or not any(out.iterdir())


def test_a_view_runs_its_cases_records_its_filters_and_resumes(two, tmp_path):
    """--view NAME is the config's named filter list: the run file records the filters, --resume
    takes the same view, and an unknown view is a usage error naming the config's views."""
    two.write_text(TWO + "views:\n  multi: [multi_step/]\n")
    out = tmp_path / "view.json"
    first = run(str(two), "--out", str(out), "--view", "multi")
    assert first.exit_code == 0, first.output
    rec = load_run(out)
    assert rec.case_ids() == ["multi_step/distinct/b1/s2/k16/h64/i64/pdl1"]
    assert rec.config["filters"] == ["multi_step/"]
    again = run(str(two), "--resume", str(out), "--view", "multi")
    assert again.exit_code == 0 and "1 case(s) done, 0 to run" in again.output, again.output
    assert run(str(two), "--resume", str(out)).exit_code == 2  # not the same selection
    bad = run(str(two), "--out", str(tmp_path / "x.json"), "--view", "nope")
    assert bad.exit_code == 2 and "view 'nope'" in bad.output and "its views: multi" in bad.output
    listed = CliRunner().invoke(main, ["list", str(two), "--view", "multi"])
    assert listed.exit_code == 0 and "1 case(s)" in listed.output and "lru_sequential/distinct/b1/s2" not in listed.output
    assert "views (--view NAME): multi" in CliRunner().invoke(main, ["list", str(two)]).output


def test_all_pruned_exits_2_and_writes_no_file(tmp_path):
    cfg = tmp_path / "pruned.yaml"
    cfg.write_text(TWO.replace("top_k: 16", "top_k: 128"))  # top_k > hot_buffer_size: every case pruned
    out = tmp_path / "runs"
    result = run(str(cfg), "--out", str(out))
    assert result.exit_code == 2, result.output
    assert "nothing to time" in result.output and "all 2 combination(s) are pruned" in result.output
    assert not out.exists() or not any(out.iterdir())


def test_steps_out_of_range_is_a_config_error_naming_the_key(tmp_path):
    cfg = tmp_path / "five.yaml"
    cfg.write_text(TWO.replace("steps: 2", "steps: 5"))
    result = run(str(cfg), "--out", str(tmp_path / "runs"))
    assert result.exit_code == 2, result.output
    assert "axes.steps" in result.output and "[1, 4]" in result.output
    assert not (tmp_path / "runs").exists()


def test_one_line_per_case_when_stdout_is_not_a_terminal(two, tmp_path):
    result = run(str(two), "--out", str(tmp_path / "runs"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("[")]
    assert len(lines) == 2, result.output
    first = re.fullmatch(r"\[1/2\] lru_sequential/distinct/b1/s2/k16/h64/i64/pdl0  [\d,.]+ us/call  "
                         r"\(elapsed \d+:\d\d, ETA \d+:\d\d\)", lines[0])
    last = re.fullmatch(r"\[2/2\] multi_step/distinct/b1/s2/k16/h64/i64/pdl1  [\d,.]+ us/call  "
                        r"\(elapsed \d+:\d\d\)", lines[1])
    assert first and last, lines


def test_a_run_says_its_duration_is_unknown_until_its_cases_were_timed_here(two, tmp_path, monkeypatch):
    """Issue 40: the estimate comes from earlier runs of the same cases on this machine; without them
    it is unknown, and said so (a cost model once said 77 s for 14.5 minutes)."""
    monkeypatch.setattr(session, "LONG_RUN_S", 0.0)  # any run is "long": the message itself
    first = run(str(two), "--out", str(tmp_path / "runs"))
    assert first.exit_code == 0, first.output
    assert re.search(r"note: 2 of 2 case\(s\) were never timed on \S+ \(reference\): the run's duration is unknown",
                     first.output)
    again = run(str(two), "--out", str(tmp_path / "runs" / "again_two.json"))
    assert again.exit_code == 0, again.output
    assert re.search(r"warning: 2 case\(s\) on \S+ \(reference\): expect about \d+:\d\d \(what they took in earlier "
                     r"runs\)", again.output)
    assert "never timed" not in again.output


def test_reference_run_defaults_to_a_git_ignored_folder(monkeypatch, tmp_path):
    if backends.resolve_name("auto") == "cuda":
        pytest.skip("a GPU is visible: auto would pick the cuda backend")
    monkeypatch.setattr(env, "REPO_ROOT", tmp_path)
    result = CliRunner().invoke(main, ["run", "--no-plots", "--filter", "multi_step/distinct/b1/"])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "results" / "local").glob("*.json")
    assert load_run(path).config["name"] == "cpu-small"
    assert not (tmp_path / "results" / "runs").exists()
    assert session.default_out_dir("cuda") == tmp_path / "results" / "runs"


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs the git checkout")
def test_gitignore_hides_local_runs_but_not_the_committed_history():
    def ignored(rel: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", rel], cwd=REPO).returncode == 0

    assert ignored("results/local/20261201-000000_abc_cpu-small.json")
    assert not ignored("results/runs/20261201-000000_abc_default.json")
    # a run's plots are drawn from its file (`hisparse-bench plot`): not committed beside it
    assert ignored("results/runs/20261201-000000_abc_default/latency_vs_batch.png")
    assert not ignored("results/probes/some-probe/figure.png")


def test_reference_table_prints_no_floor_ratios_or_bandwidth(two, tmp_path):
    result = run(str(two), "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("| case"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in result.output.splitlines() if line.startswith("| multi_step/"))
    cells = dict(zip(cols, (c.strip() for c in row.strip("|").split("|"))))
    assert cells["/PCIe floor"] == cells["/gather floor"] == cells["GB/s"] == "-"
    assert cells["speedup vs LRU"].endswith("x")  # a reference-vs-reference ratio still means something
    # the run file keeps the raw numbers: only the display drops them
    assert load_run(tmp_path / "r.json").case("multi_step/distinct/b1/s2/k16/h64/i64/pdl1").derived[
        "over_gather_floor"] > 0


def test_list_without_config_lists_what_run_picks():
    if backends.resolve_name("auto") == "cuda":
        pytest.skip("a GPU is visible: the default config is the full one")
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 0, result.output
    assert "config cpu-small" in result.output and "14 case(s)" in result.output


def test_interrupt_keeps_finished_cases_and_resume_finishes(two, tmp_path, monkeypatch):
    from hisparse.bench import measure

    real = measure.run_case
    calls = []

    def second_interrupts(case, backend, **kw):
        calls.append(case.case_id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(case, backend, **kw)

    real_sweep = measure.run_sweep
    monkeypatch.setattr(measure, "run_sweep", lambda *a, **kw: real_sweep(*a, **{**kw, "run": second_interrupts}))
    out = tmp_path / "run.json"
    two.write_text(TWO + "views:\n  b1: [batch=1, 'distinct/b1/']\n")
    result = run(str(two), "--out", str(out), "--view", "b1")
    assert result.exit_code == 130, result.output
    # the whole command, with the view's filters written out: --resume wants the same selection
    command = f"hisparse-bench run {two} --resume {out} --filter batch=1 --filter distinct/b1/ --backend reference"
    assert "continue with:\n  " + command in result.output
    assert load_run(out).case_ids() == ["lru_sequential/distinct/b1/s2/k16/h64/i64/pdl0"]
    assert load_run(out).finished is None

    monkeypatch.setattr(measure, "run_sweep", real_sweep)
    resumed = CliRunner().invoke(main, command.split()[1:] + ["--no-plots"])  # what the message said
    assert resumed.exit_code == 0, resumed.output
    assert "1 case(s) done, 1 to run" in resumed.output
    assert len(load_run(out).cases) == 2 and load_run(out).finished is not None
