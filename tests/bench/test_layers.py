"""The decode regime on the CPU (reference backend): a case of L layers has L independent layers (own host
rows in memory of their own, own device buffer, own swap state), its calls go layer after layer, every
layer is checked, and the floors are taken in the same rotation and warm."""
from __future__ import annotations

import pytest
import torch

from hisparse.bench import backends, calls, floors, measure
from hisparse.bench.case import Case, TimingSettings, cap_layers, host_bytes_per_layer
from hisparse.bench.config import parse_config
from hisparse.bench.workload import LayeredWorkload, make_workload
from hisparse.errors import ConfigError

CPU = torch.device("cpu")
TIMING = TimingSettings(warmup_calls=1, calls_per_graph=4, replays=10, l2_flush=False, check_calls=3)
SERVING = {"context_min": 1024, "context_max": 2048}


def layered(impl: str = "multi_step", workload: str = "serving", layers: int = 3, timing=TIMING, **kw) -> Case:
    params = {**(SERVING if workload == "serving" else {}), "layers": layers}
    return Case(impl, workload, params, batch=2, top_k=64, hot_buffer_size=256, timing=timing, **kw)


def extent(t: torch.Tensor) -> tuple[int, int]:
    start = t.data_ptr()
    return start, start + t.numel() * t.element_size()


@pytest.mark.parametrize("workload", ["serving", "trace", "distinct"])
def test_every_layer_has_memory_of_its_own(workload):
    w = make_workload(layered(workload=workload, layers=3), CPU)
    assert isinstance(w, LayeredWorkload) and len(w.layers) == 3
    hosts = [extent(layer.buffers.host_cache) for layer in w.layers]
    for (a0, a1), (b0, b1) in zip(hosts, hosts[1:]):
        assert a1 <= b0, "host regions overlap"
        assert b0 % (2 << 20) == hosts[0][0] % (2 << 20) or b0 - a1 < (2 << 20)  # whole 2 MiB spans apart
    ptrs = lambda get: {get(layer.buffers).data_ptr() for layer in w.layers}  # noqa: E731
    assert len(ptrs(lambda b: b.device_buffer)) == 3
    assert len(ptrs(lambda b: b.device_buffer_tokens)) == 3
    assert len(ptrs(lambda b: b.state.scratch_locs)) == 3
    # each resident row holds what its own layer's host row holds (the layers' host bytes differ)
    for layer in w.layers:
        b = layer.buffers
        rows = b.host_cache_locs[0, :4]
        dev_rows = b.device_buffer_locs[0, :4].long()
        assert torch.equal(b.device_buffer[dev_rows], b.host_cache[rows])
    assert not torch.equal(w.layers[0].buffers.host_cache[:4], w.layers[1].buffers.host_cache[:4])


def test_layers_have_their_own_top_k_over_one_row_layout():
    w = make_workload(layered(layers=3), CPU)
    w.reset()
    tops = [layer.buffers.top_k_tokens.clone() for layer in w.layers]
    assert not torch.equal(tops[0], tops[1]) and not torch.equal(tops[1], tops[2])
    # serving: the token -> host row index is the engine's, one for all layers
    locs = [layer.buffers.host_cache_locs for layer in w.layers]
    span = min(loc.shape[1] for loc in locs)
    assert all(torch.equal(loc[:, :span], locs[0][:, :span]) for loc in locs)


