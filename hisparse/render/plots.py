"""Figures of one run (matplotlib, Agg backend: no display needed). Each function saves a PNG and
returns its path, or None when the run has no data for it (e.g. no PDL on/off pairs);
``plot_run`` makes all of them and returns the paths written.

- latency_vs_batch.png: median time per call (IQR bars) vs batch on log-log axes, with the PCIe
  floor (the time the call's bytes need at the run's pinned H2D copy speed) as a grey line;
- throughput_vs_batch.png: achieved GB/s (bytes per call / time) vs batch, against the pinned-copy
  ceiling the run measured (``floors.pinned_h2d_gbps``);
- speedup_vs_batch.png: speedup over the sequential-LRU baseline of the same case;
- vs_sglang.png: time of our case / time of sglang's doing the same work (the engine's stored
  ``counterpart_link``), for runs that measured both;
- pdl.png: time with PDL on / time with PDL off, for cases that differ only in pdl;
- hot_buffer_size.png: median time vs hot_buffer_size, one panel per workload and step count;
- item_size.png: time per KiB moved vs item size, one panel per workload, step count and batch (a
  row size that is not a multiple of 16 B should cost about what 576 B costs per byte: issue 13).

Every figure: one panel per workload; one colour and marker shape per implementation (the sglang
implementations in a lighter shade of the same hue, hollow markers: "ours vs sglang" at a glance);
one line style per variant (PDL, hot size, item size); short legend labels; one legend for the figure.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hisparse.files import write_atomic
from hisparse.results import axes as case_axes
from hisparse.results.model import CaseResult, RunRecord, reread_share


@dataclass(frozen=True)
class ImplStyle:
    color: str
    marker: str
    hollow: bool = False


IMPL_STYLES = {
    "lru_sequential": ImplStyle("#c2410c", "s"),
    "lru_sequential_grid": ImplStyle("#7c2d12", "D"),  # the same swap, its copy over the grid: a darker hue
    "multi_step": ImplStyle("#1d4ed8", "o"),
    "multi_step_planned": ImplStyle("#15803d", "^"),
    # sglang's implementations: the hue of their counterpart, lighter, hollow markers
    "sglang_lru_sequential": ImplStyle("#fb923c", "s", hollow=True),
    "sglang_multi_step": ImplStyle("#60a5fa", "o", hollow=True),
    "sglang_multi_step_planned": ImplStyle("#4ade80", "^", hollow=True),
}
_FALLBACK_COLORS = ("#7e22ce", "#a16207", "#db2777", "#475569", "#0e7490", "#65a30d")
_FALLBACK_MARKERS = ("D", "v", "P", "X", "h", "<")
_LINESTYLES = ("-", "--", ":", "-.")
_FLOOR_GREYS = ("#6b7280", "#a3a3a3", "#404040")
_SGLANG = "sglang_"


def impl_style(name: str) -> ImplStyle:
    """The style of an implementation; a name not in IMPL_STYLES gets a fallback picked by a hash of
    the name (the same in every figure and run), hollow when it is an sglang one."""
    if name in IMPL_STYLES:
        return IMPL_STYLES[name]
    h = int(hashlib.sha1(name.encode()).hexdigest(), 16)
    return ImplStyle(_FALLBACK_COLORS[h % len(_FALLBACK_COLORS)], _FALLBACK_MARKERS[h % len(_FALLBACK_MARKERS)],
                     hollow=name.startswith(_SGLANG))


# Parameters that never split a line (the seed is not a variant).
_IGNORED = {"seed"}
_BOOL_NAMES = {"pdl": "PDL"}
_WP = "workload_params"  # flattened to "workload_params.<name>" keys: a legend names only the ones that vary


def _flat_params(c: CaseResult) -> dict:
    """The case's parameters with each workload parameter as a key of its own."""
    p = dict(c.params)
    wp = p.pop(_WP, None)
    if isinstance(wp, dict):
        p.update({f"{_WP}.{k}": v for k, v in wp.items() if k != "layers"})
    elif wp is not None:
        p[_WP] = wp
    # the layer regime is a facet of every figure (a panel per workload and regime): warm (layers = 1 or
    # absent) and decode L=N cases measure different host-side regimes and never share a line
    p[REGIME] = case_axes.regime(c.params)
    return p


