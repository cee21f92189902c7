"""CPU tests of the multi-step swap reference: the nine spec scenarios of docs/semantics.md §6.1 (at full
size: HOT 4096, page 64, 4 steps x top-k 2048, 576-byte items), expected values worked out by hand
from §3.5-§3.9, plus the shared argument validation.

Layout (hisparse.kernels.scenarios): request slot 0 owns device rows 0.. : hot slot j is row
j, extra-page slot 4096+p is row 4096+p, scratch row i is row 4160+i; host row of token t is t when
every position has a host row. Item words: t * 1_000_003 + w.
"""
from __future__ import annotations

import pytest
import torch

from _topk import within_contract

from hisparse.errors import InputError
from hisparse.kernels.reference.bytes import as_rows
from hisparse.kernels.reference.copy_planned import copy_planned
from hisparse.kernels.reference.invariants import check_multi_step, snapshot
from hisparse.kernels.reference.swap_multi import swap_multi_step
from hisparse.kernels.scenarios import (EXTRA_PAGE_DRAFT_OFFSETS, build_case, glm52_native_context_case,
                                                 speculative_extra_page_case, token_words)
from hisparse.kernels.state import new_multi_step_state

HOT, PAGE, S, K, WORDS = 4096, 64, 4, 2048, 72
M32 = 1 << 32


