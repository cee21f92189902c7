"""Pure-PyTorch single-step exact-LRU swap: a bit-exact emulation of docs/semantics.md §2.4.

The kernel runs one CTA per request; this walks the real requests in Python and does each request's
work with whole-row torch ops (sort/searchsorted for the hash, masks for the LRU scan), so HOT=32767
and a batch of 64 stay cheap. Everything is computed on CPU copies and written back to the tensors'
own device, so the same function checks CPU and CUDA callers.

Per long request (seq_len > HOT), with E = evictable slots (every non-hit slot, empty ones included)
and H = hit slots, both in old LRU order:
- the newest token (seq_len-1) resolves to ``device_buffer_locs[rid, HOT]`` without a lookup;
- the m-th miss in top-k index order takes ``s_lru_slots_out[HOT-1-m]`` = E[m] (hits are compacted
  forward and evictables backward in the kernel's staging array, so position HOT-1-m is E[m]);
- new LRU order = E[M:] ++ E[:M] ++ H.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.kernels.reference.bytes import copy_rows
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.swap_single import SwapSingleShape, check_swap_single_contract

PADDING, FAST, LONG = "padding", "fast", "long"


@dataclass(frozen=True)
class SwapStats:
    """What one call did, per batch row (``paths[b]`` is "padding", "fast" or "long"; only long rows
    have hits/misses) and in total."""

    paths: tuple[str, ...]
    hits: tuple[int, ...]
    misses: tuple[int, ...]
    newest_hits: tuple[int, ...]
    copied_bytes: tuple[int, ...]

    @property
    def total_hits(self) -> int:
        return sum(self.hits)

    @property
    def total_misses(self) -> int:
        return sum(self.misses)

    @property
    def total_newest_hits(self) -> int:
        return sum(self.newest_hits)

    @property
    def total_copied_bytes(self) -> int:
        return sum(self.copied_bytes)


@dataclass(frozen=True)
class LongRowResult:
    """One long request's outcome (CPU, int64), before anything is written back."""

    out: torch.Tensor  # [K] device rows
    miss_slots: torch.Tensor  # [M] slot taken by the m-th miss
    miss_tokens: torch.Tensor  # [M] token loaded by the m-th miss
    miss_locs: torch.Tensor  # [M] device row of that slot (copy destination, plan miss_dst)
    new_lru: torch.Tensor  # [HOT]
    hits: int  # hit slots (the kernel's s_total_hits)
    newest_hit: int  # 0 or 1


