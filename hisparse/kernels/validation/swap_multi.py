"""Argument checks of the multi-step (speculative) swap, shared by the PyTorch reference and the CUDA
wrapper: both call ``check_swap_multi_inputs(**kwargs)`` first, so a bad call fails identically on
either backend, before any launch or compilation.

Two levels:
- ``check_swap_multi_inputs``: cheap, no host sync (dtype, shape, device, strides, static ranges,
  state layout). Always run.
- ``check_swap_multi_contract``: reads tensor values (one host sync): request slots, real-row count,
  host rows of the referenced tokens, device rows of the slot tables. The reference always runs it;
  the CUDA wrapper only in debug mode.
Both take exactly the op's keyword arguments (hisparse/kernels/signature.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from hisparse.errors import InputError
from hisparse.kernels import limits
from hisparse.kernels.limits import MAX_HOT_BUFFER_SIZE, MAX_STEPS, MAX_STEPS_X_TOP_K
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.state import MultiStepState
from hisparse.kernels.validation.common import (
    item_size_at_fault,
    INDEX_DTYPES,
    check_int,
    check_plan,
    check_same_row_stride,
    check_tensor,
    check_top_k_rows,
    item_rows,
)

MAX_TOKEN_POSITIONS = limits.MAX_TOKEN_POSITIONS


@dataclass(frozen=True)
class SwapMultiShape:
    """Every size of one multi-step swap call, derived once from the arguments."""

    batch: int
    steps: int
    top_k: int
    hot_buffer_size: int
    page_size: int
    item_size_bytes: int
    record_plan: bool
    num_req_slots: int
    scratch_capacity: int
    max_len: int
    host_rows: int
    device_rows: int
    device: torch.device

    @property
    def occurrences(self) -> int:
        return self.steps * self.top_k


def _check_steps(top_k_tokens: torch.Tensor) -> tuple[int, int, int]:
    check_tensor("top_k_tokens", top_k_tokens, dtypes=torch.int32, ndim=3, inner_contiguous=True)
    bs, steps, top_k = top_k_tokens.shape
    check_int("top_k_tokens.shape[0] (batch)", bs, lo=1, hi=limits.MAX_MULTI_BATCH)
    check_int("steps", steps, lo=1, hi=MAX_STEPS)
    check_int("top_k", top_k, lo=1, hi=MAX_STEPS_X_TOP_K)
    if steps * top_k > MAX_STEPS_X_TOP_K:
        raise InputError(f"steps*top_k: must be <= {MAX_STEPS_X_TOP_K}, got {steps}*{top_k}={steps * top_k}")
    return bs, steps, top_k


def _check_state(state: object, steps: int, top_k: int) -> MultiStepState:
    if not isinstance(state, MultiStepState):
        raise InputError(f"state: expected a hisparse.kernels.state.MultiStepState, got {type(state).__name__}")
    state.validate()
    s = state.sizes
    if (s.steps, s.top_k) != (steps, top_k):
        raise InputError(
            f"state: made for steps={s.steps}, top_k={s.top_k}; this call has steps={steps}, top_k={top_k}"
        )
    check_int("state.sizes.hot_buffer_size", s.hot_buffer_size, lo=max(top_k, 2), hi=MAX_HOT_BUFFER_SIZE)
    return state


def _check_slot_tables(dbt: torch.Tensor, dbl: torch.Tensor, rows: int, hot: int, dev: torch.device) -> int:
    check_tensor("device_buffer_tokens", dbt, dtypes=torch.int32, ndim=2, min_shape=(rows, None), device=dev,
                 written=True)
    page = dbt.shape[1] - hot
    if page < 1:
        raise InputError(
            f"device_buffer_tokens: dimension 1 must be hot_buffer_size + page_size with page_size >= 1 "
            f"(hot_buffer_size={hot}), got shape {tuple(dbt.shape)}"
        )
    check_tensor("device_buffer_locs", dbl, dtypes=torch.int32, shape=tuple(dbt.shape), device=dev, written=True)
    for name, t in (("device_buffer_tokens", dbt), ("device_buffer_locs", dbl)):
        if t.stride(1) != 1:
            raise InputError(f"{name}: rows must be contiguous, got strides {tuple(t.stride())}")
    check_same_row_stride("device_buffer_tokens", dbt, "device_buffer_locs", dbl)
    return page


def _check_host_cache(host_cache: torch.Tensor, item_size_bytes: int, dev: torch.device) -> int:
    rows = item_rows("host_cache", host_cache, item_size_bytes)  # also rejects a non-tensor
    if host_cache.device != dev:
        # A CUDA kernel reads host rows zero-copy: they must be pinned (or already on the device).
        if not (dev.type == "cuda" and host_cache.device.type == "cpu" and host_cache.is_pinned()):
            raise InputError(
                f"host_cache: must be on {dev} or, for a CUDA call, in pinned host memory; got {host_cache.device}"
                + (" (not pinned)" if host_cache.device.type == "cpu" else "")
            )
    return rows


@keyword_op("swap_multi")
def check_swap_multi_inputs(a: Bound) -> SwapMultiShape:
    """Cheap checks (no host sync). Raises InputError naming the argument and what is allowed."""
    check_int("item_size_bytes", a.item_size_bytes, lo=1)
    if a.pdl is not None and not isinstance(a.pdl, bool):
        raise InputError(f"pdl: must be None (auto), True or False, got {a.pdl!r}")
    bs, steps, top_k = _check_steps(a.top_k_tokens)
    state = _check_state(a.state, steps, top_k)
    dev = state.device
    check_tensor("top_k_tokens", a.top_k_tokens, device=dev)
    sz = state.sizes
    r, hot = sz.num_req_slots, sz.hot_buffer_size
    page = _check_slot_tables(a.device_buffer_tokens, a.device_buffer_locs, r, hot, dev)
    check_tensor("host_cache_locs", a.host_cache_locs, dtypes=torch.int64, ndim=2, min_shape=(r, 1), device=dev)
    if not a.host_cache_locs.is_contiguous():
        raise InputError(f"host_cache_locs: must be contiguous (row stride = shape[1]), got strides {a.host_cache_locs.stride()}")
    check_int("host_cache_locs.shape[1]", a.host_cache_locs.shape[1], hi=MAX_TOKEN_POSITIONS)
    host_rows = _check_host_cache(a.host_cache, a.item_size_bytes, dev)
    device_rows = item_rows("device_buffer", a.device_buffer, a.item_size_bytes, device=dev)
    check_tensor("top_k_device_locs", a.top_k_device_locs, dtypes=torch.int32, shape=(bs, steps, top_k),
                 device=dev, inner_contiguous=True, written=True)
    check_tensor("req_pool_indices", a.req_pool_indices, dtypes=INDEX_DTYPES, shape=(bs,), device=dev)
    check_tensor("seq_lens", a.seq_lens, dtypes=INDEX_DTYPES, ndim=1, shape=(bs * steps,), device=dev)
    for name, t in (("req_pool_indices", a.req_pool_indices), ("seq_lens", a.seq_lens)):
        if not t.is_contiguous():
            raise InputError(f"{name}: must be contiguous, got strides {t.stride()}")
    check_tensor("num_real_reqs", a.num_real_reqs, dtypes=torch.int32, ndim=1, shape=(1,), device=dev)
    record = check_plan(a.miss_src, a.miss_dst, a.miss_count, batch=bs, min_width=steps * top_k, device=dev)
    if record:
        check_same_row_stride("miss_src", a.miss_src, "miss_dst", a.miss_dst)
    return SwapMultiShape(
        batch=bs, steps=steps, top_k=top_k, hot_buffer_size=hot, page_size=page,
        item_size_bytes=a.item_size_bytes, record_plan=record, num_req_slots=r,
        scratch_capacity=sz.scratch_capacity, max_len=a.host_cache_locs.shape[1],
        host_rows=host_rows, device_rows=device_rows, device=dev,
    )


def _first_bad(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.nonzero(mask)[0])


def _check_request_slots(req_pool_indices: torch.Tensor, n_real: int, r: int) -> torch.Tensor:
    rids = req_pool_indices[:n_real].to(torch.int64)
    bad = (rids < 0) | (rids >= r)
    if bool(bad.any()):
        (b,) = _first_bad(bad)
        raise InputError(f"req_pool_indices: real rows must be in [0, {r}), got {int(rids[b])} at row {b}")
    if rids.numel() != torch.unique(rids).numel():
        raise InputError("req_pool_indices: real rows must name distinct request slots (each row owns its slot's state)")
    return rids


def _check_top_k(kw: dict, shape: SwapMultiShape, n: int) -> None:
    """The top-k contract both swaps share (validation/common.py check_top_k_rows), per request and step."""
    tok = kw["top_k_tokens"][:n].reshape(n * shape.steps, shape.top_k).cpu().to(torch.int64)
    seq = kw["seq_lens"][: n * shape.steps].cpu().to(torch.int64)
    check_top_k_rows(tok, seq, lambda r: f"row {r // shape.steps}, step {r % shape.steps}")


def _check_referenced_host_rows(kw: dict, shape: SwapMultiShape, rids: torch.Tensor) -> None:
    n = rids.numel()
    tok = kw["top_k_tokens"][:n].reshape(n, shape.occurrences).to(torch.int64)
    valid = tok >= 0  # _check_top_k ran first: every other entry is a token below its step's seq_len
    beyond = valid & (tok >= shape.max_len)
    if bool(beyond.any()):
        b, i = _first_bad(beyond)
        raise InputError(
            f"top_k_tokens: valid token {int(tok[b, i])} (row {b}, step {i // shape.top_k}) is beyond "
            f"host_cache_locs.shape[1]={shape.max_len}; allowed 0 <= token < min(seq_len, {shape.max_len})"
        )
    hcl = kw["host_cache_locs"]
    src = hcl[rids.unsqueeze(1), tok.clamp(0, shape.max_len - 1)]
    bad = valid & (src >= shape.host_rows)
    if bool(bad.any()):
        b, i = _first_bad(bad)
        blame = item_size_at_fault("host_cache", kw["host_cache"], shape.item_size_bytes, int(src[b, i]))
        if blame is not None:
            raise blame
        raise InputError(
            f"host_cache_locs: row {int(src[b, i])} of token {int(tok[b, i])} (request slot {int(rids[b])}) "
            f"is outside host_cache, allowed -1 (not on host) or [0, {shape.host_rows})"
        )


def _check_device_rows(kw: dict, shape: SwapMultiShape, rids: torch.Tensor) -> None:
    tables = (
        ("device_buffer_locs", kw["device_buffer_locs"][rids]),
        ("state.scratch_locs", kw["state"].scratch_locs[rids]),
    )
    for name, locs in tables:
        bad = locs >= shape.device_rows
        if bool(bad.any()):
            b, j = _first_bad(bad)
            blame = item_size_at_fault("device_buffer", kw["device_buffer"], shape.item_size_bytes, int(locs[b, j]))
            if blame is not None:
                raise blame
            raise InputError(
                f"{name}: row {int(locs[b, j])} (request slot {int(rids[b])}, column {j}) is outside "
                f"device_buffer, allowed < 0 (no row) or [0, {shape.device_rows})"
            )


@keyword_op("swap_multi")
def check_swap_multi_contract(kwargs: Bound) -> SwapMultiShape:
    """Value checks that need a host sync (``debug=True``, and every reference call). Raises InputError.

    The top-k contract both swaps share (``check_top_k_rows``: each step's entries -1 or a token in
    [0, seq_len of that step), tokens first, unique within the step); real rows on distinct request
    slots; every valid token's host row inside host_cache; device rows inside device_buffer."""
    shape = check_swap_multi_inputs(**kwargs)
    n_real = int(kwargs["num_real_reqs"][0])
    if not 0 <= n_real <= shape.batch:
        raise InputError(f"num_real_reqs: must be in [0, {shape.batch}] (the batch size), got {n_real}")
    rids = _check_request_slots(kwargs["req_pool_indices"], n_real, shape.num_req_slots)
    if n_real == 0:
        return shape
    _check_top_k(kwargs, shape, n_real)
    _check_referenced_host_rows(kwargs, shape, rids)
    _check_device_rows(kwargs, shape, rids)
    return shape