def _top_k(per_step: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([t.to(torch.int32) for t in per_step]).unsqueeze(0)


def _out(case) -> torch.Tensor:
    return case.kwargs["top_k_device_locs"]


def _data_matches(case, b: int = 0) -> bool:
    """device_buffer[out] == token words for every entry of row b (all entries resolved)."""
    out = _out(case)[b].reshape(-1).to(torch.int64)
    tok = case.kwargs["top_k_tokens"][b].reshape(-1)
    return bool((out >= 0).all()) and torch.equal(case.kwargs["device_buffer"][out], token_words(tok, case.words))


def _rolled_hits(s: int, n: int) -> torch.Tensor:
    """Benchmark hit pattern: roll(arange(4096), 137*s)[:n], i.e. (i - 137 s) mod 4096."""
    return torch.roll(torch.arange(HOT), 137 * s)[:n]


def _run_checked(case):
    before = snapshot(case.kwargs)
    stats = swap_multi_step(**case.kwargs)
    after = snapshot(case.kwargs)
    assert check_multi_step(inputs=case.kwargs, before=before, after=after) == []
    return stats


# ---- §6.1 scenario 1: dedup of misses repeated in all steps --------------------------------------

def test_deduplicates_repeated_misses_and_copies_full_items():
    step = torch.cat([torch.arange(1852), 4096 + torch.arange(196)])
    case = build_case(_top_k([step] * 4), torch.full((S,), 8192), hot=HOT, page=PAGE, max_len=8192)
    stats = _run_checked(case)
    out = _out(case)[0]
    assert _data_matches(case)
    assert int(case.state.counters[0, 0]) == 196
    for s in range(S):  # same loc in every step: hits at their identity row, miss u at scratch row u
        assert torch.equal(out[s, :1852], torch.arange(1852, dtype=torch.int32))
        assert torch.equal(out[s, 1852:], (4160 + torch.arange(196)).to(torch.int32))
    r = stats.requests[0]
    assert (r.unique_misses, r.union_hits, r.mode, r.rotated, r.direct) == (196, 1852, "union", 196, 0)
    assert r.copied_bytes == 196 * 576
    # Commit by hand (§3.7.4, union mode, the oldest unprotected slots): epoch 1, cursor 0, 196 misses;
    # slots 0..1851 are protected hits, every other slot has age 1, so the tie goes by ring order from
    # the cursor: the first 196 unprotected slots, 1852..2047, handed to misses 0..195 in that order.
    dbt, dbl = case.kwargs["device_buffer_tokens"][0], case.kwargs["device_buffer_locs"][0]
    victims = 1852 + torch.arange(196)
    assert torch.equal(dbt[victims], (4096 + torch.arange(196)).to(torch.int32))
    assert torch.equal(dbl[victims], (4160 + torch.arange(196)).to(torch.int32))  # rotated in, no copy
    assert torch.equal(case.state.scratch_locs[0, :196], victims.to(torch.int32))  # evicted rows -> scratch
    assert case.state.clock[0].tolist() == [1, 196]
    assert case.state.counters[0, 1:3].tolist() == [0, 0]


# ---- §6.1 scenarios 2 and 3: 782 cross-step unique misses, union plan ----------------------------

def _cross_step_case(record_plan: bool):
    misses = (196, 196, 195, 195)
    start = [4096 + sum(misses[:s]) for s in range(S)]
    steps = [torch.cat([_rolled_hits(s, K - m), start[s] + torch.arange(m)]) for s, m in enumerate(misses)]
    return build_case(_top_k(steps), torch.full((S,), 8192), hot=HOT, page=PAGE, max_len=8192,
                      record_plan=record_plan)


def test_copies_782_cross_step_unique_misses():
    case = _cross_step_case(record_plan=False)
    stats = _run_checked(case)
    assert _data_matches(case)
    assert int(case.state.counters[0, 0]) == 782
    # hit union = [0, 1851] u [3685, 4095] = 2263 slots; 2263 + 782 <= 4096: union mode
    r = stats.requests[0]
    assert (r.unique_misses, r.union_hits, r.mode, r.overflow) == (782, 2263, "union", False)
    out = _out(case)[0]
    assert torch.equal(out[3, K - 195:], (4160 + 587 + torch.arange(195)).to(torch.int32))  # u = token - 4096


def test_records_union_plan_for_shared_layer_io():
    case = _cross_step_case(record_plan=True)
    _run_checked(case)
    kw = case.kwargs
    assert int(kw["miss_count"][0]) == 782
    assert torch.equal(kw["miss_src"][0, :782], 4096 + torch.arange(782))  # host row of token t is t
    assert torch.equal(kw["miss_dst"][0, :782], (4160 + torch.arange(782)).to(torch.int32))  # scratch rows
    fresh = torch.zeros_like(kw["device_buffer"])
    copy_planned(miss_src=kw["miss_src"], miss_dst=kw["miss_dst"], miss_count=kw["miss_count"],
                 num_real_reqs=kw["num_real_reqs"], host_cache=kw["host_cache"], device_buffer=fresh,
                 item_size_bytes=576)
    dst = kw["miss_dst"][0, :782].to(torch.int64)
    assert torch.equal(fresh[dst], kw["host_cache"][kw["miss_src"][0, :782]])
    assert torch.equal(fresh[dst], kw["device_buffer"][dst])


# ---- §6.1 scenario 4: padding row ------------------------------------------------------------------

def test_padded_request_clears_stale_plan_count():
    step = torch.cat([torch.arange(2000), 4096 + torch.arange(48)])
    top_k = torch.stack([_top_k([step] * 4)[0]] * 2)
    case = build_case(top_k, torch.full((2 * S,), 8192), hot=HOT, page=PAGE, max_len=8192,
                      num_real=1, record_plan=True)
    kw = case.kwargs
    kw["miss_count"].fill_(123)
    state_before = case.state.clone()
    _run_checked(case)
    assert kw["miss_count"].tolist() == [48, 0]
    assert bool((kw["top_k_device_locs"][1] == -1).all())  # our convention (upstream wrote 0)
    for name, t in state_before.tensors().items():
        assert torch.equal(t[1], getattr(case.state, name)[1]), name


# ---- §6.1 scenario 5: draft tokens in the extra page -----------------------------------------------

def test_resolves_all_speculative_extra_page_slots_without_host_io():
    offsets = EXTRA_PAGE_DRAFT_OFFSETS
    case = speculative_extra_page_case(steps=S, top_k=K, hot=HOT, page=PAGE)
    stats = _run_checked(case)
    out = _out(case)[0]
    assert out[:, K - 1].tolist() == [HOT + o for o in offsets]  # extra-page slot rows
    assert torch.equal(out[:, :K - 1], torch.arange(K - 1, dtype=torch.int32).expand(S, K - 1))
    assert int(case.state.counters[0, 0]) == 0
    assert (stats.requests[0].tail_hits, stats.requests[0].copied_bytes) == (4, 0)


# ---- §6.1 scenario 6: full union overflow ----------------------------------------------------------

def test_full_union_overflow_preserves_all_8192_outputs():
    top_k = (4096 + torch.arange(S * K, dtype=torch.int32)).reshape(1, S, K)
    case = build_case(top_k, torch.full((S,), 4096 + S * K), hot=HOT, page=PAGE, max_len=4096 + S * K,
                      capacity=4096, record_plan=True)
    stats = _run_checked(case)
    kw = case.kwargs
    out = _out(case)[0].reshape(-1).to(torch.int64)
    assert bool((out >= 0).all()) and torch.unique(out).numel() == 8192
    assert _data_matches(case)
    assert int(case.state.counters[0, 0]) == 8192 and int(kw["miss_count"][0]) == 8192
    assert bool((kw["miss_src"][0] >= 0).all()) and bool((kw["miss_dst"][0] >= 0).all())
    # By hand: 8192 misses > capacity 4096 (overflow), 8192 + 0 hits > HOT (approximate mode),
    # budget = max(0, 4096 - 0 - 4096) = 0. u < 4096 stay in scratch row u; u >= 4096 are direct:
    # victim = ((u - 4096) * 2654435761 + epoch 1) mod 2^32 mod 4096 (a bijection for HOT = 2^12).
    u = torch.arange(4096, 8192)
    victims = ((u - 4096) * 2654435761 + 1) % M32 % HOT
    assert torch.equal(out[:4096], 4160 + torch.arange(4096))
    assert torch.equal(out[4096:], victims)  # hot slot j is row j
    r = stats.requests[0]
    assert (r.mode, r.overflow, r.direct, r.rotated) == ("approx", True, 4096, 0)
    assert torch.equal(kw["device_buffer_tokens"][0, victims], (4096 + u).to(torch.int32))


# ---- §6.1 scenario 7: GLM-5.2 native context (tokens above 2^20) -----------------------------------

def test_packed_ring_supports_glm52_native_context_length():
    case = glm52_native_context_case(steps=S, top_k=K, hot=HOT, page=PAGE)
    first = _run_checked(case)
    assert first.requests[0].unique_misses == 29 and first.requests[0].mode == "union"
    assert _data_matches(case)
    out1 = _out(case).clone()
    second = _run_checked(case)
    assert int(case.state.counters[0, 0]) == 0 and second.requests[0].unique_misses == 0
    assert torch.equal(_out(case), out1)  # found through the hash: same rows


# ---- §6.1 scenario 8: repeated calls (graph replay) keep valid locations ---------------------------

def test_repeated_calls_preserve_valid_locations():
    misses = (164, 102, 61, 20)
    steps = [torch.cat([torch.arange(K - m), 8192 + 2048 * s + torch.arange(m)]) for s, m in enumerate(misses)]
    host = torch.zeros((1, 65536), dtype=torch.bool)
    host[0, :K] = True
    for s, m in enumerate(misses):
        host[0, 8192 + 2048 * s:8192 + 2048 * s + m] = True
    case = build_case(_top_k(steps), torch.arange(65533, 65537), hot=HOT, page=PAGE, max_len=65536,
                      host_tokens=host)
    counts = []
    for _ in range(5):  # one eager call, then the four "replays"
        _out(case).fill_(-1)
        _run_checked(case)
        assert bool((_out(case) >= 0).all()) and _data_matches(case)
        counts.append(int(case.state.counters[0, 0]))
    assert counts == [347, 0, 0, 0, 0]  # 164+102+61+20 unique; union mode keeps them all resident


# ---- §6.1 scenario 9 (our ranges: 1..4 steps, steps*top_k <= 8192) ---------------------------------

def _minimal_case(steps: int, top_k: int, hot: int = 64):
    top_k_tokens = torch.arange(steps * top_k, dtype=torch.int32).reshape(1, steps, top_k)
    return build_case(top_k_tokens, torch.full((steps,), 4 * hot), hot=hot, page=4, max_len=4 * hot, words=2)


def test_rejects_five_steps_naming_steps():
    case = _minimal_case(4, 16)
    case.kwargs["top_k_tokens"] = torch.zeros((1, 5, 16), dtype=torch.int32)
    with pytest.raises(InputError, match=r"steps: must be in \[1, 4\], got 5"):
        swap_multi_step(**case.kwargs)


def test_rejects_steps_times_top_k_above_8192():
    case = _minimal_case(4, 16)
    case.kwargs["top_k_tokens"] = torch.zeros((1, 4, 4096), dtype=torch.int32)
    with pytest.raises(InputError, match=r"steps\*top_k: must be <= 8192, got 4\*4096=16384"):
        swap_multi_step(**case.kwargs)


def test_single_step_call_works():
    step = torch.cat([torch.arange(1000), 4096 + torch.arange(1048)])
    case = build_case(_top_k([step]), torch.tensor([8192]), hot=HOT, page=PAGE, max_len=8192)
    stats = _run_checked(case)
    assert _data_matches(case)
    assert stats.requests[0].unique_misses == 1048 and int(case.state.counters[0, 0]) == 1048


# ---- small cases worked out by hand ---------------------------------------------------------------

def test_small_union_case_by_hand():
    """HOT 8, page 2, 2 steps x 4, capacity 8. Slot j holds token j at row j; extra-page slot 8
    holds token 20 (row 8); token 15 has no host row; seq_len 21 in both steps.
    step 0 [3, 20, 15, 12]: 3 hot hit (row 3); 20 >= 21-2 found in the extra page (row 8); 15 not
    resident and not on host (-1, not counted); 12 miss u=0 -> scratch row 0 = row 10.
    step 1 [12, -1, -1, 13]: 12 same row 10; -1 padding (twice: -1 may repeat); 13 miss u=1 -> row 11.
    Commit: 2 misses + 1 hit <= 8, union CLOCK, epoch 1, cursor 0. cidx 0 samples slots 0,2,4,6,
    cidx 1 slots 1,3,5,7 (partition size 4); all unprotected with age 1 -> victims 0 and 1."""
    tail = torch.tensor([[20, -1]], dtype=torch.int32)
    host = torch.ones((1, 32), dtype=torch.bool)
    host[0, 15] = False
    top_k = torch.tensor([[[3, 20, 15, 12], [12, -1, -1, 13]]], dtype=torch.int32)
    case = build_case(top_k, torch.tensor([21, 21]), hot=8, page=2, max_len=32, words=3, tail_tokens=tail,
                      host_tokens=host, record_plan=True)
    stats = _run_checked(case)
    kw = case.kwargs
    assert _out(case).tolist() == [[[3, 8, -1, 10], [10, -1, -1, 11]]]
    r = stats.requests[0]
    assert (r.unique_misses, r.union_hits, r.tail_hits, r.host_missing, r.mode) == (2, 1, 1, 1, "union")
    assert kw["device_buffer_tokens"][0].tolist() == [12, 13, 2, 3, 4, 5, 6, 7, 20, -1]
    assert kw["device_buffer_locs"][0].tolist() == [10, 11, 2, 3, 4, 5, 6, 7, 8, 9]
    assert case.state.scratch_locs[0].tolist() == [0, 1, 12, 13, 14, 15, 16, 17]
    assert case.state.clock[0].tolist() == [1, 2] and case.state.counters[0].tolist() == [2, 0, 0, 0]
    assert kw["miss_count"].tolist() == [2]
    assert kw["miss_src"][0, :2].tolist() == [12, 13]  # host rows number positions that have one: row t below 15
    assert kw["miss_dst"][0, :2].tolist() == [10, 11]
    assert case.state.ref_epochs[0].tolist() == [1, 1, 0, 1, 0, 0, 0, 0]
    # tokens 12 and 13 are not in their identity slot: they are found through the cuckoo banks
    _out(case).fill_(-1)
    again = _run_checked(case)
    assert _out(case).tolist() == [[[3, 8, -1, 10], [10, -1, -1, 11]]]
    assert again.requests[0].unique_misses == 0 and case.state.clock[0].tolist() == [2, 2]


def test_small_approximate_case_by_hand():
    """HOT 4, page 1, 2 steps x 4, capacity 4. Step 0 hits every slot, step 1 brings 4 new tokens:
    4 misses + 4 hits > 4 -> approximate mode, no overflow (4 <= 4): refs cleared, budget 4, the
    last step's misses u=0..3 all admitted. Probe (u*2654435761 + 1) mod 2^32 mod 4 = (u + 1) mod 4
    (2654435761 = 1 mod 4): miss u rotates into slot (u+1)%4 with scratch row u = row 5+u."""
    top_k = torch.tensor([[[0, 1, 2, 3], [4, 5, 6, 7]]], dtype=torch.int32)
    case = build_case(top_k, torch.tensor([16, 16]), hot=4, page=1, max_len=16, words=2)
    stats = _run_checked(case)
    assert _out(case).tolist() == [[[0, 1, 2, 3], [5, 6, 7, 8]]]
    r = stats.requests[0]
    assert (r.mode, r.overflow, r.rotated, r.direct) == ("approx", False, 4, 0)
    kw = case.kwargs
    assert kw["device_buffer_tokens"][0, :4].tolist() == [7, 4, 5, 6]
    assert kw["device_buffer_locs"][0, :4].tolist() == [8, 5, 6, 7]
    assert case.state.scratch_locs[0].tolist() == [1, 2, 3, 0]  # step 0's rows: intact for this call
    assert _data_matches(case)


def test_failed_cuckoo_insert_degrades_to_linear_scan():
    """Both banks full of stale live entries: every insert kicks 64 times and fails, so the request
    is flagged degraded (counters[:,3] bit 0); lookups then scan the slots linearly and still find
    the admitted tokens on the next call."""
    top_k = torch.tensor([[[0, 1, 40, 41], [2, 3, 42, 43]]], dtype=torch.int32)
    case = build_case(top_k, torch.tensor([64, 64]), hot=8, page=1, max_len=64, words=2)
    stale = (0 << 32) | 1000  # token 1000 in slot 0: never true, but occupies the bucket
    case.state.hash_index.fill_(stale)
    stats = _run_checked(case)
    assert stats.requests[0].degraded and int(case.state.counters[0, 3]) & 1 == 1
    out1 = _out(case).clone()
    again = _run_checked(case)
    assert again.requests[0].unique_misses == 0 and torch.equal(_out(case), out1)


# ---- HOT not a power of two at full size ---------------------------------------------------------

@pytest.mark.parametrize("distinct_misses", [6000, 8192])
def test_hot_6144_overflow_claims_every_victim_once(distinct_misses):
    """HOT 6144: T = 8192, default capacity max(1024, 8192 - 6144) = 2048. The approximate probe
    (linear * 2654435761 + epoch) % 6144 collides for non-powers of two: claimed slots are skipped,
    so no slot is given to two misses and every output stays distinct and correct."""
    hot, hits = 6144, S * K - distinct_misses
    tokens = torch.cat([torch.arange(hits), hot + torch.arange(distinct_misses)])
    top_k = tokens[torch.randperm(S * K, generator=torch.Generator().manual_seed(1))].reshape(1, S, K)
    case = build_case(top_k, torch.full((S,), 16384), hot=hot, page=PAGE, max_len=16384, capacity=2048,
                      record_plan=True)
    stats = _run_checked(case)
    out = _out(case)[0].reshape(-1)
    assert _data_matches(case)
    assert torch.unique(out).numel() == S * K  # all tokens distinct
    r = stats.requests[0]
    assert (r.unique_misses, r.union_hits, r.mode, r.overflow) == (distinct_misses, hits, "approx", True)
    assert r.direct == distinct_misses - 2048  # every overflow miss found a victim


# ---- argument validation ---------------------------------------------------------------------------

def _set(name, value):
    return lambda kw: kw.__setitem__(name, value(kw) if callable(value) else value)


BAD_INPUTS = [
    ("top_k_tokens int64", _set("top_k_tokens", lambda kw: kw["top_k_tokens"].long()), r"top_k_tokens: dtype must be int32"),
    ("top_k_tokens 2-d", _set("top_k_tokens", lambda kw: kw["top_k_tokens"][:, 0]), r"top_k_tokens: must have 3 dimensions"),
    ("seq_lens per request", _set("seq_lens", torch.tensor([256])), r"seq_lens: dimension 0 must be 4"),
    ("seq_lens float", _set("seq_lens", torch.full((4,), 256.0)), r"seq_lens: dtype must be int32 or int64"),
    ("req_pool_indices int16", _set("req_pool_indices", torch.tensor([0], dtype=torch.int16)), r"req_pool_indices: dtype must be int32 or int64"),
    ("num_real_reqs int64", _set("num_real_reqs", torch.tensor([1])), r"num_real_reqs: dtype must be int32"),
    ("num_real_reqs > batch", _set("num_real_reqs", torch.tensor([2], dtype=torch.int32)), r"num_real_reqs: must be in \[0, 1\]"),
    ("request slot out of range", _set("req_pool_indices", torch.tensor([1])), r"req_pool_indices: real rows must be in \[0, 1\)"),
    ("output int64", _set("top_k_device_locs", torch.zeros((1, 4, 16), dtype=torch.int64)), r"top_k_device_locs: dtype must be int32"),
    ("output shape", _set("top_k_device_locs", torch.zeros((1, 4, 8), dtype=torch.int32)), r"top_k_device_locs: dimension 2 must be 16"),
    ("no extra page", _set("device_buffer_tokens", lambda kw: kw["device_buffer_tokens"][:, :64].contiguous()), r"device_buffer_tokens: .*page_size >= 1"),
    ("locs shape", _set("device_buffer_locs", lambda kw: kw["device_buffer_locs"][:, :66].contiguous()), r"device_buffer_locs: dimension 1 must be 68"),
    ("host_cache_locs int32", _set("host_cache_locs", lambda kw: kw["host_cache_locs"].int()), r"host_cache_locs: dtype must be int64"),
    ("host row outside host_cache", lambda kw: kw["host_cache_locs"].__setitem__((0, 3), 10**6), r"host_cache_locs: row 1000000 of token 3"),
    ("token beyond host_cache_locs", _set("seq_lens", torch.full((4,), 10**6)), None),
    ("device row outside buffer", lambda kw: kw["device_buffer_locs"].__setitem__((0, 5), 10**6), r"device_buffer_locs: row 1000000"),
    ("scratch row outside buffer", lambda kw: kw["state"].scratch_locs.__setitem__((0, 0), 10**6), r"state.scratch_locs: row 1000000"),
    ("plan incomplete", _set("miss_src", torch.zeros((1, 64), dtype=torch.int64)), r"miss_src, miss_dst, miss_count: pass all three"),
    ("item_size_bytes 0", _set("item_size_bytes", 0), r"item_size_bytes: must be in \[1, inf\]"),
    ("pdl string", _set("pdl", "on"), r"pdl: must be None \(auto\), True or False"),
    ("state of another shape", _set("state", lambda kw: new_multi_step_state(1, 2, 16, 64, scratch_locs=torch.zeros((1, 32), dtype=torch.int32))),
     r"state: made for steps=2, top_k=16; this call has steps=4, top_k=16"),
    ("state not a state", _set("state", {}), r"state: expected a hisparse.kernels.state.MultiStepState"),
]


@pytest.mark.parametrize("label,mutate,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_inputs_raise_input_error_naming_the_argument(label, mutate, message):
    case = _minimal_case(4, 16)
    mutate(case.kwargs)
    if message is None:  # the token's position lies beyond host_cache_locs' 256 columns
        message = r"top_k_tokens: valid token 256 .* beyond host_cache_locs.shape\[1\]=256"
        case.kwargs["top_k_tokens"][0, 0, 0] = 256
    with pytest.raises(InputError, match=message):
        swap_multi_step(**case.kwargs)


def test_plan_too_narrow_names_miss_src():
    case = _minimal_case(4, 16)
    case.kwargs.update(miss_src=torch.zeros((1, 63), dtype=torch.int64), miss_dst=torch.zeros((1, 64), dtype=torch.int32),
                       miss_count=torch.zeros(1, dtype=torch.int32))
    with pytest.raises(InputError, match=r"miss_src: dimension 1 must be >= 64"):
        swap_multi_step(**case.kwargs)


def test_duplicate_request_slots_rejected():
    top_k = torch.arange(128, dtype=torch.int32).reshape(2, 4, 16)
    case = build_case(top_k, torch.full((8,), 256), hot=64, page=4, max_len=256, words=2, num_req_slots=2,
                      req_pool_indices=torch.tensor([1, 1]))
    with pytest.raises(InputError, match=r"req_pool_indices: real rows must name distinct request slots"):
        swap_multi_step(**case.kwargs)


def test_bad_input_leaves_everything_untouched():
    case = _minimal_case(4, 16)
    case.kwargs["host_cache_locs"][0, 3] = 10**6
    before = {k: v.clone() for k, v in case.kwargs.items() if isinstance(v, torch.Tensor)}
    state = case.state.clone()
    with pytest.raises(InputError):
        swap_multi_step(**case.kwargs)
    for k, v in before.items():
        assert torch.equal(v, case.kwargs[k]), k
    for k, v in state.tensors().items():
        assert torch.equal(v, getattr(case.state, k)), k


# ---- property tests: random workloads, the invariant checker finds nothing ------------------------

from dataclasses import dataclass  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@dataclass(frozen=True)
class Workload:
    hot: int
    top_k: int
    steps: int
    page: int
    slots: int
    batch: int
    num_real: int
    capacity: int
    max_len: int
    calls: int
    record_plan: bool
    miss_heavy: bool  # few resident picks: pushes the union past HOT (approximate mode, overflow)
    seed: int


@st.composite
def workloads(draw, big: bool = False) -> Workload:
    hot = draw(st.sampled_from([4, 5, 6, 7, 12, 16, 24, 40, 64, 96]))
    top_k = draw(st.integers(1, hot))  # T > HOT is common: approximate mode and overflow
    steps = draw(st.integers(1, 4))
    t = steps * top_k
    slots = draw(st.integers(1, 3))
    batch = draw(st.integers(1, slots))
    page = draw(st.integers(1, 8))
    lo = hot + page + 8
    max_len = (1 << 20) + draw(st.integers(64, 4096)) if big else draw(st.integers(lo, 4 * hot + 64))
    return Workload(
        hot=hot, top_k=top_k, steps=steps, page=page, slots=slots, batch=batch,
        num_real=draw(st.integers(0, batch)), capacity=draw(st.integers(max(1, t - hot), t)),
        max_len=max_len, calls=draw(st.integers(1, 3)), record_plan=draw(st.booleans()),
        miss_heavy=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)),
    )


