"""Workloads on the CPU: the upstream pattern exactly (docs/semantics.md §5.1), per-request host rows
for `distinct`, the trace model's requested rates, reset/advance, and the tensor contract of
docs/design.md. Expected values come from the spec, computed here independently of the code."""
from __future__ import annotations

import pytest
import torch

from hisparse.bench.case import Case, TimingSettings
from hisparse.errors import ConfigError
from hisparse.bench.workload import SEQ_LEN, TOKEN_SCALE, make_workload

CPU = torch.device("cpu")
FAST = TimingSettings(warmup_calls=2, calls_per_graph=6, replays=10, check_calls=2)


def small(impl: str, workload: str, params: dict | None = None, *, batch: int = 3, steps: int = 4,
          top_k: int = 64, hot: int = 256, item: int = 576, calls: int = 6, seed: int = 0) -> Case:
    timing = TimingSettings(warmup_calls=2, calls_per_graph=calls, check_calls=2)
    return Case(impl, workload, params or {}, batch=batch, steps=steps, top_k=top_k, hot_buffer_size=hot,
                item_size_bytes=item, seed=seed, timing=timing)


def replay_tokens(w, calls: int) -> torch.Tensor:
    """[calls, bs, S, K] top-k of calls 0..calls-1, by really advancing from a reset."""
    w.reset()
    out = []
    for _ in range(calls):
        w.advance()
        out.append(w.buffers.top_k_tokens.clone())
    return torch.stack(out)


def fresh_by_hand(tokens: torch.Tensor, hot: int) -> list[list[list[set]]]:
    """fresh[c][b][s]: tokens not in [0, hot) and not referenced earlier in the replay (python sets)."""
    n, bs, S, _ = tokens.shape
    out = [[[set() for _ in range(S)] for _ in range(bs)] for _ in range(n)]
    for b in range(bs):
        seen: set = set()
        for c in range(n):
            for s in range(S):
                for t in tokens[c, b, s].tolist():
                    if t >= hot and t not in seen:
                        out[c][b][s].add(t)
                    seen.add(t)
    return out


# ---------------------------------------------------------------------------------------------
# upstream: docs/semantics.md §5.1


@pytest.fixture(scope="module")
def upstream():
    case = Case("multi_step", "upstream", batch=3, timing=FAST)  # S=4, K=2048, HOT=4096, 576 B
    return make_workload(case, CPU)


def test_upstream_top_k_is_the_reference_pattern(upstream):
    w = upstream
    tokens = replay_tokens(w, 3)
    for c in range(3):
        call = tokens[c]
        assert torch.equal(call, call[0].expand_as(call))  # identical for every request
        misses = []
        for s in range(4):
            row = call[0, s]
            hits = torch.roll(torch.arange(4096), 137 * s)[:1852]
            assert torch.equal(row[:1852].long(), hits)
            misses.append(row[1852:].long())
            assert row.unique().numel() == 2048
        # steps 2 and 3 repeat step 0's first and step 1's second miss, then 195 fresh misses
        assert misses[2][0] == misses[0][0] and misses[3][0] == misses[1][1]
        union = torch.cat(misses).unique()
        first = 4096 + 800 * (c + 1)  # the first timed call already sees +800 (upstream's run())
        assert torch.equal(union, torch.arange(first, first + 782))
        assert torch.equal(misses[0], torch.arange(first, first + 196))


def test_upstream_fresh_per_step_and_unique(upstream):
    w = upstream
    e = w.expected
    assert e.calls == 6
    assert (e.fresh == torch.tensor([196, 196, 195, 195])).all()
    assert (e.unique_fresh == 782).all()
    assert e.fresh_per_step == (196.0, 196.0, 195.0, 195.0)
    # by hand from the real advances
    fresh = fresh_by_hand(replay_tokens(w, 6), 4096)
    assert [[len(fresh[c][b][s]) for s in range(4)] for c in range(6) for b in range(3)] == [[196, 196, 195, 195]] * 18
    # consecutive steps share 1852 - 137 hits; step 0 shares 1852 - 3*137 with the previous call's step 3
    assert (e.overlap[:, :, 1:] == 1715).all() and (e.overlap[1:, :, 0] == 1441).all()


