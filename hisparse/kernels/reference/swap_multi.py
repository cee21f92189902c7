"""Pure-PyTorch reference of the multi-step (speculative) swap: gather + commit, docs/semantics.md
§3.5-§3.9, on the state layout of ``hisparse.kernels.state``. Deterministic: the unique-miss order is the
first occurrence in flattened ``(step, k)`` order, and the commit handles misses in that order.

Per real request: the gather resolves each valid occurrence from the extra page (tail), then the hot
buffer, else dedups it as a miss and (u < scratch capacity) copies it once into scratch row u; the
commit (``swap_multi_commit``) then picks victims and rotates or direct-copies. Lookups are
vectorised; only the commit loops over unique misses in Python. Runs on CPU or CUDA tensors.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.kernels.reference.bytes import copy_rows
from hisparse.kernels.reference.cuckoo import hot_lookup
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.reference.swap_multi_commit import CommitInput, CommitResult, commit_request
from hisparse.kernels.state import (
    COUNTER_FLAGS,
    COUNTER_LAST_MISSES,
    COUNTER_UNION_HITS,
    COUNTER_WORK,
    FLAG_HASH_DEGRADED,
    next_epoch,
)
from hisparse.kernels.validation.swap_multi import SwapMultiShape, check_swap_multi_contract


@dataclass(frozen=True)
class RequestStats:
    """What the call did for one real batch row."""

    batch_row: int
    request_slot: int
    unique_misses: int
    union_hits: int  # distinct hot slots hit
    tail_hits: int  # distinct tokens resolved from the extra page
    host_missing: int  # distinct tokens neither resident nor on host (output -1)
    mode: str  # "union" or "approx"
    overflow: bool  # more unique misses than scratch rows
    rotated: int  # misses admitted by rotating their scratch row into the hot buffer
    direct: int  # overflow misses copied straight into a victim's row
    copied_bytes: int
    degraded: bool  # the request's lookups fall back to a linear scan after this call


@dataclass(frozen=True)
class SwapMultiStats:
    requests: tuple[RequestStats, ...]

    @property
    def unique_misses(self) -> tuple[int, ...]:
        return tuple(r.unique_misses for r in self.requests)

    @property
    def copied_bytes(self) -> int:
        return sum(r.copied_bytes for r in self.requests)


@dataclass(frozen=True)
class _Gather:
    out: torch.Tensor  # int64 [T]: hits and tail hits resolved, everything else -1
    miss_pos: torch.Tensor  # occurrences that are misses, ascending
    miss_u: torch.Tensor  # unique-miss index of each of them
    miss_tokens: torch.Tensor  # [mc] token of miss u
    miss_src: torch.Tensor  # [mc] host row of miss u
    union_hits: int
    tail_hits: int
    host_missing: int
    last_hit_slots: torch.Tensor
    last_miss_order: list[int]


def _occurrences(kw: dict, shape: SwapMultiShape, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens [T] and their step's seq_len [T], int64, flattened (s, k)."""
    tok = kw["top_k_tokens"][b].reshape(-1).to(torch.int64)
    seq = kw["seq_lens"][b * shape.steps:(b + 1) * shape.steps].to(torch.int64)
    return tok, seq.repeat_interleave(shape.top_k)


def _tail(tok, seq, valid, tail_tok, tail_loc, page) -> tuple[torch.Tensor, torch.Tensor]:
    """Occurrences found in the extra page (first slot holding the token with a row >= 0)."""
    hit = torch.zeros_like(valid)
    loc = torch.full_like(tok, -1)
    pos = torch.nonzero(valid & (tok >= seq - page)).flatten()
    if pos.numel():
        match = (tok[pos].unsqueeze(1) == tail_tok.unsqueeze(0)) & (tail_loc >= 0).unsqueeze(0)
        found = match.any(dim=1)
        first = match.to(torch.int8).argmax(dim=1)
        hit[pos[found]] = True
        loc[pos[found]] = tail_loc[first[found]]
    return hit, loc


