"""The decode regime on the GPU (cuda backend): a case of L layers runs its kernels over L host pools,
checked on every layer, with the gather floor taken in the same rotation and warm; the pinned arena the
layers live in is read byte-exactly by the bare gather.

Run on a GPU machine: ``pytest -q -m gpu tests/bench/test_layers_gpu.py``."""
from __future__ import annotations

import pytest
import torch

from _gpu import DEVICE, GPU_ONLY
from hisparse.bench import backends, floors, measure
from hisparse.bench.case import Case, TimingSettings
from hisparse.bench.workload import make_workload

pytestmark = GPU_ONLY

TIMING = TimingSettings(warmup_calls=1, calls_per_graph=4, replays=10, l2_flush=False, check_calls=3)
SERVING = {"context_min": 4096, "context_max": 8192}


def layered(impl: str, workload: str = "serving", layers: int = 3) -> Case:
    params = {**(SERVING if workload == "serving" else {}), "layers": layers}
    return Case(impl, workload, params, batch=4, top_k=256, hot_buffer_size=1024, timing=TIMING)


@pytest.fixture(scope="module")
def cuda():
    return backends.get_backend("cuda")


@pytest.mark.parametrize("impl", ["lru_sequential", "lru_sequential_grid", "multi_step", "multi_step_planned"])
@pytest.mark.parametrize("workload", ["serving", "trace", "distinct"])
def test_a_layered_case_is_checked_and_timed_on_the_gpu(cuda, impl, workload):
    pinned = floors.measure_pinned_h2d(DEVICE, nbytes=1 << 24, samples=3)
    result = measure.run_case(layered(impl, workload), cuda, floors=pinned)
    assert result.status == "ok", result.reason
    assert result.settings["calls_per_graph"] == 6  # 4 rounded up to two visits of 3 layers
    floor = result.floor
    assert floor["gather_floor_us"] > 0 and floor["gather_warm_us"] > 0
    assert len(floor["gather_warm_samples_us"]) >= 10


class Sabotaged:
    """The cuda backend, flipping byte 0 of every row of layer ``bad_layer``'s device buffer after its swap
    (the kernels report no miss list to aim at: every resident row is then wrong)."""

    def __init__(self, workload, bad_layer: int) -> None:
        self.inner = backends.get_backend("cuda")
        self.device, self.is_kernel, self.name = self.inner.device, True, "sabotaged"
        self.layer_of = {layer.buffers.device_buffer.data_ptr(): i for i, layer in enumerate(workload.layers)}
        self.bad_layer = bad_layer

    def swap_multi_step(self, **kw):
        out = self.inner.swap_multi_step(**kw)
        if self.layer_of[kw["device_buffer"].data_ptr()] == self.bad_layer:
            kw["device_buffer"].view(torch.uint8).view(kw["device_buffer"].shape[0], -1)[:, 0] ^= 0xFF
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_wrong_copy_in_one_layer_fails_the_check_naming_it():
    """Control first: the sabotage aimed at a layer the case does not have leaves it ok."""
    case = layered("multi_step", "distinct")
    for bad_layer, expect_ok in ((7, True), (2, False)):
        wl = make_workload(case, torch.device(DEVICE))
        result = measure.run_case(case, Sabotaged(wl, bad_layer), floors=floors.NOT_APPLICABLE,
                                  make_workload=lambda *_a, _w=wl, **_k: _w)
        if expect_ok:
            assert result.status == "ok", result.reason
        else:
            assert result.status == "failed" and "layer 2" in result.reason, result.reason


def test_the_pinned_arena_is_read_byte_exactly_by_the_gather(cuda):
    from hisparse.bench import host_alloc
    from hisparse.kernels.ops.gather_floor import gather_floor

    item, rows = 576, 50_000
    alloc = host_alloc.allocate(rows * item + (2 << 20), "pinned", DEVICE)
    assert alloc.kind == "pinned" and alloc.tensor.device.type == "cpu"
    host = alloc.tensor[(1 << 20):(1 << 20) + rows * item]  # an offset view, as a layer's rows are
    g = torch.Generator().manual_seed(5)
    host.copy_(torch.randint(0, 256, (host.numel(),), generator=g, dtype=torch.uint8))
    src = torch.randint(0, rows, (20_000,), generator=g)
    dst = torch.randperm(20_000, generator=g).to(torch.int32)
    out = torch.zeros(20_000 * item, dtype=torch.uint8, device=DEVICE)
    gather_floor(src_rows=src.to(DEVICE), dst_rows=dst.to(DEVICE), host_cache=host, device_buffer=out,
                 item_size_bytes=item)
    torch.cuda.synchronize()
    want = torch.empty_like(out, device="cpu").view(20_000, item)
    want[dst.long()] = host.view(rows, item)[src]
    assert torch.equal(out.cpu().view(20_000, item), want)