def test_upstream_shares_host_rows(upstream):
    b, e = upstream.buffers, upstream.expected
    span = b.host_cache_locs.shape[1]
    assert torch.equal(b.host_cache_locs, torch.arange(span).expand(3, span))  # host row = token
    assert (e.host_rows_read == 782).all() and (e.host_row_reads == 3 * 782).all()
    assert e.shared_row_fraction == pytest.approx(2 / 3)
    assert e.unique_misses_per_call == 3 * 782 and e.bytes_per_call == 3 * 782 * 576
    assert (b.seq_lens == SEQ_LEN).all() and SEQ_LEN == 1_048_576
    assert b.page_size == 64 and b.hot_buffer_size == 4096


def test_upstream_advance_adds_800_to_the_miss_block(upstream):
    w = upstream
    w.reset()
    before = w.buffers.top_k_tokens.clone()
    w.advance()
    after = w.buffers.top_k_tokens
    assert torch.equal(after[..., :-196], before[..., :-196])
    assert torch.equal(after[..., -196:], before[..., -196:] + 800)


def test_upstream_shape_is_fixed():
    with pytest.raises(ConfigError, match="upstream has a fixed shape"):
        make_workload(small("multi_step", "upstream"), CPU)


# ---------------------------------------------------------------------------------------------
# distinct


@pytest.mark.parametrize("top_k,hot,steps", [(64, 256, 4), (64, 128, 2), (2048, 4096, 4)])
def test_distinct_rows_never_shared_within_a_replay(top_k, hot, steps):
    w = make_workload(small("lru_sequential", "distinct", top_k=top_k, hot=hot, steps=steps, batch=4), CPU)
    tokens = replay_tokens(w, w.calls)
    fresh = fresh_by_hand(tokens, hot)
    locs = w.buffers.host_cache_locs
    rows = []
    for b in range(4):
        toks = sorted(set().union(*(fresh[c][b][s] for c in range(w.calls) for s in range(steps))))
        rows.append(set(locs[b, toks].tolist()))
        # same per-request structure as upstream: every miss (token >= HOT) of the replay is fresh once
        assert len(toks) == w.calls * w.expected.unique_fresh[0, b]
    for i in range(4):
        for j in range(i + 1, 4):
            assert not rows[i] & rows[j]
    host_rows = w.buffers.host_cache.shape[0]
    assert all(0 <= r < host_rows for rs in rows for r in rs)
    assert w.expected.shared_row_fraction == 0.0
    # every request asks for the same work as in upstream's pattern
    assert torch.equal(tokens, tokens[:, :1].expand_as(tokens))


def test_distinct_fresh_counts_scale_with_top_k():
    w = make_workload(small("multi_step", "distinct", top_k=64, hot=256), CPU)
    m = round(64 * 196 / 2048)  # 6 misses per step, as upstream's 196 of 2048
    assert w.expected.fresh_per_step == (m, m, m - 1, m - 1)


# ---------------------------------------------------------------------------------------------
# trace


def test_trace_rates_within_tolerance():
    case = small("multi_step", "trace", {"miss_rate": 0.2, "step_overlap": 0.6, "locality": 0.5},
                 batch=4, calls=60)
    w = make_workload(case, CPU)
    tokens = replay_tokens(w, 60)
    n, bs, S, K = tokens.shape
    fresh = fresh_by_hand(tokens, 256)
    total = n * bs * S * K
    miss = sum(len(fresh[c][b][s]) for c in range(n) for b in range(bs) for s in range(S)) / total
    overlap = 0
    for b in range(bs):
        prev = None
        for c in range(n):
            for s in range(S):
                cur = set(tokens[c, b, s].tolist())
                assert len(cur) == K  # distinct within a step
                if prev is not None:
                    overlap += len(cur & prev)
                prev = cur
    overlap /= total - bs * K  # the first step has no previous step in the replay
    # 15360 draws: binomial std ~0.003; 0.02 is > 6 sigma
    assert miss == pytest.approx(0.2, abs=0.02)
    assert overlap == pytest.approx(0.6, abs=0.02)
    assert w.expected.miss_rate == pytest.approx(miss)
    counts = torch.tensor([[len(set().union(*fresh[c][b])) for b in range(bs)] for c in range(n)])
    assert torch.equal(w.expected.unique_fresh, counts)


