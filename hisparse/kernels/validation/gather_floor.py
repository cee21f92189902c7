"""Argument checks of the bare gather (the in-run physical floor), same two levels as the other ops:
``check_gather_floor_inputs`` reads metadata only (every call); ``check_gather_floor_contract`` also
reads the row indices (one device->host sync; the CUDA wrapper in debug mode)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.errors import InputError
from hisparse.kernels import limits
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.common import check_int, check_tensor, item_rows
from hisparse.kernels.validation.swap_single import check_host_cache


@dataclass(frozen=True)
class GatherFloorShape:
    """Sizes of one gather: ``n`` rows copied out of ``host_rows`` into ``device_rows``."""

    n: int
    host_rows: int
    device_rows: int


@keyword_op("gather_floor")
def check_gather_floor_inputs(a: Bound) -> GatherFloorShape:
    """Metadata checks (no sync); raises InputError naming the argument."""
    check_int("item_size_bytes", a.item_size_bytes, lo=1, hi=limits.MAX_COPY_ITEM_SIZE_BYTES)
    check_tensor("src_rows", a.src_rows, dtypes=torch.int64, ndim=1)
    dev = a.src_rows.device
    if dev.type != "cuda":
        raise InputError(f"src_rows: the CUDA gather needs the row indices on a cuda device, got {dev}")
    if not a.src_rows.is_contiguous():
        raise InputError(f"src_rows: must be contiguous, got strides {a.src_rows.stride()}")
    n = a.src_rows.shape[0]
    check_tensor("dst_rows", a.dst_rows, dtypes=torch.int32, ndim=1, shape=(n,), device=dev)
    if not a.dst_rows.is_contiguous():
        raise InputError(f"dst_rows: must be contiguous, got strides {a.dst_rows.stride()}")
    host_rows = check_host_cache(a.host_cache, a.item_size_bytes, dev)
    device_rows = item_rows("device_buffer", a.device_buffer, a.item_size_bytes, device=dev)
    return GatherFloorShape(n=n, host_rows=host_rows, device_rows=device_rows)


@keyword_op("gather_floor")
def check_gather_floor_contract(a: Bound) -> GatherFloorShape:
    """Inputs plus row ranges (one device->host sync): src rows in [0, host_rows), dst rows in [0, device_rows)."""
    shape = check_gather_floor_inputs(**a)
    for name, hi, bound in (("src_rows", shape.host_rows, "host_rows"), ("dst_rows", shape.device_rows, "device_rows")):
        rows = a[name].cpu().to(torch.int64)
        bad = (rows < 0) | (rows >= hi)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            raise InputError(f"{name}: entry {i} must be in [0, {bound}={hi}), got {int(rows[i])}")
    return shape
