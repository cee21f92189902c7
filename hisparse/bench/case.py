"""Benchmark cases: ``Case`` (one point of a sweep), its stable id, timing settings, the value
specs of every axis and workload parameter, and the pruning rules.

The YAML schema, loading and expansion (``load_config``, ``SweepConfig``, ``Expansion``) live in
hisparse/bench/config.py and are re-exported here. This module imports no torch (the CLI lists cases
without it); the limits below repeat hisparse.kernels.state's (tests/test_config.py checks they agree).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple

from hisparse.bench import implementations
from hisparse.bench.host_memory import (DEFAULT_HOST_ALLOCATION, DEFAULT_HOST_NUMA, HOST_ALLOCATIONS,
                                        HOST_NUMA_PLACEMENTS, HostMemory)
from hisparse.errors import ConfigError
from hisparse.kernels.limits import MAX_HOT_BUFFER_SIZE, MAX_STEPS, MAX_STEPS_X_TOP_K

# Which implementations exist, and what each is, is hisparse/bench/implementations.py's table; the
# groups below are read off it.
IMPLEMENTATIONS = implementations.IMPLEMENTATIONS
DEFAULT_IMPLEMENTATIONS = implementations.DEFAULT_IMPLEMENTATIONS
MULTI_STEP_IMPLEMENTATIONS = tuple(i.name for i in implementations.TABLE if i.multi_step)
PLANNED_IMPLEMENTATIONS = tuple(i.name for i in implementations.TABLE if i.planned)
LRU_IMPLEMENTATIONS = tuple(i.name for i in implementations.TABLE if not i.multi_step)
BASELINE_OF = {i.name: i.baseline for i in implementations.TABLE if i.baseline}
WORKLOADS = ("serving", "upstream", "distinct", "trace")

DEFAULT_SHARED_LAYERS = 3
PAGE_SIZE = 64  # extra-page slots after the hot buffer (upstream spec tests and benchmark)

# The upstream benchmark pattern (docs/semantics.md §5.1), scaled by top_k for `distinct`.
UPSTREAM_TOP_K = 2048
UPSTREAM_HOT_BUFFER_SIZE = 4096
UPSTREAM_MISSES_PER_STEP = 196
UPSTREAM_ADVANCE = 800
UPSTREAM_ROLL = 137
UPSTREAM_SEQ_LEN = 1_048_576

# `serving` defaults (hisparse/bench/workload.py builds it). Sources:
# - miss rate 196/2048 per step: upstream's benchmark (docs/semantics.md §5.1: 196 fresh of 2048 per
#   step, 782 unique misses over 4 steps; the serving model draws 4 x 196 = 784 distinct ones on average);
# - step overlap 1715/2048: upstream's benchmark, consecutive steps of one call share 1715 of 2048
#   entries (its hits are roll(arange(4096), 137*s)[:1852], 1852 - 137 = 1715);
# - recent re-reference 0.5: no published figure (the `trace` model's default);
# - contexts 16k-128k tokens: DeepSeek-V3.2's 128k context window, long-context serving from 16k (issue 13);
# - the host pool of one layer at most 48 GiB (batch x context_max x item): what a 128 GiB H200 node holds
#   next to everything else (12 GiB until the host-allocation sweep, configs/host-alloc.yaml, asked for 48 GB
#   pools; the layers of a case are capped by the config's host_memory_budget_gib besides).
SERVING_MISS_RATE = UPSTREAM_MISSES_PER_STEP / UPSTREAM_TOP_K
SERVING_STEP_OVERLAP = 1715 / UPSTREAM_TOP_K
SERVING_CONTEXT_MIN = 16_384
SERVING_CONTEXT_MAX = 131_072
SERVING_MAX_POOL_BYTES = 48 << 30

# The decode regime (docs/semantics.md, "Regimes"). A decode step runs every layer of the model once, each
# layer with its own host KV pool, and attention and the MLP between two swaps: the GPU's translations of a
# layer's host pages are cold when its swap comes round again. `layers` (L) gives a case L independent
# layers (own host rows in memory of their own, own device buffer, own swap state) and the timed graph
# issues its calls layer after layer, 0, 1, ..., L-1, 0, ... L = 1 is the warm regime: every call on one
# pool, back to back, as a bare kernel benchmark (and every run before 2026-12-04) times it.
# Measured on the H200 (2026-12-04, 50,048 scattered rows of 576 B per call): 45.7 GB/s back to back on one
# 3 GB pool, 24.2 GB/s rotating over 8 such pools.
DEFAULT_LAYERS = 61  # a config's default: DeepSeek-V3.2's 61 layers, capped by its host-memory budget
MAX_LAYERS = 1024
DEFAULT_HOST_MEMORY_BUDGET_GIB = 48.0  # a config's default (`host_memory_budget_gib`) on a 128 GiB node
LAYERED_WORKLOADS = ("serving", "trace", "distinct")
# Per-layer host regions start on whole 2 MiB spans: each layer's pool is its own allocation in an engine,
# so no two layers share a huge page or a 4 KiB page.
LAYER_ALIGN_BYTES = 2 << 20


class PatternGeometry(NamedTuple):
    """Shape of the upstream-style pattern for one (top_k, steps): per step ``top_k - misses_per_step``
    hits ``roll(arange(window), roll*s)[:hits]`` and ``misses_per_step`` misses (steps >= 2 repeat
    one earlier miss), ``unique`` distinct misses per call, contiguous from hot_buffer_size; each call
    adds ``advance`` to the miss block."""

    misses_per_step: int
    hits_per_step: int
    unique: int
    advance: int
    roll: int
    window: int


def pattern_geometry(top_k: int, steps: int) -> PatternGeometry:
    """top_k 2048 gives upstream's numbers exactly (196 misses, 782 unique for 4 steps, +800, roll 137)."""
    m = min(top_k - 1, max(1, round(top_k * UPSTREAM_MISSES_PER_STEP / UPSTREAM_TOP_K))) if top_k > 1 else 1
    unique = sum(m if s < 2 else m - 1 for s in range(steps))
    advance = max(unique, round(top_k * UPSTREAM_ADVANCE / UPSTREAM_TOP_K))
    roll = max(1, round(top_k * UPSTREAM_ROLL / UPSTREAM_TOP_K))
    return PatternGeometry(m, top_k - m, unique, advance, roll, 2 * top_k)


