"""Shared pieces of the GPU tests: the marker that skips them without CUDA, the item sizes they
sweep, pinned host copies, and CUDA-graph capture helpers."""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

GPU_ONLY = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
# FP8 MLA, FlashMLA FP8 sparse, BF16 MLA, then 8-, 16-, 4- and 1-byte-aligned odd sizes.
ITEM_SIZES = (576, 656, 1152, 584, 512, 100, 4)
DEVICE = "cuda"  # the tensors' device; the host cache is pinned CPU memory read through UVA


def pinned_bytes(data: torch.Tensor) -> torch.Tensor:
    """A pinned copy of the uint8 tensor ``data``."""
    out = torch.empty(data.numel(), dtype=torch.uint8, pin_memory=True)
    out.copy_(data)
    return out


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
