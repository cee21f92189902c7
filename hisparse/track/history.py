"""Per-commit history: measure commits in their own trees, and read back what was recorded.

Measuring (``measure_history``): for each commit of a range, a ``git worktree`` in a cache directory,
then that tree's own harness and kernels: ``python -m hisparse run <config> --ci --out <tmp>`` with
the worktree as working directory and first on PYTHONPATH (the editable install's finder comes after
PYTHONPATH, so the worktree's package wins). The run file is recorded under the commit's hash in
``<results>/runs/`` and converted to asv results in ``<results>/asv/``. A commit that already has a
finished run for this machine (or an asv result) is skipped; so is a tree with no runnable harness,
with the reason. Only local git is used: it works on an offline GPU node.

Reading (``scan_runs``, ``commit_dates``, ``build_series``): every file is read by
``hisparse.results.model.load_run`` (the one reader: older schema versions are upgraded), and
``RunFile`` is a thin view of that record with plain dicts for its readers (``RunFile.cases``: per
case ``CaseResult.flat_dict``, samples pooled, statistics computed).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path

from hisparse import env
from hisparse.files import safe_name, write_atomic
from hisparse.gitutil import git, git_or_none
from hisparse.results import metadata
from hisparse.errors import HisparseError, ResultFormatError
from hisparse.results.model import RunRecord, load_run, write_run


class HarnessUnavailable(HisparseError):
    """The commit's tree cannot run the harness (too old, no config...): the commit is skipped."""


# ---------------------------------------------------------------------------------------------
# Reading recorded runs (plain dicts)


@dataclass(frozen=True)
class RunFile:
    """One result file as the results reader gave it (``record``), with the plain-dict views its
    readers use: ``data`` (the file as written now, ``RunRecord.to_dict()``: what
    ``hisparse.track.asv.convert_run`` takes) and ``cases`` (``CaseResult.flat_dict`` per case)."""

    path: Path
    record: RunRecord

    @cached_property
    def data(self) -> dict:
        return self.record.to_dict()

    @property
    def run_id(self) -> str:
        return str(self.record.run_id or self.path.stem)

    @property
    def environment(self) -> dict:
        return self.record.environment or {}

    @property
    def commit(self) -> str | None:
        return self.environment.get("git_commit") or None

    @property
    def machine(self) -> str:
        return str(self.environment.get("machine") or "unknown")

    @property
    def dirty(self) -> bool:
        return bool(self.environment.get("git_dirty"))

    @property
    def finished(self) -> bool:
        return bool(self.record.finished)

    @property
    def created(self) -> datetime:
        return parse_time(self.record.created) or datetime.fromtimestamp(self.path.stat().st_mtime, timezone.utc)

    @cached_property
    def cases(self) -> list[dict]:
        return [c.flat_dict() for c in self.record.cases]


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def read_run(path: str | os.PathLike) -> RunFile:
    """Read one result file through ``hisparse.results.model.load_run``; ResultFormatError for a
    missing or unreadable file, an unknown schema_version or a malformed case."""
    path = Path(path)
    try:
        return RunFile(path, load_run(path))
    except FileNotFoundError as e:
        raise ResultFormatError(f"{path}: not a readable JSON run file ({e})") from e


def scan_runs(results_dir: str | os.PathLike, *,
              machine: str | None = None) -> tuple[list[RunFile], list[tuple[Path, str]]]:
    """Every run file under ``<results_dir>/runs`` (or ``results_dir`` itself when it holds them);
    returns (runs, skipped) where skipped lists (path, reason) for files that could not be read."""
    root = Path(results_dir)
    runs_dir = root / "runs" if (root / "runs").is_dir() else root
    runs, skipped = [], []
    for path in sorted(runs_dir.glob("*.json")):
        try:
            run = read_run(path)
        except ResultFormatError as e:
            skipped.append((path, str(e)))
            continue
        if machine is None or run.machine == machine:
            runs.append(run)
    return runs, skipped


def commit_dates(repo: str | os.PathLike | None, commits: Iterable[str]) -> dict[str, datetime]:
    """Committer dates of the commits git knows in ``repo`` (others are left out)."""
    commits = sorted({c for c in commits if c and re.fullmatch(r"[0-9a-fA-F]{4,40}", c)})
    if repo is None or not commits or shutil.which("git") is None:
        return {}
    out = git_or_none(repo, "show", "-s", "--format=%H %ct", *commits)
    if out is None:  # an unknown commit fails the batch: ask one by one
        dates = {}
        for c in commits:
            one = git_or_none(repo, "show", "-s", "--format=%H %ct", c)
            if one is not None and one.split():
                dates[c] = datetime.fromtimestamp(int(one.split()[1]), timezone.utc)
        return dates
    full = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            full[parts[0]] = datetime.fromtimestamp(int(parts[1]), timezone.utc)
    return {c: d for c in commits for h, d in full.items() if h.startswith(c.lower())}