REGIME = "regime"


def _short(key: str, v: Any) -> str:
    """A legend word for one parameter value: "PDL off", "hot 8192", "1152 B items"."""
    if isinstance(v, bool):
        return f"{_BOOL_NAMES.get(key, key)} {'on' if v else 'off'}"
    if key == "hot_buffer_size":
        return f"hot {v}"
    if key == "item_size_bytes":
        return f"{v} B items"
    if key == "steps":
        return f"{v} step" + ("" if v == 1 else "s")
    if key == "shared_layers":
        return f"+{v} layers"
    if key == "batch":
        return f"batch {v}"
    if isinstance(v, dict):
        return " ".join(f"{k}={x}" for k, x in sorted(v.items())) or f"{key} default"
    if key.startswith(_WP + "."):
        return f"{key[len(_WP) + 1:]} {v}"
    return f"{key} {v}"


def _pyplot():
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def _ok(run: RunRecord) -> list[CaseResult]:
    return [c for c in run.cases if c.ok and c.stats]


@dataclass
class Line:
    """One drawn series: cases equal in everything but x."""

    impl: str
    params: dict  # the series' parameters (x, panel keys and seed left out)
    points: list  # [(x, case)], x ascending
    label: str = ""
    linestyle: str = "-"


def _panels(cases: list[CaseResult], x_key: str, panel_keys: tuple[str, ...]) -> dict[tuple, list[Line]]:
    """{panel key values: [Line]}, panels in sorted order."""
    skip = _IGNORED | {x_key, *panel_keys}
    table: dict[tuple, dict[tuple, Line]] = defaultdict(dict)
    for c in cases:
        params = _flat_params(c)
        rest = {k: v for k, v in params.items() if k not in skip}
        panel = tuple(params.get(k) for k in panel_keys)
        ident = tuple(sorted((k, _hashable(v)) for k, v in rest.items()))
        line = table[panel].setdefault(ident, Line(str(params.get("implementation")), rest, []))
        line.points.append((params.get(x_key), c))
    for lines in table.values():
        for ln in lines.values():
            ln.points.sort(key=lambda t: t[0])
    def order(panel: tuple) -> tuple:  # numbers by value (batch 8 before 64), anything else by name
        return tuple((0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))
                     for v in panel)

    return {p: list(table[p].values()) for p in sorted(table, key=order)}


def _variant_keys(lines: list[Line]) -> list[str]:
    """Parameters that vary among one implementation's lines (a parameter that only differs between
    implementations, e.g. the planned copy's shared layers, is the implementation's, not a variant)."""
    by_impl: dict[str, list[Line]] = defaultdict(list)
    for ln in lines:
        by_impl[ln.impl].append(ln)
    keys = set()
    for group in by_impl.values():
        for k in {k for ln in group for k in ln.params} - {"implementation"}:
            if len({_hashable(ln.params.get(k)) for ln in group}) > 1:
                keys.add(k)
    return sorted(keys)


def _style_lines(lines: list[Line], variant_keys: list[str]) -> None:
    """Label = implementation + its variant words; line style per variant, the same variant drawn the
    same in every implementation (PDL on before off, so "on" is the solid line)."""
    def order(v: Any) -> tuple:
        if isinstance(v, bool):
            return (0 if v else 1,)
        return (2, v) if isinstance(v, (int, float)) else (3, str(v))

    variants = sorted({tuple(_hashable(ln.params.get(k)) for k in variant_keys) for ln in lines},
                      key=lambda t: tuple(order(v) for v in t))
    rank = {}
    for ln in lines:
        v = tuple(_hashable(ln.params.get(k)) for k in variant_keys)
        rank[id(ln)] = variants.index(v)
        ln.linestyle = _LINESTYLES[rank[id(ln)] % len(_LINESTYLES)]
        words = [_short(k, ln.params.get(k)) for k in variant_keys if k in ln.params]
        ln.label = " · ".join([ln.impl, *words])
    lines.sort(key=lambda ln: (ln.impl, rank[id(ln)]))  # the legend reads implementation by implementation


