"""``gpu_time_*``: a benchmark whose body measures itself and returns raw per-call times.

asv's own ``time_*`` benchmarks time the Python call with a host timer, which for an asynchronous
GPU launch measures the launch, not the kernel. Here the benchmark function does the measuring
(hisparse.bench.timing: a CUDA graph of many calls, replayed with L2 flushes, one CUDA-event time per
replay divided by the calls per graph; on the CPU reference backend, host wall time) and returns the
samples in **seconds per call**, one per replay. This type hands them to asv as
``{"samples": [...], "number": 1}``, which asv 0.6.6 stores as a timing result: median, quartiles,
99% CI, and Mann-Whitney in ``asv compare``, exactly as for ``time_*`` (docs/semantics.md §H3).

Setup (workload tensors, JIT build, warm-up) belongs in the class's ``setup``: nothing there is timed.
One process per parameter point and ``rounds = 1``: the replays inside the call are the repeats.
"""
from __future__ import annotations

import math
import re

from asv_runner.benchmarks._base import Benchmark, _get_first_attr


class GpuTimeBenchmark(Benchmark):
    name_regex = re.compile("^(GpuTime[A-Z_].+)|(gpu_time_.+)$")

    def __init__(self, name, func, attr_sources):
        Benchmark.__init__(self, name, func, attr_sources)
        self.type = "time"  # for asv's readers: a duration in seconds with samples
        self.unit = "seconds"
        self.number = 1
        self.repeat = 0
        self.rounds = int(_get_first_attr(attr_sources, "rounds", 1))
        self.min_run_count = 1
        self.sample_time = 0.01
        self.warmup_time = 0.0

    def run(self, *param):
        samples = self.func(*param)
        if samples is None:
            raise TypeError(f"{self.name}: a gpu_time_ benchmark must return its samples (seconds per call)")
        values = [float(s) for s in samples]
        if not values or any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"{self.name}: samples must be finite, non-negative seconds; got {values!r}")
        return {"samples": values, "number": 1}


export_as_benchmark = [GpuTimeBenchmark]