def _hit_entries(tok: torch.Tensor, keyed: torch.Tensor, lru_tok: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Emulate the smem hash: keys are the top-k tokens not resolved as newest, a repeated key keeps
    its last index. Returns (hit mask over LRU positions, top-k index hit at each hit position)."""
    keys = tok[keyed]
    if keys.numel() == 0:
        return torch.zeros_like(lru_tok, dtype=torch.bool), torch.zeros(0, dtype=torch.int64)
    key_idx = torch.nonzero(keyed).flatten()
    sorted_keys, order = torch.sort(keys, stable=True)
    # right=True then -1 lands on the last of equal keys, i.e. the largest index: "last index wins".
    pos = (torch.searchsorted(sorted_keys, lru_tok, right=True) - 1).clamp(min=0)
    hit = sorted_keys[pos] == lru_tok
    return hit, key_idx[order[pos[hit]]]


def swap_long_row(
    tok: torch.Tensor, seq_len: int, slot_tokens: torch.Tensor, lru: torch.Tensor, locs: torch.Tensor, hot: int
) -> LongRowResult:
    """§2.4 steps 4-7 for one request. ``tok`` [K], ``slot_tokens``/``locs`` [HOT+page], ``lru`` [HOT]."""
    k = tok.numel()
    out = torch.full((k,), -1, dtype=torch.int64)
    newest = tok == seq_len - 1
    out[newest] = locs[hot]
    padding = tok < 0  # -1 entries: output -1, never looked up, never a miss (the kernel's step 4)
    lru_tok = slot_tokens[lru]  # token of each slot, in LRU order
    hit, hit_idx = _hit_entries(tok, ~newest & ~padding, lru_tok)
    out[hit_idx] = locs[lru[hit]]
    resolved = newest | padding
    resolved[hit_idx] = True
    miss_idx = torch.nonzero(~resolved).flatten()  # misses in top-k index order
    evictable, hit_slots = lru[~hit], lru[hit]
    m = miss_idx.numel()
    # m <= len(evictable) whenever the contract holds (K <= HOT, unique tokens and residents).
    miss_slots = evictable[:m]
    out[miss_idx] = locs[miss_slots]
    return LongRowResult(
        out=out,
        miss_slots=miss_slots,
        miss_tokens=tok[miss_idx],
        miss_locs=out[miss_idx],
        new_lru=torch.cat([evictable[m:], miss_slots, hit_slots]),
        hits=int(hit.sum()),
        newest_hit=int(bool(newest.any())),
    )


def fast_row(tok: torch.Tensor, seq_len: int, locs: torch.Tensor) -> torch.Tensor:
    """§2.4 step 2: slots map 1:1 to positions; -1 past min(seq_len, K) and for negative tokens."""
    valid = (torch.arange(tok.numel()) < seq_len) & (tok >= 0)
    return torch.where(valid, locs[tok.clamp(min=0)], torch.full_like(tok, -1))


@dataclass
class _Plan:
    """Everything the call writes, gathered on the CPU before touching the caller's tensors."""

    out: torch.Tensor  # [bs, K] int64
    counts: torch.Tensor  # [bs] int64 (0 for padding and fast rows)
    long_rows: list[tuple[int, int, LongRowResult]]  # (batch row, rid, result)


def _plan_call(kw: dict, shape: SwapSingleShape) -> tuple[_Plan, SwapStats]:
    hot, n = shape.hot_buffer_size, int(kw["num_real_reqs"][0])
    tok = kw["top_k_tokens"][:n].cpu().to(torch.int64)
    rids = kw["req_pool_indices"][:n].cpu().to(torch.int64)
    seq = kw["seq_lens"][:n].cpu().to(torch.int64)
    # Only the rows this call touches travel to the CPU.
    rid_dev = rids.to(kw["device_buffer_locs"].device)
    locs = kw["device_buffer_locs"][rid_dev].cpu().to(torch.int64)
    slot_tokens = kw["device_buffer_tokens"][rid_dev].cpu().to(torch.int64)
    lru = kw["lru_slots"][rid_dev].cpu().to(torch.int64)

    plan = _Plan(torch.full((shape.batch, shape.top_k), -1, dtype=torch.int64),
                 torch.zeros(shape.batch, dtype=torch.int64), [])
    paths = [PADDING] * shape.batch
    hits, newest = [0] * shape.batch, [0] * shape.batch
    for b in range(n):
        if int(seq[b]) <= hot:
            paths[b] = FAST
            plan.out[b] = fast_row(tok[b], int(seq[b]), locs[b])
            continue
        paths[b] = LONG
        res = swap_long_row(tok[b], int(seq[b]), slot_tokens[b], lru[b], locs[b], hot)
        plan.out[b], plan.counts[b] = res.out, res.miss_slots.numel()
        hits[b], newest[b] = res.hits, res.newest_hit
        plan.long_rows.append((b, int(rids[b]), res))
    misses = [int(c) for c in plan.counts]
    stats = SwapStats(tuple(paths), tuple(hits), tuple(misses), tuple(newest),
                      tuple(c * shape.item_size_bytes for c in misses))
    return plan, stats


def _host_rows(host_cache_locs: torch.Tensor, plan: _Plan) -> list[torch.Tensor]:
    """Host row of every miss, per long row; one flat gather on the table's device (it can be huge)."""
    if not plan.long_rows:
        return []
    max_len = host_cache_locs.shape[1]
    flat = torch.cat([rid * max_len + res.miss_tokens for _, rid, res in plan.long_rows])
    rows = host_cache_locs.reshape(-1)[flat.to(host_cache_locs.device)].cpu()
    return list(torch.split(rows, [res.miss_slots.numel() for _, _, res in plan.long_rows]))


def _write_back(kw: dict, shape: SwapSingleShape, plan: _Plan) -> None:
    hot = shape.hot_buffer_size
    dev = kw["top_k_tokens"].device
    kw["top_k_device_locs"].copy_(plan.out.to(torch.int32).to(dev))
    host_rows = _host_rows(kw["host_cache_locs"], plan)
    for (b, rid, res), src in zip(plan.long_rows, host_rows):
        m = res.miss_slots.numel()
        kw["device_buffer_tokens"][rid, res.miss_slots.to(dev)] = res.miss_tokens.to(torch.int32).to(dev)
        kw["lru_slots"][rid, :hot] = res.new_lru.to(torch.int16).to(dev)
        if shape.record_plan:
            kw["miss_src"][b, :m] = src.to(dev)
            kw["miss_dst"][b, :m] = res.miss_locs.to(torch.int32).to(dev)
    if shape.record_plan:
        # Padding and fast rows record 0 misses, so a replay never reads a stale count.
        kw["miss_count"][: shape.batch] = plan.counts.to(torch.int32).to(dev)
    if plan.long_rows:
        dst = torch.cat([res.miss_locs for _, _, res in plan.long_rows])
        copy_rows(kw["host_cache"], torch.cat(host_rows), kw["device_buffer"], dst, shape.item_size_bytes)


@keyword_op("swap_single")
def swap_single_step(kw: Bound) -> SwapStats:
    """Reference of the single-step swap: mutates the tensors exactly as the kernel does.

    Always runs the full input contract first (``check_swap_single_contract``), so a call the kernel
    would silently get wrong raises InputError here instead, and nothing is written.

    The top-k contract of both swaps (docs/design.md "The top-k contract") is checked on every call:
    -1 is padding; other tokens in [0, seq_len) of their step (a short single-step row: its slot
    table); tokens first in a short row; unique within a step. A violation raises InputError.
    """
    shape = check_swap_single_contract(**kw)
    plan, stats = _plan_call(kw, shape)
    _write_back(kw, shape, plan)
    return stats
