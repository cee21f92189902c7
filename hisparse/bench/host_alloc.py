"""Host memory for the KV pools: how the bytes a swap reads from the host are allocated.

``allocate(nbytes, kind, device)`` returns a ``HostAllocation``: a flat uint8 CPU tensor over memory the
device can read (zero-copy, through its UVA address), freed when the last tensor over it is gone.

Kinds (``HOST_ALLOCATIONS``; the ``host_alloc`` case parameter, docs/host-alloc.md says what each needs
from the OS):
- ``pinned``: ``cudaHostAlloc``, what ``torch.empty(..., pin_memory=True)`` does, without torch's caching
  host allocator, which rounds every allocation up to a power of two (48 GiB asked = 64 GiB pinned; 96 GiB
  asked failed on a 128 GiB node, 2026-12-04) and keeps freed blocks for reuse.
- ``registered``: anonymous ``mmap`` (4 KiB pages) registered with ``cudaHostRegister``: what an engine
  does when it allocates its pool itself.
- ``hugetlb-2m`` / ``hugetlb-1g``: ``mmap(MAP_HUGETLB | MAP_HUGE_2MB / MAP_HUGE_1GB)``, then
  ``cudaHostRegister``; the pages come from the kernel's reserved pool (hisparse/bench/hugepages.py), and
  an empty pool is a HostAllocationError naming the shortfall.
- ``vmm``: ``cuMemCreate`` with a host location, mapped with ``cuMemMap`` (hisparse/bench/host_vmm.py).

``numa`` (the ``host_numa`` case parameter, hisparse/bench/host_numa.py): ``local`` / ``remote`` bind the
pages to the GPU's node or another one: ``mbind`` of the mapping before its first touch (the registration
faults the pages in), the HOST_NUMA location for ``vmm``. ``pinned`` takes no node (cudaHostAlloc places
its pages itself).

The mmap paths take a ``Registrar`` (register / unregister a range with the device), so the CPU tests run
them with the CUDA step replaced. On a device that is not CUDA (the reference backend) every kind is plain
pageable memory (``pageable``).
"""
from __future__ import annotations

import ctypes
import mmap
import os
import platform
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from hisparse.bench import host_numa, hugepages
from hisparse.bench.host_memory import (DEFAULT_HOST_ALLOCATION, DEFAULT_HOST_NUMA, HOST_ALLOCATIONS,
                                        HOST_NUMA_PLACEMENTS, HostMemory)
from hisparse.errors import HostAllocationError

BASE_PAGE_BYTES = mmap.PAGESIZE
MAP_HUGETLB = getattr(mmap, "MAP_HUGETLB", 0x40000)  # linux/mman.h (Python >= 3.13 names it)
MAP_HUGE_SHIFT = 26  # the huge page size's log2 sits in bits 26.. of the flags
MPOL_BIND = 2
SYS_MBIND = {"x86_64": 237, "aarch64": 235}  # linux/unistd.h; glibc has no mbind wrapper (libnuma does)


@dataclass
class HostAllocation:
    """``nbytes`` of host memory of ``kind``; ``tensor`` is a flat uint8 view of all of it. ``info``: what
    was asked and got (API, page size, NUMA node, the driver's view of the pointer), for the run file."""

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


# ---------------------------------------------------------------------------------------------
# pinned


def _pinned(nbytes: int, device_index: int, node: int | None) -> HostAllocation:
    lib = cudart()
    ptr = ctypes.c_void_p()
    check(lib.cudaHostAlloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes), ctypes.c_uint(0)),
          f"cudaHostAlloc of {nbytes} bytes")
    tensor = wrap(ptr.value, nbytes, lambda p: lib.cudaFreeHost(ctypes.c_void_p(p)))
    return HostAllocation("pinned", nbytes, tensor, {"api": "cudaHostAlloc"})


# ---------------------------------------------------------------------------------------------
# mmap + cudaHostRegister (registered, hugetlb-*)


@dataclass(frozen=True)
class Registrar:
    """How a mapped range becomes device-readable and stops being so: ``cudaHostRegister`` /
    ``cudaHostUnregister`` (``CUDA_REGISTRAR``); the CPU tests pass a fake that records the calls."""

    register: Callable[[int, int], None]  # (address, bytes); raises HostAllocationError
    unregister: Callable[[int], None]


