"""The one timing loop (docs/semantics.md §H4). Returns raw samples only; statistics live in stats.py.

CUDA (``time_calls(..., device="cuda")``), the upstream benchmark's method:
1. ``warmup_calls`` eager calls (JIT, allocator, first touch), each timed with CUDA events;
2. ``reset()``, then ``calls_per_graph`` back-to-back calls captured in one ``torch.cuda.CUDAGraph``
   (the call itself changes its inputs on the device, e.g. ``workload.advance()``, so every captured
   call sees fresh misses); one warm replay;
3. per replay: ``reset()`` and an L2 flush (zeroing a buffer of ``L2_FLUSH_FACTOR`` x the L2 size),
   both untimed; CUDA events around ``graph.replay()``. A sample is ``replays_per_sample`` such
   replays: their summed time / (replays_per_sample x calls_per_graph), in microseconds per call.
   NVML clocks and throttle reasons are read while the first replay of each sample runs.
At least ``MIN_SAMPLES`` samples are kept whatever the config says; every replay's own time is kept
too (``Measurement.replay_us``).

Why several replays per sample: on the H200 some cases settle, at the start of a replay, into one of
two steady states that then last the whole replay (multi_step/upstream/b4, PDL off: every gather of
the replay took ~41.8 or every one ~43.8 us, chosen anew at each replay; results/probes/README.md). A
sample of one replay is then in one mode or the other, and the median of a near 50/50 mix moves by
the gap between runs. A sample of several independently started replays averages the states, so its
median is reproducible; ``stats.modes`` of ``replay_us`` still reports the two states.

CPU (the reference backend): the same structure with ``time.perf_counter`` around
``calls_per_graph`` eager calls, no graph, no L2 flush; method "cpu-perf-counter". These are PyTorch
reference times and say nothing about kernels.

Each timing round of a case (``timing.rounds``, each on its own workload) is one ``time_calls``;
hisparse/bench/measure.py keeps each as one Run of the result.
"""
from __future__ import annotations

import math
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

MIN_SAMPLES = 10
# Zero 4x the L2 between replays: several times L2 so no line of the previous replay survives
# (upstream sglang's do_bench zeroes 5x; docs/semantics.md §H4 asks for "several times").
L2_FLUSH_FACTOR = 4
L2_FLUSH_MIN_BYTES = 64 << 20
METHOD_CUDA = "cuda-graph-events"
METHOD_CPU = "cpu-perf-counter"

# NVML clocks-event (throttle) reason bits, nvml.h nvmlClocksEventReason*.
THROTTLE_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def decode_throttle(mask: int) -> str:
    """Bitmask -> "none" or "sw_power_cap|hw_slowdown" (unknown bits as hex)."""
    if mask == 0:
        return "none"
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    rest = mask & ~sum(bit for bit, _ in THROTTLE_BITS)
    if rest:
        names.append(hex(rest))
    return "|".join(names)


@dataclass(frozen=True)
class Clocks:
    """Per-replay clock readings. ``source``: "nvml", "nvidia-smi", "unavailable" or "n/a"
    (reference backend)."""

    source: str
    sm_mhz: tuple[int | None, ...] = ()
    mem_mhz: tuple[int | None, ...] = ()
    throttle_reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Measurement:
    """Raw timing of one callable (one ``time_calls``, one timing round): samples (us per call, one per
    ``replays_per_sample`` replays), every replay's own time (``replay_us``, us per call, in order) and
    warm-up samples. A case result keeps each round as one Run (hisparse/bench/measure.py run_of)."""

    method: str
    samples_us: tuple[float, ...]
    warmup_us: tuple[float, ...]
    calls_per_graph: int
    replays: int
    warmup_calls: int
    l2_flush: bool
    clocks: Clocks
    replays_per_sample: int = 1
    replay_us: tuple[float, ...] = ()


@dataclass(frozen=True)
class Settings:
    """What ``time_calls`` needs; built from a config's TimingSettings (``Settings.of``)."""

    warmup_calls: int = 5
    calls_per_graph: int = 100
    replays: int = 10  # samples
    l2_flush: bool = True
    replays_per_sample: int = 1

    @classmethod
    def of(cls, timing: Any) -> "Settings":
        return cls(warmup_calls=int(timing.warmup_calls), calls_per_graph=int(timing.calls_per_graph),
                   replays=int(timing.replays), l2_flush=bool(timing.l2_flush),
                   replays_per_sample=int(getattr(timing, "replays_per_sample", 1)))

    def __post_init__(self) -> None:
        if self.calls_per_graph < 1:
            raise ValueError(f"calls_per_graph: must be >= 1, got {self.calls_per_graph}")
        if self.replays_per_sample < 1:
            raise ValueError(f"replays_per_sample: must be >= 1, got {self.replays_per_sample}")
        if self.warmup_calls < 0:
            raise ValueError(f"warmup_calls: must be >= 0, got {self.warmup_calls}")


