"""API errors name the argument at fault (issue 40), and ``hisparse.reference`` leads to its ops.
Each bad call sits next to its planted control: the same call, unmodified, that must run."""
from __future__ import annotations

import pytest
import torch

import hisparse
from hisparse.errors import InputError
from hisparse.kernels.scenarios import build_case


def _case():
    tokens = torch.tensor([[[0, 1, 2, 3], [1, 2, 3, 4]]], dtype=torch.int32)
    return build_case(tokens, torch.tensor([100, 100], dtype=torch.int64), hot=8, page=2, max_len=128)


def test_control_the_unmodified_call_runs():
    hisparse.reference.swap_multi_step(**_case().kwargs)


def test_an_item_size_the_buffers_were_not_made_with_is_blamed_on_item_size_bytes():
    kw = _case().kwargs
    assert kw["item_size_bytes"] == 576
    with pytest.raises(InputError) as e:
        hisparse.reference.swap_multi_step(**{**kw, "item_size_bytes": 1154})
    assert str(e.value).startswith("item_size_bytes: 1154 does not divide device_buffer's")
    assert "scratch_locs" not in str(e.value)


def test_a_negative_seq_len_is_blamed_on_seq_lens():
    kw = _case().kwargs
    with pytest.raises(InputError) as e:
        hisparse.reference.swap_multi_step(**{**kw, "seq_lens": torch.tensor([-5, 100], dtype=kw["seq_lens"].dtype)})
    assert str(e.value) == "seq_lens: row 0, step 0: must be >= 0 (a context length), got -5"


def test_a_table_row_outside_a_whole_buffer_is_still_blamed_on_the_table():
    kw = _case().kwargs
    locs = kw["device_buffer_locs"].clone()
    locs[0, 0] = 10_000
    with pytest.raises(InputError, match=r"^device_buffer_locs: row 10000"):
        hisparse.reference.swap_multi_step(**{**kw, "device_buffer_locs": locs})


def test_hisparse_reference_exposes_its_ops_and_names_what_it_has():
    import importlib

    importlib.import_module("hisparse.kernels.reference.copy_planned")  # the submodule of that name, loaded first

    ref = hisparse.reference
    for name in ("swap_single_step", "swap_multi_step", "copy_planned", "check_single_step", "check_multi_step"):
        assert callable(getattr(ref, name)) and getattr(ref, name).__name__ == name
    assert ref.swap_multi.__name__ == "hisparse.kernels.reference.swap_multi"  # the submodule, as before
    with pytest.raises(AttributeError, match="it exports swap_single_step, swap_multi_step"):
        ref.swap_multi_step_v2  # noqa: B018


def _batch_two_case():
    tokens = torch.tensor([[[0, 1, 2, 3], [1, 2, 3, 4]], [[5, 6, 7, 8], [6, 7, 8, 9]]], dtype=torch.int32)
    return build_case(tokens, torch.tensor([100, 100, 100, 100], dtype=torch.int64), hot=8, page=2, max_len=128,
                      record_plan=True)


@pytest.mark.parametrize(("name", "words"), [
    ("top_k_device_locs", "rows overlap"),
    ("miss_src", "rows overlap"),
    ("miss_dst", "rows overlap"),
    ("miss_count", "must be contiguous"),
    ("device_buffer_tokens", "rows overlap"),
])
def test_a_written_tensor_whose_rows_share_memory_is_blamed_on_it(name, words):
    hisparse.reference.swap_multi_step(**_batch_two_case().kwargs)  # control: distinct rows run
    kw = _batch_two_case().kwargs
    kw[name] = kw[name][:1].expand_as(kw[name])
    if name == "device_buffer_tokens":  # the two slot tables share one row stride, so both are expanded
        kw["device_buffer_locs"] = kw["device_buffer_locs"][:1].expand_as(kw["device_buffer_locs"])
    before = [t.clone() for t in (kw["device_buffer"], kw["state"].ref_epochs, kw["state"].clock)]
    with pytest.raises(InputError) as e:
        hisparse.reference.swap_multi_step(**kw)
    assert str(e.value).startswith(f"{name}: ") and words in str(e.value)
    after = (kw["device_buffer"], kw["state"].ref_epochs, kw["state"].clock)
    assert all(torch.equal(a, b) for a, b in zip(before, after))
