"""Result files: the dataclasses of docs/results-format.md, loading (with upgrade-on-load), atomic
writing, and the writer that keeps a sweep's file current after every case (``--resume``).

The one reader and writer of run files (hisparse.track.history's RunFile is a view of a RunRecord).
Measurement model in pyperf's manner (schema v2): a case holds its runs, one per process and timing
round, each with its raw samples, per-replay times, warm-ups, clocks and placement; statistics
(``hisparse.stats``) and derived figures are properties computed from them, never stored beside them.
"""
from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from hisparse import stats
from hisparse.files import claim_new, safe_name, write_json_atomic
from hisparse.results import metadata
from hisparse.errors import ResultFormatError

SCHEMA_VERSION = 2
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


def _floats(where: str, values: Any, *, positive: bool = False) -> tuple[float, ...]:
    """``values`` as floats, each a finite number (not a boolean or a string: ``true`` once read as
    1.0 us and ``"3"`` as 3 us); ``positive``: each > 0 too (a time per call of zero or less is no
    measurement, and once gave "improved" at ratio -1.005)."""
    if values is None:
        return ()
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise ResultFormatError(f"{where}: expected a list of numbers, got {type(values).__name__}")
    out = []
    for i, x in enumerate(values):
        if not _is_number(x) or not math.isfinite(x) or (positive and x <= 0):
            allowed = "finite numbers > 0 (microseconds)" if positive else "finite numbers"
            raise ResultFormatError(f"{where}[{i}]: {x!r} is not allowed; expected {allowed}")
        out.append(float(x))
    return tuple(out)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ResultFormatError(f"{where}: expected an integer >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class Run:
    """One timing round of one process (pyperf's "run"): what that round measured, nothing computed.

    ``samples_us``: microseconds per call, one per sample; ``replay_us``: every graph replay's own time
    where a sample averaged several replays (``settings.replays_per_sample`` > 1), else empty (the
    replays are the samples: stored once); ``warmup_us``: the warm-up calls (and warm replay) before
    the timed ones; ``clocks``: NVML readings, one per sample (``{"source", "sm_mhz", "mem_mhz",
    "throttle_reasons"}``); ``placement``: where this round's buffers landed (hex addresses)."""

    process: int
    round: int
    samples_us: tuple[float, ...]
    replay_us: tuple[float, ...] = ()
    warmup_us: tuple[float, ...] = ()
    clocks: dict | None = None
    placement: dict | None = None

    def __post_init__(self) -> None:
        where = f"run (process {self.process}, round {self.round})"
        _int(f"{where}: process", self.process)
        _int(f"{where}: round", self.round)
        for name in ("samples_us", "replay_us", "warmup_us"):
            object.__setattr__(self, name, _floats(f"{where}: {name}", getattr(self, name),
                                                   positive=name != "warmup_us"))
        if not self.samples_us:
            raise ResultFormatError(f"{where}: samples_us is empty (a run is at least one sample)")
        if self.replay_us and len(self.replay_us) % len(self.samples_us):
            raise ResultFormatError(f"{where}: replay_us has {len(self.replay_us)} replays, not a multiple of "
                                    f"the {len(self.samples_us)} samples (each sample averages the same number)")

    @property
    def replays(self) -> tuple[float, ...]:
        """Every replay's time: ``replay_us``, or the samples where each sample is one replay."""
        return self.replay_us or self.samples_us

    def to_dict(self) -> dict:
        return _clean({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_dict(cls, data: Any, where: str = "run") -> "Run":
        if not isinstance(data, dict):
            raise ResultFormatError(f"{where}: expected an object, got {type(data).__name__}")
        for key in ("process", "round", "samples_us"):
            if key not in data:
                raise ResultFormatError(f"{where}: missing field {key!r}")
        for key in ("clocks", "placement"):
            if data.get(key) is not None and not isinstance(data[key], dict):
                raise ResultFormatError(f"{where}: {key}: expected an object or null")
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except ResultFormatError as e:  # named by where it sits in the file (its case), not only by its indices
            raise ResultFormatError(f"{where}: {e}") from None


@dataclass(frozen=True)
class SpeedupLink:
    """The engine's link of a case to its baseline (the same work by sequential LRU, pdl off) and
    median(baseline) / median(this case) at write time. Stored, not derived: it needs another case,
    and the link is the one owner of "which baseline" (nothing re-derives it when a file is read)."""

    baseline: str
    value: float | None

    def to_dict(self) -> dict:
        return _clean({"baseline": self.baseline, "value": self.value})


@dataclass(frozen=True)
class CounterpartLink:
    """The engine's link of our case to sglang's case doing the same work (the sglang implementation
    whose ``counterpart`` is ours, every other parameter equal) and median(ours) / median(sglang's) at
    write time (< 1: ours faster; None while sglang's case is not ok in the run). Stored for the
    reason SpeedupLink is: the pairing is the engine's (the implementation table), readers do not
    re-derive it."""

    case_id: str
    ratio: float | None

    def to_dict(self) -> dict:
        return _clean({"case_id": self.case_id, "ratio": self.ratio})


REREAD_MARK = 0.99  # distinct host bytes / bytes copied below this: the case's PCIe floor is marked


def reread_share(work: dict) -> float | None:
    """Distinct host rows' bytes over the bytes copied (work.host_bytes_per_call, absent in files written
    before f980859, 2026-12-01) when under REREAD_MARK, else None. Such a case's PCIe floor,
    which counts rows copied, is no floor (re-read rows need not cross the link): the text summary, the
    dashboard and the plots mark it."""
    host, copied = work.get("host_bytes_per_call"), work.get("bytes_per_call")
    share = host / copied if host is not None and copied else None
    return share if share is not None and share < REREAD_MARK else None


def derived_figures(median_us: float | None, work: dict | None, floor: dict | None) -> dict[str, float | None]:
    """``gbps`` (bytes per call over the median), ``over_pcie_floor`` and ``over_gather_floor`` (the
    median over each floor): arithmetic on a case's work, floors and median, so never stored."""
    def over(f: Any) -> float | None:
        return median_us / f if median_us is not None and f else None

    nbytes = (work or {}).get("bytes_per_call")
    floor = floor or {}
    gather, warm = floor.get("gather_floor_us"), floor.get("gather_warm_us")
    return {
        "gbps": nbytes / (median_us * 1e3) if nbytes is not None and median_us else None,
        "over_pcie_floor": over(floor.get("pcie_floor_us")),
        "over_gather_floor": over(gather),
        # decode-regime cases: the median over the warm gather of the same rows, and the gather floor's
        # own cold / warm ratio (what the translation of host pages costs the bare gather)
        "over_gather_warm": over(warm),
        "translation_cost": gather / warm if gather and warm else None,
    }


# The keys of v1's ``timing`` object that v2 keeps in ``runs`` (CaseResult.timing rebuilds them).
V1_SPLIT_KEYS = ("rounds", "samples_per_round", "warmup_us", "placements", "processes", "samples_per_process",
                 "replay_us", "retime_errors")


V1_ARGUMENTS = ("timing", "samples_us", "stats", "derived", "clocks")


def _v1_arguments(case_id: str, status: str, v1: dict, base: "CaseResult | None", link: Any,
                  errors: Any) -> tuple[dict, list, Any, tuple]:
    """(settings, runs, speedup_link, retime_errors) of a CaseResult built from v1's fields ``v1``,
    over ``base``'s v1 view where ``dataclasses.replace`` gave both; upgraded as a v1 file's case is."""
    unknown = set(v1) - set(V1_ARGUMENTS)
    if unknown:
        raise TypeError(f"CaseResult: unexpected argument(s) {sorted(unknown)}")
    if base is not None:
        flat = base.flat_dict()
        v1 = {**{k: flat[k] for k in ("timing", "samples_us", "clocks", "derived")}, **v1}
        link, errors = None, ()  # both are in that view (derived, timing)
    up = _case_v1_to_v2({"case_id": case_id, "status": status, **v1})
    return up["settings"], up["runs"], link or up["speedup_link"], tuple(errors or ()) + tuple(up["retime_errors"])


@dataclass(frozen=True, init=False)
class CaseResult:
    """One case of a run: what was measured (``runs``, one per process and timing round, in order) and
    what the engine knew (``settings``: the timing settings as applied; ``work``, ``floor``, the
    ``speedup_link``). Every statistic and derived figure is a property computed from the runs.

    The field order is the order of the keys in the file. The constructor also takes the v1 field set
    (``samples_us=``, ``timing=``, ``clocks=``, ``stats=``, ``derived=``) and upgrades it exactly as a
    v1 file's case is upgraded: ``stats`` and all of ``derived`` but the speedup link are recomputed,
    not taken."""

    case_id: str
    params: dict
    status: str
    reason: str | None
    settings: dict
    runs: tuple[Run, ...]
    work: dict | None
    floor: dict | None
    speedup_link: SpeedupLink | None
    counterpart_link: CounterpartLink | None
    retime_errors: tuple[str, ...]
    wall_s: float

    # counterpart_link comes last in the signature (callers pass the others by position)
    def __init__(self, case_id: str, params: dict, status: str, reason: str | None = None, settings: dict | None = None,
                 runs: Any = (), work: dict | None = None, floor: dict | None = None,
                 speedup_link: SpeedupLink | dict | None = None, retime_errors: Any = (), wall_s: float = 0.0,
                 counterpart_link: CounterpartLink | dict | None = None, **v1: Any) -> None:
        if v1:
            base = None
            if settings is not None or runs:  # dataclasses.replace(case, timing=...): v1's replace, on v1's view
                base = CaseResult(case_id, params, status, reason, settings, runs, work, floor, speedup_link,
                                  retime_errors, wall_s)
            settings, runs, speedup_link, retime_errors = _v1_arguments(case_id, status, v1, base, speedup_link,
                                                                        retime_errors)
        if isinstance(speedup_link, dict):
            speedup_link = SpeedupLink(str(speedup_link.get("baseline")), speedup_link.get("value"))
        put = partial(object.__setattr__, self)
        put("case_id", case_id)
        put("params", params)
        put("status", status)
        put("reason", reason)
        put("settings", dict(settings) if isinstance(settings, dict) else settings or {})  # _check names a bad one
        put("runs", tuple(r if isinstance(r, Run) else Run.from_dict(r, f"case {case_id}: runs[{i}]")
                          for i, r in enumerate(runs or ())))
        put("work", work)
        put("floor", floor)
        put("speedup_link", speedup_link)
        if isinstance(counterpart_link, dict):
            counterpart_link = CounterpartLink(str(counterpart_link.get("case_id")), counterpart_link.get("ratio"))
        put("counterpart_link", counterpart_link)
        put("retime_errors", tuple(str(e) for e in retime_errors or ()))
        put("wall_s", float(wall_s or 0.0))
        self._check()

    def _check(self) -> None:
        if self.status not in STATUSES:
            raise ResultFormatError(f"case {self.case_id}: status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "ok" and not self.runs:
            raise ResultFormatError(f"case {self.case_id}: status 'ok' needs runs (samples)")
        order = [(r.process, r.round) for r in self.runs]
        if order != sorted(set(order)):
            raise ResultFormatError(f"case {self.case_id}: runs must be in (process, round) order without repeats, "
                                    f"got {order}")
        if not isinstance(self.params, dict) or not isinstance(self.settings, dict):
            raise ResultFormatError(f"case {self.case_id}: params and settings must be objects")

    # ----- read API: every figure computed from the runs

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @cached_property
    def samples_us(self) -> tuple[float, ...]:
        """Every run's samples, pooled in (process, round) order."""
        return tuple(x for r in self.runs for x in r.samples_us)

    @cached_property
    def replay_us(self) -> tuple[float, ...]:
        """Every graph replay's time (us per call), pooled; the samples where a sample is one replay."""
        return tuple(x for r in self.runs for x in r.replays)

    @property
    def processes(self) -> int:
        return len({r.process for r in self.runs})

    @property
    def samples_per_round(self) -> list[int]:
        return [len(r.samples_us) for r in self.runs]

    @property
    def samples_per_process(self) -> list[int]:
        counts: dict[int, int] = {}
        for r in self.runs:
            counts[r.process] = counts.get(r.process, 0) + len(r.samples_us)
        return list(counts.values())

    @cached_property
    def summary(self) -> stats.Summary | None:
        """``hisparse.stats.summary`` of the pooled samples (modes of the replays); None without samples."""
        return stats.summary(self.samples_us, self.replay_us) if self.samples_us else None

    @property
    def stats(self) -> dict | None:
        """The ``stats`` object of v1 (``{"n", "median_us", "q1_us", ...}``), computed."""
        return self.summary.to_dict() if self.summary is not None else None

    @property
    def median_us(self) -> float | None:
        return self.summary.median if self.summary is not None else None

    @property
    def speedup(self) -> float | None:
        """median(baseline) / median(this case), for the baseline the engine linked (``speedup_link``)."""
        return self.speedup_link.value if self.speedup_link is not None else None

    @property
    def derived(self) -> dict | None:
        """v1's ``derived`` object: gbps and the floor ratios computed, the speedup from the stored link."""
        if not self.ok:
            return None
        out: dict[str, Any] = {**derived_figures(self.median_us, self.work, self.floor),
                               "speedup_vs_lru_sequential": self.speedup}
        if self.speedup_link is not None:
            out["speedup_baseline"] = self.speedup_link.baseline
        return out

    @property
    def clocks(self) -> dict | None:
        """Every run's clock readings, concatenated in run order (sources that differ joined with "+")."""
        parts = [r.clocks for r in self.runs if r.clocks is not None]
        if not parts:
            return None
        out: dict[str, Any] = {}
        for key in dict.fromkeys(k for p in parts for k in p):
            values = [p.get(key) for p in parts]
            if all(isinstance(v, list) or v is None for v in values):
                out[key] = [x for v in values for x in v or ()]
            else:
                out[key] = "+".join(dict.fromkeys(str(v) for v in values if v is not None))
        return out

    @property
    def timing(self) -> dict:
        """v1's ``timing`` object: the settings plus the split of the pooled samples (rounds,
        samples_per_round, processes, samples_per_process, placements, warmup_us, replay_us) and
        ``retime_errors``, rebuilt from the runs."""
        t = dict(self.settings)
        if self.runs:
            t["rounds"] = len(self.runs)
            t["samples_per_round"] = self.samples_per_round
            t["warmup_us"] = [x for r in self.runs for x in r.warmup_us]
            if any(r.placement is not None for r in self.runs):
                t["placements"] = [r.placement or {} for r in self.runs]
            if self.processes > 1:
                t["processes"], t["samples_per_process"] = self.processes, self.samples_per_process
            if any(r.replay_us for r in self.runs):
                t["replay_us"] = list(self.replay_us)
        if self.retime_errors:
            t["retime_errors"] = list(self.retime_errors)
        return t

    # ----- file form

    def to_dict(self) -> dict:
        """The case as written (schema v2): measured data only."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["runs"] = [r.to_dict() for r in self.runs]
        d["speedup_link"] = self.speedup_link.to_dict() if self.speedup_link is not None else None
        if self.counterpart_link is None:
            del d["counterpart_link"]  # absent = none: files without sglang cases stay as they were
        else:
            d["counterpart_link"] = self.counterpart_link.to_dict()
        return _clean(d)

    def flat_dict(self) -> dict:
        """The case as one v1-shaped dict with every figure computed (``samples_us`` pooled, ``stats``,
        ``derived``, ``timing``, ``clocks``) plus the ``runs``: for readers of plain dicts
        (hisparse.track.history.RunFile.cases, the dashboard, the nightly gate)."""
        return _clean({
            "case_id": self.case_id, "params": self.params, "status": self.status, "reason": self.reason,
            "timing": self.timing, "samples_us": self.samples_us, "stats": self.stats, "work": self.work,
            "floor": self.floor, "derived": self.derived, "clocks": self.clocks, "wall_s": self.wall_s,
            "runs": [r.to_dict() for r in self.runs],
        })

    @classmethod
    def from_dict(cls, data: dict) -> "CaseResult":
        if not isinstance(data, dict):
            raise ResultFormatError(f"case entry: expected an object, got {type(data).__name__}")
        for key in ("case_id", "params", "status"):
            if key not in data:
                raise ResultFormatError(f"case entry {data.get('case_id', '?')}: missing field {key!r}")
        if not isinstance(data.get("runs") or [], list):
            raise ResultFormatError(f"case {data['case_id']}: runs must be a list")
        link = data.get("speedup_link")
        if link is not None and (not isinstance(link, dict) or not link.get("baseline")):
            raise ResultFormatError(f"case {data['case_id']}: speedup_link must be {{\"baseline\", \"value\"}} or null")
        pair = data.get("counterpart_link")
        if pair is not None and (not isinstance(pair, dict) or not pair.get("case_id")
                                 or not (pair.get("ratio") is None or _is_number(pair.get("ratio")))):
            raise ResultFormatError(f"case {data['case_id']}: counterpart_link must be {{\"case_id\", \"ratio\"}} "
                                    f"(ratio a number or null) or null, got {pair!r}")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})  # newer minor additions are ignored

    @classmethod
    def failed(cls, case_id: str, params: dict, reason: str, *, timing: dict | None = None,
               wall_s: float = 0.0) -> "CaseResult":
        """A case that was not timed; ``timing``: the settings it would have used."""
        return cls(case_id=case_id, params=params, status="failed", reason=reason, settings=timing or {},
                   wall_s=wall_s)


def _refuse_duplicate_ids(cases: tuple[CaseResult, ...]) -> None:
    """A case id twice is two answers to one question: compare took the first entry and gate the
    second, and they disagreed. Refused rather than either picked."""
    seen: dict[str, int] = {}
    for i, c in enumerate(cases):
        if c.case_id in seen:
            raise ResultFormatError(f"case {c.case_id}: the case id appears twice (cases[{seen[c.case_id]}] and "
                                    f"cases[{i}]); a run holds one entry per case")
        seen[c.case_id] = i


@dataclass(frozen=True)
class Resume:
    """One ``--resume`` of a run file: when it started, the environment keys it found different from
    the file's (those checked on resume never differ; the host, the JIT cache, ... may), and the cases
    it timed. A resumed run may have timed its cases on another machine start than their baselines and
    counterparts: readers say so (2026-12-06: a vs-sglang run finished on a second H100 start)."""

    started: str
    environment: dict
    cases: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"started": self.started, "environment": self.environment, "cases": list(self.cases)}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "Resume":
        if not isinstance(data, dict):
            raise ResultFormatError(f"{where} must be an object (started, environment, cases), got {data!r}")
        started, env, cases = data.get("started"), data.get("environment", {}), data.get("cases", [])
        if not isinstance(started, str):
            raise ResultFormatError(f"{where}.started must be a UTC time string, got {started!r}")
        if not isinstance(env, dict):
            raise ResultFormatError(f"{where}.environment must be an object (key: the resuming value), got {env!r}")
        if not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
            raise ResultFormatError(f"{where}.cases must be a list of case ids, got {cases!r}")
        return cls(started, env, tuple(cases))


@dataclass(frozen=True)
class RunRecord:
    """A whole run file. ``finished`` is None while the sweep runs or after an interruption;
    ``resumes``: one entry per ``--resume`` that continued it."""

    run_id: str
    created: str
    backend: str
    config: dict
    environment: dict
    floors: dict
    cases: tuple[CaseResult, ...] = ()
    finished: str | None = None
    schema_version: int = SCHEMA_VERSION
    resumes: tuple[Resume, ...] = ()

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ResultFormatError(f"run {self.run_id}: backend must be one of {BACKENDS}, got {self.backend!r}")
        object.__setattr__(self, "cases", tuple(self.cases))

    @property
    def config_hash(self) -> str | None:
        return self.config.get("hash")

    def case_ids(self) -> list[str]:
        return [c.case_id for c in self.cases]

    @property
    def resumed_case_count(self) -> int:
        """How many of its cases a ``--resume`` timed (0: every case by the session that created it)."""
        return sum(len(r.cases) for r in self.resumes)

    def session_of(self, case_id: str) -> int:
        """Which session timed the case: 0 the one that created the file, k the k-th resume."""
        for k in range(len(self.resumes), 0, -1):
            if case_id in self.resumes[k - 1].cases:
                return k
        return 0

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
        data = {
            "schema_version": SCHEMA_VERSION,  # the writer writes the current version only
            "run_id": self.run_id,
            "created": self.created,
            "finished": self.finished,
        }
        if self.resumes:  # absent when never resumed: such a file reads as it did before the key existed
            data["resumes"] = [r.to_dict() for r in self.resumes]
        return _clean({
            **data,
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
#   2 (2026-12): the measurement model. A case's pooled "samples_us" and the split keys of "timing"
#     become "runs" (one object per process and timing round: process, round, samples_us, replay_us,
#     warmup_us, clocks, placement); "timing" minus those keys becomes "settings"; "stats", "derived"
#     and the case's "clocks" are no longer stored (computed from the runs: CaseResult properties);
#     the speedup link ("derived.speedup_baseline" + "derived.speedup_vs_lru_sequential") becomes
#     "speedup_link" {"baseline", "value"}; "timing.retime_errors" becomes "retime_errors".
#     Later v2 additions (older v2 readers ignore them): "counterpart_link" {"case_id", "ratio"} on our
#     case that has sglang's counterpart in the run (2026-12, issue 12: ratio = median ours / median
#     sglang's; absent: no counterpart in the run). "work.host_bytes_per_call" (2026-12-01: distinct
#     host rows' bytes read per call; absent: not counted). "environment.iommu" and
#     "environment.hypervisor", and "environment.cpu" as the processor model instead of the
#     architecture (2026-12-06: absent, or "x86_64", in older files). "resumes" [{"started",
#     "environment", "cases"}] (2026-12-06: one per --resume; absent: never resumed, or resumed
#     before the key existed, so every case reads as timed by the session that created the file).
#     Upgrade (_UPGRADES[1], _case_v1_to_v2): rounds from timing.samples_per_round (absent: one),
#     their process from timing.samples_per_process (absent: one); warm-ups, clock lists and
#     placements split by round where their lengths line up, else kept whole on the first run.
#
# _UPGRADES[v] turns a version-v dict into a version-(v+1) dict; load applies them in order.


def _split(values: list, sizes: list[int]) -> list[list] | None:
    """``values`` cut into consecutive pieces of ``sizes``; None when the lengths do not add up."""
    if len(values) != sum(sizes):
        return None
    out, at = [], 0
    for n in sizes:
        out.append(values[at:at + n])
        at += n
    return out


def _round_processes(case_id: str, sizes: list[int], per_process: list[int]) -> list[tuple[int, int]]:
    """(process, round within it) of each v1 round: rounds fill the processes' sample counts in order."""
    out, process, used, round_in = [], 0, 0, 0
    for n in sizes:
        if process < len(per_process) and used >= per_process[process]:
            process, used, round_in = process + 1, 0, 0
        out.append((process, round_in))
        used += n
        round_in += 1
        if process >= len(per_process) or used > per_process[process]:
            raise ResultFormatError(f"case {case_id}: timing.samples_per_process {per_process} does not split "
                                    f"timing.samples_per_round {sizes} into whole rounds")
    return out


def _v1_runs(case_id: str, samples: list, timing: dict, clocks: dict | None) -> list[dict]:
    """The v2 ``runs`` of a v1 case: its pooled samples (and what was concatenated with them) cut by round."""
    if not samples:
        return []
    sizes = [int(n) for n in timing.get("samples_per_round") or [len(samples)]]
    if sum(sizes) != len(samples) or any(n <= 0 for n in sizes):
        raise ResultFormatError(f"case {case_id}: timing.samples_per_round {sizes} does not add up to the "
                                f"{len(samples)} samples_us")
    k = int(timing.get("replays_per_sample") or 1)
    replay = list(timing.get("replay_us") or [])
    replays = _split(replay, [n * k for n in sizes]) if replay else [[] for _ in sizes]
    if replays is None:
        raise ResultFormatError(f"case {case_id}: timing.replay_us has {len(replay)} replays, not "
                                f"{k} (replays_per_sample) x {len(samples)} samples")
    where = _round_processes(case_id, sizes, [int(n) for n in timing.get("samples_per_process") or [len(samples)]])
    warm = list(timing.get("warmup_us") or [])
    warms = _split(warm, [len(warm) // len(sizes)] * len(sizes)) or [warm] + [[] for _ in sizes[1:]]
    placements = timing.get("placements") if isinstance(timing.get("placements"), list) else []
    per_clock = _v1_clocks(clocks, sizes) if isinstance(clocks, dict) else [None] * len(sizes)
    return [{"process": p, "round": r, "samples_us": s, "replay_us": rep, "warmup_us": w, "clocks": c,
             "placement": placements[i] if len(placements) == len(sizes) else None}
            for i, ((p, r), s, rep, w, c) in enumerate(zip(where, _split(samples, sizes), replays, warms, per_clock))]


def _v1_clocks(clocks: dict, sizes: list[int]) -> list[dict]:
    """v1's clock lists (one reading per sample, rounds concatenated) cut by round; lists of another
    length (a sampler that lost NVML mid-case) stay whole with the first round."""
    out = [{} for _ in sizes]
    for key, value in clocks.items():
        pieces = _split(list(value), sizes) if isinstance(value, list) else None
        for i, d in enumerate(out):
            if pieces is not None:
                d[key] = pieces[i]
            elif isinstance(value, list):
                d[key] = list(value) if i == 0 else []
            else:
                d[key] = value
    return out


def _case_v1_to_v2(case: dict) -> dict:
    """One v1 case dict as a v2 case dict (format history above)."""
    case_id = case.get("case_id", "?")
    timing = case.get("timing") if isinstance(case.get("timing"), dict) else {}
    samples = list(case.get("samples_us") or [])
    runs = _v1_runs(case_id, samples, timing, case.get("clocks"))
    settings = {k: v for k, v in timing.items() if k not in V1_SPLIT_KEYS}
    if runs:  # v1's timing.rounds counted every round of every process; the setting is per process
        settings["rounds"] = sum(1 for r in runs if r["process"] == 0)
    elif "rounds" in timing:
        settings["rounds"] = timing["rounds"]
    derived = case.get("derived") if isinstance(case.get("derived"), dict) else {}
    link = ({"baseline": derived["speedup_baseline"], "value": derived.get("speedup_vs_lru_sequential")}
            if derived.get("speedup_baseline") else None)
    out = {k: v for k, v in case.items() if k not in ("timing", "samples_us", "stats", "derived", "clocks")}
    return {**out, "settings": settings, "runs": runs, "speedup_link": link,
            "retime_errors": list(timing.get("retime_errors") or [])}


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


def _v1_to_v2(data: dict) -> dict:
    if not isinstance(data.get("cases"), list):
        return data  # run_from_dict names the problem
    return {**data, "cases": [_case_v1_to_v2(_legacy_speedup(c)) if isinstance(c, dict) else c
                              for c in data["cases"]]}


_UPGRADES: dict[int, Any] = {1: _v1_to_v2}


def upgrade(data: dict) -> dict:
    """Bring a parsed run file to SCHEMA_VERSION; refuse unknown or future versions."""
    if not isinstance(data, dict) or "schema_version" not in data:
        what = "a JSON object without schema_version" if isinstance(data, dict) else f"JSON {type(data).__name__}"
        raise ResultFormatError(f"not a run file: {what} (a run file is what `hisparse-bench run` writes)")
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


def run_from_dict(data: dict) -> RunRecord:
    data = upgrade(data)
    for key in ("run_id", "created", "backend", "config", "environment", "cases"):
        if key not in data:
            raise ResultFormatError(f"run file: missing field {key!r}")
    if not isinstance(data["cases"], list):
        raise ResultFormatError("run file: 'cases' must be a list")
    if not isinstance(data["environment"], dict):
        # without it nothing says which machine, GPU or commit measured the cases: no verdict can use them
        raise ResultFormatError(f"run file: environment must be an object (machine, gpu, git_commit, ...), "
                                f"got {data['environment']!r}")
    problems = metadata.validate(data["environment"])
    if problems:
        raise ResultFormatError("run file: " + "; ".join(problems))
    try:
        record = RunRecord(
            run_id=data["run_id"], created=data["created"], finished=data.get("finished"),
            backend=data["backend"], config=data["config"] or {}, environment=data["environment"],
            floors=data.get("floors") or {}, cases=tuple(CaseResult.from_dict(c) for c in data["cases"]),
            schema_version=data["schema_version"], resumes=_resumes(data.get("resumes", [])),
        )
    except TypeError as e:  # a field of the wrong shape
        raise ResultFormatError(f"run file: {e}") from e
    _refuse_duplicate_ids(record.cases)
    return record


def _resumes(data: Any) -> tuple[Resume, ...]:
    if not isinstance(data, list):
        raise ResultFormatError(f"run file: resumes must be a list (one object per --resume), got {data!r}")
    return tuple(Resume.from_dict(r, f"resumes[{i}]") for i, r in enumerate(data))


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


def write_run(record: RunRecord, path: str | os.PathLike) -> Path:
    """Write ``record`` atomically (hisparse/files.py): a reader never sees a torn run file."""
    return write_json_atomic(path, record.to_dict())


def make_run_id(created: datetime, commit: str | None, config_name: str) -> str:
    """``<YYYYmmdd-HHMMSS>_<commit12>_<config>`` (UTC)."""
    safe = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in config_name) or "config"
    # the commit may come from HISPARSE_GIT_COMMIT: a path separator there would move the run file
    return f"{created.strftime('%Y%m%d-%H%M%S')}_{safe_name((commit or 'nogit')[:12], fallback='nogit')}_{safe}"


class RunWriter:
    """Keeps a run file current: every ``add`` rewrites it atomically.

    ``RunWriter.resume(path, ...)`` reopens an interrupted run; it refuses a different config hash,
    backend, or environment (``metadata.CHECKED_KEYS``), because the cases would not be comparable.
    """

    def __init__(self, path: str | os.PathLike, record: RunRecord) -> None:
        self.path = Path(path)
        self.record = record
        self._kept: dict[str, tuple[CaseResult, dict]] = {}  # resume: case id -> (as loaded, its entry as read)
        self._resuming = False  # resume: add() lists each case in the file's last "resumes" entry

    @classmethod
    def create(cls, path: str | os.PathLike, record: RunRecord, *, exclusive: bool = True) -> "RunWriter":
        """``exclusive``: claim the name first (FileExistsError when it is taken, even by a run started
        at the same moment: two runs once passed the "exists?" check together and wrote one file)."""
        if exclusive:
            claim_new(path)
        writer = cls(path, record)
        writer.flush()
        return writer

    @classmethod
    def resume(cls, path: str | os.PathLike, *, config_hash: str, backend: str,
               environment: dict | None = None) -> "RunWriter":
        record, entries = _load_with_entries(path)
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
        found = {k: v for k, v in (environment or {}).items() if record.environment.get(k) != v}
        resumed = replace(record, finished=None, resumes=record.resumes + (Resume(utc_now(), found),))
        writer = cls(path, resumed)
        writer._resuming = True
        if entries is not None:
            writer._kept = {c.case_id: (c, e) for c, e in zip(record.cases, entries)}
        return writer

    @property
    def done_ids(self) -> set[str]:
        return set(self.record.case_ids())

    def add(self, result: CaseResult) -> None:
        self.replace_record(self.record.with_case(result))

    def replace_record(self, record: RunRecord) -> None:
        if self._resuming:  # a case the file did not hold was timed by this session: the last resume lists it
            had = set(self.record.case_ids())
            new = tuple(cid for cid in record.case_ids() if cid not in had)
            if new:
                last = record.resumes[-1]
                record = replace(record, resumes=record.resumes[:-1] + (replace(last, cases=last.cases + new),))
        self.record = record
        self.flush()

    def finish(self) -> RunRecord:
        self.record = replace(self.record, finished=utc_now())
        self.flush()
        return self.record

    def flush(self) -> None:
        data = self.record.to_dict()
        if self._kept:  # a resumed file's cases this process did not time are written back as they were read
            data["cases"] = [self._as_read(c, d) for c, d in zip(self.record.cases, data["cases"])]
        write_json_atomic(self.path, data)

    def _as_read(self, case: CaseResult, written: dict) -> dict:
        kept = self._kept.get(case.case_id)
        return kept[1] if kept is not None and kept[0] is case else written


def _load_with_entries(path: str | os.PathLike) -> tuple[RunRecord, list | None]:
    """``load_run(path)`` and, for a file of the current schema, its case entries as they stand in the
    file (None for an older schema: those cases are rewritten upgraded)."""
    record = load_run(path)
    data = json.loads(Path(path).read_text())
    return record, data["cases"] if data.get("schema_version") == SCHEMA_VERSION else None
