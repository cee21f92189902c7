"""The host KV cache of the workloads: one host arena (of one kind of host memory, ``HostMemory``: how it
is allocated and on which NUMA node), shared by every case of a process.

Why a pool: a `distinct` case at batch 64 reads its misses from its own host rows, so its host cache
is 3-6 GB, and a case in the decode regime has one such pool per layer (up to the config's host-memory
budget, 48 GiB by default); pinning and filling that for every case (and every timing round) would
dominate the wall time of a sweep, while the kernels only ever read it. Its bytes depend on the row number
alone (row r holds the int64 words ``r * TOKEN_SCALE + w``, see ``fill_pattern``), so rows of a larger
arena are exactly the host cache of a smaller case: the pool keeps one arena of bytes, fills it with the
rows of the item size in use (again when another item size asks), grows it when a case needs more
(``reserve`` sizes it once for a whole sweep) and hands out views.

``offset_rows`` shifts the view: ``view[r]`` is pool row ``offset_rows + r``. A case's layers sit at
their own offsets (each layer's rows in memory of its own), and timing rounds after the first shift the
whole case to read the same logical rows from other physical pages; a workload fills its device rows from
the pattern of the rows it really reads (``offset_rows + r``), so every layer and round is checkable.

One arena at a time: a view or reservation of another kind of memory releases the arena of the previous one
(freed once no view holds it) before allocating, since a sweep of pools of tens of GiB per kind cannot hold
two on a 128 GiB node; the sweep runs the cases of one kind together (config.sweep_order). Arenas are
kept per device type (the reference backend's pageable arena and a CUDA one are different memory).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hisparse.bench import host_alloc
from hisparse.bench.host_memory import HostMemory

GROWTH = 1.5  # a larger case allocates 1.5x what it needs (below GROWTH_LIMIT_BYTES), so a sweep re-allocates rarely
GROWTH_LIMIT_BYTES = 8 << 30  # above this, exactly what is needed (tens of GiB pinned: no slack)
ALIGN_BYTES = 1 << 21

Fill = Callable[[torch.Tensor, torch.Tensor, int, torch.device], None]


def kv_shape(rows: int, item_size_bytes: int) -> tuple[tuple[int, int], torch.dtype]:
    """Rows of int64 words when the item is a multiple of 8 bytes, else rows of bytes."""
    if item_size_bytes % 8 == 0:
        return (rows, item_size_bytes // 8), torch.int64
    return (rows, item_size_bytes), torch.uint8


@dataclass
class _Arena:
    allocation: host_alloc.HostAllocation
    item_size_bytes: int = 0  # the rows it holds now (0: none yet)
    filled_rows: int = 0

    @property
    def nbytes(self) -> int:
        return self.allocation.nbytes

    def rows(self, item_size_bytes: int) -> torch.Tensor:
        """The whole arena as rows of ``item_size_bytes`` (kv_shape)."""
        n = self.nbytes // item_size_bytes
        shape, dtype = kv_shape(n, item_size_bytes)
        return self.allocation.tensor[:n * item_size_bytes].view(dtype).view(shape)


class HostCachePool:
    """Host rows per item size, device-readable on CUDA; ``view`` returns ``rows`` rows of it."""

    def __init__(self, fill: Fill) -> None:
        self._fill = fill  # fill(dst, rows, item_size_bytes, device): the pattern of `rows` into dst, computed on device
        self._arenas: dict[tuple[str, HostMemory], _Arena] = {}
        self._lock = threading.Lock()

    def view(self, rows: int, item_size_bytes: int, device: torch.device, *, offset_rows: int = 0,
             memory: HostMemory = HostMemory()) -> torch.Tensor:
        if rows < 1 or offset_rows < 0:
            raise ValueError(f"host cache: need rows >= 1 and offset_rows >= 0, got {rows}, {offset_rows}")
        need = offset_rows + rows
        with self._lock:
            arena = self._arena(need * item_size_bytes, device, memory, grow=True)
            if arena.item_size_bytes != item_size_bytes:
                arena.item_size_bytes, arena.filled_rows = item_size_bytes, 0
            table = arena.rows(item_size_bytes)
            if arena.filled_rows < need:
                lo = arena.filled_rows
                self._fill(table[lo:need], torch.arange(lo, need), item_size_bytes, device)
                arena.filled_rows = need
            return table[offset_rows:need]

    def reserve(self, nbytes: int, device: torch.device, memory: HostMemory = HostMemory()) -> int:
        """Make the arena at least ``nbytes`` (a sweep's largest case, before its first case): one
        allocation instead of one per larger case. Returns the arena's size."""
        with self._lock:
            return self._arena(nbytes, device, memory, grow=False).nbytes

    def info(self, device: torch.device, memory: HostMemory) -> dict:
        """What the allocation of ``memory``'s arena asked and got (``HostAllocation.info``, its size), {} for none."""
        arena = self._arenas.get((device.type, memory))
        return {**arena.allocation.info, "nbytes": arena.nbytes} if arena is not None else {}

    def _arena(self, nbytes: int, device: torch.device, memory: HostMemory, *, grow: bool) -> _Arena:
        key = (device.type, memory)
        for other in [k for k in self._arenas if k[0] == device.type and k != key]:
            del self._arenas[other]  # one kind of memory at a time (module docstring)
        arena = self._arenas.get(key)
        if arena is None or arena.nbytes < nbytes:
            self._arenas.pop(key, None)
            arena = None  # drop the smaller arena (freed once no view holds it) before allocating the larger
            size = nbytes if not grow or nbytes > GROWTH_LIMIT_BYTES or nbytes <= 1 << 20 else int(nbytes * GROWTH)
            size = -(-size // ALIGN_BYTES) * ALIGN_BYTES
            arena = _Arena(host_alloc.allocate(size, memory.kind, device, numa=memory.numa))
            self._arenas[key] = arena
        return arena

    def clear(self) -> None:
        """Release every arena (the next case allocates again)."""
        with self._lock:
            self._arenas.clear()

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arenas.values())
