"""GPU tests of the bare gather, the in-run floor (hisparse/kernels/ops/gather_floor.py), byte-exact against
hisparse.kernels.reference.bytes.copy_rows.

Both paths are covered: the flat 16-byte-chunk gather (item % 16 == 0 and 16-B aligned buffers) and the
byte-exact warp-per-row fallback (any other size, or a host buffer starting at an odd byte), for every
item size the project uses, every loads-in-flight instantiation and several grid shapes. The rows used
end exactly at the last row of each buffer, so an off-by-one row would read or write out of bounds.

Run on a GPU machine: ``pytest -q tests/test_gather_floor_gpu.py``.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest
import torch

from hisparse.errors import InputError
from _gpu import DEVICE, GPU_ONLY, ITEM_SIZES, capture_allocation, pinned_bytes

pytestmark = GPU_ONLY



LOADS = (1, 2, 4, 8)


@pytest.fixture(scope="module", autouse=True)
def built_kernels():
    from hisparse.kernels import jit
    from hisparse.kernels.ops.gather_floor import kernel_spec

    jit.build_many([kernel_spec(loads_in_flight=n) for n in LOADS], jobs=os.cpu_count())


@dataclass(frozen=True)
class Gather:
    seed: int
    n: int
    item: int
    loads_in_flight: int = 4
    num_blocks: int | None = None
    block_size: int = 256
    host_offset: int = 0
    contiguous_rows: bool = False  # src rows 0..n-1 in order (the harness's "contiguous" floor)

    def label(self) -> str:
        return (f"{self.seed}-n{self.n}-item{self.item}-lif{self.loads_in_flight}-grid{self.num_blocks}x"
                f"{self.block_size}-off{self.host_offset}{'-contig' if self.contiguous_rows else ''}")


def make_gather(c: Gather) -> dict:
    g = torch.Generator().manual_seed(c.seed)
    host_rows = max(1, c.n) + 3
    device_rows = c.n + 5
    if c.contiguous_rows:
        src = torch.arange(c.n, dtype=torch.int64)
    else:
        src = torch.randint(0, host_rows, (c.n,), generator=g)  # repeats allowed: reads only
    dst = torch.randperm(device_rows, generator=g)[: c.n]  # unique destinations
    if c.n:
        src[0] = host_rows - 1  # the last host row ...
        dst[dst == device_rows - 1] = dst[0].clone()
        dst[0] = device_rows - 1  # ... into the last device row
    host_bytes = torch.randint(0, 256, (c.host_offset + host_rows * c.item,), generator=g, dtype=torch.uint8)
    pinned = pinned_bytes(host_bytes)
    dev_gen = torch.Generator(device=DEVICE).manual_seed(c.seed)
    device_buffer = torch.randint(0, 256, (device_rows * c.item,), generator=dev_gen, dtype=torch.uint8, device=DEVICE)
    return dict(src_rows=src.to(DEVICE), dst_rows=dst.to(torch.int32).to(DEVICE), host_cache=pinned[c.host_offset:],
                device_buffer=device_buffer, item_size_bytes=c.item)


def check_gather(c: Gather) -> None:
    from hisparse.kernels.ops.gather_floor import gather_floor
    from hisparse.kernels.reference.bytes import copy_rows

    kw = make_gather(c)
    want = kw["device_buffer"].clone()
    gather_floor(**kw, num_blocks=c.num_blocks, block_size=c.block_size, loads_in_flight=c.loads_in_flight)
    torch.cuda.synchronize()
    copy_rows(kw["host_cache"], kw["src_rows"], want, kw["dst_rows"], c.item)
    got = kw["device_buffer"]
    if not torch.equal(got, want):
        diff = torch.nonzero(got != want).flatten()
        pytest.fail(f"[{c.label()}] {diff.numel()} bytes differ from copy_rows, first byte {int(diff[0])} "
                    f"(row {int(diff[0]) // c.item}, byte {int(diff[0]) % c.item} of the row)")


def cases() -> list[Gather]:
    rng = random.Random(3)
    out = []
    for item in ITEM_SIZES:
        for lif in LOADS:
            out.append(Gather(seed=len(out), n=rng.choice([1, 31, 782, 5000]), item=item, loads_in_flight=lif,
                              num_blocks=rng.choice([None, 1, 7, 528]), block_size=rng.choice([32, 256, 512]),
                              host_offset=rng.choice([0, 0, 3])))
    return out


CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.label() for c in CASES])
def test_gather_byte_exact(case):
    check_gather(case)


@pytest.mark.parametrize("item", [576, 1152])
def test_harness_floor_shapes(item):
    check_gather(Gather(seed=1, n=50_048, item=item))  # the harness's large gather (defaults)
    check_gather(Gather(seed=2, n=782, item=item, contiguous_rows=True))


def test_empty_gather_is_a_no_op():
    check_gather(Gather(seed=3, n=0, item=576))


def test_rejects_bad_arguments():
    from hisparse.kernels.ops.gather_floor import gather_floor

    kw = make_gather(Gather(seed=4, n=8, item=64))
    with pytest.raises(InputError, match="loads_in_flight"):
        gather_floor(**kw, loads_in_flight=3)
    with pytest.raises(InputError, match="block_size"):
        gather_floor(**kw, block_size=1024)
    with pytest.raises(InputError, match="dst_rows"):
        gather_floor(**{**kw, "dst_rows": kw["dst_rows"].to(torch.int64)})
    with pytest.raises(InputError, match="dst_rows"):
        gather_floor(**{**kw, "dst_rows": kw["dst_rows"].clone().fill_(10**6)}, debug=True)
    with pytest.raises(InputError, match="host_cache"):
        gather_floor(**{**kw, "host_cache": kw["host_cache"].clone()})  # pageable


def test_cuda_graph_replay_matches_eager():
    from hisparse.kernels.ops.gather_floor import gather_floor

    kw = make_gather(Gather(seed=5, n=3000, item=656))
    initial = kw["device_buffer"].clone()
    gather_floor(**kw)
    torch.cuda.synchronize()
    eager = kw["device_buffer"].clone()
    grew, g = capture_allocation(lambda: gather_floor(**kw))
    assert grew == 0, "the captured gather allocated device memory"
    kw["device_buffer"].copy_(initial)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(kw["device_buffer"], eager)
