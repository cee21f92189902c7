"""Small, explicit inputs for the multi-step swap: the layout of docs/semantics.md §5.1/§6.1 made
configurable, for the reference tests, the invariant tests and GPU-vs-reference tests.

Layout per request slot ``rid`` (device rows are disjoint between slots):
- hot slot j and extra-page slot HOT+p own rows ``base + j`` / ``base + HOT + p``;
- scratch row i is ``base + HOT + page + i``; ``base = rid * (HOT + page + C)``;
- a few spare rows follow the last request (free rows for tests that need one);
- host row data: token t's row holds int64 words ``t * TOKEN_SCALE + w`` (w = 0..words-1), so a row's
  bytes name its token; hot rows start with their token's host data.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.kernels.state import MultiStepState, new_multi_step_state

TOKEN_SCALE = 1_000_003
SPARE_ROWS = 8


def token_words(tokens: torch.Tensor, words: int) -> torch.Tensor:
    """Item data of each token: int64 [n, words], word w = token * TOKEN_SCALE + w."""
    return tokens.to(torch.int64).unsqueeze(1) * TOKEN_SCALE + torch.arange(words, dtype=torch.int64)


@dataclass
class MultiCase:
    """The op's kwargs plus the layout numbers a test needs to write expected values by hand."""

    kwargs: dict
    hot: int
    page: int
    capacity: int
    words: int
    row_base: list[int]  # first device row of each request slot

    @property
    def state(self) -> MultiStepState:
        return self.kwargs["state"]

    def hot_row(self, rid: int, slot: int) -> int:
        return self.row_base[rid] + slot

    def scratch_row(self, rid: int, i: int) -> int:
        return self.row_base[rid] + self.hot + self.page + i

    def spare_row(self, i: int) -> int:
        return self.row_base[-1] + i  # row_base[-1] is the end of the last request's rows


def build_case(
    top_k_tokens: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    hot: int,
    page: int,
    max_len: int,
    num_req_slots: int | None = None,
    req_pool_indices: torch.Tensor | None = None,
    capacity: int | None = None,
    words: int = 72,
    slot_tokens: torch.Tensor | None = None,
    tail_tokens: torch.Tensor | None = None,
    host_tokens: torch.Tensor | None = None,
    num_real: int | None = None,
    record_plan: bool = False,
) -> MultiCase:
    """Inputs for one call on CPU.

    ``slot_tokens`` int32 [R, HOT] (default: identity, token j in slot j); ``tail_tokens`` int32
    [R, page] (default -1); ``host_tokens`` bool [R, max_len] host-row flags (True = has a host
    row; default every position). Host rows are numbered per (slot, token) in that order.
    """
    bs, steps, top_k = top_k_tokens.shape
    r = num_req_slots or bs
    t = steps * top_k
    cap = capacity if capacity is not None else max(min(t, hot), t - hot)
    width = hot + page + cap
    base = [rid * width for rid in range(r + 1)]
    if slot_tokens is None:
        slot_tokens = torch.arange(hot, dtype=torch.int32).expand(r, hot)
    if tail_tokens is None:
        tail_tokens = torch.full((r, page), -1, dtype=torch.int32)
    dbt = torch.cat([slot_tokens, tail_tokens], dim=1).to(torch.int32).contiguous()
    dbl = (torch.tensor(base[:r]).unsqueeze(1) + torch.arange(hot + page)).to(torch.int32)
    scratch = (torch.tensor(base[:r]).unsqueeze(1) + hot + page + torch.arange(cap)).to(torch.int32)
    has_host = torch.ones((r, max_len), dtype=torch.bool) if host_tokens is None else host_tokens.to(torch.bool)
    hcl = torch.full((r, max_len), -1, dtype=torch.int64)
    hcl[has_host] = torch.arange(int(has_host.sum()), dtype=torch.int64)
    host_token_of_row = torch.nonzero(has_host)[:, 1]
    host = token_words(host_token_of_row, words)
    device = torch.zeros((base[r] + SPARE_ROWS, words), dtype=torch.int64)
    held = dbt.to(torch.int64)
    for rid in range(r):  # seed hot and extra-page rows with their token's data
        ok = held[rid] >= 0
        device[dbl[rid][ok].to(torch.int64)] = token_words(held[rid][ok], words)
    state = new_multi_step_state(r, steps, top_k, hot, scratch_locs=scratch, device_buffer_tokens=dbt)
    kwargs = dict(
        top_k_tokens=top_k_tokens.to(torch.int32).contiguous(), device_buffer_tokens=dbt, host_cache_locs=hcl,
        device_buffer_locs=dbl, host_cache=host, device_buffer=device,
        top_k_device_locs=torch.full((bs, steps, top_k), -7, dtype=torch.int32),
        req_pool_indices=req_pool_indices if req_pool_indices is not None else torch.arange(bs, dtype=torch.int64),
        seq_lens=seq_lens.contiguous(), state=state,
        num_real_reqs=torch.tensor([bs if num_real is None else num_real], dtype=torch.int32),
        item_size_bytes=words * 8,
    )
    if record_plan:
        kwargs.update(
            miss_src=torch.full((bs, steps * top_k), -5, dtype=torch.int64),
            miss_dst=torch.full((bs, steps * top_k), -5, dtype=torch.int32),
            miss_count=torch.full((bs,), -5, dtype=torch.int32),
        )
    return MultiCase(kwargs=kwargs, hot=hot, page=page, capacity=cap, words=words, row_base=base)


