"""Seeded, reproducible workloads: every tensor one case needs, and the per-call top-k schedule.

Contract with the engine (hisparse/bench/calls.py, hisparse/bench/timing.py):
- ``reset()`` restores the initial state (slot tables, LRU order, multi-step state, KV data, the
  top-k and the call counter) with device copies; untimed, before every replay, so every replay
  does identical work;
- every call is ``advance()`` then the implementation's ops: call c (0-based, since the last reset)
  sees the top-k after c+1 advances. ``advance()`` is one or two small device ops (no host sync, no
  allocation: CUDA-graph capturable). The data is valid for ``capacity`` calls between resets
  (timing.max_calls_per_reset); ``expected`` describes calls 0..calls_per_graph-1.

Workloads (all: identity hot buffer, tokens 0..HOT-1 in slots 0..HOT-1, extra page of 64 slots
empty, sequence length 1,048,576 so every request takes the long path):
- ``upstream``: docs/semantics.md §5.1 exactly: per step ``roll(arange(4096), 137*s)[:1852]`` hits and
  196 misses (steps 2, 3 repeat one earlier miss: 196/196/195/195 fresh, 782 unique), contiguous
  ids from HOT, identical for every request, ``host_cache_locs[rid, t] = t`` (shared host rows);
  ``advance`` = ``top_k[..., -196:].add_(800)``. Other steps, batches and item sizes keep that
  structure (top_k 2048 and hot >= 4096 are required: the expansion prunes the rest).
- ``distinct``: the same structure scaled to any top_k (``config.pattern_geometry``), with each
  request's misses on its own host rows, never read by another request within a replay:
  ``host_cache_locs[rid, t] = HOT + rid*(span-HOT) + (t-HOT)`` for t >= HOT. The resident tokens
  (t < HOT) share rows 0..HOT-1: the pattern's hits stay resident under both policies (its hit union
  plus one call's misses fits in the hot buffer), so those rows are never read.
- ``trace``: hisparse/bench/trace.py's parametric model, precomputed for ``capacity`` calls on the device;
  ``advance`` = a copy of the next call's top-k (host-side call counter, see ``_TraceSchedule``). Every token of every
  request has its own host row ("contiguous": ``rid*span + t``; "scattered": a seeded permutation of
  all rows), since a re-referenced token the kernel evicted is read again.

- ``serving``: what a decode batch of long-context requests asks of the host pool. Per request a
  context of ``context_min..context_max`` tokens (seeded, uniform, whole pages); its KV rows sit in
  the pool as a token/page allocator lays them out: request r owns one region of rows (its context in
  token order, rounded up to a page), the regions back to back in request order, so the pool is
  batch x mean context rows (2.7 GB of 576 B rows at batch 64 with the 16k-128k default). The top-k
  sequence is the `trace` model (miss_rate, step_overlap, recent_reuse = its locality; defaults from
  upstream's benchmark, see case.py), and each trace token sits at a position of the context: a
  seeded permutation of the request's positions (``positions: scattered``, what top-k over a long
  context gives), token order (``consecutive``), scattered 64-token runs (``chunks``), or scattered over
  the whole pool instead of the request's region (``pool``): ``context_rows``. Trace tokens past the
  context wrap onto positions HOT.. again (an evicted token read again); case.py's prune keeps one
  call's fresh tokens apart.
  ``read_order``: each step's entries in the trace's random order (``indexer``: a top-k by score) or
  sorted by their host row (``host_row``); the same tokens and rows either way (it is not in the seed).

Host row r holds int64 words ``r * 1_000_003 + w`` (bytes of that for item sizes not a multiple of
8); device rows are seeded from the same formula. Seeds come from the data-defining parameters only
(not the implementation or PDL), so every implementation sees the same data.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import torch

from hisparse.bench.case import (PAGE_SIZE, UPSTREAM_SEQ_LEN, Case, host_bytes, layer_stride_rows,
                                 pattern_geometry, serving_region_rows)
from hisparse.errors import ConfigError
from hisparse.bench.host_cache import HostCachePool, kv_shape
from hisparse.kernels.state import MultiStepState, multi_step_sizes, new_multi_step_state
from hisparse.bench.trace import TraceParams, generate, sequence_stats

TOKEN_SCALE = 1_000_003
SEQ_LEN = UPSTREAM_SEQ_LEN
_FILL_CHUNK_BYTES = 256 << 20


@dataclass
class SwapBuffers:
    """Every tensor one case needs, shaped as docs/design.md says."""

    host_cache: torch.Tensor  # [host_rows, item/8] int64 (uint8 [host_rows, item] if item % 8); pinned on CUDA
    device_buffer: torch.Tensor  # [device_rows, ...] same dtype
    device_buffer_tokens: torch.Tensor  # int32 [R, HOT + page]
    device_buffer_locs: torch.Tensor  # int32 [R, HOT + page], same row stride
    host_cache_locs: torch.Tensor  # int64 [R, span]
    top_k_tokens: torch.Tensor  # int32 [bs, S, K]
    top_k_device_locs: torch.Tensor  # int32 [bs, S, K]
    seq_lens: torch.Tensor  # int32 [bs*S] (b*S + s)
    step_seq_lens: tuple[torch.Tensor, ...]  # S contiguous int32 [bs] (single-step calls)
    req_pool_indices: torch.Tensor  # int64 [bs]
    num_real_reqs: torch.Tensor  # int32 [1]
    item_size_bytes: int
    page_size: int
    hot_buffer_size: int
    lru_slots: torch.Tensor | None = None  # int16 [R, HOT] (lru_sequential)
    state: MultiStepState | None = None  # multi-step implementations
    miss_src: torch.Tensor | None = None  # int64 [bs, S*K]
    miss_dst: torch.Tensor | None = None  # int32 [bs, S*K]
    miss_count: torch.Tensor | None = None  # int32 [bs]
    shared_layer_buffers: tuple[torch.Tensor, ...] = ()  # planned implementations: one device buffer per layer
    # Planned implementations: one host cache per shared layer (its own rows, as each layer of a model has
    # its own KV); empty = every layer reads ``host_cache`` (upstream's benchmark, and the stress sequences).
    shared_layer_hosts: tuple[torch.Tensor, ...] = ()
    rows_per_request: int = 0  # device rows owned by each request (slots + extra page + scratch)

    @property
    def batch(self) -> int:
        return self.top_k_tokens.shape[0]

    @property
    def steps(self) -> int:
        return self.top_k_tokens.shape[1]

    @property
    def top_k(self) -> int:
        return self.top_k_tokens.shape[2]

    def _common(self) -> dict[str, Any]:
        return dict(device_buffer_tokens=self.device_buffer_tokens, host_cache_locs=self.host_cache_locs,
                    device_buffer_locs=self.device_buffer_locs, host_cache=self.host_cache,
                    device_buffer=self.device_buffer, req_pool_indices=self.req_pool_indices,
                    num_real_reqs=self.num_real_reqs, item_size_bytes=self.item_size_bytes)

    def _plan(self, record_plan: bool) -> dict[str, Any]:
        return dict(miss_src=self.miss_src, miss_dst=self.miss_dst, miss_count=self.miss_count) if record_plan else {}

    def single_step_kwargs(self, step: int, *, record_plan: bool = False) -> dict[str, Any]:
        """Arguments of ``swap_single_step`` for one step (strided [bs, K] views of the top-k)."""
        return dict(self._common(), top_k_tokens=self.top_k_tokens[:, step],
                    top_k_device_locs=self.top_k_device_locs[:, step], seq_lens=self.step_seq_lens[step],
                    lru_slots=self.lru_slots, page_size=self.page_size, **self._plan(record_plan))

    def multi_step_kwargs(self, *, record_plan: bool = False, pdl: bool | None = None) -> dict[str, Any]:
        return dict(self._common(), top_k_tokens=self.top_k_tokens, top_k_device_locs=self.top_k_device_locs,
                    seq_lens=self.seq_lens, state=self.state, pdl=pdl, **self._plan(record_plan))

    def copy_planned_kwargs(self, layer: int) -> dict[str, Any]:
        """Arguments of ``copy_planned`` into shared layer ``layer`` (1-based)."""
        host = self.shared_layer_hosts[layer - 1] if self.shared_layer_hosts else self.host_cache
        return dict(miss_src=self.miss_src, miss_dst=self.miss_dst, miss_count=self.miss_count,
                    num_real_reqs=self.num_real_reqs, host_cache=host,
                    device_buffer=self.shared_layer_buffers[layer - 1], item_size_bytes=self.item_size_bytes)


@dataclass(frozen=True)
class WorkloadStats:
    """What calls 0..calls-1 after a reset ask for, from the top-k sequence alone (compulsory
    misses: a policy may miss more, never fewer)."""

    item_size_bytes: int
    top_k: int
    fresh: torch.Tensor  # int64 [calls, bs, S]: fresh (never referenced, not initially resident) tokens
    unique_fresh: torch.Tensor  # int64 [calls, bs]: distinct fresh tokens per request per call
    overlap: torch.Tensor  # int64 [calls, bs, S]: entries also in the previous step (step 0: previous call's last)
    host_rows_read: torch.Tensor  # int64 [calls]: distinct host rows of the fresh tokens, all requests
    host_row_reads: torch.Tensor  # int64 [calls]: fresh-token host reads summed over requests
    consecutive_rows: torch.Tensor | None = None  # int64 [calls]: sorted per request, rows r with r-1 also read

    @property
    def calls(self) -> int:
        return self.fresh.shape[0]

    @property
    def fresh_per_step(self) -> tuple[float, ...]:
        """Mean fresh tokens per request, per step."""
        return tuple(float(x) for x in self.fresh.double().mean(dim=(0, 1)))

    @property
    def miss_rate(self) -> float:
        return float(self.fresh.double().mean()) / self.top_k

    @property
    def step_overlap(self) -> float:
        return float(self.overlap.double().mean()) / self.top_k

    @property
    def unique_misses_per_call(self) -> float:
        return float(self.host_row_reads.double().mean())

    @property
    def bytes_per_call(self) -> float:
        return self.unique_misses_per_call * self.item_size_bytes

    @property
    def shared_row_fraction(self) -> float:
        """1 - distinct rows / reads: 0 when no host row is read by two requests in one call."""
        reads = float(self.host_row_reads.sum())
        return 1.0 - float(self.host_rows_read.sum()) / reads if reads else 0.0

    @property
    def consecutive_row_fraction(self) -> float:
        """Share of a request's fresh host rows whose predecessor row the same request reads in the same
        call: ~1 for consecutive misses (`distinct`), ~0 for misses scattered over a region."""
        reads = float(self.host_row_reads.sum())
        if self.consecutive_rows is None or not reads:
            return 0.0
        return float(self.consecutive_rows.sum()) / reads

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "fresh_per_step": list(self.fresh_per_step), "miss_rate": self.miss_rate,
                "step_overlap": self.step_overlap, "unique_misses_per_call": self.unique_misses_per_call,
                "bytes_per_call": self.bytes_per_call, "shared_row_fraction": self.shared_row_fraction,
                "consecutive_row_fraction": self.consecutive_row_fraction}


# ---------------------------------------------------------------------------------------------
# Top-k schedules: what reset() puts in place and what advance() does


class _ShiftSchedule:
    """upstream/distinct: fixed hits, and the miss block (last m entries of each step) += advance."""

    def __init__(self, top_k: torch.Tensor, initial: torch.Tensor, misses: int, advance: int) -> None:
        self.top_k, self.initial, self.advance_by = top_k, initial, advance
        self.tail = top_k[..., top_k.shape[-1] - misses:]  # a view, made once
        self.misses = misses

    def reset(self) -> None:
        self.top_k.copy_(self.initial)

    def advance(self) -> None:
        self.tail.add_(self.advance_by)

    def tokens_at(self, j: int) -> torch.Tensor:
        out = self.initial.cpu().clone()
        out[..., out.shape[-1] - self.misses:] += self.advance_by * j
        return out


class _TraceSchedule:
    """trace: call j is ``trace[j % len]``, one device-to-device copy per advance.

    The call counter is host-side: each ``advance()`` copies the next precomputed call, so a CUDA
    graph captured after a reset bakes in calls 1..n, which is what every replay after a reset must
    do. One copy per call (a device-side counter needs three small kernels: measured 7.7 vs 1.9 us
    per call in a graph of 100 on the H200, against upstream's single add_)."""

    def __init__(self, top_k: torch.Tensor, trace: torch.Tensor) -> None:
        self.top_k, self.trace = top_k, trace
        self.calls = 0

    def reset(self) -> None:
        self.calls = 0
        self.top_k.copy_(self.trace[0])

    def advance(self) -> None:
        self.calls += 1
        self.top_k.copy_(self.trace[self.calls % self.trace.shape[0]])

    def tokens_at(self, j: int) -> torch.Tensor:
        return self.trace[j % self.trace.shape[0]].cpu().clone()


class Workload:
    """One case's tensors (``buffers``), its top-k schedule and what it asks for (``expected``)."""

    def __init__(self, case: Case, device: torch.device, buffers: SwapBuffers, schedule: Any,
                 fresh_start: torch.Tensor, fresh_count: torch.Tensor, capacity: int) -> None:
        self.case, self.device, self.buffers, self.capacity = case, device, buffers, capacity
        self._schedule = schedule
        self._fresh_start, self._fresh_count = fresh_start.cpu(), fresh_count.cpu()  # [capacity+1, bs]
        b = buffers
        small = [b.device_buffer_tokens, b.device_buffer_locs]
        small += [b.lru_slots] if b.lru_slots is not None else []
        small += list(b.state.tensors().values()) if b.state is not None else []
        self._restore = [(t, t.clone()) for t in small]
        self._data = b.device_buffer.clone()
        self.reset()  # also starts the call budget (_advances)

    @cached_property
    def expected(self) -> "WorkloadStats":
        """What calls 0..calls-1 ask for (computed on first use: the engine never needs it, and at batch 64
        it is a good part of a workload's build time)."""
        return self._compute_expected()

    @property
    def calls(self) -> int:
        return self.case.timing.calls_per_graph

    @property
    def host_stride_rows(self) -> int:
        """Rows of the host pool this workload's rows take, its shared layers' own included: the next layer
        of a decode-regime case starts that many rows on."""
        b = self.buffers
        return layer_stride_rows(b.host_cache.shape[0], self.case.item_size_bytes) * (1 + len(b.shared_layer_hosts))

    def reset(self) -> None:
        b = self.buffers
        for t, initial in self._restore:
            t.copy_(initial)
        b.device_buffer.copy_(self._data)
        for layer in b.shared_layer_buffers:
            layer.copy_(self._data)
        b.top_k_device_locs.fill_(-1)
        if b.miss_count is not None:
            b.miss_count.zero_()
        self._schedule.reset()
        self._advances = 0

    @property
    def calls_since_reset(self) -> int:
        return self._advances

    def advance(self) -> None:
        # Past `capacity` calls the schedules run off their data (upstream / distinct tokens past the
        # host rows, so calls without misses; trace / serving calls repeating from the start), and the
        # timed calls would not be the case's. Counted on the host, so a CUDA graph is checked when it
        # is captured (its replays follow a reset). Seen: a probe that captured 100 calls of a case built
        # for 20 timed `upstream` b1 at a 4.2 us gather instead of ~17.
        if self._advances >= self.capacity:
            raise ConfigError(
                f"{self.case.case_id}: call {self._advances + 1} since the last reset, but the workload holds "
                f"{self.capacity} (timing.max_calls_per_reset: the largest of warmup_calls, calls_per_graph, "
                f"check_calls); build the case with a larger timing.calls_per_graph")
        self._advances += 1
        self._schedule.advance()

    def call_tokens(self, call: int) -> torch.Tensor:
        """The top-k (CPU int32 [bs, S, K]) that call ``call`` (0-based, after a reset) sees."""
        return self._schedule.tokens_at(call + 1)

    def fresh_tokens(self, call: int) -> list[torch.Tensor]:
        """Per request, the fresh token ids of call ``call`` (a contiguous range, CPU int64)."""
        start, count = self._fresh_start[call + 1], self._fresh_count[call + 1]
        return [torch.arange(int(s), int(s) + int(c)) for s, c in zip(start, count)]

    def miss_rows(self, call: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(src host rows int64, dst device rows int32) of the compulsory misses of call ``call``,
        request by request, on the device: for a bare-gather floor. The destinations are the
        request's own rows (scratch first), so a gather into them needs a reset() afterwards."""
        b = self.buffers
        locs = b.host_cache_locs.cpu()
        src, dst = [], []
        first = b.hot_buffer_size + b.page_size
        for rid, toks in enumerate(self.fresh_tokens(call)):
            src.append(locs[rid, toks])
            dst.append(rid * b.rows_per_request + (first + torch.arange(toks.numel())) % b.rows_per_request)
        return (torch.cat(src).to(self.device), torch.cat(dst).to(torch.int32).to(self.device))

    def _compute_expected(self) -> WorkloadStats:
        n, c = self.calls, self.case
        tokens = torch.stack([self._schedule.tokens_at(j) for j in range(n + 1)])
        span = self.buffers.host_cache_locs.shape[1]
        st = sequence_stats(tokens.to(self.device), c.hot_buffer_size, span)
        locs = self.buffers.host_cache_locs.cpu()
        rows_read, row_reads = torch.zeros(n, dtype=torch.int64), torch.zeros(n, dtype=torch.int64)
        consecutive = torch.zeros(n, dtype=torch.int64)
        for call in range(n):
            per_req = [locs[rid, t].sort().values for rid, t in enumerate(self.fresh_tokens(call))]
            rows = torch.cat(per_req)
            rows_read[call], row_reads[call] = torch.unique(rows).numel(), rows.numel()
            consecutive[call] = sum(int((r[1:] - r[:-1] == 1).sum()) for r in per_req)
        return WorkloadStats(c.item_size_bytes, c.top_k, st.fresh, st.unique_fresh, st.overlap, rows_read, row_reads,
                             consecutive)


# ---------------------------------------------------------------------------------------------
# Building


# Parameters that reorder a case's data without changing it: left out of the seed, so a case and its
# reordered twin read the same tokens and rows.
ORDER_ONLY_PARAMS = frozenset({"read_order"})
# Left out of the seed too: the number of layers (each layer's own top-k mixes its index into the seed,
# ``layer_seed``). The seed still keys on the calls a layer is built for (``Case.layer_timing``), which
# shrink as layers grow, so cases with different layer counts do not in general read the same data.
NOT_SEEDED_PARAMS = ORDER_ONLY_PARAMS | {"layers"}


def data_seed(case: Case) -> int:
    """Seed of a case's data: its data-defining parameters only (same data for every implementation)."""
    params = {k: v for k, v in case.workload_params_dict.items() if k not in NOT_SEEDED_PARAMS}
    key = {"workload": case.workload, "params": params, "batch": case.batch,
           "steps": case.steps, "top_k": case.top_k, "hot_buffer_size": case.hot_buffer_size,
           "calls": case.timing.max_calls_per_reset, "seed": case.seed}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def layer_seed(seed: int, layer: int) -> int:
    """Seed of layer ``layer``'s top-k: each layer of a model has its own indexer, so its own top-k
    sequence; layer 0 keeps the case's seed."""
    if layer == 0:
        return seed
    digest = hashlib.sha256(f"{seed}/layer/{layer}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def upstream_step_tokens(top_k: int, steps: int, hot_buffer_size: int) -> torch.Tensor:
    """One request's top-k [S, K] int64 before any advance (docs/semantics.md §5.1 for top_k 2048):
    ``[hits, misses]`` per step; step s >= 2 starts its misses with miss (s-2) of step s-2."""
    g = pattern_geometry(top_k, steps)
    rows, misses, nxt = [], [], hot_buffer_size
    for s in range(steps):
        hits = torch.roll(torch.arange(g.window), g.roll * s)[:g.hits_per_step]
        if s < 2:
            m = torch.arange(nxt, nxt + g.misses_per_step)
        else:
            dup = misses[s - 2][(s - 2) % g.misses_per_step]
            m = torch.cat([dup.view(1), torch.arange(nxt, nxt + g.misses_per_step - 1)])
        nxt += int((m >= nxt).sum())
        misses.append(m)
        rows.append(torch.cat([hits, m]))
    return torch.stack(rows)


def fill_pattern(dst: torch.Tensor, rows: torch.Tensor, item_size_bytes: int,
                 at: torch.Tensor | None = None, via: torch.device | None = None) -> None:
    """Row ``at[i]`` (default ``i``) of ``dst`` (rows of ``item_size_bytes``) <- the pattern of host
    row ``rows[i]``: int64 words ``rows[i] * TOKEN_SCALE + w`` (their first item_size_bytes bytes).
    ``via``: compute there and copy (the GPU fills 6 GB of pinned rows in well under a second)."""
    words = -(-item_size_bytes // 8)
    calc = via or dst.device
    w = torch.arange(words, dtype=torch.int64, device=calc)
    step = max(1, _FILL_CHUNK_BYTES // (words * 8))
    for lo in range(0, rows.numel(), step):
        r = rows[lo:lo + step].to(device=calc, dtype=torch.int64)
        vals = r.unsqueeze(1) * TOKEN_SCALE + w
        if dst.dtype != torch.int64:
            vals = vals.view(torch.uint8).view(r.numel(), words * 8)[:, :item_size_bytes]
        if at is None:
            dst[lo:lo + r.numel()].copy_(vals)
        else:
            dst[at[lo:lo + step].to(device=dst.device, dtype=torch.int64)] = vals.to(dst.device)


def _fill_host(dst: torch.Tensor, rows: torch.Tensor, item_size_bytes: int, device: torch.device) -> None:
    fill_pattern(dst, rows, item_size_bytes, via=device)


# Host caches of every case in this process (read-only for every swap: safe to share).
HOST_POOL = HostCachePool(_fill_host)


def serving_contexts(case: Case, seed: int) -> torch.Tensor:
    """Per request, its context length in tokens (CPU int64 [bs]): uniform in [context_min, context_max]
    in whole pages (both ends rounded to pages), from the case's seed."""
    p = case.workload_params_dict
    lo, hi = serving_region_rows(p["context_min"]) // PAGE_SIZE, serving_region_rows(p["context_max"]) // PAGE_SIZE
    gen = torch.Generator().manual_seed(seed ^ 0xC0417E47)
    return torch.randint(lo, hi + 1, (case.batch,), generator=gen) * PAGE_SIZE


def _serving_layout(case: Case, seed: int, dev: torch.device, layer: int = 0) -> tuple[Any, torch.Tensor, int]:
    """(trace, host_cache_locs [bs, span] on dev, pool rows) of a `serving` case (module docstring). Layer
    ``layer`` has its own top-k (``layer_seed``) over the same contexts and the same layout of rows in its
    own pool: an engine's token -> host row index is one for all layers."""
    p = case.workload_params_dict
    bs, hot = case.batch, case.hot_buffer_size
    tr = generate(TraceParams(bs, case.steps, case.top_k, hot, case.timing.max_calls_per_reset, p["miss_rate"],
                              p["step_overlap"], p["recent_reuse"]), layer_seed(seed, layer), device=dev)
    contexts = serving_contexts(case, seed)
    base = torch.cumsum(contexts, 0) - contexts  # region r starts where region r-1 ends
    t = torch.arange(tr.span, dtype=torch.int64)
    gen = torch.Generator().manual_seed(seed ^ 0x5DEECE66D)
    locs = torch.empty(bs, tr.span, dtype=torch.int64)
    for r, ctx in enumerate(contexts.tolist()):
        # Token t is position t of the context (wrapping past its end onto HOT..), then that position's
        # row (``context_rows``).
        slot = torch.where(t < ctx, t, hot + (t - hot) % (ctx - hot))
        locs[r] = base[r] + context_rows(p["positions"], ctx, gen)[slot]
    if p["positions"] == "pool":  # every row of the pool to a seeded other row: regions no longer hold
        locs = torch.randperm(int(contexts.sum()), generator=gen)[locs]
    locs = locs.to(dev)
    if p["read_order"] == "host_row":
        tr = replace(tr, tokens=sort_steps_by_row(tr.tokens, locs))
    return tr, locs, int(contexts.sum())


def context_rows(positions: str, ctx: int, gen: torch.Generator) -> torch.Tensor:
    """Row (within the request's region) of each position of a context of ``ctx`` tokens: a permutation of
    the region (``scattered``, what top-k over a long context gives), token order (``consecutive``, and
    ``pool``, which then scatters every row over the whole pool), or the region's pages of PAGE_SIZE rows
    permuted with token order inside each (``chunks``: a call's consecutive fresh tokens read runs of 64
    contiguous rows, 36 KB at 576 B, the runs scattered). Contexts are whole pages (serving_contexts)."""
    if positions == "scattered":
        return torch.randperm(ctx, generator=gen)
    if positions == "chunks":
        pages = torch.randperm(ctx // PAGE_SIZE, generator=gen) * PAGE_SIZE
        return (pages.unsqueeze(1) + torch.arange(PAGE_SIZE)).reshape(-1)
    return torch.arange(ctx)


def sort_steps_by_row(tokens: torch.Tensor, host_locs: torch.Tensor) -> torch.Tensor:
    """``tokens`` [calls, bs, S, K] with each step's entries in ascending order of their host row
    ``host_locs[b, token]`` (every entry a token: the trace has no padding)."""
    rows = host_locs[torch.arange(tokens.shape[1], device=tokens.device).view(1, -1, 1, 1), tokens.long()]
    return tokens.gather(-1, rows.argsort(dim=-1, stable=True))


def shared_layer_hosts(case: Case, host_rows: int, dev: torch.device, host_offset_rows: int) -> tuple[torch.Tensor, ...]:
    """The host caches of a planned case's shared layers: layer l (1-based) reads the ``host_rows`` rows
    that follow layer l-1's in the pinned pool, so no layer's planned copy re-reads the rows the swap has
    just read (docs/perf-notes.md, b7f40a9: re-reading them flattered `serving`'s planned figures by up to 18%).
    ``upstream`` keeps every layer on the swapped layer's rows: its rows are shared anyway, and
    that is upstream's benchmark. Pinned memory: (1 + shared_layers) x the pool (~11 GiB at `serving`
    batch 64). The shared layers' resident device rows keep layer 0's bytes: no check or copy reads them."""
    if not case.shared_layers or case.workload == "upstream":
        return ()
    # The last layer first: the pool grows once, to the whole extent, and the other views fit in it.
    views = [HOST_POOL.view(host_rows, case.item_size_bytes, dev, offset_rows=host_offset_rows + layer * host_rows,
                            memory=case.host_memory)
             for layer in range(case.shared_layers, 0, -1)]
    return tuple(reversed(views))


class LayeredWorkload:
    """A case in the decode regime: ``layers`` independent Workloads (own host rows, device buffer and swap
    state each), called layer after layer. ``next_layer`` is the layer the next call swaps (0 after a
    reset); hisparse/bench/calls.py's LayeredCall moves it on."""

    def __init__(self, case: Case, device: torch.device, layers: list[Workload]) -> None:
        self.case, self.device, self.layers = case, device, layers
        self.next_layer = 0

    @property
    def buffers(self) -> SwapBuffers:
        """Layer 0's buffers (what a single-layer reader of the workload, e.g. a placement record, sees)."""
        return self.layers[0].buffers

    @property
    def device_buffers(self) -> list[torch.Tensor]:
        return [w.buffers.device_buffer for w in self.layers]

    def reset(self) -> None:
        for w in self.layers:
            w.reset()
        self.next_layer = 0


def make_workload(case: Case, device: torch.device | str, *, host_offset_rows: int = 0) -> Workload | LayeredWorkload:
    """Build every tensor of ``case`` on ``device``: a Workload, or for ``layers`` > 1 a LayeredWorkload
    whose layer l reads host rows of its own, after layer l-1's (whole 2 MiB spans apart, as separate
    allocations would be). The host caches are views of the process-wide pool
    (hisparse/bench/host_cache.py), starting ``host_offset_rows`` rows in (timing rounds after the first
    shift them to other physical pages)."""
    if case.layers == 1:
        return make_layer(case, device, host_offset_rows=host_offset_rows)
    per_layer = replace(case, timing=case.layer_timing())
    dev = torch.device(device)
    # Every layer's rows in one arena (an estimate for `trace`: its rows are known once built)
    HOST_POOL.reserve(host_offset_rows * case.item_size_bytes + host_bytes(case), dev, case.host_memory)
    layers, offset = [], host_offset_rows
    for layer in range(case.layers):
        w = make_layer(per_layer, device, host_offset_rows=offset, layer=layer)
        layers.append(w)
        offset += w.host_stride_rows
    return LayeredWorkload(case, torch.device(device), layers)


def make_layer(case: Case, device: torch.device | str, *, host_offset_rows: int = 0, layer: int = 0) -> Workload:
    """One layer's Workload (the whole case when it has one layer): its host rows start ``host_offset_rows``
    rows into the pool; ``layer`` picks its own top-k (``layer_seed``)."""
    reason = case.problems()
    if reason is not None:
        raise ConfigError(f"{case.case_id}: cannot build its workload: {reason}")
    dev = torch.device(device)
    bs, S, K, hot, page = case.batch, case.steps, case.top_k, case.hot_buffer_size, PAGE_SIZE
    cap = case.timing.max_calls_per_reset
    seed = data_seed(case)
    idx = dict(dtype=torch.int64, device=dev)

    # Top-k schedule, token span and host rows.
    if case.workload in ("upstream", "distinct"):
        g = pattern_geometry(K, S)
        initial = upstream_step_tokens(K, S, hot).unsqueeze(0).expand(bs, S, K).to(torch.int32)
        span = hot + g.advance * cap + g.unique
        t = torch.arange(span, **idx).unsqueeze(0)
        if case.workload == "upstream":
            host_locs, host_rows = t.expand(bs, span).contiguous(), span
        else:
            per_req = (span - hot) * torch.arange(bs, **idx).unsqueeze(1)
            host_locs, host_rows = torch.where(t < hot, t, t + per_req), hot + bs * (span - hot)
        fresh_start = hot + g.advance * torch.arange(cap + 1).unsqueeze(1).expand(cap + 1, bs)
        fresh_count = torch.full((cap + 1, bs), g.unique)
        top_k = initial.to(dev).contiguous().clone()
        schedule: Any = _ShiftSchedule(top_k, top_k.clone(), g.misses_per_step, g.advance)
        seq_len = SEQ_LEN if case.workload == "upstream" else max(SEQ_LEN, span + page + 1)
    elif case.workload == "serving":
        tr, host_locs, host_rows = _serving_layout(case, seed, dev, layer)
        span = tr.span
        fresh_start, fresh_count = tr.fresh_start, tr.fresh_count
        top_k = tr.tokens[0].clone()
        schedule = _TraceSchedule(top_k, tr.tokens)
        seq_len = max(SEQ_LEN, span + page + 1)
    elif case.workload == "trace":
        p = case.workload_params_dict
        # Each layer its own trace and, since its span is its own, its own permutation of rows.
        tr = generate(TraceParams(bs, S, K, hot, cap, p["miss_rate"], p["step_overlap"], p["locality"]),
                      layer_seed(seed, layer), device=dev)
        span, host_rows = tr.span, bs * tr.span
        if p["host_layout"] == "contiguous":
            host_locs = torch.arange(host_rows, **idx).view(bs, span)
        else:
            gen = torch.Generator().manual_seed(layer_seed(seed, layer) ^ 0x5DEECE66D)
            host_locs = torch.randperm(host_rows, generator=gen).view(bs, span).to(dev)
        fresh_start, fresh_count = tr.fresh_start, tr.fresh_count
        top_k = tr.tokens[0].clone()
        schedule = _TraceSchedule(top_k, tr.tokens)
        seq_len = max(SEQ_LEN, span + page + 1)
    else:  # Case validated the name already
        raise ConfigError(f"{case.case_id}: unknown workload {case.workload!r}")

    # Device rows: per request, HOT + page slot rows, then its scratch rows (own rows per layer).
    scratch = multi_step_sizes(bs, S, K, hot).scratch_capacity if case.is_multi_step else 0
    stride = hot + page + scratch
    base = torch.arange(bs, **idx).unsqueeze(1) * stride
    locs = (base + torch.arange(hot + page, **idx)).to(torch.int32)
    tokens = torch.full((bs, hot + page), -1, dtype=torch.int32, device=dev)
    tokens[:, :hot] = torch.arange(hot, dtype=torch.int32, device=dev)

    layer_hosts = shared_layer_hosts(case, host_rows, dev, host_offset_rows)  # first: see there
    host_cache = HOST_POOL.view(host_rows, case.item_size_bytes, dev, offset_rows=host_offset_rows,
                                memory=case.host_memory)
    shape, dtype = kv_shape(bs * stride, case.item_size_bytes)
    device_buffer = torch.zeros(shape, dtype=dtype, device=dev)
    # The resident rows hold what the host rows they stand for hold: the pattern of the pool rows the view
    # starts host_offset_rows in (every layer and timing round is then a checkable state).
    fill_pattern(device_buffer, host_locs[:, :hot].reshape(-1) + host_offset_rows, case.item_size_bytes,
                 at=locs[:, :hot].reshape(-1))

    state = lru = None
    if case.is_multi_step:
        scratch_locs = (base + hot + page + torch.arange(scratch, **idx)).to(torch.int32)
        state = new_multi_step_state(bs, S, K, hot, scratch_locs=scratch_locs, device_buffer_tokens=tokens)
    else:
        lru = torch.arange(hot, dtype=torch.int16, device=dev).repeat(bs, 1)
    seq_lens = torch.full((bs * S,), seq_len, dtype=torch.int32, device=dev)
    buffers = SwapBuffers(
        host_cache=host_cache, device_buffer=device_buffer, device_buffer_tokens=tokens, device_buffer_locs=locs,
        host_cache_locs=host_locs.contiguous(), top_k_tokens=top_k,
        top_k_device_locs=torch.full((bs, S, K), -1, dtype=torch.int32, device=dev),
        seq_lens=seq_lens, step_seq_lens=tuple(seq_lens.view(bs, S)[:, s].contiguous() for s in range(S)),
        req_pool_indices=torch.arange(bs, **idx), num_real_reqs=torch.tensor([bs], dtype=torch.int32, device=dev),
        item_size_bytes=case.item_size_bytes, page_size=page, hot_buffer_size=hot, lru_slots=lru, state=state,
        miss_src=torch.zeros((bs, S * K), **idx), miss_dst=torch.zeros((bs, S * K), dtype=torch.int32, device=dev),
        miss_count=torch.zeros(bs, dtype=torch.int32, device=dev),
        shared_layer_buffers=tuple(device_buffer.clone() for _ in range(case.shared_layers)),
        shared_layer_hosts=layer_hosts, rows_per_request=stride,
    )
    return Workload(case, dev, buffers, schedule, fresh_start, fresh_count, cap)


__all__ = ["HOST_POOL", "SEQ_LEN", "TOKEN_SCALE", "LayeredWorkload", "SwapBuffers", "Workload", "WorkloadStats",
           "context_rows", "data_seed", "fill_pattern", "layer_seed", "make_layer", "make_workload", "serving_contexts", "shared_layer_hosts", "upstream_step_tokens"]
