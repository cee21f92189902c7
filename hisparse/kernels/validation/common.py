"""Small declarative checks; each raises InputError naming the argument and what is allowed."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from hisparse.errors import InputError
from hisparse.kernels import limits


# dtypes of req_pool_indices and seq_lens in both swaps (the kernels read either width).
INDEX_DTYPES = (torch.int32, torch.int64)


def _dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return " or ".join(str(d).replace("torch.", "") for d in dtypes)


def check_tensor(
    name: str,
    t: object,
    *,
    dtypes: Sequence[torch.dtype] | torch.dtype | None = None,
    ndim: int | None = None,
    shape: Sequence[int | None] | None = None,
    min_shape: Sequence[int | None] | None = None,
    device: torch.device | None = None,
    inner_contiguous: bool = False,
    written: bool = False,
) -> torch.Tensor:
    """Check one tensor argument. ``shape``/``min_shape`` entries of None are not checked.

    ``inner_contiguous`` requires every dimension but the first to be densely packed (only the row
    stride may differ), which is what the kernels index with. ``written``: the kernel writes the tensor
    row by row, so no two rows may share memory. An expanded view (row stride 0) or a row stride below
    the row's size passes the other checks, and then two rows' writes race on one location.
    """
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if dtypes is not None:
        allowed = (dtypes,) if isinstance(dtypes, torch.dtype) else tuple(dtypes)
        if t.dtype not in allowed:
            raise InputError(f"{name}: dtype must be {_dtype_names(allowed)}, got {str(t.dtype).replace('torch.', '')}")
    if ndim is not None and t.dim() != ndim:
        raise InputError(f"{name}: must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if shape is not None:
        for i, want in enumerate(shape):
            if want is not None and t.shape[i] != want:
                raise InputError(f"{name}: dimension {i} must be {want}, got shape {tuple(t.shape)}")
    if min_shape is not None:
        for i, want in enumerate(min_shape):
            if want is not None and t.shape[i] < want:
                raise InputError(f"{name}: dimension {i} must be >= {want}, got shape {tuple(t.shape)}")
    if device is not None and t.device != device:
        raise InputError(f"{name}: must be on {device} like the other tensors, got {t.device}")
    if inner_contiguous and t.dim() > 1 and not t[0].is_contiguous():
        raise InputError(f"{name}: all dimensions but the first must be contiguous, got strides {t.stride()}")
    if written and t.dim() >= 1 and t.shape[0] > 1 and t.stride(0) < t[0].numel():
        raise InputError(
            f"{name}: rows overlap in memory (row stride {t.stride(0)}, {t[0].numel()} elements a row) and the "
            f"kernel writes them: pass a tensor with distinct rows (e.g. .contiguous())"
        )
    return t


def check_int(name: str, value: object, *, lo: int | None = None, hi: int | None = None) -> int:
    """Check an integer scalar in [lo, hi] (bounds inclusive, None = unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name}: must be an int, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        lo_s = "-inf" if lo is None else str(lo)
        hi_s = "inf" if hi is None else str(hi)
        raise InputError(f"{name}: must be in [{lo_s}, {hi_s}], got {value}")
    return value


def check_kernel_item_size(item_size_bytes: int) -> None:
    """The CUDA entries take the item size as a 32-bit value (csrc/host/entry_checks.h); the references do not."""
    if item_size_bytes > limits.MAX_COPY_ITEM_SIZE_BYTES:
        raise InputError(f"item_size_bytes: must be < 2**31, got {item_size_bytes}")


