"""The one definition of every op's arguments (torch-free).

Each op (swap_single, swap_multi, copy_planned, gather_floor) has ONE ordered table of ``Arg`` rows.
Everything that takes the op's arguments is produced from it:

- the PyTorch reference and the validation functions (``@keyword_op(op)``): keyword-only calls,
  "unknown argument" / "missing argument" checked here, defaults filled in, ``inspect.signature``
  and the docstring's argument list derived from the table;
- the CUDA wrapper (``@keyword_op(op, gpu=True)``): the same plus its launch knobs;
- the C++ entry's positional call: ``OpArgs.cpp_values(bound)`` walks the rows in table order,
  so the row order IS the C++ parameter order (tests/kernels/test_op_args.py reads each
  ``csrc/<op>.cuh`` entry's parameter list and holds it to ``OpArgs.cpp_order()``).

Adding an argument is one row here (in its C++ position), then its checks where they belong.
The table keeps the rows in C++ order because callers pass everything by keyword: the Python
order is only what ``help()`` shows.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hisparse.errors import InputError

TENSOR, INT, BOOL, STATE = "tensor", "int", "bool", "state"
KINDS = (TENSOR, INT, BOOL, STATE)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # the default of an argument the caller must pass

# The multi-step state's tensors, in the order the C++ entry takes them (hisparse.kernels.state.MultiStepState).
STATE_FIELDS = ("hash_index", "ref_epochs", "clock", "counters", "scratch_locs", "miss_keys", "miss_vals", "miss_order")


@dataclass(frozen=True)
class Arg:
    """One argument of an op.

    ``dtypes``: allowed torch dtype names ("" = any: byte-addressed KV buffers). ``default``:
    REQUIRED or the value used when the caller leaves it out (None for an optional tensor).
    ``mutated``: the op writes it. ``gpu_only``: a launch knob of the CUDA wrapper that the
    reference and the validation do not take. ``cpp``: passed to the C++ entry (False: a template
    argument or Python-only); a STATE argument passes its ``STATE_FIELDS`` in its place.
    ``cpp_none``: what the C++ entry gets when the value is None (its "auto" encoding).
    """

    name: str
    kind: str
    doc: str
    dtypes: tuple[str, ...] = ()
    default: Any = REQUIRED
    mutated: bool = False
    gpu_only: bool = False
    cpp: bool = True
    cpp_none: Any = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def cpp_names(self) -> tuple[str, ...]:
        if not self.cpp:
            return ()
        return STATE_FIELDS if self.kind == STATE else (self.name,)


class Bound(dict):
    """One call's arguments by name, in table order (``bound.item_size_bytes`` or ``bound["..."]``)."""

    op: OpArgs

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def op_kwargs(self) -> dict[str, Any]:
        """The arguments the reference and the validation take (the wrapper's launch knobs left out)."""
        return {name: self[name] for name in self.op._templates[False]}


