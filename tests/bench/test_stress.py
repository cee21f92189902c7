"""Stress sequences (hisparse/bench/stress.py) and `hisparse-bench check`, on the reference backend."""
from __future__ import annotations

from dataclasses import replace

import torch
from click.testing import CliRunner

from hisparse.bench import stress
from hisparse.bench.backends import get_backend
from hisparse.cli import main
from hisparse.kernels.reference.bytes import as_rows

REF = get_backend("reference")
TINY = stress.StressCase(4, 384, 584, "aligned16", top_k=128, batch=1)  # scratch capacity = T: no "between"


def test_matrix_is_the_issues():
    cases = stress.default_cases()
    assert len(cases) == 2 * 3 * 4 * 2
    assert {(c.steps, c.hot_buffer_size, c.item_size_bytes, c.layout) for c in cases} == {
        (s, h, i, lay) for s in (2, 4) for h in (4096, 6144, 32768) for i in (576, 656, 584, 100)
        for lay in ("dense", "aligned16")}


def test_aligned_rows_round_the_stride_up_to_16_bytes():
    assert [stress.StressCase(2, 4096, i, "aligned16").row_bytes for i in (576, 656, 584, 100)] == [576, 656, 592, 112]
    assert [stress.StressCase(2, 4096, i).row_bytes for i in (576, 656, 584, 100)] == [576, 656, 584, 100]


def test_unique_misses_fall_between_scratch_and_hot_and_above():
    # s4/h6144/k2048: T = 8192, scratch = max(1024, 8192 - 6144) = 2048
    c = stress.StressCase(4, 6144, 576)
    assert c.scratch_capacity == 2048
    assert stress.unique_misses(c, "between") == 4096 and stress.unique_misses(c, "above") == 7168
    # s2/h4096: T = 4096 = HOT, scratch 1024: between exists, above does not
    c2 = stress.StressCase(2, 4096, 576)
    assert stress.unique_misses(c2, "between") == 2560 and stress.unique_misses(c2, "above") is None
    # s4/h4096: scratch = T - HOT = 4096 = HOT: nothing lies between
    assert stress.unique_misses(stress.StressCase(4, 4096, 576), "between") is None


def test_call_sequence_has_the_promised_shapes():
    case = stress.StressCase(4, 6144, 576, batch=1)
    kinds, tokens, span = stress.call_sequence(case)
    assert kinds == list(stress.SEQUENCE)
    seen = set(range(6144))
    prev_last = None
    for kind, top in zip(kinds, tokens[:, 0]):
        flat = set(top.reshape(-1).tolist())
        assert all(len(set(step.tolist())) == 2048 for step in top)  # each step's entries distinct
        fresh = flat - seen
        if kind in ("flood", "between", "above"):
            assert fresh == flat  # every entry misses
            assert len(flat) == {"flood": 8192, "between": 4096, "above": 7168}[kind]
        elif kind == "reref":
            assert not fresh and flat - set(range(6144))  # only seen tokens, not only the initial ones
        else:  # mix: half of each step from the previous call's last step, the other half fresh
            for step in top:
                assert len(set(step.tolist()) & prev_last) == 1024 and len(set(step.tolist()) - seen) == 1024
        seen |= flat
        prev_last = set(top[-1].tolist())
    assert span > max(seen)


def test_small_subset_passes_on_the_reference():
    """Real geometry (top_k 2048, hot 4096, 100 B dense rows) and a small one with overflow."""
    cases = [stress.StressCase(2, 4096, 100, "dense", batch=1), TINY]
    report = stress.run_all(("multi_step", "multi_step_planned"), cases, REF)
    assert [r.status for r in report.results] == ["pass"] * 4, report.table()
    assert report.results[0].kinds == ("flood", "reref", "mix", "between", "reref", "flood", "mix")
    assert "above" in report.results[1].kinds and not report.failed


def _corrupting_backend(bad_call: int):
    """The reference, except that call ``bad_call`` leaves one returned row with a wrong byte."""
    calls = {"n": 0}
    ref = REF.swap_multi_step

    def swap_multi_step(**kw):
        ref(**kw)
        if calls["n"] == bad_call:
            row = int(kw["top_k_device_locs"][0, 0, 0])
            as_rows(kw["device_buffer"], kw["item_size_bytes"])[row, 0] ^= 0xFF
        calls["n"] += 1

    return replace(REF, swap_multi_step=swap_multi_step)


def test_a_wrong_row_fails_at_its_call_with_the_invariant():
    result = stress.run_stress("multi_step", TINY, _corrupting_backend(2))
    assert result.status == "fail" and result.calls == 2
    assert result.failure.startswith("call 2 (mix): invariant 1 failed for request 0")


def test_an_exception_is_the_calls_failure():
    def broken(**kw):
        raise RuntimeError("CUDA error: misaligned address")

    result = stress.run_stress("multi_step", TINY, replace(REF, swap_multi_step=broken))
    assert (result.status, result.calls) == ("fail", 0)
    assert result.failure == "call 0 (flood): RuntimeError: CUDA error: misaligned address"


