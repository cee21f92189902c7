"""Argument checks of the planned copy (docs/semantics.md §2.6): replay a recorded miss plan.

Same two levels as the swap: ``check_copy_planned_inputs`` reads metadata only (both backends, every
call); ``check_copy_planned_contract`` reads the counts and rows (the reference always, the CUDA
wrapper in debug mode).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.errors import InputError
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.common import check_int, check_same_row_stride, check_tensor, item_rows
from hisparse.kernels.validation.swap_single import check_host_cache


@dataclass(frozen=True)
class CopyPlannedShape:
    """Sizes of one planned copy. ``batch`` = rows of ``miss_count``; ``width`` = usable plan columns."""

    batch: int
    width: int
    item_size_bytes: int
    host_rows: int
    device_rows: int


@keyword_op("copy_planned")
def check_copy_planned_inputs(a: Bound) -> CopyPlannedShape:
    """Metadata checks of every argument of ``copy_planned``; raises InputError naming it."""
    check_int("item_size_bytes", a.item_size_bytes, lo=1)
    check_tensor("miss_count", a.miss_count, dtypes=torch.int32, ndim=1)
    dev = a.miss_count.device
    if not a.miss_count.is_contiguous():
        raise InputError(f"miss_count: must be contiguous, got strides {a.miss_count.stride()}")
    batch = a.miss_count.shape[0]
    check_tensor("miss_src", a.miss_src, dtypes=torch.int64, ndim=2, min_shape=(batch, None), device=dev,
                 inner_contiguous=True)
    check_tensor("miss_dst", a.miss_dst, dtypes=torch.int32, ndim=2, min_shape=(batch, None), device=dev,
                 inner_contiguous=True)
    # The kernel walks both plan tables with one row stride (as the swap that recorded them).
    check_same_row_stride("miss_src", a.miss_src, "miss_dst", a.miss_dst)
    check_tensor("num_real_reqs", a.num_real_reqs, dtypes=torch.int32, ndim=1, shape=(1,), device=dev)
    host_rows = check_host_cache(a.host_cache, a.item_size_bytes, dev)
    device_rows = item_rows("device_buffer", a.device_buffer, a.item_size_bytes, device=dev)
    return CopyPlannedShape(
        batch=batch,
        # A swap may record into tables wider than its top_k; only columns present in both are usable.
        width=min(a.miss_src.shape[1], a.miss_dst.shape[1]),
        item_size_bytes=a.item_size_bytes,
        host_rows=host_rows,
        device_rows=device_rows,
    )


@keyword_op("copy_planned")
def check_copy_planned_contract(kwargs: Bound) -> CopyPlannedShape:
    """``check_copy_planned_inputs`` plus contents (one device->host sync): ``num_real_reqs[0]`` in
    [0, batch]; each real row's count in [0, width]; its src rows < host_rows and dst rows <
    device_rows. A negative row means "no row" (a swap records -1 when a miss had no host row or no
    victim row); the replay skips that entry, so negatives are allowed. Takes the op's keyword
    arguments; errors name the argument, the row and the value."""
    shape = check_copy_planned_inputs(**kwargs)
    n = int(kwargs["num_real_reqs"][0])
    if not 0 <= n <= shape.batch:
        raise InputError(f"num_real_reqs: must be in [0, batch={shape.batch}] (rows of miss_count), got {n}")
    counts = kwargs["miss_count"][:n].cpu().to(torch.int64)
    bad = (counts < 0) | (counts > shape.width)
    if bool(bad.any()):
        r = int(torch.nonzero(bad)[0])
        raise InputError(f"miss_count: row {r} must be in [0, {shape.width}] (plan width), got {int(counts[r])}")
    used = int(counts.max()) if n > 0 else 0
    live = torch.arange(used).unsqueeze(0) < counts.unsqueeze(1)  # entries the replay reads
    for name, bound, hi in (("miss_src", "host_rows", shape.host_rows), ("miss_dst", "device_rows", shape.device_rows)):
        table = kwargs[name][:n, :used].cpu().to(torch.int64)
        bad = live & (table >= hi)
        if bool(bad.any()):
            r, j = (int(x) for x in torch.nonzero(bad)[0])
            raise InputError(f"{name}: row {r} entry {j} must be < {bound}={hi} (or negative: no row, skipped), "
                             f"got {int(table[r, j])}")
    return shape
