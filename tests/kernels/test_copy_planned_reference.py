"""CPU tests of the planned-copy reference (docs/semantics.md §2.6, §6.1 case 3) and the byte helpers."""
from __future__ import annotations

import pytest
import torch

from hisparse.errors import InputError
from hisparse.kernels.reference.bytes import as_rows, copy_rows
from hisparse.kernels.reference.copy_planned import copy_planned
from hisparse.kernels.reference.swap_single import swap_single_step
from hisparse.kernels.validation.copy_planned import CopyPlannedShape, check_copy_planned_inputs

ITEM = 32


def storage_bytes(t: torch.Tensor) -> bytes:
    return t.detach().reshape(-1).view(torch.uint8).numpy().tobytes()


def rows_of(t: torch.Tensor, item: int) -> list[bytes]:
    raw = storage_bytes(t)
    return [raw[r * item : (r + 1) * item] for r in range(len(raw) // item)]


def plan(src, dst, counts, num_real, *, host_rows=16, device_rows=8, item=ITEM, seed=0):
    g = torch.Generator().manual_seed(seed)
    return dict(
        miss_src=torch.tensor(src, dtype=torch.int64), miss_dst=torch.tensor(dst, dtype=torch.int32),
        miss_count=torch.tensor(counts, dtype=torch.int32), num_real_reqs=torch.tensor([num_real], dtype=torch.int32),
        host_cache=torch.randint(0, 256, (host_rows * item,), dtype=torch.uint8, generator=g),
        device_buffer=torch.zeros(device_rows * item, dtype=torch.uint8), item_size_bytes=item,
    )


def test_replays_the_first_count_entries_of_each_real_row():
    kw = plan([[5, 6, 7], [1, 2, 0]], [[0, 1, 2], [3, 4, 0]], [2, 1], 2)
    host = rows_of(kw["host_cache"], ITEM)
    assert copy_planned(**kw) == 3
    dev = rows_of(kw["device_buffer"], ITEM)
    assert (dev[0], dev[1], dev[3]) == (host[5], host[6], host[1])
    zero = bytes(ITEM)
    assert (dev[2], dev[4], dev[5], dev[6], dev[7]) == (zero,) * 5  # entries past the counts are not copied


def test_padding_rows_are_never_read_even_with_garbage_counts():
    kw = plan([[5, 6], [-1, 99]], [[0, 1], [-1, 99]], [1, 99], 1)
    host = rows_of(kw["host_cache"], ITEM)
    assert copy_planned(**kw) == 1
    assert rows_of(kw["device_buffer"], ITEM) == [host[5]] + [bytes(ITEM)] * 7


def test_entries_with_a_negative_row_are_skipped_and_not_counted():
    """-1 is "no row" in a swap's plan (no host row, or no victim row): the replay skips the entry."""
    kw = plan([[5, -1, 7], [2, 3, 4]], [[0, 1, 2], [-1, 4, -7]], [3, 3], 2)
    host = rows_of(kw["host_cache"], ITEM)
    assert copy_planned(**kw) == 3
    dev = rows_of(kw["device_buffer"], ITEM)
    zero = bytes(ITEM)
    assert (dev[0], dev[2], dev[4]) == (host[5], host[7], host[3])
    assert (dev[1], dev[3], dev[5], dev[6], dev[7]) == (zero,) * 5


def test_no_real_rows_or_zero_counts_copy_nothing():
    for num_real, counts in ((0, [2, 2]), (2, [0, 0])):
        kw = plan([[5, 6], [1, 2]], [[0, 1], [2, 3]], counts, num_real)
        assert copy_planned(**kw) == 0
        assert storage_bytes(kw["device_buffer"]) == bytes(8 * ITEM)


@pytest.mark.parametrize("item,host_dtype,dev_dtype", [(100, torch.int64, torch.uint8), (584, torch.float32, torch.int16),
                                                       (4, torch.uint8, torch.float64), (656, torch.bfloat16, torch.int32)])
def test_any_item_size_is_byte_exact_whatever_the_dtypes(item, host_dtype, dev_dtype):
    g = torch.Generator().manual_seed(item)

    def buffer(rows, dtype):  # plus trailing bytes that belong to no row
        size = torch.tensor([], dtype=dtype).element_size()
        n = -(-(rows * item) // size) * size + size
        return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g).view(dtype)

    kw = plan([[3, 0], [7, 7]], [[4, 1], [0, 2]], [2, 2], 2, item=item)
    kw["host_cache"], kw["device_buffer"] = buffer(8, host_dtype), buffer(6, dev_dtype)
    host, dev0, raw0 = rows_of(kw["host_cache"], item), rows_of(kw["device_buffer"], item), storage_bytes(kw["device_buffer"])
    assert copy_planned(**kw) == 4
    dev1, raw1 = rows_of(kw["device_buffer"], item), storage_bytes(kw["device_buffer"])
    want = {4: host[3], 1: host[0], 0: host[7], 2: host[7]}
    assert dev1 == [want.get(r, dev0[r]) for r in range(len(dev0))]
    assert raw1[len(dev0) * item :] == raw0[len(dev0) * item :]


def test_replaying_a_swap_plan_into_a_fresh_buffer_reproduces_its_rows():
    """§6.1 case 3 for the single-step swap: buf[dst] == host[src] == primary buffer at dst."""
    g = torch.Generator().manual_seed(3)
    hot, page, item = 4, 1, 24
    tokens = torch.tensor([[1, 4, 2, 5, 19], [0, 1, 2, -1, -1]], dtype=torch.int32)
    locs = torch.tensor([[9, 7, 3, 5, 11], [0, 1, 2, 4, 6]], dtype=torch.int32)
    hcl = torch.arange(64, dtype=torch.int64).view(2, 32)
    host = torch.randint(0, 256, (64 * item,), dtype=torch.uint8, generator=g)
    primary = torch.zeros(12 * item // 8, dtype=torch.int64)
    src, dst, cnt = torch.full((3, 4), -1, dtype=torch.int64), torch.full((3, 4), -1, dtype=torch.int32), torch.full((3,), 7, dtype=torch.int32)
    common = dict(host_cache_locs=hcl, host_cache=host, item_size_bytes=item, miss_src=src, miss_dst=dst, miss_count=cnt)
    swap_single_step(
        top_k_tokens=torch.tensor([[4, 12, 13, 19], [3, 1, 0, 2], [0, 0, 0, 0]], dtype=torch.int32),
        device_buffer_tokens=tokens, device_buffer_locs=locs, device_buffer=primary,
        top_k_device_locs=torch.empty(3, 4, dtype=torch.int32), req_pool_indices=torch.tensor([0, 1, 0]),
        seq_lens=torch.tensor([20, 4, 10]), lru_slots=torch.tensor([[0, 1, 2, 3]] * 2, dtype=torch.int16),
        num_real_reqs=torch.tensor([2], dtype=torch.int32), page_size=page, **common)
    # Row 0: 4 hits, 19 is the newest, 12 and 13 miss into LRU slots 0 and 2 (rows 9, 3). Row 1 is fast.
    assert cnt.tolist() == [2, 0, 0]
    assert (src[0, :2].tolist(), dst[0, :2].tolist()) == ([12, 13], [9, 3])
    fresh = torch.zeros(12 * item, dtype=torch.uint8)
    n = copy_planned(miss_src=src, miss_dst=dst, miss_count=cnt, num_real_reqs=torch.tensor([3], dtype=torch.int32),
                     host_cache=host, device_buffer=fresh, item_size_bytes=item)
    assert n == 2
    h, p, f = rows_of(host, item), rows_of(primary, item), rows_of(fresh, item)
    assert (f[9], f[3]) == (h[12], h[13]) == (p[9], p[3])
    assert all(f[r] == bytes(item) for r in range(12) if r not in (9, 3))


def test_shape_takes_the_usable_width_of_both_plan_tables():
    kw = plan([[0, 0, 0, 0]] * 3, [[0, 0, 0, 0]] * 3, [0, 0], 2)
    kw["miss_src"] = torch.zeros(3, 5, dtype=torch.int64)[:, :4]  # both views of row stride 5,
    kw["miss_dst"] = torch.zeros(3, 5, dtype=torch.int32)[:, :3]  # miss_dst the narrower
    assert check_copy_planned_inputs(**kw) == CopyPlannedShape(batch=2, width=3, item_size_bytes=ITEM, host_rows=16, device_rows=8)


def _set(**changes):
    return lambda kw: kw.update(changes)


BAD = {
    "count above width": (_set(miss_count=torch.tensor([3, 0], dtype=torch.int32)), ["miss_count", "row 0", "got 3"]),
    "negative count": (_set(miss_count=torch.tensor([1, -1], dtype=torch.int32)), ["miss_count", "row 1", "got -1"]),
    "src past host_cache": (_set(miss_src=torch.tensor([[16, 0], [0, 0]])), ["miss_src", "row 0", "host_rows=16", "got 16"]),
    "dst past buffer": (_set(miss_dst=torch.tensor([[0, 8], [0, 0]], dtype=torch.int32)), ["miss_dst", "device_rows=8"]),
    "num_real above batch": (_set(num_real_reqs=torch.tensor([3], dtype=torch.int32)), ["num_real_reqs", "got 3"]),
    "src dtype": (_set(miss_src=torch.zeros(2, 2, dtype=torch.int32)), ["miss_src", "int64"]),
    "dst dtype": (_set(miss_dst=torch.zeros(2, 2, dtype=torch.int64)), ["miss_dst", "int32"]),
    "count dtype": (_set(miss_count=torch.zeros(2, dtype=torch.int64)), ["miss_count", "int32"]),
    "num_real shape": (_set(num_real_reqs=torch.zeros(2, dtype=torch.int32)), ["num_real_reqs"]),
    "fewer plan rows than counts": (_set(miss_src=torch.zeros(1, 2, dtype=torch.int64)), ["miss_src"]),
    "row strides differ": (_set(miss_dst=torch.zeros(2, 4, dtype=torch.int32)[:, :2]), ["miss_dst", "row stride"]),
    "item size 0": (_set(item_size_bytes=0), ["item_size_bytes"]),
    "device buffer < 1 item": (_set(device_buffer=torch.zeros(ITEM - 1, dtype=torch.uint8)), ["device_buffer"]),
    "host cache device": (lambda kw: kw.update(host_cache=kw["host_cache"].to("meta")), ["host_cache", "must be on"]),
    "plan device": (lambda kw: kw.update(miss_dst=kw["miss_dst"].to("meta")), ["miss_dst", "must be on"]),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_raises_input_error_naming_the_argument(case):
    mutate, words = BAD[case]
    kw = plan([[5, 6], [1, 2]], [[0, 1], [2, 3]], [2, 2], 2)
    mutate(kw)
    with pytest.raises(InputError) as err:
        copy_planned(**kw)
    for word in words:
        assert word in str(err.value)
    assert storage_bytes(kw["device_buffer"]) == bytes(len(storage_bytes(kw["device_buffer"])))  # nothing copied


def test_byte_helpers_alias_the_buffer_and_reject_mismatched_rows():
    buf = torch.zeros(5, dtype=torch.int64)  # 40 bytes -> 13 items of 3 bytes, 1 trailing byte
    rows = as_rows(buf, 3)
    assert rows.shape == (13, 3) and rows.dtype == torch.uint8
    rows[1] = torch.tensor([1, 2, 3], dtype=torch.uint8)
    assert storage_bytes(buf)[:6] == bytes([0, 0, 0, 1, 2, 3])
    with pytest.raises(InputError, match="buffer: must be contiguous"):
        as_rows(torch.zeros(4, 4).t(), 4)
    with pytest.raises(InputError, match="dst_rows"):
        copy_rows(buf, torch.tensor([0, 1]), buf, torch.tensor([2]), 3)
