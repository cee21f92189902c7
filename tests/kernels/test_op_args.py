"""The op argument table (hisparse/kernels/signature.py) against the C++ entries and the callers.

The wrappers call each C++ entry positionally with ``OpArgs.cpp_values``, so the table's order must
be the entry's parameter order: the tests read every ``csrc/<op>.cuh`` entry's parameter list and
hold it to ``cpp_order()``, with controls showing a planted reordering is caught. No GPU needed.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from hisparse.errors import InputError
from hisparse.kernels import signature
from hisparse.kernels.signature import OPS, STATE_FIELDS

CSRC = Path(__file__).resolve().parents[2] / "csrc"


def entry_parameters(source: str, function: str) -> list[str]:
    """Parameter names, in order, of ``void <function>(...)`` in C++ source text."""
    m = re.search(rf"\bvoid\s+{re.escape(function)}\s*\(", source)
    assert m, f"no 'void {function}(' in the source"
    depth, i, start = 1, m.end(), m.end()
    params: list[str] = []
    angle = 0
    while depth:
        c = source[i]
        if c in "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "<":
            angle += 1
        elif c == ">":
            angle -= 1
        if (c == "," and depth == 1 and angle == 0) or depth == 0:
            params.append(source[start:i])
            start = i + 1
        i += 1
    names = []
    for p in params:
        name = re.search(r"(\w+)\s*$", p.strip())
        assert name, f"{function}: cannot read a parameter name in {p!r}"
        names.append(name.group(1))
    return names


def order_mismatch(table: signature.OpArgs, source: str) -> str | None:
    """None when the entry's parameters are the table's C++ order, else what differs (first position)."""
    cpp = entry_parameters(source, table.entry.split("::")[-1])
    want = list(table.cpp_order())
    if cpp == want:
        return None
    for i, (got, exp) in enumerate(zip(cpp, want)):
        if got != exp:
            return f"{table.op}: position {i} is {got!r} in C++, {exp!r} in the table"
    return f"{table.op}: C++ takes {len(cpp)} parameters, the table {len(want)}"


def _source(op: str) -> str:
    return (CSRC / f"{op}.cuh").read_text()


@pytest.mark.parametrize("op", sorted(OPS))
def test_cpp_entry_takes_the_table_order(op):
    assert order_mismatch(OPS[op], _source(op)) is None


def test_parser_reads_the_single_step_entry_literally():
    # Written out once here, independent of the table: what csrc/swap_single.cuh takes today.
    assert entry_parameters(_source("swap_single"), "swap_single_entry") == [
        "top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs", "host_cache",
        "device_buffer", "top_k_device_locs", "req_pool_indices", "seq_lens", "lru_slots", "num_real_reqs",
        "item_size_bytes", "page_size", "miss_src", "miss_dst", "miss_count",
    ]


def test_parser_reads_optional_template_parameters():
    src = "template <bool k>\nvoid f_entry(tvm::ffi::Optional<tvm::ffi::TensorView> a, std::pair<int, int> b,\n int64_t c) {}"
    assert entry_parameters(src, "f_entry") == ["a", "b", "c"]


def test_control_a_reordered_cpp_entry_is_caught():
    src = _source("swap_multi")
    planted = src.replace("tvm::ffi::TensorView clock,", "tvm::ffi::TensorView @@,", 1)
    planted = planted.replace("tvm::ffi::TensorView counters,", "tvm::ffi::TensorView clock,", 1)
    planted = planted.replace("tvm::ffi::TensorView @@,", "tvm::ffi::TensorView counters,", 1)
    assert planted != src
    assert order_mismatch(OPS["swap_multi"], planted) == (
        "swap_multi: position 12 is 'counters' in C++, 'clock' in the table")


def test_control_a_reordered_table_is_caught():
    table = OPS["copy_planned"]
    args = list(table.args)
    args[0], args[1] = args[1], args[0]
    swapped = dataclasses.replace(table, args=tuple(args))
    assert order_mismatch(swapped, _source("copy_planned")) == (
        "copy_planned: position 0 is 'miss_src' in C++, 'miss_dst' in the table")


def test_control_a_parameter_missing_from_the_table_is_caught():
    table = OPS["gather_floor"]
    fewer = dataclasses.replace(table, args=tuple(a for a in table.args if a.name != "block_size"))
    assert order_mismatch(fewer, _source("gather_floor")) == "gather_floor: C++ takes 7 parameters, the table 6"


# ---- the positional values the wrappers pass ----------------------------------------------------


def test_cpp_values_expand_the_state_in_place():
    table = OPS["swap_multi"]
    kwargs = {name: f"<{name}>" for name in table.names(gpu=True)}
    kwargs["state"] = SimpleNamespace(**{f: f"<state.{f}>" for f in STATE_FIELDS})
    values = table.cpp_values(table.bind(kwargs, gpu=True))
    assert values[9:19] == ["<num_real_reqs>", "<state.hash_index>", "<state.ref_epochs>", "<state.clock>",
                            "<state.counters>", "<state.scratch_locs>", "<state.miss_keys>", "<state.miss_vals>",
                            "<state.miss_order>", "<miss_src>"]
    assert values[-1] == "<item_size_bytes>"
    assert "<pdl>" not in values and "<debug>" not in values  # template argument / Python only


def test_cpp_values_encode_auto_num_blocks_as_zero():
    table = OPS["gather_floor"]
    given = dict(src_rows="s", dst_rows="d", host_cache="h", device_buffer="b", item_size_bytes=512)
    assert table.cpp_values(table.bind(given, gpu=True)) == ["s", "d", "h", "b", 512, 0, 256]
    assert table.cpp_values(table.bind({**given, "num_blocks": 7}, gpu=True))[5] == 7


# ---- the keyword sets every caller relies on ----------------------------------------------------

SINGLE = ["top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs", "host_cache",
          "device_buffer", "top_k_device_locs", "req_pool_indices", "seq_lens", "lru_slots", "num_real_reqs",
          "item_size_bytes", "page_size", "miss_src", "miss_dst", "miss_count"]
MULTI = ["top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs", "host_cache",
         "device_buffer", "top_k_device_locs", "req_pool_indices", "seq_lens", "state", "num_real_reqs",
         "item_size_bytes", "miss_src", "miss_dst", "miss_count", "pdl"]
PLANNED = ["miss_src", "miss_dst", "miss_count", "num_real_reqs", "host_cache", "device_buffer", "item_size_bytes"]
GATHER = ["src_rows", "dst_rows", "host_cache", "device_buffer", "item_size_bytes"]

# (module, function, keywords, defaults of the optional ones) as callers used them before the table.
FUNCTIONS = [
    ("hisparse.kernels.reference.swap_single", "swap_single_step", SINGLE,
     {"page_size": 1, "miss_src": None, "miss_dst": None, "miss_count": None}),
    ("hisparse.kernels.validation.swap_single", "check_swap_single_inputs", SINGLE, None),
    ("hisparse.kernels.validation.swap_single", "check_swap_single_contract", SINGLE, None),
    ("hisparse.kernels.ops.swap_single", "swap_single_step", SINGLE + ["block_size", "copy_blocks", "debug"],
     {"page_size": 1, "miss_src": None, "miss_dst": None, "miss_count": None, "block_size": 1024, "copy_blocks": 0,
      "debug": False}),
    ("hisparse.kernels.reference.swap_multi", "swap_multi_step", MULTI,
     {"miss_src": None, "miss_dst": None, "miss_count": None, "pdl": None}),
    ("hisparse.kernels.validation.swap_multi", "check_swap_multi_inputs", MULTI, None),
    ("hisparse.kernels.validation.swap_multi", "check_swap_multi_contract", MULTI, None),
    ("hisparse.kernels.ops.swap_multi", "swap_multi_step", MULTI + ["debug"],
     {"miss_src": None, "miss_dst": None, "miss_count": None, "pdl": None, "debug": False}),
    ("hisparse.kernels.reference.copy_planned", "copy_planned", PLANNED, {}),
    ("hisparse.kernels.validation.copy_planned", "check_copy_planned_inputs", PLANNED, {}),
    ("hisparse.kernels.ops.copy_planned", "copy_planned", PLANNED + ["num_blocks", "tiles_per_request", "block_size",
                                                                     "debug"],
     {"num_blocks": 8, "tiles_per_request": 0, "block_size": 1024, "debug": False}),
    ("hisparse.kernels.validation.gather_floor", "check_gather_floor_inputs", GATHER, {}),
    ("hisparse.kernels.ops.gather_floor", "gather_floor", GATHER + ["num_blocks", "block_size", "loads_in_flight", "debug"],
     {"num_blocks": None, "block_size": 256, "loads_in_flight": 1, "debug": False}),
]


def _function(module: str, name: str):
    return getattr(__import__(module, fromlist=[name]), name)


@pytest.mark.parametrize("module,name,keywords,defaults", FUNCTIONS, ids=[f"{m.split('.')[2]}.{n}" for m, n, _, _ in FUNCTIONS])
def test_public_functions_keep_their_keyword_only_signature(module, name, keywords, defaults):
    params = inspect.signature(_function(module, name)).parameters
    assert sorted(params) == sorted(keywords)
    assert {p.kind for p in params.values()} == {inspect.Parameter.KEYWORD_ONLY}
    if defaults is not None:
        got = {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}
        assert got == defaults


@pytest.mark.parametrize("module,name", [(m, n) for m, n, _, _ in FUNCTIONS])
def test_docstrings_list_every_argument(module, name):
    fn = _function(module, name)
    params = inspect.signature(fn).parameters
    for p in params:
        assert re.search(rf"^    {p}\b", fn.__doc__, re.M), f"{name}: {p} missing from the docstring"


def test_an_unknown_argument_is_named_with_the_allowed_ones():
    from hisparse.kernels.reference.copy_planned import copy_planned

    with pytest.raises(InputError) as e:
        copy_planned(miss_src=None, miss_dst=None, miss_count=None, num_real_reqs=None, host_cache=None,
                     device_buffer=None, item_size_bytes=1, block_size=1024)
    assert str(e.value) == ("block_size: not an argument of copy_planned; it takes miss_src, miss_dst, miss_count, "
                            "num_real_reqs, host_cache, device_buffer, item_size_bytes")


def test_the_wrapper_accepts_its_launch_knobs_but_the_reference_does_not():
    from hisparse.kernels.ops.swap_single import swap_single_step as gpu
    from hisparse.kernels.reference.swap_single import swap_single_step as ref

    with pytest.raises(InputError, match=r"^debug: not an argument of swap_single_step; it takes top_k_tokens, "):
        ref(**dict.fromkeys(SINGLE), debug=True)
    # The wrapper binds debug and goes on to validate the values: the first check names item_size_bytes.
    with pytest.raises(InputError, match=r"^item_size_bytes: must be an int, got None"):
        gpu(**dict.fromkeys(SINGLE), debug=True)


def test_missing_arguments_are_all_named():
    from hisparse.kernels.validation.gather_floor import check_gather_floor_inputs

    with pytest.raises(InputError) as e:
        check_gather_floor_inputs(src_rows=None, host_cache=None, device_buffer=None)
    assert str(e.value) == ("dst_rows, item_size_bytes: missing; gather_floor requires src_rows, dst_rows, "
                            "host_cache, device_buffer, item_size_bytes")


def test_wrappers_launch_the_entry_the_table_names():
    from hisparse.kernels.ops import copy_planned, gather_floor, swap_multi, swap_single

    for module in (swap_single, swap_multi, copy_planned, gather_floor):
        spec = module.kernel_specs()[0]
        assert spec.entry == module.ARGS.entry == f"hisparse::{spec.op}_entry"
        assert (CSRC / f"{spec.op}.cuh").is_file()


def test_a_table_with_a_repeated_name_is_refused():
    arg = signature.Arg("x", signature.INT, "an int")
    with pytest.raises(ValueError, match="argument names repeat"):
        signature.OpArgs("op", "op", "hisparse::op_entry", (arg, arg))


# ---- the wrappers hand the C++ entry exactly cpp_values (no GPU: validation and launch stubbed) ----


class _Launch:
    """Stands in for jit.runner: records the template values and the positional call."""

    def __init__(self):
        self.calls = []

    def __call__(self, *template):
        return lambda *values: self.calls.append((template, values))


def _named(names):
    """A value per argument that says which argument it is (a 'cuda' device where a wrapper asks)."""
    return {n: SimpleNamespace(name=n, device=SimpleNamespace(type="cuda")) for n in names}


def _names(values):
    return [getattr(v, "name", v) for v in values]


def _stub_check(shape):
    """A stand-in validation: a keyword_op-like function whose bound form returns ``shape``."""
    def check(**kw):
        return shape

    check.with_bound = lambda bound: shape
    return check


@pytest.mark.parametrize("batch, flat_copy", [(1, True), (16, True), (17, False), (64, False)])
def test_single_step_wrapper_calls_the_entry_in_its_order(monkeypatch, batch, flat_copy):
    """... and picks the copy by batch: flat for calls of at most 16 requests, a miss per warp above."""
    from hisparse.kernels.ops import swap_single

    launch = _Launch()
    shape = SimpleNamespace(batch=batch, record_plan=False)
    monkeypatch.setattr(swap_single, "_kernel", launch)
    monkeypatch.setattr(swap_single, "check_swap_single_inputs", _stub_check(shape))
    monkeypatch.setattr(swap_single, "check_fits", lambda shape, device: None)
    swap_single.swap_single_step(**{**_named(SINGLE), "item_size_bytes": 64, "page_size": 2})
    (template, values), = launch.calls
    assert template == (1024, False, True, flat_copy)
    source = entry_parameters(_source("swap_single"), "swap_single_entry")
    # Without a plan the three plan tensors are stand-ins (top_k_device_locs): nothing is allocated.
    want = [{"item_size_bytes": 64, "page_size": 2}.get(n, n) for n in source[:13]] + ["top_k_device_locs"] * 3
    assert _names(values) == want


def test_single_step_grid_copy_launches_the_plan_only_swap_then_the_planned_copy(monkeypatch):
    from hisparse.kernels.ops import copy_planned, swap_single

    swap_launch, copy_launch = _Launch(), _Launch()
    shape = SimpleNamespace(batch=2, record_plan=True)
    monkeypatch.setattr(swap_single, "_kernel", swap_launch)
    monkeypatch.setattr(copy_planned, "_kernel", copy_launch)
    monkeypatch.setattr(swap_single, "check_swap_single_inputs", _stub_check(shape))
    monkeypatch.setattr(swap_single, "check_fits", lambda shape, device: None)
    swap_single.swap_single_step(**{**_named(SINGLE), "item_size_bytes": 64, "copy_blocks": 132})
    (template, values), = swap_launch.calls
    assert template == (1024, True, False, False)  # records the plan, does not copy (so no flat copy)
    assert _names(values) == [64 if n == "item_size_bytes" else n
                              for n in entry_parameters(_source("swap_single"), "swap_single_entry")]
    (template, values), = copy_launch.calls
    assert template == (1024,)
    source = entry_parameters(_source("copy_planned"), "copy_planned_entry")
    # 132 CTAs at about 4 requests at a time: 33 tasks a request
    assert _names(values) == [{"item_size_bytes": 64, "num_blocks": 132, "tiles_per_request": 33}.get(n, n)
                              for n in source]


@pytest.mark.parametrize("copy_blocks,record_plan,match", [
    (8, False, r"^copy_blocks: 8 copies from the miss plan after the swap; pass miss_src, miss_dst and miss_count"),
    (-1, True, r"^copy_blocks: must be"),
    (70000, True, r"^copy_blocks: must be"),
    (True, True, r"^copy_blocks: must be an int"),
])
def test_single_step_copy_blocks_is_checked(monkeypatch, copy_blocks, record_plan, match):
    from hisparse.kernels.ops import swap_single

    launch = _Launch()
    monkeypatch.setattr(swap_single, "_kernel", launch)
    monkeypatch.setattr(swap_single, "check_swap_single_inputs",
                        _stub_check(SimpleNamespace(batch=2, record_plan=record_plan)))
    monkeypatch.setattr(swap_single, "check_fits", lambda shape, device: None)
    with pytest.raises(InputError, match=match):
        swap_single.swap_single_step(**{**_named(SINGLE), "item_size_bytes": 64, "copy_blocks": copy_blocks})
    assert launch.calls == []


def test_multi_step_wrapper_calls_the_entry_in_its_order(monkeypatch):
    from hisparse.kernels.ops import swap_multi

    launch = _Launch()
    shape = SimpleNamespace(device="cuda:0", record_plan=True)
    monkeypatch.setattr(swap_multi, "_kernel", launch)
    monkeypatch.setattr(swap_multi, "check_swap_multi_inputs", _stub_check(shape))
    monkeypatch.setattr(swap_multi, "_check_cuda_call", lambda *a: None)
    kwargs = {**_named(MULTI), "item_size_bytes": 64, "pdl": True,
              "state": SimpleNamespace(**{f: SimpleNamespace(name=f) for f in STATE_FIELDS})}
    swap_multi.swap_multi_step(**kwargs)
    (template, values), = launch.calls
    assert template == (True, True)
    source = entry_parameters(_source("swap_multi"), "swap_multi_entry")
    assert _names(values) == [64 if n == "item_size_bytes" else n for n in source]
