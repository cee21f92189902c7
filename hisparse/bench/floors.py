"""The two floors every case is reported against, measured in the same run (docs/semantics.md §H1, §H4):

- PCIe floor: the case's host->device bytes per call over the pinned-host -> device bandwidth
  measured by ``measure_pinned_h2d`` (a ``copy_`` of a large pinned buffer; 55.3 GB/s for 1 GiB on
  the H200 node). Not applicable on the reference backend (no PCIe): "n/a". It counts every row copied;
  where requests or layers read the same host rows (`upstream`) the distinct rows read
  (``Work.host_bytes_per_call``) are fewer, re-reads need not cross the link, and the case can run
  under this floor: the run summary marks those cases.
- Gather floor: a bare gather (``gather_floor``, the kernels' own warp copy, nothing else) of the
  SAME rows the case copied, per call, replayed through the same timing loop as the case (CUDA graph
  of calls_per_graph calls, L2 flushed between replays). Scattered rows over a large pinned pool
  gather markedly slower than PCIe bandwidth (33-41 vs 49 GB/s measured), so this floor is the
  fairer one for "how much is left". The rows are gathered in host-address order (sorted once, when
  the floor is built, outside the timed region): which row lands where is all a swap promises, and the
  order decides the bare gather's speed on scattered rows. Measured on the H200, `serving` batch 64,
  the rows sequential LRU copies: 27 GB/s shuffled, 36 GB/s in the kernel's order, 48 GB/s sorted
  (docs/perf-notes.md). The kernel deals the sorted rows' words over the grid in waves, so the reads in
  flight cover one stretch of the pool: with cold translations that is 1.4x faster than each CTA
  reading its own run of the list (csrc/include/hisparse/gather.cuh; docs/perf-notes.md, 2026-12-04).

- In the decode regime (a case of ``layers`` > 1), the gather floor gathers each recorded call's rows from
  its own layer's pool, layer after layer, as the case does; ``gather_warm_us`` is the same gather with
  every call on one pool, the largest (the warm regime), so each case shows what the translation of host
  pages costs it.

The ratios of a case's median to these floors (and its GB/s) are not stored: they are computed from
the result when read (hisparse.results.model.derived_figures).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hisparse import stats
from hisparse.bench import timing
from hisparse.bench.calls import CallRecord

PINNED_BYTES = 1 << 30  # docs/semantics.md §H1 measured 1 GiB copies
PINNED_FALLBACK_BYTES = 256 << 20  # when 1 GiB of pinned memory cannot be had
PINNED_SAMPLES = 10
PINNED_WARMUP = 2


@dataclass(frozen=True)
class PinnedBandwidth:
    gbps: float | None  # median of the samples
    samples_gbps: tuple[float, ...] = ()
    nbytes: int | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pinned_h2d_gbps": self.gbps, "pinned_h2d_samples_gbps": list(self.samples_gbps),
                               "pinned_h2d_bytes": self.nbytes}
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "PinnedBandwidth":
        return cls(gbps=data.get("pinned_h2d_gbps"), samples_gbps=tuple(data.get("pinned_h2d_samples_gbps") or ()),
                   nbytes=data.get("pinned_h2d_bytes"), note=data.get("note"))


NOT_APPLICABLE = PinnedBandwidth(gbps=None, note="n/a: reference backend (PyTorch on the CPU, no PCIe transfer)")


def measure_pinned_h2d(device: str, *, nbytes: int = PINNED_BYTES, samples: int = PINNED_SAMPLES) -> PinnedBandwidth:
    """Pinned host -> device ``copy_`` bandwidth in GB/s (1e9 bytes/s), CUDA events per copy."""
    if not device.startswith("cuda"):
        return NOT_APPLICABLE
    import torch  # noqa: PLC0415

    try:
        src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    except RuntimeError:
        nbytes = PINNED_FALLBACK_BYTES
        src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    src.fill_(1)  # first touch outside the timed copies
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(PINNED_WARMUP):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        out.append(nbytes / (start.elapsed_time(end) * 1e-3) / 1e9)
    del src, dst
    return PinnedBandwidth(gbps=stats.median(out), samples_gbps=tuple(out), nbytes=nbytes)


# ---------------------------------------------------------------------------------------------
# Per case


@dataclass(frozen=True)
class Work:
    unique_misses_per_call: float  # rows the swapped layer loaded per call (mean over recorded calls)
    hits_per_call: float  # top-k occurrences resident before the call
    bytes_per_call: float  # host->device bytes per call, every layer
    # Distinct host rows' bytes read per call (CallRecord.distinct_host_rows): below bytes_per_call where
    # requests or layers read the same rows (`upstream`), whose re-reads need not cross the link.
    host_bytes_per_call: float | None = None

    def to_dict(self) -> dict[str, float | int]:
        return {k: _int_if_whole(v) for k, v in self.__dict__.items() if v is not None}


def _int_if_whole(v: float) -> float | int:
    return int(v) if float(v).is_integer() else float(v)


def work_of(records: list[CallRecord], item_size_bytes: int) -> Work:
    n = max(len(records), 1)
    return Work(
        unique_misses_per_call=sum(r.primary_rows for r in records) / n,
        hits_per_call=sum(r.hits for r in records) / n,
        bytes_per_call=sum(r.total_rows for r in records) * item_size_bytes / n,
        host_bytes_per_call=sum(r.distinct_host_rows for r in records) * item_size_bytes / n,
    )


@dataclass
class _GatherCalls:
    """Replays the recorded rows call by call: one gather per destination buffer and call."""

    backend: Any
    calls: list[list[tuple[Any, Any, Any, Any]]]
    item_size_bytes: int
    index: int = field(default=0)

    def reset(self) -> None:
        self.index = 0

    def __call__(self) -> None:
        for src, dst, host, buf in self.calls[self.index % len(self.calls)]:
            self.backend.gather_floor(src_rows=src, dst_rows=dst, host_cache=host, device_buffer=buf,
                                      item_size_bytes=self.item_size_bytes)
        self.index += 1


def gather_calls(records: list[CallRecord]) -> list[list[tuple[Any, Any, Any, Any]]]:
    """Per call: the rows of all its copies, concatenated per (host, destination buffer) pair and
    sorted by host row (module docstring)."""
    import torch  # noqa: PLC0415

    out = []
    for rec in records:
        groups: dict[tuple[int, int], list] = {}
        for c in rec.copies:
            if c.src_rows.numel() == 0:
                continue
            key = (id(c.host_cache), id(c.dst_buffer))
            groups.setdefault(key, [c.host_cache, c.dst_buffer, [], []])
            groups[key][2].append(c.src_rows)
            groups[key][3].append(c.dst_rows)
        call = []
        for host, buf, s, d in groups.values():
            src, dst = torch.cat(s).to(torch.int64), torch.cat(d).to(torch.int32)
            order = torch.argsort(src, stable=True)
            call.append((src[order], dst[order], host, buf))
        out.append(call)
    return out


def warm_calls(calls: list[list[tuple[Any, Any, Any, Any]]]) -> list[list[tuple[Any, Any, Any, Any]]]:
    """The same rows, every call on one host pool and device buffer: the bare gather in the warm regime
    (one pool, translations cached from call to call) of a decode-regime case's rows. A row keeps its
    place in its pool, so the pages a call touches have the same layout, in one pool. The pool is the
    first of the largest: layers' pools differ in size where each layer has a trace of its own (`trace`),
    and a row of a larger pool has no place in a smaller one (the bare gather reads no device value, so
    it would read past the view, or fault)."""
    pairs = [(host, buf) for call in calls for _src, _dst, host, buf in call]
    if not pairs:
        return calls
    host, buf = max(pairs, key=lambda p: p[0].numel())  # max keeps the first of equals
    return [[(src, dst, host, buf) for src, dst, _host, _buf in call] for call in calls]


def measure_gather_floor(backend: Any, records: list[CallRecord], settings: timing.Settings,
                         item_size_bytes: int, *, warm: bool = False
                         ) -> tuple[timing.Measurement | None, timing.Measurement | None]:
    """Time the bare gather of the recorded rows like the case itself (its layers in turn, where it has
    several) and, with ``warm``, again with all of them from one layer's pool (``warm_calls``): (gather,
    warm gather or None). (None, None) when nothing was copied."""
    calls = gather_calls(records)
    if not any(calls):
        return None, None

    def time_gather(c: list[list[tuple[Any, Any, Any, Any]]]) -> timing.Measurement:
        fn = _GatherCalls(backend, c, item_size_bytes)
        return timing.time_calls(fn, reset=fn.reset, settings=settings, device=backend.device)

    return time_gather(calls), time_gather(warm_calls(calls)) if warm else None


def floor_dict(work: Work, gather: timing.Measurement | None, pinned: PinnedBandwidth,
               gather_warm: timing.Measurement | None = None) -> dict[str, Any]:
    """A result's ``floor``: the PCIe floor, the gather floor in the case's own regime and, for a case in
    the decode regime, ``gather_warm_us``: the same gather in the warm regime (what translation costs it)."""
    pcie = None
    if pinned.gbps:
        pcie = work.bytes_per_call / (pinned.gbps * 1e3)  # bytes / (GB/s) -> us
    out = {
        "pcie_floor_us": pcie,
        "gather_floor_us": stats.median(gather.samples_us) if gather is not None else None,
        "gather_samples_us": list(gather.samples_us) if gather is not None else [],
    }
    if gather_warm is not None:
        out["gather_warm_us"] = stats.median(gather_warm.samples_us)
        out["gather_warm_samples_us"] = list(gather_warm.samples_us)
    return out