# ---------------------------------------------------------------------------------------------
# Series: one case on one machine, one point per commit


@dataclass
class CommitPoint:
    commit: str
    date: datetime
    run_ids: list[str] = field(default_factory=list)
    samples_us: list[float] = field(default_factory=list)  # pooled over the commit's runs
    gbps_per_us: float | None = None  # bytes_per_call / 1e3: gbps = gbps_per_us / time_us
    failed: list[str] = field(default_factory=list)  # reasons of failed runs of this case

    @property
    def ok(self) -> bool:
        return bool(self.samples_us)


@dataclass
class Series:
    case_id: str
    machine: str
    backend: str
    params: dict
    points: list[CommitPoint] = field(default_factory=list)  # oldest commit first
    timing: str = ""  # timing_key of the settings every point was measured with

    @property
    def key(self) -> str:
        return f"{self.machine}/{self.case_id}" + (f"@{self.timing}" if self.timing else "")


def timing_key(timing: dict | None) -> str:
    """The timing settings that change what a sample measures, as a series key: "g20x5" (20-call
    graphs, each sample the mean of 5 replays), "g100"; "+warm-l2" without the L2 flush. Runs of one
    case under other settings are another series: pooled, a 20-call and a 100-call graph made a ±6%
    zig-zag that no kernel caused (multi_step/serving/b1 over 0a5ccbb, 2e408a5, 3239c10). The number
    of rounds is left out: it changes how many samples there are, not what one measures."""
    t = timing or {}
    if not t.get("calls_per_graph"):
        return ""
    key = f"g{t['calls_per_graph']}"
    if int(t.get("replays_per_sample") or 1) > 1:
        key += f"x{t['replays_per_sample']}"
    return key + ("" if t.get("l2_flush", True) else "+warm-l2")


def order_commits(runs: Sequence[RunFile], repo: str | os.PathLike | None) -> dict[str, datetime]:
    """commit -> date used for ordering: git committer date, else the earliest run's created time."""
    dates = commit_dates(repo, [r.commit for r in runs if r.commit])
    out: dict[str, datetime] = {}
    for r in runs:
        key = r.commit or f"run:{r.run_id}"
        if key in dates:
            out[key] = dates[key]
        else:
            out[key] = min(out.get(key, r.created), r.created)
    return out


def build_series(runs: Sequence[RunFile], *, repo: str | os.PathLike | None = None) -> list[Series]:
    """Group every case of every run by (machine, backend, case_id, timing_key); one point per commit, commits in
    date order (git committer date, or the run's created time without git). Runs without a commit
    are a point of their own. Re-runs of one commit pool their samples."""
    dates = order_commits(runs, repo)
    table: dict[tuple[str, str, str], Series] = {}
    for r in sorted(runs, key=lambda r: r.created):
        commit = r.commit or f"run:{r.run_id}"
        backend = str(r.record.backend or "")
        for case in r.cases:
            timing = timing_key(case.get("timing"))
            key = (r.machine, backend, case["case_id"], timing)
            series = table.setdefault(key, Series(case["case_id"], r.machine, backend, dict(case.get("params") or {}),
                                                  timing=timing))
            point = next((p for p in series.points if p.commit == commit), None)
            if point is None:
                point = CommitPoint(commit, dates[commit])
                series.points.append(point)
            point.run_ids.append(r.run_id)
            if case.get("status") == "ok" and case.get("samples_us"):
                point.samples_us.extend(float(x) for x in case["samples_us"])
                nbytes = (case.get("work") or {}).get("bytes_per_call")
                if nbytes:
                    point.gbps_per_us = float(nbytes) / 1e3
            elif case.get("status") == "failed":
                point.failed.append(str(case.get("reason") or "failed"))
    for series in table.values():
        series.points.sort(key=lambda p: (p.date, p.commit))
    return sorted(table.values(), key=lambda s: (s.case_id, s.machine, s.backend, s.timing))


# ---------------------------------------------------------------------------------------------
# Measuring commits


def machine_name(machine: str | None = None) -> str:
    """--machine, else HISPARSE_MACHINE, else the hostname (``metadata.machine_name``, what the engine
    records), as one safe path component: it names folders under --results."""
    return safe_name(machine or metadata.machine_name())


