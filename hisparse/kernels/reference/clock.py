"""Victim selection of the multi-step commit (docs/semantics.md §3.7, steps 4, 5 and 7).

A slot is *protected* when ``ref == epoch``: hit by this call, or already claimed by an earlier
miss of this call. Claiming a victim sets its ref to the epoch, so no slot is claimed twice.

- Union mode: partitioned CLOCK sampling. Miss ``cidx`` only looks at ring positions
  ``linear ≡ cidx (mod miss_count)``; the partitions are disjoint, so the choices of different
  misses never interact and the whole selection is one vectorised step.
- Approximate mode: the multiplicative probe ``(linear·2654435761 + epoch) % HOT`` (uint32).
  Two misses can reach the same slot when HOT is not a power of two, so misses claim in increasing
  ``cidx`` order and skip slots already claimed (the kernel does the same with CAS).
- Fallback for misses still without a victim: the multiplicative probe from
  ``(cursor + cidx·2654435761) % HOT``. For HOT not a power of two that probe need not visit every
  slot, so (our addition) it ends with a linear sweep: a miss gets a victim whenever one is free.
"""
from __future__ import annotations

import torch

from hisparse.kernels.state import EPOCH_MASK

CLOCK_VICTIM_SAMPLES = 6
_MULT = 2654435761
_U32 = 0xFFFFFFFF


def _age(r: torch.Tensor, epoch: int) -> torch.Tensor:
    """Calls since each slot was last referenced (epochs wrap at EPOCH_MASK): kernel epoch_age."""
    return (epoch - r) & EPOCH_MASK


def union_victims(ref: torch.Tensor, epoch: int, cursor: int, miss_count: int) -> torch.Tensor:
    """Victim slot (or -1) of every miss ``cidx in [0, miss_count)``; needs miss_count <= HOT.

    Among ``min(size, 6)`` evenly spaced members of the partition, the unprotected candidate with
    the largest age ``(epoch - ref) & EPOCH_MASK`` wins; ties go to the earliest sample.
    """
    hot = ref.numel()
    dev = ref.device
    cidx = torch.arange(miss_count, device=dev, dtype=torch.int64)
    size = (hot - 1 - cidx) // miss_count + 1
    samples = size.clamp(max=CLOCK_VICTIM_SAMPLES)
    s = torch.arange(CLOCK_VICTIM_SAMPLES, device=dev, dtype=torch.int64).unsqueeze(0)
    linear = cidx.unsqueeze(1) + (s * size.unsqueeze(1) // samples.unsqueeze(1)) * miss_count
    cand = (cursor + linear) % hot
    r = ref.to(torch.int64)[cand]
    eligible = (s < samples.unsqueeze(1)) & (r != epoch)
    age = torch.where(eligible, _age(r, epoch), torch.full_like(r, -1))
    best_age, best = age.max(dim=1)  # first maximal sample on ties (max returns the first index)
    victim = cand.gather(1, best.unsqueeze(1)).squeeze(1)
    return torch.where(best_age >= 0, victim, torch.full_like(victim, -1))


AGE_BUCKETS = 64  # ages of 63 calls and more tie (ring order decides among them): the kernel's histogram


def oldest_victims(ref: torch.Tensor, epoch: int, cursor: int, miss_count: int) -> torch.Tensor:
    """Victim slot (or -1) of every miss ``cidx in [0, miss_count)`` in union mode: the miss_count
    unprotected slots of largest age ``min((epoch - ref) & EPOCH_MASK, AGE_BUCKETS - 1)``, ties in ring
    order from the cursor (a call-granular exact LRU), handed to the misses in ring order.

    Why not upstream's partitioned CLOCK (``union_victims``): each of its misses sees only its residue
    class of ~HOT / misses slots (5 at HOT 4096 and ~800 misses), so it evicts rows that a global choice
    keeps; on `serving` that copies 5-6% more rows per call than this choice and 5% more than sequential
    exact LRU (results/probes/victim-policy-cpu-20261201/).
    """
    hot = ref.numel()
    ring = (cursor + torch.arange(hot, dtype=torch.int64)) % hot
    r = ref.to(torch.int64)[ring]
    age = torch.where(r != epoch, _age(r, epoch).clamp(max=AGE_BUCKETS - 1), torch.full_like(r, -1))
    oldest = torch.sort(age, descending=True, stable=True).indices[:miss_count]  # ring order on ties
    take = oldest[age[oldest] >= 0]
    chosen = ring[torch.sort(take).values]  # the selected slots, in ring order from the cursor
    out = torch.full((miss_count,), -1, dtype=torch.int64)
    out[: chosen.numel()] = chosen
    return out


# Union mode takes the oldest slots up to this HOT and the partitioned CLOCK above it (kernel
# kOldestLineHot): the kernel's scan costs ~0.5 us per 1024 slots on the commit's critical path, and the
# rows it saves shrink as HOT grows (results/probes/oldest-victims-h200-20261201/).
OLDEST_LINE_HOT = 16384


def union_mode_victims(ref: torch.Tensor, epoch: int, cursor: int, miss_count: int) -> torch.Tensor:
    """The union mode's victim of every miss: ``oldest_victims`` up to OLDEST_LINE_HOT, ``union_victims`` above."""
    pick = oldest_victims if ref.numel() <= OLDEST_LINE_HOT else union_victims
    return pick(ref, epoch, cursor, miss_count)


def approx_victim(ref: list[int], epoch: int, ordinal: int, victim_count: int) -> int:
    """First unprotected slot of the approximate-mode probe; claims it. -1 if none."""
    hot = len(ref)
    for linear in range(ordinal, hot, victim_count):
        cand = ((linear * _MULT + epoch) & _U32) % hot
        if ref[cand] != epoch:
            ref[cand] = epoch
            return cand
    return -1


def fallback_victim(ref: list[int], epoch: int, cursor: int, cidx: int) -> int:
    """§3.7.7 fallback probe, then a linear sweep (see module doc); claims the slot. -1 if all protected."""
    hot = len(ref)
    start = ((cursor + cidx * _MULT) & _U32) % hot
    for a in range(hot):
        cand = ((start + a * _MULT) & _U32) % hot
        if ref[cand] != epoch:
            ref[cand] = epoch
            return cand
    for j in range(hot):
        cand = (start + j) % hot
        if ref[cand] != epoch:
            ref[cand] = epoch
            return cand
    return -1
