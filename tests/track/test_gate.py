"""`hisparse-bench gate` (hisparse/track/gate.py) on synthetic run files: baseline choice, history noise,
the exit codes of the confirm protocol, incomparable runs; then ci/nightly.sh end to end on the CPU
reference backend with a tiny config: exit 0 with no baseline, exit 0 on a re-run of the same commit,
exit 1 on an injected slowdown (HISPARSE_INJECT_SLOWDOWN, the test hook of the gate), and the asv results
and dashboard written each time."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hisparse.cli import main
from hisparse.results.model import CaseResult, RunRecord, write_run
from hisparse.stats import summary
from hisparse.track import gate as g

REPO = Path(__file__).resolve().parents[2]
MACHINE = "cpu-nightly-test"


# ------------------------------------------------------------------ the gate on synthetic run files


def _samples(level, noise=0.001, n=10, seed=0):
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for _ in range(n)]


def _run_file(root, name, commit, levels, *, created, backend="cuda", config="ci", machine="h200", seed=0,
              failed=(), gather_floor=None):
    floor = {"gather_floor_us": gather_floor} if gather_floor else None  # every case's bare gather, in us
    cases = [CaseResult(case_id=cid, params={"implementation": "multi_step"}, status="ok",
                        samples_us=tuple(s), stats=summary(s).to_dict(), floor=floor)
             for i, (cid, level) in enumerate(levels.items()) if cid not in failed
             for s in [_samples(level, seed=seed * 100 + i)]]
    cases += [CaseResult.failed(cid, {"implementation": "multi_step"}, "invariant 1 failed") for cid in failed]
    rec = RunRecord(run_id=name, created=created, finished=created, backend=backend,
                    config={"name": config, "hash": "h"},
                    environment={"machine": machine, "gpu": "NVIDIA H200" if backend == "cuda" else None,
                                 "git_commit": commit}, floors={}, cases=tuple(cases))
    return str(write_run(rec, Path(root) / "runs" / f"{name}.json"))


LEVELS = {"a": 100.0, "b": 50.0}


def _gate(*args, **env):
    return CliRunner().invoke(main, ["gate", *args], env={"BASELINE": "", "HISPARSE_INJECT_SLOWDOWN": "",
                                                          "HISPARSE_NIGHTLY_MIN_EFFECT": "", **env})


def test_baseline_is_the_latest_run_of_the_series_at_another_commit(tmp_path):
    old = _run_file(tmp_path, "r1", "aaaa1111", LEVELS, created="2026-11-01T00:00:00Z")
    new = _run_file(tmp_path, "r2", "bbbb2222", LEVELS, created="2026-11-02T00:00:00Z")
    _run_file(tmp_path, "r3", "cccc3333", LEVELS, created="2026-11-03T00:00:00Z", backend="reference")  # other series
    _run_file(tmp_path, "r4", "dddd4444", LEVELS, created="2026-11-04T00:00:00Z", config="default")  # other series
    head = _run_file(tmp_path, "r5", "eeee5555", LEVELS, created="2026-11-05T00:00:00Z")
    (tmp_path / "runs" / "torn.json").write_text("{")  # not a run file: ignored
    r = _gate("baseline", "--results", str(tmp_path), "--head", head)
    assert r.exit_code == 0 and r.output.strip() == new
    assert _gate("baseline", "--results", str(tmp_path), "--head", head, BASELINE="aaaa").output.strip() == old
    assert _gate("baseline", "--results", str(tmp_path), "--head", head, BASELINE=old).output.strip() == old
    bad = _gate("baseline", "--results", str(tmp_path), "--head", head, BASELINE="not-a-commit")
    assert bad.exit_code == 2 and "BASELINE='not-a-commit': neither a run file nor a commit hash" in bad.output
    none = _gate("baseline", "--results", str(tmp_path), "--head", head, BASELINE="ffff")
    assert none.exit_code == 2 and "BASELINE=ffff: no finished run of that commit for h200" in none.output


def test_first_night_has_no_baseline(tmp_path):
    head = _run_file(tmp_path, "r1", "aaaa1111", LEVELS, created="2026-11-01T00:00:00Z")
    r = _gate("baseline", "--results", str(tmp_path), "--head", head)
    assert r.exit_code == 0 and r.output == ""


def test_history_noise_is_the_series_noise_of_earlier_runs(tmp_path):
    medians = [100.0, 101.0, 100.0, 101.0]  # successive |diff| 1 -> 1 / (0.6745 sqrt 2) / 100.5
    for i, m in enumerate(medians):
        _run_file(tmp_path, f"r{i}", f"{i:04d}aaaa", {"a": m}, created=f"2026-11-0{i + 1}T00:00:00Z")
    _run_file(tmp_path, "other", "9999aaaa", {"a": 500.0}, created="2026-11-09T00:00:00Z", machine="elsewhere")
    head = g.read(_run_file(tmp_path, "head", "eeee5555", {"a": 100.0}, created="2026-11-08T00:00:00Z"))
    noise = g.history_noise(tmp_path, head, {head.path.resolve()})
    # _samples adds 0.1% noise around each level: the medians sit within 0.05% of the levels
    assert noise["a"] == pytest.approx(1 / (0.6745 * 2 ** 0.5) / 100.5, rel=0.15)
    assert g.history_noise(None, head, set()) == {}


def test_gate_exit_codes_follow_the_confirm_protocol(tmp_path):
    base = _run_file(tmp_path, "base", "aaaa1111", LEVELS, created="2026-11-01T00:00:00Z", seed=1)
    slow = _run_file(tmp_path, "head", "bbbb2222", {"a": 110.0, "b": 50.0}, created="2026-11-02T00:00:00Z", seed=2)
    slow2 = _run_file(tmp_path, "head2", "bbbb2222", {"a": 110.0, "b": 50.0}, created="2026-11-02T01:00:00Z", seed=3)
    fine = _run_file(tmp_path, "head3", "bbbb2222", LEVELS, created="2026-11-02T02:00:00Z", seed=4)
    first = _gate("--base", base, "--head", slow)
    assert first.exit_code == 4, first.output
    assert "suspect      a: 100.0 -> 110.0 us" in first.output and "1 case(s) failed the gate once" in first.output
    out = tmp_path / "gate.json"
    confirmed = _gate("--base", base, "--head", slow, "--confirm", slow2, "--json", str(out))
    assert confirmed.exit_code == 1 and "CONFIRMED regression in 1 case(s)" in confirmed.output
    report = json.loads(out.read_text())
    assert [d["status"] for d in report["decisions"]] == ["confirmed", "pass"]
    assert report["decisions"][0]["second"]["status"] == "regressed"
    assert report["policy"]["min_effect"] == 0.005
    unconfirmed = _gate("--base", base, "--head", slow, "--confirm", fine)
    assert unconfirmed.exit_code == 0 and "unconfirmed  a:" in unconfirmed.output
    same = _gate("--base", base, "--head", fine)
    assert same.exit_code == 0 and "pass: 2 case(s) compared" in same.output


def test_gate_test_hook_and_min_effect_override(tmp_path):
    base = _run_file(tmp_path, "base", "aaaa1111", LEVELS, created="2026-11-01T00:00:00Z", seed=1)
    head = _run_file(tmp_path, "head", "bbbb2222", LEVELS, created="2026-11-02T00:00:00Z", seed=2)
    hooked = _gate("--base", base, "--head", head, HISPARSE_INJECT_SLOWDOWN="0.10")
    assert hooked.exit_code == 4 and "*** TEST HOOK: HISPARSE_INJECT_SLOWDOWN=0.1: head samples x 1.100 ***" in hooked.output
    assert "2 case(s) failed the gate once" in hooked.output
    # a 20% floor lets the 10% injection pass
    high = _gate("--base", base, "--head", head, HISPARSE_INJECT_SLOWDOWN="0.10", HISPARSE_NIGHTLY_MIN_EFFECT="0.2")
    assert high.exit_code == 0
    bad = _gate("--base", base, "--head", head, HISPARSE_NIGHTLY_MIN_EFFECT="half")
    assert bad.exit_code == 2 and "HISPARSE_NIGHTLY_MIN_EFFECT='half': expected a number" in bad.output


def test_gate_refuses_incomparable_runs_and_no_common_case(tmp_path):
    base = _run_file(tmp_path, "base", "aaaa1111", LEVELS, created="2026-11-01T00:00:00Z")
    ref = _run_file(tmp_path, "ref", "bbbb2222", {"a": 29000.0, "b": 14500.0}, created="2026-11-02T00:00:00Z",
                    backend="reference")
    r = _gate("--base", base, "--head", ref)
    assert r.exit_code == 2 and "incomparable runs: backend: 'cuda' != 'reference'" in r.output
    assert _gate("--base", base, "--head", ref, "--allow-incomparable").exit_code == 4
    other = _run_file(tmp_path, "other", "cccc3333", {"z": 1.0}, created="2026-11-03T00:00:00Z")
    r = _gate("--base", base, "--head", other)
    assert r.exit_code == 2 and "no common cases: base.json and other.json share no case id" in r.output
    assert _gate().exit_code == 2


def test_gate_warns_when_the_head_node_gathers_slower_and_writes_it_to_the_gate_file(tmp_path):
    base = _run_file(tmp_path, "base", "aaaa1111", LEVELS, created="2026-11-01T00:00:00Z", seed=1, gather_floor=10.0)
    slow_node = _run_file(tmp_path, "head", "bbbb2222", {"a": 140.0, "b": 70.0}, created="2026-11-02T00:00:00Z",
                          seed=2, gather_floor=14.0)
    out = tmp_path / "gate.json"
    r = _gate("--base", base, "--head", slow_node, "--json", str(out))
    line = ("warning: the bare gather floor takes 1.40x the base's time in the head (geometric mean over 2 "
            "case(s)): the nodes, the cases' rows or the floor's own code differ")
    assert r.exit_code == 4 and line in r.output  # a warning, not a verdict: the cases are still suspect
    # each suspect case's line says its own floor moved too (14 / 10 us)
    suspects = [ln for ln in r.output.splitlines() if ln.startswith("suspect")]
    assert len(suspects) == 2 and all("its gather floor moved 1.40x between base and head" in ln for ln in suspects)
    assert json.loads(out.read_text())["warnings"] == [line.removeprefix("warning: ") + (
        ", so each case's change mixes that with the kernels'; compare each case against its floor "
        "(`/ gather floor`), or runs of one node")]
    same_node = _run_file(tmp_path, "head2", "bbbb2222", LEVELS, created="2026-11-02T01:00:00Z", seed=3,
                          gather_floor=10.1)
    out2 = tmp_path / "gate2.json"
    r = _gate("--base", base, "--head", same_node, "--json", str(out2))
    assert r.exit_code == 0 and "warning" not in r.output and json.loads(out2.read_text())["warnings"] == []


def test_gate_lists_newly_failed_cases(tmp_path):
    base = _run_file(tmp_path, "base", "aaaa1111", LEVELS, created="2026-11-01T00:00:00Z", seed=1)
    head = _run_file(tmp_path, "head", "bbbb2222", LEVELS, created="2026-11-02T00:00:00Z", seed=2, failed=("b",))
    r = _gate("--base", base, "--head", head)
    assert r.exit_code == 0 and "newly failed b" in r.output and "pass: 1 case(s) compared" in r.output


# Two cases, ~20 samples each of 5 calls: a few seconds per run on the reference backend.
TINY = """\
name: nightly-tiny
track: false
seed: 0
axes:
  implementation: [lru_sequential, multi_step]
  workload: distinct
  batch: 2
  steps: 2
  top_k: 16
  hot_buffer_size: 64
  item_size_bytes: 64
  pdl: on
