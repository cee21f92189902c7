"""hisparse runs as airspeed-velocity results (asv 0.6.6, results format v2).

asv spawns one process per benchmark and parameter point; on the GPU node each pays 4-6 s of torch +
CUDA init (docs/semantics.md §H3). So the nightly measures the regression set in our own single-process
runner and this module writes what ``asv run -E existing:<python> --set-commit-hash <sha>`` would
have written for the suite in ``benchmarks/``:

- ``<results_dir>/<machine>/<commit[:8]>-existing-py_<python path>.json``: results format v2
  (``result_columns``; per parameter point the median, the 99% CI and quartiles computed by
  asv_runner's own ``compute_stats``, and the raw samples, in seconds);
- ``<results_dir>/<machine>/machine.json`` and ``<results_dir>/benchmarks.json``.

``asv publish`` / ``asv compare`` then read them like any other result. The naming below (class
per implementation, ``gpu_time_swap``, the parameter axes and ``SUITE_VERSION``) is the one
definition shared with ``benchmarks/bench_swap.py``, which loads this file by path: keep this module
free of hisparse imports so any historical commit's suite can use it. So it reads no environment
variable (its callers pass ``machine`` and ``python``, from hisparse/env.py) and writes no file itself:
``convert_run`` hands each file's text to the ``write`` its caller gives (hisparse.files.write_atomic).
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

SUITE_MODULE = "bench_swap"
BENCH_METHOD = "gpu_time_swap"
# asv keeps results only while a benchmark's version is unchanged. bench_swap.py sets this string
# as its ``version`` attribute (instead of asv's default, a hash of the source), so results written
# here and results of ``asv run`` agree; bump it when what the benchmark measures changes.
SUITE_VERSION = "hisparse-gpu-time-1"
BENCH_TYPE = "time"  # for asv, a timing result: median, IQR, 99% CI, Mann-Whitney in compare
BENCH_UNIT = "seconds"
BENCH_TIMEOUT = 600.0
# Parameter axes of every class, in this order; the implementation is the class. The workload's
# parameters are part of the workload value (``workload_value``); the seed is fixed by the config.
AXES = ("workload", "batch", "steps", "top_k", "hot_buffer_size", "item_size_bytes", "pdl", "shared_layers")
ASV_RESULT_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
                      "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
RESULTS_API_VERSION = 2
BENCHMARKS_API_VERSION = 2
MACHINE_API_VERSION = 1
# The hisparse run-file schema the converter reads (hisparse/results/model.py SCHEMA_VERSION, not
# imported: see the module doc). Callers hand it what the results reader gives them, RunRecord.to_dict().
RUN_SCHEMA_VERSION = 2


def class_name(implementation: str) -> str:
    """``multi_step`` -> ``MultiStep`` (the benchmark class of an implementation)."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", implementation) if part)


def benchmark_name(implementation: str) -> str:
    return f"{SUITE_MODULE}.{class_name(implementation)}.{BENCH_METHOD}"


def _sort_key(value):
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, repr(value))


@dataclass
class SuiteClass:
    """One benchmark class: an implementation, its axes' values, and the case at each grid point."""

    implementation: str
    values: dict[str, list] = field(default_factory=dict)  # axis -> sorted distinct values
    cases: dict[tuple, dict] = field(default_factory=dict)  # grid point (values) -> case params

    @property
    def name(self) -> str:
        return benchmark_name(self.implementation)

    @property
    def param_names(self) -> list[str]:
        return list(AXES)

    @property
    def params(self) -> list[list[str]]:
        """asv's form: per axis, the repr() of each value."""
        return [[repr(v) for v in self.values[a]] for a in AXES]

    def grid(self) -> list[tuple]:
        """Every grid point, in asv's order (itertools.product of the axes)."""
        return list(itertools.product(*(self.values[a] for a in AXES)))

    def case_at(self, point: Sequence) -> dict | None:
        """The case params at a grid point, or None for a pruned combination."""
        return self.cases.get(tuple(point))


