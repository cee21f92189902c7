"""How a sweep holds its host memory: huge pages reserved at its start, one arena per kind of host memory
in turn, and what each asked for and got, for the run file's ``environment.host_memory``.

- Start (``HostSweep.start``, before the first case): for each ``hugetlb-*`` kind in the sweep, reserve the
  huge pages its largest case needs (hisparse/bench/hugepages.py): before the sweep's own arenas fragment
  memory. Also the NUMA topology next to the GPU (hisparse/bench/host_numa.py).
- Before the first case of each kind (``before``; the expansion runs a kind's cases together,
  config.sweep_order): give back the huge pages of the kinds already done, then allocate the kind's
  arena at its largest case (hisparse/bench/host_cache.py releases the previous kind's arena first). When
  that fails (say fewer huge pages than asked), the next smaller case's size is tried, and failing all, the
  cases allocate on their own and are skipped with the OS's reason (hisparse/bench/measure.py).
- ``finish``: every reservation given back.

Only on a kernel backend: the reference backend's pools are pageable memory of every kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hisparse.bench import hugepages
from hisparse.bench.host_memory import DEFAULT_HOST_NUMA, HostMemory


def case_host_bytes(case: Any) -> int:
    """Host bytes one case holds, its timing rounds' shift included."""
    from hisparse.bench import measure  # noqa: PLC0415
    from hisparse.bench.case import host_bytes  # noqa: PLC0415

    return host_bytes(case) + measure.round_host_offset_rows(case, case.rounds - 1) * case.item_size_bytes


def sizes_by_memory(cases: list) -> dict[HostMemory, list[int]]:
    """Per kind of host memory (in sweep order), the distinct host bytes of its cases, largest first."""
    out: dict[HostMemory, set[int]] = {}
    for c in cases:
        out.setdefault(c.host_memory, set()).add(case_host_bytes(c))
    return {m: sorted(sizes, reverse=True) for m, sizes in out.items()}


@dataclass
class HostSweep:
    """One sweep's host memory on ``device`` (a kernel backend's); ``info`` is ``environment.host_memory``."""

    cases: list
    device: str
    sysfs: Any = hugepages.SYSFS
    info: dict = field(default_factory=dict)
    _reservations: dict[str, hugepages.Reservation] = field(default_factory=dict)
    _current: HostMemory | None = None
    _sizes: dict[HostMemory, list[int]] = field(default_factory=dict)  # sizes_by_memory of the cases

    def start(self) -> dict:
        self._sizes = sizes = sizes_by_memory(self.cases)
        for kind in hugepages.PAGE_BYTES:
            need = max((s[0] for m, s in sizes.items() if m.kind == kind), default=0)
            if need:
                self._reservations[kind] = hugepages.reserve(kind, need, self.sysfs)
        if self._reservations:
            self.info["hugepages"] = {k: r.to_dict() for k, r in self._reservations.items()}
        if any(m.numa != DEFAULT_HOST_NUMA for m in sizes):
            self.info["numa"] = _topology(self.device)
        return self.info

    def before(self, case: Any) -> bool:
        """Ready the host memory of ``case``; True when ``info`` changed (a new arena was allocated)."""
        memory = case.host_memory
        if memory == self._current:
            return False
        self._current = memory
        later = {c.host_memory.kind for c in self.cases[self.cases.index(case):]}
        for kind in [k for k in self._reservations if k not in later]:
            _drop_arena()  # the pages go back only once unmapped
            hugepages.release(self._reservations.pop(kind), self.sysfs)
        got = reserve_arena(self._sizes[memory], self.device, memory)
        self.info.setdefault("allocations", {})[memory.label] = got
        return True

    def finish(self) -> None:
        if self._reservations:
            _drop_arena()
        for kind in list(self._reservations):
            hugepages.release(self._reservations.pop(kind), self.sysfs)


def reserve_arena(sizes: list[int], device: str, memory: HostMemory) -> dict:
    """Allocate ``memory``'s arena at the first of ``sizes`` (largest first) that the machine gives; its
    allocation info, or the reason none could be had (``error``)."""
    import torch  # noqa: PLC0415

    from hisparse.bench.workload import HOST_POOL  # noqa: PLC0415
    from hisparse.errors import HostAllocationError  # noqa: PLC0415

    dev = torch.device(device)
    error = None
    for size in sizes:
        try:
            HOST_POOL.reserve(size, dev, memory)
        except HostAllocationError as e:
            error = str(e)
            continue
        info = HOST_POOL.info(dev, memory)
        return {**info, "largest_case_bytes": sizes[0]} if size == sizes[0] else {**info, "error": error}
    return {"error": error, "largest_case_bytes": sizes[0]} if sizes else {}


def _drop_arena() -> None:
    import gc  # noqa: PLC0415

    from hisparse.bench.workload import HOST_POOL  # noqa: PLC0415

    HOST_POOL.clear()
    gc.collect()


def _topology(device: str) -> dict:
    import torch  # noqa: PLC0415

    from hisparse.bench import host_alloc, host_numa  # noqa: PLC0415

    dev = torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return host_numa.read_topology(host_alloc.gpu_bus_id(index)).to_dict()


__all__ = ["HostSweep", "case_host_bytes", "reserve_arena", "sizes_by_memory"]
