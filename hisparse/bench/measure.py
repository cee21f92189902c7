"""One case, end to end: ``run_case(case, backend, floors=...) -> CaseResult``; and the sweep over
cases that keeps the run file current (``run_sweep``).

Order inside a case (a fast wrong kernel posts no number, docs/semantics.md §H4):
1. build the workload;
2. correctness: ``check_calls`` eager calls of exactly the timed ops, each checked by the invariant
   checker (single-step also bit-exact against the reference on clones, on a kernel backend). The
   first violation fails the case with its reason and no timing;
3. reset; ``calls_per_graph`` eager calls with the miss plan recorded (untimed): rows copied per call
   (for the gather floor) and hits per call;
4. reset; timing (``timing.time_calls``: the only timing loop);
5. the gather floor of the recorded rows, timed the same way;
6. rounds 1..``timing.rounds``-1: drop the workload, build it again (same seed: same schedule and
   rows; new device allocations, host rows read ``round_host_offset_rows`` further into the shared
   pinned pool), time it again (no checks, no recorded calls, no floor). Each round is one ``Run`` of
   the result (``run_of``); the per-case statistics (CaseResult properties) pool all of them.
Any exception (OOM, build error, unavailable kernel) fails the case with its message; the sweep goes
on. Host memory of the case's kind that the machine cannot give (huge pages not reserved, one NUMA node:
``HostAllocationError``) skips it with the reason instead: the machine lacks it, the code is not at fault.
KeyboardInterrupt is not caught.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from hisparse.bench import floors as floors_mod
from hisparse.bench import calls as implementations
from hisparse.bench import timing
from hisparse.bench.floors import PinnedBandwidth
from hisparse.errors import HostAllocationError
from hisparse.results.model import CaseResult, CounterpartLink, Run, RunRecord, RunWriter, SpeedupLink

MAX_REASON_VIOLATIONS = 3

# Timing round r >= 1 reads its host rows r * ROUND_HOST_SHIFT_BYTES further into the process-wide
# pinned pool (hisparse/bench/host_cache.py: every workload's host cache is a view of it, so a rebuilt
# workload alone would read the very same pages). One 2 MiB huge page plus one 4 KiB page: every row
# moves to another 4 KiB page and, on huge pages, to another offset within its huge page.
ROUND_HOST_SHIFT_BYTES = (2 << 20) + (4 << 10)


def case_params(case: Any) -> dict:
    """The ``params`` object of a result: the case's own dict, without its timing settings (those
    are stored under ``timing`` as applied)."""
    d = dict(case.to_dict())
    d.pop("timing", None)
    return d


def _settings_dict(case: Any) -> dict:
    """The timing settings a failed case records: the config's (``TimingSettings.to_dict``, which
    leaves out a default ``replays_per_sample``) without ``check_calls``, which is not timing."""
    return {k: v for k, v in case.timing.to_dict().items() if k != "check_calls"}


def format_violations(violations: list) -> str:
    parts = []
    for v in violations[:MAX_REASON_VIOLATIONS]:
        where = f" for request {v.request}" if v.request is not None else ""
        entry = f" entry {v.entry}" if v.entry is not None else ""
        parts.append(f"invariant {v.invariant} failed{where}{entry}: {v.detail}")
    more = len(violations) - MAX_REASON_VIOLATIONS
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def release(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch  # noqa: PLC0415

        torch.cuda.empty_cache()


def default_make_workload(case: Any, device: str, **kw: Any) -> Any:
    from hisparse.bench.workload import make_workload  # noqa: PLC0415

    return make_workload(case, device, **kw)


def round_host_offset_rows(case: Any, round_index: int) -> int:
    """Host rows by which timing round ``round_index`` shifts its view of the pinned pool (0 for round 0,
    the checked one: only offset 0 holds the documented byte pattern)."""
    per_round = -(-ROUND_HOST_SHIFT_BYTES // int(case.item_size_bytes))  # whole rows, rounded up
    return round_index * per_round


def placement(workload: Any) -> dict:
    """Where a round's buffers landed (virtual addresses, hex), recorded per round so a re-analysis can
    tell whether rounds really measured different placements."""
    buffers = getattr(workload, "buffers", None)
    return {name: hex(t.data_ptr()) for name in ("host_cache", "device_buffer")
            if (t := getattr(buffers, name, None)) is not None and hasattr(t, "data_ptr")}


def _device_buffer(workload: Any) -> Any:
    """The round's device KV buffer, kept alive while later rounds of the case are built and timed.

    Freed and re-allocated, it came back at the very same address in every round on the H200
    (timing.placements of configs/stability.yaml, 2026-11-29: a 2 MiB spacer allocation did not move
    it), so rounds measured one device placement per process, and the run-to-run shift that rounds
    are meant to average stayed between processes. Held, each round got its own address and the
    stability probe's between-process spread fell from 4.9% to <= 1.1% (results/stability/README.md).
    Holding it costs one device buffer per extra round (2.6 GB at the default config's largest case); a
    case in the decode regime holds every layer's."""
    layered = getattr(workload, "device_buffers", None)
    if layered is not None:
        return layered
    return getattr(getattr(workload, "buffers", None), "device_buffer", None)


def case_settings(case: Any) -> timing.Settings:
    """The timing settings of ``case`` as applied: its graph holds ``case.graph_calls`` calls (whole decode
    steps in the decode regime)."""
    return replace(timing.Settings.of(case.timing), calls_per_graph=int(getattr(case, "graph_calls",
                                                                                  case.timing.calls_per_graph)))


def time_round(case: Any, backend: Any, make_workload: Callable[..., Any], settings: timing.Settings,
           round_index: int, held: list) -> tuple[timing.Measurement, dict]:
    """One more timing round of ``case`` on a fresh workload (the caller has released the previous
    round's): new device allocations, host rows shifted in the pinned pool. Same seed, same schedule
    and rows: no checks, no recorded calls, no floor.

    Why: a case's time can depend on where its buffers land physically (pinned host / device
    addresses -> L2 slices), fixed within one allocation: on an H200 two runs moved a median 4.5-9%
    while each run's own samples stayed within 2%. Other placements per round put that spread inside
    the pooled samples, where the median averages over it. Each round's device buffer joins ``held``
    so the next round's cannot reuse its address (``_device_buffer``)."""
    workload = make_workload(case, backend.device, host_offset_rows=round_host_offset_rows(case, round_index))
    bound = implementations.bind(case.implementation, backend, workload, pdl=case.pdl)
    workload.reset()
    measured = timing.time_calls(bound.call, reset=workload.reset, settings=settings, device=backend.device)
    held.append(_device_buffer(workload))
    return measured, placement(workload)


def time_rounds(case: Any, backend: Any, make_workload: Callable[..., Any], settings: timing.Settings,
                rounds: range) -> tuple[list[timing.Measurement], list[dict]]:
    """``time_round`` for each round index in ``rounds`` (measurements, placements), every round's
    device buffer held until the last is timed, then released. For callers that time rounds on their
    own (``hisparse-bench retime``, the asv suite); ``run_case`` keeps its round 0 checks and floor."""
    held: list = []
    measured, placements = [], []
    try:
        for r in rounds:
            m, where = time_round(case, backend, make_workload, settings, r, held)
            measured.append(m)
            placements.append(where)
    finally:
        held.clear()
        release(backend.device)
    return measured, placements


def skip_reason(case: Any, backend: Any) -> str | None:
    """Why ``case`` cannot run with ``backend`` at all (recorded as skipped, not failed): sglang's
    implementations without sglang, or on the reference backend. None for every other case."""
    from hisparse.bench import implementations as table  # noqa: PLC0415

    if table.get(case.implementation).source != "sglang":
        return None
    from hisparse.bench import sglang  # noqa: PLC0415

    return sglang.unavailable_reason(backend=backend)


def run_case(
    case: Any,
    backend: Any,
    *,
    floors: PinnedBandwidth,
    make_workload: Callable[..., Any] | None = None,
) -> CaseResult:
    """Check, then time one case; never raises for a failing case (status "failed" + reason).

    ``make_workload(case, device)`` builds round 0's workload; rounds after it call
    ``make_workload(case, device, host_offset_rows=...)`` (hisparse.bench.workload.make_workload)."""
    t0 = time.perf_counter()
    params = case_params(case)
    settings = case_settings(case)
    make_workload = make_workload or default_make_workload
    workload = bound = records = None
    held: list = []  # earlier rounds' device buffers (see _device_buffer)
    where = ""  # "round N: " in a failure reason from a round after the first

    def failed(reason: str) -> CaseResult:
        return CaseResult.failed(case.case_id, params, reason, timing=_settings_dict(case),
                                 wall_s=time.perf_counter() - t0)

    def skipped(reason: str) -> CaseResult:
        return CaseResult(case.case_id, params, "skipped", reason=reason, settings=_settings_dict(case),
                          wall_s=time.perf_counter() - t0)

    if (skip := skip_reason(case, backend)) is not None:
        return skipped(skip)

    try:
        workload = make_workload(case, backend.device)
        bound = implementations.bind(case.implementation, backend, workload, pdl=case.pdl)

        workload.reset()
        for i in range(int(case.timing.check_calls)):
            violations = bound.checked_call()
            if violations:
                return failed(f"check call {i}: " + format_violations(violations))

        workload.reset()
        records = [bound.recorded_call() for _ in range(settings.calls_per_graph)]
        work = floors_mod.work_of(records, int(case.item_size_bytes))

        workload.reset()
        rounds = [timing.time_calls(bound.call, reset=workload.reset, settings=settings,
                                    device=backend.device)]
        placements = [placement(workload)]
        held.append(_device_buffer(workload))  # its address stays taken: the next round lands elsewhere
        gather, gather_warm = floors_mod.measure_gather_floor(backend, records, settings, int(case.item_size_bytes),
                                                              warm=case.layers > 1)

        for r in range(1, case.rounds):
            where = f"round {r}: "
            workload = bound = records = None  # one round's tensors alive at a time (records hold buffers)
            release(backend.device)
            measured, where_placed = time_round(case, backend, make_workload, settings, r, held)
            rounds.append(measured)
            placements.append(where_placed)
    except HostAllocationError as e:  # the machine cannot give this memory: skipped, with the OS's reason
        return skipped(f"{where}{e}")
    except Exception as e:  # noqa: BLE001 (every failure of one case is recorded, the sweep goes on)
        return failed(f"{where}{type(e).__name__}: {e}")
    finally:
        workload = bound = records = None  # drop the case's tensors before the next case allocates
        held.clear()
        release(backend.device)

    return CaseResult(
        case_id=case.case_id, params=params, status="ok", reason=None,
        settings={**settings_of(rounds[0]), "rounds": case.rounds},
        runs=tuple(run_of(m, process=0, round_index=r, where=placements[r]) for r, m in enumerate(rounds)),
        work=work.to_dict(), floor=floors_mod.floor_dict(work, gather, floors, gather_warm),
        wall_s=time.perf_counter() - t0,
    )


def settings_of(m: timing.Measurement) -> dict:
    """The ``settings`` of a result: the timing settings as ``time_calls`` applied them (at least
    MIN_SAMPLES samples, the method of the backend); ``replays_per_sample`` only when above 1."""
    d = {"calls_per_graph": m.calls_per_graph, "replays": m.replays, "warmup_calls": m.warmup_calls,
         "l2_flush": m.l2_flush, "method": m.method}
    if m.replays_per_sample > 1:
        d["replays_per_sample"] = m.replays_per_sample
    return d


def run_of(m: timing.Measurement, *, process: int, round_index: int, where: dict | None) -> Run:
    """One timing round (one ``time_calls``) as a result's Run; ``replay_us`` only where a sample
    averaged several replays (else they are the samples, stored once)."""
    return Run(process=process, round=round_index, samples_us=m.samples_us,
               replay_us=m.replay_us if m.replays_per_sample > 1 else (), warmup_us=m.warmup_us,
               clocks=m.clocks.to_dict(), placement=where)


# ---------------------------------------------------------------------------------------------
# Across cases


def _baseline_id(params: dict) -> str | None:
    from hisparse.bench.case import baseline_id_of  # noqa: PLC0415

    return baseline_id_of(params)


def link_speedups(record: RunRecord, baseline_of: Callable[[dict], str | None] = _baseline_id) -> RunRecord:
    """Link every ok case that has a baseline (``Case.baseline_id``: the same work by sequential LRU,
    pdl off) to it: ``speedup_link`` = (baseline id, median(baseline) / median(case)), the value None
    while the baseline is not ok in the run."""
    by_id = {c.case_id: c for c in record.cases}
    updated = []
    for c in record.cases:
        base_id = baseline_of(c.params) if c.ok else None
        if base_id is None:
            updated.append(c)
            continue
        base = by_id.get(base_id)
        speedup = None
        if base is not None and base.ok and c.median_us:
            speedup = base.median_us / c.median_us
        link = SpeedupLink(base_id, speedup)
        updated.append(c if c.speedup_link == link else replace(c, speedup_link=link))
    return replace(record, cases=tuple(updated))


def counterpart_id_of(params: dict) -> str | None:
    """Id of sglang's case doing the work of our case ``params``: the sglang implementation whose
    table row names ours as its ``counterpart``, every other parameter equal (as Case normalises
    them: pdl off for the sequential-LRU ones). None for sglang's own cases, implementations without
    an sglang counterpart, and params this version cannot read."""
    from hisparse.bench import implementations as table  # noqa: PLC0415
    from hisparse.bench.case import Case  # noqa: PLC0415

    theirs = next((i.name for i in table.TABLE if i.counterpart and i.counterpart == params.get("implementation")),
                  None)
    if theirs is None:
        return None
    try:
        return Case.from_dict({**params, "implementation": theirs}).case_id
    except Exception:  # noqa: BLE001 (params of an older config version: no pair, not an error)
        return None


def link_counterparts(record: RunRecord,
                      counterpart_of: Callable[[dict], str | None] = counterpart_id_of) -> RunRecord:
    """Link every ok case of ours whose sglang counterpart (``counterpart_id_of``) is in the run to
    it: ``counterpart_link`` = (sglang's case id, median(ours) / median(sglang's)), the ratio None
    while sglang's case is not ok. A case without one loses a stale link. Cheap: also re-links a file
    written before the link existed (``hisparse-bench plot``)."""
    by_id = {c.case_id: c for c in record.cases}
    updated = []
    for c in record.cases:
        other_id = counterpart_of(c.params) if c.ok else None
        other = by_id.get(other_id) if other_id is not None else None
        link = None
        if other is not None:
            ratio = c.median_us / other.median_us if other.ok and other.median_us and c.median_us else None
            link = CounterpartLink(other.case_id, ratio)
        updated.append(c if c.counterpart_link == link else replace(c, counterpart_link=link))
    return replace(record, cases=tuple(updated))


def link_cases(record: RunRecord, baseline_of: Callable[[dict], str | None] = _baseline_id) -> RunRecord:
    """Every link the engine stores across cases: speedups, then sglang counterparts."""
    return link_counterparts(link_speedups(record, baseline_of))


def run_sweep(
    cases: Iterable[Any],
    backend: Any,
    writer: RunWriter,
    *,
    floors: PinnedBandwidth,
    run: Callable[..., CaseResult] = run_case,
    baseline_of: Callable[[dict], str | None] = _baseline_id,
) -> Iterator[tuple[Any, CaseResult | None]]:
    """Run every case not already in ``writer``'s file; after each, rewrite the file atomically.

    Yields (case, result) per case, result None for one skipped because the file already has it
    (``--resume``). The caller calls ``writer.finish()`` when the generator is exhausted.
    """
    done = writer.done_ids
    for case in cases:
        if case.case_id in done:
            yield case, None
            continue
        result = run(case, backend, floors=floors)
        writer.replace_record(link_cases(writer.record.with_case(result), baseline_of))
        yield case, writer.record.case(case.case_id)
