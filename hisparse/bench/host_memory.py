"""Where a case's host KV pool lives: how it is allocated (``host_alloc``) and on which NUMA node
(``host_numa``), two case parameters apart from the workload, so that every workload runs on every kind
of memory. The choices are decided here, once; hisparse/bench/host_alloc.py allocates them,
hisparse/bench/host_numa.py finds the nodes. Torch-free (the CLI lists cases without torch).
"""
from __future__ import annotations

from dataclasses import dataclass

HOST_ALLOCATIONS = ("pinned", "registered", "hugetlb-2m", "hugetlb-1g", "vmm")
DEFAULT_HOST_ALLOCATION = "pinned"
HOST_NUMA_PLACEMENTS = ("any", "local", "remote")
DEFAULT_HOST_NUMA = "any"
# The kinds whose pages can be put on a node (mbind before first touch, or vmm's HOST_NUMA location);
# cudaHostAlloc (pinned) places its pages itself.
NUMA_PLACEABLE = ("registered", "hugetlb-2m", "hugetlb-1g", "vmm")


@dataclass(frozen=True)
class HostMemory:
    """One kind of host memory: what the process-wide pool keeps one arena of (hisparse/bench/host_cache.py)."""

    kind: str = DEFAULT_HOST_ALLOCATION
    numa: str = DEFAULT_HOST_NUMA

    @property
    def label(self) -> str:
        """``registered`` or ``registered/remote``: the key of its allocation info in a run file."""
        return self.kind if self.numa == DEFAULT_HOST_NUMA else f"{self.kind}/{self.numa}"

    def problem(self) -> str | None:
        """Why this pair is no choice at all (a prune reason), or None."""
        if self.numa != DEFAULT_HOST_NUMA and self.kind not in NUMA_PLACEABLE:
            return (f"host_numa={self.numa} needs a host_alloc that places its pages ({', '.join(NUMA_PLACEABLE)}); "
                    f"{self.kind} takes host_numa={DEFAULT_HOST_NUMA} only")
        return None


__all__ = ["DEFAULT_HOST_ALLOCATION", "DEFAULT_HOST_NUMA", "HOST_ALLOCATIONS", "HOST_NUMA_PLACEMENTS", "NUMA_PLACEABLE",
           "HostMemory"]
