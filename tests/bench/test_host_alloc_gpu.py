"""GPU tests of the host-memory axis (issue 37): the bare gather (gather_floor) reads the rows of every
``host_alloc`` byte-exactly, and a small decode-regime case of every kind runs through run_case with status
ok. ``hugetlb-*`` skip with the pool's numbers where no huge pages are reserved, ``host_numa`` local/remote
on a one-node machine; pinned, registered and vmm must work on any CUDA machine.

Run on the GPU node: ``pytest -q -m gpu tests/bench/test_host_alloc_gpu.py``.
"""
from __future__ import annotations

import pytest
import torch

from _gpu import DEVICE, GPU_ONLY
from hisparse.bench.host_memory import HOST_ALLOCATIONS, NUMA_PLACEABLE
from hisparse.errors import HostAllocationError

pytestmark = GPU_ONLY

MAY_BE_MISSING = ("hugetlb-2m", "hugetlb-1g")  # the OS may have no pages reserved: skip, with its reason


def allocate_or_skip(nbytes: int, kind: str, numa: str = "any"):
    from hisparse.bench import host_alloc

    try:
        return host_alloc.allocate(nbytes, kind, DEVICE, numa=numa)
    except HostAllocationError as e:
        if kind in MAY_BE_MISSING or numa != "any":
            pytest.skip(str(e))
        raise


@pytest.mark.parametrize("kind", HOST_ALLOCATIONS)
@pytest.mark.parametrize("item", [576, 100])
def test_the_bare_gather_reads_every_kind_byte_exactly(kind, item):
    from hisparse.kernels.ops.gather_floor import gather_floor

    rows = (64 << 20) // item
    a = allocate_or_skip(rows * item, kind)
    g = torch.Generator().manual_seed(37)
    host = a.tensor[:rows * item]
    host.copy_(torch.randint(0, 256, (rows * item,), generator=g, dtype=torch.uint8))
    assert host.is_pinned(), f"{kind}: torch does not see the memory as pinned ({a.info})"
    src = torch.randperm(rows, generator=g)[:5000]
    src[0] = rows - 1  # the very last row of the allocation
    dst = torch.randperm(6000, generator=g)[:5000].to(torch.int32)
    device_buffer = torch.zeros(6000 * item, dtype=torch.uint8, device=DEVICE)
    gather_floor(src_rows=src.to(DEVICE), dst_rows=dst.to(DEVICE), host_cache=host, device_buffer=device_buffer,
                 item_size_bytes=item)
    got = device_buffer.view(6000, item)[dst.long().to(DEVICE)].cpu()
    assert torch.equal(got, host.view(rows, item)[src]), f"{kind}: {a.info}"


@pytest.mark.parametrize("numa", ["local", "remote"])
@pytest.mark.parametrize("kind", NUMA_PLACEABLE)
def test_numa_placed_memory_is_read_byte_exactly(kind, numa):
    from hisparse.kernels.ops.gather_floor import gather_floor

    a = allocate_or_skip(32 << 20, kind, numa)
    assert a.info["numa_node"] is not None
    rows = (32 << 20) // 576
    a.tensor.copy_(torch.arange(a.tensor.numel(), dtype=torch.int64).remainder(251).to(torch.uint8))
    src = torch.arange(0, rows, 7)
    device_buffer = torch.zeros(src.numel() * 576, dtype=torch.uint8, device=DEVICE)
    gather_floor(src_rows=src.to(DEVICE), dst_rows=torch.arange(src.numel(), dtype=torch.int32, device=DEVICE),
                 host_cache=a.tensor, device_buffer=device_buffer, item_size_bytes=576)
    assert torch.equal(device_buffer.view(-1, 576).cpu(), a.tensor.view(rows, 576)[src])


@pytest.mark.parametrize("kind", HOST_ALLOCATIONS)
def test_a_decode_case_of_every_kind_runs_ok(kind):
    from hisparse.bench import measure
    from hisparse.bench.backends import get_backend
    from hisparse.bench.case import Case
    from hisparse.bench.floors import measure_pinned_h2d
    from hisparse.bench.workload import HOST_POOL

    backend = get_backend("cuda")
    case = Case("multi_step", "serving", {"context_min": 16384, "context_max": 16384, "positions": "chunks",
                                          "layers": 3}, batch=8, host_alloc=kind,
                timing={"calls_per_graph": 6, "warmup_calls": 2, "check_calls": 3, "replays": 10})
    try:
        r = measure.run_case(case, backend, floors=measure_pinned_h2d(backend.device, nbytes=64 << 20))
    finally:
        HOST_POOL.clear()
    if r.status == "skipped" and kind in MAY_BE_MISSING:
        pytest.skip(r.reason)
    assert r.status == "ok", r.reason
    assert r.floor["gather_floor_us"] and r.floor["gather_warm_us"]
