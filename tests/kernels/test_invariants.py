"""The invariant checker: silent on correct results (including valid results the reference would
not produce), and each corruption of a correct result is reported as exactly that invariant, with
the right request and entry.

Base multi-step case (HOT 16, extra page 2, 2 steps x 6, capacity 12, batch 2 with row 1 padding):
slot j holds token j at row j, seq_len 40, every position has a host row (row t for token t).
  row 0, step 0: [1, 2, 30, 31, 20, -1]     step 1: [1, 30, 32, 3, 20, 5]
hot hits 1, 2, 3, 5 (rows 1, 2, 3, 5); misses 30, 31, 20, 32 (u = 0..3 by first occurrence, scratch
rows 18..21); 4 + 4 <= 16: union mode, so all eight tokens are resident afterwards.
"""
from __future__ import annotations

import torch

from hisparse.kernels.reference.invariants import check_multi_step, check_single_step, snapshot
from hisparse.kernels.reference.swap_multi import swap_multi_step
from hisparse.kernels.scenarios import build_case, token_words

HOT, PAGE, WORDS = 16, 2, 3
ROW0 = [[1, 2, 30, 31, 20, -1], [1, 30, 32, 3, 20, 5]]
UNION = {1, 2, 3, 5, 30, 31, 20, 32}


def _base_case():
    top_k = torch.tensor([ROW0, [[7, 8, 9, 10, 11, 12]] * 2], dtype=torch.int32)
    case = build_case(top_k, torch.full((4,), 40), hot=HOT, page=PAGE, max_len=64, words=WORDS,
                      num_req_slots=2, num_real=1, record_plan=True)
    before = snapshot(case.kwargs)
    swap_multi_step(**case.kwargs)
    return case, before


def _check(case, before):
    return check_multi_step(inputs=case.kwargs, before=before, after=snapshot(case.kwargs))


def _slot_of(case, token: int) -> int:
    return int(torch.nonzero(case.kwargs["device_buffer_tokens"][0, :HOT] == token)[0])


def _summary(violations):
    return {(v.invariant, v.request, v.entry) for v in violations}


def test_reference_result_is_clean():
    case, before = _base_case()
    assert _check(case, before) == []
    out = case.kwargs["top_k_device_locs"][0]
    assert out.tolist() == [[1, 2, 18, 19, 20, -1], [1, 18, 21, 3, 20, 5]]  # expected by hand


def test_other_valid_miss_assignment_is_clean():
    """A kernel may give the unique misses other scratch rows (atomicAdd order) and list the plan in
    another order: swap everything about misses 30 and 31 consistently -> still no violation."""
    case, before = _base_case()
    kw = case.kwargs
    out, dev, dbl = kw["top_k_device_locs"][0], kw["device_buffer"], kw["device_buffer_locs"]
    s30, s31 = _slot_of(case, 30), _slot_of(case, 31)
    r30, r31 = int(dbl[0, s30]), int(dbl[0, s31])
    out.copy_(torch.where(out == r30, r31, torch.where(out == r31, r30, out)))
    dbl[0, s30], dbl[0, s31] = r31, r30
    dev[[r30, r31]] = dev[[r31, r30]]
    src, dst = kw["miss_src"][0], kw["miss_dst"][0]
    dst[:2] = torch.tensor([r31, r30])  # u=0 is token 30, u=1 token 31
    src[:4], dst[:4] = src[:4].flip(0).clone(), dst[:4].flip(0).clone()  # plan order is free too
    assert _check(case, before) == []


def test_1_wrong_bytes_at_a_returned_row():
    case, before = _base_case()
    case.kwargs["device_buffer"][1, 0] += 1  # row of hot hit token 1, returned at (0,0) and (1,0)
    got = _check(case, before)
    assert _summary(got) == {("1", 0, (0, 0)), ("1", 0, (1, 0))}


def test_2_two_rows_for_one_token():
    case, before = _base_case()
    kw = case.kwargs
    spare = case.spare_row(0)
    kw["device_buffer"][spare] = token_words(torch.tensor([30]), WORDS)  # right bytes, second row
    kw["top_k_device_locs"][0, 1, 1] = spare  # token 30's second occurrence
    assert _summary(_check(case, before)) == {("2", 0, (1, 1))}


def test_3_wrong_counter():
    case, before = _base_case()
    case.state.counters[0, 0] += 1
    got = _check(case, before)
    assert _summary(got) == {("3", 0, None)} and "expected 4 unique misses" in got[0].detail


def test_3_padding_row_plan_count():
    case, before = _base_case()
    case.kwargs["miss_count"][1] = 123
    assert _summary(_check(case, before)) == {("3", 1, None)}