def resolve_commits(repo: str | os.PathLike, spec: str) -> list[str]:
    """``A..B`` -> the commits of the range, oldest first (first-parent history of B not in A);
    a single revision -> [that commit]."""
    if ".." in spec:
        out = git(repo, "rev-list", "--reverse", "--first-parent", spec)
        return [line.strip() for line in out.splitlines() if line.strip()]
    return [git(repo, "rev-parse", "--verify", f"{spec}^{{commit}}").strip()]


def is_measured(results_dir: str | os.PathLike, machine: str, commit: str) -> bool:
    """A finished run of ``commit`` on ``machine`` from a clean tree, or an asv result of it, exists."""
    results_dir = Path(results_dir)
    if any((results_dir / "asv" / machine).glob(f"{commit[:8]}-*.json")):
        return True
    runs, _ = scan_runs(results_dir, machine=machine)
    return any(r.commit == commit and r.finished and not r.dirty for r in runs)


def check_harness(tree: Path, config: str) -> None:
    """Raise HarnessUnavailable unless ``tree`` can run ``python -m hisparse run <config>``."""
    if not (tree / "hisparse" / "__main__.py").is_file():
        raise HarnessUnavailable("no hisparse/__main__.py (no command-line harness in this tree)")
    # the wings layout (2026-12-01 on) has hisparse/cli/run.py; the flat one before it hisparse/commands/run.py
    if not any((tree / "hisparse" / sub / "run.py").is_file() for sub in ("cli", "commands")):
        raise HarnessUnavailable("no hisparse/cli/run.py or hisparse/commands/run.py (no `run` command in this tree)")
    if not (tree / config).is_file():
        raise HarnessUnavailable(f"no {config} in this tree")


# A runner measures one tree: runner(tree, out_dir, config, env) writes run file(s) into out_dir.
Runner = Callable[[Path, Path, str, dict], None]


def subprocess_runner(python: str | None = None, *, timeout_s: float | None = None) -> Runner:
    """The tree's own harness: ``python -m hisparse run <config> --ci --out <out_dir>`` (its plots, if
    it draws any, land next to the run file and are recorded with it). A run that exits non-zero
    but wrote a run file (some case failed) is recorded: failed cases are results too."""

    def run(tree: Path, out_dir: Path, config: str, env: dict) -> None:
        cmd = [python or sys.executable, "-m", "hisparse", "run", config, "--ci", "--out", str(out_dir)]
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0 and not list(out_dir.glob("*.json")):
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
            if "No such command" in proc.stderr or "No module named hisparse" in proc.stderr:
                raise HarnessUnavailable("; ".join(tail[-2:]))
            raise HisparseError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n" + "\n".join(tail))

    return run


@dataclass(frozen=True)
class CommitOutcome:
    commit: str
    status: str  # "measured" | "already-measured" | "skipped" | "failed"
    reason: str | None = None
    run_files: tuple[Path, ...] = ()
    asv_files: tuple[Path, ...] = ()


def default_worktree_root(repo: str | os.PathLike) -> Path:
    root = env.worktree_dir()
    if root is not None:
        return root
    common = Path(git(repo, "rev-parse", "--git-common-dir").strip())
    common = common if common.is_absolute() else Path(repo) / common
    return common.resolve().parent / ".cache" / "hisparse" / "worktrees"


