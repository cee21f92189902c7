"""The harness's single-step swap with its copy over the grid (``copy_blocks``, the CUDA backend): every
call passes the plan the copy reads, and the checks compare it with the reference, which takes no launch
knobs. On the CPU a kernel-like backend runs the reference in the kernel's place."""
from __future__ import annotations

import dataclasses

import torch

from hisparse.bench import backends, calls
from hisparse.bench.case import Case, TimingSettings
from hisparse.bench.workload import make_workload
from hisparse.kernels.reference.swap_single import swap_single_step as reference
from hisparse.kernels.signature import SWAP_SINGLE

TIMING = TimingSettings(warmup_calls=0, calls_per_graph=2, replays=10, l2_flush=False, check_calls=2)


def _case() -> Case:
    return Case("lru_sequential", "serving", {"context_min": 1024, "context_max": 2048}, batch=3, steps=2, top_k=64,
                hot_buffer_size=256, timing=TIMING)


class GridCopyBackend:
    """A kernel backend on the CPU whose single-step swap takes ``copy_blocks`` as the CUDA wrapper does."""

    def __init__(self, copy_blocks: int) -> None:
        ref = backends.get_backend("reference")
        self.inner = dataclasses.replace(ref, name="cuda", is_kernel=True, single_step_copy_blocks=copy_blocks)
        self.seen: list[dict] = []

    def swap_single_step(self, **kw):
        self.seen.append(kw)
        assert set(kw) - set(SWAP_SINGLE.names()) <= {"copy_blocks"}
        reference(**{k: v for k, v in kw.items() if k != "copy_blocks"})

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_the_reference_backend_copies_inside_the_swap():
    assert backends.get_backend("reference").single_step_copy_blocks == 0
    w = make_workload(_case(), torch.device("cpu"))
    bound = calls.bind("lru_sequential", backends.get_backend("reference"), w)
    assert all("copy_blocks" not in inv.kwargs and "miss_src" not in inv.kwargs for inv in bound._timed)


def test_a_grid_copy_passes_its_plan_on_every_call_and_checks_bit_exact():
    backend = GridCopyBackend(copy_blocks=7)
    w = make_workload(_case(), torch.device("cpu"))
    bound = calls.bind("lru_sequential", backend, w)
    w.reset()
    assert bound.checked_call() == []  # the bit-exact comparison runs the reference without copy_blocks
    bound.call()
    assert len(backend.seen) == 4  # 2 steps, a checked call and a timed one
    for kw in backend.seen:
        assert kw["copy_blocks"] == 7
        assert kw["miss_src"] is w.buffers.miss_src and kw["miss_count"] is w.buffers.miss_count
    assert int(w.buffers.miss_count.sum()) > 0  # the plan the copy reads was written


def test_a_grid_copy_that_copies_wrong_is_caught():
    class Wrong(GridCopyBackend):
        def swap_single_step(self, **kw):
            super().swap_single_step(**kw)
            n = int(kw["miss_count"][0])
            if n:  # the copy of the first planned row goes wrong
                kw["device_buffer"].view(torch.uint8).view(-1)[int(kw["miss_dst"][0, 0]) * kw["item_size_bytes"]] ^= 1

    w = make_workload(_case(), torch.device("cpu"))
    bound = calls.bind("lru_sequential", Wrong(copy_blocks=7), w)
    w.reset()
    found = bound.checked_call()
    assert found, "a wrong copied byte must fail the checks"
