"""CUDA bare gather, the in-run physical floor (``csrc/gather_floor.cuh``, device code
``csrc/include/hisparse/gather.cuh``): ``device_buffer[dst_rows[i]] <- host_cache[src_rows[i]]``.

Rows 16-B aligned on both sides (item % 16 == 0, 16-B aligned buffers) take a flat gather of 16-byte
chunks with ``loads_in_flight`` zero-copy loads per thread before the first store (49 GB/s against a
warp-per-row gather's 40 GB/s on H200, harness.md §1); anything else takes the byte-exact warp copy.
``num_blocks=None`` = 4 CTAs per SM (528 on H200), never more than the rows need.

Same keyword-only arguments as the reference floor (``hisparse.kernels.reference.bytes.copy_rows`` in
gather_floor's signature) plus the tuning knobs and ``debug``. Returns None; no sync, no allocation,
torch's current stream (CUDA-graph capturable).
"""
from __future__ import annotations

from typing import Any

import torch

from hisparse.kernels import jit
from hisparse.errors import InputError
from hisparse.kernels.validation.common import check_int, check_tensor, item_rows
from hisparse.kernels.validation.swap_single import check_host_cache

OP = "gather_floor"
ENTRY = "hisparse::gather_floor_entry"
DEFAULT_LOADS_IN_FLIGHT = 4
LOADS_IN_FLIGHT = (1, 2, 4, 8)
DEFAULT_BLOCK_SIZE = 256
MAX_BLOCK_SIZE = 512  # kGatherMaxBlock in gather.cuh (register budget for 8 loads in flight)
_MAX_CHUNKS = 1 << 31  # the flat kernel indexes 16-byte chunks with 32 bits


def kernel_spec(*, loads_in_flight: int = DEFAULT_LOADS_IN_FLIGHT) -> jit.KernelSpec:
    """The instantiation a call with this many loads in flight needs."""
    _check_loads(loads_in_flight)
    return jit.KernelSpec(op=OP, entry=ENTRY, template_args=(("loads_in_flight", int(loads_in_flight)),))


def kernel_specs(*, loads_in_flight: int = DEFAULT_LOADS_IN_FLIGHT) -> list[jit.KernelSpec]:
    return [kernel_spec(loads_in_flight=loads_in_flight)]


def _check_loads(loads_in_flight: object) -> None:
    if isinstance(loads_in_flight, bool) or loads_in_flight not in LOADS_IN_FLIGHT:
        raise InputError(f"loads_in_flight: must be one of {', '.join(map(str, LOADS_IN_FLIGHT))}, "
                         f"got {loads_in_flight!r}")


_kernel = jit.runner(lambda loads_in_flight: kernel_spec(loads_in_flight=loads_in_flight))


def check_gather_floor_inputs(*, src_rows: torch.Tensor, dst_rows: torch.Tensor, host_cache: torch.Tensor,
                              device_buffer: torch.Tensor, item_size_bytes: int) -> tuple[int, int, int]:
    """Metadata checks (no sync); returns (n, host_rows, device_rows)."""
    check_int("item_size_bytes", item_size_bytes, lo=1, hi=0x7FFFFFFF)
    check_tensor("src_rows", src_rows, dtypes=torch.int64, ndim=1)
    dev = src_rows.device
    if dev.type != "cuda":
        raise InputError(f"src_rows: the CUDA gather needs the row indices on a cuda device, got {dev}")
    if not src_rows.is_contiguous():
        raise InputError(f"src_rows: must be contiguous, got strides {src_rows.stride()}")
    n = src_rows.shape[0]
    check_tensor("dst_rows", dst_rows, dtypes=torch.int32, ndim=1, shape=(n,), device=dev)
    if not dst_rows.is_contiguous():
        raise InputError(f"dst_rows: must be contiguous, got strides {dst_rows.stride()}")
    host_rows = check_host_cache(host_cache, item_size_bytes, dev)
    device_rows = item_rows("device_buffer", device_buffer, item_size_bytes, device=dev)
    return n, host_rows, device_rows


def check_gather_floor_contract(**kw: Any) -> tuple[int, int, int]:
    """Inputs plus row ranges (one device->host sync): src rows in [0, host_rows), dst rows in [0, device_rows)."""
    n, host_rows, device_rows = check_gather_floor_inputs(**kw)
    for name, hi, bound in (("src_rows", host_rows, "host_rows"), ("dst_rows", device_rows, "device_rows")):
        rows = kw[name].cpu().to(torch.int64)
        bad = (rows < 0) | (rows >= hi)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            raise InputError(f"{name}: entry {i} must be in [0, {bound}={hi}), got {int(rows[i])}")
    return n, host_rows, device_rows


def gather_floor(
    *,
    src_rows: torch.Tensor,
    dst_rows: torch.Tensor,
    host_cache: torch.Tensor,
    device_buffer: torch.Tensor,
    item_size_bytes: int,
    num_blocks: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    loads_in_flight: int = DEFAULT_LOADS_IN_FLIGHT,
    debug: bool = False,
) -> None:
    """Gather ``n`` rows host -> device on the GPU, byte-exact for any item size."""
    kw = dict(src_rows=src_rows, dst_rows=dst_rows, host_cache=host_cache, device_buffer=device_buffer,
              item_size_bytes=item_size_bytes)
    n, _, _ = check_gather_floor_contract(**kw) if debug else check_gather_floor_inputs(**kw)
    if num_blocks is not None:
        check_int("num_blocks", num_blocks, lo=1, hi=65535)
    check_int("block_size", block_size, lo=32, hi=MAX_BLOCK_SIZE)
    if block_size % 32:
        raise InputError(f"block_size: must be a multiple of 32 in [32, {MAX_BLOCK_SIZE}], got {block_size}")
    _check_loads(loads_in_flight)
    if n == 0:
        return
    _kernel(loads_in_flight)(src_rows, dst_rows, host_cache, device_buffer, item_size_bytes,
                             0 if num_blocks is None else num_blocks, block_size)
