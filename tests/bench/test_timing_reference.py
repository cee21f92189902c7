"""The timing loop on the CPU (reference backend): structure, labels and raw samples."""
import time
from types import SimpleNamespace

import pytest

from hisparse.bench import timing


class _Recorder:
    def __init__(self, sleep=0.0):
        self.events = []
        self.sleep = sleep

    def call(self):
        self.events.append("call")
        if self.sleep:
            time.sleep(self.sleep)

    def reset(self):
        self.events.append("reset")


def test_cpu_loop_structure_and_samples():
    rec = _Recorder()
    s = timing.Settings(warmup_calls=3, calls_per_graph=4, replays=10, l2_flush=True)
    m = timing.time_calls(rec.call, reset=rec.reset, settings=s, device="cpu")
    # reset, 3 warm-up calls, then per replay: reset + 4 calls
    expected = ["reset"] + ["call"] * 3 + (["reset"] + ["call"] * 4) * 10
    assert rec.events == expected
    assert m.method == timing.METHOD_CPU == "cpu-perf-counter"
    assert len(m.samples_us) == 10 and len(m.warmup_us) == 3
    assert all(x >= 0 for x in m.samples_us)
    assert m.l2_flush is False  # no L2 flush on the CPU, and the record says so
    assert m.clocks.source == "n/a" and m.clocks.sm_mhz == ()


def test_at_least_ten_samples_are_kept():
    rec = _Recorder()
    m = timing.time_calls(rec.call, reset=rec.reset, settings=timing.Settings(0, 1, 3, False), device="cpu")
    assert len(m.samples_us) == timing.MIN_SAMPLES == 10 and m.replays == 10


def test_samples_are_microseconds_per_call():
    rec = _Recorder(sleep=0.002)
    m = timing.time_calls(rec.call, reset=rec.reset, settings=timing.Settings(0, 2, 10, False), device="cpu")
    assert all(1900 < x < 50_000 for x in m.samples_us)  # ~2000 us per call, not per replay


def test_result_settings_are_the_applied_settings():
    from hisparse.bench.measure import settings_of

    rec = _Recorder()
    m = timing.time_calls(rec.call, reset=rec.reset, settings=timing.Settings(2, 3, 12, True), device="cpu")
    d = settings_of(m)
    assert d["calls_per_graph"] == 3 and d["replays"] == 12 and d["warmup_calls"] == 2
    assert d["l2_flush"] is False and d["method"] == "cpu-perf-counter" and len(m.warmup_us) == 2


def test_settings_from_config_timing():
    t = SimpleNamespace(warmup_calls=5, calls_per_graph=100, replays=10, l2_flush=True, check_calls=2)
    assert timing.Settings.of(t) == timing.Settings(5, 100, 10, True)
    with pytest.raises(ValueError):
        timing.Settings(calls_per_graph=0)


def test_decode_throttle_reasons():
    assert timing.decode_throttle(0) == "none"
    assert timing.decode_throttle(0x4 | 0x8) == "sw_power_cap|hw_slowdown"
    assert timing.decode_throttle(0x1 | 0x10000) == "gpu_idle|0x10000"


def test_parse_nvidia_smi_line():
    assert timing._parse_smi("1980, 3201, 0x0000000000000000") == (1980, 3201, "none")
    assert timing._parse_smi("1755, 3201, 0x0000000000000004") == (1755, 3201, "sw_power_cap")
    assert timing._parse_smi("[N/A], 3201, [N/A]") == (None, 3201, "[N/A]")


def test_clock_sampler_unavailable_records_nothing():
    sampler = timing.ClockSampler(0, source="unavailable")
    sampler.sample()
    c = sampler.result()
    assert c.source == "unavailable" and c.sm_mhz == () and c.to_dict()["throttle_reasons"] == []