@dataclass(frozen=True)
class OpArgs:
    """An op's ordered argument table. ``function``: its public name, for error messages."""

    op: str
    function: str
    entry: str
    args: tuple[Arg, ...]

    def __post_init__(self) -> None:
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.op}: argument names repeat: {names}")
        for a in self.args:
            if a.kind not in KINDS:
                raise ValueError(f"{self.op}.{a.name}: kind must be one of {', '.join(KINDS)}, got {a.kind!r}")

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(f"{self.op} has no argument {name!r}")

    def default(self, name: str) -> Any:
        return self.arg(name).default

    def names(self, *, gpu: bool = False) -> tuple[str, ...]:
        return tuple(a.name for a in self._args(gpu))

    def cpp_order(self) -> tuple[str, ...]:
        """The C++ entry's parameter names, in order (state fields expanded in place)."""
        return tuple(n for a in self.args for n in a.cpp_names())

    def _args(self, gpu: bool) -> tuple[Arg, ...]:
        return self.args if gpu else tuple(a for a in self.args if not a.gpu_only)

    @functools.cached_property
    def _templates(self) -> dict[bool, dict[str, Any]]:
        """Per ``gpu``: every name in table order -> its default (REQUIRED where the caller must pass it)."""
        return {gpu: {a.name: a.default for a in self._args(gpu)} for gpu in (False, True)}

    def bind(self, kwargs: Mapping[str, Any], *, gpu: bool = False) -> Bound:
        """Check the names of one call (unknown, missing) and fill in defaults; raises InputError.

        Runs on every call of every op (once through a wrapper: its validation takes the Bound via
        ``with_bound``), so it is two dict copies and a scan, no per-argument Python loop unless
        something is wrong."""
        template = self._templates[gpu]
        bound = Bound(template)
        bound.update(kwargs)  # known names keep the table's order; unknown ones land at the end
        if len(bound) != len(template):
            unknown = next(k for k in kwargs if k not in template)
            raise InputError(f"{unknown}: not an argument of {self.function}; it takes {', '.join(template)}")
        if any(v is REQUIRED for v in bound.values()):  # `is`: `in` would call tensors' __eq__
            args = self._args(gpu)
            missing = [a.name for a in args if bound[a.name] is REQUIRED]
            raise InputError(f"{', '.join(missing)}: missing; {self.function} requires "
                             f"{', '.join(a.name for a in args if a.required)}")
        bound.op = self
        return bound

    def cpp_values(self, bound: Mapping[str, Any]) -> list[Any]:
        """The positional values of the C++ entry call, in ``cpp_order()``."""
        out: list[Any] = []
        for a in self.args:
            if not a.cpp:
                continue
            value = bound[a.name]
            if a.kind == STATE:
                out.extend(getattr(value, f) for f in STATE_FIELDS)
            else:
                out.append(a.cpp_none if value is None else value)
        return out

    def signature(self, *, gpu: bool = False) -> inspect.Signature:
        kw = inspect.Parameter.KEYWORD_ONLY
        empty = inspect.Parameter.empty
        return inspect.Signature([inspect.Parameter(a.name, kw, default=empty if a.required else a.default)
                                  for a in self._args(gpu)])

    def doc(self, *, gpu: bool = False) -> str:
        """The argument list of a docstring, one line an argument."""
        lines = [f"Arguments (keyword-only; the table in hisparse/kernels/signature.py, {self.op}):"]
        for a in self._args(gpu):
            what = a.kind + (f" {'/'.join(a.dtypes)}" if a.dtypes else "")
            flags = ", ".join(f for f, on in (("optional", not a.required), ("mutated", a.mutated)) if on)
            default = "" if a.required else f" = {a.default!r}"
            lines.append(f"    {a.name}{default} ({what}{'; ' + flags if flags else ''}): {a.doc}")
        return "\n".join(lines)


