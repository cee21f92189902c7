"""CPU tests of the single-step exact-LRU swap reference (docs/semantics.md §2.4, §6.2, §2.7).

Expected values are worked out by hand from the doc. The shared state of the worked examples:
HOT=4, lru=[0,1,2,3], slot tokens [1,4,2,5], slot device rows [9,7,3,5], newest-token row 11.
Host row of token t of request slot r is 32*r + t; request slot r's device rows are the above + 16*r.
"""
from __future__ import annotations

import pytest
import torch

from _topk import within_contract

from hisparse.errors import InputError
from hisparse.kernels.reference.swap_single import swap_single_step
from hisparse.kernels.validation.swap_single import SwapSingleShape, check_swap_single_inputs

HOT, ITEM = 4, 32  # float32 x 8 items, as upstream's test


def storage_bytes(t: torch.Tensor) -> bytes:
    """Raw bytes of a whole buffer, read independently of hisparse's byte helpers."""
    return t.detach().reshape(-1).view(torch.uint8).numpy().tobytes()


def row_bytes(t: torch.Tensor, row: int, item: int) -> bytes:
    return storage_bytes(t)[row * item : (row + 1) * item]


class World:
    """Request-slot tables + buffers for HOT=4 examples; ``call`` runs the reference on them."""

    def __init__(self, num_req_slots: int = 1, page_size: int = 1, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        r = num_req_slots
        extra = list(range(12, 12 + page_size - 1))  # further extra-page rows (draft tokens)
        self.page = page_size
        self.tokens = torch.tensor([[1, 4, 2, 5, 7] + [-1] * (page_size - 1)] * r, dtype=torch.int32)
        self.locs = torch.tensor([[9, 7, 3, 5, 11] + extra] * r, dtype=torch.int32) + 16 * torch.arange(r).view(r, 1).int()
        self.lru = torch.tensor([[0, 1, 2, 3]] * r, dtype=torch.int16)
        self.hcl = (torch.arange(32).view(1, 32) + 32 * torch.arange(r).view(r, 1)).to(torch.int64)
        self.host = torch.randn(32 * r, ITEM // 4, generator=g)
        self.dev = torch.randn(16 * r, ITEM // 4, generator=g)

    def kwargs(self, queries, seq_lens, rids=None, num_real=None, out=None, plan=False,
               idx_dtype=torch.int64, seq_dtype=torch.int64):
        q = torch.tensor(queries, dtype=torch.int32)
        bs, k = q.shape
        kw = dict(
            top_k_tokens=q, device_buffer_tokens=self.tokens, host_cache_locs=self.hcl,
            device_buffer_locs=self.locs, host_cache=self.host, device_buffer=self.dev,
            top_k_device_locs=torch.full((bs, k), 999, dtype=torch.int32) if out is None else out,
            req_pool_indices=torch.tensor(rids if rids is not None else list(range(bs)), dtype=idx_dtype),
            seq_lens=torch.tensor(seq_lens, dtype=seq_dtype),
            lru_slots=self.lru, num_real_reqs=torch.tensor([bs if num_real is None else num_real], dtype=torch.int32),
            item_size_bytes=ITEM, page_size=self.page,
        )
        if plan:
            kw.update(miss_src=torch.full((bs, k), -9, dtype=torch.int64),
                      miss_dst=torch.full((bs, k), -9, dtype=torch.int32),
                      miss_count=torch.full((bs,), 123, dtype=torch.int32))
        return kw

    def call(self, queries, seq_lens, **opts):
        kw = self.kwargs(queries, seq_lens, **opts)
        stats = swap_single_step(**kw)
        return kw, stats

    def snapshot(self):
        return [t.clone() for t in (self.tokens, self.locs, self.lru, self.hcl, self.host, self.dev)]

    def unchanged_since(self, snap) -> bool:
        return all(torch.equal(a, b) for a, b in zip(snap, self.snapshot()))


# ---- (a) the worked examples of §2.4 ------------------------------------------------------------

def test_example_hits_and_newest_token_move_to_mru_without_copies():
    w = World()
    dev_before = w.dev.clone()
    kw, stats = w.call([[4, 2, 7]], [8], plan=True)
    assert kw["top_k_device_locs"].tolist() == [[7, 3, 11]]
    assert w.lru.tolist() == [[0, 3, 1, 2]]
    assert w.tokens[0, :HOT].tolist() == [1, 4, 2, 5]
    assert torch.equal(w.dev, dev_before)
    assert (stats.hits, stats.misses, stats.newest_hits, stats.copied_bytes) == ((2,), (0,), (1,), (0,))
    assert kw["miss_count"].tolist() == [0]


def test_example_follow_up_miss_evicts_lru_head_and_copies_host_row():
    w = World()
    w.call([[4, 2, 7]], [8])
    kw, stats = w.call([[6]], [8], plan=True)
    assert kw["top_k_device_locs"].tolist() == [[9]]
    assert w.tokens[0, :HOT].tolist() == [6, 4, 2, 5]
    assert w.lru.tolist() == [[3, 1, 2, 0]]
    assert row_bytes(w.dev, 9, ITEM) == row_bytes(w.host, 6, ITEM)
    assert (kw["miss_src"][0, :1].tolist(), kw["miss_dst"][0, :1].tolist(), kw["miss_count"].tolist()) == ([6], [9], [1])
    assert (stats.misses, stats.copied_bytes, stats.total_copied_bytes) == ((1,), (ITEM,), ITEM)


def test_example_batched_long_fast_and_padding_rows():
    w = World(num_req_slots=2)
    snap_rid1 = (w.tokens[1].clone(), w.lru[1].clone())
    # row 0: long (rid 0); row 1: fast (rid 1, seq_len 3 <= HOT); row 2: padding (its rid is never read)
    kw, stats = w.call([[4, 6, 7], [2, 0, -1], [1, 2, 3]], [8, 3, 50], rids=[0, 1, 77], num_real=2, plan=True)
    assert kw["top_k_device_locs"].tolist() == [[7, 9, 11], [19, 25, -1], [-1, -1, -1]]
    assert w.lru[0].tolist() == [2, 3, 0, 1]
    assert w.tokens[0, :HOT].tolist() == [6, 4, 2, 5]
    assert (w.tokens[1].tolist(), w.lru[1].tolist()) == (snap_rid1[0].tolist(), snap_rid1[1].tolist())
    assert kw["miss_count"].tolist() == [1, 0, 0]
    assert stats.paths == ("long", "fast", "padding")
    assert row_bytes(w.dev, 9, ITEM) == row_bytes(w.host, 6, ITEM)


# ---- (b) the single-step cases of §6.2 ----------------------------------------------------------

@pytest.mark.parametrize("seq_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
def test_fast_path_indexes_slots_directly_and_mutates_nothing(seq_dtype, idx_dtype):
    w = World()
    snap = w.snapshot()
    kw, stats = w.call([[2, 0, 1]], [3], plan=True, seq_dtype=seq_dtype, idx_dtype=idx_dtype)
    assert kw["top_k_device_locs"].tolist() == [[3, 9, 7]]  # slot t holds position t
    assert w.unchanged_since(snap)
    assert kw["miss_count"].tolist() == [0] and stats.paths == ("fast",)


def test_fast_path_writes_minus_one_for_padding():
    w = World()
    kw, _ = w.call([[1, -1, -1, -1]], [2])  # seq_len 2 < top_k 4: entries from index 2 on are padding
    assert kw["top_k_device_locs"].tolist() == [[7, -1, -1, -1]]


def test_long_row_padding_is_neither_a_hit_nor_a_miss():
    """-1 is padding on the long path too (the one top-k contract of both swaps): its output is -1
    and the swap is the one of the row without it."""
    w, twin = World(), World()
    kw, stats = w.call([[4, -1, 6]], [8])
    kw_twin, stats_twin = twin.call([[4, 6]], [8])
    assert kw["top_k_device_locs"].tolist()[0][1] == -1
    assert [kw["top_k_device_locs"].tolist()[0][i] for i in (0, 2)] == kw_twin["top_k_device_locs"].tolist()[0]
    assert (stats.hits, stats.misses) == (stats_twin.hits, stats_twin.misses) == ((1,), (1,))
    assert torch.equal(w.lru, twin.lru) and torch.equal(w.tokens, twin.tokens)


def test_newest_token_needs_no_host_row_and_no_slot():
    w = World()
    w.hcl[0, 7] = -1  # the newest token is not backed up to host yet
    snap = w.snapshot()
    kw, stats = w.call([[7]], [8])
    assert kw["top_k_device_locs"].tolist() == [[11]]
    assert w.unchanged_since(snap)  # nothing hit, nothing missed: LRU order [E[0:]] is the old one
    assert (stats.hits, stats.misses, stats.newest_hits) == ((0,), (0,), (1,))


def test_miss_uses_the_updated_lru_head():
    w = World()
    kw, _ = w.call([[1]], [8])  # hit on slot 0 -> lru [1,2,3,0]
    assert (kw["top_k_device_locs"].tolist(), w.lru.tolist()) == ([[9]], [[1, 2, 3, 0]])
    kw, _ = w.call([[6]], [8])  # head is now slot 1 (row 7), not slot 0
    assert kw["top_k_device_locs"].tolist() == [[7]]
    assert w.tokens[0, :HOT].tolist() == [1, 6, 2, 5]
    assert w.lru.tolist() == [[2, 3, 0, 1]]
    assert row_bytes(w.dev, 7, ITEM) == row_bytes(w.host, 6, ITEM)


def test_all_slots_missing_replaces_them_in_lru_order_and_keeps_the_order():
    w = World()
    w.lru[0] = torch.tensor([2, 0, 3, 1], dtype=torch.int16)
    kw, stats = w.call([[10, 11, 12, 13]], [20], plan=True)
    # miss m takes the m-th LRU slot: 2, 0, 3, 1 (rows 3, 9, 5, 7); [E[4:]] ++ [2,0,3,1] ++ [] = old order
    assert kw["top_k_device_locs"].tolist() == [[3, 9, 5, 7]]
    assert w.tokens[0, :HOT].tolist() == [11, 13, 10, 12]
    assert w.lru.tolist() == [[2, 0, 3, 1]]
    assert kw["miss_src"].tolist() == [[10, 11, 12, 13]] and kw["miss_dst"].tolist() == [[3, 9, 5, 7]]
    for tok, row in zip([10, 11, 12, 13], [3, 9, 5, 7]):
        assert row_bytes(w.dev, row, ITEM) == row_bytes(w.host, tok, ITEM)
    assert stats.total_misses == 4 and stats.total_copied_bytes == 4 * ITEM


def test_fewer_misses_than_slots_rotate_loaded_slots_to_mru():
    w = World()
    kw, _ = w.call([[12, 10]], [20])
    assert kw["top_k_device_locs"].tolist() == [[9, 7]]
    assert w.tokens[0, :HOT].tolist() == [12, 10, 2, 5]
    assert w.lru.tolist() == [[2, 3, 0, 1]]  # unconsumed [2,3] ++ misses [0,1]


def test_strided_top_k_views_and_wider_extra_page():
    w = World(page_size=3)  # newest token still resolves to column HOT
    big_q = torch.tensor([[4, 2, 7, 99, 98]], dtype=torch.int32)
    big_out = torch.full((1, 6), 555, dtype=torch.int32)
    kw = w.kwargs([[0, 0, 0]], [8])
    kw.update(top_k_tokens=big_q[:, :3], top_k_device_locs=big_out[:, 2:5])
    swap_single_step(**kw)
    assert big_out.tolist() == [[555, 555, 7, 3, 11, 555]]
    assert w.lru.tolist() == [[0, 3, 1, 2]]


def test_input_shape_is_derived_from_the_tensors():
    w = World(num_req_slots=2, page_size=2)
    kw = w.kwargs([[4, 2, 7]], [8], plan=True)
    assert check_swap_single_inputs(**kw) == SwapSingleShape(
        batch=1, num_req_slots=2, top_k=3, hot_buffer_size=4, page_size=2, item_size_bytes=ITEM,
        record_plan=True, host_rows=64, device_rows=32)


# ---- (c) byte-exact copies for every item size, whatever the buffers' dtypes ---------------------

@pytest.mark.parametrize("item,host_dtype,dev_dtype", [
    (576, torch.int64, torch.bfloat16), (656, torch.float32, torch.uint8), (1152, torch.bfloat16, torch.int64),
    (584, torch.uint8, torch.float32), (512, torch.float16, torch.int32), (100, torch.int64, torch.int16),
    (4, torch.float64, torch.uint8),
])
def test_misses_copy_whole_items_byte_exactly(item, host_dtype, dev_dtype):
    g = torch.Generator().manual_seed(item)
    w = World()

    def buffer(rows, dtype):  # a few trailing bytes that belong to no row
        size = torch.tensor([], dtype=dtype).element_size()
        raw = torch.randint(0, 256, ((rows * item + 7) // size * size + 2 * size,), dtype=torch.uint8, generator=g)
        return raw.view(dtype)

    w.host, w.dev = buffer(32, host_dtype), buffer(16, dev_dtype)
    host_before, dev_before = storage_bytes(w.host), storage_bytes(w.dev)
    kw = w.kwargs([[10, 11, 12, 13]], [20])
    kw["item_size_bytes"] = item
    swap_single_step(**kw)
    after = storage_bytes(w.dev)
    dst = {3: 12, 9: 10, 5: 13, 7: 11}  # device row -> token (= host row); LRU order 0,1,2,3
    for row in range(len(dev_before) // item):
        src = host_before[dst[row] * item : (dst[row] + 1) * item] if row in dst else dev_before[row * item : (row + 1) * item]
        assert after[row * item : (row + 1) * item] == src, f"device row {row}"
    tail = len(dev_before) // item * item
    assert after[tail:] == dev_before[tail:]
    assert storage_bytes(w.host) == host_before


# ---- (d) random workloads: invariants, and agreement with a literal transcription of §2.4 --------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def doc_model(tok, seq_len, slot_tokens, lru, locs, hot):
    """§2.4 steps 4-7 as literally as possible: dict hash, slot-by-slot scan, staging array."""
    out, table, done = [-1] * len(tok), {}, [False] * len(tok)
    for i, t in enumerate(tok):
        if t == seq_len - 1:
            out[i], done[i] = locs[hot], True
        else:
            table[t] = i  # a repeated key keeps the last index
    staging, n_hit, n_evict = [None] * hot, 0, 0
    for s in lru:
        if slot_tokens[s] in table:
            i = table[slot_tokens[s]]
            done[i], out[i], staging[n_hit] = True, locs[s], s
            n_hit += 1
        else:
            staging[hot - 1 - n_evict] = s
            n_evict += 1
    misses = [i for i in range(len(tok)) if not done[i]]
    slots = [staging[hot - 1 - m] for m in range(len(misses))]
    for i, s in zip(misses, slots):
        out[i], slot_tokens[s] = locs[s], tok[i]
    unconsumed = [staging[hot - 1 - m] for m in range(len(misses), n_evict)]
    return out, slot_tokens, unconsumed + slots + staging[:n_hit], [tok[i] for i in misses]


@st.composite
def workloads(draw):
    rnd = draw(st.randoms(use_true_random=False))
    hot = draw(st.sampled_from([1, 2, 3, 5, 6, 7, 12]))
    k, page, n_slots = draw(st.integers(1, hot)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    # Counts come from rnd (uniform): hypothesis' own draws favour the smallest values.
    num_real = rnd.choice([0, n_slots, rnd.randint(1, n_slots)])
    bs = max(1, num_real + rnd.randint(0, 1))
    big = draw(st.booleans())  # seq_len above 2^20
    kinds = [draw(st.sampled_from(["fast", "long", "long"])) for _ in range(num_real)]
    item = draw(st.sampled_from([4, 100, 576, 584]))
    width = hot + page
    rids = rnd.sample(range(n_slots), num_real) + [rnd.randint(-3, 99) for _ in range(bs - num_real)]
    tokens = torch.full((n_slots, width), -1, dtype=torch.int32)
    lru = torch.stack([torch.tensor(rnd.sample(range(hot), hot)) for _ in range(n_slots)]).to(torch.int16)
    locs = torch.tensor(rnd.sample(range(n_slots * width + 3), n_slots * width), dtype=torch.int32).view(n_slots, width)
    queries, seq_lens, host_map = [], [], {}
    for b in range(bs):
        rid = rids[b]
        if b >= num_real:  # padding: garbage, never read
            queries.append([rnd.randint(-5, 10**6) for _ in range(k)])
            seq_lens.append(rnd.randint(0, 2**21))
        elif kinds[b] == "fast":
            seq_len = rnd.randint(0, hot)
            tokens[rid, :seq_len] = torch.arange(seq_len, dtype=torch.int32)
            drawn = torch.tensor([rnd.randint(-1, width - 1) for _ in range(k)])
            queries.append(within_contract(drawn, seq_len, limit=width).tolist())
            seq_lens.append(seq_len)
        else:
            seq_len = hot + 1 + (2**20 + rnd.randrange(2**16) if big else rnd.randrange(40))
            pool = rnd.sample(range(seq_len - 1), min(seq_len - 1, hot + k))
            n_res, newest = rnd.choice([hot, rnd.randint(0, hot)]), rnd.random() < 0.5  # often a full buffer
            resident, fresh, need = pool[:n_res], pool[n_res:], k - newest
            n_hit = rnd.randint(max(0, need - len(fresh)), min(need, n_res))
            q = rnd.sample(resident, n_hit) + fresh[: need - n_hit] + [seq_len - 1] * newest
            rnd.shuffle(q)
            slots = rnd.sample(range(hot), n_res)
            tokens[rid, slots] = torch.tensor(resident, dtype=torch.int32)
            free = sorted(set(range(hot)) - set(slots))
            if free and rnd.random() < 0.3:  # the newest token may also sit in a hot slot: not a hit
                tokens[rid, rnd.choice(free)] = seq_len - 1
            tokens[rid, hot] = seq_len - 1
            for t in pool + ([seq_len - 1] if rnd.random() < 0.5 else []):
                host_map[(rid, t)] = len(host_map)
            queries.append(q)
            seq_lens.append(seq_len)
    max_len = max([width] + [s + 1 for b, s in enumerate(seq_lens[:num_real]) if kinds[b] == "long"])
    hcl = torch.full((n_slots, max_len), -1, dtype=torch.int64)
    for (rid, t), row in host_map.items():
        hcl[rid, t] = row
    g = torch.Generator().manual_seed(rnd.randrange(2**31))
    dtypes = [torch.uint8, torch.int16, torch.int64, torch.float32]
    host_dt, dev_dt = draw(st.sampled_from(dtypes)), draw(st.sampled_from(dtypes))

    def buffer(rows, dtype):
        size = torch.tensor([], dtype=dtype).element_size()
        return torch.randint(0, 256, (-(-(rows * item) // size) * size,), dtype=torch.uint8, generator=g).view(dtype)

    idx_dt, seq_dt = draw(st.sampled_from([torch.int32, torch.int64])), draw(st.sampled_from([torch.int32, torch.int64]))
    return dict(
        top_k_tokens=torch.tensor(queries, dtype=torch.int32), device_buffer_tokens=tokens, host_cache_locs=hcl,
        device_buffer_locs=locs, host_cache=buffer(len(host_map) + 1, host_dt),
        device_buffer=buffer(n_slots * width + 3, dev_dt),
        top_k_device_locs=torch.full((bs, k), 555, dtype=torch.int32),
        req_pool_indices=torch.tensor(rids, dtype=idx_dt), seq_lens=torch.tensor(seq_lens, dtype=seq_dt),
        lru_slots=lru, num_real_reqs=torch.tensor([num_real], dtype=torch.int32), item_size_bytes=item,
        page_size=page, miss_src=torch.full((bs, k + 1), -9, dtype=torch.int64),
        miss_dst=torch.full((bs, k + 1), -9, dtype=torch.int32), miss_count=torch.full((bs,), 77, dtype=torch.int32),
    )


def item_bytes(buf, item):
    raw = storage_bytes(buf)
    return [raw[r * item : (r + 1) * item] for r in range(len(raw) // item)]


class Observed:
    """One random call: the inputs as they were, the tensors after, and both buffers as item rows."""

    def __init__(self, kw):
        self.kw, self.before = kw, {n: v.clone() for n, v in kw.items() if isinstance(v, torch.Tensor)}
        self.stats = swap_single_step(**kw)
        item = kw["item_size_bytes"]
        self.hot = kw["lru_slots"].shape[1]
        self.host = item_bytes(kw["host_cache"], item)
        self.dev0, self.dev1 = item_bytes(self.before["device_buffer"], item), item_bytes(kw["device_buffer"], item)
        self.written = set()  # device rows a miss loaded

    def row(self, name, b, before=False):
        return (self.before if before else self.kw)[name][b].tolist()


def check_fast_row(o, b, rid, seq_len, tok, out):
    locs = o.row("device_buffer_locs", rid)
    assert out == [locs[t] if i < seq_len and t >= 0 else -1 for i, t in enumerate(tok)]
    assert o.row("device_buffer_tokens", rid) == o.row("device_buffer_tokens", rid, before=True)
    assert o.row("lru_slots", rid) == o.row("lru_slots", rid, before=True)
    assert int(o.kw["miss_count"][b]) == 0


def check_long_row(o, b, rid, seq_len, tok, out):
    hot, locs = o.hot, o.row("device_buffer_locs", rid)
    slot0, slot1 = o.row("device_buffer_tokens", rid, before=True), o.row("device_buffer_tokens", rid)
    lru0, lru1 = o.row("lru_slots", rid, before=True), o.row("lru_slots", rid)
    hits = [t for t in tok if t != seq_len - 1 and t in slot0[:hot]]
    newest = int(seq_len - 1 in tok)
    misses = len(tok) - len(hits) - newest
    got = (o.stats.hits[b], o.stats.newest_hits[b], o.stats.misses[b], int(o.kw["miss_count"][b]))
    assert got == (len(hits), newest, misses, misses)
    assert sorted(lru1) == list(range(hot))
    resident = [t for t in slot1[:hot] if t >= 0]
    assert len(resident) == len(set(resident)) and slot1[hot:] == slot0[hot:]
    # hits end MRU, the slots loaded by misses just before them
    assert set(lru1[hot - len(hits):]) == {slot0.index(t) for t in hits}
    miss_slots = {s for s in range(hot) if slot1[s] != slot0[s]}
    assert set(lru1[hot - len(hits) - misses : hot - len(hits)]) == miss_slots and len(miss_slots) == misses
    miss_order = []
    for i, t in enumerate(tok):
        if t == seq_len - 1:
            assert out[i] == locs[hot]
            continue
        s = locs.index(out[i])
        assert s < hot and slot1[s] == t
        if t in hits:
            assert slot0[s] == t and o.dev1[out[i]] == o.dev0[out[i]]
        else:
            miss_order.append(i)
            assert o.dev1[out[i]] == o.host[int(o.kw["host_cache_locs"][rid, t])]
            o.written.add(out[i])
    host_rows = [int(o.kw["host_cache_locs"][rid, tok[i]]) for i in miss_order]
    assert o.kw["miss_dst"][b, :misses].tolist() == [out[i] for i in miss_order]
    assert o.kw["miss_src"][b].tolist() == host_rows + [-9] * (len(tok) + 1 - misses)
    assert (out, slot1, lru1) == doc_model(tok, seq_len, list(slot0), lru0, locs, hot)[:3]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workloads())
def test_random_workloads_keep_every_invariant(kw):
    o = Observed(kw)
    n = int(kw["num_real_reqs"][0])
    for b in range(kw["top_k_tokens"].shape[0]):
        out = kw["top_k_device_locs"][b].tolist()
        if b >= n:
            assert out == [-1] * len(out) and int(kw["miss_count"][b]) == 0
            continue
        rid, seq_len, tok = int(kw["req_pool_indices"][b]), int(kw["seq_lens"][b]), kw["top_k_tokens"][b].tolist()
        (check_fast_row if seq_len <= o.hot else check_long_row)(o, b, rid, seq_len, tok, out)
    assert all(o.dev1[r] == o.dev0[r] for r in range(len(o.dev0)) if r not in o.written)
    for name in ("device_buffer_locs", "host_cache_locs", "top_k_tokens", "seq_lens", "req_pool_indices"):
        assert torch.equal(kw[name], o.before[name]), name
    assert storage_bytes(kw["host_cache"]) == storage_bytes(o.before["host_cache"])  # bytes: NaN != NaN


def test_largest_workload_stays_fast_and_exact():
    """HOT=32767 (int16 limit), K=2048, 64 long requests: every output row holds its token's bytes."""
    g = torch.Generator().manual_seed(1)
    r, hot, k, item, seq_len = 64, 32767, 2048, 16, 40000
    tokens = torch.stack([torch.randperm(seq_len - 1, generator=g)[:hot] for _ in range(r)]).int()
    tokens = torch.cat([tokens, torch.full((r, 1), seq_len - 1, dtype=torch.int32)], 1)
    pick = torch.stack([torch.randperm(seq_len, generator=g)[:k] for _ in range(r)]).int()
    locs = torch.randperm(r * (hot + 1), generator=g).int().view(r, hot + 1)
    hcl = torch.arange(r * seq_len, dtype=torch.int64).view(r, seq_len)
    host = torch.randint(0, 2**62, (r * seq_len * item // 8,), dtype=torch.int64, generator=g)
    dev = torch.zeros(r * (hot + 1) * item // 4, dtype=torch.float32)
    host_rows, dev_rows = host.view(torch.uint8).view(-1, item), dev.view(torch.uint8).view(-1, item)
    resident_src = torch.arange(r).view(r, 1) * seq_len + tokens[:, :hot]
    dev_rows[locs[:, :hot].long()] = host_rows[resident_src]  # consistent state: slots hold their tokens' bytes
    out = torch.empty(r, k, dtype=torch.int32)
    stats = swap_single_step(
        top_k_tokens=pick, device_buffer_tokens=tokens, host_cache_locs=hcl, device_buffer_locs=locs, host_cache=host,
        device_buffer=dev, top_k_device_locs=out, req_pool_indices=torch.arange(r), seq_lens=torch.full((r,), seq_len),
        lru_slots=torch.stack([torch.randperm(hot, generator=g) for _ in range(r)]).to(torch.int16),
        num_real_reqs=torch.tensor([r], dtype=torch.int32), item_size_bytes=item)
    newest = pick == seq_len - 1
    src = (torch.arange(r).view(r, 1) * seq_len + pick)[~newest]
    assert torch.equal(dev_rows[out[~newest].long()], host_rows[src])
    assert torch.equal(out[newest], locs[:, hot].view(r, 1).expand(r, k)[newest])
    assert stats.total_misses + stats.total_hits + stats.total_newest_hits == r * k
    assert stats.total_misses > 0 and stats.total_hits > 0


# ---- (e) bad inputs: InputError naming the argument, raised before anything is written ----------

def _set(**changes):
    return lambda w, kw: kw.update(changes)


BAD_INPUTS = {
    "top_k dtype": (lambda w, kw: kw.update(top_k_tokens=kw["top_k_tokens"].long()), ["top_k_tokens", "int32"]),
    "top_k inner stride": (_set(top_k_tokens=torch.tensor([[4, 0, 6, 0, 7, 0]], dtype=torch.int32)[:, ::2]), ["top_k_tokens"]),
    "hot < top_k": (_set(top_k_tokens=torch.arange(5, dtype=torch.int32).view(1, 5)), ["lru_slots", "top_k=5"]),
    "hot > int16": (_set(lru_slots=torch.zeros(2, 32768, dtype=torch.int16)), ["lru_slots", "32767"]),
    "lru dtype": (lambda w, kw: kw.update(lru_slots=w.lru.int()), ["lru_slots", "int16"]),
    "page_size vs width": (_set(page_size=2), ["device_buffer_tokens"]),
    "page_size 0": (_set(page_size=0), ["page_size"]),
    "locs row stride": (lambda w, kw: kw.update(device_buffer_locs=torch.cat([w.locs, w.locs], 1)[:, :5]), ["device_buffer_locs", "row stride"]),
    "host locs dtype": (lambda w, kw: kw.update(host_cache_locs=w.hcl.int()), ["host_cache_locs", "int64"]),
    "host locs strided": (lambda w, kw: kw.update(host_cache_locs=torch.cat([w.hcl, w.hcl], 1)[:, :32]), ["host_cache_locs", "contiguous"]),
    "out shape": (_set(top_k_device_locs=torch.zeros(1, 2, dtype=torch.int32)), ["top_k_device_locs"]),
    "rid dtype": (_set(req_pool_indices=torch.zeros(1)), ["req_pool_indices"]),
    "seq_lens shape": (_set(seq_lens=torch.tensor([8, 8])), ["seq_lens"]),
    "num_real dtype": (_set(num_real_reqs=torch.tensor([1])), ["num_real_reqs", "int32"]),
    "item size 0": (_set(item_size_bytes=0), ["item_size_bytes"]),
    "item size bool": (_set(item_size_bytes=True), ["item_size_bytes"]),
    "device buffer < 1 item": (_set(device_buffer=torch.zeros(7, dtype=torch.uint8)), ["device_buffer", "fewer than one item"]),
    "host cache strided": (lambda w, kw: kw.update(host_cache=w.host.t()), ["host_cache", "contiguous"]),
    "device mismatch": (lambda w, kw: kw.update(seq_lens=kw["seq_lens"].to("meta")), ["seq_lens", "must be on"]),
    "host cache device": (lambda w, kw: kw.update(host_cache=w.host.to("meta")), ["host_cache", "must be on"]),
    "partial plan": (_set(miss_dst=None), ["miss_src, miss_dst, miss_count"]),
    "narrow plan": (_set(miss_src=torch.zeros(1, 2, dtype=torch.int64)), ["miss_src"]),
    "plan row strides": (_set(miss_dst=torch.zeros(1, 6, dtype=torch.int32)[:, :3]), ["miss_dst", "row stride"]),
    # content contract (long path unless stated)
    "duplicate top-k": (_set(top_k_tokens=torch.tensor([[4, 4, 7]], dtype=torch.int32)), ["top_k_tokens", "row 0", "unique", "repeats token 4"]),
    "top-k >= seq_len": (_set(top_k_tokens=torch.tensor([[4, 8, 7]], dtype=torch.int32)), ["top_k_tokens", "row 0", "got 8"]),
    "top-k -2 when long": (_set(top_k_tokens=torch.tensor([[4, -2, 7]], dtype=torch.int32)), ["top_k_tokens", "-1 (padding)", "got -2"]),
    "miss without host row": (lambda w, kw: w.hcl.__setitem__((0, 6), -1), ["host_cache_locs", "token 6", "got -1"]),
    "host row past host_cache": (lambda w, kw: w.hcl.__setitem__((0, 6), 64), ["host_cache_locs", "host_rows=64", "got 64"]),
    "rid out of range": (_set(req_pool_indices=torch.tensor([2])), ["req_pool_indices", "row 0", "got 2"]),
    "num_real > batch": (_set(num_real_reqs=torch.tensor([2], dtype=torch.int32)), ["num_real_reqs", "got 2"]),
    "lru not a permutation": (lambda w, kw: w.lru.__setitem__(0, torch.tensor([0, 0, 2, 3])), ["lru_slots", "row 0", "permutation"]),
    "token resident twice": (lambda w, kw: w.tokens.__setitem__((0, 1), 2), ["device_buffer_tokens", "token 2"]),
    "device row past buffer": (lambda w, kw: w.locs.__setitem__((0, 1), 1000), ["device_buffer_locs", "slot 1", "got 1000"]),
    "fast token past table": (_set(top_k_tokens=torch.tensor([[9, 0, 1]], dtype=torch.int32), seq_lens=torch.tensor([3])), ["top_k_tokens", "hot_buffer_size + page_size=", "got 9"]),
    "fast entry past a short context": (_set(top_k_tokens=torch.tensor([[1, -1, 0]], dtype=torch.int32), seq_lens=torch.tensor([2])), ["top_k_tokens", "from index 2 on must be -1", "entry 2 is 0"]),
    "fast duplicate": (_set(top_k_tokens=torch.tensor([[1, 1, -1]], dtype=torch.int32), seq_lens=torch.tensor([3])), ["top_k_tokens", "repeats token 1"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_raises_input_error_naming_the_argument(case):
    mutate, words = BAD_INPUTS[case]
    w = World(num_req_slots=2)
    kw = w.kwargs([[4, 2, 6]], [8], plan=True)  # valid: hits 4, 2 and a miss on 6
    mutate(w, kw)
    snap, outputs = w.snapshot(), [t.clone() for t in (kw["top_k_device_locs"], kw["miss_count"]) if t is not None]
    with pytest.raises(InputError) as err:
        swap_single_step(**kw)
    for word in words:
        assert word in str(err.value)
    assert w.unchanged_since(snap)
    assert all(torch.equal(a, b) for a, b in zip(outputs, (kw["top_k_device_locs"], kw["miss_count"])))


# Tensors the kernel writes row by row: an expanded view passes the shape and inner-stride checks, and
# then two rows' writes land on one location (on the GPU a race, here torch's in-place error).
SHARED_ROWS = {
    "top_k_device_locs": ("top_k_device_locs", "rows overlap"),
    "miss_src": ("miss_src", "rows overlap"),
    "miss_dst": ("miss_dst", "rows overlap"),
    "miss_count": ("miss_count", "must be contiguous"),
}


@pytest.mark.parametrize("name", list(SHARED_ROWS))
def test_a_written_tensor_whose_rows_share_memory_is_rejected_before_any_write(name):
    w = World(num_req_slots=2)
    control = w.kwargs([[4, 2, 6], [4, 2, 6]], [8, 8], plan=True)
    swap_single_step(**control)  # the same call with distinct rows runs
    w = World(num_req_slots=2)
    kw = w.kwargs([[4, 2, 6], [4, 2, 6]], [8, 8], plan=True)
    kw[name] = kw[name][:1].expand_as(kw[name])
    snap = w.snapshot()
    with pytest.raises(InputError) as err:
        swap_single_step(**kw)
    field, words = SHARED_ROWS[name]
    assert str(err.value).startswith(f"{field}: ") and words in str(err.value)
    assert w.unchanged_since(snap)


def test_slot_tables_shared_by_two_request_slots_are_rejected():
    w = World(num_req_slots=2)
    kw = w.kwargs([[4, 2, 6]], [8], plan=True)
    kw["device_buffer_tokens"] = w.tokens[:1].expand_as(w.tokens)
    kw["device_buffer_locs"] = w.locs[:1].expand_as(w.locs)
    with pytest.raises(InputError, match=r"^device_buffer_tokens: rows overlap in memory \(row stride 0, 5 elements a row\)"):
        swap_single_step(**kw)


def test_two_long_rows_may_not_share_a_request_slot():
    w = World(num_req_slots=2)
    with pytest.raises(InputError, match="req_pool_indices: rows 0 and 1 both swap request slot 0"):
        w.call([[4, 6, 7], [2, 1, 7]], [8, 8], rids=[0, 0])