def _log2_axis(ax, xs: set) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: PLC0415

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(xs)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _log_y(ax) -> None:
    """Log y with plain-number tick labels (1, 2, 5, 10, 20, ... us): readable without exponents."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: PLC0415

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


_RC = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
       "legend.fontsize": 9, "lines.linewidth": 1.8, "lines.markersize": 6}


def _figure(plt, n: int):
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.5 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


_MAX_LEGEND_COLUMNS = 4


def _legend_columns(handles: dict[str, Any]) -> tuple[list, list[str], int]:
    """Legend entries laid out one column per implementation (the reference lines first), padded
    with blank entries: matplotlib fills columns top to bottom, so a column reads as one group."""
    from matplotlib.container import ErrorbarContainer  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    groups: dict[str, list[tuple[Any, str]]] = {}
    for label, h in handles.items():
        line = h[0] if isinstance(h, ErrorbarContainer) else h
        groups.setdefault(line.get_gid() or "", []).append((h, label))
    cols = [groups.pop("")] if "" in groups else []
    cols += list(groups.values())
    height = max(len(c) for c in cols)
    out_h, out_l = [], []
    for col in cols:
        col = col + [(Patch(visible=False), "")] * (height - len(col))
        out_h += [h for h, _ in col]
        out_l += [label for _, label in col]
    return out_h, out_l, len(cols)


def _save(fig, path: Path, title: str) -> Path:
    """Title on top, one legend for the whole figure (styles mean the same in every panel): below
    the panels, a column per implementation; beside them, in one column, when that would be too wide."""
    handles: dict[str, Any] = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    if handles:
        hs, labels, ncol = _legend_columns(handles)
        if ncol <= _MAX_LEGEND_COLUMNS:
            fig.legend(hs, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol, frameon=False)
        else:
            fig.legend(handles.values(), handles.keys(), loc="center left", bbox_to_anchor=(1.0, 0.5),
                       frameon=False)
    buf = io.BytesIO()  # rendered in memory, then written atomically: a reader never sees half a PNG
    fig.savefig(buf, format=path.suffix.lstrip(".") or "png", dpi=150,
                bbox_inches="tight")  # grows the canvas to hold the legend
    write_atomic(path, buf.getvalue())
    return path


def run_identity(run: RunRecord) -> str:
    """"commit 3239c1072567 · NVIDIA H200 · config default · 2026-12-03 17:02 UTC": which run a figure
    shows, on the figure itself (a PNG travels without its run file)."""
    env = run.environment or {}
    commit = str(env.get("git_commit") or "no commit")[:12] + (" (dirty)" if env.get("git_dirty") else "")
    created = str(run.created or "")
    when = created[:16].replace("T", " ") + (" UTC" if created.endswith("Z") else "")
    where = env.get("gpu") or f"CPU ({env.get('cpu') or 'unknown'})"
    return f"commit {commit} · {where} · config {(run.config or {}).get('name')} · {when}"


def _backend_note(run: RunRecord) -> str:
    return "\n(reference backend: PyTorch times on the CPU, not kernel times)" if run.backend == "reference" else ""


def _panel_title(panel_keys: tuple[str, ...], values: tuple, *, name_warm: bool = False) -> str:
    """"workload serving, decode L=8"; the warm regime is named only where the figure also has decode
    panels (runs before ``layers`` existed are all warm)."""
    words = [f"workload {v}" if k == "workload" else str(v) if k == REGIME else _short(k, v)
             for k, v in zip(panel_keys, values) if not (k == REGIME and v == "warm" and not name_warm)]
    return ", ".join(words)


@dataclass(frozen=True)
class Figure:
    """What one line figure draws: y of a case (None: no point), axes, reference line."""

    name: str
    title: str
    x_key: str
    y_of: Callable[[CaseResult], float | None]
    ylabel: str
    xlabel: str = ""
    log_y: bool = False
    errors: bool = False  # IQR bars (time figures only)
    hline: float | None = None
    hline_label: str = ""
    panel_keys: tuple[str, ...] = ("workload",)
    floor: bool = False  # draw the PCIe floor per distinct floor curve
    y_from_zero: bool = False
    min_points: int = 2  # fewer points on x is not a trend (a batch-64-only slice in a plot vs batch)
    x_categorical: bool = False  # evenly spaced x values, labelled (576 and 584 B overlap on a log axis)
    mark_failed: bool = False  # mark the panel's failed/skipped cases at their x ("failed check")
    above: float | None = None  # annotate points above this y with their cause (rows re-read)


def _draw_line(ax, ln: Line, fig_spec: Figure, x_pos: dict | None = None) -> None:
    pts = [(x if x_pos is None else x_pos[x], fig_spec.y_of(c), c) for x, c in ln.points if fig_spec.y_of(c) is not None]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    st = impl_style(ln.impl)
    kw = dict(color=st.color, marker=st.marker, linestyle=ln.linestyle, label=ln.label, gid=ln.impl,
              markerfacecolor="white" if st.hollow else st.color, markeredgecolor=st.color, markeredgewidth=1.4)
    if fig_spec.errors:
        lo = [y - p[2].stats["q1_us"] for y, p in zip(ys, pts)]
        hi = [p[2].stats["q3_us"] - y for y, p in zip(ys, pts)]
        ax.errorbar(xs, ys, yerr=[lo, hi], capsize=3, elinewidth=1.2, **kw)
        # On a log axis a 1% IQR bar is a pixel high; the band keeps it visible along the line.
        ax.fill_between(xs, [y - d for y, d in zip(ys, lo)], [y + d for y, d in zip(ys, hi)], color=st.color,
                        alpha=0.15, linewidth=0, zorder=0)
    else:
        ax.plot(xs, ys, **kw)


def _draw_points(ax, ln: Line, fig_spec: Figure, x_pos: dict | None = None) -> None:
    """A series too short for a line (one batch, or a slice another figure is about): its points only."""
    pts = [(x if x_pos is None else x_pos[x], fig_spec.y_of(c)) for x, c in ln.points if fig_spec.y_of(c) is not None]
    st = impl_style(ln.impl)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="none", marker=st.marker, color=st.color,
            markerfacecolor="white" if st.hollow else st.color, markeredgecolor=st.color, label="_nolegend_",
            gid=ln.impl)


def _failed_at(run: RunRecord, spec: Figure, panel: tuple, impls: set[str]) -> list[tuple[Any, CaseResult]]:
    """(x, case) of the run's failed or skipped cases in this panel, of the panel's implementations."""
    out = []
    for c in run.cases:
        if c.ok:
            continue
        params = _flat_params(c)
        if tuple(params.get(k) for k in spec.panel_keys + (REGIME,)) == panel and str(params.get("implementation")) in impls:
            out.append((params.get(spec.x_key), c))
    return out


def _mark_failed(ax, failed: list, x_pos: dict | None) -> None:
    """A red cross on the x axis at each failed case's x: the figure drops no case without saying so."""
    if not failed:
        return
    from matplotlib.transforms import blended_transform_factory  # noqa: PLC0415

    xs = [x if x_pos is None else x_pos[x] for x, _ in failed if x is not None]
    ax.plot(xs, [0.03] * len(xs), linestyle="none", marker="x", color="#dc2626", markersize=8,
            markeredgewidth=2, transform=blended_transform_factory(ax.transData, ax.transAxes),
            label="failed check (not timed)", clip_on=False, zorder=5)


