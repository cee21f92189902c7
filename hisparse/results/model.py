"""Result files: the dataclasses of docs/results-format.md, loading (with upgrade-on-load), atomic
writing, and the writer that keeps a sweep's file current after every case (``--resume``).

The field order of ``CaseResult`` is the order of the keys in the file (Liger practice 15). Raw
samples are always stored; ``stats`` and ``derived`` are conveniences recomputable from them
(``hisparse.stats``).
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hisparse.results import metadata
from hisparse.errors import ResultFormatError

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "skipped")
BACKENDS = ("cuda", "reference")


def utc_iso(moment: datetime) -> str:
    """``2026-11-29T20:15:00Z``: the form of ``created`` and ``finished`` (``moment`` in UTC)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now() -> str:
    return utc_iso(datetime.now(timezone.utc))


def _clean(value: Any) -> Any:
    """JSON-safe copy: tuples -> lists, non-finite floats -> None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class CaseResult:
    """One case of a run; ``samples_us`` are microseconds per call, one per replay."""

    case_id: str
    params: dict
    status: str
    reason: str | None = None
    timing: dict = field(default_factory=dict)
    samples_us: tuple[float, ...] = ()
    stats: dict | None = None
    work: dict | None = None
    floor: dict | None = None
    derived: dict | None = None
    clocks: dict | None = None
    wall_s: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ResultFormatError(f"case {self.case_id}: status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "ok" and not self.samples_us:
            raise ResultFormatError(f"case {self.case_id}: status 'ok' needs samples_us")
        object.__setattr__(self, "samples_us", tuple(float(x) for x in self.samples_us))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def replay_us(self) -> tuple[float, ...]:
        """Every graph replay's time (us per call): ``timing.replay_us`` where a sample averaged
        several replays (``timing.replays_per_sample``), else the samples themselves."""
        return tuple(float(x) for x in self.timing.get("replay_us") or self.samples_us)

    @property
    def median_us(self) -> float | None:
        return None if not self.stats else self.stats.get("median_us")

    @property
    def speedup(self) -> float | None:
        """``derived.speedup_vs_lru_sequential``: median of the baseline the engine linked at write time
        (``derived.speedup_baseline``, the like-for-like sequential-LRU case) over this case's median.
        The link is the one owner of "which baseline": nothing re-derives it when a file is read."""
        derived = self.derived or {}
        if not derived.get("speedup_baseline"):
            return None
        return derived.get("speedup_vs_lru_sequential")

    def to_dict(self) -> dict:
        return _clean({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_dict(cls, data: dict) -> "CaseResult":
        if not isinstance(data, dict):
            raise ResultFormatError(f"case entry: expected an object, got {type(data).__name__}")
        for key in ("case_id", "params", "status"):
            if key not in data:
                raise ResultFormatError(f"case entry {data.get('case_id', '?')}: missing field {key!r}")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}  # newer minor additions are ignored
        kwargs["samples_us"] = tuple(kwargs.get("samples_us") or ())
        kwargs["timing"] = kwargs.get("timing") or {}
        kwargs["wall_s"] = float(kwargs.get("wall_s") or 0.0)
        return cls(**kwargs)

    @classmethod
    def failed(cls, case_id: str, params: dict, reason: str, *, timing: dict | None = None,
               wall_s: float = 0.0) -> "CaseResult":
        return cls(case_id=case_id, params=params, status="failed", reason=reason, timing=timing or {},
                   wall_s=wall_s)


@dataclass(frozen=True)
class RunRecord:
    """A whole run file. ``finished`` is None while the sweep runs or after an interruption."""

    run_id: str
    created: str
    backend: str
    config: dict
    environment: dict
    floors: dict
    cases: tuple[CaseResult, ...] = ()
    finished: str | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ResultFormatError(f"run {self.run_id}: backend must be one of {BACKENDS}, got {self.backend!r}")
        object.__setattr__(self, "cases", tuple(self.cases))

    @property
    def config_hash(self) -> str | None:
        return self.config.get("hash")

    def case_ids(self) -> list[str]:
        return [c.case_id for c in self.cases]

    def case(self, case_id: str) -> CaseResult | None:
        for c in self.cases:
            if c.case_id == case_id:
                return c
        return None

    def with_case(self, result: CaseResult) -> "RunRecord":
        """A copy with ``result`` added (replacing a case of the same id, in place)."""
        cases = list(self.cases)
        for i, c in enumerate(cases):
            if c.case_id == result.case_id:
                cases[i] = result
                break
        else:
            cases.append(result)
        return replace(self, cases=tuple(cases))

    def with_cases(self, results: list[CaseResult]) -> "RunRecord":
        rec = self
        for r in results:
            rec = rec.with_case(r)
        return rec

    def to_dict(self) -> dict:
        # Key order of docs/results-format.md.
        return _clean({
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "created": self.created,
            "finished": self.finished,
            "backend": self.backend,
            "config": self.config,
            "environment": self.environment,
            "floors": self.floors,
            "cases": [c.to_dict() for c in self.cases],
        })


# ---------------------------------------------------------------------------------------------
# Loading.
#
# Format history (bump SCHEMA_VERSION for any change a v1 reader would misread; never edit an old
# entry; every version keeps a golden file in tests/data/results_v<N>.json that must load forever):
#   1 (2026-11): first version, docs/results-format.md. Extra keys a reader does not know are
#     ignored ("timing.method", "timing.warmup_us", "config.filters", "config.pruned",
#     "floors.note" are such additions written by this engine). Later v1 additions:
#     "timing.rounds" + "timing.samples_per_round" (samples_us = every round's replays in round
#     order; a v1 reader that ignores them still reads valid samples; absent: one round);
#     "timing.placements" (per round: hex addresses of host_cache and device_buffer);
#     "timing.processes" + "timing.samples_per_process" + "timing.retime_errors" (hisparse/bench/retime.py);
#     "stats.modes"; "timing.replays_per_sample" + "timing.replay_us" (each sample the mean of that
#     many replays; a v1 reader that ignores them reads valid samples; absent: one replay per sample).
#
# _UPGRADES[v] turns a version-v dict into a version-(v+1) dict; load applies them in order.


_UPGRADES: dict[int, Any] = {}


def upgrade(data: dict) -> dict:
    """Bring a parsed run file to SCHEMA_VERSION; refuse unknown or future versions."""
    if not isinstance(data, dict):
        raise ResultFormatError(f"run file: expected a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ResultFormatError(f"run file: schema_version must be an integer, got {version!r}")
    if version > SCHEMA_VERSION or version < 1:
        raise ResultFormatError(
            f"run file: unknown schema_version {version} (this hisparse reads 1..{SCHEMA_VERSION}); "
            "a newer hisparse wrote it?"
        )
    while version < SCHEMA_VERSION:
        if version not in _UPGRADES:
            raise ResultFormatError(f"run file: no upgrade from schema_version {version}")
        data = _UPGRADES[version](data)
        version += 1
        data["schema_version"] = version
    return data


# Files written before ``derived.speedup_baseline`` existed (before 2026-11-29) compared every
# implementation with plain lru_sequential of the same case; only multi_step's ratio is like for
# like, so it is kept (linked to that baseline) and the others are dropped when such a file is read.
LEGACY_SPEEDUP_BASELINE = "lru_sequential (same case; recorded before speedup_baseline existed)"


def _legacy_speedup(case: dict) -> dict:
    derived = case.get("derived")
    if not isinstance(derived, dict) or "speedup_baseline" in derived or "speedup_vs_lru_sequential" not in derived:
        return case
    params = case.get("params") or {}
    keep = params.get("implementation") == "multi_step" and derived.get("speedup_vs_lru_sequential") is not None
    derived = dict(derived)
    if keep:
        derived["speedup_baseline"] = LEGACY_SPEEDUP_BASELINE
    else:
        derived["speedup_vs_lru_sequential"] = None
    return {**case, "derived": derived}


def run_from_dict(data: dict) -> RunRecord:
    data = upgrade(data)
    if isinstance(data.get("cases"), list):
        data = {**data, "cases": [_legacy_speedup(c) if isinstance(c, dict) else c for c in data["cases"]]}
    for key in ("run_id", "created", "backend", "config", "environment", "cases"):
        if key not in data:
            raise ResultFormatError(f"run file: missing field {key!r}")
    if not isinstance(data["cases"], list):
        raise ResultFormatError("run file: 'cases' must be a list")
    problems = metadata.validate(data["environment"] or {})
    if problems:
        raise ResultFormatError("run file: " + "; ".join(problems))
    try:
        return RunRecord(
            run_id=data["run_id"], created=data["created"], finished=data.get("finished"),
            backend=data["backend"], config=data["config"] or {}, environment=data["environment"] or {},
            floors=data.get("floors") or {}, cases=tuple(CaseResult.from_dict(c) for c in data["cases"]),
            schema_version=data["schema_version"],
        )
    except TypeError as e:  # a field of the wrong shape
        raise ResultFormatError(f"run file: {e}") from e


def load_run(path: str | os.PathLike) -> RunRecord:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise ResultFormatError(f"{path}: not a readable JSON run file ({e})") from e
    try:
        return run_from_dict(data)
    except ResultFormatError as e:
        raise ResultFormatError(f"{path}: {e}") from e


# ---------------------------------------------------------------------------------------------
# Writing.


def write_json_atomic(path: str | os.PathLike, data: dict) -> Path:
    """Write ``data`` to ``path`` via a temp file in the same directory + fsync + os.replace, so a
    reader (or a crash) sees either the old file or the new one, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_run(record: RunRecord, path: str | os.PathLike) -> Path:
    return write_json_atomic(path, record.to_dict())


