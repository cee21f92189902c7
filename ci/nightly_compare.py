#!/usr/bin/env python3
"""The compare steps of ci/nightly.sh (run with the Python that has hisparse).

    nightly_compare.py baseline --results R --head HEAD.json       # prints the baseline run file (or nothing)
    nightly_compare.py gate --base B.json --head H.json [--confirm H2.json] [--results R] [--json OUT]
    nightly_compare.py asv --results R RUN.json...                 # write asv results (R/asv)

``gate`` exit status: 0 pass; 4 the gate failed once (re-measure the head, then call again with
``--confirm``); 1 a CONFIRMED regression (the re-run failed the gate too); 2 usage error.

Per case: hisparse.track.changepoint.gate on the raw samples (Mann-Whitney U + a minimum relative change
of medians that scales with the case's noise). The noise comes from this machine's history (the
run-to-run spread of earlier runs of the same config and backend, at least 3); without that
history the confirming gate uses the spread between the two head runs (changepoint.gate_with_confirm).

TEST HOOK: HISPARSE_INJECT_SLOWDOWN=0.10 multiplies every head sample by 1.10 before gating (the
recorded files are not touched). It exists so that CI can prove the gate fires; a banner says when it
is active. HISPARSE_NIGHTLY_MIN_EFFECT overrides the minimum effect (default 0.005 = 0.5%).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from hisparse.track import changepoint as cp
from hisparse.track.history import RunFile, read_run, scan_runs

EXIT_PASS, EXIT_CONFIRMED, EXIT_USAGE, EXIT_SUSPECT = 0, 1, 2, 4


def _same_series(a: RunFile, b: RunFile) -> bool:
    return (a.machine == b.machine and a.data.get("backend") == b.data.get("backend")
            and (a.data.get("config") or {}).get("name") == (b.data.get("config") or {}).get("name"))


def find_baseline(results: Path, head: RunFile) -> RunFile | None:
    """BASELINE (a run file, or a commit prefix) if set; else the latest finished run of this machine,
    backend and config whose commit differs from the head's."""
    wanted = os.environ.get("BASELINE", "").strip()
    runs, _ = scan_runs(results, machine=head.machine)
    if wanted:
        if Path(wanted).is_file():
            return read_run(wanted)
        if not re.fullmatch(r"[0-9a-fA-F]{4,40}", wanted):
            raise SystemExit(f"BASELINE={wanted!r}: neither a run file nor a commit hash")
        hits = [r for r in runs
                if (r.commit or "").startswith(wanted.lower()) and r.finished and _same_series(r, head)]
        if not hits:
            raise SystemExit(f"BASELINE={wanted}: no finished run of that commit for {head.machine}")
        return max(hits, key=lambda r: r.created)
    candidates = [r for r in runs if r.finished and r.commit != head.commit and _same_series(r, head)
                  and r.path.resolve() != head.path.resolve()]
    return max(candidates, key=lambda r: r.created) if candidates else None


def _samples(run: RunFile) -> dict[str, list[float]]:
    return {c["case_id"]: [float(x) for x in c["samples_us"]] for c in run.cases
            if c.get("status") == "ok" and c.get("samples_us")}


HISTORY_WINDOW = 30  # earlier runs used for the noise estimate (a month of nights)


def history_noise(results: Path | None, head: RunFile, exclude: set[Path]) -> dict[str, float]:
    """case id -> relative run-to-run noise of a run's median (``series_noise``: successive
    differences, robust to the level shifts of past changes), from 3 to HISTORY_WINDOW earlier runs."""
    if results is None:
        return {}
    runs, _ = scan_runs(results, machine=head.machine)
    runs = sorted((r for r in runs if _same_series(r, head) and r.path.resolve() not in exclude),
                  key=lambda r: r.created)[-HISTORY_WINDOW:]
    medians: dict[str, list[float]] = {}
    for r in runs:
        for case_id, s in _samples(r).items():
            medians.setdefault(case_id, []).append(cp.median(s))
    return {k: cp.series_noise(v) for k, v in medians.items() if len(v) >= 3}


def gate_runs(base: RunFile, head: RunFile, confirm: RunFile | None, noise: dict[str, float],
              inject: float, min_effect: float) -> tuple[list[cp.Decision], list[str]]:
    """One Decision per case timed in both runs, and the case ids newly failed in the head."""
    b, h = _samples(base), _samples(head)
    h2 = _samples(confirm) if confirm is not None else {}
    scale = 1.0 + inject
    decisions = []
    for case_id in sorted(set(b) & set(h)):
        head_s = [x * scale for x in h[case_id]]
        rerun = [x * scale for x in h2[case_id]] if case_id in h2 else None
        decisions.append(cp.gate_with_confirm(b[case_id], head_s, rerun, direction=cp.LOWER, noise=noise.get(case_id),
                                              min_effect=min_effect, case_id=case_id))
    failed_now = sorted(c["case_id"] for c in head.cases if c.get("status") == "failed" and c["case_id"] in b)
    return decisions, failed_now


