"""CUDA planned copy (``csrc/copy_planned.cuh``, device code ``csrc/include/hisparse/planned.cuh``).

Replays a recorded miss plan into another layer's KV buffer (reference doc §2.6): rows
``r < num_real_reqs[0]``, entries ``[0, miss_count[r])``, ``device_buffer[miss_dst[r, j]] <-
host_cache[miss_src[r, j]]``, byte-exact for any item size. Same keyword-only arguments as
:func:`hisparse.kernels.reference.copy_planned.copy_planned` plus ``num_blocks`` (grid size; small on purpose,
the copy shares the GPU with attention), ``block_size`` and ``debug``. Returns None; no sync, no
allocation, torch's current stream (CUDA-graph capturable).
"""
from __future__ import annotations

from typing import Any

import torch

from hisparse.kernels import jit
from hisparse.errors import InputError
from hisparse.kernels.validation.common import check_int
from hisparse.kernels.validation.copy_planned import check_copy_planned_contract, check_copy_planned_inputs

OP = "copy_planned"
ENTRY = "hisparse::copy_planned_entry"
DEFAULT_NUM_BLOCKS = 8  # upstream's shared-layer benchmark setting
DEFAULT_BLOCK_SIZE = 1024
BLOCK_SIZES = (128, 256, 512, 1024)


def kernel_spec(*, block_size: int = DEFAULT_BLOCK_SIZE) -> jit.KernelSpec:
    """The instantiation a call with this block size needs."""
    _check_block_size(block_size)
    return jit.KernelSpec(op=OP, entry=ENTRY, template_args=(("block_size", int(block_size)),))


def kernel_specs(*, block_size: int = DEFAULT_BLOCK_SIZE) -> list[jit.KernelSpec]:
    return [kernel_spec(block_size=block_size)]


def _check_block_size(block_size: object) -> None:
    if isinstance(block_size, bool) or block_size not in BLOCK_SIZES:
        raise InputError(f"block_size: must be one of {', '.join(map(str, BLOCK_SIZES))}, got {block_size!r}")


_kernel = jit.runner(lambda block_size: kernel_spec(block_size=block_size))


def copy_planned(
    *,
    miss_src: torch.Tensor,
    miss_dst: torch.Tensor,
    miss_count: torch.Tensor,
    num_real_reqs: torch.Tensor,
    host_cache: torch.Tensor,
    device_buffer: torch.Tensor,
    item_size_bytes: int,
    num_blocks: int = DEFAULT_NUM_BLOCKS,
    block_size: int = DEFAULT_BLOCK_SIZE,
    debug: bool = False,
) -> None:
    """Copy every planned row on the GPU. ``debug=True`` also checks counts and rows first (syncs)."""
    kw = dict(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count, num_real_reqs=num_real_reqs,
              host_cache=host_cache, device_buffer=device_buffer, item_size_bytes=item_size_bytes)
    shape = check_copy_planned_contract(**kw) if debug else check_copy_planned_inputs(**kw)
    if miss_count.device.type != "cuda":
        raise InputError(f"miss_count: the CUDA planned copy needs the plan on a cuda device, got {miss_count.device} "
                         "(use hisparse.kernels.reference.copy_planned for CPU tensors)")
    check_int("num_blocks", num_blocks, lo=1, hi=65535)
    _check_block_size(block_size)
    if item_size_bytes > 0x7FFFFFFF:
        raise InputError(f"item_size_bytes: must be < 2**31, got {item_size_bytes}")
    if shape.batch == 0:
        return
    _kernel(block_size)(miss_src, miss_dst, miss_count, num_real_reqs, host_cache, device_buffer,
                        item_size_bytes, num_blocks)
