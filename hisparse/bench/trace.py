"""Parametric top-k traces (the `trace` workload) and the statistics of any top-k sequence.

Trace model, per request, one step at a time (K = top_k entries, all distinct). Each entry is, with
the probabilities of a multinomial draw per step:
- fresh (``miss_rate``): a token never referenced before (a compulsory miss); fresh ids are handed
  out in increasing order from hot_buffer_size, so one call's fresh tokens are a contiguous range;
- overlap (``step_overlap``): a token of the previous step;
- otherwise: with probability ``locality`` a *recent* token (referenced in the S steps before the
  previous step, not since), else an *older resident* token (in the model's resident set, not
  referenced in the last S+1 steps). The model's resident set is an exact LRU over hot_buffer_size
  tokens, starting from tokens 0..HOT-1 (the identity hot buffer), so older tokens are hits for an
  exact-LRU cache and recent ones usually are. If one pool runs short the other makes up the count;
  with hot_buffer_size >= 2*top_k the two together always suffice.

So ``step_overlap`` and ``miss_rate`` hold exactly per draw (only the draws are random), and
``locality`` up to the rare make-up. Call 0 (what ``reset`` puts in place) is a warm-up history
without fresh tokens; calls 1..n are the timed ones.

The trace is drawn on the workload's device from one seeded generator: the same (case, seed) gives
the same trace on every run on one device type (CPU and CUDA draw different streams). On the GPU it
takes 0.6 s for batch 64 x 101 calls x 4 steps x top-k 2048 (7.6 s on the H200 node's 16 CPU cores).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

NEVER = -(1 << 30)  # last-reference time of a token never referenced


@dataclass(frozen=True)
class TraceParams:
    batch: int
    steps: int
    top_k: int
    hot_buffer_size: int
    calls: int  # calls after the warm-up call 0
    miss_rate: float
    step_overlap: float
    locality: float


@dataclass(frozen=True)
class Trace:
    tokens: torch.Tensor  # int32 [calls+1, batch, steps, top_k] (CPU); call 0 = the initial top-k
    fresh_start: torch.Tensor  # int64 [calls+1, batch]: first fresh token id of each call
    fresh_count: torch.Tensor  # int64 [calls+1, batch]: number of fresh tokens of each call
    span: int  # every token id is < span


def _choose(cands: torch.Tensor, valid: torch.Tensor, count: torch.Tensor, width: int,
            gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``count[b]`` distinct random valid entries of each row (count <= valid count): returns
    (tokens [bs, width], taken mask [bs, width]) with the chosen ones in the first count[b] columns."""
    cols = torch.arange(width, device=cands.device).unsqueeze(0)
    if width == 0:
        return cands[:, :0], cols < count.unsqueeze(1)
    keys = torch.rand(cands.shape, generator=gen, device=cands.device).masked_fill_(~valid, 2.0)
    order = torch.topk(keys, width, dim=1, largest=False).indices
    return cands.gather(1, order), cols < count.unsqueeze(1)


def _binomial(n: torch.Tensor, p: float, gen: torch.Generator) -> torch.Tensor:
    if p <= 0.0:
        return torch.zeros_like(n)
    if p >= 1.0:
        return n.clone()
    prob = torch.full(n.shape, p, dtype=torch.float64, device=n.device)
    return torch.binomial(n.to(torch.float64), prob, generator=gen).to(torch.int64)


