"""Shared pieces of the asv suite (numpy's benchmarks/common.py style).

- The regression set: ``configs/ci.yaml`` (``track: true``; HISPARSE_ASV_CONFIG overrides it, e.g.
  ``configs/cpu-small.yaml`` for a CPU round trip), expanded with ``ci=True`` by the hisparse under test.
- The suite layout (class per implementation, axes, ``SUITE_VERSION``) comes from
  ``hisparse/track/asv.py`` *of this tree*, loaded by path: the converter that writes asv results
  from our own runner and this suite share one definition, whichever commit's hisparse is imported.
- Workloads are deterministic (each case carries its seed) and cached per process.

To measure an old commit with asv, point HISPARSE_ASV_PATH at its tree (a git worktree; then, separated
by ':', any site directory it needs): this module puts them first on sys.path. Every hisparse API is looked up with ``getattr`` in the layout that tree
has (the wings of 2026-12-01 on, or the flat modules before), so a commit that lacks one skips cleanly
instead of breaking discovery.
No work happens at import beyond reading the config: no torch import, no GPU query.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Paths put first on sys.path before anything imports hisparse: the tree under test (a git worktree
# of an old commit), then what it needs that is not installed in the interpreter (a --target site
# such as an offline node's /tmp/site). asv 0.6.6 cannot do this itself: an existing environment
# turns ASV_PYTHONPATH into PYTHONPATH, and its benchmark process then strips PYTHONPATH's entries
# from sys.path (on the H200 node that lost tvm_ffi).
for _entry in reversed([p for p in os.environ.get("HISPARSE_ASV_PATH", "").split(os.pathsep) if p]):
    sys.path.insert(0, str(Path(_entry).resolve()))
CONFIG = os.environ.get("HISPARSE_ASV_CONFIG") or str(REPO / "configs" / "ci.yaml")
BACKEND = os.environ.get("HISPARSE_ASV_BACKEND", "auto")


def _load_layout():
    spec = importlib.util.spec_from_file_location("_hisparse_asv_layout", REPO / "hisparse" / "track" / "asv.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


layout = _load_layout()


# Where each piece lives: the wings layout (2026-12-01 on) first, then the flat layout of older
# commits, so that asv can replay commits from before the move.
_MODULES = {
    "config": ("bench.config", "config"),
    "backends": ("bench.backends", "backends"),
    "workload": ("bench.workload", "workload"),
    "implementations": ("bench.calls", "implementations"),
    "measure": ("bench.measure", "measure"),
    "timing": ("bench.timing", "timing"),
}


@functools.lru_cache(maxsize=1)
def _layout_index() -> int:
    """0 for the wings layout, 1 for the flat one: read off the imported package's folders (an import
    attempt could be answered by an editable install of another tree and mix two layouts)."""
    package = Path(importlib.import_module("hisparse").__file__).parent
    return 0 if (package / "bench").is_dir() else 1


def hisparse_attr(module: str, name: str):
    """``<name>`` of the commit under test's module ``module`` (in whichever layout it has), or None
    when that commit lacks it."""
    candidates = _MODULES.get(module)
    target = candidates[_layout_index()] if candidates else module
    try:
        return getattr(importlib.import_module(f"hisparse.{target}"), name, None)
    except ImportError:
        return None


@functools.lru_cache(maxsize=None)
def regression_set() -> tuple:
    """(cases, reason): the Case objects of the regression set, or () and why there are none."""
    load_config = hisparse_attr("config", "load_config")
    if load_config is None:
        return (), "this commit has no hisparse.bench.case.load_config"
    config = _load_regression_config(load_config)
    try:
        expansion = config.expand(ci=True)
    except TypeError:  # an older expand() without the ci flag
        expansion = config.expand()
    return tuple(getattr(expansion, "cases", expansion)), None


def _load_regression_config(load_config):
    """CONFIG as the commit under test reads it. A workload added after that commit (``serving``, 2026-12-01)
    is dropped first, with the grids that had only it: that commit cannot build it, and the rest of the
    regression set must still be measured there (its config parser refuses unknown workload names)."""
    known = hisparse_attr("config", "WORKLOADS")
    if known is None:
        return load_config(CONFIG)
    import tempfile  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    data = yaml.safe_load(Path(CONFIG).read_text())
    if not isinstance(data, dict):
        return load_config(CONFIG)
    dropped = _drop_unknown_workloads(data, set(known))
    if hisparse_attr("config", "CONFIG_PARAM_DEFAULTS") is None:
        dropped = _drop_layers(data) or dropped
    if not dropped:
        return load_config(CONFIG)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(CONFIG).name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return load_config(str(path))


def _drop_unknown_workloads(data: dict, known: set) -> bool:
    """Remove from a parsed sweep config every workload not in ``known`` (in place); True if any was.
    A slice without a ``workload`` key inherits the main grid's; an emptied main grid is replaced by the
    first slice that names known workloads (a slice is the main grid with some axes replaced)."""
    def listed(values):
        return [values] if isinstance(values, str) else list(values or [])

    def keep(values):
        return [v for v in listed(values) if v in known]

    workloads = data.get("workloads") or {}
    changed = [name for name in workloads if name not in known]
    for name in changed:
        del workloads[name]
    axes = data.setdefault("axes", {}) or {}
    grids, empty = [axes, *(data.get("slices") or [])], []
    for grid in grids:
        value = grid.get("workload")
        if value is None:
            empty.append(False)
            continue
        as_lists = {k: listed(v) for k, v in value.items()} if isinstance(value, dict) else listed(value)
        new = {k: keep(v) for k, v in value.items()} if isinstance(value, dict) else keep(value)
        if new != as_lists:
            changed.append(grid)
            grid["workload"] = new
        empty.append(not (new.get("values") if isinstance(new, dict) else new))
    if not changed:
        return False
    data["exclude"] = [r for r in data.get("exclude") or [] if not isinstance(r, dict)
                       or not isinstance(r.get("workload"), str) or r["workload"] in known]
    slices = [g for g, e in zip(grids[1:], empty[1:]) if not e and (not empty[0] or "workload" in g)]
    if empty[0] and slices:
        data["axes"], slices = {**axes, **slices[0]}, slices[1:]
    data["slices"] = slices
    return True


def _drop_layers(data: dict) -> bool:
    """Remove the decode regime's settings (``layers``, ``host_memory_budget_gib``, 2026-12-04) from a parsed
    sweep config (in place) for a commit that predates them; True if any was. A slice that differed from
    the main grid only by its ``layers`` would repeat the main grid's cases there, so it goes too."""
    changed = data.pop("host_memory_budget_gib", None) is not None
    for params in (data.get("workloads") or {}).values():
        if isinstance(params, dict) and params.pop("layers", None) is not None:
            changed = True
    kept = []
    for grid in data.get("slices") or []:
        overrides = grid.get("workloads") if isinstance(grid, dict) else None
        if isinstance(overrides, dict):
            for params in overrides.values():
                if isinstance(params, dict) and params.pop("layers", None) is not None:
                    changed = True
            if not any(overrides.values()):
                changed = True
                continue
        kept.append(grid)
    if "slices" in data:
        data["slices"] = kept
    return changed