def test_4_plan_entry_wrong():
    case, before = _base_case()
    case.kwargs["miss_src"][0, 1] = 33  # u=1 is token 31: host row 31, not 33
    got = _summary(_check(case, before))
    assert {v[0] for v in got} == {"4"}
    assert ("4", 0, (1,)) in got  # the wrong entry
    assert ("4", 0, None) in got  # and token 31 now missing from the plan


def test_4_plan_data_wrong():
    case, before = _base_case()
    kw = case.kwargs
    spare = case.spare_row(0)
    kw["miss_dst"][0, 2] = spare  # token 20's entry pointing at a row it was not returned in
    got = _summary(_check(case, before))
    assert {v[0] for v in got} == {"4"} and ("4", 0, (2,)) in got


def test_5_a_row_duplicated_and_one_lost():
    case, before = _base_case()
    scratch = case.state.scratch_locs[0]
    lost, dup = int(scratch[0]), int(scratch[1])
    scratch[0] = dup
    assert _summary(_check(case, before)) == {("5", 0, (lost,)), ("5", 0, (dup,))}


def test_5_slot_outside_the_batch_touched():
    case, before = _base_case()
    case.state.ref_epochs[1, 0] = 7  # request slot 1 is only used by the padding row
    got = _check(case, before)
    assert _summary(got) == {("5", None, None)} and "state.ref_epochs row 1" in got[0].detail


def test_6_duplicate_resident_token():
    case, before = _base_case()
    tokens = case.kwargs["device_buffer_tokens"][0]
    a = max(j for j in range(HOT) if int(tokens[j]) not in UNION)  # a slot not needed by this call
    tokens[a] = 1  # token 1 also lives in slot 1
    assert _summary(_check(case, before)) == {("6", 0, (a,))}


def test_6_resident_token_not_findable():
    case, before = _base_case()
    s32 = _slot_of(case, 32)  # not in its identity slot: found only through a bank entry
    index = case.state.hash_index[0]
    index[(index >= 0) & ((index & 0xFFFFFFFF) == 32)] = -2
    assert _summary(_check(case, before)) == {("6", 0, (s32,))}


def test_7_union_token_not_resident():
    case, before = _base_case()
    case.kwargs["device_buffer_tokens"][0, _slot_of(case, 30)] = -1
    assert _summary(_check(case, before)) == {("7", 0, (0, 2))}  # token 30's first occurrence


def test_8_padding_row_not_minus_one():
    case, before = _base_case()
    case.kwargs["top_k_device_locs"][1, 0, 0] = 5
    assert _summary(_check(case, before)) == {("8", 1, (0, 0))}


def test_8_invalid_entry_given_a_row():
    case, before = _base_case()
    case.kwargs["top_k_device_locs"][0, 0, 5] = 4  # token -1
    assert _summary(_check(case, before)) == {("8", 0, (0, 5))}


def test_approximate_mode_last_step_hit_must_stay():
    """HOT 4: step 0 hits all slots, step 1 = [4,5,6,3]: 3 misses + 4 hits > 4, approximate mode;
    token 3 is a last-step hit, so it must still be resident after the call."""
    top_k = torch.tensor([[[0, 1, 2, 3], [4, 5, 6, 3]]], dtype=torch.int32)
    case = build_case(top_k, torch.tensor([16, 16]), hot=4, page=1, max_len=16, words=2)
    before = snapshot(case.kwargs)
    swap_multi_step(**case.kwargs)
    assert _check(case, before) == []
    case.kwargs["device_buffer_tokens"][0, 3] = -1
    assert _summary(_check(case, before)) == {("7", 0, (1, 3))}


def test_checker_handles_the_benchmark_shape():
    """Batch 64 x 4 steps x top-k 2048 (the benchmark shape), every check vectorised. No timing
    assertion (CI cores are shared); measured ~0.4 s for the check on an idle 2-core machine."""
    s_count, k, hot = 4, 2048, 4096
    step = [torch.cat([torch.roll(torch.arange(hot), 137 * s)[:1852], 4096 + 196 * s + torch.arange(196)]) for s in range(s_count)]
    top_k = torch.stack(step).to(torch.int32).unsqueeze(0).expand(64, s_count, k).contiguous()
    case = build_case(top_k, torch.full((64 * s_count,), 8192), hot=hot, page=64, max_len=8192, record_plan=True)
    before = snapshot(case.kwargs)
    swap_multi_step(**case.kwargs)
    case.kwargs["device_buffer"][case.hot_row(63, 5), 0] += 1  # one bad row in the last request
    got = check_multi_step(inputs=case.kwargs, before=before, after=snapshot(case.kwargs))
    # token 5 (hot slot 5) sits at k = 5 + 137 s in step s: roll(arange(4096), 137 s)[k] = k - 137 s
    assert _summary(got) == {("1", 63, (s, 5 + 137 * s)) for s in range(4)}


