"""One `hisparse-bench run`, as a library: pick the backend and config, expand the sweep, decide the
run file (refusing to overwrite one), measure the pinned bandwidth, run every case with a progress
callback, finish the file. The CLI (hisparse/cli/run.py) only turns options into a ``RunRequest``
and prints what this module reports.

    session = prepare(RunRequest(config="ci", ci=True), say=print)
    record = execute(session, on_case=print)
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hisparse import env
from hisparse.errors import HisparseError
from hisparse.files import check_target

# Where a run file goes when --out is not given. The committed H200 history lives in results/runs/;
# a reference (CPU) run is a try-out of the pipeline, so it goes to a git-ignored folder and can
# never land next to that history by accident (.gitignore lists results/local/).
KERNEL_RUNS_DIR = Path("results") / "runs"
LOCAL_RUNS_DIR = Path("results") / "local"

LONG_RUN_S = 120.0  # warn before a run (any backend) estimated longer than this


class NothingToRun(HisparseError):
    """The sweep selects no case to time (all pruned, or the filters match nothing)."""


class RunFileExists(HisparseError):
    """The run file already exists and neither --resume nor --force was given."""


def default_config(backend: str) -> str:
    """The config `run`, `list` and `build` use when none is named: the full sweep on a GPU, the
    small CPU one on the reference backend (the full one takes ~41 min there)."""
    return "default" if backend == "cuda" else "cpu-small"


def default_out_dir(backend: str) -> Path:
    root = env.REPO_ROOT or Path.cwd()
    return root / (KERNEL_RUNS_DIR if backend == "cuda" else LOCAL_RUNS_DIR)


def out_path(out: str | None, run_id: str, backend: str) -> Path:
    """--out FILE.json is the file; --out DIR (or the default folder) gets ``<run_id>.json``."""
    if out is not None and out.endswith(".json"):
        return Path(out)
    return (Path(out) if out is not None else default_out_dir(backend)) / f"{run_id}.json"


def refuse_overwrite(path: Path) -> None:
    """A run file is history: replacing a finished 12-case run with a 2-case one lost data once."""
    if not path.exists():
        return
    raise RunFileExists(f"{path} already exists; refusing to overwrite it. Continue it with --resume {path}, "
                        "write to a new name (--out OTHER.json or a folder), or replace it with --force")


@dataclass(frozen=True)
class Estimate:
    """What the run knows of its duration: ``known_s`` for the cases an earlier run on this machine
    and backend timed (their latest ``wall_s``), and the cases nobody timed here (time unknown: the
    cost model once said 77 s for a sweep whose one batch-64 case took 14.5 minutes)."""

    known_s: float
    known: int
    unknown: int


def estimate_from_history(cases: list, *, machine: str | None, backend: str, config_name: str,
                          folders: list[Path]) -> Estimate:
    """Seconds the ``cases`` took in earlier run files of ``config_name`` in ``folders`` (only files of the
    same machine and backend count; unreadable ones are passed over)."""
    from hisparse.errors import ResultFormatError  # noqa: PLC0415
    from hisparse.results.model import load_run  # noqa: PLC0415

    wanted = {c.case_id for c in cases}
    latest: dict[str, tuple[str, float]] = {}  # case id -> (created, wall_s)
    paths = {p.resolve() for d in folders if d.is_dir() for p in d.glob(f"*_{config_name}.json")}
    for path in sorted(paths):
        try:
            record = load_run(path)
        except (ResultFormatError, OSError):
            continue
        if record.backend != backend or record.environment.get("machine") != machine:
            continue
        for c in record.cases:
            if c.case_id in wanted and c.ok and c.wall_s > 0 and latest.get(c.case_id, ("",))[0] <= record.created:
                latest[c.case_id] = (record.created, c.wall_s)
    return Estimate(known_s=sum(w for _, w in latest.values()), known=len(latest), unknown=len(wanted) - len(latest))


@dataclass(frozen=True)
class RunRequest:
    """The options of one run, as the CLI received them."""

    config: str | None = None  # None: default_config(backend)
    ci: bool = False
    filters: tuple[str, ...] = ()
    view: str | None = None  # a `views:` name of the config: its filters go before `filters`
    out: str | None = None  # a folder or a .json path; None: default_out_dir(backend)
    resume: str | None = None
    backend: str = "auto"
    force: bool = False  # overwrite an existing run file


@dataclass(frozen=True)
class CaseProgress:
    """One finished (or, on --resume, skipped) case, for the progress display."""

    index: int  # 1-based, over every case of the sweep
    total: int
    case_id: str
    result: Any  # CaseResult, or None for a case the resumed file already had
    elapsed_s: float
    eta_s: float | None  # None until a case has been timed in this session

    @property
    def median_us(self) -> float | None:
        return getattr(self.result, "median_us", None) if self.result is not None else None

    @property
    def status(self) -> str:
        return "done before" if self.result is None else self.result.status


@dataclass
class Session:
    """Everything `execute` needs, and what the CLI prints before it starts."""

    backend: Any
    backend_name: str  # resolved: "cuda" or "reference"
    config: str
    config_defaulted: bool
    expansion: Any
    writer: Any
    pinned: Any
    resumed: bool = False
    resumed_done: int = 0

    @property
    def cases(self) -> list:
        return list(self.expansion.cases)

    @property
    def to_run(self) -> int:
        return len(self.expansion.cases) - self.resumed_done


def prepare(request: RunRequest, say: Callable[[str], None] = lambda _m: None) -> Session:
    """Resolve, expand and open the run file. Raises HisparseError (a usage error for the CLI)
    before writing anything when the sweep has nothing to time or the file exists."""
    from hisparse.bench.backends import get_backend, resolve_name  # noqa: PLC0415
    from hisparse.bench.config import load_config  # noqa: PLC0415

    resolved = resolve_name(request.backend)
    backend = get_backend(resolved)
    config = request.config if request.config is not None else default_config(resolved)
    cfg = load_config(config)
    # From here on the view is its filters: the run file records them, and --resume compares them.
    request = replace(request, filters=cfg.selection(request.view, request.filters), view=None)
    expansion = cfg.expand(ci=request.ci, filters=request.filters)
    _require_cases(expansion, config)
    if request.resume is not None:
        writer, pinned = _resume(request, cfg, backend)
    else:
        writer, pinned = _create(request, cfg, expansion, backend, resolved, say)
    done = writer.done_ids
    return Session(backend=backend, backend_name=resolved, config=config, config_defaulted=request.config is None,
                   expansion=expansion, writer=writer, pinned=pinned, resumed=request.resume is not None,
                   resumed_done=sum(1 for c in expansion.cases if c.case_id in done))


def _require_cases(expansion: Any, config: str) -> None:
    if expansion.cases:
        return
    if expansion.filters and expansion.filtered_out:
        why = f"the filter(s) {' '.join(expansion.filters)} match none of its {expansion.filtered_out} case(s)"
    elif expansion.pruned:
        why = f"all {len(expansion.pruned)} combination(s) are pruned (see `hisparse-bench list {config}`)"
    else:
        why = "it expands to no case"
    raise NothingToRun(f"{config}: nothing to time: {why}; no run file written")


def _resume(request: RunRequest, cfg: Any, backend: Any):
    from hisparse.bench.floors import PinnedBandwidth  # noqa: PLC0415
    from hisparse.results import metadata  # noqa: PLC0415
    from hisparse.results import model as results  # noqa: PLC0415

    writer = results.RunWriter.resume(request.resume, config_hash=cfg.config_hash, backend=backend.name,
                                      environment=metadata.collect_environment(backend.device))
    old = writer.record.config
    if bool(old.get("ci")) != request.ci or list(old.get("filters") or []) != list(request.filters):
        raise HisparseError(f"{request.resume}: cannot resume: it was run with --ci={old.get('ci')} and filters "
                            f"{old.get('filters')}, not --ci={request.ci} and {list(request.filters)}")
    return writer, PinnedBandwidth.from_dict(writer.record.floors)


def _create(request: RunRequest, cfg: Any, expansion: Any, backend: Any, resolved: str,
            say: Callable[[str], None]):
    from hisparse.bench.floors import measure_pinned_h2d  # noqa: PLC0415
    from hisparse.results import model as results  # noqa: PLC0415

    environment = _environment(backend.device, list(expansion.cases))
    created = datetime.now(timezone.utc)
    run_id = results.make_run_id(created, environment.get("git_commit"), cfg.name)
    path = out_path(request.out, run_id, resolved)
    check_target(path)  # a read-only folder or a path under a file fails now, not after the bandwidth probe
    if not request.force:
        refuse_overwrite(path)
    if backend.is_kernel:
        say("Measuring pinned host->device bandwidth ...")
    pinned = measure_pinned_h2d(backend.device)
    record = results.RunRecord(
        run_id=run_id, created=results.utc_iso(created), backend=backend.name,
        config={"name": cfg.name, "path": str(getattr(cfg, "path", None) or request.config), "hash": cfg.config_hash,
                "ci": request.ci, "filters": list(request.filters),
                "pruned": [{"case_id": p.case_id, "reason": p.reason} for p in expansion.pruned]},
        environment=environment, floors=pinned.to_dict(),
    )
    try:
        return results.RunWriter.create(path, record, exclusive=not request.force), pinned
    except FileExistsError:  # another run took the name since refuse_overwrite looked
        refuse_overwrite(path)
        raise


def execute(session: Session, on_case: Callable[[CaseProgress], None] = lambda _p: None):
    """Run every case not yet in the file (rewritten after each), report each through ``on_case``,
    and return the finished RunRecord. KeyboardInterrupt propagates; the file keeps finished cases."""
    from hisparse.bench import measure  # noqa: PLC0415

    cases = session.cases
    sweep = _host_sweep(session)
    start = time.perf_counter()
    timed = 0
    try:
        with _case_runner(cases, session.backend) as runner:
            run = _with_host_memory(runner, sweep, session.writer) if sweep is not None else runner
            for index, (case, result) in enumerate(
                    measure.run_sweep(cases, session.backend, session.writer, floors=session.pinned, run=run), start=1):
                elapsed = time.perf_counter() - start
                timed += result is not None
                left = session.to_run - timed
                eta = elapsed / timed * left if timed else None
                on_case(CaseProgress(index=index, total=len(cases), case_id=case.case_id, result=result,
                                     elapsed_s=elapsed, eta_s=eta))
    finally:
        if sweep is not None:
            sweep.finish()
    return session.writer.finish()


def _host_sweep(session: Session):
    """The sweep's host memory (hisparse/bench/host_sweep.py), its huge pages reserved now, before any case
    allocates; None on the reference backend (pageable memory). Pinning the arena once per kind, at its
    largest case, spares pinning and filling tens of GiB per larger case."""
    if not session.backend.is_kernel or not session.cases:
        return None
    from hisparse.bench.host_sweep import HostSweep  # noqa: PLC0415

    sweep = HostSweep(session.cases, session.backend.device)
    _record_host_memory(session.writer, sweep.start())
    return sweep


def _with_host_memory(runner: Callable[..., Any], sweep: Any, writer: Any) -> Callable[..., Any]:
    """``runner`` with each kind's arena allocated before its first case, and what it got recorded."""

    def run(case: Any, backend: Any, **kw: Any) -> Any:
        if sweep.before(case):
            _record_host_memory(writer, sweep.info)
        return runner(case, backend, **kw)

    return run