def measure_commit(repo: str | os.PathLike, commit: str, *, results_dir: str | os.PathLike, machine: str,
                   config: str = "configs/ci.yaml", runner: Runner | None = None,
                   worktree_root: Path | None = None, keep_worktree: bool = False,
                   convert_asv: bool = True) -> CommitOutcome:
    """Measure one commit in its own worktree and record the run under its hash (see module doc)."""
    repo = Path(repo)
    results_dir = Path(results_dir)
    runner = runner or subprocess_runner()
    root = worktree_root or default_worktree_root(repo)
    root.mkdir(parents=True, exist_ok=True)
    tree = root / commit[:12]
    if tree.exists():
        git(repo, "worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tree, ignore_errors=True)
        git(repo, "worktree", "prune", check=False)
    git(repo, "worktree", "add", "--detach", "--force", str(tree), commit)
    try:
        try:
            check_harness(tree, config)
        except HarnessUnavailable as e:
            return CommitOutcome(commit, "skipped", str(e))
        # The tree's own git says which commit it is: an inherited HISPARSE_GIT_COMMIT would override it.
        inherited = {k: v for k, v in os.environ.items() if k not in env.GIT_OVERRIDE_VARS}
        child_env = {**inherited, "HISPARSE_MACHINE": machine,
                     "PYTHONPATH": os.pathsep.join([str(tree)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
        with tempfile.TemporaryDirectory(prefix="hisparse-history-") as tmp:
            out_dir = Path(tmp)
            try:
                runner(tree, out_dir, config, child_env)
            except HarnessUnavailable as e:
                return CommitOutcome(commit, "skipped", str(e))
            except (HisparseError, OSError, subprocess.SubprocessError) as e:
                return CommitOutcome(commit, "failed", str(e))
            return _record(out_dir, commit, results_dir, machine, repo, convert_asv)
    finally:
        if not keep_worktree:
            git(repo, "worktree", "remove", "--force", str(tree), check=False)
            shutil.rmtree(tree, ignore_errors=True)
            git(repo, "worktree", "prune", check=False)


def _record(out_dir: Path, commit: str, results_dir: Path, machine: str, repo: Path,
            convert_asv: bool) -> CommitOutcome:
    """Move the tree's run file(s) (and their plot directories) into results/runs, under the commit."""
    produced = sorted(out_dir.glob("*.json"))
    if not produced:
        return CommitOutcome(commit, "failed", "the harness wrote no run file")
    runs_dir = results_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    run_files, asv_files = [], []
    for path in produced:
        try:
            run = read_run(path)
        except ResultFormatError as e:
            return CommitOutcome(commit, "failed", str(e))
        recorded = run.commit
        if recorded and recorded != commit:
            return CommitOutcome(commit, "failed", f"the run recorded commit {recorded}, not {commit}")
        # The machine history was told is authoritative: an older harness may not read HISPARSE_MACHINE,
        # and a run filed under another name would never count as measured here. Written by the results
        # writer, so a file from an older commit's harness is recorded in the current schema.
        record = replace(run.record, environment={**run.environment, "git_commit": commit, "machine": machine})
        dest = write_run(record, runs_dir / path.name)
        plots = path.with_suffix("")
        if plots.is_dir():
            shutil.copytree(plots, runs_dir / plots.name, dirs_exist_ok=True)
        run_files.append(dest)
        if convert_asv:
            from hisparse.track.asv import convert_run  # noqa: PLC0415

            date = commit_dates(repo, [commit]).get(commit)
            asv_files.append(convert_run(record.to_dict(), results_dir / "asv", machine=machine,
                                         python=env.asv_python(), write=write_atomic,
                                         commit_date_ms=int(date.timestamp() * 1000) if date else None))
    return CommitOutcome(commit, "measured", None, tuple(run_files), tuple(asv_files))


def record_run_dir(out_dir: str | os.PathLike, commit: str, results_dir: str | os.PathLike = "results",
                   machine: str | None = None, repo: str | os.PathLike = ".", convert_asv: bool = True) -> CommitOutcome:
    """Record run files measured elsewhere for ``commit`` as ``measure_commit`` records its own: for a
    node without git, where scripts/run_trees.sh ran exported trees (full hash required)."""
    full = git(repo, "rev-parse", "--verify", f"{commit}^{{commit}}").strip()
    return _record(Path(out_dir), full, Path(results_dir), machine_name(machine), Path(repo), convert_asv)


def measure_history(repo: str | os.PathLike, spec: str, *, results_dir: str | os.PathLike,
                    machine: str | None = None, config: str = "configs/ci.yaml", max_count: int | None = None,
                    runner: Runner | None = None, worktree_root: Path | None = None,
                    keep_worktrees: bool = False, convert_asv: bool = True,
                    on_commit: Callable[[CommitOutcome], None] | None = None) -> list[CommitOutcome]:
    """Measure every commit of ``spec`` (``A..B`` or one revision) not yet measured on this machine.

    ``max_count``: measure at most this many (the newest unmeasured ones), oldest first.
    ``on_commit`` is called after each commit (the CLI prints progress there).
    """
    machine = machine_name(machine)
    commits = resolve_commits(repo, spec)
    outcomes: dict[str, CommitOutcome] = {}
    todo = []
    for c in commits:
        if is_measured(results_dir, machine, c):
            outcomes[c] = CommitOutcome(c, "already-measured", f"a result for {c[:12]} on {machine} exists")
        else:
            todo.append(c)
    if max_count is not None and len(todo) > max_count:
        for c in todo[:len(todo) - max_count]:
            outcomes[c] = CommitOutcome(c, "skipped", f"beyond --max {max_count}")
        todo = todo[len(todo) - max_count:]
    if on_commit:
        for c in commits:
            if c in outcomes:
                on_commit(outcomes[c])
    for c in todo:
        outcome = measure_commit(repo, c, results_dir=results_dir, machine=machine, config=config, runner=runner,
                                 worktree_root=worktree_root, keep_worktree=keep_worktrees,
                                 convert_asv=convert_asv)
        outcomes[c] = outcome
        if on_commit:
            on_commit(outcome)
    return [outcomes[c] for c in commits]
