"""CUDA planned copy (``csrc/copy_planned.cuh``, device code ``csrc/include/hisparse/planned.cuh``).

Replays a recorded miss plan into another layer's KV buffer (docs/semantics.md §2.6): rows
``r < num_real_reqs[0]``, entries ``[0, miss_count[r])``, ``device_buffer[miss_dst[r, j]] <-
host_cache[miss_src[r, j]]``, byte-exact for any item size. Same keyword-only arguments as
:func:`hisparse.kernels.reference.copy_planned.copy_planned` plus ``num_blocks`` (grid size; small on purpose,
the copy shares the GPU with attention), ``tiles_per_request`` (0: rows round-robin over the grid's warps;
t >= 1: request-major tasks, for the single-step swap's copy), ``block_size`` and ``debug`` (one table: hisparse/kernels/signature.py). Returns None; no sync, no
allocation, torch's current stream (CUDA-graph capturable).
"""
from __future__ import annotations

from hisparse.kernels import jit, limits, signature
from hisparse.errors import InputError
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.common import check_int, check_kernel_item_size
from hisparse.kernels.validation.copy_planned import check_copy_planned_contract, check_copy_planned_inputs

ARGS = signature.COPY_PLANNED
OP, ENTRY = ARGS.op, ARGS.entry
DEFAULT_NUM_BLOCKS = ARGS.default("num_blocks")  # 8: upstream's shared-layer benchmark setting
DEFAULT_BLOCK_SIZE = ARGS.default("block_size")
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


@keyword_op(OP, gpu=True)
def copy_planned(a: Bound) -> None:
    """Copy every planned row on the GPU. ``debug=True`` also checks counts and rows first (syncs)."""
    shape = check_copy_planned_contract(**a.op_kwargs()) if a.debug else check_copy_planned_inputs.with_bound(a)
    if a.miss_count.device.type != "cuda":
        raise InputError(f"miss_count: the CUDA planned copy needs the plan on a cuda device, got {a.miss_count.device} "
                         "(use hisparse.kernels.reference.copy_planned for CPU tensors)")
    check_int("num_blocks", a.num_blocks, lo=1, hi=limits.MAX_GRID_BLOCKS)
    check_int("tiles_per_request", a.tiles_per_request, lo=0, hi=limits.MAX_GRID_BLOCKS)
    _check_block_size(a.block_size)
    check_kernel_item_size(a.item_size_bytes)
    if shape.batch == 0:
        return
    _kernel(a.block_size)(*ARGS.cpp_values(a))


def run_unchecked(*, block_size: int = DEFAULT_BLOCK_SIZE, **values: object) -> None:
    """Launch with arguments another wrapper has already validated (the single-step swap's grid copy
    replays the plan it has just recorded into the buffers it has checked)."""
    _kernel(block_size)(*ARGS.cpp_values(values))
