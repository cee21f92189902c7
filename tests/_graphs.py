"""CUDA-graph helpers of the GPU tests."""
from __future__ import annotations

from collections.abc import Callable

import torch


def capture(fn: Callable[[], object]) -> torch.cuda.CUDAGraph:
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # torch captures on its own side stream: a kernel must launch on it
        fn()
    torch.cuda.synchronize()
    return g


def capture_allocation(fn: Callable[[], object]) -> tuple[int, torch.cuda.CUDAGraph]:
    """(bytes of device memory the captured ``fn`` allocated, the graph).

    torch allocates graph RNG state (two 512 B blocks) at a capture while no other graph holds it: on
    the H200 an "empty graph first" warm-up did not help once that graph was freed (+1024 B again), so
    the warm-up graph stays alive until the measured capture is done."""
    warm = capture(lambda: None)
    before = torch.cuda.memory_allocated()
    g = capture(fn)
    grew = torch.cuda.memory_allocated() - before
    del warm
    return grew, g