def _annotate_above(ax, lines: list[Line], spec: Figure, x_pos: dict | None) -> None:
    """Points above ``spec.above`` (the link's ceiling) named with their cause: rows read more than
    once need not cross the link, so bytes copied / time can exceed it."""
    said: set[tuple] = set()  # one note per x and cause: variants of one case would print it on itself
    for ln in lines:
        for x, c in ln.points:
            y = spec.y_of(c)
            if y is None or y <= spec.above:
                continue
            share = reread_share(c.work or {})
            why = f"rows re-read: {share:.0%} distinct" if share is not None else "above the link's ceiling"
            if (x, why) in said:
                continue
            said.add((x, why))
            ax.annotate(why, (x if x_pos is None else x_pos[x], y), textcoords="offset points", xytext=(4, 4),
                        fontsize=7, color=impl_style(ln.impl).color)


def _draw_floors(ax, lines: list[Line]) -> None:
    """One grey line per distinct PCIe floor curve (the planned copy moves more bytes: its own floor),
    named by its implementations, or by its lines' shared variant words where those names repeat.
    A curve with a case whose host rows are read more than once (hisparse.results.model.reread_share)
    is labelled so: it counts rows copied, and the case can run under it."""
    curves: dict[tuple, list[str]] = {}
    series: dict[tuple, list[str]] = {}  # the labels of the lines on each curve ("impl · variant words")
    reread: set[tuple] = set()
    for ln in lines:
        curve = tuple((x, float(f"{c.floor['pcie_floor_us']:.3g}")) for x, c in ln.points
                      if c.floor and c.floor.get("pcie_floor_us"))
        if len(curve) >= 2:
            names = curves.setdefault(curve, [])
            if ln.impl not in names:
                names.append(ln.impl)
            series.setdefault(curve, []).append(ln.label)
            if any(reread_share(c.work or {}) is not None for _, c in ln.points):
                reread.add(curve)
    # Named by implementation; where two curves share those names (one implementation at two item
    # sizes), by the variant words all their lines share ("576 B items · 2 steps").
    by_impl = [", ".join(impls) for impls in curves.values()]
    for k, (curve, impls) in enumerate(curves.items()):
        name = ", ".join(impls)
        if by_impl.count(name) > 1:
            first, *rest = (label.split(" · ")[1:] for label in series[curve])
            name = " · ".join(w for w in first if all(w in r for r in rest)) or name
        label = "PCIe floor" if len(curves) == 1 else f"PCIe floor ({name})"
        if curve in reread:
            label += " [rows re-read: not a floor]"
        # thin and dotted in the implementation's colour (grey where implementations share the curve)
        colour = impl_style(impls[0]).color if len(impls) == 1 else _FLOOR_GREYS[k % len(_FLOOR_GREYS)]
        ax.plot([p[0] for p in curve], [p[1] for p in curve], color=colour, linewidth=1.1, linestyle=":",
                label=label, zorder=1)


