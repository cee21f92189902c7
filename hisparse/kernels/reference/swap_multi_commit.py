"""Commit of the multi-step swap for one request (docs/semantics.md §3.7), deterministic.

Input: the gather's unique misses in first-occurrence order (u = 0, 1, ...), the distinct hit slots
(their refs already set to the epoch by the gather) and the last step's hits and misses. Output: the
device row each miss resolves to, and the slot-table, scratch, ref and cuckoo updates applied.

Misses are processed as ``cidx = u`` in increasing order. The kernel runs them in parallel; union
mode partitions are disjoint, so there the order does not matter, and elsewhere this fixed order is
what makes the reference reproducible.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.kernels.reference.clock import approx_victim, fallback_victim, union_mode_victims
from hisparse.kernels.reference.cuckoo import CuckooRow

UNION, APPROX = "union", "approx"


@dataclass(frozen=True)
class CommitInput:
    rid: int
    epoch: int
    cursor: int
    miss_tokens: list[int]  # token of unique miss u
    union_hits: int  # distinct hot slots hit by this call
    last_hit_slots: torch.Tensor  # distinct hot slots hit in the last step
    last_miss_order: list[int]  # distinct u seen in the last step, in order of first appearance there


@dataclass(frozen=True)
class CommitResult:
    mode: str
    overflow: bool
    dst: list[int]  # row valid for the rest of the call, per u (-1 = unresolved)
    direct: list[int]  # u copied host -> victim's old row by the commit
    rotated: int  # misses rotated into the hot buffer (no copy)
    degraded: bool  # a cuckoo insert had to drop an entry


@dataclass(frozen=True)
class _Mode:
    union: bool
    overflow: bool
    budget: int


def _select_mode(miss_count: int, union_hits: int, capacity: int, hot: int) -> _Mode:
    overflow = miss_count > capacity
    union = miss_count + union_hits <= hot  # the whole union fits in the hot buffer
    mandatory_direct = miss_count - capacity if overflow else 0
    if union:
        budget = 0
    elif overflow:
        budget = max(0, hot - union_hits - mandatory_direct)
    else:
        budget = hot
    return _Mode(union=union, overflow=overflow, budget=budget)


def _approx_admission(ref: torch.Tensor, ci: CommitInput, mode: _Mode, capacity: int) -> set[int]:
    """Approximate mode: keep only the last step's working set (APPROX_ADMISSION_STEPS = 1).

    Refs are wiped unless in overflow: there, every hit of this call must stay protected from the
    direct-overflow copies that overwrite victims' rows in place.
    """
    if not mode.overflow:
        ref.zero_()
    ref[ci.last_hit_slots] = ci.epoch
    admitted: set[int] = set()
    ordinal = 0
    for u in ci.last_miss_order:
        if u < capacity:
            if ordinal < mode.budget:
                admitted.add(u)
            ordinal += 1
    return admitted


def _victims(ref_t: torch.Tensor, ci: CommitInput, mode: _Mode, active: list[int], capacity: int) -> tuple[list[int], list[int]]:
    """Victim per active miss (claimed in ``ref``, returned as a list), or -1."""
    mc = len(ci.miss_tokens)
    victims = [-1] * mc
    if mode.union:
        chosen = union_mode_victims(ref_t, ci.epoch, ci.cursor, mc).tolist()
        ref = ref_t.tolist()
        for u in active:
            victims[u] = chosen[u]
            if chosen[u] >= 0:
                ref[chosen[u]] = ci.epoch
    else:
        ref = ref_t.tolist()
        for u in active:
            direct = u >= capacity
            count, ordinal = (mc - capacity, u - capacity) if direct else (mc, u)
            victims[u] = approx_victim(ref, ci.epoch, ordinal, count)
    for u in active:  # after every primary choice, as the kernel's __syncthreads() orders it
        if victims[u] < 0:
            victims[u] = fallback_victim(ref, ci.epoch, ci.cursor, u)
    return victims, ref


def commit_request(
    ci: CommitInput,
    *,
    capacity: int,
    ref_epochs: torch.Tensor,
    slot_tokens: torch.Tensor,
    slot_locs: torch.Tensor,
    scratch_locs: torch.Tensor,
    hash_index: torch.Tensor,
) -> CommitResult:
    """Run the commit for request ``ci.rid``; mutates the four per-request tables and the banks.

    ``slot_tokens``/``slot_locs`` are the request's rows of device_buffer_tokens/_locs (hot part
    only is touched), ``ref_epochs``/``scratch_locs`` the request's state rows.
    """
    hot = ref_epochs.numel()
    mc = len(ci.miss_tokens)
    mode = _select_mode(mc, ci.union_hits, capacity, hot)
    admitted = set() if mode.union else _approx_admission(ref_epochs, ci, mode, capacity)
    scratch = scratch_locs.tolist()
    dst = [scratch[u] if u < capacity else -1 for u in range(mc)]  # gather's scratch row, pre-rotation
    # rotate: u < C and (union or admitted); direct: overflow and u >= C; the rest stay in scratch.
    active = [u for u in range(mc) if (u >= capacity) or mode.union or (u in admitted)]
    victims, ref = _victims(ref_epochs, ci, mode, active, capacity) if active else ([], ref_epochs.tolist())
    tokens = slot_tokens[:hot].tolist()
    locs = slot_locs[:hot].tolist()
    cuckoo = CuckooRow(hash_index, ci.rid)
    direct: list[int] = []
    rotated = 0
    degraded = False
    for u in active:
        v = victims[u]
        if v < 0:
            continue
        rotate = u < capacity
        old_loc = locs[v]
        new_loc = scratch[u] if rotate else old_loc
        if old_loc < 0 or new_loc < 0:
            continue
        old_tok, t = tokens[v], ci.miss_tokens[u]
        tokens[v] = t
        ref[v] = ci.epoch
        if rotate:  # the data already sits in the scratch row: swap rows, no copy
            locs[v], scratch[u] = new_loc, old_loc
            rotated += 1
        else:  # direct overflow: copy host -> the victim's own row (done by the caller)
            dst[u] = old_loc
            direct.append(u)
        if old_tok >= 0:
            cuckoo.erase(old_tok, v)
        if t != v and not cuckoo.insert(t, v):  # t == v is found by the identity fast path
            degraded = True
    cuckoo.write_back()
    dev = ref_epochs.device
    ref_epochs.copy_(torch.tensor(ref, dtype=torch.int32, device=dev))
    slot_tokens[:hot] = torch.tensor(tokens, dtype=torch.int32, device=dev)
    slot_locs[:hot] = torch.tensor(locs, dtype=torch.int32, device=dev)
    scratch_locs.copy_(torch.tensor(scratch, dtype=torch.int32, device=dev))
    return CommitResult(
        mode=UNION if mode.union else APPROX, overflow=mode.overflow, dst=dst, direct=direct,
        rotated=rotated, degraded=degraded,
    )
