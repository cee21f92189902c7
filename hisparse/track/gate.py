"""The nightly gate (`hisparse-bench gate`, called by ci/nightly.sh): the regression policy
(track/policy.py) applied to a base run and a head run with the case's run-to-run noise from this
machine's history and the policy's confirm re-run. Returns data only; cli/gate.py prints and exits.

- ``find_baseline``: the run to compare against (BASELINE, else the latest finished run of this machine,
  backend and config at another commit);
- ``history_noise``: per case, the run-to-run noise of a run's median over the earlier runs of the same
  series (``series_noise``: successive differences, robust to the level shifts of past changes);
- ``gate_runs``: one policy Decision per case timed in both runs, and the cases newly failed in the head;
  its ``warnings``: compare.node_warnings, what besides the code differs between base and head
  (environment, floors), said and never a verdict.

Run files are read with hisparse.results.model.load_run (typed RunRecord).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from hisparse.errors import HisparseError, ResultFormatError
from hisparse.results.model import RunRecord, load_run
from hisparse.track import policy as pol
from hisparse.track.compare import incomparable
from hisparse.track.compare import node_warnings


class GateError(HisparseError, ValueError):
    """The gate cannot decide: a bad BASELINE, incomparable runs, no case in common."""


@dataclass(frozen=True)
class GateRun:
    """A run file and where it lies (RunRecord has no path; the baseline is printed as one)."""

    path: Path
    record: RunRecord

    @property
    def machine(self) -> str:
        return str(self.record.environment.get("machine") or "unknown")

    @property
    def commit(self) -> str | None:
        return self.record.environment.get("git_commit") or None

    @property
    def created(self) -> datetime:
        try:
            dt = datetime.fromisoformat(str(self.record.created).replace("Z", "+00:00"))
        except ValueError:  # an unparsable stamp sorts by the file's age instead
            return datetime.fromtimestamp(self.path.stat().st_mtime, timezone.utc)
        return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)

    def same_series(self, other: "GateRun") -> bool:
        a, b = self.record, other.record
        return (self.machine == other.machine and a.backend == b.backend
                and a.config.get("name") == b.config.get("name"))

    def samples(self) -> dict[str, tuple[float, ...]]:
        """case id -> raw samples of every timed case."""
        return {c.case_id: c.samples_us for c in self.record.cases if c.ok and c.samples_us}


def read(path: str | Path) -> GateRun:
    return GateRun(Path(path), load_run(path))


def scan(results: str | Path, machine: str) -> list[GateRun]:
    """Every readable run file of ``machine`` under ``<results>/runs`` (or ``results`` itself)."""
    root = Path(results)
    runs_dir = root / "runs" if (root / "runs").is_dir() else root
    runs = []
    for path in sorted(runs_dir.glob("*.json")):
        try:
            run = read(path)
        except ResultFormatError:  # not a run file (a gate report, a torn file): not history
            continue
        if run.machine == machine:
            runs.append(run)
    return runs


def find_baseline(results: str | Path, head: GateRun, wanted: str | None = None) -> GateRun | None:
    """``wanted`` (a run file, or a commit prefix) if given; else the latest finished run of the head's
    machine, backend and config whose commit differs from the head's. None: no baseline yet."""
    wanted = (wanted or "").strip()
    if wanted and Path(wanted).is_file():
        return read(wanted)
    runs = [r for r in scan(results, head.machine) if r.record.finished and r.same_series(head)]
    if wanted:
        if not re.fullmatch(r"[0-9a-fA-F]{4,40}", wanted):
            raise GateError(f"BASELINE={wanted!r}: neither a run file nor a commit hash (4-40 hex digits)")
        hits = [r for r in runs if (r.commit or "").startswith(wanted.lower())]
        if not hits:
            raise GateError(f"BASELINE={wanted}: no finished run of that commit for {head.machine}")
        return max(hits, key=lambda r: r.created)
    candidates = [r for r in runs if r.commit != head.commit and r.path.resolve() != head.path.resolve()]
    return max(candidates, key=lambda r: r.created) if candidates else None