def _line_figure(run: RunRecord, out_dir: Path, spec: Figure, cases: list[CaseResult] | None = None) -> Path | None:
    """One panel per workload (and ``panel_keys``), one line per series, one legend below."""
    cases = _ok(run) if cases is None else cases
    panels = {}
    for key, lines in _panels(cases, spec.x_key, spec.panel_keys + (REGIME,)).items():
        count = {id(ln): sum(spec.y_of(c) is not None for _, c in ln.points) for ln in lines}
        kept = [ln for ln in lines if count[id(ln)] >= spec.min_points]
        # A series over fewer than half the x values of the panel's widest is a slice that another
        # figure is about (default.yaml's 584 / 100 B rows at batch 1 and 64 only: item_size.png). Drawn
        # here it is a straight line from b1 to b64 across the grid, with its own PCIe floor and a
        # variant word on every label.
        widest = max((count[id(ln)] for ln in kept), default=0)
        kept = [ln for ln in kept if 2 * count[id(ln)] >= widest]
        # ... but every measured point is drawn: the series left out above as markers without a line
        # or legend entry (their implementation's marker and colour say whose they are)
        loose = [ln for ln in lines if ln not in kept and count[id(ln)]]
        if kept or loose:
            panels[key] = (kept, loose)
    if not panels:
        return None
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, axes = _figure(plt, len(panels))
        try:
            for ax, (key, (lines, loose)) in zip(axes, panels.items()):
                _style_lines(lines, _variant_keys(lines))
                if spec.floor:
                    _draw_floors(ax, lines)
                xs = {x for ln in lines + loose for x, _ in ln.points if x}
                failed = _failed_at(run, spec, key, {ln.impl for ln in lines + loose}) if spec.mark_failed else []
                xs |= {x for x, _ in failed if x}
                x_pos = {x: i for i, x in enumerate(sorted(xs))} if spec.x_categorical else None
                for ln in lines:
                    _draw_line(ax, ln, spec, x_pos)
                for ln in loose:
                    _draw_points(ax, ln, spec, x_pos)
                _mark_failed(ax, failed, x_pos)
                if spec.above is not None:
                    _annotate_above(ax, lines + loose, spec, x_pos)
                if x_pos:
                    ax.set_xticks(list(x_pos.values()), [f"{x:g}" for x in x_pos])
                elif xs:
                    _log2_axis(ax, xs)
                if spec.log_y:
                    _log_y(ax)
                if spec.hline is not None:
                    ax.axhline(spec.hline, color="#404040", linestyle=(0, (4, 3)), linewidth=1.4,
                               label=spec.hline_label or None, zorder=1)
                if spec.y_from_zero:
                    ax.set_ylim(bottom=0)
                ax.set_title(_panel_title(spec.panel_keys + (REGIME,), key,
                                          name_warm=len({k[-1] for k in panels}) > 1))
                ax.set_xlabel(spec.xlabel or spec.x_key)
                ax.set_ylabel(spec.ylabel)
                ax.grid(True, which="major", alpha=0.3)
            return _save(fig, out_dir / spec.name, spec.title + "\n" + run_identity(run) + _backend_note(run))
        finally:
            plt.close(fig)