def _randint(g, lo, hi, n=()):
    return torch.randint(lo, hi, n if isinstance(n, tuple) else (n,), generator=g)


def _initial_slots(g, w: Workload, seq: list[int]) -> torch.Tensor:
    """Identity layout with a random part replaced by recent positions, and some empty slots."""
    rows = []
    for rid in range(w.slots):
        row = torch.arange(w.hot)
        moved = torch.randperm(w.hot, generator=g)[: int(_randint(g, 0, w.hot + 1))]
        window = min(4 * w.hot, seq[rid] - w.hot)
        if window > 0:
            fresh = seq[rid] - window + torch.randperm(window, generator=g)[: moved.numel()]
            fresh = fresh[fresh >= w.hot]  # keep tokens distinct from the identity part
            row[moved[: fresh.numel()]] = fresh
        row[torch.rand(w.hot, generator=g) < 0.1] = -1
        rows.append(row)
    return torch.stack(rows).to(torch.int32)


def _tail_slots(g, w: Workload, seq: list[int]) -> torch.Tensor:
    """Draft tokens: positions just below the last step's seq_len, at random extra-page offsets."""
    tail = torch.full((w.slots, w.page), -1, dtype=torch.int32)
    for rid in range(w.slots):
        last = seq[rid] + w.steps - 1
        n = int(_randint(g, 0, min(w.page, last) + 1))  # distinct positions below `last`: at most `last`
        offsets = torch.randperm(w.page, generator=g)[:n]
        tail[rid, offsets] = (last - 1 - torch.randperm(min(w.page, last), generator=g)[:n]).to(torch.int32)
    return tail