# ---------------------------------------------------------------------------------------------
# Timing settings


@dataclass(frozen=True)
class TimingSettings:
    warmup_calls: int = 5
    calls_per_graph: int = 100
    replays: int = 10
    l2_flush: bool = True
    check_calls: int = 2
    rounds: int = 1  # timing rounds per case, each on a freshly built workload (measure.run_case)
    replays_per_sample: int = 1  # graph replays averaged into one sample (hisparse/bench/timing.py says why)

    def __post_init__(self) -> None:
        for f in fields(self):
            spec = _TIMING_SPEC[f.name]
            try:
                spec.coerce(getattr(self, f.name))
            except _Invalid as e:
                raise ConfigError(f"timing.{f.name}: {e}") from None

    @property
    def max_calls_per_reset(self) -> int:
        """The most calls the engine makes between two workload resets (warm-up, check, one replay)."""
        return max(self.warmup_calls, self.calls_per_graph, self.check_calls, 1)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if d["replays_per_sample"] == 1:  # added 2026-11-30: configs without it keep their hash
            del d["replays_per_sample"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "TimingSettings":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (d or {}).items() if k in known})


# ---------------------------------------------------------------------------------------------
# Value specs (shared by axes, workload parameters and timing)


class _Invalid(Exception):
    """A value failed its spec; the message says what is allowed (the caller adds file and key)."""


_BOOL_WORDS = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False}


@dataclass(frozen=True)
class ParamSpec:
    kind: type
    default: Any = None
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()

    def allowed(self) -> str:
        if self.choices:
            return ", ".join(map(str, self.choices))
        if self.kind is bool:
            return "true/false (or on/off)"
        noun = {int: "an integer", float: "a number"}.get(self.kind, "a string")
        if self.lo is not None and self.hi is not None:
            return f"{noun} in [{self.lo}, {self.hi}]"
        if self.lo is not None:
            return f"{noun} >= {self.lo}"
        return noun

    def coerce(self, value: Any) -> Any:
        v = value
        if self.kind is bool:
            if isinstance(v, str) and v.lower() in _BOOL_WORDS:
                v = _BOOL_WORDS[v.lower()]
            elif isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
                v = bool(v)
            if not isinstance(v, bool):
                raise _Invalid(f"expected {self.allowed()}, got {_show(value)}")
            return v
        if self.kind is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise _Invalid(f"expected {self.allowed()}, got {_show(value)}")
        elif self.kind is float:
            if isinstance(v, str):  # YAML 1.1 reads `1e-3` as a string
                try:
                    v = float(v)
                except ValueError:
                    pass
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _Invalid(f"expected {self.allowed()}, got {_show(value)}")
            v = float(v)
        elif not isinstance(v, str):
            raise _Invalid(f"expected {self.allowed()}, got {_show(value)}")
        if self.choices and v not in self.choices:
            raise _Invalid(f"{_show(value)} is not allowed; allowed: {self.allowed()}")
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            raise _Invalid(f"{_show(value)} is out of range; allowed: {self.allowed()}")
        return v