def test_real_reference_swap_is_timed_on_the_cpu():
    """The reference single-step swap, timed end to end through the loop (stand-in inputs)."""
    import torch

    from hisparse.kernels.reference.swap_single import swap_single_step

    hot, k, page, item = 16, 4, 1, 8
    tokens = torch.arange(hot + page, dtype=torch.int32).unsqueeze(0)
    init = dict(tokens=tokens.clone(), lru=torch.arange(hot, dtype=torch.int16).unsqueeze(0))
    state = dict(tokens=tokens.clone(), lru=init["lru"].clone())
    top_k = torch.tensor([[0, 1, 100, 101]], dtype=torch.int32)
    host = torch.arange(1000 * item, dtype=torch.uint8)
    device_buffer = torch.zeros((hot + page) * item, dtype=torch.uint8)

    def call():
        top_k[:, 2:].add_(2)
        swap_single_step(
            top_k_tokens=top_k, device_buffer_tokens=state["tokens"],
            host_cache_locs=torch.arange(1000, dtype=torch.int64).unsqueeze(0),
            device_buffer_locs=torch.arange(hot + page, dtype=torch.int32).unsqueeze(0), host_cache=host,
            device_buffer=device_buffer, top_k_device_locs=torch.empty(1, k, dtype=torch.int32),
            req_pool_indices=torch.zeros(1, dtype=torch.int32), seq_lens=torch.tensor([900], dtype=torch.int32),
            lru_slots=state["lru"], num_real_reqs=torch.ones(1, dtype=torch.int32), item_size_bytes=item,
            page_size=page)

    def reset():
        state["tokens"].copy_(init["tokens"])
        state["lru"].copy_(init["lru"])
        top_k.copy_(torch.tensor([[0, 1, 100, 101]], dtype=torch.int32))

    m = timing.time_calls(call, reset=reset, settings=timing.Settings(1, 3, 10, False), device="cpu")
    assert len(m.samples_us) == 10 and all(x > 0 for x in m.samples_us)
    assert int(top_k[0, 2]) == 106  # 3 calls of the last replay, each +2


@pytest.mark.gpu
def test_cuda_graph_loop_with_a_capturable_call():
    """The CUDA path (skipped without a GPU): graph of calls_per_graph calls, reset before each replay."""
    import torch

    idx0 = torch.randint(0, 1 << 16, (4096,), device="cuda")
    idx = idx0.clone()
    table = torch.randn(1 << 17, 64, device="cuda")
    dst = torch.zeros(4096, 64, device="cuda")

    def call():
        idx.add_(3)  # inputs change inside the captured region
        torch.index_select(table, 0, idx, out=dst)

    m = timing.time_calls(call, reset=lambda: idx.copy_(idx0), settings=timing.Settings(2, 20, 10, True),
                          device="cuda")
    assert m.method == timing.METHOD_CUDA and len(m.samples_us) == 10 and all(x > 0 for x in m.samples_us)
    assert len(m.warmup_us) == 3  # 2 eager calls + the warm replay
    assert m.l2_flush is True and m.clocks.source in ("nvml", "nvidia-smi", "unavailable")
    if m.clocks.source != "unavailable":
        assert len(m.clocks.sm_mhz) == 10 and len(m.clocks.throttle_reasons) == 10
    assert int(idx[0]) == int(idx0[0]) + 3 * 20  # the last replay ran all 20 captured calls


class _Clock:
    """perf_counter stand-in: each call() advances time by the next of ``durations`` (us)."""

    def __init__(self, durations):
        self.now, self.durations = 0.0, list(durations)

    def perf_counter(self):
        return self.now

    def call(self):
        self.now += self.durations.pop(0) * 1e-6


def test_a_sample_is_the_mean_of_its_replays(monkeypatch):
    # 2 calls per replay, 3 replays per sample, 10 samples: replay r of the run takes 2 * (10 + r) us
    per_call = [10.0 + r for r in range(30) for _ in range(2)]
    clock = _Clock(per_call)
    monkeypatch.setattr(timing.time, "perf_counter", clock.perf_counter)
    resets = []
    s = timing.Settings(warmup_calls=0, calls_per_graph=2, replays=10, l2_flush=False, replays_per_sample=3)
    m = timing.time_calls(clock.call, reset=lambda: resets.append(1), settings=s, device="cpu")
    assert len(resets) == 1 + 30  # one before the warm-up, one before every replay
    assert m.replay_us == pytest.approx([10.0 + r for r in range(30)])
    assert m.samples_us == pytest.approx([11.0 + 3 * i for i in range(10)])  # mean of replays 3i..3i+2
    from hisparse.bench.measure import run_of, settings_of

    assert settings_of(m)["replays_per_sample"] == 3
    assert run_of(m, process=0, round_index=0, where=None).replay_us == pytest.approx(m.replay_us)


def test_one_replay_per_sample_stores_no_second_copy():
    rec = _Recorder()
    m = timing.time_calls(rec.call, reset=rec.reset, settings=timing.Settings(0, 1, 10, False), device="cpu")
    assert m.replay_us == m.samples_us and m.replays_per_sample == 1
    from hisparse.bench.measure import run_of, settings_of

    assert run_of(m, process=0, round_index=0, where=None).replay_us == () and "replays_per_sample" not in settings_of(m)


def test_replays_per_sample_must_be_positive():
    with pytest.raises(ValueError, match="replays_per_sample"):
        timing.Settings(replays_per_sample=0)
    t = SimpleNamespace(warmup_calls=5, calls_per_graph=20, replays=10, l2_flush=True, replays_per_sample=5)
    assert timing.Settings.of(t).replays_per_sample == 5