def workload_value(params: Mapping) -> str | None:
    """The ``workload`` axis value: the name, plus its parameters when it has any, so two
    parameterizations of one workload (e.g. trace miss rates) are distinct grid points:
    ``trace:host_layout=scattered,locality=0.5,miss_rate=0.1,step_overlap=0.8``."""
    name = params.get("workload")
    extra = params.get("workload_params") or {}
    if not extra:
        return name
    return f"{name}:" + ",".join(f"{k}={extra[k]}" for k in sorted(extra))


def grid_point(params: Mapping) -> tuple:
    return tuple(workload_value(params) if a == "workload" else params.get(a) for a in AXES)


def suite_layout(case_params: Iterable[Mapping]) -> dict[str, SuiteClass]:
    """Benchmark classes for a set of cases (``params`` dicts of result-file cases or ``Case.to_dict()``).

    Returns {benchmark name: SuiteClass}. Grid points that are not a case are pruned combinations
    (the suite raises NotImplementedError for them; asv records them as skipped).
    """
    classes: dict[str, SuiteClass] = {}
    for params in case_params:
        impl = str(params["implementation"])
        cls = classes.setdefault(benchmark_name(impl), SuiteClass(impl))
        point = grid_point(params)
        for axis, value in zip(AXES, point):
            if value not in cls.values.setdefault(axis, []):
                cls.values[axis].append(value)
        cls.cases.setdefault(point, dict(params))
    for cls in classes.values():
        for axis in AXES:
            cls.values[axis] = sorted(cls.values.setdefault(axis, [None]), key=_sort_key)
    return classes


def benchmark_entry(cls: SuiteClass) -> dict:
    """The benchmarks.json entry asv's discovery writes for this class's ``gpu_time_swap``."""
    return {
        "name": cls.name, "type": BENCH_TYPE, "unit": BENCH_UNIT, "version": SUITE_VERSION,
        "params": cls.params, "param_names": cls.param_names, "timeout": BENCH_TIMEOUT,
        "number": 1, "repeat": 0, "rounds": 1, "min_run_count": 1, "sample_time": 0.01, "warmup_time": 0.0,
        "setup_cache_key": None, "code": f"gpu_time benchmark of {cls.implementation} (hisparse.bench.timing samples)",
    }


# ---------------------------------------------------------------------------------------------
# Names and metadata


def env_name(python: str | os.PathLike | None = None) -> str:
    """asv's name of ``-E existing:<python>``: ``existing-py_`` + the absolute path with / -> _.

    The interpreter path is part of every result file name (docs/semantics.md §H3): keep it fixed per
    machine (callers pass HISPARSE_ASV_PYTHON, ``hisparse.env.asv_python()``; default this interpreter).
    """
    python = os.path.abspath(str(python or sys.executable))
    name = "existing-py" + python.replace(os.path.sep, "_")
    return re.sub('[<>:"/\\\\^|?*\x00-\x1f]', "_", name)  # asv.util.sanitize_filename


def result_filename(machine: str, commit: str, env: str) -> Path:
    return Path(machine) / f"{commit[:8]}-{env}.json"


def _js_ms(iso: str | None) -> int | None:
    if not iso:
        return None
    dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def machine_info(run: Mapping, machine: str) -> dict:
    """machine.json fields (asv's own keys, plus the GPU) from a run's environment block."""
    env = run.get("environment") or {}
    return {
        "machine": machine,
        "os": str(env.get("os", "")),
        "arch": str(env.get("arch", "")),
        "cpu": str(env.get("cpu", "")),
        "num_cpu": str(env.get("num_cpu", "")),
        "ram": str(env.get("ram", "")),
        "gpu": str(env.get("gpu", "")),
    }


def _python_version(run: Mapping) -> str:
    version = str((run.get("environment") or {}).get("python") or "")
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else f"{sys.version_info[0]}.{sys.version_info[1]}"


# ---------------------------------------------------------------------------------------------
# Conversion