def _record_host_memory(writer: Any, info: dict) -> None:
    """``environment.host_memory`` of the run file: huge pages asked and got, NUMA nodes, each kind's arena."""
    import copy  # noqa: PLC0415

    if info:
        record = writer.record
        writer.replace_record(replace(record, environment={**record.environment, "host_memory": copy.deepcopy(info)}))


def _has_sglang(cases: list) -> bool:
    from hisparse.bench import implementations  # noqa: PLC0415

    return any(implementations.get(c.implementation).source == "sglang" for c in cases)


def _case_runner(cases: list, backend: Any):
    """sglang's cases in a worker process when they can run (a CUDA fault there fails that case, not
    the sweep: hisparse/bench/isolate.py); everything else in this process."""
    import contextlib  # noqa: PLC0415

    from hisparse.bench import measure  # noqa: PLC0415

    if backend.is_kernel and _has_sglang(cases):
        from hisparse.bench.isolate import IsolatedRunner  # noqa: PLC0415

        return IsolatedRunner(backend.name)
    return contextlib.nullcontext(measure.run_case)


def _environment(device: Any, cases: list) -> dict:
    """The run's metadata; with sglang's cases, which sglang ran (version; for a checkout its commit
    and dirty flag)."""
    from hisparse.results import metadata  # noqa: PLC0415

    environment = metadata.collect_environment(device)
    if _has_sglang(cases):
        from hisparse.bench.sglang import provenance  # noqa: PLC0415

        environment.update(provenance())
    return environment


__all__ = ["CaseProgress", "Estimate", "NothingToRun", "estimate_from_history", "RunFileExists", "RunRequest", "Session", "default_config",
           "default_out_dir", "execute", "out_path", "prepare", "refuse_overwrite"]