def test_sglang_and_out_of_contract_cells_are_pruned_or_skipped():
    report = stress.run_all(("sglang_multi_step",), [TINY, stress.StressCase(2, 4096, 576)], REF)
    first, second = report.results
    assert first.status == "pruned" and "top_k >= 1024" in first.failure
    assert second.status == "skipped" and "cuda backend" in second.failure
    assert not report.failed
    assert stress.prune("multi_step", replace(TINY, top_k=512)) == "top_k 512 > hot_buffer_size 384"


def test_report_table_is_implementation_by_case():
    rep = stress.StressReport([
        stress.StressResult("multi_step", "s2/h4096/i576/dense", "pass", 7),
        stress.StressResult("sglang_multi_step", "s2/h4096/i576/dense", "fault", failure="worker process died"),
    ])
    lines = rep.table().splitlines()
    assert lines[0] == "| case | multi_step | sglang_multi_step |"
    assert lines[2] == "| s2/h4096/i576/dense | pass (7 calls) | fault: worker process died |"
    assert rep.failed


def test_check_command_prints_the_table(tmp_path):
    out = tmp_path / "stress.json"
    res = CliRunner().invoke(main, ["check", "--backend", "reference", "-i", "multi_step", "-i", "sglang_multi_step",
                                    "--steps", "4", "--hot", "384", "--item", "584", "--layout", "aligned16",
                                    "--top-k", "128", "--batch", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "| s4/h384/i584/aligned16 | pass (7 calls) | pruned: sglang_multi_step: upstream's speculative swap " \
           "requires top_k >= 1024, got 128 |" in res.output
    assert '"status": "pass"' in out.read_text()


def test_check_command_fails_on_a_bad_option():
    res = CliRunner().invoke(main, ["check", "--layout", "sparse"])
    assert res.exit_code == 2 and "'sparse' is not one of 'dense', 'aligned16'" in res.output


def test_isolated_jobs_run_in_a_worker_with_the_same_result():
    """What `check` does on a GPU: each job in a worker process (a CUDA fault costs one cell)."""
    report = stress.run_all(("multi_step",), [TINY], REF, isolate=True)
    (result,) = report.results
    assert (result.status, result.calls) == ("pass", 7) and result.kinds == stress.run_stress("multi_step", TINY, REF).kinds


# ---- `check --json` after every cell, and `--resume` -------------------------------------------------
_TINY_ARGS = ["check", "--backend", "reference", "-i", "multi_step", "--steps", "4", "--hot", "384", "--item", "584",
              "--top-k", "128", "--batch", "1"]  # two cells: dense and aligned16


def _cells(path):
    import json

    data = json.loads(path.read_text())
    return data["complete"], [(r["implementation"], r["case_id"], r["status"]) for r in data["results"]]


_RUN_STRESS = stress.run_stress  # the real one, whatever a test has patched in since


def _interrupt_at(n: int, seen: list):
    """run_stress that records each cell and raises KeyboardInterrupt (what a time limit or Ctrl-C
    does mid-run) at the n-th; 0 = never."""
    real = _RUN_STRESS

    def run(impl, case, backend):
        seen.append(case.case_id)
        if len(seen) == n:
            raise KeyboardInterrupt
        return real(impl, case, backend)

    return run


def test_check_json_keeps_the_cells_finished_before_an_interruption(tmp_path, monkeypatch):
    out = tmp_path / "stress.json"
    seen: list = []
    monkeypatch.setattr(stress, "run_stress", _interrupt_at(2, seen))
    CliRunner().invoke(main, _TINY_ARGS + ["--json", str(out)])
    complete, cells = _cells(out)
    assert not complete and cells == [("multi_step", seen[0], "pass")]


def test_check_resume_runs_only_the_missing_cells(tmp_path, monkeypatch):
    out = tmp_path / "stress.json"
    first: list = []
    monkeypatch.setattr(stress, "run_stress", _interrupt_at(2, first))
    CliRunner().invoke(main, _TINY_ARGS + ["--json", str(out)])
    assert len(_cells(out)[1]) == 1

    again: list = []
    monkeypatch.setattr(stress, "run_stress", _interrupt_at(0, again))
    res = CliRunner().invoke(main, _TINY_ARGS + ["--json", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    assert again == [first[1]]  # the finished cell was not run again
    complete, cells = _cells(out)
    assert complete and [c[1] for c in cells] == first and {c[2] for c in cells} == {"pass"}
    assert "1 cell(s) kept from" in res.output


def test_check_refuses_to_overwrite_a_report_or_mix_backends(tmp_path):
    out = tmp_path / "stress.json"
    out.write_text('{"backend": "cuda", "complete": true, "results": []}')
    res = CliRunner().invoke(main, _TINY_ARGS + ["--json", str(out)])
    assert res.exit_code == 2 and "pass --resume to continue it" in res.output
    res = CliRunner().invoke(main, _TINY_ARGS + ["--json", str(out), "--resume"])
    assert res.exit_code == 2 and "written by backend 'cuda', this run is 'reference'" in res.output
    out.write_text('{"results": "no"}')
    res = CliRunner().invoke(main, _TINY_ARGS + ["--json", str(out), "--resume"])
    assert res.exit_code == 2 and "cannot resume from it (not a check report" in res.output
    res = CliRunner().invoke(main, _TINY_ARGS + ["--resume"])
    assert res.exit_code == 2 and "--resume needs --json FILE" in res.output
