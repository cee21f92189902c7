"""CUDA single-step exact-LRU swap (``csrc/swap_single.cuh``, device code ``csrc/include/hisparse/lru.cuh``).

Same keyword-only arguments as :func:`hisparse.kernels.reference.swap_single.swap_single_step` plus
``block_size`` and ``debug`` (one table: hisparse/kernels/signature.py), bit-exact with it (outputs,
``device_buffer_tokens``, ``lru_slots``, device bytes, miss plan). Returns None and never synchronises with the device: validation reads shapes only (``debug=True`` adds the full content
contract, which syncs), nothing is allocated, and the kernel runs on torch's current stream, so a call
can be captured in a CUDA graph.

Compile-time choices are only the block size, whether a plan is recorded, whether the swap kernel
copies and how (each instantiation costs ~10 s of nvcc); top_k, hot_buffer_size, page_size and
item_size_bytes are runtime values, with the shared memory sized at launch. The copy's shape follows the
batch: a call of at most ``FLAT_COPY_MAX_BATCH`` requests copies each request's misses as one flat list
over its CTA, a larger one a miss per warp (``flat_copy_for``).

``copy_blocks=n >= 1`` splits the call in two launches on the same stream: the swap records the plan
without copying, then the planned copy (``csrc/include/hisparse/planned.cuh``) copies the plan over n
CTAs in request-major tasks (``grid_copy_tiles``). The swap kernel alone copies on one CTA per request, so on `bs` SMs; the
results are bit-identical. The second launch costs a few microseconds per step, so on H100 SXM nodes it
paid only where one or two CTAs would copy everything (batch 1-2; docs/perf-notes.md, 2026-12-07). On the
H200 in the decode regime it takes batch 64 6% under the copy in the kernel, and loses 13-15% there warm
(same file, request-major tasks), so the default stays the copy in the kernel. The
harness times the default as ``lru_sequential`` and the split over one CTA per SM
(``grid_copy_blocks``) as the opt-in ``lru_sequential_grid``, so the two copies are cases of one run.
"""
from __future__ import annotations

import torch

from hisparse.kernels import jit, limits, signature
from hisparse.errors import InputError
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.ops import copy_planned
from hisparse.kernels.validation.common import check_int, check_kernel_item_size
from hisparse.kernels.validation.swap_single import (
    SwapSingleShape,
    check_swap_single_contract,
    check_swap_single_inputs,
)

ARGS = signature.SWAP_SINGLE
OP, ENTRY = ARGS.op, ARGS.entry
# 1024 threads: the upstream benchmarks' block size on H100/H200 (960 was upstream's B200 workaround).
DEFAULT_BLOCK_SIZE = ARGS.default("block_size")
BLOCK_SIZES = (128, 256, 512, 960, 1024)

# Mirrors SwapSmemLayout in csrc/include/hisparse/lru.cuh: keep the two in sync.
_WARP = 32
_SCAN_WORDS = 40
# Opt-in shared memory per block when torch does not report it (bytes), by compute capability major.
_SMEM_OPTIN_FALLBACK = {9: 232448, 10: 232448, 8: 166912}

# Calls of at most this many requests copy each request's misses as one flat list over its CTA (113
# rows of 576 B in flight per CTA), larger ones a miss per warp (32 rows in flight per CTA). On an H100
# SXM node whose decode-regime translations are cold, as the H200's, the flat copy was faster at every
# batch up to 16 on `serving`, by less as CTAs were added (docs/perf-notes.md, 2026-12-07): a few CTAs
# alone on the GPU gain from the depth. Above 16 the warp copy stays, its device code unchanged since
# a837c3d: at batch 32 and 64 the flat copy was within the node's run-to-run spread (same file, the
# entry on batch 32 and 64).
FLAT_COPY_MAX_BATCH = 16