# ---------------------------------------------------------------------------------------------
# Clocks


def _nvml_target(device_index: int) -> str:
    """The GPU as nvidia-smi / NVML name it: its UUID when torch knows it (robust to
    CUDA_VISIBLE_DEVICES reordering), else the visible-devices entry, else the index."""
    try:
        import torch  # noqa: PLC0415

        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        if uuid:
            return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    except Exception:  # older torch without .uuid
        pass
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if device_index < len(visible):
        return visible[device_index]
    return str(device_index)


class ClockSampler:
    """Reads SM/memory clocks and throttle reasons: NVML (pynvml / nvidia-ml-py) if importable, else
    ``nvidia-smi``, else records "unavailable". Never changes clocks."""

    def __init__(self, device_index: int = 0, *, source: str | None = None) -> None:
        self.target = _nvml_target(device_index)
        self._handle = None
        self._nvml = None
        self.sm: list[int | None] = []
        self.mem: list[int | None] = []
        self.reasons: list[str] = []
        self.source = source or self._pick_source()

    def _pick_source(self) -> str:
        try:
            import pynvml  # noqa: PLC0415

            pynvml.nvmlInit()
            self._handle = self._nvml_handle(pynvml)
            self._nvml = pynvml
            return "nvml"
        except Exception:  # no pynvml, or NVML refuses: try nvidia-smi
            pass
        if self._smi_query() is not None:
            return "nvidia-smi"
        return "unavailable"

    def _nvml_handle(self, nv: Any) -> Any:
        if self.target.startswith(("GPU-", "MIG-")):
            for key in (self.target, self.target.encode()):  # nvidia-ml-py versions differ: str or bytes
                try:
                    return nv.nvmlDeviceGetHandleByUUID(key)
                except Exception:  # noqa: BLE001 (try the other spelling)
                    continue
        return nv.nvmlDeviceGetHandleByIndex(int(self.target) if self.target.isdigit() else 0)

    def _smi_query(self) -> tuple[int | None, int | None, str] | None:
        for reasons_field in ("clocks_throttle_reasons.active", "clocks_event_reasons.active"):
            try:
                out = subprocess.run(
                    ["nvidia-smi", f"--query-gpu=clocks.sm,clocks.mem,{reasons_field}",
                     "--format=csv,noheader,nounits", "-i", self.target],
                    capture_output=True, text=True, timeout=10,
                )
            except (OSError, subprocess.SubprocessError):
                return None
            if out.returncode == 0 and out.stdout.strip():
                return _parse_smi(out.stdout.strip().splitlines()[0])
        return None

    def sample(self) -> None:
        if self.source == "nvml":
            nv = self._nvml
            try:
                sm = int(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM))
                mem = int(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_MEM))
                fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                    nv.nvmlDeviceGetCurrentClocksThrottleReasons
                reason = decode_throttle(int(fn(self._handle)))
            except Exception as e:  # a failed read is recorded, not fatal
                sm, mem, reason = None, None, f"unavailable ({type(e).__name__})"
        elif self.source == "nvidia-smi":
            got = self._smi_query()
            sm, mem, reason = got if got is not None else (None, None, "unavailable")
        else:
            return
        self.sm.append(sm)
        self.mem.append(mem)
        self.reasons.append(reason)

    def result(self) -> Clocks:
        return Clocks(source=self.source, sm_mhz=tuple(self.sm), mem_mhz=tuple(self.mem),
                      throttle_reasons=tuple(self.reasons))


def _parse_smi(line: str) -> tuple[int | None, int | None, str]:
    parts = [p.strip() for p in line.split(",")]

    def num(s: str) -> int | None:
        try:
            return int(float(s))
        except ValueError:
            return None

    sm = num(parts[0]) if parts else None
    mem = num(parts[1]) if len(parts) > 1 else None
    reason = "unavailable"
    if len(parts) > 2:
        try:
            reason = decode_throttle(int(parts[2], 16))
        except ValueError:
            reason = parts[2]
    return sm, mem, reason


# ---------------------------------------------------------------------------------------------
# Timing loops


