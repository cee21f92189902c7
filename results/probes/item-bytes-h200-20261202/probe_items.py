"""Probe: what a host row's size costs per byte in the bare gather (issue 13's 100 B target).

    python3 probe_items.py [--mib 28.8] [--pool-gib 3] [--reps 20]

For each item size S it gathers the same payload (--mib of rows) host -> device with the project's bare
gather (`gather_floor`, one CTA per SM, rows in host-address order) from one pinned pool of --pool-gib
(the committed items.txt: 2), with rows laid out three ways:
  consecutive   rows base, base + 1, ... (a contiguous run of the pool);
  stride17      every 17th row from a random base (scattered, sorted: rows never share a block, and the
                offsets of rows that are not multiples of 64 B cycle through every alignment);
  region        random rows of a window 16x the payload, sorted by address (serving-like scatter).
The model it tests: zero-copy reads reach the host as requests for whole aligned blocks of B bytes, so
a row costs the blocks it touches, not its bytes. `blocks64` and `sectors32` print the mean aligned
64 B blocks and 32 B sectors that the span [r * S, r * S + S) of a row of the layout touches, and
`x64` / `x32` the bytes they read per payload byte relative to a 576 B row (9 blocks of 64 B, 18
sectors of 32 B: both exactly its bytes). Counted per row: right for the scattered layouts; consecutive
rows share their end blocks, so there the counts overstate what is read. Measured per byte relative to 576 B
(`rel`) next to them says which granularity the link pays for. CUDA events around each gather, median
of --reps after one warm-up; every gather's destination checked once against the host rows.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from hisparse.kernels.ops.gather_floor import gather_floor

SIZES = (64, 80, 96, 100, 112, 128, 192, 576, 584)


def span_units(rows: torch.Tensor, size: int, unit: int) -> float:
    start = rows * size
    return float(((start + size - 1) // unit - start // unit + 1).double().mean())


def time_us(src, dst, host, buf, size, reps):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps + 1)]
    for a, b in ev:
        a.record()
        gather_floor(src_rows=src, dst_rows=dst, host_cache=host, device_buffer=buf, item_size_bytes=size)
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev[1:])


def main(mib: float, pool_gib: float, reps: int) -> None:
    g = torch.Generator().manual_seed(0)
    pool = torch.empty(int(pool_gib * 2**30) // 4 * 4, dtype=torch.uint8, pin_memory=True)
    words = pool.view(torch.int32)
    words.copy_(torch.arange(words.numel(), dtype=torch.int32))  # every 4-byte word distinct: the check sees misplaced bytes
    payload = int(mib * 1e6)
    print(f"{'size':>5} {'layout':>11} {'rows':>7} {'us':>8} {'GB/s':>6} {'rel':>5} {'blocks64':>8} {'x64':>5} "
          f"{'sectors32':>9} {'x32':>5}", flush=True)
    base_gbs = {}
    for size in (576,) + tuple(s for s in SIZES if s != 576):
        host_rows = pool.numel() // size
        host = pool[: host_rows * size]
        n = payload // size
        buf = torch.empty(n * size, dtype=torch.uint8, device="cuda")
        dst = torch.arange(n, dtype=torch.int32, device="cuda")
        b0 = int(torch.randint(0, host_rows - 17 * n, (1,), generator=g))
        layouts = {
            "consecutive": torch.arange(b0, b0 + n, dtype=torch.int64),
            "stride17": b0 + 17 * torch.arange(n, dtype=torch.int64),
            "region": torch.sort(b0 + torch.randperm(16 * n, generator=g)[:n])[0],
        }
        for name, rows in layouts.items():
            src = rows.cuda()
            t = time_us(src, dst, host, buf, size, reps)
            got = buf.view(n, size)[:: max(1, n // 64)].cpu()
            want = host.view(host_rows, size)[rows[:: max(1, n // 64)]]
            assert torch.equal(got, want), f"size {size} {name}: gathered rows differ from the host rows"
            gbs = n * size / t / 1e3
            base_gbs.setdefault(name, gbs)
            b64 = span_units(rows, size, 64)
            s32 = span_units(rows, size, 32)
            print(f"{size:>5} {name:>11} {n:>7} {t:>8.1f} {gbs:>6.1f} {base_gbs[name] / gbs:>5.2f} {b64:>8.2f} "
                  f"{b64 * 64 / size:>5.2f} {s32:>9.2f} {s32 * 32 / size:>5.2f}", flush=True)
        del buf


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=28.8, help="payload per gather, MB (default: batch 64's 28.8)")
    ap.add_argument("--pool-gib", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    main(a.mib, a.pool_gib, a.reps)
