"""``lru_sequential_grid``: the single-step swap with its copy over the backend's grid (``copy_blocks``,
one CTA per SM on the GPU), timed beside ``lru_sequential``. Every call passes the plan the copy
reads, the checks compare it with the reference (which takes no launch knobs), and ``lru_sequential``
keeps the copy inside the swap kernel. On the CPU a kernel-like backend runs the reference in the
kernel's place."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from hisparse.bench import backends, calls
from hisparse.bench.case import Case, TimingSettings
from hisparse.bench.workload import make_workload
from hisparse.kernels.ops import swap_single
from hisparse.kernels.reference.swap_single import swap_single_step as reference
from hisparse.kernels.signature import SWAP_SINGLE

TIMING = TimingSettings(warmup_calls=0, calls_per_graph=2, replays=10, l2_flush=False, check_calls=2)
GRID = 7  # the fake backend's copy grid


def _case(implementation: str, batch: int = 3) -> Case:
    return Case(implementation, "serving", {"context_min": 1024, "context_max": 2048}, batch=batch, steps=2,
                top_k=64, hot_buffer_size=256, timing=TIMING)


class GridCopyBackend:
    """A kernel backend on the CPU whose single-step swap takes ``copy_blocks`` as the CUDA wrapper does,
    with a copy grid of ``GRID`` CTAs."""

    def __init__(self) -> None:
        ref = backends.get_backend("reference")
        self.inner = dataclasses.replace(ref, name="cuda", is_kernel=True, single_step_copy_grid=self._grid)
        self.seen: list[dict] = []
        self.grid_asked: list[torch.device] = []

    def _grid(self, *, device: torch.device) -> int:
        self.grid_asked.append(device)
        return GRID

    def swap_single_step(self, **kw):
        self.seen.append(kw)
        assert set(kw) - set(SWAP_SINGLE.names()) <= {"copy_blocks"}
        reference(**{k: v for k, v in kw.items() if k != "copy_blocks"})

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_the_reference_backend_runs_the_plain_swap_for_the_grid_implementation():
    w = make_workload(_case("lru_sequential_grid"), torch.device("cpu"))
    bound = calls.bind("lru_sequential_grid", backends.get_backend("reference"), w)
    assert all("copy_blocks" not in inv.kwargs and "miss_src" not in inv.kwargs for inv in bound._timed)
    w.reset()
    assert bound.checked_call() == []


@pytest.mark.parametrize("batch", [1, 3])
def test_the_grid_implementation_passes_its_grid_and_plan_on_every_call_and_checks_bit_exact(batch):
    backend = GridCopyBackend()
    w = make_workload(_case("lru_sequential_grid", batch), torch.device("cpu"))
    bound = calls.bind("lru_sequential_grid", backend, w)
    assert backend.grid_asked and all(d == torch.device("cpu") for d in backend.grid_asked)  # the buffers' device
    w.reset()
    assert bound.checked_call() == []  # the bit-exact comparison runs the reference without copy_blocks
    bound.call()
    assert len(backend.seen) == 4  # 2 steps, a checked call and a timed one
    for kw in backend.seen:
        assert kw["copy_blocks"] == GRID
        assert kw["miss_src"] is w.buffers.miss_src and kw["miss_count"] is w.buffers.miss_count
    assert int(w.buffers.miss_count.sum()) > 0  # the plan the copy reads was written


def test_lru_sequential_keeps_the_copy_in_the_kernel_on_a_backend_with_a_grid():
    backend = GridCopyBackend()
    w = make_workload(_case("lru_sequential"), torch.device("cpu"))
    bound = calls.bind("lru_sequential", backend, w)
    assert backend.grid_asked == []
    assert all("copy_blocks" not in inv.kwargs and "miss_src" not in inv.kwargs for inv in bound._timed)
    # the recorded calls of the floors still take the plan, with the copy in the kernel
    assert all("copy_blocks" not in inv.kwargs and "miss_src" in inv.kwargs for inv in bound._recorded)
    w.reset()
    assert bound.checked_call() == []
    assert len(backend.seen) == 2 and all("copy_blocks" not in kw for kw in backend.seen)


def test_a_grid_copy_that_copies_wrong_is_caught():
    class Wrong(GridCopyBackend):
        def swap_single_step(self, **kw):
            super().swap_single_step(**kw)
            n = int(kw["miss_count"][0])
            if n:  # the copy of the first planned row goes wrong
                kw["device_buffer"].view(torch.uint8).view(-1)[int(kw["miss_dst"][0, 0]) * kw["item_size_bytes"]] ^= 1

    w = make_workload(_case("lru_sequential_grid", 1), torch.device("cpu"))
    bound = calls.bind("lru_sequential_grid", Wrong(), w)
    w.reset()
    found = bound.checked_call()
    assert found, "a wrong copied byte must fail the checks"


def test_grid_copy_blocks_is_one_cta_per_sm_of_the_device_named(monkeypatch):
    asked: list[int] = []

    def properties(index):
        asked.append(index)
        return SimpleNamespace(multi_processor_count={0: 132, 1: 78}[index])

    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    assert swap_single.grid_copy_blocks(torch.device("cuda", 1)) == 78
    assert swap_single.grid_copy_blocks(torch.device("cuda", 0)) == 132
    assert asked == [1, 0]