def history_noise(results: str | Path | None, head: GateRun, exclude: set[Path],
                  policy: pol.RegressionPolicy = pol.DEFAULT_POLICY) -> dict[str, float]:
    """case id -> relative run-to-run noise of a run's median, from ``policy.history_min_runs`` to
    ``policy.history_window`` earlier runs of the head's series (``exclude``: resolved paths of the
    runs being gated, which are not history)."""
    if results is None:
        return {}
    runs = sorted((r for r in scan(results, head.machine) if r.same_series(head) and r.path.resolve() not in exclude),
                  key=lambda r: r.created)[-policy.history_window:]
    medians: dict[str, list[float]] = {}
    for r in runs:
        for case_id, s in r.samples().items():
            medians.setdefault(case_id, []).append(pol.median(s))
    return {k: pol.series_noise(v) for k, v in medians.items() if len(v) >= policy.history_min_runs}


def no_history_floor(policy: pol.RegressionPolicy = pol.DEFAULT_POLICY) -> float:
    """The floor of a case without history: compare's lone-pair floor (5%), never below ``min_effect``.
    The 0.5% floor flagged 19 cases of two re-runs of one tree; 5% is what re-runs pass (measured on
    the committed H200 runs, docs/regression.md "The gate without history")."""
    return max(policy.min_effect, policy.min_effect_unknown_noise)


@dataclass(frozen=True)
class GateReport:
    decisions: tuple[pol.Decision, ...]
    newly_failed: tuple[str, ...]  # timed in the base, failed in the head
    no_history: tuple[str, ...]  # head cases gated without a history noise estimate
    no_history_floor: float | None = None  # the floor those cases were gated with
    missing_in_head: tuple[str, ...] = ()  # base cases the head does not have (a cut run): not gated
    missing_in_base: tuple[str, ...] = ()  # new head cases: nothing to gate them against
    allow_missing: bool = False  # a head without some base cases may pass (a deliberately smaller head)
    warnings: tuple[str, ...] = ()  # node_warnings: printed and written, never a verdict

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.decisions)

    @property
    def exit_status(self) -> str:
        """"confirmed" (a regression), "suspect" (re-run the head and gate again), "missing" (the head
        lacks cases of the base: a pass would vouch for cases nobody timed) or "pass"."""
        for status in ("confirmed", "suspect"):
            if self.count(status):
                return status
        return "missing" if self.missing_in_head and not self.allow_missing else "pass"


def check_comparable(base: GateRun, head: GateRun, *, allow_incomparable: bool = False) -> None:
    """GateError when a verdict between the two would mean nothing (compare.incomparable) or there is
    no case to compare."""
    reasons = incomparable(base.record, head.record)
    if reasons and not allow_incomparable:
        raise GateError("incomparable runs: " + "; ".join(reasons) + " (--allow-incomparable to gate anyway)")
    if not set(base.record.case_ids()) & set(head.record.case_ids()):
        raise GateError(f"no common cases: {base.path.name} and {head.path.name} share no case id")


def gate_runs(base: GateRun, head: GateRun, confirm: GateRun | None, noise: dict[str, float], *,
              inject: float = 0.0, policy: pol.RegressionPolicy = pol.DEFAULT_POLICY) -> GateReport:
    """One Decision per case timed in both runs (sorted by id). ``inject``: the test hook's slowdown,
    every head and re-run sample x (1 + inject); the run files are not touched."""
    b, h = base.samples(), head.samples()
    h2 = confirm.samples() if confirm is not None else {}
    scale = 1.0 + inject
    lone = replace(policy, min_effect=no_history_floor(policy))  # a case without history: see no_history_floor
    decisions = []
    for case_id in sorted(set(b) & set(h)):
        rerun = [x * scale for x in h2[case_id]] if case_id in h2 else None
        decisions.append(pol.judge_with_confirm(b[case_id], [x * scale for x in h[case_id]], rerun,
                                                policy if case_id in noise else lone,
                                                noise=noise.get(case_id), case_id=case_id))
    failed = tuple(sorted(c.case_id for c in head.record.cases if c.status == "failed" and c.case_id in b))
    base_ids, head_ids = set(base.record.case_ids()), set(head.record.case_ids())
    # a head on a node whose host gathers 1.4x slower fails every case: the warnings say why
    warnings = node_warnings(base.record, head.record, names=("the base", "the head"))
    return GateReport(tuple(decisions), failed, tuple(sorted(set(h) - set(noise))), lone.min_effect,
                      missing_in_head=tuple(sorted(base_ids - head_ids)),
                      missing_in_base=tuple(sorted(head_ids - base_ids)), warnings=tuple(warnings))


