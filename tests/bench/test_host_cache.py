"""CPU tests of the shared host-cache pool (hisparse/bench/host_cache.py) as the workloads use it."""
from __future__ import annotations

import torch

from hisparse.bench.host_cache import HostCachePool, kv_shape
from hisparse.bench.workload import TOKEN_SCALE, fill_pattern

CPU = torch.device("cpu")


def pool_with_counter():
    calls = []

    def fill(dst, rows, item, device):
        calls.append(rows.numel())
        fill_pattern(dst, rows, item, via=device)

    return HostCachePool(fill), calls


def expected_rows(first: int, count: int, item: int) -> torch.Tensor:
    shape, dtype = kv_shape(count, item)
    out = torch.empty(shape, dtype=dtype)
    fill_pattern(out, torch.arange(first, first + count), item)
    return out


def test_a_view_is_the_documented_pattern_of_its_rows_for_any_item_size():
    pool, _ = pool_with_counter()
    for item in (576, 656, 100, 4):
        v = pool.view(50, item, CPU)
        assert torch.equal(v, expected_rows(0, 50, item))
        if item % 8 == 0:  # row r, word w = r * TOKEN_SCALE + w
            assert int(v[7, 3]) == 7 * TOKEN_SCALE + 3


def test_smaller_cases_reuse_the_arena_and_a_larger_one_grows_it():
    pool, calls = pool_with_counter()
    a = pool.view(2000, 576, CPU)
    b = pool.view(1500, 576, CPU)
    assert calls == [2000]  # the rows asked for are filled, once; a smaller view fills nothing
    assert b.data_ptr() == a.data_ptr()
    assert pool.nbytes >= int(2000 * 576 * 1.5)  # room to grow into without a new allocation
    pool.view(2500, 576, CPU)
    assert calls == [2000, 500]  # only the new rows
    c = pool.view(4000, 576, CPU)
    assert calls == [2000, 500, 4000]  # a larger arena: filled from its start
    assert torch.equal(c[:2000], a)  # same bytes in the new arena
    assert torch.equal(a, expected_rows(0, 2000, 576))  # the old arena lives while a view of it does
    d = pool.view(10, 656, CPU)  # another item size: the same arena, filled with that size's rows
    assert calls[-1] == 10 and torch.equal(d, expected_rows(0, 10, 656))
    assert torch.equal(pool.view(100, 576, CPU), expected_rows(0, 100, 576))  # and back, refilled
    pool.clear()
    assert pool.nbytes == 0


def test_reserve_sizes_the_arena_once():
    pool, calls = pool_with_counter()
    assert pool.reserve(10 << 20, CPU) >= 10 << 20
    size = pool.nbytes
    pool.view(1000, 576, CPU)
    pool.view(8000, 576, CPU)
    assert pool.nbytes == size and calls == [1000, 7000]


def test_an_offset_view_reads_the_shifted_rows_from_other_memory():
    pool, _ = pool_with_counter()
    pool.view(2000, 576, CPU)  # room for both views
    base = pool.view(100, 576, CPU)
    shifted = pool.view(100, 576, CPU, offset_rows=37)
    assert shifted.data_ptr() == base.data_ptr() + 37 * 576
    assert torch.equal(shifted, expected_rows(37, 100, 576))


def test_bad_sizes_are_refused():
    pool, _ = pool_with_counter()
    for rows, off in ((0, 0), (5, -1)):
        try:
            pool.view(rows, 576, CPU, offset_rows=off)
        except ValueError as e:
            assert "rows" in str(e)
        else:
            raise AssertionError("expected ValueError")