def check_same_row_stride(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.stride(0) != b.stride(0):
        raise InputError(
            f"{name_b}: must have the same row stride as {name_a} ({a.stride(0)}), got {b.stride(0)}"
        )


def check_plan(
    miss_src: torch.Tensor | None,
    miss_dst: torch.Tensor | None,
    miss_count: torch.Tensor | None,
    *,
    batch: int,
    min_width: int,
    device: torch.device,
) -> bool:
    """Miss plan: all three tensors or none. Returns True when a plan is recorded."""
    given = [x is not None for x in (miss_src, miss_dst, miss_count)]
    if not any(given):
        return False
    if not all(given):
        raise InputError("miss_src, miss_dst, miss_count: pass all three (to record a miss plan) or none")
    check_tensor("miss_src", miss_src, dtypes=torch.int64, ndim=2, min_shape=(batch, min_width), device=device,
                 written=True)
    check_tensor("miss_dst", miss_dst, dtypes=torch.int32, ndim=2, min_shape=(batch, min_width), device=device,
                 written=True)
    check_tensor("miss_count", miss_count, dtypes=torch.int32, ndim=1, min_shape=(batch,), device=device)
    for n, t in (("miss_src", miss_src), ("miss_dst", miss_dst)):
        if t.stride(1) != 1:
            raise InputError(f"{n}: rows must be contiguous, got strides {t.stride()}")
    if not miss_count.is_contiguous():  # the kernels write miss_count[b]
        raise InputError(f"miss_count: must be contiguous, got strides {miss_count.stride()}")
    return True


def item_rows(name: str, t: torch.Tensor, item_size_bytes: int, *, device: torch.device | None = None) -> int:
    """Number of whole items in a byte-addressed KV buffer (row r at byte offset r*item_size_bytes)."""
    check_tensor(name, t, device=device)
    if not t.is_contiguous():
        raise InputError(f"{name}: must be contiguous (rows are addressed as byte offsets), got strides {t.stride()}")
    nbytes = t.numel() * t.element_size()
    rows = nbytes // item_size_bytes
    if rows == 0:
        raise InputError(f"{name}: holds {nbytes} bytes, fewer than one item of {item_size_bytes} bytes")
    return rows


def item_size_at_fault(name: str, t: torch.Tensor, item_size_bytes: int, row: int) -> InputError | None:
    """The error to raise when ``row`` lies outside buffer ``name`` and the buffer is no whole number of
    items of ``item_size_bytes``: then the item size, not the table that named the row, is the likely
    fault (item_size_bytes=577 on 576-byte rows was once blamed on state.scratch_locs). None otherwise."""
    nbytes = t.numel() * t.element_size()
    if nbytes % item_size_bytes == 0:
        return None
    return InputError(
        f"item_size_bytes: {item_size_bytes} does not divide {name}'s {nbytes} bytes, so it holds only "
        f"{nbytes // item_size_bytes} whole rows and row {row} falls outside it; pass the row size the buffers "
        "were made with"
    )


def check_top_k_rows(tokens: torch.Tensor, seq_lens: torch.Tensor, where, *,
                     slot_table: torch.Tensor | None = None) -> None:
    """The one top-k contract of both swaps (docs/design.md, "The top-k contract"), on CPU int64
    rows ``tokens`` [n, K] (one row per request and step) with their ``seq_lens`` [n]:

    - every entry is -1 (padding: its output is -1 and it changes nothing) or a token in [0, seq_len);
      where ``slot_table`` [n] is given (> 0), a row addresses slots directly (the single-step swap's
      short requests, seq_len <= hot_buffer_size: upstream's 1:1 positions, extra page included) and
      its range is [0, slot_table) instead;
    - a row of a context shorter than top_k has its tokens first: entries from index seq_len on are -1;
    - a token appears at most once in a row (the multi-step swap's steps may repeat each other's
      tokens: the repeats share one row).

    ``where(r)`` names row r in the message ("row 3" or "row 3, step 1")."""
    if tokens.numel() == 0:
        return
    negative = seq_lens < 0
    if bool(negative.any()):  # checked first: the tokens' range is derived from it, and would take the blame
        r = int(torch.nonzero(negative)[0, 0])
        raise InputError(f"seq_lens: {where(r)}: must be >= 0 (a context length), got {int(seq_lens[r])}")
    seq = seq_lens.to(torch.int64).unsqueeze(1)
    direct = torch.zeros_like(seq, dtype=torch.bool) if slot_table is None else (slot_table.unsqueeze(1) > 0)
    limit = seq if slot_table is None else torch.where(direct, slot_table.to(torch.int64).unsqueeze(1), seq)
    pad = tokens == -1
    bad = ~pad & ((tokens < 0) | (tokens >= limit))
    if bool(bad.any()):
        r, i = (int(x) for x in torch.nonzero(bad)[0])
        bound = (f"hot_buffer_size + page_size={int(limit[r, 0])} (seq_len {int(seq[r, 0])} <= hot_buffer_size: "
                 f"slots addressed directly)" if bool(direct[r, 0]) else f"seq_len={int(seq[r, 0])}")
        raise InputError(f"top_k_tokens: {where(r)} entry {i} must be -1 (padding) or a token in [0, {bound}), "
                         f"got {int(tokens[r, i])}")
    past = ~pad & (torch.arange(tokens.shape[1]).unsqueeze(0) >= seq)
    if bool(past.any()):
        r, i = (int(x) for x in torch.nonzero(past)[0])
        raise InputError(f"top_k_tokens: {where(r)} has seq_len {int(seq[r, 0])} < top_k, so its entries from "
                         f"index {int(seq[r, 0])} on must be -1 (padding); entry {i} is {int(tokens[r, i])}")
    srt = torch.sort(tokens, dim=1).values
    dup = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
    if bool(dup.any()):
        r, j = (int(x) for x in torch.nonzero(dup)[0])
        raise InputError(f"top_k_tokens: {where(r)} repeats token {int(srt[r, j])}; a step's tokens must be unique "
                         f"(-1 may repeat)")