def _line(d: cp.Decision) -> str:
    v = d.second or d.first
    return (f"{d.status:12s} {v.case_id}: {v.base_median:.4g} -> {v.head_median:.4g} us "
            f"({v.worse_by * 100:+.2f}% worse, threshold {v.threshold * 100:.2f}%, p={v.p_value:.2g})")


def cmd_gate(args: argparse.Namespace) -> int:
    base, head = read_run(args.base), read_run(args.head)
    confirm = read_run(args.confirm) if args.confirm else None
    inject = float(os.environ.get("HISPARSE_INJECT_SLOWDOWN") or 0.0)
    min_effect = float(os.environ.get("HISPARSE_NIGHTLY_MIN_EFFECT") or cp.DEFAULT_MIN_EFFECT["time_us"])
    if inject:
        print(f"*** TEST HOOK: HISPARSE_INJECT_SLOWDOWN={inject}: head samples x {1 + inject:.3f} ***")
    exclude = {p.resolve() for p in (Path(args.head), Path(args.confirm) if args.confirm else Path(args.head))}
    noise = history_noise(Path(args.results) if args.results else None, head, exclude)
    decisions, failed_now = gate_runs(base, head, confirm, noise, inject, min_effect)
    print(f"base {base.run_id} ({(base.commit or '?')[:12]}) vs head {head.run_id} ({(head.commit or '?')[:12]})"
          + (f", confirmed by {confirm.run_id}" if confirm else "") + f"; {len(noise)} case(s) with history noise")
    unknown = sorted(set(_samples(head)) - set(noise))
    if unknown:
        print(f"note: {len(unknown)} case(s) have fewer than 3 earlier runs here: gated on within-run noise and the "
              "re-run spread only (more false alarms on noisy cases until history accumulates)")
    for d in decisions:
        if d.status != "pass" or d.first.status != cp.UNCHANGED or args.verbose:
            print(_line(d))
    for case_id in failed_now:
        print(f"{'newly failed':12s} {case_id}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "base": str(args.base), "head": str(args.head), "confirm": args.confirm, "inject_slowdown": inject,
            "decisions": [{"status": d.status, "first": d.first.to_dict(),
                           "second": d.second.to_dict() if d.second else None} for d in decisions],
            "newly_failed": failed_now}, indent=1))
    if any(d.status == "confirmed" for d in decisions):
        print(f"CONFIRMED regression in {sum(d.status == 'confirmed' for d in decisions)} case(s)")
        return EXIT_CONFIRMED
    if any(d.status == "suspect" for d in decisions):
        print(f"{sum(d.status == 'suspect' for d in decisions)} case(s) failed the gate once: re-run to confirm")
        return EXIT_SUSPECT
    print(f"pass: {len(decisions)} case(s) compared")
    return EXIT_PASS


def cmd_baseline(args: argparse.Namespace) -> int:
    base = find_baseline(Path(args.results), read_run(args.head))
    if base is not None:
        print(base.path)
    return EXIT_PASS


def cmd_asv(args: argparse.Namespace) -> int:
    from hisparse.track.asv import convert_run
    from hisparse.track.history import commit_dates

    for path in args.runs:
        run = read_run(path)
        date = commit_dates(args.repo, [run.commit]).get(run.commit) if run.commit else None
        try:
            out = convert_run(run.data, Path(args.results) / "asv", machine=run.machine,
                              commit_date_ms=int(date.timestamp() * 1000) if date else None)
        except ValueError as e:
            print(f"asv: {path}: skipped ({e})")
            continue
        print(f"asv: {out}")
    return EXIT_PASS


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("baseline")
    b.add_argument("--results", required=True)
    b.add_argument("--head", required=True)
    g = sub.add_parser("gate")
    g.add_argument("--base", required=True)
    g.add_argument("--head", required=True)
    g.add_argument("--confirm")
    g.add_argument("--results")
    g.add_argument("--json")
    g.add_argument("-v", "--verbose", action="store_true")
    a = sub.add_parser("asv")
    a.add_argument("--results", required=True)
    a.add_argument("--repo", default=".")
    a.add_argument("runs", nargs="+")
    args = p.parse_args(argv)
    return {"baseline": cmd_baseline, "gate": cmd_gate, "asv": cmd_asv}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