def _draw_top_k(g, w: Workload, seq: list[int], rids: list[int], dbt: torch.Tensor) -> torch.Tensor:
    """Per entry one of: resident token, recent position, repeat of an earlier step's entry, draft
    token, padding (-1); then made to satisfy the top-k contract (tests/_topk.py: an entry out of
    range, past a short context or repeating one of its own step becomes -1)."""
    out = torch.empty((w.batch, w.steps, w.top_k), dtype=torch.int64)
    for b, rid in enumerate(rids):
        held = dbt[rid].to(torch.int64)
        held = held[held >= 0]
        for s in range(w.steps):
            L = seq[rid] + s
            kind = _randint(g, 0, 10, w.top_k)
            recent = L - 1 - _randint(g, 0, min(L, 4 * w.hot), w.top_k)
            pick = held[_randint(g, 0, max(held.numel(), 1), w.top_k)] if held.numel() else recent
            row = torch.where(kind < (1 if w.miss_heavy else 4), pick, recent)
            prev = out[b, :s].reshape(-1) if s else row
            row = torch.where(kind == 8, prev[_randint(g, 0, prev.numel(), w.top_k)], row)
            row = torch.where(kind == 9, -1, row)
            out[b, s] = within_contract(row, L)
    return out.to(torch.int32)