def latency_vs_batch(run: RunRecord, out_dir: Path) -> Path | None:
    spec = Figure("latency_vs_batch.png", "Time per call vs batch", "batch", lambda c: c.stats["median_us"],
                  ylabel="median time per call (us; bar and band: IQR)", log_y=True, errors=True, floor=True,
                  mark_failed=True)
    return _line_figure(run, out_dir, spec)


def _gbps(c: CaseResult) -> float | None:
    nbytes = (c.work or {}).get("bytes_per_call")
    med = c.stats["median_us"]
    return nbytes / (med * 1e3) if nbytes and med else None


def throughput_vs_batch(run: RunRecord, out_dir: Path) -> Path | None:
    """Achieved GB/s (bytes per call / median time) against the pinned-copy ceiling of this run."""
    ceiling = (run.floors or {}).get("pinned_h2d_gbps")
    spec = Figure("throughput_vs_batch.png", "Achieved bandwidth vs batch", "batch", _gbps,
                  ylabel="achieved GB/s (bytes per call / time)", hline=ceiling, y_from_zero=True,
                  hline_label=f"pinned H2D copy ceiling {ceiling:.1f} GB/s" if ceiling else "", mark_failed=True,
                  above=ceiling)
    return _line_figure(run, out_dir, spec)


def floor_fraction(run: RunRecord, out_dir: Path) -> Path | None:
    """Time over the bare gather of the same rows (``gather_floor_us``), per case: how far each
    implementation is from the copy it cannot beat. One line per implementation and variant."""
    def over(c: CaseResult) -> float | None:
        f = (c.floor or {}).get("gather_floor_us")
        return c.median_us / f if f and c.median_us else None

    cases = [c for c in _ok(run) if over(c) is not None]
    if not cases or run.backend == "reference":  # a CPU copy is no floor for a kernel
        return None
    spec = Figure("floor_fraction.png", "Time over the gather floor vs batch", "batch", over,
                  ylabel="time / gather floor (x)", hline=1.0, hline_label="at the gather floor",
                  mark_failed=True)
    return _line_figure(run, out_dir, spec, cases)


def speedup_vs_batch(run: RunRecord, out_dir: Path) -> Path | None:
    # CaseResult.speedup: only ratios against the like-for-like baseline (older files compared the
    # planned copy's 4 layers with one LRU layer).
    cases = [c for c in _ok(run) if c.speedup is not None]
    spec = Figure("speedup_vs_batch.png", "Speedup over sequential LRU vs batch", "batch", lambda c: c.speedup,
                  ylabel="speedup over sequential LRU (x)", hline=1.0, hline_label="same as sequential LRU")
    return _line_figure(run, out_dir, spec, cases)


def pdl_effect(run: RunRecord, out_dir: Path) -> Path | None:
    """time(pdl on) / time(pdl off) for pairs of cases equal in everything but pdl."""
    def key(c: CaseResult) -> tuple:
        return tuple(sorted((k, _hashable(v)) for k, v in c.params.items() if k != "pdl"))

    off = {key(c): c for c in _ok(run) if c.params.get("pdl") is False}
    pairs = [(c, off[key(c)]) for c in _ok(run) if c.params.get("pdl") is True and key(c) in off]
    if not pairs:
        return None
    ratio = {id(c): c.stats["median_us"] / o.stats["median_us"] for c, o in pairs if o.stats["median_us"]}
    spec = Figure("pdl.png", "PDL on vs off", "batch", lambda c: ratio.get(id(c)),
                  ylabel="time PDL on / time PDL off", hline=1.0, hline_label="no PDL effect (below: PDL helps)")
    return _line_figure(run, out_dir, spec, [c for c, _ in pairs])


