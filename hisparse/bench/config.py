"""Sweep configs: a YAML file -> validated ``SweepConfig`` -> ``Expansion`` (cases + pruned).

Schema (every key optional; unknown keys are errors):

```yaml
name: default                  # default: the file's stem
description: "..."
track: false                   # part of the regression set
seed: 0
axes:                          # each axis: a value, a list (full and CI sweep), or {values: [...], ci: [...]}
  implementation: [lru_sequential, multi_step, multi_step_planned]   # default: these three;
                                # lru_sequential_planned (multi_step_planned's baseline) is opt-in
  workload: [upstream, distinct]   # default: the names under `workloads:`, else [distinct]
  batch: {values: [1, 2, 4, 8, 16, 32, 64], ci: [1, 64]}             # default 1
  steps: 4                     # default 4; a value outside 1..4 is a config error
  top_k: 2048                  # default 2048
  hot_buffer_size: 4096        # default 4096, at most 32768
  item_size_bytes: 576         # default 576
  pdl: [on, off]               # default on; multi-step implementations only (lru_sequential: off)
  shared_layers: 3             # default 3; the planned implementations only
  host_alloc: [pinned, registered, hugetlb-2m, hugetlb-1g, vmm]  # default pinned (hisparse/bench/host_memory.py);
                               # the sweep runs the cases of one kind together, kinds in this order
  host_numa: any               # default any; local / remote: the GPU's NUMA node or another (not with pinned)
slices:                        # more grids: `axes` with some axes replaced; the sweep is the union
  - {workload: distinct, batch: 64, steps: [1, 2, 4]}
  - {workload: serving, batch: 64,              # a slice may also replace workload parameters
     workloads: {serving: {context_max: [32768, 262144]}}}
workloads:                     # name -> parameters; a parameter may be an axis too
  serving: {layers: [61, 1]}   # serving, trace, distinct: decode regime over L layers (default 61), 1 = warm
  trace: {miss_rate: {values: [0.05, 0.2], ci: [0.05]}, step_overlap: 0.8, locality: 0.5}
host_memory_budget_gib: 48    # host memory the layers of one case may take (caps `layers`; default 48)
timing: {warmup_calls: 5, calls_per_graph: 100, replays: 10, l2_flush: true, check_calls: 2,
         rounds: 1,            # rounds: 1..20 timings per case, each on a fresh workload
         replays_per_sample: 1}  # replays: samples per round, each the mean of replays_per_sample replays
exclude:                       # cases matching every key of a rule are pruned (`reason` optional)
  - {implementation: lru_sequential, batch: 1, reason: "not interesting"}
views:                         # named filter lists: `run --view headline` = these --filter's
  headline: [steps=4, hot_buffer_size=4096, item_size_bytes=576]
```

An empty ``ci`` list drops that grid from the CI sweep. Every error is a ``ConfigError`` naming the
file, the key (dotted path) and what is allowed. Config-level limits (hot_buffer_size <= 32768,
replays >= 10, ...) are errors; combinations that cannot run (top_k > hot_buffer_size, upstream's
fixed shape, ...) are pruned with the reason (``hisparse.bench.case.prune_reason``).
"""
from __future__ import annotations

import math

import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from hisparse.bench.case import (
    _TIMING_SPEC,
    AXES,
    DEFAULT_IMPLEMENTATIONS,
    AXIS_SPECS,
    DEFAULT_HOST_MEMORY_BUDGET_GIB,
    DEFAULT_LAYERS,
    HOST_MEMORY_PARAMS,
    WORKLOAD_PARAMS,
    WORKLOADS,
    Case,
    ParamSpec,
    Pruned,
    TimingSettings,
    _Invalid,
    cap_layers,
    format_case_id,
    prune_reason,
)
from hisparse import env
from hisparse.errors import ConfigError

TOP_LEVEL_KEYS = ("name", "description", "track", "seed", "axes", "slices", "workloads", "host_memory_budget_gib",
                  "timing", "exclude", "views")
