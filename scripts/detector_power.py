#!/usr/bin/env python3
"""Measure the regression detectors: false-alarm rate and the smallest slowdown caught with 95% power.

    python scripts/detector_power.py --synthetic            # realistic per-case noise (docs/semantics.md §H5)
    python scripts/detector_power.py results/runs/*.json    # real samples: re-runs of one commit

Both modes draw whole *runs* of a case from a run sampler and feed them to the two detectors of
hisparse.track.changepoint exactly as the tools use them:

- trend (dashboard): a history of ``--commits`` commits, one run each; false alarm = any change point
  on a history without a change; power at slowdown s = a regression found within one commit of the
  step (commit ``2/3 * commits`` on) when every later run is slowed by s;
- gate (nightly): base run vs head run, re-measured head when the first gate fails (confirm protocol),
  noise from a history of ``--history`` earlier runs (``series_noise``, as hisparse/track/gate.py does)
  or, for the first nights, none; false alarm = a confirmed regression between runs of one commit.

Synthetic runs: a run-level offset ~ N(0, sd_between) plus 10 samples ~ N(0, sd_within); sd_between
from the measured spreads (range of 4 processes = 2.06 sd for normals), sd_within = sd_between (an
assumption: the per-process IQRs were not recorded). Real runs: a uniformly chosen run of the case
(so between-run noise is the real one), its samples resampled with replacement. With real data,
every case needs at least 3 runs of one commit (more gives a better estimate).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hisparse.track import changepoint as cp  # noqa: E402
from hisparse.track import policy  # noqa: E402

# docs/semantics.md §H5: upstream kernels, `distinct`, 4 processes on one H200: relative spread of the medians.
MEASURED_SPREADS = {
    "multi_step b1": 0.003, "multi_step b8": 0.002, "multi_step b64": 0.0003,
    "lru_sequential b1": 0.022, "lru_sequential b8": 0.029, "lru_sequential b64": 0.001,
}
RANGE_OF_4 = 2.059  # expected range of 4 standard normal draws
SLOWDOWNS = (0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10, 0.12, 0.15,
             0.20, 0.30, 0.50)

RunSampler = Callable[[random.Random], list]  # rng -> one run's samples (us)


def synthetic_sampler(sd_between: float, sd_within: float, n: int = 10, level: float = 100.0) -> RunSampler:
    def draw(rng: random.Random) -> list:
        off = rng.gauss(0.0, sd_between)
        return [level * (1.0 + off + rng.gauss(0.0, sd_within)) for _ in range(n)]
    return draw


def real_sampler(runs: Sequence[Sequence[float]]) -> RunSampler:
    def draw(rng: random.Random) -> list:
        run = rng.choice(runs)
        return [rng.choice(run) for _ in run]
    return draw


def _history(draw: RunSampler, rng: random.Random, commits: int, step_at: int | None, slowdown: float):
    runs = []
    for i in range(commits):
        s = draw(rng)
        if step_at is not None and i >= step_at:
            s = [x * (1.0 + slowdown) for x in s]
        runs.append(s)
    return [cp.median(s) for s in runs], runs


def trend_false_alarms(draw: RunSampler, *, series: int, commits: int, seed: int) -> float:
    alarms = 0
    for k in range(series):
        rng = random.Random(seed * 100_003 + k)
        meds, runs = _history(draw, rng, commits, None, 0.0)
        alarms += bool(cp.detect_changes(meds, direction=cp.LOWER, samples=runs, seed=k))
    return alarms / series


def trend_power(draw: RunSampler, slowdown: float, *, trials: int, commits: int, seed: int) -> float:
    at = commits * 2 // 3
    hits = 0
    for k in range(trials):
        rng = random.Random(seed * 200_003 + k)
        meds, runs = _history(draw, rng, commits, at, slowdown)
        found = cp.detect_changes(meds, direction=cp.LOWER, samples=runs, seed=k)
        hits += any(abs(c.index - at) <= 1 and c.kind == cp.REGRESSION for c in found)
    return hits / trials


def gate_once(draw: RunSampler, rng: random.Random, slowdown: float, history: int) -> bool:
    """One nightly: True when the confirm protocol ends in a confirmed regression."""
    noise = None
    if history >= 3:
        noise = cp.series_noise([cp.median(draw(rng)) for _ in range(history)])
    base = draw(rng)
    head = [x * (1.0 + slowdown) for x in draw(rng)]
    decision = policy.judge_with_confirm(base, head, direction=cp.LOWER, noise=noise)
    if decision.needs_rerun:  # the nightly re-measures the head only when the first gate failed
        rerun = [x * (1.0 + slowdown) for x in draw(rng)]
        decision = policy.judge_with_confirm(base, head, rerun, direction=cp.LOWER, noise=noise)
    return decision.failed


def gate_rate(draw: RunSampler, slowdown: float, *, trials: int, history: int, seed: int) -> float:
    rng = random.Random(seed * 300_007 + int(slowdown * 1e6) + history)
    return sum(gate_once(draw, rng, slowdown, history) for _ in range(trials)) / trials


def smallest_detected(rate_at: Callable[[float], float], power: float = 0.95) -> float | None:
    for s in SLOWDOWNS:
        if rate_at(s) >= power:
            return s
    return None


def evaluate(name: str, draw: RunSampler, args: argparse.Namespace) -> dict:
    row = {"case": name}
    row["trend_false_alarm"] = trend_false_alarms(draw, series=args.series, commits=args.commits, seed=args.seed)
    row["trend_min_slowdown_95"] = smallest_detected(
        lambda s: trend_power(draw, s, trials=args.trials, commits=args.commits, seed=args.seed))
    for label, history in (("gate", args.history), ("gate_no_history", 0)):
        row[f"{label}_false_alarm"] = gate_rate(draw, 0.0, trials=args.series * 5, history=history, seed=args.seed)
        row[f"{label}_min_slowdown_95"] = smallest_detected(
            lambda s, h=history: gate_rate(draw, s, trials=args.trials, history=h, seed=args.seed))
    return row


def _pct(v: float | None) -> str:
    return "not within 50%" if v is None else f"{v * 100:.2f}%"


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    print(f"trend: {args.series} histories of {args.commits} commits (false alarms), {args.trials} per slowdown "
          f"(power); gate: {args.series * 5} nights without a change (false alarms), {args.trials} per slowdown, "
          f"noise from {args.history} earlier runs or none\n")
    print("| case | noise | trend false alarms | trend: 95% power at | gate false alarms (history / none) "
          "| gate: 95% power at (history / none) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r.get('noise', '-')} | {r['trend_false_alarm'] * 100:.1f}% | "
              f"{_pct(r['trend_min_slowdown_95'])} | {r['gate_false_alarm'] * 100:.2f}% / "
              f"{r['gate_no_history_false_alarm'] * 100:.2f}% | {_pct(r['gate_min_slowdown_95'])} / "
              f"{_pct(r['gate_no_history_min_slowdown_95'])} |")


def real_cases(paths: Sequence[str]) -> dict[str, list[list[float]]]:
    from hisparse.track.history import read_run  # noqa: PLC0415

    by_key: dict[str, list[list[float]]] = {}
    for p in paths:
        run = read_run(p)
        for c in run.cases:
            if c.get("status") == "ok" and c.get("samples_us"):
                by_key.setdefault(f"{run.machine}/{c['case_id']}", []).append([float(x) for x in c["samples_us"]])
    return by_key


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="*", help="run files: re-runs of one commit (at least 3 per case)")
    p.add_argument("--synthetic", action="store_true", help="use the measured noise levels of docs/semantics.md §H5")
    p.add_argument("--series", type=int, default=200, help="histories for the false-alarm rate")
    p.add_argument("--trials", type=int, default=100, help="trials per slowdown for the power")
    p.add_argument("--commits", type=int, default=30)
    p.add_argument("--history", type=int, default=30, help="earlier runs the nightly estimates noise from")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args(argv)
    rows = []
    if args.synthetic:
        for name, spread in MEASURED_SPREADS.items():
            sd = spread / RANGE_OF_4
            row = evaluate(name, synthetic_sampler(sd, sd), args)
            row["noise"] = f"{spread * 100:.2f}% spread"
            rows.append(row)
            print(f"done: {name}", file=sys.stderr)
    for key, runs in sorted(real_cases(args.runs).items()):
        if len(runs) < 3:
            print(f"skip {key}: {len(runs)} run(s), need >= 3 re-runs of one commit", file=sys.stderr)
            continue
        row = evaluate(key, real_sampler(runs), args)
        row["noise"] = f"{policy.rerun_noise([cp.median(r) for r in runs]) * 100:.2f}% sd, {len(runs)} runs"
        rows.append(row)
    if not rows:
        p.error("nothing to measure: give --synthetic or run files with >= 3 runs per case")
    print_table(rows, args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