def vs_sglang(run: RunRecord, out_dir: Path) -> Path | None:
    """time(ours) / time(sglang's) vs batch for our cases the engine linked to sglang's counterpart
    (the stored ``counterpart_link``; a line per implementation pair and variant, styled as ours)."""
    cases = [c for c in _ok(run) if c.counterpart_link is not None and c.counterpart_link.ratio is not None]
    if not cases:
        return None
    spec = Figure("vs_sglang.png", "Ours vs sglang: time ours / time sglang vs batch", "batch",
                  lambda c: c.counterpart_link.ratio if c.counterpart_link is not None else None,
                  ylabel="time ours / time sglang", hline=1.0, hline_label="same as sglang (below: ours faster)",
                  min_points=1)
    return _line_figure(run, out_dir, spec, cases)


def hot_buffer_effect(run: RunRecord, out_dir: Path) -> Path | None:
    cases = _ok(run)
    if len({c.params.get("hot_buffer_size") for c in cases}) < 2:
        return None
    spec = Figure("hot_buffer_size.png", "Time per call vs hot buffer size", "hot_buffer_size",
                  lambda c: c.stats["median_us"], ylabel="median time per call (us)", xlabel="hot buffer size (slots)",
                  errors=True, panel_keys=("workload", "steps", "batch"))  # linear y: a flat line reads flat
    return _line_figure(run, out_dir, spec)


def _ns_per_kib(c: CaseResult) -> float | None:
    nbytes = (c.work or {}).get("bytes_per_call")
    med = c.stats["median_us"]
    return med * 1e3 * 1024 / nbytes if nbytes and med else None


def item_size_effect(run: RunRecord, out_dir: Path) -> Path | None:
    """Time per KiB the call moves vs item size: flat where every row size moves as fast per byte."""
    cases = _ok(run)
    if len({c.params.get("item_size_bytes") for c in cases}) < 2:
        return None
    spec = Figure("item_size.png", "Time per KiB moved vs item size", "item_size_bytes", _ns_per_kib,
                  ylabel="time per KiB moved (ns)", xlabel="item size (bytes)", y_from_zero=True,
                  panel_keys=("workload", "steps", "batch"), x_categorical=True)
    return _line_figure(run, out_dir, spec)


def pool_size_effect(run: RunRecord, out_dir: Path) -> Path | None:
    """Achieved GB/s vs the `serving` workload's context_max (which sizes the host pool: batch x mean
    context x item), a panel per batch, a line per implementation and the other host-side variants
    (positions, read order): configs/host-side.yaml's question, which host-side axis moves the figures."""
    key = f"{_WP}.context_max"
    cases = [c for c in _ok(run) if key in _flat_params(c)]
    if len({_flat_params(c)[key] for c in cases}) < 2:
        return None
    ceiling = (run.floors or {}).get("pinned_h2d_gbps")
    spec = Figure("pool_size.png", "Achieved bandwidth vs the host pool (context_max)", key, _gbps,
                  ylabel="achieved GB/s (bytes per call / time)", xlabel="context_max (tokens per request, at most)",
                  hline=ceiling, hline_label=f"pinned H2D copy ceiling {ceiling:.1f} GB/s" if ceiling else "",
                  y_from_zero=True, panel_keys=("workload", "batch"), x_categorical=True)
    return _line_figure(run, out_dir, spec, cases)


_ALLOC_COLORS = {"pinned": "#1d4ed8", "registered": "#c2410c", "hugetlb-2m": "#15803d", "hugetlb-1g": "#7e22ce",
                 "vmm": "#a16207"}


def _pool_gb(c: CaseResult) -> float | None:
    """Host bytes of one layer's pool in GB: batch x context x item (configs/host-alloc.yaml sets
    context_min = context_max, so this is the pool and not a bound of it)."""
    wp = c.params.get(_WP) or {}
    ctx = wp.get("context_max") if wp.get("context_min") == wp.get("context_max") else None
    return c.params["batch"] * ctx * c.params["item_size_bytes"] / 1e9 if ctx else None


def _layout(c: CaseResult) -> str:
    return (c.params.get(_WP) or {}).get("positions", "scattered")