def generate(p: TraceParams, seed: int, device: torch.device | str = "cpu") -> Trace:
    """Draw a trace (see the module docstring); deterministic in (p, seed) on one device type (CPU and
    CUDA draw different random streams). The result is on ``device``."""
    bs, S, K, hot = p.batch, p.steps, p.top_k, p.hot_buffer_size
    if hot < 2 * K:
        raise ValueError(f"trace: hot_buffer_size must be >= 2*top_k, got {hot} < {2 * K}")
    if p.miss_rate + p.step_overlap > 1.0 + 1e-9:
        raise ValueError(f"trace: miss_rate + step_overlap must be <= 1, got {p.miss_rate} + {p.step_overlap}")
    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(seed)
    i64 = dict(dtype=torch.int64, device=dev)
    n_calls = p.calls + 1
    # Category counts per (call, request, step), drawn up front: fresh, overlap, recent (rest: older).
    full = torch.full((n_calls, bs, S), K, **i64)
    fresh = _binomial(full, p.miss_rate, gen)
    fresh[0] = 0
    rest_p = p.step_overlap / (1.0 - p.miss_rate) if p.miss_rate < 1.0 else 0.0
    overlap = _binomial(full - fresh, min(rest_p, 1.0), gen)
    overlap[0, :, 0] = 0  # the very first step has no previous step
    recent = _binomial(full - fresh - overlap, p.locality, gen)
    f_max, o_max = fresh.amax(dim=1).cpu(), overlap.amax(dim=1).cpu()
    span = hot + int(fresh.sum(dim=(0, 2)).max())

    # The model's exact-LRU resident set; column HOT (and token `span`) is a dummy that absorbs the
    # scatters of rows with less to do, so every update is a dense scatter.
    resident = torch.cat([torch.arange(hot, **i64), torch.tensor([span], **i64)]).repeat(bs, 1)
    last_use = torch.zeros(bs, hot + 1, **i64)
    last_use[:, hot] = 1 << 62
    pos = torch.full((bs, span + 1), -1, **i64)  # token -> column in `resident`, -1 if not resident
    pos[:, :hot] = torch.arange(hot, **i64)
    last_ref = torch.full((bs, span), NEVER, **i64)  # step index of each token's last reference
    history = torch.zeros(S + 1, bs, K, **i64)  # ring: step i lives at i % (S+1)
    next_fresh = torch.full((bs,), hot, **i64)
    out = torch.empty(n_calls, bs, S, K, dtype=torch.int32, device=dev)
    fresh_start = torch.empty(n_calls, bs, **i64)
    cols_k = torch.arange(K, **i64).unsqueeze(0)
    prev_valid = torch.ones(bs, K, dtype=torch.bool, device=dev)
    stamp_base = torch.arange(S, **i64).repeat_interleave(K).unsqueeze(0)  # window column -> age d

    for j in range(n_calls):
        fresh_start[j] = next_fresh
        for s in range(S):
            i = j * S + s
            f, o, r = fresh[j, :, s], overlap[j, :, s], recent[j, :, s]
            rest = K - f - o
            fm = int(f_max[j, s])
            fresh_tok, fresh_take = next_fresh.unsqueeze(1) + cols_k[:, :fm], cols_k[:, :fm] < f.unsqueeze(1)
            next_fresh = next_fresh + f
            # Overlap: from the previous step.
            ov_tok, ov_take = _choose(history[(i - 1) % (S + 1)], prev_valid, o, int(o_max[j, s]), gen)
            # Recent: referenced in steps i-2 .. i-1-S and not since (one occurrence per token).
            ages = [d for d in range(S) if i - 2 - d >= 0]
            if ages:
                win = torch.cat([history[(i - 2 - d) % (S + 1)] for d in ages], dim=1)
                win_valid = last_ref.gather(1, win) == (i - 2 - stamp_base[:, :len(ages) * K])
            else:
                win, win_valid = history[0][:, :0], torch.zeros(bs, 0, dtype=torch.bool, device=dev)
            # Older resident: in the LRU set, not referenced in the last S+1 steps.
            old_valid = last_ref.gather(1, resident[:, :hot]) < i - 1 - S
            # Counts; a short pool is made up by the other (both suffice when HOT >= 2K).
            avail_recent, avail_old = win_valid.sum(1), old_valid.sum(1)
            take_old = torch.minimum(rest - torch.minimum(r, avail_recent), avail_old)
            take_recent = rest - take_old
            rc_tok, rc_take = _choose(win, win_valid, take_recent, int(take_recent.max()), gen)
            old_tok, old_take = _choose(resident[:, :hot], old_valid, take_old, int(take_old.max()), gen)
            # Assemble the step (exactly K taken per row) in random order.
            tok = torch.cat([fresh_tok, ov_tok, rc_tok, old_tok], dim=1)
            take = torch.cat([fresh_take, ov_take, rc_take, old_take], dim=1)
            keys = torch.rand(tok.shape, generator=gen, device=dev).masked_fill_(~take, 2.0)
            step = tok.gather(1, torch.topk(keys, K, dim=1, largest=False).indices)
            out[j, :, s] = step.to(torch.int32)
            history[i % (S + 1)] = step
            last_ref.scatter_(1, step, i)
            _lru_touch(resident, last_use, pos, step, i + 1)
    return Trace(out, fresh_start, fresh.sum(dim=2), span)