def _random_case(w: Workload):
    g = torch.Generator().manual_seed(w.seed)
    seq = [int(_randint(g, max(1, w.max_len // 4), w.max_len - w.steps + 2)) for _ in range(w.slots)]
    rids = torch.randperm(w.slots, generator=g)[: w.batch].tolist()
    slots = _initial_slots(g, w, seq)
    tail = _tail_slots(g, w, seq)
    host = torch.rand((w.slots, w.max_len), generator=g) >= 0.05  # some positions not on host
    seq_lens = torch.tensor([seq[r] + s for r in rids for s in range(w.steps)])
    dbt = torch.cat([slots, tail], dim=1)
    case = build_case(_draw_top_k(g, w, seq, rids, dbt), seq_lens, hot=w.hot, page=w.page, max_len=w.max_len,
                      num_req_slots=w.slots, req_pool_indices=torch.tensor(rids), capacity=w.capacity,
                      words=3, slot_tokens=slots, tail_tokens=tail, host_tokens=host, num_real=w.num_real,
                      record_plan=w.record_plan)
    return case, g, seq, rids


def _clone_kwargs(kw: dict) -> dict:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v.clone() if hasattr(v, "clone") else v) for k, v in kw.items()}


def _assert_reference_keeps_invariants(w: Workload) -> None:
    case, g, seq, rids = _random_case(w)
    for call in range(w.calls):
        if call:
            case.kwargs["top_k_tokens"] = _draw_top_k(g, w, seq, rids, case.kwargs["device_buffer_tokens"])
        twin = _clone_kwargs(case.kwargs)
        before = snapshot(case.kwargs)
        swap_multi_step(**case.kwargs)
        after = snapshot(case.kwargs)
        assert check_multi_step(inputs=case.kwargs, before=before, after=after) == [], (call, w)
        swap_multi_step(**twin)  # deterministic: same inputs, same everything
        for k, v in twin.items():
            if isinstance(v, torch.Tensor):
                assert torch.equal(v, case.kwargs[k]), k
        for k, v in twin["state"].tensors().items():
            assert torch.equal(v, getattr(case.state, k)), k


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_reference_keeps_invariants_on_random_workloads(w):
    _assert_reference_keeps_invariants(w)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(big=True))
def test_reference_keeps_invariants_above_2_pow_20(w):
    _assert_reference_keeps_invariants(w)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.integers(0, 2**31 - 1))
