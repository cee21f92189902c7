"""The one top-k contract of both swaps (hisparse/kernels/validation/common.py check_top_k_rows;
docs/design.md "The top-k contract"). The ops' sides of it: test_swap_single_reference.py and
test_swap_multi_reference.py."""
import pytest
import torch

from hisparse.errors import InputError
from hisparse.kernels.validation.common import check_top_k_rows


def _check(rows, seq, slot_table=None):
    check_top_k_rows(torch.tensor(rows, dtype=torch.int64), torch.tensor(seq), lambda r: f"row {r}",
                     slot_table=None if slot_table is None else torch.tensor(slot_table))


def test_padding_may_repeat_and_sit_anywhere_in_a_long_row():
    _check([[5, -1, 3, -1], [-1, -1, -1, -1]], [10, 10])


@pytest.mark.parametrize("rows,seq,message", [
    ([[5, 10, 3, 1]], [10], r"row 0 entry 1 must be -1 \(padding\) or a token in \[0, seq_len=10\), got 10"),
    ([[5, -3, 3, 1]], [10], r"row 0 entry 1 must be -1 \(padding\) .* got -3"),
    ([[5, 3, 3, 1]], [10], "row 0 repeats token 3"),
    ([[1, 0, -1, 2]], [3], r"row 0 has seq_len 3 < top_k, so its entries from index 3 on must be -1 \(padding\); "
                           "entry 3 is 2"),
    ([[0, -1], [1, 1]], [5, 5], "row 1 repeats token 1"),
], ids=["token = seq_len", "below -1", "repeat", "past a short context", "second row"])
def test_violations_name_the_row_entry_and_value(rows, seq, message):
    with pytest.raises(InputError, match=f"top_k_tokens: {message}"):
        _check(rows, seq)


def test_a_row_that_addresses_its_slots_ranges_over_the_slot_table():
    _check([[6, 4, 2]], [4], slot_table=[8])  # single-step short row: extra-page slots 4..7 included
    with pytest.raises(InputError, match=r"in \[0, hot_buffer_size \+ page_size=8 \(seq_len 4 <= hot_buffer_size"):
        _check([[8, 4, 2]], [4], slot_table=[8])
    with pytest.raises(InputError, match="seq_len=4"):  # slot_table 0: an ordinary row
        _check([[6, 4, 2]], [4], slot_table=[0])


@pytest.mark.parametrize("seed", range(7))
def test_the_sanitizers_single_step_cases_are_within_the_contract(seed):
    # scripts/gpu_sanitize.py builds its own swap inputs; out of contract, the wrapper refuses them and
    # the sanitizer's "real" run fails before any kernel runs (as it did on the GPU, 2026-12-01). Here
    # on the CPU: the same inputs through the PyTorch reference, which validates like the wrapper.
    from hisparse.kernels.reference.swap_single import swap_single_step

    mod = _sanitizer_script()
    assert len(mod.SWAP_CASES) == 7
    item, plan, _, batch = mod.SWAP_CASES[seed]
    kw = mod._swap_case(item, plan, seed, device="cpu", batch=batch)
    assert kw["top_k_tokens"].shape[0] == batch
    swap_single_step(**kw)
    assert int((kw["top_k_device_locs"][:3] >= 0).sum()) > 0  # real rows got device rows


def test_the_sanitizer_runs_both_copies_of_the_single_step_swap():
    # the flat copy (calls of at most FLAT_COPY_MAX_BATCH requests) and the warp copy above it are two
    # instantiations; a real case of each, or one goes unchecked under compute-sanitizer
    from hisparse.kernels.ops.swap_single import FLAT_COPY_MAX_BATCH

    batches = {batch for _, _, grid, batch in _sanitizer_script().SWAP_CASES if grid == 0}
    assert any(b <= FLAT_COPY_MAX_BATCH for b in batches) and any(b > FLAT_COPY_MAX_BATCH for b in batches)


def test_the_sanitizer_runs_the_grid_copy_with_one_and_several_tasks_a_request():
    # the grid copy deals each request's plan over copy_blocks // GRID_COPY_REQUESTS tasks (at least one);
    # one task a request and several take different paths through planned.cuh's request-major loop
    from hisparse.kernels.ops.swap_single import grid_copy_tiles

    tiles = {grid_copy_tiles(grid) for _, _, grid, _ in _sanitizer_script().SWAP_CASES if grid}
    assert 1 in tiles and any(t > 1 for t in tiles)


def _sanitizer_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "gpu_sanitize.py"
    spec = importlib.util.spec_from_file_location("gpu_sanitize", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("sms", [132, 78])  # H200, H20
def test_the_sanitizers_multi_step_cases_cover_both_gather_builds_and_keep_the_invariants(sms):
    # The second case must be the smallest batch whose 2-per-SM gather grid runs two rounds (the rule
    # of csrc/swap_multi.cuh launch_gather: tiles = 2 * SMs // batch CTAs of 256 threads per request, a
    # second round when tiles * 256 < steps * top_k), so compute-sanitizer sees the 64-register build;
    # and both cases must be valid inputs that the reference swaps without an invariant violation.
    from hisparse.kernels.reference.invariants import check_multi_step, snapshot
    from hisparse.kernels.reference.swap_multi import swap_multi_step

    mod = _sanitizer_script()
    (b1, s1, k1, h1), (b2, s2, k2, h2) = mod.multi_step_cases(sms)
    assert min(2 * sms // b1, -(-s1 * k1 // 256)) * 256 >= s1 * k1  # one round
    assert (2 * sms // b2) * 256 < s2 * k2 <= (2 * sms // (b2 - 1)) * 256  # two rounds, not at b2 - 1
    for case in mod.multi_step_cases(sms):
        kw = mod.multi_step_inputs(*case)
        before = snapshot(kw)
        swap_multi_step(**kw)
        assert check_multi_step(inputs=kw, before=before, after=snapshot(kw)) == [], case
        pool = kw["host_cache"].numel() * kw["host_cache"].element_size()
        assert pool < 50 << 20, case  # fits in an H100's or H200's L2 (50 / 60 MiB), the rule's other half
