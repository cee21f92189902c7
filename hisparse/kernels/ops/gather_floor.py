"""CUDA bare gather, the in-run physical floor (``csrc/gather_floor.cuh``, device code
``csrc/include/hisparse/gather.cuh``): ``device_buffer[dst_rows[i]] <- host_cache[src_rows[i]]``.

Rows W-aligned on both sides for W = 16, 8 or 4 bytes (W divides the item size and both bases; the
widest is taken) go through a flat gather of W-byte words with ``loads_in_flight * 16 / W`` zero-copy
loads per thread before the first store (capped at 16; 49 GB/s against a warp-per-row gather's 40 GB/s
on H200 for 576 B rows, docs/semantics.md §H1); anything else takes the byte-exact warp copy.
``num_blocks=None`` = one CTA per SM for the flat gather, 4 for the warp gather, never more than the rows need; the flat
gather deals the words of the row list over the grid in waves, so the loads in flight cover one window of
the list (callers that want the best bare gather pass rows sorted by host row: hisparse/bench/floors.py
does; with cold translations that window is then one stretch of the pool, csrc/include/hisparse/gather.cuh).

Same keyword-only arguments as the reference floor (``hisparse.kernels.reference.bytes.copy_rows`` in
gather_floor's signature) plus the tuning knobs and ``debug`` (one table: hisparse/kernels/signature.py). Returns None; no sync, no allocation,
torch's current stream (CUDA-graph capturable).
"""
from __future__ import annotations

from hisparse.kernels import jit, limits, signature
from hisparse.errors import InputError
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.common import check_int
from hisparse.kernels.validation.gather_floor import check_gather_floor_contract, check_gather_floor_inputs

ARGS = signature.GATHER_FLOOR
OP, ENTRY = ARGS.op, ARGS.entry
DEFAULT_LOADS_IN_FLIGHT = ARGS.default("loads_in_flight")
LOADS_IN_FLIGHT = (1, 2, 4, 8)
DEFAULT_BLOCK_SIZE = ARGS.default("block_size")
MAX_BLOCK_SIZE = limits.MAX_GATHER_BLOCK_SIZE


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


@keyword_op(OP, gpu=True)
def gather_floor(a: Bound) -> None:
    """Gather ``n`` rows host -> device on the GPU, byte-exact for any item size."""
    shape = check_gather_floor_contract(**a.op_kwargs()) if a.debug else check_gather_floor_inputs.with_bound(a)
    if a.num_blocks is not None:
        check_int("num_blocks", a.num_blocks, lo=1, hi=limits.MAX_GRID_BLOCKS)
    check_int("block_size", a.block_size, lo=32, hi=MAX_BLOCK_SIZE)
    if a.block_size % 32:
        raise InputError(f"block_size: must be a multiple of 32 in [32, {MAX_BLOCK_SIZE}], got {a.block_size}")
    _check_loads(a.loads_in_flight)
    if shape.n == 0:
        return
    _kernel(a.loads_in_flight)(*ARGS.cpp_values(a))  # num_blocks None -> 0: the entry picks the grid per path