# ---- single step: docs/semantics.md §2.4 worked examples (HOT 4) --------------------------------------

def _single_inputs(query, seq_len, tokens):
    """slot tokens [1,4,2,5] at rows [9,7,3,5], newest-token slot (HOT) at row 11; host row t = t."""
    dev = torch.zeros((13, 2), dtype=torch.int64)
    for row, tok in zip([9, 7, 3, 5], tokens):
        dev[row] = token_words(torch.tensor([tok]), 2)[0]
    return dict(
        top_k_tokens=torch.tensor([query], dtype=torch.int32),
        device_buffer_tokens=torch.tensor([tokens + [7]], dtype=torch.int32),
        host_cache_locs=torch.arange(16).unsqueeze(0), device_buffer_locs=torch.tensor([[9, 7, 3, 5, 11]], dtype=torch.int32),
        host_cache=token_words(torch.arange(16), 2), device_buffer=dev,
        top_k_device_locs=torch.full((1, len(query)), -1, dtype=torch.int32),
        req_pool_indices=torch.tensor([0]), seq_lens=torch.tensor([seq_len]),
        lru_slots=torch.tensor([[0, 1, 2, 3]], dtype=torch.int16), num_real_reqs=torch.tensor([1], dtype=torch.int32),
        item_size_bytes=16, page_size=1,
    )


def _apply_example_1(kw):
    """Query [4, 2, 7], seq_len 8 -> out [7, 3, 11], lru [0, 3, 1, 2] (hits only, 7 is the newest)."""
    kw["top_k_device_locs"][0] = torch.tensor([7, 3, 11])
    kw["lru_slots"][0] = torch.tensor([0, 3, 1, 2])


def test_single_step_doc_example_is_clean():
    kw = _single_inputs([4, 2, 7], 8, [1, 4, 2, 5])
    before = snapshot(kw)
    _apply_example_1(kw)
    assert check_single_step(inputs=kw, before=before, after=snapshot(kw)) == []


def test_single_step_miss_example_is_clean_and_residency_checked():
    """From [1,4,2,5] with lru [0,3,1,2], query [6] -> out [9] (slot 0 evicted), tokens [6,4,2,5]."""
    kw = _single_inputs([6], 8, [1, 4, 2, 5])
    kw["lru_slots"][0] = torch.tensor([0, 3, 1, 2])
    before = snapshot(kw)
    kw["top_k_device_locs"][0, 0] = 9
    kw["device_buffer_tokens"][0, 0] = 6
    kw["device_buffer"][9] = token_words(torch.tensor([6]), 2)[0]
    kw["lru_slots"][0] = torch.tensor([3, 1, 2, 0])
    assert check_single_step(inputs=kw, before=before, after=snapshot(kw)) == []
    kw["device_buffer_tokens"][0, 0] = 1  # token 6 no longer resident
    assert _summary(check_single_step(inputs=kw, before=before, after=snapshot(kw))) == {("7", 0, (0,))}


def test_single_step_wrong_row_and_bad_lru():
    kw = _single_inputs([4, 2, 7], 8, [1, 4, 2, 5])
    before = snapshot(kw)
    _apply_example_1(kw)
    kw["top_k_device_locs"][0, 1] = 9  # token 2's entry pointing at token 1's row
    kw["lru_slots"][0] = torch.tensor([0, 3, 3, 2])
    got = _summary(check_single_step(inputs=kw, before=before, after=snapshot(kw)))
    assert ("1", 0, (1,)) in got and ("7", 0, None) in got


def test_single_step_fast_path_and_padding():
    kw = _single_inputs([0, 1, 3], 4, [0, 1, 2, 3])  # seq_len 4 <= HOT: direct indexing, slot t
    kw["top_k_tokens"] = torch.tensor([[0, 1, 3], [0, 1, 2]], dtype=torch.int32)
    kw["top_k_device_locs"] = torch.full((2, 3), -1, dtype=torch.int32)
    kw["req_pool_indices"] = torch.tensor([0, 0])
    kw["seq_lens"] = torch.tensor([4, 4])
    before = snapshot(kw)
    kw["top_k_device_locs"][0] = torch.tensor([9, 7, 5])
    assert check_single_step(inputs=kw, before=before, after=snapshot(kw)) == []
    kw["top_k_device_locs"][0, 2] = 3
    kw["top_k_device_locs"][1, 1] = 0
    assert _summary(check_single_step(inputs=kw, before=before, after=snapshot(kw))) == {("1", 0, (2,)), ("8", 1, (1,))}
