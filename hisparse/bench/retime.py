"""More timing processes for a finished run (pyperf's worker processes, for the same reason).

Rounds inside one process (``timing.rounds``) vary where the host rows are read from and where the
device buffers land, but some state is fixed for a whole process: on the H200 sequential LRU on
shared host rows ran 4.9% apart between three processes while every round of one process agreed
(results/stability/README.md). ``hisparse-bench run --processes N`` therefore runs the sweep (checks,
recorded calls, floors, rounds) and then N-1 fresh processes of ``hisparse-bench retime RUN``, each
adding ``timing.rounds`` more runs (process index p, rounds 0..) to every ok case of the file; the
case's statistics and derived figures are computed from all its runs whenever they are read.

A retime process does no checks: the data (same seed) and the kernels are those the first process
checked before it timed. A case that fails in a retime process keeps what it had (the reason goes to
``retime_errors``); the file is rewritten after every case, so an interrupted retime leaves every case
whole, some with one process fewer (``CaseResult.processes`` says how many).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from hisparse.bench import measure
from hisparse.results import metadata
from hisparse.bench import timing
from hisparse.errors import HisparseError
from hisparse.results.model import CaseResult, RunRecord, RunWriter, load_run


class RetimeError(HisparseError):
    """The run file cannot be retimed here (its config changed, another backend...)."""


# Settings every run of one case must share: their samples are pooled.
POOLED_SETTINGS = ("calls_per_graph", "replays", "warmup_calls", "l2_flush", "method", "replays_per_sample")


def _pooled(settings: dict) -> dict:
    return {"replays_per_sample": 1, **{k: settings[k] for k in POOLED_SETTINGS if k in settings}}


def merge(result: CaseResult, rounds: list[timing.Measurement], placements: list[dict]) -> CaseResult:
    """``result`` plus one more process's rounds, as runs of the next process index (placements[i]
    for round i). Refuses rounds timed with other settings than the case's: they cannot be pooled."""
    if not rounds:
        return result
    old, new = _pooled(result.settings), _pooled(measure.settings_of(rounds[0]))
    differ = [k for k in old if old[k] != new.get(k)]  # keys an older file did not record are not checked
    if differ:
        raise ValueError(f"merge: {result.case_id}: rounds timed with other settings ({', '.join(differ)}) "
                         "cannot be pooled with the case's")
    process = max((r.process for r in result.runs), default=-1) + 1
    runs = tuple(measure.run_of(m, process=process, round_index=i, where=placements[i] if i < len(placements) else None)
                 for i, m in enumerate(rounds))
    return replace(result, runs=result.runs + runs)


def retime_case(case: Any, result: CaseResult, backend: Any,
                make_workload: Callable[..., Any] | None = None) -> CaseResult:
    """``case.timing.rounds`` rounds of ``case`` in this process, merged into ``result``; on failure
    ``result`` unchanged but for ``retime_errors``."""
    make = make_workload or measure.default_make_workload
    try:
        rounds, placements = measure.time_rounds(case, backend, make, measure.case_settings(case),
                                                 range(case.rounds))
    except Exception as e:  # noqa: BLE001 (one case's failure is recorded; the others go on)
        return replace(result, retime_errors=result.retime_errors + (f"{type(e).__name__}: {e}",))
    return merge(result, rounds, placements)


def cases_of(record: RunRecord) -> dict[str, Any]:
    """The Case objects of a run file, rebuilt from its config (path, --ci, filters); refuses a
    config whose hash no longer matches the file's."""
    from hisparse.bench.config import load_config  # noqa: PLC0415

    cfg_block = record.config or {}
    path = cfg_block.get("path")
    if not path:
        raise RetimeError("the run file does not say which config it ran")
    cfg = load_config(path)
    if cfg_block.get("hash") and cfg.config_hash != cfg_block["hash"]:
        raise RetimeError(f"{path}: the config changed since the run (hash {cfg.config_hash[:12]}, "
                          f"the run's {str(cfg_block['hash'])[:12]}): its cases cannot be retimed")
    expansion = cfg.expand(ci=bool(cfg_block.get("ci")), filters=tuple(cfg_block.get("filters") or ()))
    return {c.case_id: c for c in expansion.cases}


def retime_run(path: str | Path, backend: Any) -> Iterator[tuple[str, CaseResult]]:
    """Retime every ok case of the run file ``path`` in this process, rewriting the file after each
    case; yields (case id, merged result)."""
    record = load_run(path)
    if record.backend != backend.name:
        raise RetimeError(f"{path}: the run used backend {record.backend!r}, not {backend.name!r}")
    diff = metadata.mismatches(record.environment, metadata.collect_environment(backend.device))
    if diff:
        raise RetimeError(f"{path}: cannot add timings from a different environment: " + "; ".join(diff))
    cases = cases_of(record)
    writer = RunWriter(path, record)  # not resume(): the run stays "finished" while more processes add to it
    todo = [r.case_id for r in record.cases if r.ok and r.case_id in cases]
    done: list[str] = []
    try:
        for result in record.cases:
            case = cases.get(result.case_id)
            if not result.ok or case is None:
                continue
            merged = retime_case(case, result, backend)
            record = writer.record
            writer.replace_record(measure.link_cases(replace(
                record, cases=tuple(merged if c.case_id == result.case_id else c for c in record.cases))))
            done.append(result.case_id)
            yield result.case_id, merged
    except (KeyboardInterrupt, GeneratorExit):
        _mark_not_retimed(writer, [c for c in todo if c not in done])
        raise


INTERRUPTED = "interrupted: this retime process was cut before it timed the case"


def _mark_not_retimed(writer: RunWriter, case_ids: list[str]) -> None:
    """A cut retime leaves some cases with one process more than others; the file says which did not get
    it (in ``retime_errors``, where a failed retime is recorded too), so nobody reads it as uniform."""
    if not case_ids:
        return
    skip = set(case_ids)
    writer.replace_record(replace(writer.record, cases=tuple(
        replace(c, retime_errors=c.retime_errors + (INTERRUPTED,)) if c.case_id in skip else c
        for c in writer.record.cases)))
