"""CPU probe (reference backend, no GPU): rows copied per call on `serving` by sequential exact LRU,
by the multi-step swap's union CLOCK (each miss takes the oldest of <= 6 samples of its residue class of
ring slots, docs/semantics.md), and by the multi-step swap with a call-granular exact-LRU victim choice
(the `misses` oldest unprotected slots of the request, ties in ring order from the cursor).

    python victims.py BATCH CALLS ['{"recent_reuse": 0.5}'] [--check] [--hot N]   (hot buffer, default 4096)

Prints the rows copied per call (primary layer) of each policy, and their mean over calls 5.. (the
first calls fill the hot buffer). --check also runs the invariant checker on 8 calls of the
exact-LRU variant and of a deliberately wrong one (victims 0..misses-1, protection ignored), to
show the checker accepts the first and catches the second.
"""
from __future__ import annotations

import json
import sys

import torch

import hisparse.kernels.reference.swap_multi_commit as commit
from hisparse.bench.backends import get_backend
from hisparse.bench.calls import bind
from hisparse.bench.case import Case, TimingSettings
from hisparse.bench.workload import make_workload
from hisparse.kernels.state import EPOCH_MASK

from hisparse.kernels.reference import clock

CLOCK = clock.union_victims
# The name under which the commit reference calls its union-mode policy: union_victims until d46ca15,
# oldest_victims since (and union_mode_victims with hot-switch.patch). The probe swaps that name.
_POLICY = next(n for n in ("union_mode_victims", "oldest_victims", "union_victims") if hasattr(commit, n))


def set_policy(victims) -> None:
    setattr(commit, _POLICY, victims)


def oldest_victims(ref: torch.Tensor, epoch: int, cursor: int, miss_count: int) -> torch.Tensor:
    """The miss_count oldest unprotected slots (age (epoch - ref) & EPOCH_MASK, protected = ref == epoch),
    ties broken by ring position from the cursor; -1 where there are fewer."""
    hot = ref.numel()
    r = ref.to(torch.int64)
    ring = (torch.arange(hot, dtype=torch.int64) - cursor) % hot
    age = torch.where(r != epoch, (epoch - r) & EPOCH_MASK, torch.full_like(r, -1))
    idx = torch.argsort(age * (2 * hot) - ring, descending=True)[:miss_count]
    return torch.where(age[idx] >= 0, idx, torch.full_like(idx, -1))


def wrong_victims(ref: torch.Tensor, epoch: int, cursor: int, miss_count: int) -> torch.Tensor:
    return torch.arange(miss_count, dtype=torch.int64)  # ignores protection: the checker must object


HOT = 4096


def workload(impl: str, batch: int, calls: int, params: dict):
    timing = TimingSettings(warmup_calls=2, calls_per_graph=calls, check_calls=1)
    case = Case(impl, "serving", params, batch=batch, steps=4, top_k=2048, hot_buffer_size=HOT,
                item_size_bytes=64, seed=0, timing=timing)  # 64 B rows: the policy does not see the size
    w = make_workload(case, torch.device("cpu"))
    return w, bind(impl, get_backend("reference"), w, pdl=case.pdl)


def rows_per_call(impl: str, victims, batch: int, calls: int, params: dict) -> list[int]:
    set_policy(victims)
    w, bound = workload(impl, batch, calls, params)
    w.reset()
    return [bound.recorded_call().primary_rows for _ in range(w.calls)]


def violations(victims, batch: int, params: dict) -> list[int]:
    set_policy(victims)
    w, bound = workload("multi_step", batch, 8, params)
    w.reset()
    return [len(bound.checked_call()) for _ in range(8)]


def main() -> None:
    global HOT
    argv = sys.argv[1:]
    if "--hot" in argv:
        i = argv.index("--hot")
        HOT = int(argv[i + 1])
        del argv[i:i + 2]
    args = [a for a in argv if a != "--check"]
    batch, calls = int(args[0]), int(args[1])
    params = json.loads(args[2]) if len(args) > 2 else {}
    print(f"serving batch {batch}, 4 steps, top-k 2048, hot {HOT}, params {params or 'defaults'}, {calls} calls")
    for name, impl, victims in (("sequential exact LRU", "lru_sequential", CLOCK),
                                ("multi-step, union CLOCK", "multi_step", CLOCK),
                                ("multi-step, call-granular exact LRU", "multi_step", oldest_victims)):
        rows = rows_per_call(impl, victims, batch, calls, params)
        print(f"{name:38s} mean over calls 5..: {sum(rows[5:]) / len(rows[5:]):9.1f}   per call: {rows}")
    if "--check" in argv:
        print("invariant violations per call, exact-LRU victims:", violations(oldest_victims, batch, params))
        print("invariant violations per call, wrong victims:    ", violations(wrong_victims, batch, params))
    commit.union_victims = CLOCK


if __name__ == "__main__":
    main()
