"""Which NUMA node a host pool's pages come from, relative to the GPU that reads them.

``host_numa`` (a case parameter, hisparse/bench/case.py) is one of ``HOST_NUMA_PLACEMENTS``:
- ``any``: no policy (the kernel's default: the node of the CPU that first touches a page);
- ``local``: the GPU's own node (``/sys/bus/pci/devices/<bus id>/numa_node``);
- ``remote``: the nearest other node with memory (smallest distance in the node's ``distance`` row).

``local`` and ``remote`` need a machine with more than one memory node and a GPU whose PCI device names
its node; elsewhere ``node_for`` raises HostAllocationError with the reason, and the case is skipped.
Everything is read from sysfs under ``root`` (tests point it at a fake tree).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hisparse.bench.host_memory import DEFAULT_HOST_NUMA, HOST_NUMA_PLACEMENTS
from hisparse.errors import HostAllocationError

SYSFS = Path("/sys")


@dataclass(frozen=True)
class Topology:
    """The memory nodes of the machine (with their distance rows) and the GPU's node (None: unknown)."""

    nodes: tuple[int, ...]
    distances: dict[int, tuple[int, ...]]
    gpu_node: int | None
    gpu_bus_id: str | None = None

    def to_dict(self) -> dict:
        return {"nodes": list(self.nodes), "gpu_node": self.gpu_node, "gpu_bus_id": self.gpu_bus_id}


def parse_node_list(text: str) -> tuple[int, ...]:
    """sysfs's node list syntax: ``0``, ``0-1``, ``0,2-3`` (empty: none)."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return tuple(out)


def sysfs_bus_id(bus_id: str) -> str:
    """cudaDeviceGetPCIBusId's ``00000000:19:00.0`` as sysfs spells it: ``0000:19:00.0``."""
    domain, bus, rest = bus_id.strip().lower().split(":")
    return f"{int(domain, 16):04x}:{bus}:{rest}"


def read_topology(gpu_bus_id: str | None, root: Path = SYSFS) -> Topology:
    node_dir = root / "devices/system/node"
    try:
        nodes = parse_node_list((node_dir / "has_memory").read_text())
    except OSError:  # no NUMA in the kernel: one node
        nodes = (0,)
    distances = {}
    for n in nodes:
        try:
            distances[n] = tuple(int(x) for x in (node_dir / f"node{n}/distance").read_text().split())
        except OSError:
            distances[n] = ()
    gpu_node = None
    if gpu_bus_id is not None:
        try:
            value = int((root / "bus/pci/devices" / sysfs_bus_id(gpu_bus_id) / "numa_node").read_text())
            gpu_node = value if value >= 0 else None  # -1: the platform names no node
        except (OSError, ValueError):
            pass
    return Topology(nodes, distances, gpu_node, gpu_bus_id)


def node_for(placement: str, topology: Topology) -> int | None:
    """The node to bind a pool to for ``placement`` (None for ``any``; the caller has checked the choice:
    host_alloc.check_choice), or HostAllocationError saying why this machine has no such node."""
    if placement == DEFAULT_HOST_NUMA:
        return None
    if len(topology.nodes) < 2:
        raise HostAllocationError(f"host_numa={placement}: this machine has one memory node "
                                  f"({', '.join(map(str, topology.nodes))}); local and remote need two or more")
    gpu = topology.gpu_node
    if gpu is None or gpu not in topology.nodes:
        raise HostAllocationError(f"host_numa={placement}: the GPU's PCI device ({topology.gpu_bus_id}) names no "
                                  f"memory node (numa_node = -1 or unreadable); nodes: {list(topology.nodes)}")
    if placement == "local":
        return gpu
    row = topology.distances.get(gpu, ())
    others = [n for n in topology.nodes if n != gpu]
    return min(others, key=lambda n: (row[n] if n < len(row) else 1 << 30, n))


__all__ = ["DEFAULT_HOST_NUMA", "HOST_NUMA_PLACEMENTS", "Topology", "node_for", "parse_node_list",
           "read_topology", "sysfs_bus_id"]