def _cuda_register(ptr: int, nbytes: int) -> None:
    # Flags 0 (cudaHostRegisterDefault): with unified addressing the device reads the range at its host
    # address, as it reads cudaHostAlloc's; registration pins (and so faults in) every page.
    check(cudart().cudaHostRegister(ctypes.c_void_p(ptr), ctypes.c_size_t(nbytes), ctypes.c_uint(0)),
          f"cudaHostRegister of {nbytes} bytes (pinning needs CAP_IPC_LOCK or a large enough `ulimit -l`)")


def _cuda_unregister(ptr: int) -> None:
    cudart().cudaHostUnregister(ctypes.c_void_p(ptr))


CUDA_REGISTRAR = Registrar(_cuda_register, _cuda_unregister)

_libc: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
        lib.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        lib.syscall.restype = ctypes.c_long
        _libc = lib
    return _libc


def page_bytes_of(kind: str) -> int:
    return hugepages.PAGE_BYTES.get(kind, BASE_PAGE_BYTES)


def mmap_flags(page_bytes: int) -> int:
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    if page_bytes != BASE_PAGE_BYTES:
        flags |= MAP_HUGETLB | ((page_bytes.bit_length() - 1) << MAP_HUGE_SHIFT)
    return flags


def mbind(ptr: int, nbytes: int, node: int) -> None:
    """Bind the pages of [ptr, ptr+nbytes) to NUMA node ``node`` (MPOL_BIND; before their first touch)."""
    number = SYS_MBIND.get(platform.machine())
    if number is None:
        raise HostAllocationError(f"host_numa: mbind's system call number on {platform.machine()} is unknown; "
                                  f"known: {', '.join(SYS_MBIND)}")
    words = node // 64 + 1
    mask = (ctypes.c_ulong * words)()
    mask[node // 64] = 1 << (node % 64)
    # maxnode is one more than the bits the kernel reads (it decrements it: a historic off-by-one)
    rc = libc().syscall(ctypes.c_long(number), ctypes.c_void_p(ptr), ctypes.c_ulong(nbytes), ctypes.c_int(MPOL_BIND),
                        mask, ctypes.c_ulong(words * 64 + 1), ctypes.c_uint(0))
    if rc != 0:
        err = ctypes.get_errno()
        raise HostAllocationError(f"host_numa: mbind of {nbytes} bytes to node {node}: {os.strerror(err)}")


def map_host(nbytes: int, kind: str, *, node: int | None = None,
             registrar: Registrar = CUDA_REGISTRAR) -> HostAllocation:
    """``nbytes`` of anonymous memory in pages of ``kind`` (``registered``: base pages; ``hugetlb-*``: huge
    pages), bound to ``node`` if given, then registered; unmapped again if any step fails."""
    page = page_bytes_of(kind)
    size = -(-nbytes // page) * page
    lib = libc()
    ptr = lib.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap_flags(page), -1, 0)
    if ptr is None or ptr == ctypes.c_void_p(-1).value:
        err = ctypes.get_errno()
        why = hugepages.shortfall(kind, size) if kind in hugepages.PAGE_BYTES else f"{size} bytes"
        raise HostAllocationError(f"host_alloc={kind}: mmap failed ({os.strerror(err)}): {why}")
    try:
        if node is not None:
            mbind(ptr, size, node)
        registrar.register(ptr, size)
    except BaseException:
        lib.munmap(ctypes.c_void_p(ptr), size)
        raise

    def free(p: int) -> None:
        registrar.unregister(p)
        lib.munmap(ctypes.c_void_p(p), size)

    info = {"api": "mmap+cudaHostRegister", "page_bytes": page, "mapped_bytes": size}
    return HostAllocation(kind, nbytes, wrap(ptr, nbytes, free), info)


def _mapped(kind: str) -> Callable[[int, int, int | None], HostAllocation]:
    return lambda nbytes, device_index, node: map_host(nbytes, kind, node=node)


def _vmm(nbytes: int, device_index: int, node: int | None) -> HostAllocation:
    from hisparse.bench import host_vmm  # noqa: PLC0415 (loads a JIT-built module: only when asked)

    mapping = host_vmm.map_host(nbytes, device_index, node)
    tensor = wrap(mapping.address, nbytes, lambda p: host_vmm.unmap(p, mapping.size))
    return HostAllocation("vmm", nbytes, tensor, mapping.info())


_ALLOCATORS: dict[str, Callable[[int, int, int | None], HostAllocation]] = {
    "pinned": _pinned, "registered": _mapped("registered"), "hugetlb-2m": _mapped("hugetlb-2m"),
    "hugetlb-1g": _mapped("hugetlb-1g"), "vmm": _vmm,
}


# ---------------------------------------------------------------------------------------------
# The entry point


def check_choice(kind: str, numa: str) -> None:
    """HostAllocationError naming the parameter when ``kind`` / ``numa`` is not a choice or not a pair."""
    if kind not in _ALLOCATORS:
        raise HostAllocationError(f"host_alloc: {kind!r} is not allowed; allowed: {', '.join(HOST_ALLOCATIONS)}")
    if numa not in HOST_NUMA_PLACEMENTS:
        raise HostAllocationError(f"host_numa: {numa!r} is not allowed; allowed: {', '.join(HOST_NUMA_PLACEMENTS)}")
    if (why := HostMemory(kind, numa).problem()) is not None:
        raise HostAllocationError(why)


def gpu_bus_id(device_index: int) -> str | None:
    """The PCI bus id of CUDA device ``device_index`` (cudaDeviceGetPCIBusId), None if unreadable."""
    buf = ctypes.create_string_buffer(64)
    if cudart().cudaDeviceGetPCIBusId(buf, ctypes.c_int(64), ctypes.c_int(device_index)) != 0:
        return None
    return buf.value.decode()


def numa_node(numa: str, device_index: int) -> int | None:
    """The node ``numa`` means next to CUDA device ``device_index`` (None for ``any``)."""
    if numa == DEFAULT_HOST_NUMA:
        return None
    return host_numa.node_for(numa, host_numa.read_topology(gpu_bus_id(device_index)))


def pointer_info(ptr: int) -> dict[str, Any]:
    """What the driver says of a host pointer (cudaPointerGetAttributes): its memory type and whether the
    device reads it at the host address."""

    class _Attributes(ctypes.Structure):
        # driver_types.h of CUDA 13 ends the struct with `long reserved[8]`: without it the runtime writes
        # 64 bytes past the buffer (on the H200 node that corrupted the interpreter's heap: a segfault later)
        _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int), ("devicePointer", ctypes.c_void_p),
                    ("hostPointer", ctypes.c_void_p), ("reserved", ctypes.c_long * 8)]

    attrs = _Attributes()
    if cudart().cudaPointerGetAttributes(ctypes.byref(attrs), ctypes.c_void_p(ptr)) != 0:
        cudart().cudaGetLastError()  # the failed query must not stay the thread's sticky-free last error
        return {}
    names = {0: "unregistered", 1: "host", 2: "device", 3: "managed"}
    return {"memory_type": names.get(attrs.type, str(attrs.type)),
            "device_pointer_is_host_pointer": attrs.devicePointer == attrs.hostPointer == ptr}