# A config's defaults that differ from a bare Case's: a sweep models a decode step of DeepSeek-V3.2 (61
# layers, each its own host pool) unless it says otherwise; a Case built in code has one layer.
CONFIG_PARAM_DEFAULTS = {"layers": DEFAULT_LAYERS}
_BUDGET_SPEC = ParamSpec(float, DEFAULT_HOST_MEMORY_BUDGET_GIB, lo=0.001, hi=1 << 20)
_NON_AXIS_PARAMS = ("seed",)


@dataclass(frozen=True)
class Axis:
    """Values of one axis: ``values`` for the full sweep, ``ci`` (a subset) for ``--ci``."""

    values: tuple
    ci: tuple

    @classmethod
    def of(cls, *values: Any) -> "Axis":
        return cls(tuple(values), tuple(values))

    def pick(self, ci: bool) -> tuple:
        return self.ci if ci else self.values


@dataclass(frozen=True)
class ExcludeRule:
    match: tuple[tuple[str, tuple], ...]  # (key, allowed values); key is an axis or a workload parameter
    reason: str | None = None

    def matches(self, params: Mapping[str, Any]) -> bool:
        flat = _flat(params)
        return all(key in flat and flat[key] in values for key, values in self.match)


def _flat(params: Mapping[str, Any]) -> dict[str, Any]:
    """A case's params with its workload parameters lifted to the top level (for matching)."""
    out = {k: v for k, v in params.items() if k != "workload_params"}
    out.update(dict(params.get("workload_params") or {}))
    for key in HOST_MEMORY_PARAMS:  # stored only when not the default; matched either way
        out.setdefault(key, AXIS_SPECS[key].default)
    return out


# ---------------------------------------------------------------------------------------------
# Expansion


@dataclass(frozen=True)
class Expansion:
    """The cases of one expansion (iterable like a list of cases) and the combinations pruned."""

    cases: list[Case]
    pruned: list[Pruned]
    ci: bool = False
    filters: tuple[str, ...] = ()
    filtered_out: int = 0

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    @property
    def ids(self) -> list[str]:
        return [c.case_id for c in self.cases]

    @property
    def config_hash(self) -> str:
        return cases_hash(self.cases)


def sweep_order(cases: list[Case]) -> list[Case]:
    """The order a sweep runs its cases in: grouped by host memory (host_alloc, host_numa), then within a
    group by item size, each in the order it first appears, otherwise as expanded (a stable sort).
    By host memory: the sweep holds one host arena at a time and releases it before the next kind
    allocates (a 128 GiB node cannot hold two 45 GiB arenas). By item size: the arena holds the rows of
    one item size and is filled again from its first row when another asks (host_cache.py); in the
    decode regime that is tens of GB (45 GB at `serving` batch 64), so the item-size slices of
    configs/default.yaml, interleaved, refilled it at every case."""
    kind: dict = {}
    size: dict = {}
    for c in cases:
        kind.setdefault(c.host_memory, len(kind))
        size.setdefault(c.item_size_bytes, len(size))
    return sorted(cases, key=lambda c: (kind[c.host_memory], size[c.item_size_bytes]))


def cases_hash(cases: Sequence[Case]) -> str:
    """sha256 of the canonical JSON of the cases (params and timing, in order)."""
    doc = [{"params": c.to_dict(), "timing": c.timing.to_dict()} for c in cases]
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _param_spec(key: str) -> ParamSpec | None:
    if key in AXIS_SPECS:
        return AXIS_SPECS[key]
    if key == "seed":
        return ParamSpec(int, 0, lo=0)
    for schema in WORKLOAD_PARAMS.values():
        if key in schema:
            return schema[key]
    return None


def _filter_keys() -> list[str]:
    keys = [*AXES, *_NON_AXIS_PARAMS]
    for schema in WORKLOAD_PARAMS.values():
        keys += [k for k in schema if k not in keys]
    return keys