def test_checker_catches_an_entry_moved_to_a_foreign_row(w, pick):
    """On any workload, pointing one resolved entry at a spare (zeroed) row is reported."""
    case, _, _, _ = _random_case(w)
    before = snapshot(case.kwargs)
    swap_multi_step(**case.kwargs)
    out = case.kwargs["top_k_device_locs"]
    n = int(case.kwargs["num_real_reqs"][0])
    resolved = torch.nonzero(out[:n] >= 0)
    if resolved.numel() == 0:
        out[n:, 0, 0] = case.spare_row(0)  # nothing resolved: corrupt a padding row instead (if any)
        expect_any = n < w.batch
    else:
        b, s, k = resolved[pick % resolved.shape[0]].tolist()
        out[b, s, k] = case.spare_row(0)
        expect_any = True
    got = check_multi_step(inputs=case.kwargs, before=before, after=snapshot(case.kwargs))
    assert bool(got) == expect_any


# ---- the top-k contract both swaps share (docs/design.md; test_swap_single_reference.py has the
# single-step side of the same cases) ---------------------------------------------------------------
def _top_k_case(step1: list[int], seq_len: int = 256):
    """Two steps of top-k 4 at seq_len 256 (HOT 64): step 0 four fresh tokens, step 1 ``step1``."""
    top_k = torch.tensor([[[100, 101, 102, 103], step1]], dtype=torch.int32)
    return build_case(top_k, torch.tensor([seq_len, seq_len]), hot=64, page=4, max_len=256, words=2)


