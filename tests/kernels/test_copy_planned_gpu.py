"""GPU tests of the planned copy kernel (hisparse/kernels/ops/copy_planned.py), byte-exact against the PyTorch
reference (hisparse/kernels/reference/copy_planned.py).

Each test draws a miss plan (rows of src host rows / dst device rows, a count per request, padding rows
past num_real_reqs holding garbage that must not be read), runs the kernel on one copy of the device
buffer and the reference on another, and requires the two buffers to be equal byte for byte (and the
plan tensors unchanged). The swap-recorded plan replay is tested in test_swap_single_gpu.py.

Run on a GPU machine: ``pytest -q tests/test_copy_planned_gpu.py``.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest
import torch

from hisparse.errors import InputError
from _gpu import DEVICE, GPU_ONLY, ITEM_SIZES, pinned_bytes, capture_allocation

pytestmark = GPU_ONLY



BLOCK_SIZES_TESTED = (1024, 256)


@pytest.fixture(scope="module", autouse=True)
def built_kernels():
    from hisparse.kernels import jit
    from hisparse.kernels.ops.copy_planned import kernel_spec

    jit.build_many([kernel_spec(block_size=b) for b in BLOCK_SIZES_TESTED], jobs=os.cpu_count())


@dataclass(frozen=True)
class Plan:
    seed: int
    batch: int
    width: int
    item: int
    num_real: int
    max_count: int  # counts drawn in [0, max_count]
    num_blocks: int = 8
    tiles: int = 0  # tiles_per_request: 0 = round-robin over the warps, >= 1 = request-major tasks
    block_size: int = 1024
    host_offset: int = 0  # misaligned host rows when not a multiple of 16
    wide_stride: bool = False  # plan tables as views with row stride > width

    def label(self) -> str:
        return (f"{self.seed}-b{self.batch}-w{self.width}-item{self.item}-real{self.num_real}-max{self.max_count}"
                f"-grid{self.num_blocks}x{self.block_size}-t{self.tiles}-off{self.host_offset}{'-wide' if self.wide_stride else ''}")


def make_plan(p: Plan) -> dict:
    g = torch.Generator().manual_seed(p.seed)
    counts = torch.randint(0, min(p.max_count, p.width) + 1, (p.batch,), generator=g)
    if p.num_real < p.batch:
        counts[p.num_real:] = 1 << 30  # garbage counts on padding rows: reading them would overrun
    live = int(counts[: p.num_real].sum())
    host_rows = 64 + min(live, 2048)
    device_rows = live + 7
    pad = 5 if p.wide_stride else 0
    src = torch.full((p.batch + 1, p.width + pad), -3, dtype=torch.int64)
    dst = torch.full((p.batch + 1, p.width + pad), -3, dtype=torch.int32)
    src[:, : p.width] = torch.randint(0, host_rows, (p.batch + 1, p.width), generator=g)
    # Destination rows unique over the live entries (one writer per row keeps the result defined);
    # the live rows end exactly at the buffer's last row, so a row off by one would fault.
    perm = torch.randperm(device_rows, generator=g)
    last = int(torch.argmax(perm))
    perm[[0, last]] = perm[[last, 0]]  # the first live entry writes the buffer's last row
    at = 0
    for r in range(p.num_real):
        c = int(counts[r])
        dst[r, :c] = perm[at: at + c].to(torch.int32)
        at += c
    if live:
        src[int(torch.nonzero(counts[: p.num_real])[0]), 0] = host_rows - 1  # and one reads the host's last row
    # Entries past each count, and padding rows, point far outside both buffers.
    for r in range(p.batch + 1):
        c = int(counts[r]) if r < p.num_real else 0
        src[r, c: p.width] = 1 << 40
        dst[r, c: p.width] = (1 << 31) - 1
    host_bytes = torch.randint(0, 256, (p.host_offset + host_rows * p.item,), generator=g, dtype=torch.uint8)
    pinned = pinned_bytes(host_bytes)
    dev_gen = torch.Generator(device=DEVICE).manual_seed(p.seed)
    device_buffer = torch.randint(0, 256, (device_rows * p.item,), generator=dev_gen, dtype=torch.uint8, device=DEVICE)
    miss_count = torch.zeros(p.batch, dtype=torch.int32)
    miss_count[:] = counts.clamp(max=(1 << 31) - 1).to(torch.int32)
    return dict(
        miss_src=src.to(DEVICE)[:, : p.width], miss_dst=dst.to(DEVICE)[:, : p.width], miss_count=miss_count.to(DEVICE),
        num_real_reqs=torch.tensor([p.num_real], dtype=torch.int32, device=DEVICE),
        host_cache=pinned[p.host_offset:], device_buffer=device_buffer, item_size_bytes=p.item,
    )


def check_plan(p: Plan, kw: dict | None = None) -> None:
    from hisparse.kernels.ops.copy_planned import copy_planned
    from hisparse.kernels.reference.copy_planned import copy_planned as reference

    kw = make_plan(p) if kw is None else kw
    before = {k: kw[k].clone() for k in ("miss_src", "miss_dst", "miss_count", "num_real_reqs")}
    ref_buffer = kw["device_buffer"].clone()
    copy_planned(**kw, num_blocks=p.num_blocks, tiles_per_request=p.tiles, block_size=p.block_size)
    torch.cuda.synchronize()
    reference(**{**kw, "device_buffer": ref_buffer})
    torch.cuda.synchronize()
    got, want = kw["device_buffer"], ref_buffer
    if not torch.equal(got, want):
        diff = torch.nonzero(got != want).flatten()
        rows = torch.unique(diff // p.item)
        pytest.fail(f"[{p.label()}] {diff.numel()} bytes differ from the reference, in {rows.numel()} rows, "
                    f"first byte {int(diff[0])} (row {int(diff[0]) // p.item})")
    for name in ("miss_src", "miss_dst", "miss_count", "num_real_reqs"):
        assert torch.equal(kw[name], before[name]), f"[{p.label()}] {name} was modified"


def random_plans(count: int, seed0: int) -> list[Plan]:
    rng = random.Random(seed0)
    out = []
    for i in range(count):
        batch = rng.choice([1, 2, 3, 31, 32, 33, 64, 100, 257])
        width = rng.choice([1, 2, 7, 64, 782, 2048])
        out.append(Plan(
            seed=seed0 * 1000 + i, batch=batch, width=width, item=rng.choice(ITEM_SIZES),
            num_real=batch if rng.random() < 0.6 else rng.randint(0, batch),
            max_count=rng.choice([0, 1, 2, width // 3, width]),
            num_blocks=rng.choice([1, 8, 8, 8, 132]),
            tiles=rng.choice([0, 0, 1, 3, 16]),
            block_size=rng.choice(BLOCK_SIZES_TESTED),
            host_offset=rng.choice([0, 0, 3, 8]),
            wide_stride=rng.random() < 0.3,
        ))
    return out


RANDOM_PLANS = random_plans(80, 2)


@pytest.mark.parametrize("plan", RANDOM_PLANS, ids=[p.label() for p in RANDOM_PLANS])
def test_random_plan_byte_exact(plan):
    check_plan(plan)


@pytest.mark.parametrize("item", ITEM_SIZES)
def test_every_item_size_full_counts_with_padding(item):
    check_plan(Plan(seed=item, batch=40, width=64, item=item, num_real=33, max_count=64))


def test_upstream_shape_bs100_two_misses_each():
    check_plan(Plan(seed=100, batch=100, width=2048, item=576, num_real=100, max_count=2))


@pytest.mark.parametrize("tiles", [0, 16])
def test_batch_64_with_782_misses_each(tiles):
    check_plan(Plan(seed=64, batch=64, width=782, item=576, num_real=64, max_count=782, num_blocks=132, tiles=tiles))


@pytest.mark.parametrize("tiles,num_blocks", [(1, 1), (7, 5), (2048, 132), (4096, 3)])
def test_request_major_tasks_any_tiling(tiles, num_blocks):
    # more tasks than entries (most tasks empty), fewer CTAs than tasks, one CTA for everything; a task's
    # rows beyond one CTA's lists (tiles 1 with 1500 misses a request) take several rounds
    check_plan(Plan(seed=tiles, batch=33, width=1500, item=656, num_real=31, max_count=1500,
                    num_blocks=num_blocks, tiles=tiles))


def test_zero_real_rows_copy_nothing():
    check_plan(Plan(seed=5, batch=8, width=16, item=656, num_real=0, max_count=16))


def test_debug_mode_checks_the_plan_contents():
    from hisparse.kernels.ops.copy_planned import copy_planned

    kw = make_plan(Plan(seed=6, batch=4, width=8, item=100, num_real=4, max_count=8))
    copy_planned(**kw, debug=True)  # a valid plan passes
    kw["miss_count"][0] = 9  # > width
    with pytest.raises(InputError, match="miss_count"):
        copy_planned(**kw, debug=True)


def test_rejects_pageable_host_cache_and_bad_grid():
    from hisparse.kernels.ops.copy_planned import copy_planned

    kw = make_plan(Plan(seed=7, batch=2, width=4, item=32, num_real=2, max_count=4))
    with pytest.raises(InputError, match="num_blocks"):
        copy_planned(**kw, num_blocks=0)
    for tiles in (-1, 65536, True):
        with pytest.raises(InputError, match="tiles_per_request"):
            copy_planned(**kw, tiles_per_request=tiles)
    with pytest.raises(InputError, match="block_size"):
        copy_planned(**kw, block_size=100)
    kw["host_cache"] = kw["host_cache"].clone()  # pageable CPU memory
    with pytest.raises(InputError, match="host_cache"):
        copy_planned(**kw)


def test_cuda_graph_replay_matches_eager():
    from hisparse.kernels.ops.copy_planned import copy_planned

    p = Plan(seed=8, batch=50, width=300, item=1152, num_real=45, max_count=300)
    kw = make_plan(p)
    initial = kw["device_buffer"].clone()
    copy_planned(**kw)  # eager (also loads the module before capture)
    torch.cuda.synchronize()
    eager = kw["device_buffer"].clone()
    kw["device_buffer"].copy_(initial)
    allocated, g = capture_allocation(lambda: copy_planned(**kw))
    assert allocated == 0, f"the captured copy allocated {allocated} B of device memory"
    for _ in range(2):
        kw["device_buffer"].copy_(initial)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(kw["device_buffer"], eager)


@pytest.mark.parametrize("tiles", [0, 3])
def test_rows_outside_the_buffers_are_skipped_and_nothing_outside_is_written(tiles):
    """Known issue 1 (docs/known-issues.md): a plan entry whose src or dst lies outside its buffer
    (-1 = "no row", as a swap records it, or any out-of-range value from a corrupted plan) is skipped
    by the kernel; the in-range entries are copied exactly as the reference copies them. The device
    buffer is a view into a larger allocation, so a write before or after it would show in the guards."""
    from hisparse.kernels.ops.copy_planned import copy_planned
    from hisparse.kernels.reference.copy_planned import copy_planned as reference

    item, guard = 576, 4 * 576
    kw = make_plan(Plan(seed=9, batch=16, width=64, item=item, num_real=16, max_count=64))
    host_rows = kw["host_cache"].numel() // item
    device_rows = kw["device_buffer"].numel() // item
    src, dst, counts = kw["miss_src"].clone(), kw["miss_dst"].clone(), kw["miss_count"].cpu()
    g = torch.Generator().manual_seed(9)
    bad_src = (-1, -(1 << 40), host_rows, 1 << 40)
    bad_dst = (-1, -(1 << 31), device_rows, (1 << 31) - 1)
    for r in range(16):
        for j in range(int(counts[r])):
            roll = int(torch.randint(0, 6, (1,), generator=g))
            if roll == 0:
                src[r, j] = bad_src[int(torch.randint(0, 4, (1,), generator=g))]
            elif roll == 1:
                dst[r, j] = bad_dst[int(torch.randint(0, 4, (1,), generator=g))]
    skipped = ((src < 0) | (src >= host_rows) | (dst < 0) | (dst >= device_rows)).cpu()
    assert bool(skipped.any())
    backing = torch.randint(0, 256, (guard + device_rows * item + guard,), dtype=torch.uint8, device=DEVICE)
    kw["device_buffer"] = backing[guard: guard + device_rows * item]
    before = backing.clone()
    kw["miss_src"], kw["miss_dst"] = src, dst
    copy_planned(**kw, tiles_per_request=tiles)
    torch.cuda.synchronize()
    assert torch.equal(backing[:guard], before[:guard]) and torch.equal(backing[-guard:], before[-guard:])
    # The reference's contract rejects out-of-range rows; give it the same plan with them as -1.
    want = before[guard: guard + device_rows * item].clone()
    reference(**{**kw, "device_buffer": want, "miss_src": torch.where(skipped.to(DEVICE), -1, src),
                 "miss_dst": torch.where(skipped.to(DEVICE), -1, dst)})
    assert torch.equal(kw["device_buffer"], want)