workloads:
  distinct: {}
timing: {warmup_calls: 2, calls_per_graph: 5, replays: 20, l2_flush: false, check_calls: 1}
"""

nightly_script = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="bash script")]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    pytest.importorskip("hisparse.bench.workload", reason="the engine's workload module is not in this tree yet")
    tmp = tmp_path_factory.mktemp("nightly")
    config = tmp / "tiny.yaml"
    config.write_text(TINY)
    return tmp, {
        **os.environ,
        "HISPARSE_PYTHON": sys.executable,
        "HISPARSE_NIGHTLY_CONFIG": str(config),
        "HISPARSE_BACKEND": "reference",
        "HISPARSE_MACHINE": MACHINE,
        "HISPARSE_RESULTS": str(tmp / "results"),
        "HISPARSE_SITE": str(tmp / "site"),
        # PyTorch-on-CPU timings on a shared, loaded 2-core machine moved by up to 2x between
        # back-to-back runs while this test was written. The test checks the pipeline and its exit
        # codes, not the gate's sensitivity (tests/test_changepoint.py and scripts/detector_power.py
        # do; on the H200 a 10% injection was confirmed, docs/regression.md). So only a 3x change may
        # fail it here, and the injected one is 20x. GPU nights use the 0.5% default floor.
        "HISPARSE_NIGHTLY_MIN_EFFECT": "2.0",
        "MPLBACKEND": "Agg",
    }


def nightly(env: dict, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "ci" / "nightly.sh")], env={**env, **extra}, cwd=REPO,
                          capture_output=True, text=True, timeout=600)


@nightly_script[0]
@nightly_script[1]
def test_nightly_first_rerun_and_injected(env):
    tmp, e = env
    first = nightly(e)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-4000:]
    assert "no baseline" in out
    runs = sorted((tmp / "results" / "runs").glob("*.json"))
    assert len(runs) == 1
    run = json.loads(runs[0].read_text())
    assert run["backend"] == "reference" and run["environment"]["machine"] == MACHINE
    assert all(c["status"] == "ok" for c in run["cases"]), [c.get("reason") for c in run["cases"]]
    assert (tmp / "site" / "index.html").is_file()
    assert list((tmp / "results" / "asv" / MACHINE).glob("*-existing-*.json"))

    # A re-run of the same commit against it: no confirmed regression.
    again = nightly(e, BASELINE=str(runs[0]))
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "CONFIRMED" not in out

    # The same with the test hook: every head sample x 20 -> confirmed regression, exit 1.
    injected = nightly(e, BASELINE=str(runs[0]), HISPARSE_INJECT_SLOWDOWN="19")
    out = injected.stdout + injected.stderr
    assert injected.returncode == 1, out[-4000:]
    assert "TEST HOOK" in out and "re-running the regression set to confirm" in out
    assert "CONFIRMED regression in 2 case(s)" in out
    gates = sorted((tmp / "results" / "gates").glob("*.gate.json"))
    last = json.loads(gates[-1].read_text())
    assert last["inject_slowdown"] == 19.0
    assert {d["status"] for d in last["decisions"]} == {"confirmed"}
    # recorded files are untouched by the hook: the dashboard shows no 20x step
    assert "regression(s)" not in (tmp / "site" / "index.html").read_text()