@pytest.mark.parametrize("step1,words", [
    ([110, 111, 110, 112], "row 0, step 1 repeats token 110"),
    ([110, 256, 111, 112], r"row 0, step 1 entry 1 must be -1 \(padding\) or a token in \[0, seq_len=256\), got 256"),
    ([110, -2, 111, 112], r"row 0, step 1 entry 1 .* got -2"),
], ids=["duplicate in a step", "token >= seq_len", "below -1"])
def test_top_k_contract_violations_are_rejected_before_anything_is_written(step1, words):
    case = _top_k_case(step1)
    before = {k: v.clone() for k, v in case.kwargs.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(InputError, match=f"top_k_tokens: {words}"):
        swap_multi_step(**case.kwargs)
    for k, v in before.items():
        assert torch.equal(v, case.kwargs[k]), k


def test_top_k_contract_short_context_puts_its_tokens_first():
    top_k = torch.tensor([[[0, 1, -1, -1], [0, 2, -1, 1]]], dtype=torch.int32)  # seq_len 3: index 3 must be -1
    case = build_case(top_k, torch.tensor([3, 3]), hot=64, page=4, max_len=256, words=2)
    with pytest.raises(InputError, match=r"row 0, step 1 has seq_len 3 < top_k, so its entries from index 3 on "
                                         r"must be -1 \(padding\); entry 3 is 1"):
        swap_multi_step(**case.kwargs)


def test_top_k_contract_padding_and_repeats_across_steps():
    """-1 may repeat and comes back -1 without counting; a token in two steps shares one row."""
    case = _top_k_case([100, -1, -1, 110])
    stats = _run_checked(case)
    out = _out(case)[0]
    assert out[1].tolist()[1:3] == [-1, -1] and out[1, 0] == out[0, 0]
    assert stats.requests[0].unique_misses == 5  # 100..103 and 110


# ---- §3.7.4: union-mode victims, the oldest unprotected slots ----------------------------------

def test_union_victims_are_the_oldest_slots_ties_in_ring_order_from_the_cursor():
    from hisparse.kernels.reference.clock import oldest_victims

    # epoch 10, cursor 5. Ages: slot 0 and 6 protected (ref == epoch), 1 / 3 / 7 age 7, 2 age 1,
    # 4 never referenced (age 10), 5 age 2. Three misses: slot 4, then two of the age-7 tie in ring
    # order 5, 6, 7, 0, 1, ...: 7 and 1; handed out in ring order: 7, 1, 4.
    ref = torch.tensor([10, 3, 9, 3, 0, 8, 10, 3], dtype=torch.int32)
    assert oldest_victims(ref, 10, 5, 3).tolist() == [7, 1, 4]
    # More misses than unprotected slots: all six, in ring order, then none.
    assert oldest_victims(ref, 10, 5, 9).tolist() == [5, 7, 1, 2, 3, 4, -1, -1, -1]
    # Ages of 63 calls and more tie (AGE_BUCKETS = 64): at epoch 100, ages 99 (slot 0) and 70
    # (slot 1) both count as 63, so ring order from cursor 1 takes slot 1 first; slot 2 (age 5) last.
    ref = torch.tensor([1, 30, 95], dtype=torch.int32)
    assert oldest_victims(ref, 100, 1, 1).tolist() == [1]
    assert oldest_victims(ref, 100, 1, 2).tolist() == [1, 0]


def test_union_mode_takes_the_partitioned_clock_above_hot_16384():
    from hisparse.kernels.reference.clock import union_mode_victims

    # Every slot age 1 (epoch 10, ref 9) but slot 3 (age 50) and slot 6666 (age 5); two misses,
    # cursor 0. The oldest slots are 3 and 6666, in ring order.
    def ref_of(hot: int) -> torch.Tensor:
        ref = torch.full((hot,), 9, dtype=torch.int32)
        ref[3] = (10 - 50) & 0x7FFFFFFF
        ref[6666] = 5
        return ref

    assert union_mode_victims(ref_of(16384), 10, 0, 2).tolist() == [3, 6666]
    # HOT 20000: miss 0 owns the even ring positions, 10000 of them, and samples linear
    # 0, 3332, 6666, 10000, 13332, 16666 (s * 10000 // 6 * 2): the oldest sample is 6666 (age 5).
    # Miss 1 owns the odd ones and samples 1, 3333, 6667, 10001, 13333, 16667. Slot 3 is not
    # among them, so every sample is age 1 and the first, slot 1, wins the tie.
    assert union_mode_victims(ref_of(20000), 10, 0, 2).tolist() == [6666, 1]