# The grid copy (copy_blocks >= 1) copies the plan in request-major tasks, copy_blocks // this many per
# request, so its CTAs at work at one time serve about this many consecutive requests. A narrow span of
# host pages in flight is what cold translations favour; a wider one holds more loads in flight, which
# the warm regime favours. 4 comes from a sweep of spans 1-16 on the H200 at `serving` decode batch 64,
# one CTA per SM (docs/perf-notes.md, 2026-12-07, request-major tasks, where its figures are).
GRID_COPY_REQUESTS = 4


def flat_copy_for(batch: int) -> bool:
    """Whether a copying call of ``batch`` requests runs the flat-copy instantiation."""
    return batch <= FLAT_COPY_MAX_BATCH


def _hash_size(top_k: int) -> int:
    return 1 << max(1, (2 * top_k - 1).bit_length())


def swap_single_smem_bytes(top_k: int, hot_buffer_size: int) -> int:
    """Dynamic shared memory of one CTA (int32 tokens, hash keys, chunk offsets and masks, scan scratch;
    int16 LRU staging and hash values), rounded up to 16 bytes."""
    chunks = (hot_buffer_size + _WARP - 1) // _WARP
    hs = _hash_size(top_k)
    int32_words = (top_k + (top_k & 1)) + hs + (chunks + 1) + chunks + _SCAN_WORDS  # keys 8-byte aligned
    total = 4 * int32_words + 2 * hot_buffer_size + 2 * hs
    return (total + 15) // 16 * 16


_SMEM_LIMIT: dict[int, int] = {}


def max_shared_memory_per_block(device: torch.device) -> int:
    """Opt-in dynamic shared memory per block on ``device`` (227 KiB on H100/H200); cached per device."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    limit = _SMEM_LIMIT.get(index)
    if limit is None:
        props = torch.cuda.get_device_properties(index)
        limit = getattr(props, "shared_memory_per_block_optin", None) or _SMEM_OPTIN_FALLBACK.get(props.major, 101376)
        _SMEM_LIMIT[index] = int(limit)
        limit = int(limit)
    return limit


def kernel_spec(*, block_size: int = DEFAULT_BLOCK_SIZE, record_plan: bool = False,
                copy: bool = True, flat_copy: bool = False) -> jit.KernelSpec:
    """The instantiation a call with these template values needs (``copy=False`` records the plan and
    copies nothing, so ``flat_copy`` is off with it)."""
    _check_block_size(block_size)
    plan = bool(record_plan) or not copy  # a swap that does not copy records the plan its copy reads
    flat = bool(flat_copy) and bool(copy)
    return jit.KernelSpec(op=OP, entry=ENTRY,
                          template_args=(("block_size", int(block_size)), ("record_plan", plan), ("copy", bool(copy)),
                                         ("flat_copy", flat)))


def kernel_specs(*, block_size: int = DEFAULT_BLOCK_SIZE, plan_only: bool = False) -> list[jit.KernelSpec]:
    """Both plan variants of the copying swap (the harness times calls without a plan and records one for
    its floors), each with both copies (the batch picks one), and with ``plan_only`` the swap of a
    ``copy_blocks`` call, whose copy is copy_planned's."""
    specs = [kernel_spec(block_size=block_size, record_plan=r, flat_copy=f)
             for r in (False, True) for f in (False, True)]
    return (specs + [kernel_spec(block_size=block_size, copy=False)]) if plan_only else specs


_kernel = jit.runner(lambda block_size, record_plan, copy, flat_copy: kernel_spec(
    block_size=block_size, record_plan=record_plan, copy=copy, flat_copy=flat_copy))


def _check_block_size(block_size: object) -> None:
    if isinstance(block_size, bool) or block_size not in BLOCK_SIZES:
        raise InputError(f"block_size: must be one of {', '.join(map(str, BLOCK_SIZES))}, got {block_size!r}")