def case_params(case) -> dict:
    params = dict(case.to_dict())
    params.pop("timing", None)
    return params


@functools.lru_cache(maxsize=None)
def suite() -> dict:
    """{benchmark name: layout.SuiteClass} of the regression set."""
    cases, reason = regression_set()
    if reason:
        print(f"hisparse asv suite: no benchmarks ({reason})", file=sys.stderr)
    return layout.suite_layout(case_params(c) for c in cases)


def case_at(implementation: str, point: tuple):
    """The Case at a grid point of an implementation's class, or None (a pruned combination)."""
    cls = suite().get(layout.benchmark_name(implementation))
    if cls is None or cls.case_at(point) is None:
        return None
    wanted = cls.case_at(point)
    return next(c for c in regression_set()[0] if case_params(c) == wanted)


class Prepared:
    """A case ready to time: workload built, implementation bound, kernels built and checked."""

    def __init__(self, case) -> None:
        get_backend = hisparse_attr("backends", "get_backend")
        resolve_name = hisparse_attr("backends", "resolve_name")
        make_workload = hisparse_attr("workload", "make_workload")
        bind = hisparse_attr("implementations", "bind")
        time_calls = hisparse_attr("timing", "time_calls")
        settings_type = hisparse_attr("timing", "Settings")
        if None in (get_backend, resolve_name, make_workload, bind, time_calls, settings_type):
            raise NotImplementedError("this commit lacks the backend/workload/implementation/timing API")
        self.case = case
        self.backend = get_backend(resolve_name(BACKEND))
        self.workload = make_workload(case, self.backend.device)
        self.bound = bind(case.implementation, self.backend, self.workload, pdl=case.pdl)
        # Correctness first (a fast wrong kernel posts no number); this also JIT-builds the kernels.
        self.workload.reset()
        for i in range(int(case.timing.check_calls) or 1):
            violations = self.bound.checked_call()
            if violations:
                raise RuntimeError(f"{case.case_id}: check call {i} failed: {violations[0]}")

    def sample_seconds(self) -> list[float]:
        """One sample per replay, seconds per call (hisparse.bench.timing: CUDA graph + events on a GPU), over
        the case's rounds as the engine times them (``Case.rounds``: one for a decode-regime case): round 0 on this workload, each further
        round on a fresh one at another placement (``hisparse.bench.measure.time_rounds``), so that asv's
        median pools the same placements as a `hisparse-bench run` file. A commit without
        ``time_rounds`` times one round."""
        case_settings = hisparse_attr("measure", "case_settings")  # whole decode steps per graph, where it exists
        settings = (case_settings(self.case) if case_settings is not None
                    else hisparse_attr("timing", "Settings").of(self.case.timing))
        self.workload.reset()
        samples = list(hisparse_attr("timing", "time_calls")(self.bound.call, reset=self.workload.reset, settings=settings,
                                              device=self.backend.device).samples_us)
        time_rounds = hisparse_attr("measure", "time_rounds")
        make_workload = hisparse_attr("measure", "default_make_workload")
        # Case.rounds (one for a decode-regime case) where the commit has it, else its timing's rounds
        rounds = int(getattr(self.case, "rounds", None) or getattr(self.case.timing, "rounds", 1) or 1)
        if time_rounds is not None and make_workload is not None and rounds > 1:
            for measured in time_rounds(self.case, self.backend, make_workload, settings, range(1, rounds))[0]:
                samples += measured.samples_us
        return [us * 1e-6 for us in samples]


@functools.lru_cache(maxsize=4)
def prepare(case_id: str) -> Prepared:
    case = next(c for c in regression_set()[0] if c.case_id == case_id)
    return Prepared(case)