def _show(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


AXIS_SPECS: dict[str, ParamSpec] = {
    "implementation": ParamSpec(str, choices=IMPLEMENTATIONS),
    "workload": ParamSpec(str, choices=WORKLOADS),
    "batch": ParamSpec(int, 1, lo=1, hi=4096),
    "steps": ParamSpec(int, 4, lo=1, hi=MAX_STEPS),  # the kernel's kMaxSteps: 5 is a config error, not a prune
    "top_k": ParamSpec(int, 2048, lo=1, hi=MAX_STEPS_X_TOP_K),
    "hot_buffer_size": ParamSpec(int, 4096, lo=1, hi=MAX_HOT_BUFFER_SIZE),
    "item_size_bytes": ParamSpec(int, 576, lo=1, hi=1 << 20),
    "pdl": ParamSpec(bool, True),
    "shared_layers": ParamSpec(int, DEFAULT_SHARED_LAYERS, lo=1, hi=64),
    # How the host pool is allocated and on which NUMA node (hisparse/bench/host_memory.py); apart from the
    # workload, so every workload runs on every kind. Named in a case id and its params only when not the
    # default, so every case written before they existed keeps its id and hash.
    "host_alloc": ParamSpec(str, DEFAULT_HOST_ALLOCATION, choices=HOST_ALLOCATIONS),
    "host_numa": ParamSpec(str, DEFAULT_HOST_NUMA, choices=HOST_NUMA_PLACEMENTS),
}
HOST_MEMORY_PARAMS = ("host_alloc", "host_numa")
AXES = tuple(AXIS_SPECS)

WORKLOAD_PARAMS: dict[str, dict[str, ParamSpec]] = {
    "serving": {
        "context_min": ParamSpec(int, SERVING_CONTEXT_MIN, lo=64, hi=1 << 24),  # tokens, per request uniform
        "context_max": ParamSpec(int, SERVING_CONTEXT_MAX, lo=64, hi=1 << 24),  # in [min, max] (page multiples)
        "miss_rate": ParamSpec(float, SERVING_MISS_RATE, lo=0.0, hi=1.0),  # per-step fraction of fresh tokens
        "step_overlap": ParamSpec(float, SERVING_STEP_OVERLAP, lo=0.0, hi=1.0),  # shared with the previous step
        "recent_reuse": ParamSpec(float, 0.5, lo=0.0, hi=1.0),  # rest: re-referenced from recent calls vs older
        # where the top-k's tokens sit: scattered over the request's own region, in token order, in
        # scattered runs of PAGE_SIZE tokens (64 rows, 36 KB at 576 B, contiguous), or scattered over the
        # whole pool (workload.py's _serving_layout)
        "positions": ParamSpec(str, "scattered", choices=("scattered", "consecutive", "chunks", "pool")),
        # order of each step's top-k entries: the indexer's (by score: no relation to the rows) or
        # sorted by host row (what a caller that sorts its top-k hands the swap); same tokens either way
        "read_order": ParamSpec(str, "indexer", choices=("indexer", "host_row")),
    },
    "upstream": {},
    "distinct": {},
    "trace": {
        "miss_rate": ParamSpec(float, 0.1, lo=0.0, hi=1.0),  # per-step fraction of fresh tokens
        "step_overlap": ParamSpec(float, 0.8, lo=0.0, hi=1.0),  # fraction shared with the previous step
        "locality": ParamSpec(float, 0.5, lo=0.0, hi=1.0),  # rest: from recent steps vs older resident
        "host_layout": ParamSpec(str, "scattered", choices=("scattered", "contiguous")),
    },
}

_LAYERS_SPEC = ParamSpec(int, 1, lo=1, hi=MAX_LAYERS)  # 1 for a Case built without it (ids without it mean 1)
for _name in LAYERED_WORKLOADS:
    WORKLOAD_PARAMS[_name]["layers"] = _LAYERS_SPEC

_TIMING_SPEC: dict[str, ParamSpec] = {
    "warmup_calls": ParamSpec(int, 5, lo=0, hi=100_000),
    "calls_per_graph": ParamSpec(int, 100, lo=1, hi=100_000),
    "replays": ParamSpec(int, 10, lo=10, hi=100_000),
    "l2_flush": ParamSpec(bool, True),
    "check_calls": ParamSpec(int, 2, lo=0, hi=100_000),
    "rounds": ParamSpec(int, 1, lo=1, hi=20),
    "replays_per_sample": ParamSpec(int, 1, lo=1, hi=1000),
}



# ---------------------------------------------------------------------------------------------
# Case: one point of a sweep


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _parse_text(spec: ParamSpec, text: str) -> Any:
    """A value written by ``_fmt`` back to its type (then checked by the spec)."""
    try:
        if spec.kind is int:
            return spec.coerce(int(text))
        if spec.kind is float:
            return spec.coerce(float(text))
    except ValueError:
        raise _Invalid(f"expected {spec.allowed()}, got {text!r}") from None
    return spec.coerce(text)


def _normalise_workload_params(workload: str, params: Any) -> tuple[tuple[str, Any], ...]:
    schema = WORKLOAD_PARAMS[workload]
    given = dict(params.items() if isinstance(params, Mapping) else params or ())
    out = {}
    for key, value in given.items():
        if key not in schema:
            allowed = ", ".join(schema) if schema else f"none ({workload} takes no parameters)"
            raise ConfigError(f"case: workload_params.{key}: unknown parameter of workload {workload!r}; "
                              f"allowed: {allowed}")
        try:
            out[key] = schema[key].coerce(value)
        except _Invalid as e:
            raise ConfigError(f"case: workload_params.{key}: {e}") from None
    for key, spec in schema.items():
        out.setdefault(key, spec.default)
    return tuple(sorted(out.items()))


_ID_PREFIXES = (("batch", "b"), ("steps", "s"), ("top_k", "k"), ("hot_buffer_size", "h"),
                ("item_size_bytes", "i"), ("pdl", "pdl"))


def format_case_id(params: Mapping[str, Any]) -> str:
    """``impl/workload/b64/s4/k2048/h4096/i576/pdl1``, then ``/key=value`` for every parameter that
    differs from its default (shared_layers of the planned implementations, workload parameters, seed)."""
    parts = [str(params["implementation"]), str(params["workload"])]
    parts += [f"{prefix}{int(params[key])}" for key, prefix in _ID_PREFIXES]
    if params["implementation"] in PLANNED_IMPLEMENTATIONS and params["shared_layers"] != DEFAULT_SHARED_LAYERS:
        parts.append(f"shared_layers={params['shared_layers']}")
    schema = WORKLOAD_PARAMS.get(str(params["workload"]), {})
    for key, value in sorted(dict(params.get("workload_params") or {}).items()):
        if key not in schema or value != schema[key].default:
            parts.append(f"{key}={_fmt(value)}")
    for key in HOST_MEMORY_PARAMS:
        if params.get(key, AXIS_SPECS[key].default) != AXIS_SPECS[key].default:
            parts.append(f"{key}={params[key]}")
    if params.get("seed", 0) != 0:
        parts.append(f"seed={params['seed']}")
    return "/".join(parts)


def _stored_workload_params(params: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """A case's workload parameters as stored: ``layers`` only where it is not 1, so that the params (and
    the config hashes) of warm-regime cases are those written before the parameter existed."""
    return {k: v for k, v in params if not (k == "layers" and v == 1)}


@dataclass(frozen=True)
class Case:
    """One benchmark case. Fields are normalised on construction: ``workload_params`` becomes the
    sorted tuple of every parameter (defaults filled in), the sequential-LRU implementations get
    ``pdl=False``, and only the planned ones have ``shared_layers`` (default 3; 0 for the others)."""

    implementation: str
    workload: str
    workload_params: tuple[tuple[str, Any], ...] = ()
    batch: int = 1
    steps: int = 4
    top_k: int = 2048
    hot_buffer_size: int = 4096
    item_size_bytes: int = 576
    pdl: bool = True
    shared_layers: int | None = None
    seed: int = 0
    timing: TimingSettings = field(default_factory=TimingSettings)
    host_alloc: str = DEFAULT_HOST_ALLOCATION
    host_numa: str = DEFAULT_HOST_NUMA

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("implementation", "workload", "batch", "steps", "top_k", "hot_buffer_size",
                     "item_size_bytes", "pdl", *HOST_MEMORY_PARAMS):
            try:
                put(name, AXIS_SPECS[name].coerce(getattr(self, name)))
            except _Invalid as e:
                raise ConfigError(f"case: {name}: {e}") from None
        put("workload_params", _normalise_workload_params(self.workload, self.workload_params))
        if self.implementation in PLANNED_IMPLEMENTATIONS:
            layers = DEFAULT_SHARED_LAYERS if self.shared_layers is None else self.shared_layers
            try:
                put("shared_layers", AXIS_SPECS["shared_layers"].coerce(layers))
            except _Invalid as e:
                raise ConfigError(f"case: shared_layers: {e}") from None
        else:
            put("shared_layers", 0)
        if self.implementation in LRU_IMPLEMENTATIONS:
            put("pdl", False)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"case: seed: expected an integer >= 0, got {_show(self.seed)}")
        if isinstance(self.timing, Mapping):
            put("timing", TimingSettings.from_dict(self.timing))
        if not isinstance(self.timing, TimingSettings):
            raise ConfigError(f"case: timing: expected TimingSettings, got {type(self.timing).__name__}")

    # -- identity ------------------------------------------------------------------------------
    @property
    def case_id(self) -> str:
        return format_case_id(self.to_dict())

    @property
    def params(self) -> dict[str, Any]:
        return self.to_dict()

    @property
    def workload_params_dict(self) -> dict[str, Any]:
        return dict(self.workload_params)

    def param(self, name: str) -> Any:
        return self.workload_params_dict[name]

    def baseline(self) -> "Case | None":
        """The same work done by sequential LRU (pdl off): ``lru_sequential`` for ``multi_step``,
        ``lru_sequential_planned`` (same shared layers) for ``multi_step_planned``; None for a baseline."""
        impl = BASELINE_OF.get(self.implementation)
        if impl is None:
            return None
        return replace(self, implementation=impl, pdl=False,
                       shared_layers=self.shared_layers if impl in PLANNED_IMPLEMENTATIONS else None)

    def baseline_id(self) -> str | None:
        """Id of the case the speedup is measured against (``derived.speedup_vs_lru_sequential``; the
        file also names it in ``derived.speedup_baseline``), or None for a baseline itself."""
        base = self.baseline()
        return base.case_id if base is not None else None

    def with_(self, **changes: Any) -> "Case":
        return replace(self, **changes)

    # -- derived sizes -------------------------------------------------------------------------
    @property
    def host_memory(self) -> HostMemory:
        return HostMemory(self.host_alloc, self.host_numa)

    @property
    def is_multi_step(self) -> bool:
        return self.implementation in MULTI_STEP_IMPLEMENTATIONS

    @property
    def is_planned(self) -> bool:
        return self.implementation in PLANNED_IMPLEMENTATIONS

    @property
    def layers(self) -> int:
        """L of the decode regime (1: the warm regime; workloads without the parameter have 1)."""
        return int(self.workload_params_dict.get("layers", 1))

    @property
    def graph_calls(self) -> int:
        """Calls in one timed graph: ``calls_per_graph`` rounded up to whole decode steps (a multiple of
        ``layers``), so that every replay visits every layer as often as every other."""
        return -(-int(self.timing.calls_per_graph) // self.layers) * self.layers

    @property
    def rounds(self) -> int:
        """Timing rounds of the case. A round rebuilds the workload so that another placement of its buffers
        enters the samples; L > 1 layers already hold L device buffers and L host regions of their own in
        every replay, so one round averages over L placements, and two more would triple the wall time of a
        decode-regime case (5 s -> 15 s at batch 1 and 61 layers on the H200) for nothing new."""
        return 1 if self.layers > 1 else int(self.timing.rounds)

    def layer_timing(self) -> TimingSettings:
        """The timing settings one layer of the case sees: its share of the calls (each layer takes every
        L-th call), which sizes its data (the calls it must hold between resets)."""
        if self.layers == 1:
            return self.timing
        per = lambda n: -(-int(n) // self.layers)  # noqa: E731
        return replace(self.timing, calls_per_graph=self.graph_calls // self.layers,
                       warmup_calls=per(self.timing.warmup_calls), check_calls=per(self.timing.check_calls))

    @property
    def occurrences(self) -> int:
        return self.steps * self.top_k

    @property
    def page_size(self) -> int:
        return PAGE_SIZE

    def problems(self) -> str | None:
        """Why this case cannot run (the expansion's prune reason), or None."""
        return prune_reason(self.to_dict(), self.timing)

    # -- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ``params`` object of a result file (docs/results-format.md); timing is stored apart."""
        return {"implementation": self.implementation, "workload": self.workload, "batch": self.batch,
                "steps": self.steps, "top_k": self.top_k, "hot_buffer_size": self.hot_buffer_size,
                "item_size_bytes": self.item_size_bytes, "pdl": self.pdl, "shared_layers": self.shared_layers,
                "workload_params": _stored_workload_params(self.workload_params), "seed": self.seed,
                **{k: getattr(self, k) for k in HOST_MEMORY_PARAMS if getattr(self, k) != AXIS_SPECS[k].default}}

    @classmethod
    def from_dict(cls, params: Mapping[str, Any], timing: TimingSettings | Mapping | None = None) -> "Case":
        """Inverse of ``to_dict`` (a ``timing`` key in ``params`` is used when ``timing`` is None)."""
        d = dict(params)
        t = d.pop("timing", None)
        allowed = {f.name for f in fields(cls)} - {"timing"}
        unknown = sorted(set(d) - allowed)
        if unknown:
            raise ConfigError(f"case: {unknown[0]}: unknown key; allowed keys: {', '.join(sorted(allowed))}")
        missing = [k for k in ("implementation", "workload") if k not in d]
        if missing:
            raise ConfigError(f"case: {missing[0]}: missing (required)")
        timing = timing if timing is not None else t
        d["timing"] = timing if isinstance(timing, TimingSettings) else TimingSettings.from_dict(timing)
        return cls(**d)

    @classmethod
    def from_id(cls, case_id: str, timing: TimingSettings | None = None) -> "Case":
        """Inverse of ``case_id`` (parameters not in the id take their defaults)."""
        parts = case_id.split("/")
        if len(parts) < 2 + len(_ID_PREFIXES):
            raise ConfigError(f"case id {case_id!r}: expected impl/workload/bN/sN/kN/hN/iN/pdlN[/key=value...]")
        d: dict[str, Any] = {"implementation": parts[0], "workload": parts[1], "workload_params": {}}
        for (key, prefix), text in zip(_ID_PREFIXES, parts[2:2 + len(_ID_PREFIXES)]):
            if not text.startswith(prefix) or not text[len(prefix):].isdigit():
                raise ConfigError(f"case id {case_id!r}: {key}: expected {prefix}<integer>, got {text!r}")
            d[key] = int(text[len(prefix):])
        d["pdl"] = bool(d["pdl"])
        schema = WORKLOAD_PARAMS.get(parts[1], {})
        for text in parts[2 + len(_ID_PREFIXES):]:
            key, sep, value = text.partition("=")
            spec = {"shared_layers": AXIS_SPECS["shared_layers"], "seed": ParamSpec(int, 0, lo=0),
                    **{k: AXIS_SPECS[k] for k in HOST_MEMORY_PARAMS}}.get(key)
            if not sep or (spec is None and key not in schema):
                raise ConfigError(f"case id {case_id!r}: {text!r}: expected key=value with key one of "
                                  f"{', '.join(['shared_layers', *schema, 'seed', *HOST_MEMORY_PARAMS])}")
            try:
                if spec is not None:
                    d[key] = _parse_text(spec, value)
                else:
                    d["workload_params"][key] = _parse_text(schema[key], value)
            except _Invalid as e:
                raise ConfigError(f"case id {case_id!r}: {key}: {e}") from None
        return cls.from_dict(d, timing)


# ---------------------------------------------------------------------------------------------
# Pruning: combinations that cannot run, with the reason


@dataclass(frozen=True)
class Pruned:
    params: dict[str, Any]
    reason: str

    @property
    def case_id(self) -> str:
        return format_case_id(self.params)


def baseline_id_of(params: dict) -> str | None:
    """``Case.baseline_id`` of a result's params; None for params this version cannot read."""
    try:
        return Case.from_dict(params).baseline_id()
    except Exception:  # noqa: BLE001 (params of an older config version: no speedup, not an error)
        return None


def prune_reason(params: Mapping[str, Any], timing: TimingSettings | None = None) -> str | None:
    """Why the case ``params`` (a ``Case.to_dict()``-shaped dict) cannot run, or None."""
    timing = timing or TimingSettings()
    impl, workload = params["implementation"], params["workload"]
    s, k, h = int(params["steps"]), int(params["top_k"]), int(params["hot_buffer_size"])
    if not 1 <= s <= MAX_STEPS:
        return f"steps {s} outside 1..{MAX_STEPS}"
    if k > h:
        return f"top_k {k} > hot_buffer_size {h} (one step's top-k must fit in the hot buffer)"
    if s * k > MAX_STEPS_X_TOP_K:
        return f"steps*top_k = {s}*{k} = {s * k} > {MAX_STEPS_X_TOP_K} (multi-step occurrence limit)"
    limit = implementations.get(impl).max_hot_buffer_size
    if h > limit:
        why = " (int16 lru_slots)" if impl in LRU_IMPLEMENTATIONS else ""
        return f"{impl} needs hot_buffer_size <= {limit}{why}, got {h}"
    if implementations.get(impl).source == "sglang":
        from hisparse.bench import sglang  # noqa: PLC0415 (torch-free: upstream's contract limits)

        if (why := sglang.prune_reason(impl, params)) is not None:
            return why
    memory = HostMemory(*(params.get(k, AXIS_SPECS[k].default) for k in HOST_MEMORY_PARAMS))
    if (why := memory.problem()) is not None:
        return why
    wp = dict(params.get("workload_params") or {})
    if workload == "upstream":
        if k != UPSTREAM_TOP_K:
            return f"upstream has a fixed shape: top_k {UPSTREAM_TOP_K} (docs/semantics.md §5.1), got {k}"
        if h < UPSTREAM_HOT_BUFFER_SIZE:
            return (f"upstream has a fixed shape: hot_buffer_size >= {UPSTREAM_HOT_BUFFER_SIZE} (its hits are "
                    f"tokens 0..{UPSTREAM_HOT_BUFFER_SIZE - 1}), got {h}")
        g = pattern_geometry(k, s)
        last = h + g.advance * timing.max_calls_per_reset + g.unique - 1
        if last >= UPSTREAM_SEQ_LEN - PAGE_SIZE:
            return (f"upstream: {timing.max_calls_per_reset} calls between resets reach token {last}, past its "
                    f"sequence length {UPSTREAM_SEQ_LEN} (fewer calls_per_graph)")
    elif h < 2 * k:
        why = ("its hits are drawn from the first 2*top_k tokens" if workload == "distinct"
               else "the resident set must hold more than the previous step")
        return f"{workload} needs hot_buffer_size >= 2*top_k = {2 * k} ({why}), got {h}"
    if workload == "serving":
        return _serving_prune_reason(wp, params, s, k, h)
    if workload == "trace":
        rate, overlap = float(wp.get("miss_rate", 0.0)), float(wp.get("step_overlap", 0.0))
        if rate + overlap > 1.0 + 1e-9:
            return f"trace needs miss_rate + step_overlap <= 1, got {rate} + {overlap}"
    return None


def _serving_prune_reason(wp: Mapping[str, Any], params: Mapping[str, Any], s: int, k: int, h: int) -> str | None:
    spec = WORKLOAD_PARAMS["serving"]
    get = {name: wp.get(name, p.default) for name, p in spec.items()}
    lo, hi = int(get["context_min"]), int(get["context_max"])
    if lo > hi:
        return f"serving needs context_min <= context_max, got {lo} > {hi}"
    if lo < h + s * k + PAGE_SIZE:
        # one call's fresh tokens (at most steps*top_k) must fit in the part of the context outside the
        # initial hot set, so no two of them share a host row
        return (f"serving needs context_min >= hot_buffer_size + steps*top_k + {PAGE_SIZE} = "
                f"{h + s * k + PAGE_SIZE}, got {lo}")
    rate, overlap = float(get["miss_rate"]), float(get["step_overlap"])
    if rate + overlap > 1.0 + 1e-9:
        return f"serving needs miss_rate + step_overlap <= 1, got {rate} + {overlap}"
    pool = int(params["batch"]) * serving_region_rows(hi) * int(params["item_size_bytes"])
    if pool > SERVING_MAX_POOL_BYTES:
        return (f"serving: host pool batch*context_max*item = {pool / 2**30:.1f} GiB > "
                f"{SERVING_MAX_POOL_BYTES >> 30} GiB of host memory per layer (a smaller context_max or batch)")
    return None


def host_rows_per_layer(params: Mapping[str, Any], timing: TimingSettings | None = None) -> int:
    """Host rows one layer of a case reads from (an estimate where the workload is random; torch-free, for
    the host-memory budget before anything is built): `serving` its requests' regions at context_max,
    `distinct` and `upstream` exactly, `trace` from its miss rate (each token of each request its own row)."""
    timing = timing or TimingSettings()
    wp = dict(params.get("workload_params") or {})
    layers = int(wp.get("layers", 1))
    # the calls one layer takes between resets: its share (every L-th call) of the graph or of the checks
    calls = max(-(-timing.max_calls_per_reset // layers), -(-timing.calls_per_graph // layers))
    bs, s, k, h = (int(params[key]) for key in ("batch", "steps", "top_k", "hot_buffer_size"))
    workload = params["workload"]
    if workload == "serving":
        context = wp.get("context_max", WORKLOAD_PARAMS["serving"]["context_max"].default)
        return bs * serving_region_rows(int(context))
    if workload in ("upstream", "distinct"):
        g = pattern_geometry(k, s)
        span = h + g.advance * calls + g.unique
        return span if workload == "upstream" else h + bs * (span - h)
    rate = float(wp.get("miss_rate", WORKLOAD_PARAMS["trace"]["miss_rate"].default))
    return bs * (h + k + int(1.25 * calls * s * k * rate))  # trace: fresh tokens per request, with a margin


def layer_stride_rows(rows: int, item_size_bytes: int) -> int:
    """Rows from one layer's host region to the next: ``rows`` rounded up to whole LAYER_ALIGN_BYTES spans
    (in whole rows, so that every layer's rows keep the pool's row pattern, workload.fill_pattern)."""
    span = -(-rows * item_size_bytes // LAYER_ALIGN_BYTES) * LAYER_ALIGN_BYTES
    return -(-span // item_size_bytes)


def host_bytes_per_layer(params: Mapping[str, Any], timing: TimingSettings | None = None) -> int:
    """Host bytes one layer holds: its rows, and its shared layers' own rows for a planned case."""
    item = int(params["item_size_bytes"])
    stride = layer_stride_rows(host_rows_per_layer(params, timing), item)
    own_hosts = 1 + (int(params.get("shared_layers") or 0)
                     if params["implementation"] in PLANNED_IMPLEMENTATIONS and params["workload"] != "upstream" else 0)
    return own_hosts * stride * item


def host_bytes(case: "Case") -> int:
    """Host bytes all of a case's layers hold (``host_bytes_per_layer`` x layers)."""
    return case.layers * host_bytes_per_layer(case.to_dict(), case.timing)


def cap_layers(case: "Case", budget_bytes: float) -> "Case":
    """``case`` with its layers capped so that all of them fit in ``budget_bytes`` of host memory (at least 1).
    The case id names the layers used, so a capped case is another case than the uncapped one."""
    if case.layers == 1:
        return case
    per_layer = host_bytes_per_layer(case.to_dict(), case.timing)
    fit = max(1, int(budget_bytes // per_layer))
    if fit >= case.layers:
        return case
    return replace(case, workload_params={**case.workload_params_dict, "layers": fit})


def serving_region_rows(context: int) -> int:
    """Host rows of one request's region: its context rounded up to whole pages (a page allocator's unit)."""
    return -(-context // PAGE_SIZE) * PAGE_SIZE


__all__ = [
    "DEFAULT_HOST_MEMORY_BUDGET_GIB", "DEFAULT_LAYERS", "LAYERED_WORKLOADS", "cap_layers", "host_bytes", "host_bytes_per_layer",
    "host_rows_per_layer", "layer_stride_rows",
    "AXES", "AXIS_SPECS", "BASELINE_OF", "HOST_MEMORY_PARAMS", "DEFAULT_IMPLEMENTATIONS", "IMPLEMENTATIONS", "LRU_IMPLEMENTATIONS", "MULTI_STEP_IMPLEMENTATIONS",
    "PLANNED_IMPLEMENTATIONS", "WORKLOADS", "WORKLOAD_PARAMS",
    "Case", "ParamSpec", "PatternGeometry", "Pruned", "TimingSettings", "format_case_id", "pattern_geometry",
    "prune_reason", "serving_region_rows",
]