def _lru_touch(resident: torch.Tensor, last_use: torch.Tensor, pos: torch.Tensor, step: torch.Tensor,
               now: int) -> None:
    """Exact-LRU update of the model's resident set with one step's (distinct) tokens."""
    hot = resident.shape[1] - 1
    p = pos.gather(1, step)
    hit = p >= 0
    last_use.scatter_(1, torch.where(hit, p, hot), now)
    missing = (~hit).sum(1)
    m = int(missing.max())
    if m > 0:
        # Victims: the m least recently used (this step's hits have last_use == now, the dummy 2^62).
        victims = torch.topk(last_use, m, dim=1, largest=False).indices
        order = torch.sort(hit.to(torch.int8), dim=1, stable=True).indices[:, :m]  # misses first
        live = torch.arange(m, device=step.device).unsqueeze(0) < missing.unsqueeze(1)
        v = torch.where(live, victims, hot)
        t = torch.where(live, step.gather(1, order), pos.shape[1] - 1)
        pos.scatter_(1, resident.gather(1, v), -1)
        resident.scatter_(1, v, t)
        pos.scatter_(1, t, v)
        last_use.scatter_(1, v, now)
    last_use[:, hot] = 1 << 62
    resident[:, hot] = pos.shape[1] - 1
    pos[:, -1] = -1


# ---------------------------------------------------------------------------------------------
# Statistics of a top-k sequence


@dataclass(frozen=True)
class SequenceStats:
    fresh: torch.Tensor  # int64 [calls, bs, S]
    unique_fresh: torch.Tensor  # int64 [calls, bs]
    overlap: torch.Tensor  # int64 [calls, bs, S]


def sequence_stats(tokens: torch.Tensor, hot_buffer_size: int, span: int, first: int = 1) -> SequenceStats:
    """Statistics of calls ``first..`` of the top-k sequence ``tokens`` [calls, bs, S, K] (earlier
    calls count as history only), from the tokens alone, on their device:
    - fresh: tokens never referenced before and not initially resident (outside [0, HOT)), per step;
    - unique_fresh: per call and request (a token is fresh at its first occurrence only);
    - overlap: entries also in the previous step (step 0: the previous call's last step).
    """
    n, bs, S, K = tokens.shape
    dev = tokens.device
    last_ref = torch.full((bs, span), NEVER, dtype=torch.int64, device=dev)
    last_ref[:, :hot_buffer_size] = NEVER + 1  # resident: not fresh, not in any step
    fresh = torch.zeros(n, bs, S, dtype=torch.int64, device=dev)
    overlap = torch.zeros(n, bs, S, dtype=torch.int64, device=dev)
    for j in range(n):
        for s in range(S):
            i = j * S + s
            step = tokens[j, :, s].to(torch.int64)
            seen = last_ref.gather(1, step)
            fresh[j, :, s] = (seen == NEVER).sum(1)
            overlap[j, :, s] = (seen == i - 1).sum(1)
            last_ref.scatter_(1, step, i)
    return SequenceStats(fresh[first:].cpu(), fresh[first:].sum(2).cpu(), overlap[first:].cpu())
