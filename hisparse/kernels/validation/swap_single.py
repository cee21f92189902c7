"""Argument checks of the single-step exact-LRU swap (docs/semantics.md §2.2, §2.7, §7.8).

Two levels, because the CUDA wrapper must not synchronise with the device on every call:
- ``check_swap_single_inputs``: dtype/shape/device/stride and size ranges only (metadata, no sync).
  Both backends run it first, so a malformed call fails identically before any launch or compile.
- ``check_swap_single_contract``: the content rules the kernel silently relies on (they need the
  values, so a device->host copy). The reference always runs it; the wrapper only in debug mode.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.errors import InputError
from hisparse.kernels import limits
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.common import (
    INDEX_DTYPES,
    check_int,
    check_plan,
    check_same_row_stride,
    check_tensor,
    check_top_k_rows,
    item_rows,
)

# lru_slots is int16; docs/semantics.md (§2.3) bounds HOT by the int16 maximum.
MAX_HOT_BUFFER_SIZE_SINGLE = limits.MAX_LRU_HOT_BUFFER_SIZE


@dataclass(frozen=True)
class SwapSingleShape:
    """Sizes of one single-step call, derived from the tensors (no device values read)."""

    batch: int
    num_req_slots: int
    top_k: int
    hot_buffer_size: int
    page_size: int
    item_size_bytes: int
    record_plan: bool
    host_rows: int
    device_rows: int


def check_host_cache(host_cache: object, item_size_bytes: int, device: torch.device) -> int:
    """``host_cache`` lives with the other tensors, or in pinned CPU memory when they are on CUDA
    (the kernel loads it through its UVA address). Returns the number of host rows."""
    if isinstance(host_cache, torch.Tensor) and host_cache.device != device:
        on_pinned_cpu = host_cache.device.type == "cpu" and device.type == "cuda" and host_cache.is_pinned()
        if not on_pinned_cpu:
            raise InputError(
                f"host_cache: must be on {device} like the other tensors, or in pinned CPU memory when they "
                f"are on cuda (torch.empty(..., pin_memory=True)); got {host_cache.device}"
                + (" (not pinned)" if host_cache.device.type == "cpu" else "")
            )
    return item_rows("host_cache", host_cache, item_size_bytes)  # type: ignore[arg-type]


def _check_1d_index(name: str, t: object, batch: int, device: torch.device) -> torch.Tensor:
    check_tensor(name, t, dtypes=INDEX_DTYPES, ndim=1, shape=(batch,), device=device)
    if not t.is_contiguous():  # type: ignore[union-attr]
        raise InputError(f"{name}: must be contiguous, got strides {t.stride()}")  # type: ignore[union-attr]
    return t  # type: ignore[return-value]


@keyword_op("swap_single")
def check_swap_single_inputs(a: Bound) -> SwapSingleShape:
    """Metadata checks of every argument of ``swap_single_step``; raises InputError naming it."""
    check_int("item_size_bytes", a.item_size_bytes, lo=1)
    check_int("page_size", a.page_size, lo=1)
    check_tensor("top_k_tokens", a.top_k_tokens, dtypes=torch.int32, ndim=2, inner_contiguous=True)
    dev = a.top_k_tokens.device
    batch, top_k = a.top_k_tokens.shape
    if top_k < 1:
        raise InputError(f"top_k_tokens: top_k (dimension 1) must be >= 1, got shape {tuple(a.top_k_tokens.shape)}")

    check_tensor("lru_slots", a.lru_slots, dtypes=torch.int16, ndim=2, device=dev)
    if not a.lru_slots.is_contiguous():
        raise InputError(f"lru_slots: must be contiguous, got strides {a.lru_slots.stride()}")
    num_req_slots, hot = a.lru_slots.shape
    if num_req_slots < 1:
        raise InputError(f"lru_slots: needs at least one request slot (dimension 0), got shape {tuple(a.lru_slots.shape)}")
    if not top_k <= hot <= MAX_HOT_BUFFER_SIZE_SINGLE:
        raise InputError(
            f"lru_slots: hot_buffer_size (dimension 1) must be in [top_k={top_k}, {MAX_HOT_BUFFER_SIZE_SINGLE}] "
            f"(int16 slot ids), got {hot}"
        )

    padded = (num_req_slots, hot + a.page_size)
    check_tensor("device_buffer_tokens", a.device_buffer_tokens, dtypes=torch.int32, ndim=2, shape=padded,
                 device=dev, inner_contiguous=True, written=True)
    check_tensor("device_buffer_locs", a.device_buffer_locs, dtypes=torch.int32, ndim=2, shape=padded,
                 device=dev, inner_contiguous=True, written=True)
    # The kernel indexes both tables with one row stride.
    check_same_row_stride("device_buffer_tokens", a.device_buffer_tokens, "device_buffer_locs", a.device_buffer_locs)
    check_tensor("host_cache_locs", a.host_cache_locs, dtypes=torch.int64, ndim=2, shape=(num_req_slots, None),
                 device=dev)
    if not a.host_cache_locs.is_contiguous():  # the kernel takes the row stride as shape[1]
        raise InputError(f"host_cache_locs: must be contiguous, got strides {a.host_cache_locs.stride()}")
    check_tensor("top_k_device_locs", a.top_k_device_locs, dtypes=torch.int32, ndim=2, shape=(batch, top_k),
                 device=dev, inner_contiguous=True, written=True)
    _check_1d_index("req_pool_indices", a.req_pool_indices, batch, dev)
    _check_1d_index("seq_lens", a.seq_lens, batch, dev)
    check_tensor("num_real_reqs", a.num_real_reqs, dtypes=torch.int32, ndim=1, shape=(1,), device=dev)

    host_rows = check_host_cache(a.host_cache, a.item_size_bytes, dev)
    device_rows = item_rows("device_buffer", a.device_buffer, a.item_size_bytes, device=dev)
    record_plan = check_plan(a.miss_src, a.miss_dst, a.miss_count, batch=batch, min_width=top_k, device=dev)
    if record_plan:
        check_same_row_stride("miss_src", a.miss_src, "miss_dst", a.miss_dst)  # type: ignore[arg-type]
    return SwapSingleShape(
        batch=batch,
        num_req_slots=num_req_slots,
        top_k=top_k,
        hot_buffer_size=hot,
        page_size=a.page_size,
        item_size_bytes=a.item_size_bytes,
        record_plan=record_plan,
        host_rows=host_rows,
        device_rows=device_rows,
    )


@keyword_op("swap_single")
def check_swap_single_contract(t: Bound) -> SwapSingleShape:
    """``check_swap_single_inputs`` plus the content contract (reads values: one device->host sync).

    Rules (docs/semantics.md §2.7, §7.8), each error naming the
    argument, the batch row and the offending value:
    - ``num_real_reqs[0]`` in [0, batch]; real rows' ``req_pool_indices`` in [0, num_req_slots);
    - long rows (seq_len > hot_buffer_size) use distinct request slots (they mutate them);
    - the top-k contract of both swaps (``check_top_k_rows``: -1 or a token in [0, seq_len), tokens
      first, unique; a short row's tokens address its slots, [0, hot_buffer_size + page_size));
    - long rows: ``lru_slots`` row a permutation; no top-k
      token (but the newest) held by two hot slots; hot slots hold device rows in [0, device_rows);
      every miss (not resident, not the newest token) has a host row in [0, host_rows).
    """
    shape = check_swap_single_inputs(**t)
    n = int(t["num_real_reqs"][0])  # the one unavoidable sync: which rows are real
    if not 0 <= n <= shape.batch:
        raise InputError(f"num_real_reqs: must be in [0, batch={shape.batch}], got {n}")
    rids = t["req_pool_indices"][:n].cpu().to(torch.int64)
    seq = t["seq_lens"][:n].cpu().to(torch.int64)
    bad = (rids < 0) | (rids >= shape.num_req_slots)
    if bool(bad.any()):
        b = int(torch.nonzero(bad)[0])
        raise InputError(
            f"req_pool_indices: row {b} must be in [0, num_req_slots={shape.num_req_slots}), got {int(rids[b])}"
        )
    tokens = t["top_k_tokens"][:n].cpu().to(torch.int64)
    short = seq <= shape.hot_buffer_size
    width = shape.hot_buffer_size + shape.page_size
    check_top_k_rows(tokens, seq, lambda b: f"row {b}", slot_table=torch.where(short, width, 0))
    long_rows = [b for b in range(n) if int(seq[b]) > shape.hot_buffer_size]
    _check_distinct_slots(rids, long_rows)
    for b in long_rows:
        _check_long_row(t, b, int(rids[b]), int(seq[b]), tokens[b], shape)
    return shape


def _check_distinct_slots(rids: torch.Tensor, long_rows: list[int]) -> None:
    seen: dict[int, int] = {}
    for b in long_rows:
        rid = int(rids[b])
        if rid in seen:
            raise InputError(
                f"req_pool_indices: rows {seen[rid]} and {b} both swap request slot {rid} (seq_len > "
                f"hot_buffer_size); each long request needs its own slot"
            )
        seen[rid] = b


def _check_long_row(t: dict, b: int, rid: int, seq_len: int, tok: torch.Tensor, shape: SwapSingleShape) -> None:
    """One long request. Costs one sort of the K top-k tokens and O(HOT) passes (no HOT-sized sort):
    this runs for every row of every reference call, at HOT up to 32767."""
    hot = shape.hot_buffer_size
    keys = torch.sort(tok[tok >= 0]).values  # check_top_k_rows held range and uniqueness; -1 is padding
    _check_lru_row(t["lru_slots"][rid].cpu().to(torch.int64), b, rid, hot)
    locs = t["device_buffer_locs"][rid, :hot].cpu().to(torch.int64)
    bad = (locs < 0) | (locs >= shape.device_rows)
    if bool(bad.any()):
        s = int(torch.nonzero(bad)[0])
        raise InputError(
            f"device_buffer_locs: row {rid} (batch row {b}) slot {s} must be in [0, device_rows={shape.device_rows}), "
            f"got {int(locs[s])}"
        )
    if keys.numel() == 0:  # an all-padding row looks nothing up
        return
    # Which top-k tokens are resident, and in how many slots (the kernel's scan needs at most one:
    # two slots holding a looked-up token both "hit" it, racing on its output and on the miss count).
    resident = t["device_buffer_tokens"][rid, :hot].cpu().to(torch.int64)
    pos = torch.searchsorted(keys, resident).clamp(max=keys.numel() - 1)
    found = keys[pos] == resident
    held = torch.bincount(pos[found], minlength=keys.numel())
    looked_up = keys != seq_len - 1  # the newest token is resolved without a lookup
    twice = (held > 1) & looked_up
    if bool(twice.any()):
        raise InputError(
            f"device_buffer_tokens: row {rid} (batch row {b}) holds top-k token {int(keys[twice][0])} in more than "
            f"one hot slot"
        )
    _check_miss_host_rows(t["host_cache_locs"], b, rid, keys[(held == 0) & looked_up], shape)


def _check_lru_row(lru: torch.Tensor, b: int, rid: int, hot: int) -> None:
    bad = (lru < 0) | (lru >= hot)
    if bool(bad.any()):
        j = int(torch.nonzero(bad)[0])
        raise InputError(
            f"lru_slots: row {rid} (batch row {b}) must be a permutation of 0..{hot - 1}, entry {j} is {int(lru[j])}"
        )
    seen = torch.bincount(lru, minlength=hot)
    if bool((seen != 1).any()):
        raise InputError(
            f"lru_slots: row {rid} (batch row {b}) must be a permutation of 0..{hot - 1}, slot "
            f"{int(torch.nonzero(seen != 1)[0])} appears {int(seen[seen != 1][0])} times"
        )


def _check_miss_host_rows(
    host_cache_locs: torch.Tensor, b: int, rid: int, miss: torch.Tensor, shape: SwapSingleShape
) -> None:
    max_len = host_cache_locs.shape[1]
    if bool((miss >= max_len).any()):
        raise InputError(
            f"host_cache_locs: row {rid} has {max_len} columns, but batch row {b} misses token "
            f"{int(miss[miss >= max_len][0])}, which needs a host row"
        )
    # Gather only the entries needed, on the tensor's device, before copying (the table can be huge).
    flat = (rid * max_len + miss).to(host_cache_locs.device)
    rows = host_cache_locs.reshape(-1)[flat].cpu()
    bad = (rows < 0) | (rows >= shape.host_rows)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise InputError(
            f"host_cache_locs: batch row {b} misses token {int(miss[i])}, whose host row "
            f"host_cache_locs[{rid}, {int(miss[i])}] must be in [0, host_rows={shape.host_rows}), got {int(rows[i])}"
        )