def _compute_stats(samples_s: list[float]) -> tuple[float, dict]:
    from asv_runner.statistics import compute_stats  # noqa: PLC0415  (asv-runner is pinned in pyproject)

    result, stats = compute_stats(samples_s, 1)
    return result, stats


def _case_samples_s(case: Mapping) -> list[float] | None:
    """Every run's samples, pooled in run order, in seconds (None unless the case is ok)."""
    if case.get("status") != "ok":
        return None
    samples = [x for run in case.get("runs") or [] for x in run.get("samples_us") or []]
    return [float(x) * 1e-6 for x in samples] or None


def _check_schema(run: Mapping) -> None:
    version = run.get("schema_version")
    if version != RUN_SCHEMA_VERSION:
        raise ValueError(f"convert_run: expected a run dict of schema_version {RUN_SCHEMA_VERSION} "
                         f"(hisparse.results.model.load_run(path).to_dict(), which upgrades older files), "
                         f"got schema_version {version!r}")


def results_document(run: Mapping, *, machine: str, env: str, commit_date_ms: int | None = None,
                     layout: Mapping[str, SuiteClass] | None = None) -> dict:
    """The asv results (v2) document of one hisparse run (a run dict of RUN_SCHEMA_VERSION).

    Grid points: "ok" cases carry their samples and stats; failed cases are None (asv: failed);
    skipped cases and pruned combinations are NaN (asv: skipped).
    """
    _check_schema(run)
    cases = [c for c in run.get("cases", []) if c.get("params", {}).get("implementation")]
    layout = layout or suite_layout(c["params"] for c in cases)
    by_point = {(benchmark_name(c["params"]["implementation"]), grid_point(c["params"])): c for c in cases}
    started = _js_ms(run.get("created"))
    env_block = run.get("environment") or {}
    results = {}
    for name, cls in layout.items():
        values, samples, stats, duration = [], [], [], 0.0
        for point in cls.grid():
            case = by_point.get((name, point))
            s = _case_samples_s(case) if case is not None else None
            if s is not None:
                value, st = _compute_stats(s)
                duration += float(case.get("wall_s") or 0.0)
            else:
                value, st = (None if case is not None and case.get("status") == "failed" else math.nan), None
            values.append(value)
            samples.append(s)
            stats.append(st)
        row = {
            "result": values, "params": cls.params, "version": SUITE_VERSION, "started_at": started,
            "duration": duration,
            "samples": samples if any(x is not None for x in samples) else None, "profile": None,
        }
        for key in ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat"):
            column = [st.get(key) if st else None for st in stats]
            row[f"stats_{key}"] = column if any(x is not None for x in column) else None
        cells = [row[k] for k in ASV_RESULT_COLUMNS]
        while cells and cells[-1] is None:
            cells.pop()
        results[name] = cells
    python = _python_version(run)
    params = {**{k: v for k, v in machine_info(run, machine).items()}, "python": python}
    commit = env_block.get("git_commit") or ""
    return {
        "commit_hash": commit, "env_name": env, "date": commit_date_ms if commit_date_ms is not None else started,
        "params": params, "python": python, "requirements": {}, "env_vars": {},
        "result_columns": ASV_RESULT_COLUMNS, "results": results, "durations": {},
        "version": RESULTS_API_VERSION,
    }


def _json_text(data, *, compact: bool) -> str:
    # asv's own layout: result files on one line, benchmarks.json and machine.json indented and sorted.
    # NaN stays (asv's "skipped"): asv reads its JSON with Python's json, which accepts it.
    return json.dumps(data) if compact else json.dumps(data, indent=4, sort_keys=True)


def _merge_values(old: list[str], new: list[str]) -> list[str]:
    """Union of two asv param lists (reprs), in the layout's value order."""
    import ast  # noqa: PLC0415

    values = {s: ast.literal_eval(s) for s in old + new}
    return sorted(values, key=lambda s: _sort_key(values[s]))


