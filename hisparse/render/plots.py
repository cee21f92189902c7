"""Figures of one run (matplotlib, Agg backend: no display needed). Each function saves a PNG and
returns its path, or None when the run has no data for it (e.g. no PDL on/off pairs);
``plot_run`` makes all of them and returns the paths written.

- latency_vs_batch.png: median time per call (IQR bars) vs batch, one line per implementation
  (and per other varying parameter), one panel per workload;
- speedup_vs_batch.png: speedup over the sequential-LRU baseline of the same case;
- floor_fraction.png: % of the PCIe and gather floors reached (floor / time);
- pdl.png: time with PDL on / time with PDL off, for cases that differ only in pdl;
- hot_buffer_size.png: median time vs hot_buffer_size.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hisparse.results.model import CaseResult, RunRecord

# Parameters that never split a line (workload is the panel; the x axis is excluded per plot).
_IGNORED = {"workload", "seed"}


def _pyplot():
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def _ok(run: RunRecord) -> list[CaseResult]:
    return [c for c in run.cases if c.ok and c.stats]


def _varying(cases: list[CaseResult], exclude: set[str]) -> list[str]:
    keys = sorted({k for c in cases for k in c.params} - exclude)
    return [k for k in keys if len({_hashable(c.params.get(k)) for c in cases}) > 1]


def _label(params: dict, keys: list[str]) -> str:
    parts = []
    for k in keys:
        v = params.get(k)
        if k == "implementation":
            parts.insert(0, str(v))
        elif isinstance(v, bool):
            parts.append(f"{k}={'on' if v else 'off'}")
        else:
            parts.append(f"{k}={_hashable(v)}")
    return " ".join(parts) or str(params.get("implementation"))


def _grouped(cases: list[CaseResult], x_key: str, exclude: set[str] = frozenset()) -> dict[str, dict[str, list]]:
    """{workload: {series label: sorted [(x, case)]}}; a series = cases equal in everything but x.
    A label names the implementation and the parameters that vary among that implementation's cases
    (pdl is always off for lru_sequential, so it is not worth a word there)."""
    skip = _IGNORED | {x_key, "implementation"} | set(exclude)
    by_impl: dict[str, list[CaseResult]] = defaultdict(list)
    for c in cases:
        by_impl[str(c.params.get("implementation"))].append(c)
    keys = {impl: ["implementation"] + _varying(group, skip) for impl, group in by_impl.items()}
    panels: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for c in cases:
        label = _label(c.params, keys[str(c.params.get("implementation"))])
        panels[str(c.params.get("workload"))][label].append((c.params.get(x_key), c))
    return {w: {s: sorted(v, key=lambda t: t[0]) for s, v in series.items()} for w, series in sorted(panels.items())}


def _log2_axis(ax, xs: set) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: PLC0415

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(xs)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _figure(plt, n: int):
    """Panels stacked vertically: each legend sits to the right of its own panel."""
    fig, axes = plt.subplots(n, 1, figsize=(7.0, 3.9 * n), squeeze=False)
    fig.subplots_adjust(hspace=0.35)  # room for the upper panel's x label under it
    return fig, axes[:, 0]


def _legend(ax) -> None:
    """Beside the panel, not over the data (a sweep can have a dozen series per panel)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _save(fig, path: Path, title: str) -> Path:
    fig.suptitle(title, fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # grows the canvas to hold the outside legends
    return path


def _drawable(panels: dict[str, dict[str, list]], keep: Callable[[list], bool]) -> dict[str, dict[str, list]]:
    """The panels and series worth drawing: ``keep(points)`` per series; panels left empty are dropped."""
    out = {}
    for workload, series in panels.items():
        kept = {label: pts for label, pts in series.items() if keep(pts)}
        if kept:
            out[workload] = kept
    return out


def _backend_note(run: RunRecord) -> str:
    return "\n(reference backend: PyTorch times on the CPU, not kernel times)" if run.backend == "reference" else ""


def _draw_panels(run: RunRecord, panels: dict[str, dict[str, list]], path: Path, title: str,
                 draw: Callable[[Any, str, list], None], *, xlabel: str, ylabel: str, logx: bool = True,
                 hline: float | None = None, hline_style: str = "--") -> Path:
    """The shared frame of the line plots: one panel per workload, ``draw(ax, label, points)`` per
    series, then the log2 x axis, the reference line, titles, grid and the legend outside."""
    plt = _pyplot()
    fig, axes = _figure(plt, len(panels))
    try:
        for ax, (workload, series) in zip(axes, panels.items()):
            for label, points in series.items():
                draw(ax, label, points)
            xs_all = {x for pts in series.values() for x, _ in pts if x}
            if logx and xs_all:
                _log2_axis(ax, xs_all)
            if hline is not None:
                ax.axhline(hline, color="grey", linestyle=hline_style, linewidth=1)
            ax.set_title(f"workload: {workload}")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            _legend(ax)
        return _save(fig, path, title + _backend_note(run))
    finally:
        plt.close(fig)


def _line_plot(run: RunRecord, path: Path, x_key: str, y_of: Callable[[CaseResult], float | None], *,
               ylabel: str, title: str, cases: list[CaseResult] | None = None, logx: bool = True,
               hline: float | None = None, errors: bool = False, min_points: int = 2) -> Path | None:
    """One panel per workload, one line per series. A series with fewer than ``min_points`` points
    on the x axis (e.g. a batch-64-only slice in a plot vs batch) is not a trend and is left out."""
    cases = _ok(run) if cases is None else cases
    panels = _drawable(_grouped(cases, x_key),
                       lambda points: sum(y_of(c) is not None for _, c in points) >= min_points)
    if not panels:
        return None

    def draw(ax: Any, label: str, points: list) -> None:
        pts = [(x, y_of(c), c) for x, c in points if y_of(c) is not None]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        if errors:
            lo = [y - p[2].stats["q1_us"] for y, p in zip(ys, pts)]
            hi = [p[2].stats["q3_us"] - y for y, p in zip(ys, pts)]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
        else:
            ax.plot(xs, ys, marker="o", label=label)

    return _draw_panels(run, panels, path, title, draw, xlabel=x_key, ylabel=ylabel, logx=logx, hline=hline)


def latency_vs_batch(run: RunRecord, out_dir: Path) -> Path | None:
    return _line_plot(run, out_dir / "latency_vs_batch.png", "batch", lambda c: c.stats["median_us"],
                      ylabel="median time per call (us), IQR bars", title="Latency vs batch", errors=True)


def speedup_vs_batch(run: RunRecord, out_dir: Path) -> Path | None:
    # CaseResult.speedup: only ratios against the like-for-like baseline (older files compared the
    # planned copy's 4 layers with one LRU layer).
    cases = [c for c in _ok(run) if c.speedup is not None]
    return _line_plot(run, out_dir / "speedup_vs_batch.png", "batch", lambda c: c.speedup, cases=cases,
                      ylabel="speedup over its sequential-LRU baseline (x)", title="Speedup vs batch", hline=1.0)


def floor_fraction(run: RunRecord, out_dir: Path) -> Path | None:
    """% of floor reached = floor / time * 100 (100% = as fast as the floor)."""
    panels = _drawable(_grouped(_ok(run), "batch"), lambda points: len(points) >= 2)  # trends only
    if not panels:
        return None

    def draw(ax: Any, label: str, points: list) -> None:
        color = None  # one color per series: PCIe floor solid, gather floor dashed
        for key, style in (("pcie_floor_us", "-"), ("gather_floor_us", "--")):
            pts = [(x, 100.0 * c.floor[key] / c.stats["median_us"]) for x, c in points
                   if c.floor and c.floor.get(key) and c.stats["median_us"]]
            if pts:
                (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=color,
                                  label=f"{label} ({key.split('_')[0]})")
                color = line.get_color()

    return _draw_panels(run, panels, out_dir / "floor_fraction.png", "Fraction of the floors reached", draw,
                        xlabel="batch", ylabel="% of floor (floor time / time)", hline=100.0, hline_style=":")


def pdl_effect(run: RunRecord, out_dir: Path) -> Path | None:
    """time(pdl on) / time(pdl off) for pairs of cases equal in everything but pdl."""
    def key(c: CaseResult) -> tuple:
        return tuple(sorted((k, _hashable(v)) for k, v in c.params.items() if k != "pdl"))

    off = {key(c): c for c in _ok(run) if c.params.get("pdl") is False}
    pairs = [(c, off[key(c)]) for c in _ok(run) if c.params.get("pdl") is True and key(c) in off]
    if not pairs:
        return None
    on_cases = [c for c, _ in pairs]
    ratio = {id(c): c.stats["median_us"] / o.stats["median_us"] for c, o in pairs if o.stats["median_us"]}
    return _line_plot(run, out_dir / "pdl.png", "batch", lambda c: ratio.get(id(c)), cases=on_cases,
                      ylabel="time PDL on / PDL off", title="PDL on vs off", hline=1.0)


def hot_buffer_effect(run: RunRecord, out_dir: Path) -> Path | None:
    cases = _ok(run)
    if len({c.params.get("hot_buffer_size") for c in cases}) < 2:
        return None
    return _line_plot(run, out_dir / "hot_buffer_size.png", "hot_buffer_size", lambda c: c.stats["median_us"],
                      ylabel="median time per call (us)", title="hot_buffer_size effect", errors=True)


PLOTS = (latency_vs_batch, speedup_vs_batch, floor_fraction, pdl_effect, hot_buffer_effect)


def plot_run(run: RunRecord, out_dir: str | Path) -> list[Path]:
    """Every figure this run has data for, as PNGs under ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    paths = []
    for fn in PLOTS:
        p = fn(run, out_dir)
        if p is not None:
            paths.append(p)
    return paths
