"""Run one case's swap eagerly, call after call, for a profiler to attach to (ncu, nsys).

    python3 scripts/ncu_case.py CASE_ID [--config default] [--calls 12] [--backend cuda]

The case comes from the config by id (`hisparse-bench list CONFIG`); its workload is built as the
engine builds it, the calls run one by one (no CUDA graph: ncu profiles kernel launches) after the
state is reset, and the script prints what ran. Under ncu, skip the first calls (JIT, cold state) and
profile the rest, with `--clock-control none` (the clocks stay as in the timed runs;
ncu locks them to base by default). E.g. the multi-step swap's gather and commit kernels on
`serving` (issue 13):

    ncu --clock-control none --target-processes all -k regex:'spec_(gather|commit)_kernel' \\
        --launch-skip 8 --launch-count 4 \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \\
        --csv --page details python3 scripts/ncu_case.py multi_step/serving/b64/s4/k2048/h4096/i576/pdl1

(`scripts/gpu_session.sh ncu:CASE_ID` runs exactly that and keeps the CSV.)
"""
from __future__ import annotations

import argparse
import sys
import time

from hisparse.bench import calls
from hisparse.bench.backends import get_backend
from hisparse.bench.config import load_config
from hisparse.bench.workload import make_workload
from hisparse.errors import HisparseError


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case_id")
    ap.add_argument("--config", default="default")
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--backend", default="auto", choices=("auto", "cuda", "reference"))
    a = ap.parse_args(argv)
    if a.calls < 1:
        ap.error(f"--calls: must be >= 1, got {a.calls}")
    try:
        cases = {c.case_id: c for c in load_config(a.config).expand().cases}
        if a.case_id not in cases:
            near = [i for i in cases if i.split("/")[:2] == a.case_id.split("/")[:2]][:5]
            print(f"case {a.case_id!r} is not in config {a.config!r}; same implementation and workload: "
                  f"{', '.join(near) or 'none'}", file=sys.stderr)
            return 2
        case = cases[a.case_id]
        backend = get_backend(a.backend)
        wl = make_workload(case, backend.device)
        bound = calls.bind(case.implementation, backend, wl, pdl=case.pdl)
    except HisparseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    wl.reset()
    t0 = time.perf_counter()
    for _ in range(a.calls):
        bound.call()
    if str(backend.device).startswith("cuda"):
        import torch  # noqa: PLC0415

        torch.cuda.synchronize()
    print(f"{a.case_id}: {a.calls} eager calls on {backend.name} in {time.perf_counter() - t0:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
