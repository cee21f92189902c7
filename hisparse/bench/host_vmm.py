"""The ``vmm`` host pool: host memory from the driver's virtual memory management API (``cuMemCreate`` at
``CU_MEM_LOCATION_TYPE_HOST`` or ``HOST_NUMA``, ``cuMemAddressReserve`` + ``cuMemMap``, ``cuMemSetAccess``
for the device and the CPU), at the larger of the minimum and recommended granularity the driver reports.

How the driver API is reached: a small C++ entry beside the kernels (csrc/host_vmm.cuh), built and loaded
through the project's one loader (hisparse/kernels/jit.py) like every kernel, not cuda-python /
cuda-bindings. Why: no new dependency (the GPU node has no network, and a carried wheel counts against
its 64 MiB); the driver's structs are laid out by cuda.h and checked by the compiler, not retyped in
ctypes; and the module can travel to the node in a prebuilt JIT cache like the kernels. It takes the
driver's functions from the runtime (cudaGetDriverEntryPointByVersion) instead of linking -lcuda, so the
loader needs no new flag and a CPU machine without libcuda (or the toolkit's stub of it) still builds it.
"""
from __future__ import annotations

from dataclasses import dataclass

from hisparse.errors import HostAllocationError
from hisparse.kernels import jit

MAP_SPEC = jit.KernelSpec(op="host_vmm", entry="hisparse::vmm_map_entry")
UNMAP_SPEC = jit.KernelSpec(op="host_vmm", entry="hisparse::vmm_unmap_entry")
SPECS = (MAP_SPEC, UNMAP_SPEC)
# CU_POINTER_ATTRIBUTE_MEMORY_TYPE values (cuda.h CUmemorytype)
MEMORY_TYPES = {1: "host", 2: "device", 3: "array", 4: "unified"}


@dataclass(frozen=True)
class VmmMapping:
    """What ``map_host`` mapped: ``address`` (host and device), ``size`` (rounded up to ``granularity``),
    the driver's two granularities and its memory type for the address."""

    address: int
    size: int
    granularity_minimum: int
    granularity_recommended: int
    memory_type: str

    @property
    def granularity(self) -> int:
        return max(self.granularity_minimum, self.granularity_recommended)

    def info(self) -> dict:
        return {"api": "cuMemCreate+cuMemMap", "mapped_bytes": self.size, "page_bytes": self.granularity,
                "granularity_minimum": self.granularity_minimum,
                "granularity_recommended": self.granularity_recommended, "driver_memory_type": self.memory_type}


def map_host(nbytes: int, device_index: int, node: int | None) -> VmmMapping:
    """Map ``nbytes`` of host memory (on ``node``, or anywhere for None) readable by device ``device_index``."""
    try:
        out = [int(v) for v in jit.load(MAP_SPEC).run(nbytes, device_index, -1 if node is None else node)]
    except Exception as e:  # noqa: BLE001 (the driver's refusal, or no module: the case is skipped with it)
        raise HostAllocationError(f"host_alloc=vmm: {type(e).__name__}: {e}") from e
    address, size, minimum, recommended, memory_type = out
    return VmmMapping(address, size, minimum, recommended, MEMORY_TYPES.get(memory_type, str(memory_type)))


def unmap(address: int, size: int) -> None:
    jit.load(UNMAP_SPEC).run(address, size)


__all__ = ["MAP_SPEC", "SPECS", "UNMAP_SPEC", "VmmMapping", "map_host", "unmap"]
