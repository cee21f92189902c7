"""Persistent state of the multi-step (speculative) swap, one per layer.

Layout (ours, not upstream's packed rows; see docs/design.md). R = request slots, S = steps,
K = top_k, T = S*K, HOT = hot_buffer_size, C = scratch capacity, H = hash size, M = miss-table size.

| tensor        | dtype, shape   | meaning |
| ------------- | -------------- | ------- |
| hash_index    | int64 [R,2,H]  | cuckoo banks 0/1 mapping token -> hot slot. Entry = (slot << 32) | uint32(token); any negative value is empty (-1 never used, -2 erased). Tokens 0 <= t < HOT held in slot t need no entry (identity fast path). |
| ref_epochs    | int32 [R,HOT]  | CLOCK: epoch of the slot's last reference; 0 = never. |
| clock         | int32 [R,2]    | [epoch of the last call (0 before the first), CLOCK cursor in [0, HOT)]. |
| counters      | int32 [R,4]    | [last call's unique-miss count, work counter, union-hit counter, flags]; flags bit 0 = hash degraded (lookups fall back to a linear scan; the kernel's commit rebuilds the index and clears it), bit 1 = outputs pending (set by the gather when a lane gave up waiting for a miss to be published or hit overflow, cleared by the commit of the same call, so 0 between calls), bits 8-15 = gather CTAs past their lookups (counted by the gather, read and cleared by the commit of the same call, so 0 between calls). Work and union-hit counters are 0 between calls. |
| scratch_locs  | int32 [R,C]    | physical device rows owned as scratch; the commit rotates them with evicted hot rows. |
| miss_keys     | int64 [R,M]    | kernel workspace: open-addressing table of this call's misses, (epoch << 32) | uint32(token). |
| miss_vals     | int64 [R,M]    | kernel workspace: (epoch << 32) | unique index u, later | device row for overflow misses, 0xFFFFFFFF = unresolved. |
| miss_order    | int32 [R,T]    | kernel workspace: table position of unique miss u (low 14 bits) | flags (bit 29 claim, bit 30 admit). |

Epochs are 31-bit and advance by one per call (wrapping to 1, never 0); the workspace entries are
epoch-tagged so nothing is cleared between calls.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from hisparse.errors import InputError
from hisparse.kernels.limits import MAX_HOT_BUFFER_SIZE, MAX_STEPS, MAX_STEPS_X_TOP_K, MIN_SCRATCH_CAPACITY
from hisparse.kernels.reference.cuckoo import CuckooRow, pack_entry, primary_hash, secondary_hash
from hisparse.kernels.validation.common import check_int, check_tensor

EPOCH_MASK = 0x7FFFFFFF
FLAG_HASH_DEGRADED = 1
COUNTER_LAST_MISSES, COUNTER_WORK, COUNTER_UNION_HITS, COUNTER_FLAGS = range(4)


def _next_pow2(n: int) -> int:
    return 1 << (max(n, 1) - 1).bit_length()


def next_epoch(epoch: int) -> int:
    """Epoch of the next call: +1 within 31 bits, never 0 (0 means 'never referenced')."""
    e = (epoch + 1) & EPOCH_MASK
    return e if e != 0 else 1


@dataclass(frozen=True)
class MultiStepSizes:
    """Every size of the multi-step state, derived from the four user-facing numbers."""

    num_req_slots: int
    steps: int
    top_k: int
    hot_buffer_size: int
    scratch_capacity: int
    hash_size: int
    miss_table_size: int

    @property
    def occurrences(self) -> int:
        return self.steps * self.top_k


def multi_step_sizes(
    num_req_slots: int, steps: int, top_k: int, hot_buffer_size: int, *, scratch_capacity: int | None = None
) -> MultiStepSizes:
    """Sizes for (request slots, steps, top_k, hot_buffer_size); raises InputError out of range.

    Scratch capacity default min(T, max(1024, T - HOT)): at least T - HOT guarantees every unique miss
    finds a row (the direct-overflow misses beyond C need at most HOT - union_hits victims).
    """
    check_int("num_req_slots", num_req_slots, lo=1)
    check_int("steps", steps, lo=1, hi=MAX_STEPS)
    check_int("top_k", top_k, lo=1, hi=MAX_STEPS_X_TOP_K)
    check_int("hot_buffer_size", hot_buffer_size, lo=max(top_k, 2), hi=MAX_HOT_BUFFER_SIZE)
    t = steps * top_k
    if t > MAX_STEPS_X_TOP_K:
        raise InputError(f"steps*top_k: must be <= {MAX_STEPS_X_TOP_K}, got {steps}*{top_k}={t}")
    floor = max(0, t - hot_buffer_size)
    if scratch_capacity is None:
        scratch_capacity = min(t, max(MIN_SCRATCH_CAPACITY, floor))
    check_int("scratch_capacity", scratch_capacity, lo=max(floor, 1), hi=t)
    return MultiStepSizes(
        num_req_slots=num_req_slots,
        steps=steps,
        top_k=top_k,
        hot_buffer_size=hot_buffer_size,
        scratch_capacity=scratch_capacity,
        hash_size=_next_pow2(2 * hot_buffer_size),
        miss_table_size=_next_pow2(2 * t),
    )


@dataclass(frozen=True)
class MultiStepState:
    hash_index: torch.Tensor
    ref_epochs: torch.Tensor
    clock: torch.Tensor
    counters: torch.Tensor
    scratch_locs: torch.Tensor
    miss_keys: torch.Tensor
    miss_vals: torch.Tensor
    miss_order: torch.Tensor
    sizes: MultiStepSizes

    @property
    def device(self) -> torch.device:
        return self.ref_epochs.device

    def tensors(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sizes"}

    def clone(self) -> "MultiStepState":
        return MultiStepState(**{k: v.clone() for k, v in self.tensors().items()}, sizes=self.sizes)

    def validate(self) -> None:
        """Shapes and dtypes against ``sizes``; raises InputError naming the field."""
        s = self.sizes
        r, hot, t = s.num_req_slots, s.hot_buffer_size, s.occurrences
        dev = self.device
        check_tensor("state.hash_index", self.hash_index, dtypes=torch.int64, shape=(r, 2, s.hash_size), device=dev)
        check_tensor("state.ref_epochs", self.ref_epochs, dtypes=torch.int32, shape=(r, hot), device=dev)
        check_tensor("state.clock", self.clock, dtypes=torch.int32, shape=(r, 2), device=dev)
        check_tensor("state.counters", self.counters, dtypes=torch.int32, shape=(r, 4), device=dev)
        check_tensor("state.scratch_locs", self.scratch_locs, dtypes=torch.int32, shape=(r, s.scratch_capacity), device=dev)
        check_tensor("state.miss_keys", self.miss_keys, dtypes=torch.int64, shape=(r, s.miss_table_size), device=dev)
        check_tensor("state.miss_vals", self.miss_vals, dtypes=torch.int64, shape=(r, s.miss_table_size), device=dev)
        check_tensor("state.miss_order", self.miss_order, dtypes=torch.int32, shape=(r, t), device=dev)
        for name, tensor in self.tensors().items():
            if not tensor.is_contiguous():
                raise InputError(f"state.{name}: must be contiguous")


def _index_tokens(hash_index: torch.Tensor, tokens: torch.Tensor, counters: torch.Tensor, hot: int) -> None:
    """Insert every non-identity resident token of every request (vectorised, bank 0 then bank 1).

    Tokens that find both of their buckets taken go in with cuckoo kicks; only a failed kick chain
    marks the request degraded (linear-scan lookups: always correct, only slower).
    """
    h = hash_index.shape[2]
    slots = torch.arange(hot, device=tokens.device)
    for rid in range(tokens.shape[0]):
        tok = tokens[rid, :hot].to(torch.int64)
        need = (tok >= 0) & ~((tok < hot) & (tok == slots))
        if not bool(need.any()):
            continue
        t, s = tok[need], slots[need]
        left = torch.ones_like(t, dtype=torch.bool)
        for bank, fn in ((0, primary_hash), (1, secondary_hash)):
            pos = fn(t, h)
            free = hash_index[rid, bank, pos] < 0
            cand = left & free
            # first writer per bucket wins: keep the lowest index per position
            order = torch.argsort(pos[cand], stable=True)
            cp, ci = pos[cand][order], torch.nonzero(cand).flatten()[order]
            first = torch.ones_like(cp, dtype=torch.bool)
            first[1:] = cp[1:] != cp[:-1]
            win = ci[first]
            hash_index[rid, bank, pos[win]] = pack_entry(t[win], s[win])
            left[win] = False
        if bool(left.any()) and not _kick_in(hash_index, rid, t[left], s[left]):
            counters[rid, COUNTER_FLAGS] |= FLAG_HASH_DEGRADED


def _kick_in(hash_index: torch.Tensor, rid: int, tokens: torch.Tensor, slots: torch.Tensor) -> bool:
    """Insert the few tokens whose two buckets were both taken with cuckoo kicks (docs/semantics.md §3.5),
    so a fresh state starts non-degraded (a degraded request pays a linear scan per lookup on its
    first call). False when a kick chain fails: the caller then degrades the request."""
    row = CuckooRow(hash_index, rid)
    ok = all(row.insert(int(t), int(s)) for t, s in zip(tokens.tolist(), slots.tolist()))
    row.write_back()
    return ok


def new_multi_step_state(
    num_req_slots: int,
    steps: int,
    top_k: int,
    hot_buffer_size: int,
    *,
    scratch_locs: torch.Tensor,
    device_buffer_tokens: torch.Tensor | None = None,
) -> MultiStepState:
    """Allocate and initialise the persistent state of one layer.

    ``scratch_locs`` [num_req_slots, C] int32 are the physical device rows given to each request as
    scratch (C = ``multi_step_sizes(...).scratch_capacity``, or any width in [max(1, T-HOT), T]).
    ``device_buffer_tokens`` (optional) are the current slot contents, indexed so lookups find them.
    """
    check_tensor("scratch_locs", scratch_locs, dtypes=torch.int32, ndim=2)
    sizes = multi_step_sizes(num_req_slots, steps, top_k, hot_buffer_size, scratch_capacity=scratch_locs.shape[1])
    check_tensor("scratch_locs", scratch_locs, shape=(num_req_slots, None))
    # A negative scratch row would be recorded as a plan destination of -1 (docs/known-issues.md #1);
    # one host sync here, at allocation time, keeps every state built by this helper clear of it.
    if scratch_locs.numel() and int(scratch_locs.min()) < 0:
        bad = torch.nonzero(scratch_locs < 0)[0].tolist()
        raise InputError(f"scratch_locs: every scratch row must be a device row >= 0, got "
                         f"{int(scratch_locs[bad[0], bad[1]])} at request slot {bad[0]}, entry {bad[1]}")
    dev = scratch_locs.device
    r, t = num_req_slots, sizes.occurrences
    state = MultiStepState(
        hash_index=torch.full((r, 2, sizes.hash_size), -1, dtype=torch.int64, device=dev),
        ref_epochs=torch.zeros((r, hot_buffer_size), dtype=torch.int32, device=dev),
        clock=torch.zeros((r, 2), dtype=torch.int32, device=dev),
        counters=torch.zeros((r, 4), dtype=torch.int32, device=dev),
        scratch_locs=scratch_locs.contiguous().clone(),
        miss_keys=torch.full((r, sizes.miss_table_size), -1, dtype=torch.int64, device=dev),
        miss_vals=torch.full((r, sizes.miss_table_size), -1, dtype=torch.int64, device=dev),
        miss_order=torch.zeros((r, t), dtype=torch.int32, device=dev),
        sizes=sizes,
    )
    if device_buffer_tokens is not None:
        check_tensor("device_buffer_tokens", device_buffer_tokens, dtypes=torch.int32, ndim=2,
                     min_shape=(num_req_slots, hot_buffer_size), device=dev)
        _index_tokens(state.hash_index, device_buffer_tokens[:num_req_slots], state.counters, hot_buffer_size)
    return state
