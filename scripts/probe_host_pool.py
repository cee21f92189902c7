"""Probe: why the harness's gather floor of a `serving` case is slower than a standalone gather of
rows drawn the same way (issue 13). One process, one case's recorded rows, one factor changed at a time.

    python3 scripts/probe_host_pool.py [--config NAME] [--shapes] [case_id ...]

For each case (default: lru_sequential and multi_step, serving, batch 64) it builds the workload the
harness builds, records the rows of ``calls`` calls, and times ``gather_floor`` of each call's rows
(CUDA events around each call, median) with:
  harness      the workload's host pool and destination rows (what the run file's gather floor times);
  compact-dst  the same host rows into a compact destination (dst = 0..n-1);
  fresh-pool   the same host rows read from a fresh ``torch.empty(pin_memory=True)`` copy of the pool;
  sorted       the harness's rows sorted by host row;
  request-major  grouped by request (stable: each request's order kept);
  shuffled     in random order;
  per-request  grouped by request, one 512-thread CTA per request (the grid of sequential LRU: each
               SM reads one request's region).
--config picks the config the case ids come from (default: ci); --shapes adds the floor's launch knobs.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from hisparse.bench import calls, floors
from hisparse.bench.backends import get_backend
from hisparse.bench.config import load_config
from hisparse.bench.workload import make_workload


def time_gathers(backend, jobs, item, reps=3, **shape):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(len(jobs) * reps)]
    for i in range(len(jobs) * reps):
        src, dst, host, buf = jobs[i % len(jobs)]
        ev[i][0].record()
        backend.gather_floor(src_rows=src, dst_rows=dst, host_cache=host, device_buffer=buf, item_size_bytes=item,
                             **shape)
        ev[i][1].record()
    torch.cuda.synchronize()
    t = [a.elapsed_time(b) * 1e3 for a, b in ev[len(jobs):]]  # the first pass is the warm-up
    n = statistics.mean(s.numel() for s, *_ in jobs)
    us = statistics.median(t)
    return us, n * item / us / 1e3


def region_starts(case) -> list[int]:
    """First pool row of each request's region (hisparse/bench/workload.py `_serving_layout`)."""
    from hisparse.bench.workload import data_seed, serving_contexts  # noqa: PLC0415

    ctx = serving_contexts(case, data_seed(case))
    return (torch.cumsum(ctx, 0) - ctx).tolist()


def main(ids: list[str], config: str = "ci", shapes: bool = False) -> None:
    cfg = load_config(config)
    cases = {c.case_id: c for c in cfg.expand().cases}
    ids = ids or [i for i in cases if "/serving/b64/" in i]
    backend = get_backend("cuda")
    for cid in ids:
        case = cases[cid]
        wl = make_workload(case, backend.device)
        bound = calls.bind(case.implementation, backend, wl, pdl=case.pdl)
        wl.reset()
        records = [bound.recorded_call() for _ in range(20)]
        jobs = [j for call in floors.gather_calls(records) for j in call]
        item = int(case.item_size_bytes)
        host = jobs[0][2]
        print(f"{cid}: {len(jobs)} gathers, host pool {host.numel() * host.element_size() / 1e9:.2f} GB "
              f"(view of {host.untyped_storage().nbytes() / 1e9:.2f} GB), device buffer "
              f"{jobs[0][3].numel() * jobs[0][3].element_size() / 1e9:.2f} GB", flush=True)
        rows = {"harness": jobs}
        compact = torch.empty((max(s.numel() for s, *_ in jobs),) + tuple(jobs[0][3].shape[1:]),
                              dtype=jobs[0][3].dtype, device=jobs[0][3].device)
        rows["compact-dst"] = [(s, torch.arange(s.numel(), dtype=torch.int32, device=s.device), h, compact)
                               for s, d, h, b in jobs]
        order = [torch.sort(s) for s, *_ in jobs]
        rows["sorted"] = [(o.values, d[o.indices], h, b) for o, (s, d, h, b) in zip(order, jobs)]
        # Group by host region (stable: the order within a request is kept) and a full shuffle.
        starts = region_starts(case) if case.workload == "serving" else [0]  # other workloads: one region
        bounds = torch.tensor(sorted({int(x) for x in starts}), device=jobs[0][0].device)
        grouped = []
        for s, d, h, b in jobs:
            region = torch.searchsorted(bounds, s, right=True)
            o = torch.sort(region, stable=True).indices
            grouped.append((s[o], d[o], h, b))
        rows["request-major"] = grouped
        shuffled = []
        for s, d, h, b in jobs:
            o = torch.randperm(s.numel(), device=s.device)
            shuffled.append((s[o], d[o], h, b))
        rows["shuffled"] = shuffled
        fresh = torch.empty_like(host, pin_memory=True)
        fresh.copy_(host)
        rows["fresh-pool"] = [(s, d, fresh, b) for s, d, h, b in jobs]
        for name, js in rows.items():
            us, gbps = time_gathers(backend, js, item)
            print(f"  {name:<12} {us:8.1f} us {gbps:6.1f} GB/s", flush=True)
        for loads in (4, 8):
            us, gbps = time_gathers(backend, grouped, item, num_blocks=int(case.batch), block_size=512,
                                    loads_in_flight=loads)
            print(f"  per-request L{loads} {us:8.1f} us {gbps:6.1f} GB/s", flush=True)
        if shapes:  # the floor's own launch knobs on the harness's rows
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            for block in (256, 512):
                for per_sm in (1, 2, 4):
                    for loads in (1, 2, 4, 8):
                        if block * per_sm > 2048:
                            continue
                        us, gbps = time_gathers(backend, jobs, item, num_blocks=per_sm * sms, block_size=block,
                                                loads_in_flight=loads)
                        print(f"  floor {block:>4} thr x {per_sm}/SM L{loads}: {us:8.1f} us {gbps:6.1f} GB/s", flush=True)
        del fresh, rows, jobs, records, bound, wl
        torch.cuda.empty_cache()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case_ids", nargs="*", help="case ids of --config (default: its serving batch-64 cases)")
    ap.add_argument("--config", default="ci", help="the config the case ids come from (default: ci)")
    ap.add_argument("--shapes", action="store_true", help="also time the floor's launch knobs")
    a = ap.parse_args()
    main(a.case_ids, a.config, a.shapes)