@pytest.mark.parametrize("locality", [0.0, 1.0])
def test_trace_locality(locality):
    steps, K = 2, 32  # older pool (HOT minus the last S+1 steps) always suffices: locality is exact at 0
    case = small("multi_step", "trace", {"miss_rate": 0.1, "step_overlap": 0.7, "locality": locality},
                 batch=2, steps=steps, top_k=K, hot=256, calls=40)
    w = make_workload(case, CPU)
    w.reset()
    history = [w.buffers.top_k_tokens[:, s].clone() for s in range(steps)]  # call 0 is history
    recent = other = 0
    for _ in range(40):
        w.advance()
        for s in range(steps):
            step = w.buffers.top_k_tokens[:, s].clone()
            for b in range(2):
                prev = set(history[-1][b].tolist())
                window = set().union(*(set(h[b].tolist()) for h in history[-1 - steps:-1])) - prev
                seen = set().union(*(set(h[b].tolist()) for h in history))
                for t in step[b].tolist():
                    if t in prev or (t >= 256 and t not in seen):
                        continue  # overlap or fresh
                    if t in window:
                        recent += 1
                    else:
                        other += 1
            history.append(step)
    share = recent / (recent + other)
    if locality == 0.0:
        assert recent == 0
    else:
        assert share > 0.9


def test_trace_host_layouts_and_reproducibility():
    a = make_workload(small("multi_step", "trace", {"host_layout": "contiguous"}), CPU)
    span = a.buffers.host_cache_locs.shape[1]
    assert torch.equal(a.buffers.host_cache_locs, torch.arange(3 * span).view(3, span))
    s = make_workload(small("lru_sequential", "trace", {"host_layout": "scattered"}), CPU)
    locs = s.buffers.host_cache_locs
    assert torch.equal(locs.flatten().sort().values, torch.arange(locs.numel()))  # a permutation
    assert not torch.equal(locs.flatten(), torch.arange(locs.numel()))
    # same data-defining parameters -> same trace, whatever the implementation; another seed differs
    b = make_workload(small("lru_sequential", "trace", {"host_layout": "contiguous"}), CPU)
    assert torch.equal(replay_tokens(a, 6), replay_tokens(b, 6))
    c = make_workload(small("multi_step", "trace", {"host_layout": "contiguous"}, seed=1), CPU)
    assert not torch.equal(replay_tokens(a, 6), replay_tokens(c, 6))


# ---------------------------------------------------------------------------------------------
# serving: per-request regions of a pool laid out as a token allocator does, scattered top-k

SERVING_SMALL = {"context_min": 2048, "context_max": 8192}  # CPU scale: 2k-8k tokens (defaults 16k-128k)


def test_serving_defaults_are_upstreams_figures():
    case = Case("multi_step", "serving")
    p = case.workload_params_dict
    assert p["miss_rate"] == 196 / 2048  # docs/semantics.md §5.1: 196 fresh of 2048 per step
    assert p["step_overlap"] == (1852 - 137) / 2048  # consecutive steps share 1852 - 137 hits
    assert (p["context_min"], p["context_max"]) == (16 * 1024, 128 * 1024)
    assert p["positions"] == "scattered"
    assert case.case_id == "multi_step/serving/b1/s4/k2048/h4096/i576/pdl1"


def test_serving_rates_and_scatter_are_what_comes_out():
    case = small("multi_step", "serving", dict(SERVING_SMALL, miss_rate=0.1, step_overlap=0.8), batch=4, calls=60)
    w = make_workload(case, CPU)
    tokens = replay_tokens(w, 60)
    n, bs, S, K = tokens.shape
    fresh = fresh_by_hand(tokens, 256)
    miss = sum(len(fresh[c][b][s]) for c in range(n) for b in range(bs) for s in range(S)) / (n * bs * S * K)
    overlap = sum(len(set(tokens[c, b, s].tolist()) & set(tokens[c, b, s - 1].tolist()))
                  for c in range(n) for b in range(bs) for s in range(1, S)) / (n * bs * (S - 1) * K)
    # 15360 draws: binomial std ~0.003; 0.02 is > 6 sigma
    assert miss == pytest.approx(0.1, abs=0.02) and overlap == pytest.approx(0.8, abs=0.02)
    e = w.expected
    assert e.miss_rate == pytest.approx(miss) and e.step_overlap == pytest.approx(0.8, abs=0.02)
    # scatter: a call's fresh rows of one request, sorted, are almost never neighbours (scattered over
    # a region of >= 2048 rows, ~25 rows a call: P(neighbour) ~ 2*25/2048), and span most of the region
    locs, regions = w.buffers.host_cache_locs, _regions(w)
    neighbours = total = 0
    for c in range(n):
        for b in range(bs):
            rows = sorted(int(locs[b, t]) for t in set().union(*fresh[c][b]))
            lo, hi = regions[b]
            assert all(lo <= r < hi for r in rows)
            neighbours += sum(1 for x, y in zip(rows, rows[1:]) if y == x + 1)
            total += len(rows)
    assert neighbours / total < 0.05
    assert e.consecutive_row_fraction == pytest.approx(neighbours / total)
    assert e.shared_row_fraction == 0.0