def _dedup(pos: torch.Tensor, tokens: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unique tokens ranked by first occurrence: (u per occurrence, token per u, first position per u)."""
    uniq, inv = torch.unique(tokens, return_inverse=True)
    first = torch.full((uniq.numel(),), t, dtype=torch.int64, device=pos.device)
    first.scatter_reduce_(0, inv, pos, reduce="amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=pos.device)
    return rank[inv], uniq[order], first[order]


def _last_miss_order(miss_pos: torch.Tensor, miss_u: torch.Tensor, last_start: int) -> list[int]:
    in_last = miss_pos >= last_start
    if not bool(in_last.any()):
        return []
    u = miss_u[in_last]
    _, inv = torch.unique(u, return_inverse=True)
    pos = miss_pos[in_last]
    first = torch.full((int(inv.max()) + 1,), 1 << 40, dtype=torch.int64, device=pos.device)
    first.scatter_reduce_(0, inv, pos, reduce="amin")
    return u[torch.isin(pos, first)].tolist()  # one entry per u, at its first position, ascending


def _gather(kw: dict, shape: SwapMultiShape, b: int, rid: int, epoch: int) -> _Gather:
    st, hot, page = kw["state"], shape.hot_buffer_size, shape.page_size
    dbt, dbl = kw["device_buffer_tokens"][rid], kw["device_buffer_locs"][rid]
    tok, seq = _occurrences(kw, shape, b)
    valid = (tok >= 0) & (tok < seq)
    tail, out = _tail(tok, seq, valid, dbt[hot:hot + page].to(torch.int64), dbl[hot:hot + page].to(torch.int64), page)
    need = valid & ~tail
    slot = torch.full_like(tok, -1)
    degraded = (st.counters[rid, COUNTER_FLAGS] & FLAG_HASH_DEGRADED).bool().reshape(1)
    slot[need] = hot_lookup(tok[need].unsqueeze(0), dbt[:hot].unsqueeze(0), st.hash_index[rid].unsqueeze(0), degraded)[0]
    hit = slot >= 0
    out[hit] = dbl[slot[hit]].to(torch.int64)
    hit_slots = torch.unique(slot[hit])
    union_hits = int((st.ref_epochs[rid, hit_slots] != epoch).sum())  # distinct slots newly referenced
    st.ref_epochs[rid, hit_slots] = epoch
    rest = need & ~hit
    src = torch.full_like(tok, -1)
    src[rest] = kw["host_cache_locs"][rid, tok[rest]]
    missing = rest & (src < 0)
    miss_pos = torch.nonzero(rest & (src >= 0)).flatten()
    miss_u, miss_tokens, first = _dedup(miss_pos, tok[miss_pos], shape.occurrences)
    last_start = (shape.steps - 1) * shape.top_k
    return _Gather(
        out=out, miss_pos=miss_pos, miss_u=miss_u, miss_tokens=miss_tokens, miss_src=src[first],
        union_hits=union_hits, tail_hits=int(torch.unique(tok[tail]).numel()),
        host_missing=int(torch.unique(tok[missing]).numel()),
        last_hit_slots=torch.unique(slot[hit & (torch.arange(tok.numel(), device=tok.device) >= last_start)]),
        last_miss_order=_last_miss_order(miss_pos, miss_u, last_start),
    )


def _write_plan(kw: dict, b: int, g: _Gather, dst: torch.Tensor) -> None:
    mc = g.miss_tokens.numel()
    kw["miss_count"][b] = mc
    kw["miss_src"][b, :mc] = g.miss_src
    kw["miss_dst"][b, :mc] = dst.to(torch.int32)


def _swap_request(kw: dict, shape: SwapMultiShape, b: int) -> RequestStats:
    st, item, cap = kw["state"], shape.item_size_bytes, shape.scratch_capacity
    rid = int(kw["req_pool_indices"][b])
    epoch, cursor = next_epoch(int(st.clock[rid, 0])), int(st.clock[rid, 1]) % shape.hot_buffer_size
    g = _gather(kw, shape, b, rid, epoch)
    mc = g.miss_tokens.numel()
    # Gather copies: unique miss u < C goes once into its scratch row (taken before the commit rotates).
    scratch = st.scratch_locs[rid, :min(mc, cap)].to(torch.int64)
    ok = scratch >= 0
    copy_rows(kw["host_cache"], g.miss_src[:scratch.numel()][ok], kw["device_buffer"], scratch[ok], item)
    ci = CommitInput(rid=rid, epoch=epoch, cursor=cursor, miss_tokens=g.miss_tokens.tolist(),
                     union_hits=g.union_hits, last_hit_slots=g.last_hit_slots, last_miss_order=g.last_miss_order)
    c: CommitResult = commit_request(
        ci, capacity=cap, ref_epochs=st.ref_epochs[rid], slot_tokens=kw["device_buffer_tokens"][rid],
        slot_locs=kw["device_buffer_locs"][rid], scratch_locs=st.scratch_locs[rid], hash_index=st.hash_index)
    dst = torch.tensor(c.dst, dtype=torch.int64, device=g.out.device)
    direct = torch.tensor(c.direct, dtype=torch.int64, device=g.out.device)
    copy_rows(kw["host_cache"], g.miss_src[direct], kw["device_buffer"], dst[direct], item)
    out = g.out
    out[g.miss_pos] = dst[g.miss_u]  # every occurrence of a miss gets the row of its first one
    kw["top_k_device_locs"][b] = out.reshape(shape.steps, shape.top_k).to(torch.int32)
    if shape.record_plan:
        _write_plan(kw, b, g, dst)
    flags = int(st.counters[rid, COUNTER_FLAGS]) | (FLAG_HASH_DEGRADED if c.degraded else 0)
    st.counters[rid, COUNTER_LAST_MISSES] = mc
    st.counters[rid, COUNTER_WORK] = 0
    st.counters[rid, COUNTER_UNION_HITS] = 0
    st.counters[rid, COUNTER_FLAGS] = flags
    st.clock[rid, 0] = epoch
    st.clock[rid, 1] = (cursor + min(mc, shape.hot_buffer_size)) % shape.hot_buffer_size if mc else cursor
    copied = int(ok.sum()) + len(c.direct)
    return RequestStats(
        batch_row=b, request_slot=rid, unique_misses=mc, union_hits=g.union_hits, tail_hits=g.tail_hits,
        host_missing=g.host_missing, mode=c.mode, overflow=c.overflow, rotated=c.rotated, direct=len(c.direct),
        copied_bytes=copied * item, degraded=bool(flags & FLAG_HASH_DEGRADED),
    )


@keyword_op("swap_multi")
def swap_multi_step(kw: Bound) -> SwapMultiStats:
    """Multi-step swap, in place (see module doc). ``pdl`` is accepted and ignored.

    Padding rows (b >= num_real_reqs[0]) get outputs -1 and miss_count 0; their state is untouched.

    The top-k contract of both swaps (docs/design.md "The top-k contract") is checked on every call:
    -1 is padding; other tokens in [0, seq_len) of their step (a short single-step row: its slot
    table); tokens first in a short row; unique within a step. A violation raises InputError.
    """
    shape = check_swap_multi_contract(**kw)
    n_real = int(kw.num_real_reqs[0])
    kw.top_k_device_locs[n_real:] = -1
    if shape.record_plan:
        kw.miss_count[n_real:shape.batch] = 0
    stats = tuple(_swap_request(kw, shape, b) for b in range(n_real))
    return SwapMultiStats(requests=stats)