def check_fits(shape: SwapSingleShape, device: torch.device) -> None:
    """Reject (InputError) a top_k / hot_buffer_size pair whose shared memory exceeds the device limit."""
    need = swap_single_smem_bytes(shape.top_k, shape.hot_buffer_size)
    limit = max_shared_memory_per_block(device)
    if need > limit:
        raise InputError(
            f"top_k_tokens, lru_slots: top_k={shape.top_k} with hot_buffer_size={shape.hot_buffer_size} needs "
            f"{need} bytes of shared memory per request, more than the {limit} bytes {torch.cuda.get_device_name(device)} "
            "allows per block; use a smaller top_k or hot_buffer_size"
        )


@keyword_op(OP, gpu=True)
def swap_single_step(a: Bound) -> None:
    """Single-step swap on the GPU; mutates the tensors in place like the reference. ``debug=True``
    also checks the content contract first (one device->host sync), raising InputError on violation.

    Top-k tokens follow the contract both swaps share (-1 padding, tokens in [0, seq_len) of their
    step, tokens first, unique within a step: docs/design.md, validation/common.py check_top_k_rows),
    checked with ``debug=True``; outside it the kernel stays in its buffers, its outputs unspecified.
    """
    shape = check_swap_single_contract(**a.op_kwargs()) if a.debug else check_swap_single_inputs.with_bound(a)
    device = a.top_k_tokens.device
    if device.type != "cuda":
        raise InputError(f"top_k_tokens: the CUDA swap needs tensors on a cuda device, got {device} "
                         "(use hisparse.kernels.reference.swap_single for CPU tensors)")
    _check_block_size(a.block_size)
    check_fits(shape, device)
    check_kernel_item_size(a.item_size_bytes)
    grid_copy = _check_copy_blocks(a.copy_blocks, shape.record_plan)
    if shape.batch == 0:
        return
    values = dict(a)
    if not shape.record_plan:
        # Never read by the record_plan=false instantiation; any tensor will do, so nothing is allocated.
        values.update(miss_src=a.top_k_device_locs, miss_dst=a.top_k_device_locs, miss_count=a.top_k_device_locs)
    copy = not grid_copy
    _kernel(a.block_size, shape.record_plan, copy, copy and flat_copy_for(shape.batch))(*ARGS.cpp_values(values))
    if grid_copy:
        copy_planned.run_unchecked(miss_src=a.miss_src, miss_dst=a.miss_dst, miss_count=a.miss_count,
                                   num_real_reqs=a.num_real_reqs, host_cache=a.host_cache,
                                   device_buffer=a.device_buffer, item_size_bytes=a.item_size_bytes,
                                   num_blocks=a.copy_blocks, tiles_per_request=grid_copy_tiles(a.copy_blocks))


def grid_copy_blocks(device: torch.device | None = None) -> int:
    """The ``copy_blocks`` of the harness's ``lru_sequential_grid``: one CTA (of 1024 threads) per SM of
    ``device`` (default: the current one), a launch shape derived from the device."""
    index = device.index if device is not None and device.index is not None else torch.cuda.current_device()
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def grid_copy_tiles(copy_blocks: int) -> int:
    """Tasks per request of the grid copy: enough that the CTAs at work at one time serve about
    ``GRID_COPY_REQUESTS`` consecutive requests (planned.cuh, request-major tasks)."""
    return max(1, copy_blocks // GRID_COPY_REQUESTS)


def _check_copy_blocks(copy_blocks: object, record_plan: bool) -> bool:
    """True when the call copies over its own grid after the swap (which then needs the plan)."""
    check_int("copy_blocks", copy_blocks, lo=0, hi=limits.MAX_GRID_BLOCKS)
    if copy_blocks and not record_plan:
        raise InputError(f"copy_blocks: {copy_blocks} copies from the miss plan after the swap; pass miss_src, "
                         "miss_dst and miss_count to hold it, or copy_blocks=0 to copy inside the swap kernel")
    return bool(copy_blocks)