def allocate(nbytes: int, kind: str = DEFAULT_HOST_ALLOCATION, device: torch.device | str = "cuda", *,
             numa: str = DEFAULT_HOST_NUMA) -> HostAllocation:
    """``nbytes`` (>= 1) of host memory of ``kind`` on NUMA placement ``numa`` that ``device`` reads;
    pageable memory off CUDA. HostAllocationError (with the OS's or driver's reason) when it cannot be had."""
    check_choice(kind, numa)
    if nbytes < 1:
        raise HostAllocationError(f"host_alloc: nbytes must be >= 1, got {nbytes}")
    dev = torch.device(device)
    if dev.type != "cuda":
        return HostAllocation("pageable", nbytes, torch.empty(nbytes, dtype=torch.uint8))
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    node = numa_node(numa, index)
    allocation = _ALLOCATORS[kind](nbytes, index, node)
    allocation.info.update(numa=numa, numa_node=node, **pointer_info(allocation.tensor.data_ptr()))
    return allocation


__all__ = ["CUDA_REGISTRAR", "DEFAULT_HOST_ALLOCATION", "HOST_ALLOCATIONS", "HostAllocation",
           "HostAllocationError", "Registrar", "allocate", "check_choice", "cudart", "gpu_bus_id", "map_host", "mbind", "wrap"]
