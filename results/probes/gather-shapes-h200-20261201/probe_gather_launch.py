"""Probe: the multi-step gather's launch shape on the GPU (issue 13). GPU only.

    HISPARSE_EXP_GATHER was read by a temporary launch knob (launch-knob.cuh.txt beside this file):
    "threads,tiles" = CTA size and CTAs per request (0: one wave of the device's resident slots,
    -1: ceil(occurrences / threads), the pre-change shape at 128 threads).

    python3 scripts/probe_gather_launch.py SHAPE... [-- CASE_FILTER...]

For each case of configs/default.yaml matching the filters (default: multi_step serving, pdl1), one
workload is built, checked once (invariants + bytes) under every shape, then timed like the engine
(CUDA graph of 100 calls, L2 flush, 10 replays, median) under each shape in turn; lru_sequential of the
same workload is timed once for reference. Prints one row per case.
"""
from __future__ import annotations

import os
import statistics
import sys

from hisparse.bench import calls, timing
from hisparse.bench.backends import get_backend
from hisparse.bench.config import load_config
from hisparse.bench.workload import make_workload


def main(argv: list[str]) -> None:
    cut = argv.index("--") if "--" in argv else len(argv)
    shapes, filters = argv[:cut], argv[cut + 1:] or ["multi_step/serving/*/pdl1"]
    every = {c.case_id: c for c in load_config("default").expand().cases}
    cases = [c for c in every.values() if any(_match(f, c.case_id) for f in filters)]
    backend = get_backend("cuda")
    print("case".ljust(52) + "".join(s.rjust(12) for s in shapes) + "   lru", flush=True)
    for case in cases:
        wl = make_workload(case, backend.device)
        settings = timing.Settings.of(case.timing)
        row = []
        for shape in shapes:
            os.environ["HISPARSE_EXP_GATHER"] = shape
            bound = calls.bind(case.implementation, backend, wl, pdl=case.pdl)
            wl.reset()
            bad = bound.checked_call()
            if bad:
                row.append("FAIL")
                print(f"  {shape}: {bad[:2]}", flush=True)
                continue
            wl.reset()
            m = timing.time_calls(bound.call, reset=wl.reset, settings=settings, device=backend.device)
            row.append(f"{statistics.median(m.samples_us):.1f}")
        del wl
        lru_id = case.case_id.replace(case.implementation + "/", "lru_sequential/", 1).rsplit("/pdl", 1)[0] + "/pdl0"
        if lru_id in every:  # its own workload: the state differs, the inputs are the same (same seed)
            wl = make_workload(every[lru_id], backend.device)
            lru = calls.bind("lru_sequential", backend, wl, pdl=False)
            wl.reset()
            m = timing.time_calls(lru.call, reset=wl.reset, settings=settings, device=backend.device)
            row.append(f"{statistics.median(m.samples_us):.1f}")
        print(case.case_id[:51].ljust(52) + "".join(x.rjust(12) for x in row), flush=True)
        wl = None


def _match(pattern: str, case_id: str) -> bool:
    import fnmatch  # noqa: PLC0415

    return fnmatch.fnmatch(case_id, pattern)


if __name__ == "__main__":
    main(sys.argv[1:])