def _regions(w) -> list[tuple[int, int]]:
    """[lo, hi) host rows of each request's region, by hand from the contexts: back to back."""
    from hisparse.bench.workload import data_seed, serving_contexts

    ctx = serving_contexts(w.case, data_seed(w.case)).tolist()
    starts = [sum(ctx[:r]) for r in range(len(ctx))]
    return [(a, a + c) for a, c in zip(starts, ctx)]


def test_serving_pool_is_the_regions_in_token_order():
    w = make_workload(small("lru_sequential", "serving", dict(SERVING_SMALL, positions="consecutive"), batch=5), CPU)
    from hisparse.bench.workload import data_seed, serving_contexts

    ctx = serving_contexts(w.case, data_seed(w.case))
    assert all(2048 <= c <= 8192 and c % 64 == 0 for c in ctx.tolist())
    assert len(set(ctx.tolist())) > 1  # a distribution, not one length
    assert w.buffers.host_cache.shape[0] == int(ctx.sum())  # the pool: exactly the regions, no more
    regions, locs = _regions(w), w.buffers.host_cache_locs
    for b, (lo, hi) in enumerate(regions):
        span = min(locs.shape[1], hi - lo)
        assert torch.equal(locs[b, :span], torch.arange(lo, lo + span))  # token t at row lo + t
    assert w.expected.consecutive_row_fraction > 0.9  # a call's misses: runs of consecutive rows


def test_serving_scattered_positions_are_a_permutation_of_each_region():
    w = make_workload(small("multi_step", "serving", SERVING_SMALL, batch=3, calls=40), CPU)
    locs = w.buffers.host_cache_locs
    for b, (lo, hi) in enumerate(_regions(w)):
        n = min(locs.shape[1], hi - lo)
        first = locs[b, :n]
        assert first.unique().numel() == n and int(first.min()) >= lo and int(first.max()) < hi
        assert not torch.equal(first, torch.arange(lo, lo + n))
        # tokens past the context (an evicted token read again) wrap onto positions HOT.. of the context
        if locs.shape[1] > hi - lo:
            c = hi - lo
            assert torch.equal(locs[b, c:c + 10], locs[b, 256:266])


def test_serving_read_order_sorts_each_step_by_host_row_and_keeps_the_tokens():
    base = small("multi_step", "serving", SERVING_SMALL, batch=3, calls=20)
    indexer = make_workload(base, CPU)
    by_row = make_workload(small("multi_step", "serving", dict(SERVING_SMALL, read_order="host_row"), batch=3,
                                 calls=20), CPU)
    assert by_row.case.case_id.endswith("/read_order=host_row")
    # the same data: host rows, and each step's tokens as a set (read_order is not in the seed)
    assert torch.equal(indexer.buffers.host_cache_locs, by_row.buffers.host_cache_locs)
    a, b = replay_tokens(indexer, 20), replay_tokens(by_row, 20)
    assert torch.equal(a.sort(dim=-1).values, b.sort(dim=-1).values)
    locs = by_row.buffers.host_cache_locs
    n, bs, S, K = b.shape

    def rows_of(tokens, req):
        return [int(locs[req, t]) for t in tokens.tolist()]

    for c in range(n):
        for req in range(bs):
            for s in range(S):
                rows = rows_of(b[c, req, s], req)
                assert rows == sorted(rows)
    # the indexer's order is not by row: about half of its neighbour pairs descend (K = 64 per step)
    descents = sum(x > y for c in range(n) for req in range(bs) for s in range(S)
                   for x, y in zip(rows_of(a[c, req, s], req), rows_of(a[c, req, s], req)[1:]))
    assert descents / (n * bs * S * (K - 1)) > 0.3