def _alloc(c: CaseResult) -> str:
    return case_axes.host_alloc(c.params)


def _any_node(c: CaseResult) -> bool:
    """The case's pool was put on no particular NUMA node (the figure compares allocations, not nodes)."""
    return case_axes.host_numa(c.params) == case_axes.HOST_NUMA_WHEN_ABSENT


def _alloc_group(c: CaseResult) -> tuple:
    """A bar group of host_alloc_effect: scattered first, then by pool GB, then layout."""
    return _layout(c) != "scattered", round(_pool_gb(c)), _layout(c)


def host_alloc_effect(run: RunRecord, out_dir: Path) -> Path | None:
    """Achieved GB/s per host allocation (a bar each, in its colour), grouped by pool size per layer and
    row layout (serving's `positions`), a panel per swap and one for the bare gather of the same rows:
    configs/host-alloc.yaml's question, which allocation lets scattered rows use the link. An allocation
    the OS could not give is named under the figure with its reason, once per kind."""
    kinds = [k for k in _ALLOC_COLORS if any(_alloc(c) == k for c in run.cases)]
    cases = [c for c in _ok(run) if _pool_gb(c) and _any_node(c)]
    if len(kinds) < 2 or not cases:
        return None
    groups = sorted({_alloc_group(c) for c in cases})
    panels = [("multi_step", _gbps), ("lru_sequential", _gbps), ("multi_step", _gather_gbps)]
    ceiling = (run.floors or {}).get("pinned_h2d_gbps")
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
        try:
            for ax, (impl, y_of) in zip(axes.flat, panels):
                _host_alloc_bars(ax, [c for c in cases if c.params["implementation"] == impl], groups, kinds, y_of)
                if ceiling:
                    ax.axhline(ceiling, color="#404040", linestyle=(0, (4, 3)), linewidth=1.2,
                               label=f"pinned H2D copy ceiling {ceiling:.1f} GB/s", zorder=1)
                ax.set_title("bare gather of the same rows (cold)" if y_of is _gather_gbps else impl)
                ax.set_xticks(range(len(groups)), [f"{gb} GB\n{layout}" for _, gb, layout in groups])
                ax.set_xlabel("host pool per layer · rows")
                ax.set_ylabel("achieved GB/s (bytes per call / time)")
                ax.set_ylim(bottom=0)
                ax.grid(True, axis="y", alpha=0.3)
            reasons = {}
            for c in run.cases:
                kind = _alloc(c)
                if c.status == "skipped" and _any_node(c) and kind not in reasons:
                    reasons[kind] = (c.reason or "").split(": ", 2)[-1].split(" (reserve")[0]
            note = "".join(f"\nskipped {k}: {r}" for k, r in reasons.items())
            return _save(fig, out_dir / "host_alloc.png",
                         "Achieved bandwidth by host allocation\n" + run_identity(run) + note)
        finally:
            plt.close(fig)


def _gather_gbps(c: CaseResult) -> float | None:
    gather = (c.floor or {}).get("gather_floor_us")
    nbytes = (c.work or {}).get("bytes_per_call")
    return nbytes / (gather * 1e3) if gather and nbytes else None


def _host_alloc_bars(ax, cases: list[CaseResult], groups: list[tuple], kinds: list[str], y_of) -> None:
    width = 0.8 / len(kinds)
    for i, kind in enumerate(kinds):
        at = {_alloc_group(c): y_of(c) for c in cases if _alloc(c) == kind}
        xs = [g + (i - (len(kinds) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [at.get(g) or 0 for g in groups], width, color=_ALLOC_COLORS[kind])
        ax.plot([], [], color=_ALLOC_COLORS[kind], linewidth=8, label=kind)  # the legend's entry (a line handle)


PLOTS = (latency_vs_batch, throughput_vs_batch, floor_fraction, speedup_vs_batch, vs_sglang, pdl_effect, hot_buffer_effect,
         item_size_effect, pool_size_effect, host_alloc_effect)


def plot_run(run: RunRecord, out_dir: str | Path) -> list[Path]:
    """Every figure this run has data for, as PNGs under ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    paths = []
    for fn in PLOTS:
        p = fn(run, out_dir)
        if p is not None:
            paths.append(p)
    return paths
