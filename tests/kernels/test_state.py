"""The multi-step state helper: sizes from four numbers, and a fresh state whose hash index finds every
resident token without falling back to linear scans."""
import pytest
import torch

from hisparse.errors import InputError
from hisparse.kernels.reference.cuckoo import hot_lookup
from hisparse.kernels.state import FLAG_HASH_DEGRADED, multi_step_sizes, new_multi_step_state


def test_sizes_follow_the_coordinator_rule():
    s = multi_step_sizes(64, 4, 2048, 4096)
    # C = min(T, max(1024, T - HOT)) = min(8192, max(1024, 4096)); H = 2*HOT; M = next pow2 >= 2T
    assert (s.scratch_capacity, s.hash_size, s.miss_table_size) == (4096, 8192, 16384)
    s = multi_step_sizes(1, 2, 2048, 32768)
    assert (s.scratch_capacity, s.hash_size, s.miss_table_size) == (1024, 65536, 8192)
    s = multi_step_sizes(1, 3, 100, 6144)  # T = 300 < 1024: capacity is T
    assert s.scratch_capacity == 300


@pytest.mark.parametrize("kw,needle", [
    (dict(steps=5), "steps"), (dict(top_k=4096, steps=4), "steps*top_k"),
    (dict(hot_buffer_size=40000), "hot_buffer_size"), (dict(hot_buffer_size=1000, top_k=2048), "hot_buffer_size"),
])
def test_out_of_range_sizes_name_the_argument(kw, needle):
    args = dict(num_req_slots=1, steps=2, top_k=2048, hot_buffer_size=4096) | kw
    with pytest.raises(InputError, match=needle.replace("*", r"\*")):
        multi_step_sizes(**args)


def test_fresh_state_indexes_scattered_tokens_without_degrading():
    """4096 random (non-identity) tokens per request: at load factor 0.5 a few hundred collide in both
    buckets; cuckoo kicks must place them, so no request starts degraded and every token is found."""
    r, hot = 4, 4096
    g = torch.Generator().manual_seed(7)
    tokens = torch.stack([torch.randperm(1 << 20, generator=g)[:hot] for _ in range(r)]).to(torch.int32)
    tokens[0, :100] = torch.arange(100, dtype=torch.int32)  # identity slots need no entry
    sizes = multi_step_sizes(r, 4, 1024, hot)
    state = new_multi_step_state(r, 4, 1024, hot, device_buffer_tokens=tokens,
                                 scratch_locs=torch.zeros(r, sizes.scratch_capacity, dtype=torch.int32))
    assert int((state.counters[:, 3] & FLAG_HASH_DEGRADED).sum()) == 0
    found = hot_lookup(tokens, tokens, state.hash_index, torch.zeros(r, dtype=torch.bool))
    assert torch.equal(found, torch.arange(hot).expand(r, hot))
    assert int((state.hash_index[0] >= 0).sum()) == hot - 100


def test_negative_scratch_rows_are_rejected_at_allocation():
    scratch = torch.arange(2 * 1024, dtype=torch.int32).reshape(2, 1024)
    scratch[1, 5] = -1
    with pytest.raises(InputError, match=r"scratch_locs.*request slot 1, entry 5"):
        new_multi_step_state(2, 2, 512, 2048, scratch_locs=scratch)