def check_confirm(head: GateRun, confirm: GateRun) -> None:
    """GateError unless ``confirm`` re-ran the head's sweep: the same machine, backend, GPU and config
    (name and hash). A confirm run of another config once "unconfirmed" every suspect case of a head
    that was 2x slower."""
    h, c = head.record, confirm.record
    differ = [f"{what}: head {a!r}, confirm {b!r}" for what, a, b in (
        ("machine", head.machine, confirm.machine), ("backend", h.backend, c.backend),
        ("gpu", h.environment.get("gpu"), c.environment.get("gpu")),
        ("config name", h.config.get("name"), c.config.get("name")),
        ("config hash", h.config_hash, c.config_hash)) if a != b]
    if differ:
        raise GateError(f"--confirm {confirm.path}: not a re-run of the head ({'; '.join(differ)}); re-run the "
                        "head's config on the head's machine and backend and pass that run file")


def report_json(report: GateReport, *, base: str, head: str, confirm: str | None, inject: float,
                policy: pol.RegressionPolicy) -> dict:
    """The gate file (results/gates/*.gate.json): every verdict with its threshold, noise and p."""
    return {"base": base, "head": head, "confirm": confirm, "inject_slowdown": inject, "policy": policy.to_dict(),
            "no_history_floor": report.no_history_floor, "no_history": list(report.no_history),
            "decisions": [{"status": d.status, "first": d.first.to_dict(),
                           "second": d.second.to_dict() if d.second else None} for d in report.decisions],
            "newly_failed": list(report.newly_failed), "missing_in_head": list(report.missing_in_head),
            "missing_in_base": list(report.missing_in_base), "warnings": list(report.warnings)}


def write_asv(results: str | Path, paths: list[str], repo: str | Path) -> list[str]:
    """Convert run files into asv results under ``<results>/asv``; one message per file."""
    from hisparse import env
    from hisparse.files import safe_name, write_atomic
    from hisparse.track.asv import convert_run
    from hisparse.track.history import commit_dates

    out = []
    for path, run, data in _merged_by_commit(paths):
        date = commit_dates(repo, [run.commit]).get(run.commit) if run.commit else None
        try:
            written = convert_run(data, Path(results) / "asv", machine=safe_name(run.machine),
                                  python=env.asv_python(), write=write_atomic, commit_date_ms=int(date.timestamp() * 1000) if date else None)
        except ValueError as e:
            out.append(f"asv: {path}: skipped ({e})")
            continue
        out.append(f"asv: {written}")
    return out


def _merged_by_commit(paths: list[str]) -> list[tuple[str, GateRun, dict]]:
    """(path, latest run, run dict) per machine and commit: asv keeps one result file per commit, so
    the runs of one commit (default and vs-sglang configs) are merged, the later run's case winning
    where both timed one; written one by one, the second file replaced the first."""
    groups: dict[tuple, list[tuple[str, GateRun]]] = {}
    for path in paths:
        run = read(path)
        groups.setdefault((run.machine, run.commit or f"path:{path}"), []).append((path, run))
    out = []
    for members in groups.values():
        members.sort(key=lambda m: m[1].created)
        cases: dict[str, dict] = {}
        for _, run in members:
            for case in run.record.to_dict()["cases"]:
                cases[case["case_id"]] = case
        path, latest = members[-1]
        out.append((", ".join(p for p, _ in members), latest, {**latest.record.to_dict(), "cases": list(cases.values())}))
    return out