def benchmarks_json(results_dir: Path, layout: Mapping[str, SuiteClass]) -> tuple[Path, str]:
    """``<results_dir>/benchmarks.json`` with this layout's entries added (or widened): (path, text).

    Existing entries keep their grid points: the axes' values become the union, so results of older
    runs (other grids) still line up (asv matches results to params by value).
    """
    path = Path(results_dir) / "benchmarks.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    data.pop("version", None)
    for name, cls in layout.items():
        entry = benchmark_entry(cls)
        old = data.get(name)
        if old and old.get("param_names") == entry["param_names"] and old.get("version") == SUITE_VERSION:
            entry = {**old, "params": [_merge_values(o, n) for o, n in zip(old["params"], entry["params"])]}
        data[name] = entry
    data["version"] = BENCHMARKS_API_VERSION
    return path, _json_text(data, compact=False)


def machine_json(results_dir: Path, machine: str, info: Mapping) -> tuple[Path, str]:
    """``<results_dir>/<machine>/machine.json`` with ``info`` merged in: (path, text)."""
    path = Path(results_dir) / machine / "machine.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    data = {**{k: v for k, v in old.items() if k != "version"}, **{k: v for k, v in info.items() if v}}
    data["machine"] = machine
    data["version"] = MACHINE_API_VERSION
    return path, _json_text(data, compact=False)


def run_files(run: Mapping, results_dir: str | os.PathLike, *, machine: str | None = None,
              python: str | None = None, commit_date_ms: int | None = None) -> dict[Path, str]:
    """The asv files of one hisparse run under ``results_dir``, path -> text, the result file first
    (existing files are read to merge into, nothing is written). ``run``: the run as the results
    reader gives it (``RunRecord.to_dict()``, schema RUN_SCHEMA_VERSION).

    ``machine``: the caller's (HISPARSE_MACHINE, say), else the run's ``environment.machine``.
    ``python``: the interpreter named in the file name (``env_name``). ``commit_date_ms``: the
    commit's date as a JavaScript timestamp (asv orders graphs by it); default the run's start.
    Raises ValueError when the run has no commit (asv files are named by it) or no machine.
    """
    _check_schema(run)
    env_block = run.get("environment") or {}
    machine = machine or env_block.get("machine")
    commit = env_block.get("git_commit")
    if not machine:
        raise ValueError("convert_run: no machine name (set HISPARSE_MACHINE or environment.machine)")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", str(machine)) or set(str(machine)) == {"."}:
        # the machine is a folder under results_dir: "../../x" would write outside it
        raise ValueError(f"convert_run: machine name {machine!r} is not one safe path component "
                         "(letters, digits, '.', '_', '-')")
    if not commit or not re.fullmatch(r"[0-9a-f]{7,40}", str(commit)):
        raise ValueError(f"convert_run: the run has no git commit (environment.git_commit={commit!r})")
    results_dir = Path(results_dir)
    env = env_name(python)
    layout = suite_layout(c["params"] for c in run.get("cases", []) if c.get("params", {}).get("implementation"))
    doc = results_document(run, machine=machine, env=env, commit_date_ms=commit_date_ms, layout=layout)
    path = results_dir / result_filename(machine, commit, env)
    if path.is_file():  # keep other benchmarks of this commit (e.g. from `asv run`); ours replace theirs
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("result_columns") == ASV_RESULT_COLUMNS and old.get("commit_hash") == commit:
            doc["results"] = {**old.get("results", {}), **doc["results"]}
    files = {path: _json_text(doc, compact=True)}
    files.update([machine_json(results_dir, machine, machine_info(run, machine)), benchmarks_json(results_dir, layout)])
    return files


def convert_run(run: Mapping, results_dir: str | os.PathLike, *, write: Callable[[Path, str], object],
                machine: str | None = None, python: str | None = None, commit_date_ms: int | None = None) -> Path:
    """Write one hisparse run as asv results (``run_files``) through ``write(path, text)``; returns the
    result file's path. ``write`` is the caller's (hisparse.files.write_atomic): this module imports
    nothing of hisparse (module doc)."""
    files = run_files(run, results_dir, machine=machine, python=python, commit_date_ms=commit_date_ms)
    for path, text in files.items():
        write(path, text)
    return next(iter(files))
