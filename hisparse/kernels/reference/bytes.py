"""Byte-addressed KV buffers, shared by every reference.

The kernels treat ``host_cache`` and ``device_buffer`` as raw bytes (row r at byte offset
``r * item_size_bytes``) whatever their torch dtype, and copy any item size byte-exactly. These helpers
give the references the same view: a uint8 ``[rows, item_size_bytes]`` alias of the buffer, so a copy
is one vectorised ``index_select`` / ``index_copy_`` whatever the dtype and item size.
"""
from __future__ import annotations

import torch

from hisparse.errors import InputError


def as_rows(t: torch.Tensor, item_size_bytes: int) -> torch.Tensor:
    """uint8 view ``[rows, item_size_bytes]`` of a contiguous tensor of any dtype (aliases ``t``).

    Trailing bytes that do not fill a whole item are left out, as the kernels never address them.
    """
    if isinstance(item_size_bytes, bool) or not isinstance(item_size_bytes, int) or item_size_bytes < 1:
        raise InputError(f"item_size_bytes: must be an int >= 1, got {item_size_bytes!r}")
    if not t.is_contiguous():
        raise InputError(f"buffer: must be contiguous (rows are byte offsets), got strides {t.stride()}")
    # reshape(-1) of a contiguous tensor is a view; view(uint8) reinterprets the same storage bytes.
    flat = t.reshape(-1).view(torch.uint8)
    rows = flat.numel() // item_size_bytes
    return flat[: rows * item_size_bytes].view(rows, item_size_bytes)


def copy_rows(
    src_buf: torch.Tensor,
    src_rows: torch.Tensor,
    dst_buf: torch.Tensor,
    dst_rows: torch.Tensor,
    item_size_bytes: int,
) -> None:
    """``dst_buf`` row ``dst_rows[i]`` <- ``src_buf`` row ``src_rows[i]``, byte-exact, across devices.

    All source rows are read before any destination row is written (the kernels do the same per
    item; callers never pass overlapping rows of one buffer).
    """
    src_rows = src_rows.reshape(-1)
    dst_rows = dst_rows.reshape(-1)
    if src_rows.numel() != dst_rows.numel():
        raise InputError(f"dst_rows: must have as many entries as src_rows ({src_rows.numel()}), got {dst_rows.numel()}")
    if src_rows.numel() == 0:
        return
    src = as_rows(src_buf, item_size_bytes)
    dst = as_rows(dst_buf, item_size_bytes)
    data = src.index_select(0, src_rows.to(device=src.device, dtype=torch.int64))
    dst.index_copy_(0, dst_rows.to(device=dst.device, dtype=torch.int64), data.to(dst.device))