def compile_filter(text: str):
    """``key=v1[,v2...]`` (a parameter equals one of the values) or a substring of the case id.
    Returns a predicate over cases (and pruned combinations); an unknown key or a value of the wrong type is a ConfigError."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep:
        return lambda case: text in case.case_id
    spec = _param_spec(key)
    if spec is None:
        raise ConfigError(f"filter {text!r}: unknown key {key!r}; allowed keys: {', '.join(_filter_keys())}")
    wanted = []
    for part in value.split(","):
        part = part.strip()
        try:
            wanted.append(_coerce_text(spec, part))
        except _Invalid as e:
            raise ConfigError(f"filter {text!r}: {key}: {e}") from None

    def matches(case: Case | Pruned) -> bool:
        flat = _flat(case.params if isinstance(case, Pruned) else case.to_dict())
        return key in flat and flat[key] in wanted

    return matches


def _coerce_text(spec: ParamSpec, text: str) -> Any:
    if spec.kind is int:
        try:
            return spec.coerce(int(text))
        except ValueError:
            raise _Invalid(f"expected {spec.allowed()}, got {text!r}") from None
    return spec.coerce(text)  # bool accepts on/off/true/false, float accepts "0.1"


@dataclass(frozen=True)
class Slice:
    """One more grid: the axes it replaces and the workload parameters it replaces ({} for none)."""

    axes: Mapping[str, Axis]
    workloads: Mapping[str, Mapping[str, Axis]] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepConfig:
    name: str
    path: Path | None
    axes: Mapping[str, Axis]  # every axis of AXES, defaults filled in
    timing: TimingSettings
    workloads: Mapping[str, Mapping[str, Axis]]  # name -> parameter -> values (defaults filled in)
    seed: int = 0
    track: bool = False
    description: str = ""
    slices: tuple[Slice, ...] = ()
    exclude: tuple[ExcludeRule, ...] = ()
    # Named subsets: name -> filter expressions (compile_filter's syntax), so that a config's headline
    # is written once, beside the grid it selects from, not retyped as --filter's on every run.
    views: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Host memory one case's layers may take: caps `layers` at expansion (case.cap_layers), so a case id
    # names the layers it ran with.
    host_memory_budget_gib: float = DEFAULT_HOST_MEMORY_BUDGET_GIB

    def selection(self, view: str | None, filters: Sequence[str] = ()) -> tuple[str, ...]:
        """The filters a run or listing applies: the view's (if named), then the explicit ones. An
        unknown view is a ConfigError naming the config's views."""
        if view is not None and view not in self.views:
            have = f"its views: {', '.join(self.views)}" if self.views else "it declares no `views:`"
            raise ConfigError(f"view {view!r}: not a view of config {self.name!r}; {have}")
        return (*(self.views[view] if view is not None else ()), *filters)

    def grids(self) -> list[tuple[dict[str, Axis], Mapping[str, Mapping[str, Axis]]]]:
        """(axes, workload-parameter overrides) of the main grid and of each slice."""
        return [(dict(self.axes), {})] + [({**self.axes, **s.axes}, s.workloads) for s in self.slices]

    def workload_axes(self, workload: str, overrides: Mapping[str, Mapping[str, Axis]] | None = None) -> dict[str, Axis]:
        given = {**self.workloads.get(workload, {}), **(overrides or {}).get(workload, {})}
        return {k: given.get(k, Axis.of(CONFIG_PARAM_DEFAULTS.get(k, spec.default)))
                for k, spec in WORKLOAD_PARAMS[workload].items()}

    def expand(self, ci: bool = False, filters: Sequence[str] = ()) -> Expansion:
        """Cartesian product of every grid (``axes`` and each slice), pruned with reasons,
        deduplicated by case id (first occurrence kept), then filtered (every filter must match)."""
        if isinstance(filters, str):
            filters = (filters,)
        predicates = [compile_filter(f) for f in filters]
        budget = self.host_memory_budget_gib * (1 << 30)
        cases: dict[str, Case] = {}
        pruned: dict[tuple[str, str], Pruned] = {}
        for grid, overrides in self.grids():
            picked = [grid[a].pick(ci) for a in AXES]
            for combo in itertools.product(*picked):
                p = dict(zip(AXES, combo))
                waxes = self.workload_axes(p["workload"], overrides)
                for wcombo in itertools.product(*(a.pick(ci) for a in waxes.values())):
                    case = Case.from_dict({**p, "workload_params": dict(zip(waxes, wcombo)), "seed": self.seed},
                                          self.timing)
                    case = cap_layers(case, budget)
                    params = case.to_dict()
                    reason = prune_reason(params, self.timing) or self._excluded(params)
                    if reason is not None:
                        pruned.setdefault((case.case_id, reason), Pruned(params, reason))
                    else:
                        cases.setdefault(case.case_id, case)
        kept = [c for c in sweep_order(list(cases.values())) if all(pred(c) for pred in predicates)]
        # the pruned combinations of the selection only: a filtered listing is about those cases
        dropped = [p for p in pruned.values() if all(pred(p) for pred in predicates)]
        return Expansion(kept, dropped, ci=ci, filters=tuple(filters), filtered_out=len(cases) - len(kept))

    def _excluded(self, params: Mapping[str, Any]) -> str | None:
        for i, rule in enumerate(self.exclude):
            if rule.matches(params):
                return rule.reason or f"excluded by exclude[{i}]"
        return None

    @cached_property
    def config_hash(self) -> str:
        """sha256 of the canonical full expansion (every case's params and timing)."""
        return cases_hash(self.expand(ci=False).cases)