def test_serving_is_reproducible_and_seeded():
    a = make_workload(small("multi_step", "serving", SERVING_SMALL), CPU)
    b = make_workload(small("lru_sequential", "serving", SERVING_SMALL), CPU)
    assert torch.equal(replay_tokens(a, 6), replay_tokens(b, 6))
    assert torch.equal(a.buffers.host_cache_locs, b.buffers.host_cache_locs)
    c = make_workload(small("multi_step", "serving", SERVING_SMALL, seed=1), CPU)
    assert not torch.equal(a.buffers.host_cache_locs, c.buffers.host_cache_locs)


def test_serving_prunes_what_it_cannot_lay_out():
    with pytest.raises(ConfigError, match="context_min >= hot_buffer_size"):
        make_workload(small("multi_step", "serving", {"context_min": 512, "context_max": 8192}), CPU)
    with pytest.raises(ConfigError, match="context_min <= context_max"):
        make_workload(small("multi_step", "serving", {"context_min": 8192, "context_max": 4096}), CPU)
    # 64 requests x 2M tokens x 576 B = 72 GiB for one layer: refused before anything is allocated
    big = Case("multi_step", "serving", {"context_max": 2 << 20}, batch=64)
    assert "GiB" in big.problems() and "48 GiB" in big.problems()
    # the default (64 x 128k x 576 B = 4.5 GiB) fits
    assert Case("multi_step", "serving", batch=64).problems() is None


# ---------------------------------------------------------------------------------------------
# reset / advance


def _snapshot(w) -> dict[str, torch.Tensor]:
    b = w.buffers
    out = {"device_buffer_tokens": b.device_buffer_tokens, "device_buffer_locs": b.device_buffer_locs,
           "top_k_tokens": b.top_k_tokens, "device_buffer": b.device_buffer, "miss_count": b.miss_count}
    if b.lru_slots is not None:
        out["lru_slots"] = b.lru_slots
    if b.state is not None:
        out.update({f"state.{k}": v for k, v in b.state.tensors().items()})
    out.update({f"shared{i}": t for i, t in enumerate(b.shared_layer_buffers)})
    return {k: v.clone() for k, v in out.items()}


@pytest.mark.parametrize("impl", ["lru_sequential", "multi_step", "multi_step_planned"])
@pytest.mark.parametrize("workload", ["distinct", "trace", "serving"])
def test_advance_then_reset_restores(impl, workload):
    w = make_workload(small(impl, workload, SERVING_SMALL if workload == "serving" else None), CPU)
    before = _snapshot(w)
    for n in range(1, 5):
        w.advance()
        assert torch.equal(w.buffers.top_k_tokens, w.call_tokens(n - 1))
    assert not torch.equal(w.buffers.top_k_tokens, before["top_k_tokens"])
    # what an op would do: rewrite slot tables, LRU order, state, KV rows of every layer
    b = w.buffers
    b.device_buffer_tokens.fill_(7)
    b.device_buffer_locs.fill_(7)
    b.device_buffer.fill_(7)
    b.miss_count.fill_(7)
    for t in b.shared_layer_buffers:
        t.fill_(7)
    if b.lru_slots is not None:
        b.lru_slots.fill_(7)
    if b.state is not None:
        for t in b.state.tensors().values():
            t.fill_(7)
    w.reset()
    after = _snapshot(w)
    assert before.keys() == after.keys()
    for k in before:
        assert torch.equal(before[k], after[k]), k
    assert (b.top_k_device_locs == -1).all()
    # and the calls repeat identically after a reset
    assert torch.equal(replay_tokens(w, 4), replay_tokens(w, 4))


def test_capacity_covers_a_replay_without_wrapping():
    w = make_workload(small("multi_step", "trace", calls=5), CPU)
    assert w.capacity == 5
    tokens = replay_tokens(w, 5)
    assert torch.equal(tokens[-1], w.call_tokens(4))
    assert all(not torch.equal(tokens[i], tokens[j]) for i in range(5) for j in range(i))


# ---------------------------------------------------------------------------------------------
# The tensor contract (docs/design.md)


