"""Interruptions end as interruptions (issue 40): SIGTERM stops `run` as SIGINT does (finished cases
kept, the resume command printed) with exit 143; `check` and `retime` cut by SIGINT print how to go
on and exit 130, not their "failed" 1; a cut retime says in the file which cases it did not re-time.
Each cut is set against its control: the same command left to finish."""
from __future__ import annotations

import os
import signal

import pytest
from click.testing import CliRunner

from hisparse.bench import measure, retime as repeat, stress
from hisparse.cli import main
from hisparse.results.model import load_run
from _tiny_config import tiny_config

THREE = tiny_config("three", batch="[1, 2]")


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(THREE)
    return path


def _cut_at(monkeypatch, owner, name, n, cut):
    """``owner.name`` runs normally n times, then ``cut()`` is called in its place."""
    real, calls = getattr(owner, name), []

    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) > n:
            cut()
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapped)


def _run(cfg, out):
    return CliRunner().invoke(main, ["run", str(cfg), "--backend", "reference", "--no-plots", "--out", str(out)])


def test_sigterm_keeps_finished_cases_prints_the_resume_command_and_exits_143(tmp_path, cfg, monkeypatch):
    whole = _run(cfg, tmp_path / "whole.json")  # control
    assert whole.exit_code == 0 and len(load_run(tmp_path / "whole.json").cases) == 4, whole.output

    before = signal.getsignal(signal.SIGTERM)
    _cut_at(monkeypatch, measure, "run_case", 2, lambda: os.kill(os.getpid(), signal.SIGTERM))
    out = tmp_path / "cut.json"
    r = _run(cfg, out)
    assert r.exit_code == 143, r.output
    assert "Terminated (SIGTERM)" in r.output and f"--resume {out}" in r.output
    assert len(load_run(out).cases) == 2 and load_run(out).finished is None
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the run's only while it runs


def test_a_cut_retime_exits_130_and_marks_the_cases_it_did_not_retime(tmp_path, cfg, monkeypatch):
    out = tmp_path / "r.json"
    assert _run(cfg, out).exit_code == 0
    control = CliRunner().invoke(main, ["retime", str(out), "--backend", "reference"])
    assert control.exit_code == 0, control.output
    assert all(c.processes == 2 and not c.retime_errors for c in load_run(out).cases)

    def interrupt():
        raise KeyboardInterrupt

    _cut_at(monkeypatch, repeat, "retime_case", 1, interrupt)
    r = CliRunner().invoke(main, ["retime", str(out), "--backend", "reference"])
    assert r.exit_code == 130, r.output
    assert "1 of 4 case(s) got this process's rounds" in r.output and f"hisparse-bench retime {out}" in r.output
    cases = load_run(out).cases
    assert [c.processes for c in cases] == [3, 2, 2, 2]
    assert [c.retime_errors for c in cases] == [()] + [(repeat.INTERRUPTED,)] * 3


def test_a_cut_check_exits_130_with_its_resume_command(tmp_path, monkeypatch):
    args = ["check", "--backend", "reference", "-i", "multi_step", "--steps", "2", "--hot", "64", "--item", "64",
            "--layout", "dense", "--top-k", "16", "--batch", "1"]
    control = CliRunner().invoke(main, args)
    assert control.exit_code == 0, control.output

    real = stress.run_all

    def cut(names, cases, backend, progress, report):
        real(names, cases[:1], backend, progress=progress, report=report)
        raise KeyboardInterrupt

    monkeypatch.setattr(stress, "run_all", cut)
    out = tmp_path / "check.json"
    r = CliRunner().invoke(main, [*args, "--json", str(out)])
    assert r.exit_code == 130, r.output
    assert "Interrupted after 1 cell(s)" in r.output
    assert f"--json {out} --resume" in r.output and "--top-k 16" in r.output and "-i multi_step" in r.output
    assert out.is_file()