def glm52_native_context_case(*, steps: int = 4, top_k: int = 2048, hot: int = 4096, page: int = 64) -> MultiCase:
    """docs/semantics.md §6.1 scenario 7 (GLM-5.2 native context, tokens above 2^20): one request of
    1,048,648 tokens whose ``steps`` top-k sets share top_k - 8 low tokens and add 7 tokens above 2^20
    each plus the last token, so the first call misses 29 unique rows (4 steps) and a second call hits
    them all through the packed hash ring."""
    seq_len = 1_048_648
    high = [(1 << 20) + 10 * s + torch.arange(7) for s in range(steps)]
    per_step = [torch.cat([torch.arange(top_k - 8), high[s], torch.tensor([seq_len - 1])]) for s in range(steps)]
    host = torch.zeros((1, seq_len), dtype=torch.bool)
    host[0, :top_k] = True
    host[0, torch.cat(high)] = True
    host[0, seq_len - 1] = True
    tokens = torch.stack([t.to(torch.int32) for t in per_step]).unsqueeze(0)
    return build_case(tokens, torch.full((steps,), seq_len), hot=hot, page=page, max_len=seq_len, host_tokens=host)


EXTRA_PAGE_DRAFT_OFFSETS = (0, 7, 31, 63)  # scenario 5: extra-page slots holding the 4 draft tokens


def speculative_extra_page_case(*, steps: int = 4, top_k: int = 2048, hot: int = 4096, page: int = 64) -> MultiCase:
    """docs/semantics.md §6.1 scenario 5 (draft tokens in the extra page): one request of 8192 tokens whose
    last 4 (the drafts, not backed up to host yet) sit in extra-page slots EXTRA_PAGE_DRAFT_OFFSETS;
    step s selects tokens 0..top_k-2 plus draft s, so every selection resolves without host I/O."""
    seq_len = 8192
    drafts = seq_len - 4 + torch.arange(4)
    tail = torch.full((1, page), -1, dtype=torch.int32)
    tail[0, list(EXTRA_PAGE_DRAFT_OFFSETS)] = drafts.to(torch.int32)
    host = torch.ones((1, seq_len), dtype=torch.bool)
    host[0, drafts] = False  # not backed up to host yet
    per_step = [torch.cat([torch.arange(top_k - 1), drafts[s:s + 1]]) for s in range(steps)]
    tokens = torch.stack([t.to(torch.int32) for t in per_step]).unsqueeze(0)
    return build_case(tokens, drafts + 1, hot=hot, page=page, max_len=seq_len, tail_tokens=tail, host_tokens=host)