@pytest.mark.parametrize("impl", ["lru_sequential", "multi_step", "multi_step_planned"])
@pytest.mark.parametrize("workload,item", [("distinct", 576), ("trace", 100)])
def test_shapes_and_dtypes(impl, workload, item):
    bs, S, K, hot = 3, 4, 64, 256
    w = make_workload(small(impl, workload, item=item), CPU)
    b = w.buffers
    assert b.top_k_tokens.dtype == torch.int32 and b.top_k_tokens.shape == (bs, S, K)
    assert b.top_k_device_locs.dtype == torch.int32 and b.top_k_device_locs.shape == (bs, S, K)
    for t in (b.device_buffer_tokens, b.device_buffer_locs):
        assert t.dtype == torch.int32 and t.shape == (bs, hot + 64)
    assert b.device_buffer_tokens.stride(0) == b.device_buffer_locs.stride(0)
    assert b.host_cache_locs.dtype == torch.int64 and b.host_cache_locs.is_contiguous()
    assert b.host_cache_locs.shape[0] == bs
    assert b.seq_lens.dtype == torch.int32 and b.seq_lens.shape == (bs * S,)
    assert len(b.step_seq_lens) == S
    for s, t in enumerate(b.step_seq_lens):
        assert t.shape == (bs,) and t.is_contiguous() and torch.equal(t, b.seq_lens.view(bs, S)[:, s])
    assert b.req_pool_indices.dtype == torch.int64 and torch.equal(b.req_pool_indices, torch.arange(bs))
    assert b.num_real_reqs.dtype == torch.int32 and b.num_real_reqs.tolist() == [bs]
    assert b.miss_src.dtype == torch.int64 and b.miss_src.shape == (bs, S * K)
    assert b.miss_dst.dtype == torch.int32 and b.miss_dst.shape == (bs, S * K)
    assert b.miss_count.dtype == torch.int32 and b.miss_count.shape == (bs,)
    assert b.item_size_bytes == item and b.page_size == 64
    assert not b.host_cache.is_pinned()
    # slot tables: identity hot buffer, empty extra page
    assert torch.equal(b.device_buffer_tokens[:, :hot], torch.arange(hot, dtype=torch.int32).expand(bs, hot))
    assert (b.device_buffer_tokens[:, hot:] == -1).all()
    if impl == "lru_sequential":
        assert b.state is None and b.lru_slots.dtype == torch.int16 and b.lru_slots.shape == (bs, hot)
        assert torch.equal(b.lru_slots, torch.arange(hot, dtype=torch.int16).expand(bs, hot))
        owned = [b.device_buffer_locs.flatten()]
    else:
        assert b.lru_slots is None
        b.state.validate()
        assert (b.state.sizes.num_req_slots, b.state.sizes.steps, b.state.sizes.top_k,
                b.state.sizes.hot_buffer_size) == (bs, S, K, hot)
        owned = [b.device_buffer_locs.flatten(), b.state.scratch_locs.flatten()]
    # every device row (slot, extra page, scratch) belongs to exactly one request and role
    rows = torch.cat(owned).long()
    assert rows.unique().numel() == rows.numel()
    assert int(rows.max()) < b.device_buffer.shape[0]
    assert len(b.shared_layer_buffers) == (3 if impl == "multi_step_planned" else 0)
    for t in b.shared_layer_buffers:
        assert t.shape == b.device_buffer.shape and t.dtype == b.device_buffer.dtype
    # KV bytes: host row r holds int64 words r*1_000_003 + w; resident slots hold their token's row
    host = b.host_cache.view(torch.uint8).view(b.host_cache.shape[0], -1)
    dev = b.device_buffer.view(torch.uint8).view(b.device_buffer.shape[0], -1)
    assert host.shape[1] == item and dev.shape[1] == item
    r = 5
    want = (torch.arange(-(-item // 8), dtype=torch.int64) + r * TOKEN_SCALE).view(torch.uint8)[:item]
    assert torch.equal(host[r], want)
    slots = b.device_buffer_locs[:, :hot].long()
    assert torch.equal(dev[slots.flatten()], host[b.host_cache_locs[:, :hot].flatten()])


@pytest.mark.parametrize("workload,extra", [("trace", {}), ("serving", SERVING_SMALL)])
def test_miss_rows_are_the_fresh_rows(workload, extra):
    w = make_workload(small("multi_step", workload, dict(extra, miss_rate=0.3, step_overlap=0.5)), CPU)
    tokens = replay_tokens(w, w.calls)
    fresh = fresh_by_hand(tokens, 256)
    locs = w.buffers.host_cache_locs
    for c in range(w.calls):
        src, dst = w.miss_rows(c)
        want = sorted(int(locs[b, t]) for b in range(3) for t in set().union(*fresh[c][b]))
        assert sorted(src.tolist()) == want
        assert src.dtype == torch.int64 and dst.dtype == torch.int32 and dst.numel() == src.numel()
        assert dst.unique().numel() == dst.numel()
        assert int(w.expected.host_row_reads[c]) == len(want)


def test_invalid_case_is_refused():
    with pytest.raises(ConfigError, match="top_k 512 > hot_buffer_size 256"):
        make_workload(small("multi_step", "distinct", top_k=512), CPU)


# ---------------------------------------------------------------------------------------------
# With the reference ops (when present): the workloads' misses are what the ops copy


def test_reference_ops_copy_exactly_the_fresh_rows():
    implementations = pytest.importorskip("hisparse.bench.calls")
    backends = pytest.importorskip("hisparse.bench.backends")
    backend = backends.get_backend("reference")
    for impl in ("lru_sequential", "multi_step"):
        w = make_workload(small(impl, "distinct", batch=2, top_k=64, hot=128, calls=6), CPU)
        bound = implementations.bind(impl, backend, w, pdl=w.case.pdl)
        w.reset()
        assert bound.checked_call() == []
        w.reset()
        for c in range(w.calls):
            record = bound.recorded_call()
            copied = sorted(int(r) for cp in record.copies for r in cp.src_rows)
            # only fresh rows are read (the resident rows 0..HOT-1 that requests share: never)
            assert copied == sorted(w.miss_rows(c)[0].tolist())


@pytest.mark.parametrize("impl", ["lru_sequential", "multi_step"])
def test_reference_ops_on_serving_read_the_fresh_rows_from_the_request_region(impl):
    """The compulsory misses are a lower bound (an evicted token re-referenced is read again): every
    fresh row is copied, and every copied row lies in its request's region of the pool."""
    from hisparse.bench.backends import get_backend
    from hisparse.bench.calls import bind

    w = make_workload(small(impl, "serving", SERVING_SMALL, batch=2, top_k=64, hot=128, calls=6), CPU)
    bound = bind(impl, get_backend("reference"), w, pdl=w.case.pdl)
    w.reset()
    assert bound.checked_call() == []
    w.reset()
    regions = _regions(w)
    for c in range(w.calls):
        record = bound.recorded_call()
        copied = {int(r) for cp in record.copies for r in cp.src_rows}
        assert set(w.miss_rows(c)[0].tolist()) <= copied
        for cp in record.copies:  # the device row says whose request it is: its host row is in that region
            for src, dst in zip(cp.src_rows.tolist(), cp.dst_rows.tolist()):
                lo, hi = regions[dst // w.buffers.rows_per_request]
                assert lo <= src < hi


@pytest.mark.parametrize("impl", ["lru_sequential_planned", "multi_step_planned"])
def test_planned_implementations_copy_the_fresh_rows_into_every_shared_layer(impl):
    """The shared-layer baseline (sequential LRU + each step's plan replayed) and multi_step_planned
    do the same work: the swapped layer and each of the 2 shared layers receive exactly the fresh
    rows of the call, and each shared layer ends up with its own host rows' bytes at those slots: layer l
    reads the l-th block of host rows after the swapped layer's (docs/perf-notes.md, b7f40a9), so its row r holds the
    pattern of pool row l * H + r (H: the swapped layer's host rows), words (row * TOKEN_SCALE + w)."""
    from hisparse.bench.backends import get_backend
    from hisparse.bench.calls import bind
    from hisparse.kernels.reference.bytes import as_rows

    case = Case(impl, "distinct", batch=2, steps=4, top_k=64, hot_buffer_size=128, shared_layers=2,
                timing=TimingSettings(warmup_calls=2, calls_per_graph=4, check_calls=2))
    w = make_workload(case, CPU)
    assert len(w.buffers.shared_layer_buffers) == 2 and case.pdl == (impl == "multi_step_planned")
    bound = bind(impl, get_backend("reference"), w, pdl=case.pdl)
    w.reset()
    assert bound.checked_call() == []
    w.reset()
    for c in range(case.timing.calls_per_graph):
        record = bound.recorded_call()
        fresh = sorted(w.miss_rows(c)[0].tolist())
        for layer in (0, 1, 2):
            rows = sorted(int(r) for cp in record.copies if cp.layer == layer for r in cp.src_rows)
            assert rows == fresh, (impl, c, layer)
        src = torch.cat([cp.src_rows for cp in record.copies if cp.layer == 0]).to(torch.int64)
        dst = torch.cat([cp.dst_rows for cp in record.copies if cp.layer == 0]).to(torch.int64)
        primary = as_rows(w.buffers.device_buffer, case.item_size_bytes)[dst]
        H, words = w.buffers.host_cache.shape[0], case.item_size_bytes // 8
        for layer, shared in enumerate(w.buffers.shared_layer_buffers, start=1):
            want = (src + layer * H).unsqueeze(1) * TOKEN_SCALE + torch.arange(words)
            got = shared[dst]
            assert torch.equal(got, want), (impl, c, layer)
            assert not torch.equal(got, primary)  # not the swapped layer's rows again


def test_shared_layers_read_their_own_host_rows_except_on_upstream():
    """`serving` and `distinct`: each shared layer's host cache is its own block of pinned rows, right
    after the previous layer's, of the swapped layer's shape. `upstream` (upstream's benchmark, rows
    shared anyway) keeps every layer on the swapped layer's host cache."""
    timing = TimingSettings(warmup_calls=2, calls_per_graph=4, check_calls=2)
    for workload, params in (("distinct", {}), ("serving", {"context_min": 4096, "context_max": 8192})):
        case = Case("multi_step_planned", workload, params, batch=2, steps=4, top_k=64, hot_buffer_size=128,
                    shared_layers=3, timing=timing)
        b = make_workload(case, CPU).buffers
        H, row = b.host_cache.shape[0], b.host_cache.stride(0) * b.host_cache.element_size()
        hosts = [b.copy_planned_kwargs(layer)["host_cache"] for layer in (1, 2, 3)]
        for layer, h in enumerate(hosts, start=1):
            assert h.shape == b.host_cache.shape and h.dtype == b.host_cache.dtype, workload
            assert h.data_ptr() - b.host_cache.data_ptr() == layer * H * row, (workload, layer)
            assert int(h[0, 0]) == layer * H * TOKEN_SCALE, (workload, layer)  # pool row l*H, word 0
    case = Case("multi_step_planned", "upstream", batch=2, shared_layers=3, timing=timing)
    b = make_workload(case, CPU).buffers
    assert b.shared_layer_hosts == ()
    assert all(b.copy_planned_kwargs(layer)["host_cache"] is b.host_cache for layer in (1, 2, 3))


@pytest.mark.parametrize("impl", ["lru_sequential", "multi_step"])
def test_serving_in_host_row_order_passes_the_checks_end_to_end(impl):
    # The harness's gate on the reference backend: the sorted order is a valid top-k (the contract,
    # the invariant checker and, for LRU, the bit-exact reference) for both swaps.
    from hisparse.bench import measure
    from hisparse.bench.backends import get_backend
    from hisparse.bench.floors import NOT_APPLICABLE

    case = Case(impl, "serving", dict(SERVING_SMALL, read_order="host_row"), batch=2, steps=4, top_k=64,
                hot_buffer_size=256, item_size_bytes=64,
                timing=TimingSettings(warmup_calls=1, calls_per_graph=2, replays=10, l2_flush=False, check_calls=2))
    r = measure.run_case(case, get_backend("reference"), floors=NOT_APPLICABLE)
    assert r.status == "ok", r.reason


# ---------------------------------------------------------------------------------------------
# The call budget between resets


@pytest.mark.parametrize("workload, params", [("distinct", None), ("trace", None), ("serving", "small")])
def test_a_call_past_the_workloads_budget_is_refused_until_a_reset(workload, params):
    # A workload holds timing.max_calls_per_reset calls (here max(2, 6, 2) = 6). Past them the schedule
    # runs off its data (distinct: tokens past its host rows, so calls without misses); a probe that
    # captured 100 calls of a 20-call case timed such calls silently.
    p = dict(SERVING_SMALL) if params == "small" else None
    w = make_workload(small("multi_step", workload, p), CPU)
    for _ in range(6):
        w.advance()
    with pytest.raises(ConfigError) as e:
        w.advance()
    msg = str(e.value)
    assert "multi_step/" in msg and "call 7 since the last reset" in msg and "holds 6" in msg
    assert "calls_per_graph" in msg
    w.reset()
    before = w.buffers.top_k_tokens.clone()
    w.advance()  # the budget starts again at a reset
    assert not torch.equal(before, w.buffers.top_k_tokens)