def keyword_op(op: str, *, gpu: bool = False) -> Callable[[Callable[[Bound], Any]], Callable[..., Any]]:
    """Decorator: ``fn(bound)`` becomes ``fn(**kwargs)`` taking exactly the table's arguments
    (``gpu``: the wrapper's launch knobs too), with its signature and argument docs."""
    table = OPS[op]

    def wrap(fn: Callable[[Bound], Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(**kwargs: Any) -> Any:
            return fn(table.bind(kwargs, gpu=gpu))

        call.__signature__ = table.signature(gpu=gpu)  # type: ignore[attr-defined]
        # The body on arguments bound already: a wrapper hands its own Bound to the validation it runs,
        # so the launch path binds once (extra launch knobs in it are ignored by the body).
        call.with_bound = fn  # type: ignore[attr-defined]
        call.__doc__ = f"{inspect.cleandoc(fn.__doc__ or '')}\n\n{table.doc(gpu=gpu)}"
        return call

    return wrap


def _t(name: str, doc: str, *dtypes: str, **kw: Any) -> Arg:
    return Arg(name, TENSOR, doc, dtypes=tuple(dtypes), **kw)


def _plan(width: str) -> tuple[Arg, ...]:
    """The optional miss plan a swap records (all three or none)."""
    return (
        _t("miss_src", f"[>=bs, >={width}] host row of each miss (plan)", "int64", default=None, mutated=True),
        _t("miss_dst", f"[>=bs, >={width}] device row of each miss (plan)", "int32", default=None, mutated=True),
        _t("miss_count", "[>=bs] misses per batch row (plan)", "int32", default=None, mutated=True),
    )


_INDEX = ("int32", "int64")
_HOST_CACHE = _t("host_cache", "host KV rows, byte-addressed (pinned CPU or on the device)")
_DEVICE_BUFFER = _t("device_buffer", "device KV rows, byte-addressed", mutated=True)
_ITEM = Arg("item_size_bytes", INT, "bytes of one KV row (any size, copied byte-exactly)")
_NUM_REAL = _t("num_real_reqs", "[1] rows b < num_real_reqs[0] are real, the rest padding", "int32")
_DEBUG = Arg("debug", BOOL, "also check the value-level contract first (one device->host sync)",
             default=False, gpu_only=True, cpp=False)


def _swap_head(top_k_shape: str, *, locs_mutated: bool) -> tuple[Arg, ...]:
    """The arguments both swaps start with, in their C++ order."""
    return (
        _t("top_k_tokens", f"{top_k_shape} token positions the attention wants (-1 = none)", "int32"),
        _t("device_buffer_tokens", "[R, HOT + page_size] token held by each slot", "int32", mutated=True),
        _t("host_cache_locs", "[R, max_len] host row of each token (-1 = not on host)", "int64"),
        _t("device_buffer_locs", "[R, HOT + page_size] device row of each slot", "int32", mutated=locs_mutated),
        _HOST_CACHE,
        _DEVICE_BUFFER,
        _t("top_k_device_locs", f"{top_k_shape} output: device row of each top-k token", "int32", mutated=True),
        _t("req_pool_indices", "[bs] request slot of each batch row", *_INDEX),
    )


SWAP_SINGLE = OpArgs("swap_single", "swap_single_step", "hisparse::swap_single_entry", (
    *_swap_head("[bs, K]", locs_mutated=False),
    _t("seq_lens", "[bs] sequence length of each batch row", *_INDEX),
    _t("lru_slots", "[R, HOT] slots in LRU order, oldest first", "int16", mutated=True),
    _NUM_REAL,
    _ITEM,
    Arg("page_size", INT, "extra slots past HOT (the newest tokens' page)", default=1),
    *_plan("K"),
    Arg("block_size", INT, "threads per CTA (template argument)", default=1024, gpu_only=True, cpp=False),
    Arg("copy_blocks", INT, "0 = the swap kernel copies its request's misses (one CTA per request); n >= 1 = the "
        "swap records the plan (miss_src, miss_dst, miss_count required) and a copy over n CTAs follows",
        default=0, gpu_only=True, cpp=False),
    _DEBUG,
))

SWAP_MULTI = OpArgs("swap_multi", "swap_multi_step", "hisparse::swap_multi_entry", (
    *_swap_head("[bs, steps, top_k]", locs_mutated=True),  # the commit rotates scratch rows in
    _t("seq_lens", "[bs * steps] sequence length of each (row, step)", *_INDEX),
    _NUM_REAL,
    Arg("state", STATE, "hisparse.kernels.state.MultiStepState (hash index, clock, scratch rows, ...)", mutated=True),
    *_plan("steps * top_k"),
    _ITEM,
    Arg("pdl", BOOL, "None = auto (on from sm_90); True/False force the instantiation (template argument; "
        "the reference accepts and ignores it)", default=None, cpp=False),
    _DEBUG,
))

COPY_PLANNED = OpArgs("copy_planned", "copy_planned", "hisparse::copy_planned_entry", (
    _t("miss_src", "[>=batch, width] host row of each planned copy (negative = skip)", "int64"),
    _t("miss_dst", "[>=batch, width] device row of each planned copy (negative = skip)", "int32"),
    _t("miss_count", "[batch] planned copies per row", "int32"),
    _NUM_REAL,
    _HOST_CACHE,
    _DEVICE_BUFFER,
    _ITEM,
    Arg("num_blocks", INT, "grid size (small on purpose: the copy shares the GPU with attention)",
        default=8, gpu_only=True),
    Arg("tiles_per_request", INT, "0 = the plan's rows round-robin over every warp of the grid; t >= 1 = "
        "request-major: each request's rows over t tasks, the grid taking the tasks in request order",
        default=0, gpu_only=True),
    Arg("block_size", INT, "threads per CTA (template argument)", default=1024, gpu_only=True, cpp=False),
    _DEBUG,
))

GATHER_FLOOR = OpArgs("gather_floor", "gather_floor", "hisparse::gather_floor_entry", (
    _t("src_rows", "[n] host row of each copy", "int64"),
    _t("dst_rows", "[n] device row of each copy", "int32"),
    _HOST_CACHE,
    _DEVICE_BUFFER,
    _ITEM,
    Arg("num_blocks", INT, "grid size; None = one CTA per SM (flat gather) or 4 (warp gather), never more than the rows need",
        default=None, gpu_only=True, cpp_none=0),
    Arg("block_size", INT, "threads per CTA, a multiple of 32", default=256, gpu_only=True),
    # 1: in waves over the grid, the loads in flight set the span of the pool being read, and cold
    # translations favour a narrow one (805 us against 873 at 4, the same warm; csrc/include/hisparse/gather.cuh)
    Arg("loads_in_flight", INT, "16-byte loads per thread before the first store (template argument; x 16/W for W-byte words)",
        default=1, gpu_only=True, cpp=False),
    _DEBUG,
))

OPS: dict[str, OpArgs] = {t.op: t for t in (SWAP_SINGLE, SWAP_MULTI, COPY_PLANNED, GATHER_FLOOR)}


def cpp_order(op: str) -> tuple[str, ...]:
    return OPS[op].cpp_order()


def bind(op: str, kwargs: Mapping[str, Any], *, gpu: bool = False) -> Bound:
    return OPS[op].bind(kwargs, gpu=gpu)


__all__ = ["Arg", "Bound", "OpArgs", "OPS", "REQUIRED", "STATE_FIELDS", "bind", "cpp_order", "keyword_op"]