def make_run_id(created: datetime, commit: str | None, config_name: str) -> str:
    """``<YYYYmmdd-HHMMSS>_<commit12>_<config>`` (UTC)."""
    safe = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in config_name) or "config"
    return f"{created.strftime('%Y%m%d-%H%M%S')}_{(commit or 'nogit')[:12]}_{safe}"


class RunWriter:
    """Keeps a run file current: every ``add`` rewrites it atomically.

    ``RunWriter.resume(path, ...)`` reopens an interrupted run; it refuses a different config hash,
    backend, or environment (``metadata.CHECKED_KEYS``), because the cases would not be comparable.
    """

    def __init__(self, path: str | os.PathLike, record: RunRecord) -> None:
        self.path = Path(path)
        self.record = record

    @classmethod
    def create(cls, path: str | os.PathLike, record: RunRecord) -> "RunWriter":
        writer = cls(path, record)
        writer.flush()
        return writer

    @classmethod
    def resume(cls, path: str | os.PathLike, *, config_hash: str, backend: str,
               environment: dict | None = None) -> "RunWriter":
        record = load_run(path)
        if record.config_hash != config_hash:
            raise ResultFormatError(
                f"{path}: cannot resume: the run was made with config hash {record.config_hash}, this config "
                f"expands to {config_hash} (a different sweep); start a new run instead"
            )
        if record.backend != backend:
            raise ResultFormatError(f"{path}: cannot resume: the run used backend {record.backend!r}, not {backend!r}")
        if environment is not None:
            diff = metadata.mismatches(record.environment, environment)
            if diff:
                raise ResultFormatError(f"{path}: cannot resume on a different environment: " + "; ".join(diff))
        return cls(path, replace(record, finished=None))

    @property
    def done_ids(self) -> set[str]:
        return set(self.record.case_ids())

    def add(self, result: CaseResult) -> None:
        self.record = self.record.with_case(result)
        self.flush()

    def replace_record(self, record: RunRecord) -> None:
        self.record = record
        self.flush()

    def finish(self) -> RunRecord:
        self.record = replace(self.record, finished=utc_now())
        self.flush()
        return self.record

    def flush(self) -> None:
        write_run(self.record, self.path)