_FLUSH_BUFFERS: dict[int, Any] = {}


def l2_flush_buffer(device_index: int):
    """A cached int8 device buffer of max(L2_FLUSH_FACTOR x L2, 64 MiB) bytes."""
    import torch  # noqa: PLC0415

    buf = _FLUSH_BUFFERS.get(device_index)
    if buf is None:
        l2 = int(getattr(torch.cuda.get_device_properties(device_index), "L2_cache_size", 0) or 0)
        size = max(L2_FLUSH_FACTOR * l2, L2_FLUSH_MIN_BYTES)
        buf = torch.empty(size, dtype=torch.int8, device=f"cuda:{device_index}")
        _FLUSH_BUFFERS[device_index] = buf
    return buf


def time_calls(
    call: Callable[[], Any],
    *,
    reset: Callable[[], Any],
    settings: Settings,
    device: str,
    clock_sampler: ClockSampler | None = None,
) -> Measurement:
    """Time ``call`` (one swap call; takes no arguments) by the method for ``device`` ("cuda"/"cpu").

    ``reset`` restores the inputs' initial state in place (untimed, before the warm-up, the capture
    and every replay), so every replay times the same sequence of calls.
    """
    if device.startswith("cuda"):
        return _time_cuda(call, reset, settings, clock_sampler)
    return _time_cpu(call, reset, settings)


def _time_cpu(call: Callable[[], Any], reset: Callable[[], Any], s: Settings) -> Measurement:
    replays = max(s.replays, MIN_SAMPLES)
    reset()
    warm = []
    for _ in range(s.warmup_calls):
        t0 = time.perf_counter()
        call()
        warm.append((time.perf_counter() - t0) * 1e6)
    def replay_once(_first_of_sample: bool) -> float:
        reset()  # untimed
        t0 = time.perf_counter()
        for _ in range(s.calls_per_graph):
            call()
        return (time.perf_counter() - t0) * 1e6 / s.calls_per_graph

    samples, per_replay = _sampled(replay_once, replays, s.replays_per_sample)
    return Measurement(method=METHOD_CPU, samples_us=samples, warmup_us=tuple(warm),
                       calls_per_graph=s.calls_per_graph, replays=replays, warmup_calls=s.warmup_calls,
                       l2_flush=False, clocks=Clocks(source="n/a"), replays_per_sample=s.replays_per_sample,
                       replay_us=per_replay)


def _sampled(replay_once: Callable[[bool], float], samples: int, per_sample: int
             ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(samples, replays): ``samples`` means of ``per_sample`` consecutive ``replay_once`` results
    (us per call; replay_once(True) on the first replay of each sample), and every replay's result."""
    per_replay = tuple(replay_once(i % per_sample == 0) for i in range(samples * per_sample))
    means = tuple(math.fsum(per_replay[i:i + per_sample]) / per_sample
                  for i in range(0, len(per_replay), per_sample))
    return means, per_replay


def _time_cuda(call: Callable[[], Any], reset: Callable[[], Any], s: Settings,
               sampler: ClockSampler | None) -> Measurement:
    import torch  # noqa: PLC0415

    dev = torch.cuda.current_device()
    sampler = sampler or ClockSampler(dev)
    replays = max(s.replays, MIN_SAMPLES)
    flush = l2_flush_buffer(dev) if s.l2_flush else None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    reset()
    warm = []
    for _ in range(s.warmup_calls):
        start.record()
        call()
        end.record()
        end.synchronize()
        warm.append(start.elapsed_time(end) * 1000.0)

    reset()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(s.calls_per_graph):
            call()
    torch.cuda.synchronize()
    try:
        def replay_once(sample_clocks: bool) -> float:
            reset()  # untimed
            if flush is not None:
                flush.zero_()  # untimed
            start.record()
            graph.replay()
            end.record()
            if sample_clocks:
                sampler.sample()  # while the replay runs
            end.synchronize()
            return start.elapsed_time(end) * 1000.0 / s.calls_per_graph

        warm.append(replay_once(False))  # one warm replay, as upstream's do_bench
        samples, per_replay = _sampled(replay_once, replays, s.replays_per_sample)
    finally:
        del graph
    return Measurement(method=METHOD_CUDA, samples_us=samples, warmup_us=tuple(warm),
                       calls_per_graph=s.calls_per_graph, replays=replays, warmup_calls=s.warmup_calls,
                       l2_flush=flush is not None, clocks=sampler.result(),
                       replays_per_sample=s.replays_per_sample, replay_us=per_replay)
