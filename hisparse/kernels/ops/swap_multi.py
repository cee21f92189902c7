"""CUDA multi-step (speculative) swap: the gather + commit kernels of csrc/swap_multi.cuh.

Same keyword-only arguments as the PyTorch reference ``hisparse.kernels.reference.swap_multi.swap_multi_step``
plus ``debug`` (one table: hisparse/kernels/signature.py); tensors are mutated in place and nothing is returned (no host sync, so a call can be
captured in a CUDA graph). Arguments are validated once with the checks the reference uses, so a bad
call raises the same ``InputError`` on both backends before any compile or launch; ``debug=True``
also runs the value-level contract check (one device->host sync).

Only ``pdl`` and whether a miss plan is recorded are compile-time choices (two template arguments);
steps, top_k, hot_buffer_size, page_size, scratch capacity and item_size_bytes are runtime values, so
four instantiations serve every configuration.
"""
from __future__ import annotations

import torch

from hisparse import env
from hisparse.kernels import jit, limits, signature
from hisparse.errors import InputError
from hisparse.kernels.jit import KernelSpec
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.swap_multi import SwapMultiShape, check_swap_multi_contract, check_swap_multi_inputs

ARGS = signature.SWAP_MULTI
OP, ENTRY = ARGS.op, ARGS.entry
# csrc/swap_multi.cuh bounds the item so (row, 16-byte word) indices of a copy fit in 32 bits.
MAX_ITEM_SIZE_BYTES = limits.MAX_ITEM_SIZE_BYTES
PDL_MIN_CAPABILITY = (9, 0)  # griddepcontrol (programmatic dependent launch) exists from sm_90

_PDL_BY_DEVICE: dict[int, bool] = {}


def kernel_spec(*, pdl: bool, record_plan: bool) -> KernelSpec:
    """The one instantiation for (pdl, record_plan)."""
    return KernelSpec(op=OP, entry=ENTRY, template_args=(("pdl", bool(pdl)), ("record_plan", bool(record_plan))))


def arch_supports_pdl(arch: str) -> bool:
    """True when every target of an arch setting ("9.0", "9.0a", "8.9 9.0") is sm_90 or newer."""
    tag = env.arch_tag(arch)  # validates; "sm_90a" / "sm_89-sm_90"
    majors = [int(part[3:].rstrip("abcdefghijklmnopqrstuvwxyz")) // 10 for part in tag.split("-")]
    return all(m >= PDL_MIN_CAPABILITY[0] for m in majors)


def kernel_specs(*, pdl: bool | None = None, record_plan: bool | None = None,
                 arch: str | None = None) -> list[KernelSpec]:
    """KernelSpecs a call needs (``hisparse-bench build``, through hisparse/bench/implementations.py).

    ``pdl``: explicit, else the wrapper's auto choice for ``arch``
    (default ``env.CUDA_ARCH``; no GPU query). ``record_plan``: explicit, else both variants (the
    harness times calls without a plan and records one for shared layers). Every other case parameter
    (steps, top_k, hot_buffer_size, item_size_bytes, batch, ...) is a runtime value of one build.
    """
    pdls = [arch_supports_pdl(arch or env.CUDA_ARCH) if pdl is None else bool(pdl)]
    plans = [False, True] if record_plan is None else [bool(record_plan)]
    return [kernel_spec(pdl=p, record_plan=r) for p in pdls for r in plans]


_kernel = jit.runner(lambda pdl, record_plan: kernel_spec(pdl=pdl, record_plan=record_plan))


def resolve_pdl(pdl: bool | None, device: torch.device) -> bool:
    """``None`` (auto) -> True on compute capability >= 9.0; cached per device (one query per process)."""
    if pdl is not None:
        return bool(pdl)
    index = device.index if device.index is not None else torch.cuda.current_device()
    cached = _PDL_BY_DEVICE.get(index)
    if cached is None:
        cached = torch.cuda.get_device_capability(index) >= PDL_MIN_CAPABILITY
        _PDL_BY_DEVICE[index] = cached
    return cached


def _check_cuda_call(shape: SwapMultiShape, host_cache: torch.Tensor, item_size_bytes: int) -> None:
    if shape.device.type != "cuda":
        raise InputError(
            f"state: the CUDA swap needs CUDA tensors, got {shape.device}; use "
            "hisparse.kernels.reference.swap_multi.swap_multi_step on the CPU"
        )
    # The kernels read host rows zero-copy through their UVA address: pageable memory would fault.
    if host_cache.device.type == "cpu" and not host_cache.is_pinned():
        raise InputError("host_cache: a CPU host_cache must be pinned (torch.empty(..., pin_memory=True))")
    if item_size_bytes > MAX_ITEM_SIZE_BYTES:
        raise InputError(f"item_size_bytes: must be <= {MAX_ITEM_SIZE_BYTES} for the CUDA kernel, got {item_size_bytes}")


@keyword_op(OP, gpu=True)
def swap_multi_step(a: Bound) -> None:
    """Multi-step swap on the caller's (torch current) stream; see the module doc and docs/design.md.

    ``pdl``: None = auto (on for compute capability >= 9.0), True/False force the instantiation (both
    are valid on Hopper; only False runs on older GPUs). ``debug``: also run the contract check.

    Top-k tokens follow the contract both swaps share (-1 padding, tokens in [0, seq_len) of their
    step, tokens first, unique within a step: docs/design.md, validation/common.py check_top_k_rows),
    checked with ``debug=True``; outside it the kernel stays in its buffers, its outputs unspecified.
    """
    if not isinstance(a.debug, bool):
        raise InputError(f"debug: must be True or False, got {a.debug!r}")
    shape = check_swap_multi_contract(**a.op_kwargs()) if a.debug else check_swap_multi_inputs.with_bound(a)
    _check_cuda_call(shape, a.host_cache, a.item_size_bytes)
    run = _kernel(resolve_pdl(a.pdl, shape.device), shape.record_plan)
    # On torch's current stream of the tensors' device (tvm-ffi passes it; the entry guards the device).
    run(*ARGS.cpp_values(a))


__all__ = ["swap_multi_step", "kernel_spec", "kernel_specs", "resolve_pdl", "arch_supports_pdl"]