# ---------------------------------------------------------------------------------------------
# Parsing and validation


class _Ctx:
    def __init__(self, file: str) -> None:
        self.file = file

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.file}: {key}: {message}" if key else f"{self.file}: {message}")

    def mapping(self, raw: Any, key: str, allowed: Sequence[str]) -> dict:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            raise self.error(key, f"expected a mapping with keys {', '.join(allowed)}, got {_kind(raw)}")
        for k in raw:
            if k not in allowed:
                where = f"{key}.{k}" if key else str(k)
                raise self.error(where, f"unknown key; allowed keys: {', '.join(allowed)}")
        return dict(raw)

    def value(self, spec: ParamSpec, raw: Any, key: str) -> Any:
        try:
            return spec.coerce(raw)
        except _Invalid as e:
            raise self.error(key, str(e)) from None

    def axis(self, spec: ParamSpec, raw: Any, key: str) -> Axis:
        if isinstance(raw, Mapping):
            d = self.mapping(raw, key, ("values", "ci"))
            if "values" not in d:
                raise self.error(key, "missing key 'values' (write a list, or {values: [...], ci: [...]})")
            values = self.values(spec, d["values"], f"{key}.values", allow_empty=False)
            ci = self.values(spec, d["ci"], f"{key}.ci", allow_empty=True) if "ci" in d else values
            for i, v in enumerate(ci):
                if v not in values:
                    raise self.error(f"{key}.ci[{i}]", f"{v!r} is not one of {key}.values "
                                                       f"({', '.join(map(repr, values))})")
            return Axis(values, ci)
        values = self.values(spec, raw, key, allow_empty=False)
        return Axis(values, values)

    def values(self, spec: ParamSpec, raw: Any, key: str, *, allow_empty: bool) -> tuple:
        items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        if not items and not allow_empty:
            raise self.error(key, f"must not be empty; allowed: {spec.allowed()}")
        out: list = []
        for i, item in enumerate(items):
            v = self.value(spec, item, f"{key}[{i}]" if isinstance(raw, (list, tuple)) else key)
            if v not in out:
                out.append(v)
        return tuple(out)


def _kind(raw: Any) -> str:
    return f"{type(raw).__name__} {raw!r}"


