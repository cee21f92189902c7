"""Host memory for the KV pools: how the bytes a swap reads from the host are allocated.

``allocate(nbytes, kind, device)`` returns a ``HostAllocation``: a flat uint8 CPU tensor over memory the
device can read (zero-copy, through its UVA address), freed when the last tensor over it is gone.

Kinds (``HOST_ALLOCATIONS``):
- ``pinned``: ``cudaHostAlloc``, what ``torch.empty(..., pin_memory=True)`` does, without torch's caching
  host allocator, which rounds every allocation up to a power of two (48 GiB asked = 64 GiB pinned; 96 GiB
  asked failed on a 128 GiB node, 2026-12-04) and keeps freed blocks for reuse.

On a device that is not CUDA (the reference backend) every kind is plain pageable memory (``pageable``).
"""
from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from hisparse.errors import HisparseError

HOST_ALLOCATIONS = ("pinned",)
DEFAULT_HOST_ALLOCATION = "pinned"


class HostAllocationError(HisparseError):
    """The OS or the driver could not give the memory of a kind (the case is skipped with the reason)."""


@dataclass
class HostAllocation:
    """``nbytes`` of host memory of ``kind``; ``tensor`` is a flat uint8 view of all of it. ``info``: what
    was asked and got (page size, counts), for the run file's environment."""

    kind: str
    nbytes: int
    tensor: torch.Tensor
    info: dict[str, Any] = field(default_factory=dict)


_cudart: ctypes.CDLL | None = None


def cudart() -> ctypes.CDLL:
    """The CUDA runtime library torch loaded (the same one its kernels use: one primary context)."""
    global _cudart
    if _cudart is None:
        torch.cuda.init()
        path = None
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libcudart.so" in line:
                    path = line.split()[-1]
                    break
        _cudart = ctypes.CDLL(path or "libcudart.so")
    return _cudart


def check(status: int, what: str) -> None:
    if status != 0:
        lib = cudart()
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        raise HostAllocationError(f"{what}: CUDA error {status} ({lib.cudaGetErrorString(status).decode()})")


def wrap(ptr: int, nbytes: int, free: Callable[[int], None]) -> torch.Tensor:
    """A flat uint8 CPU tensor over ``nbytes`` at ``ptr``; ``free(ptr)`` runs once no tensor uses it.

    A ctypes array at the address exports the buffer torch.frombuffer wraps; the tensor's storage holds
    that array, and the array (a Python subclass, so it takes weak references) frees the memory when it
    is collected."""
    array_type = type("HostBytes", (ctypes.c_uint8 * nbytes,), {})
    array = array_type.from_address(ptr)
    weakref.finalize(array, free, ptr)
    return torch.frombuffer(array, dtype=torch.uint8)


def _pinned(nbytes: int) -> HostAllocation:
    lib = cudart()
    ptr = ctypes.c_void_p()
    check(lib.cudaHostAlloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes), ctypes.c_uint(0)),
          f"cudaHostAlloc of {nbytes} bytes")
    tensor = wrap(ptr.value, nbytes, lambda p: lib.cudaFreeHost(ctypes.c_void_p(p)))
    return HostAllocation("pinned", nbytes, tensor, {"api": "cudaHostAlloc"})


_ALLOCATORS: dict[str, Callable[[int], HostAllocation]] = {"pinned": _pinned}


def allocate(nbytes: int, kind: str = DEFAULT_HOST_ALLOCATION, device: torch.device | str = "cuda") -> HostAllocation:
    """``nbytes`` (>= 1) of host memory of ``kind`` that ``device`` reads; pageable memory off CUDA."""
    if kind not in _ALLOCATORS:
        raise HostAllocationError(f"host_alloc: {kind!r} is not allowed; allowed: {', '.join(HOST_ALLOCATIONS)}")
    if nbytes < 1:
        raise HostAllocationError(f"host_alloc: nbytes must be >= 1, got {nbytes}")
    if torch.device(device).type != "cuda":
        return HostAllocation("pageable", nbytes, torch.empty(nbytes, dtype=torch.uint8))
    return _ALLOCATORS[kind](nbytes)


__all__ = ["DEFAULT_HOST_ALLOCATION", "HOST_ALLOCATIONS", "HostAllocation", "HostAllocationError", "allocate",
           "cudart", "wrap"]
