"""gate and compare judge only what is comparable (issue 40): cases missing from either side are
reported, a head without some base cases fails the gate (exit 3) unless --allow-missing, a --confirm
run must re-run the head's config on its machine and backend, and --json never replaces an input
or an existing file without --force. Each bad input sits next to a planted control."""
from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from hisparse.cli import main
from hisparse.results.model import CaseResult, Run, RunRecord, write_run

LEVELS = {f"case{i:02d}": 100.0 + i for i in range(14)}


def _samples(level, seed):
    rng = random.Random(seed)
    return tuple(level * (1 + rng.gauss(0, 0.001)) for _ in range(10))


def _run_file(root, name, levels, *, seed=0, config="ci", config_hash="h", machine="h200", commit="aaaa1111"):
    cases = tuple(CaseResult(case_id=cid, params={"implementation": "multi_step"}, status="ok",
                             runs=(Run(0, 0, _samples(level, seed * 100 + i)),))
                  for i, (cid, level) in enumerate(levels.items()))
    rec = RunRecord(run_id=name, created="2026-11-01T00:00:00Z", finished="2026-11-01T00:05:00Z", backend="cuda",
                    config={"name": config, "hash": config_hash},
                    environment={"machine": machine, "gpu": "NVIDIA H200", "git_commit": commit}, floors={},
                    cases=cases)
    return str(write_run(rec, Path(root) / f"{name}.json"))


def _cli(*args):
    return CliRunner().invoke(main, list(args), env={"BASELINE": "", "HISPARSE_INJECT_SLOWDOWN": "",
                                                     "HISPARSE_NIGHTLY_MIN_EFFECT": ""})


def test_a_head_cut_short_fails_the_gate_and_names_the_missing_cases(tmp_path):
    base = _run_file(tmp_path, "base", LEVELS, seed=1)
    whole = _run_file(tmp_path, "whole", LEVELS, seed=2, commit="bbbb2222")
    cut = _run_file(tmp_path, "cut", dict(list(LEVELS.items())[:5]), seed=2, commit="bbbb2222")

    control = _cli("gate", "--base", base, "--head", whole)
    assert control.exit_code == 0 and "pass: 14 case(s) compared" in control.output, control.output

    r = _cli("gate", "--base", base, "--head", cut)
    assert r.exit_code == 3, r.output
    assert "missing in head: 9 case(s) not gated: case05, case06" in r.output
    assert "INCOMPLETE head: 9 case(s)" in r.output and "--allow-missing" in r.output
    allowed = _cli("gate", "--base", base, "--head", cut, "--allow-missing")
    assert allowed.exit_code == 0 and "missing in head: 9 case(s)" in allowed.output

    grown = _cli("gate", "--base", cut, "--head", whole)  # new head cases are named, not failed
    assert grown.exit_code == 0 and "new in head: 9 case(s) not gated" in grown.output

    compared = _cli("compare", base, cut)
    assert compared.exit_code == 0 and "9 case(s) only in A" in compared.output
    assert "only in A (missing in B): case05, case06" in compared.output


def test_confirm_must_rerun_the_heads_config_on_its_machine_and_backend(tmp_path):
    base = _run_file(tmp_path, "base", LEVELS, seed=1)
    slow = {k: v * 2 for k, v in LEVELS.items()}
    head = _run_file(tmp_path, "head", slow, seed=2, commit="bbbb2222")
    rerun = _run_file(tmp_path, "rerun", slow, seed=3, commit="bbbb2222")
    other_config = _run_file(tmp_path, "other", LEVELS, seed=3, config="default", config_hash="d", commit="bbbb2222")
    other_machine = _run_file(tmp_path, "elsewhere", LEVELS, seed=3, machine="h100", commit="bbbb2222")

    control = _cli("gate", "--base", base, "--head", head, "--confirm", rerun)
    assert control.exit_code == 1 and "CONFIRMED regression in 14 case(s)" in control.output, control.output

    for bad, what in ((other_config, "config name: head 'ci', confirm 'default'"),
                      (other_machine, "machine: head 'h200', confirm 'h100'")):
        r = _cli("gate", "--base", base, "--head", head, "--confirm", bad)
        assert r.exit_code == 2, r.output
        assert f"--confirm {bad}: not a re-run of the head" in r.output and what in r.output


def test_gate_json_keeps_inputs_and_existing_files(tmp_path):
    base = _run_file(tmp_path, "base", LEVELS, seed=1)
    head = _run_file(tmp_path, "head", LEVELS, seed=2, commit="bbbb2222")
    head_bytes = Path(head).read_bytes()
    out = tmp_path / "gate.json"

    control = _cli("gate", "--base", base, "--head", head, "--json", str(out))
    assert control.exit_code == 0 and json.loads(out.read_text())["missing_in_head"] == []

    again = _cli("gate", "--base", base, "--head", head, "--json", str(out))
    assert again.exit_code == 2 and f"--json {out} already exists" in again.output and "--force" in again.output
    assert _cli("gate", "--base", base, "--head", head, "--json", str(out), "--force").exit_code == 0

    for target in (head, str(tmp_path / "." / "head.json")):
        r = _cli("gate", "--base", base, "--head", head, "--json", target, "--force")
        assert r.exit_code == 2 and "is also an input of this command" in r.output, r.output
    assert Path(head).read_bytes() == head_bytes


def test_a_machine_name_never_leads_asv_results_out_of_results(tmp_path):
    results = tmp_path / "deep" / "results"
    good = _run_file(tmp_path, "good", LEVELS, machine="h200", commit="aaaa1111")
    bad = _run_file(tmp_path, "bad", LEVELS, machine="../../escape", commit="bbbb2222")
    r = _cli("gate", "asv", "--results", str(results), "--repo", str(tmp_path), good, bad)
    assert r.exit_code == 0, r.output
    assert (results / "asv" / "h200" / "machine.json").is_file()  # control
    assert (results / "asv" / "escape" / "machine.json").is_file()
    written = {p.resolve() for p in tmp_path.rglob("*") if p.is_file()} - {Path(good).resolve(), Path(bad).resolve()}
    assert written and all(p.is_relative_to(results.resolve()) for p in written)