class RecordingBackend:
    """The reference backend, recording which layer's device buffer each op wrote."""

    def __init__(self, workload: LayeredWorkload) -> None:
        self.inner = backends.get_backend("reference")
        self.device, self.is_kernel, self.name = self.inner.device, False, "recording"
        self.layer_of = {layer.buffers.device_buffer.data_ptr(): i for i, layer in enumerate(workload.layers)}
        self.seen: list[int] = []

    def swap_multi_step(self, **kw):
        self.seen.append(self.layer_of[kw["device_buffer"].data_ptr()])
        return self.inner.swap_multi_step(**kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_calls_go_layer_after_layer_and_a_reset_starts_at_layer_0():
    w = make_workload(layered(layers=3), CPU)
    backend = RecordingBackend(w)
    bound = calls.bind("multi_step", backend, w, pdl=True)
    w.reset()
    for _ in range(5):
        bound.call()
    assert backend.seen == [0, 1, 2, 0, 1]
    w.reset()
    bound.call()
    assert backend.seen[-1] == 0
    # each layer advanced its own top-k once per visit: layer 0 twice before the reset, layer 2 once
    assert [layer.calls_since_reset for layer in w.layers] == [1, 0, 0]


def test_a_graph_holds_whole_decode_steps():
    assert layered(layers=3).graph_calls == 6  # calls_per_graph 4 rounded up to 2 visits of 3 layers
    assert layered(layers=4).graph_calls == 4
    assert layered(layers=1).graph_calls == 4
    per_layer = layered(layers=3).layer_timing()
    assert (per_layer.calls_per_graph, per_layer.warmup_calls, per_layer.check_calls) == (2, 1, 1)


def test_a_case_runs_checked_and_timed_in_the_decode_regime():
    case = layered(layers=3)
    result = measure.run_case(case, backends.get_backend("reference"), floors=floors.NOT_APPLICABLE)
    assert result.status == "ok", result.reason
    assert result.settings["calls_per_graph"] == 6
    floor = result.floor
    assert floor["gather_floor_us"] > 0 and floor["gather_warm_us"] > 0
    assert len(floor["gather_warm_samples_us"]) >= 10
    warm = measure.run_case(layered(layers=1), backends.get_backend("reference"), floors=floors.NOT_APPLICABLE)
    assert warm.status == "ok" and "gather_warm_us" not in warm.floor  # one layer: the gather floor is warm


class Sabotaged(RecordingBackend):
    """Writes a wrong byte into the copied rows of one layer, after the real swap."""

    def __init__(self, workload, bad_layer: int) -> None:
        super().__init__(workload)
        self.bad_layer = bad_layer

    def swap_multi_step(self, **kw):
        out = super().swap_multi_step(**kw)
        if self.seen[-1] == self.bad_layer and kw.get("miss_count") is not None and int(kw["miss_count"][0]):
            row = int(kw["miss_dst"][0, 0])
            kw["device_buffer"].view(torch.uint8).view(kw["device_buffer"].shape[0], -1)[row, 0] ^= 0xFF
        return out


def test_a_wrong_copy_in_any_layer_fails_the_case_naming_the_layer():
    case = layered(layers=3)
    # control first: the same sabotage aimed at a layer the case does not have leaves it ok
    for sabotage, expect_ok in ((7, True), (2, False)):
        wl = make_workload(case, CPU)
        be = Sabotaged(wl, bad_layer=sabotage)
        result = measure.run_case(case, be, floors=floors.NOT_APPLICABLE,
                                  make_workload=lambda *_a, _w=wl, **_k: _w)
        if expect_ok:
            assert result.status == "ok", result.reason
        else:
            assert result.status == "failed" and "layer 2" in result.reason, result.reason


def test_recorded_calls_check_every_layer_byte_for_byte():
    """The check calls touch layers 0..check_calls-1; the recorded calls check each layer's copies."""
    case = layered(layers=3)
    wl = make_workload(case, CPU)
    be = Sabotaged(wl, bad_layer=2)
    bound = calls.bind("multi_step", be, wl, pdl=True)
    wl.reset()
    bound.recorded_call()
    bound.recorded_call()
    with pytest.raises(calls.CopyMismatch, match="layer 2"):
        bound.recorded_call()


def test_the_warm_floor_reads_the_same_rows_from_one_pool():
    a, b = torch.zeros(4), torch.zeros(4)
    x, y = torch.zeros(4), torch.zeros(4)
    rows = (torch.tensor([1, 2]), torch.tensor([0, 1]))
    cold = [[(*rows, a, x)], [(*rows, b, y)]]
    warm = floors.warm_calls(cold)
    assert all(call[0][2] is a and call[0][3] is x for call in warm)
    assert all(torch.equal(w[0][0], c[0][0]) for w, c in zip(warm, cold))  # same rows


def test_the_warm_floor_takes_a_pool_that_holds_every_layers_rows():
    """`trace` layers have pools of different sizes: a row of layer 1 at index 6 has no place in layer 0's
    4-row pool, so the warm gather reads layer 1's 8-row pool (the first of the largest)."""
    small, large, large_too = torch.zeros(4), torch.zeros(8), torch.zeros(8)
    x, y, z = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    cold = [[(torch.tensor([1, 3]), torch.tensor([0, 1]), small, x)],
            [(torch.tensor([2, 6]), torch.tensor([0, 1]), large, y)],
            [(torch.tensor([0, 7]), torch.tensor([0, 1]), large_too, z)]]
    warm = floors.warm_calls(cold)
    assert all(call[0][2] is large and call[0][3] is y for call in warm)
    assert [w[0][0].tolist() for w in warm] == [[1, 3], [2, 6], [0, 7]]


def test_a_trace_case_whose_layers_differ_in_pool_size_runs_in_the_decode_regime():
    """Seed 0, 3 layers: the layers' traces have different spans (an IndexError in the warm floor before)."""
    case = layered(workload="trace", layers=3)
    wl = make_workload(case, CPU)
    sizes = {layer.buffers.host_cache.numel() for layer in wl.layers}
    assert len(sizes) > 1, sizes  # the premise: pools of different sizes
    result = measure.run_case(case, backends.get_backend("reference"), floors=floors.NOT_APPLICABLE)
    assert result.status == "ok", result.reason
    assert result.floor["gather_warm_us"] > 0


def test_ids_name_the_layers_and_one_layer_keeps_the_old_id():
    one = Case("multi_step", "serving")
    assert one.layers == 1 and one.case_id == "multi_step/serving/b1/s4/k2048/h4096/i576/pdl1"
    assert Case.from_id(one.case_id).layers == 1
    many = Case("multi_step", "serving", {"layers": 61})
    assert many.case_id.endswith("/pdl1/layers=61") and Case.from_id(many.case_id).layers == 61
    assert "layers" not in one.to_dict()["workload_params"] and many.to_dict()["workload_params"]["layers"] == 61


def test_config_default_is_61_layers_capped_by_the_host_memory_budget():
    cfg = parse_config({"axes": {"implementation": "multi_step", "workload": "serving", "batch": [1, 64]}})
    got = {c.batch: c.layers for c in cfg.expand()}
    assert got[1] == 61
    # batch 64: each layer's pool is 64 x 131072 rows x 576 B (4.5 GiB, whole 2 MiB spans): 48 GiB hold 10
    per_layer = 64 * 131072 * 576
    assert got[64] == int(48 * 2**30 // per_layer) == 10
    small = parse_config({"axes": {"implementation": "multi_step", "workload": "serving", "batch": 64},
                          "host_memory_budget_gib": 12})
    assert [c.layers for c in small.expand()] == [2]
    one = parse_config({"axes": {"workload": "serving"}, "workloads": {"serving": {"layers": 1}}})
    assert all(c.layers == 1 and "layers" not in c.case_id for c in one.expand())


def test_cap_layers_counts_the_shared_layers_of_a_planned_case():
    plain = Case("multi_step", "serving", {"layers": 61}, batch=16)
    planned = Case("multi_step_planned", "serving", {"layers": 61}, batch=16, shared_layers=3)
    assert host_bytes_per_layer(planned.to_dict()) == 4 * host_bytes_per_layer(plain.to_dict())
    budget = 48 * 2**30
    assert cap_layers(planned, budget).layers == cap_layers(plain, budget).layers // 4


@pytest.mark.parametrize("bad, shown", [
    ({"host_memory_budget_gib": 0}, "host_memory_budget_gib"),
    ({"host_memory_budget_gib": "lots"}, "host_memory_budget_gib"),
    ({"workloads": {"serving": {"layers": 0}}}, "workloads.serving.layers"),
    ({"workloads": {"upstream": {"layers": 2}}}, "upstream takes no parameters"),
])
def test_bad_layer_settings_name_the_key(bad, shown):
    with pytest.raises(ConfigError, match=shown):
        parse_config(bad)


def test_a_decode_case_times_one_round_a_warm_case_its_configured_rounds():
    """L layers already put L placements of buffers in every replay: one round; layers: 1 keeps the
    config's rounds (which average placement there)."""
    timing3 = TimingSettings(warmup_calls=1, calls_per_graph=4, replays=10, l2_flush=False, check_calls=1, rounds=3)
    decode, warm = layered(layers=3, timing=timing3), layered(layers=1, timing=timing3)
    assert (decode.rounds, warm.rounds) == (1, 3)
    backend = backends.get_backend("reference")
    for case, want in ((decode, 1), (warm, 3)):
        result = measure.run_case(case, backend, floors=floors.NOT_APPLICABLE)
        assert result.status == "ok", result.reason
        assert result.settings["rounds"] == want and len(result.runs) == want
