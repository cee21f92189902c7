"""Classification of a multi-step call's occurrences from the state before the call, for the
invariant checker. Everything here is implementation-independent: whether an occurrence is valid,
found in the extra page, found in the hot buffer (the §3.5 lookup on the pre-call state, which is what
the gather sees) or on host only, is fixed by the inputs; only which rows misses land in is not.
All tensors are CPU, real rows only, shape [n, T] unless noted.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from hisparse.kernels.reference.cuckoo import hot_lookup
from hisparse.kernels.reference.snapshot import Snapshot
from hisparse.kernels.state import FLAG_HASH_DEGRADED


@dataclass(frozen=True)
class MultiView:
    batch: int
    steps: int
    top_k: int
    hot: int
    page: int
    capacity: int
    rids: torch.Tensor  # [n] request slot of each real row
    tok: torch.Tensor
    valid: torch.Tensor  # 0 <= t < seq_len of the occurrence's step
    tail: torch.Tensor  # found in the extra page (slot token == t, loc >= 0)
    tail_ok: torch.Tensor  # tail occurrence whose output is one of those locs
    slot: torch.Tensor  # hot slot found for non-tail valid occurrences, else -1
    hit_loc: torch.Tensor  # device_buffer_locs[slot] before the call (hot hits), else -1
    src: torch.Tensor  # host row of the token (-1 if none), valid occurrences
    out: torch.Tensor  # outputs after the call (int64)
    hot_hit: torch.Tensor  # slot >= 0
    miss: torch.Tensor  # valid, not tail, not resident, on host
    host_missing: torch.Tensor  # valid, not tail, not resident, not on host
    miss_first: tuple[torch.Tensor, ...]  # per row: first position of each distinct miss token, ascending
    hit_first: tuple[torch.Tensor, ...]  # per row: same for hot-hit tokens
    union_hits: tuple[int, ...]  # per row: distinct hot slots hit

    @property
    def n(self) -> int:
        return self.rids.numel()

    @property
    def occurrences(self) -> int:
        return self.steps * self.top_k

    def last_step(self) -> torch.Tensor:
        """[T] mask of the last step's occurrences."""
        return torch.arange(self.occurrences) >= (self.steps - 1) * self.top_k


def _tail(tok, seq, valid, out, tail_tok, tail_loc, page):
    tail = torch.zeros_like(valid)
    ok = torch.zeros_like(valid)
    r, c = torch.nonzero(valid & (tok >= seq - page), as_tuple=True)
    if r.numel():
        match = (tok[r, c].unsqueeze(1) == tail_tok[r]) & (tail_loc[r] >= 0)
        tail[r, c] = match.any(dim=1)
        ok[r, c] = (match & (tail_loc[r] == out[r, c].unsqueeze(1))).any(dim=1)
    return tail, ok


def first_positions(tok: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per row, the (ascending) positions of the first occurrence of each distinct masked token."""
    n, t = tok.shape
    r, p = torch.nonzero(mask, as_tuple=True)
    flat = r * t + p
    if flat.numel():
        _, inv = torch.unique((r << 32) | tok[r, p], return_inverse=True)
        first = torch.full((int(inv.max()) + 1,), 1 << 62, dtype=torch.int64).scatter_reduce_(0, inv, flat, reduce="amin")
        flat = torch.unique(first)
    counts = torch.bincount(flat // t, minlength=n).tolist()
    return tuple(torch.split(flat % t, counts))


def _distinct_per_row(keys: torch.Tensor, mask: torch.Tensor) -> tuple[int, ...]:
    r, p = torch.nonzero(mask, as_tuple=True)
    uniq = torch.unique((r << 32) | keys[r, p])
    return tuple(torch.bincount(uniq >> 32, minlength=mask.shape[0]).tolist())


def build_view(inputs: Mapping[str, object], before: Snapshot, after: Snapshot) -> MultiView:
    state = before.state
    sizes = inputs["state"].sizes
    bs, steps, top_k = inputs["top_k_tokens"].shape
    hot = sizes.hot_buffer_size
    page = before.tokens.shape[1] - hot
    n = int(inputs["num_real_reqs"][0])
    rids = inputs["req_pool_indices"][:n].cpu().to(torch.int64)
    tok = inputs["top_k_tokens"][:n].reshape(n, steps * top_k).cpu().to(torch.int64)
    seq = inputs["seq_lens"][: n * steps].cpu().to(torch.int64).reshape(n, steps, 1)
    seq = seq.expand(n, steps, top_k).reshape(n, steps * top_k)
    valid = (tok >= 0) & (tok < seq)
    out = after.out[:n].reshape(n, steps * top_k).to(torch.int64)
    tok_rows = before.tokens[rids].to(torch.int64)
    loc_rows = before.locs[rids].to(torch.int64)
    tail, tail_ok = _tail(tok, seq, valid, out, tok_rows[:, hot:], loc_rows[:, hot:], page)
    degraded = (state["counters"][rids, 3] & FLAG_HASH_DEGRADED) != 0
    query = torch.where(valid & ~tail, tok, torch.full_like(tok, -1))
    slot = hot_lookup(query, tok_rows[:, :hot], state["hash_index"][rids], degraded)
    hit_loc = torch.where(slot >= 0, loc_rows.gather(1, slot.clamp(min=0)), torch.full_like(slot, -1))
    hcl = inputs["host_cache_locs"]
    max_len = hcl.shape[1]
    src = hcl[rids.to(hcl.device).unsqueeze(1), tok.clamp(0, max_len - 1).to(hcl.device)].cpu()
    src = torch.where(valid & (tok < max_len), src, torch.full_like(src, -1))
    hot_hit = slot >= 0
    looked_up = valid & ~tail & ~hot_hit
    miss = looked_up & (src >= 0)
    return MultiView(
        batch=bs, steps=steps, top_k=top_k, hot=hot, page=page, capacity=sizes.scratch_capacity,
        rids=rids, tok=tok, valid=valid, tail=tail, tail_ok=tail_ok, slot=slot, hit_loc=hit_loc,
        src=src, out=out, hot_hit=hot_hit, miss=miss, host_missing=looked_up & (src < 0),
        miss_first=first_positions(tok, miss), hit_first=first_positions(tok, hot_hit),
        union_hits=_distinct_per_row(slot, hot_hit),
    )