def parse_config(data: Any, *, path: str | Path | None = None, name: str | None = None) -> SweepConfig:
    """Validate a parsed YAML document (a mapping) into a SweepConfig."""
    ctx = _Ctx(str(path) if path is not None else "<config>")
    if data is None:
        raise ctx.error("", f"the config is empty; expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
    top = ctx.mapping(data, "", TOP_LEVEL_KEYS)
    cfg_name = top.get("name", name or (Path(path).stem if path is not None else "config"))
    if not isinstance(cfg_name, str) or not cfg_name:
        raise ctx.error("name", f"expected a non-empty string, got {_kind(cfg_name)}")
    description = top.get("description", "") or ""
    if not isinstance(description, str):
        raise ctx.error("description", f"expected a string, got {_kind(description)}")
    track = ctx.value(ParamSpec(bool), top.get("track", False), "track")
    seed = ctx.value(ParamSpec(int, 0, lo=0, hi=2**63 - 1), top.get("seed", 0), "seed")

    t = ctx.mapping(top.get("timing"), "timing", tuple(_TIMING_SPEC))
    timing = TimingSettings(**{k: ctx.value(_TIMING_SPEC[k], v, f"timing.{k}") for k, v in t.items()})

    workloads = _parse_workloads(ctx, top.get("workloads"), "workloads")

    raw_axes = ctx.mapping(top.get("axes"), "axes", AXES)
    axes = {a: ctx.axis(AXIS_SPECS[a], raw_axes[a], f"axes.{a}") for a in raw_axes}
    for a in AXES:
        if a not in axes:
            if a == "implementation":
                axes[a] = Axis.of(*DEFAULT_IMPLEMENTATIONS)
            elif a == "workload":
                axes[a] = Axis.of(*(workloads or ("distinct",)))
            else:
                axes[a] = Axis.of(AXIS_SPECS[a].default)

    raw_slices = top.get("slices") or []
    if not isinstance(raw_slices, list):
        raise ctx.error("slices", f"expected a list of axis mappings, got {_kind(raw_slices)}")
    slices = []
    for i, s in enumerate(raw_slices):
        d = dict(ctx.mapping(s, f"slices[{i}]", (*AXES, "workloads")))
        workloads_of_slice = _parse_workloads(ctx, d.pop("workloads", None), f"slices[{i}].workloads")
        slices.append(Slice({a: ctx.axis(AXIS_SPECS[a], v, f"slices[{i}].{a}") for a, v in d.items()},
                            workloads_of_slice))

    exclude = _parse_exclude(ctx, top.get("exclude"))
    views = _parse_views(ctx, top.get("views"))
    budget = ctx.value(_BUDGET_SPEC, top.get("host_memory_budget_gib", DEFAULT_HOST_MEMORY_BUDGET_GIB),
                       "host_memory_budget_gib")
    return SweepConfig(name=cfg_name, path=Path(path) if path is not None else None, axes=axes, timing=timing,
                       workloads=workloads, seed=seed, track=track, description=description,
                       slices=tuple(slices), exclude=exclude, views=views, host_memory_budget_gib=budget)


def _parse_workloads(ctx: _Ctx, raw: Any, key: str) -> dict[str, dict[str, Axis]]:
    """`workloads:` (top level, or one slice's overrides): name -> parameter -> Axis."""
    workloads: dict[str, dict[str, Axis]] = {}
    for wname, wraw in ctx.mapping(raw, key, WORKLOADS).items():
        schema = WORKLOAD_PARAMS[wname]
        wkey = f"{key}.{wname}"
        if wraw is not None and not isinstance(wraw, Mapping):
            raise ctx.error(wkey, f"expected a mapping of parameters ({', '.join(schema) or 'none'}), "
                                  f"got {_kind(wraw)}")
        if wraw and not schema:
            bad = next(iter(wraw))
            raise ctx.error(f"{wkey}.{bad}", f"unknown key; {wname} takes no parameters")
        params = ctx.mapping(wraw, wkey, tuple(schema))
        workloads[wname] = {k: ctx.axis(schema[k], v, f"{wkey}.{k}") for k, v in params.items()}
    return workloads


def _parse_exclude(ctx: _Ctx, raw: Any) -> tuple[ExcludeRule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ctx.error("exclude", f"expected a list of rules (mappings), got {_kind(raw)}")
    allowed = tuple(k for k in _filter_keys() if k not in _NON_AXIS_PARAMS) + ("reason",)
    rules = []
    for i, r in enumerate(raw):
        d = ctx.mapping(r, f"exclude[{i}]", allowed)
        reason = d.pop("reason", None)
        if reason is not None and not isinstance(reason, str):
            raise ctx.error(f"exclude[{i}].reason", f"expected a string, got {_kind(reason)}")
        if not d:
            raise ctx.error(f"exclude[{i}]", f"a rule needs at least one key of {', '.join(allowed[:-1])}")
        match = tuple((k, ctx.values(_param_spec(k), v, f"exclude[{i}].{k}", allow_empty=False))
                      for k, v in d.items())
        rules.append(ExcludeRule(match, reason))
    return tuple(rules)


def _parse_views(ctx: _Ctx, raw: Any) -> dict[str, tuple[str, ...]]:
    """`views:` name -> a non-empty list of filter expressions, each checked as --filter checks it."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ctx.error("views", f"expected a mapping of view name -> list of filters, got {_kind(raw)}")
    views: dict[str, tuple[str, ...]] = {}
    for name, filters in raw.items():
        key = f"views.{name}"
        if not isinstance(name, str) or not name or any(c in name for c in " =,/"):
            raise ctx.error(key, "a view name is a non-empty string without spaces, '=', ',' or '/'")
        items = [filters] if isinstance(filters, str) else filters
        if not isinstance(items, list) or not items:
            raise ctx.error(key, f"expected a non-empty list of filters (key=value or a case-id substring), "
                                 f"got {_kind(filters)}")
        for i, f in enumerate(items):
            if not isinstance(f, str) or not f.strip():
                raise ctx.error(f"{key}[{i}]", f"expected a filter string (key=value or a case-id substring), "
                                               f"got {_kind(f)}")
            try:
                compile_filter(f)
            except ConfigError as e:
                raise ctx.error(f"{key}[{i}]", str(e)) from None
        views[name] = tuple(items)
    return views


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    seen: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen[key] = loader.construct_object(value_node, deep=deep)
    return seen


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _config_dirs() -> list[Path]:
    """Where bare config names are looked up: env.CONFIG_DIRS (the checkout's configs/, the installed
    package's copy), then ./configs."""
    dirs = [*env.CONFIG_DIRS, Path.cwd() / "configs"]
    out: list[Path] = []
    for d in dirs:
        if d not in out and d.is_dir():
            out.append(d)
    return out


def available_configs() -> list[str]:
    names: list[str] = []
    for d in _config_dirs():
        names += [p.stem for p in sorted(d.glob("*.yaml")) if p.stem not in names]
    return names


def find_config(name_or_path: str | Path) -> Path:
    """A path to an existing file, or a bare name ("default" -> <configs>/default.yaml)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    text = str(name_or_path)
    if "/" not in text and "\\" not in text:
        stem = text[:-5] if text.endswith(".yaml") else text
        for d in _config_dirs():
            if (d / f"{stem}.yaml").is_file():
                return d / f"{stem}.yaml"
    raise ConfigError(f"{text}: config not found (a path to a YAML file, or one of: "
                      f"{', '.join(available_configs()) or 'no configs installed'})")


def load_config(name_or_path: str | Path) -> SweepConfig:
    """Read and validate a sweep config; every problem is a ConfigError naming the file and key."""
    path = find_config(name_or_path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}; name a readable YAML file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not UTF-8); a config is YAML text, like configs/ci.yaml") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from None
    _refuse_non_finite(path, data)
    return parse_config(data, path=path)


def _refuse_non_finite(path: Path, data: object, where: str = "") -> None:
    """YAML's .nan and .inf are floats that pass every range check (``miss_rate: .nan`` once did):
    refused anywhere in a config, naming the key."""
    if isinstance(data, float) and not math.isfinite(data):
        raise ConfigError(f"{path}: {where or 'the document'}: {data!r} is not allowed; use a finite number")
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        _refuse_non_finite(path, value, f"{where}.{key}" if where and isinstance(key, str) else
                           f"{where}[{key}]" if where else str(key))


__all__ = ["Axis", "ExcludeRule", "Expansion", "SweepConfig", "available_configs", "cases_hash",
           "compile_filter", "find_config", "format_case_id", "load_config", "parse_config"]
