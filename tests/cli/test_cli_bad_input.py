"""Bad input through the commands (issue 40). A run file the reader refuses stops compare, gate,
plot and retime with exit 2 and the file named, and the dashboard skips it and builds the rest; a
bad output path or config is exit 2 with the path and the way out, never a traceback or the exit
code of a failed case; no command replaces a file it did not make without --force. Each bad input
is tried next to a planted control."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from _regression_data import T0, fake_commit, make_run, write_run
from hisparse.cli import main
from _tiny_config import tiny_config

GOLDEN_V2 = Path(__file__).resolve().parents[1] / "data" / "results_v2.json"

TWO = tiny_config("two")


def cli(*args):
    return CliRunner().invoke(main, list(args), env={"BASELINE": "", "HISPARSE_INJECT_SLOWDOWN": "",
                                                     "HISPARSE_NIGHTLY_MIN_EFFECT": ""})


def _golden(tmp_path, name="good.json", edit=None) -> str:
    data = json.loads(GOLDEN_V2.read_text())
    if edit:
        edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def _negative(data):
    data["cases"][1]["runs"][0]["samples_us"][0] = -200.0


def _nan(data):
    data["cases"][1]["runs"][0]["samples_us"][0] = float("nan")


def _duplicate(data):
    data["cases"].append(dict(data["cases"][0]))


def _usage_error(result, *named):
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception  # no traceback
    for text in named:
        assert text in result.output, (text, result.output)


@pytest.mark.parametrize("edit, shown", [(_negative, "-200.0"), (_nan, "nan"), (_duplicate, "appears twice")])
def test_every_reading_command_refuses_an_impossible_run_file(tmp_path, edit, shown):
    good, other = _golden(tmp_path), _golden(tmp_path, "other.json")
    bad = _golden(tmp_path, "bad.json", edit)
    control = cli("compare", good, other)  # planted control: two good files compare
    assert control.exit_code == 0, control.output

    _usage_error(cli("compare", good, bad), bad, shown)
    _usage_error(cli("gate", "--base", good, "--head", bad), bad, shown)
    _usage_error(cli("plot", bad, "--out", str(tmp_path / "figs")), bad, shown)
    _usage_error(cli("retime", bad, "--backend", "reference"), bad, shown)
    assert not (tmp_path / "figs").exists()


def test_the_dashboard_skips_a_bad_file_with_its_reason_and_builds_the_rest(tmp_path):
    results = tmp_path / "results"
    for i in range(3):
        write_run(results, make_run(fake_commit(i), T0.replace(day=i + 1), {"multi_step": 100.0,
                                                                            "lru_sequential": 300.0}))
    bad = make_run(fake_commit(9), T0.replace(day=9), {"multi_step": 100.0, "lru_sequential": 300.0})
    bad["cases"][0]["samples_us"][0] = -12.25
    bad_path = write_run(results, bad)
    out = tmp_path / "site"
    r = cli("dashboard", "--results", str(results), "--out", str(out), "--no-plots")
    assert r.exit_code == 0, r.output
    assert f"skipped {bad_path}" in r.output and "-12.25 is not allowed" in r.output
    index = (out / "index.html").read_text()
    assert "3 commit(s)" in index and "-12.25" in index  # the reason is on the page; the number is not data
    assert "latest median -12.25" not in index


def test_plot_and_dashboard_keep_files_they_did_not_make(tmp_path):
    good = _golden(tmp_path)
    figs = tmp_path / "figs"
    figs.mkdir()
    (figs / "mine.png").write_bytes(b"\x89PNG mine")
    _usage_error(cli("plot", good, "--out", str(figs)), str(figs), "mine.png", "--force")
    assert (figs / "mine.png").read_bytes() == b"\x89PNG mine"
    control = cli("plot", good, "--out", str(tmp_path / "fresh"))  # a new folder is drawn into
    assert control.exit_code == 0 and "refusing" not in control.output, control.output

    results = tmp_path / "results"
    write_run(results, make_run(fake_commit(0), T0, {"multi_step": 100.0, "lru_sequential": 300.0}))
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("my page")
    _usage_error(cli("dashboard", "--results", str(results), "--out", str(site), "--no-plots"), "index.html", "--force")
    assert (site / "index.html").read_text() == "my page"
    _usage_error(cli("dashboard", "--results", str(results), "--out", str(results), "--no-plots"),
                 "holds the results it reads")
    forced = cli("dashboard", "--results", str(results), "--out", str(site), "--no-plots", "--force")
    assert forced.exit_code == 0 and (site / "index.html").read_text() != "my page"


@pytest.mark.parametrize("where", ["a directory", "a device", "under a file"])
def test_bad_output_paths_are_usage_errors(tmp_path, where):
    good, other = _golden(tmp_path), _golden(tmp_path, "other.json")
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    target = {"a directory": str(tmp_path), "a device": "/dev/null", "under a file": str(a_file / "g.json")}[where]
    ok = cli("gate", "--base", good, "--head", other, "--json", str(tmp_path / "g.json"))  # control
    assert ok.exit_code == 0, ok.output
    _usage_error(cli("gate", "--base", good, "--head", other, "--json", target, "--force"), target)
    _usage_error(cli("check", "--backend", "reference", "--json", target, "--force", "--steps", "2"), target)
    _usage_error(cli("plot", good, "--out", str(a_file / "figs")), str(a_file))
    assert a_file.read_text() == "x"


def test_bad_configs_are_usage_errors_naming_the_file_and_key(tmp_path, two):
    control = cli("list", str(two))
    assert control.exit_code == 0, control.output
    nan = tmp_path / "nan.yaml"
    nan.write_text(TWO.replace("hot_buffer_size: 64", "hot_buffer_size: 64\n  workload_params: {miss_rate: .nan}"))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)))
    for cfg, named in ((nan, "miss_rate: nan is not allowed"), (binary, "not a text file")):
        for command in (["list", str(cfg)], ["run", str(cfg), "--backend", "reference", "--out", str(tmp_path / "o")]):
            _usage_error(cli(*command), str(cfg), named)
    assert not (tmp_path / "o").exists()


def test_run_into_a_bad_folder_is_a_usage_error_before_any_case(tmp_path, two):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    r = cli("run", str(two), "--backend", "reference", "--no-plots", "--out", str(a_file / "runs"))
    _usage_error(r, str(a_file), "is a file, not a folder")
    assert "[1/" not in r.output  # refused before the first case


def test_run_skips_plots_over_pngs_it_did_not_make(tmp_path, two):
    out = tmp_path / "r.json"
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "mine.png").write_bytes(b"mine")
    r = CliRunner().invoke(main, ["run", str(two), "--backend", "reference", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "plots skipped" in r.output and "mine.png" in r.output
    assert (tmp_path / "r" / "mine.png").read_bytes() == b"mine" and out.is_file()
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["mine.png"]


def test_check_json_is_kept_without_force(tmp_path):
    out = tmp_path / "check.json"
    out.write_text('{"mine": true}')
    r = cli("check", "--backend", "reference", "--json", str(out), "--steps", "2")
    _usage_error(r, str(out), "--resume", "--force")
    assert out.read_text() == '{"mine": true}'


def test_two_runs_never_share_a_run_file(tmp_path, two, monkeypatch):
    """The "exists?" check and the write were two steps: two runs started together once both passed
    it. Here the second arrives between the check and the claim; it must lose, and the file is the first's."""
    from hisparse.bench import session

    out = tmp_path / "r.json"
    real = session.refuse_overwrite
    calls = []

    def racing(path):
        real(path)
        if not calls:
            calls.append(path)
            first = cli("run", str(two), "--backend", "reference", "--no-plots", "--out", str(out), "--filter",
                        "multi_step")
            assert first.exit_code == 0, first.output

    monkeypatch.setattr(session, "refuse_overwrite", racing)
    second = cli("run", str(two), "--backend", "reference", "--no-plots", "--out", str(out))
    _usage_error(second, str(out), "refusing to overwrite")
    from hisparse.results.model import load_run

    assert load_run(out).case_ids() == ["multi_step/distinct/b1/s2/k16/h64/i64/pdl1"]
    shutil.rmtree(tmp_path / "r", ignore_errors=True)
