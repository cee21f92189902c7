"""Self-contained static dashboard of the per-commit history (``build_site``).

Every byte the pages need is in the pages: inline CSS and a few lines of inline JS, charts as inline
SVG, plots as ``data:`` URIs. No CDN, no web font, no request of any kind: the site opens from disk
(file://) on an offline machine. (asv's own ``asv publish`` site loads jQuery/flot from CDNs and does
not render offline, docs/semantics.md §H3.)

Pages: ``index.html`` (every benchmark = case x machine, with a sparkline of its per-commit
medians), ``bench/<slug>.html`` (trend: median line, IQR band, change points, hover titles, and the
table of commit, date, median, IQR, n; for our case linked to sglang's, ours/sglang per commit), ``commit/<hash>.html`` (that commit's runs: summary table and
the engine's plots), ``regressions.html`` (detected regressions and failed cases). Commits are ordered
by git committer date, or by the run's created time where git does not know the commit.

The dashboard detects nothing: ``build_site`` is handed a ``hisparse.track.series.History`` (every
series with its change points and floors, ``load_history``) and only draws it.
"""
from __future__ import annotations

import base64
import hashlib
import html
import math
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hisparse import stats
from hisparse.files import write_atomic
from hisparse.render.plots import impl_style
from hisparse.render.text import EVEN_MARK, floor_step_note, host_text, modes_text, wins
from hisparse.results import axes as case_axes
from hisparse.track.changes import change_words
from hisparse.track.compare import PAIR_ALPHA
from hisparse.results.model import reread_share
from hisparse.track.history import CommitPoint, RunFile
from hisparse.track.series import Pair, sglang_pairs
from hisparse.track.series import REGRESSION, ChangePoint, History, TrackedSeries

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232b;background:#fafbfc}
header{background:#1d2b3a;color:#fff;padding:10px 20px}header a{color:#cfe3ff;margin-right:16px;text-decoration:none}
main{padding:16px 20px;max-width:1200px}h1{font-size:20px;margin:8px 0}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 14px}
th,td{padding:3px 9px;border-bottom:1px solid #e3e6ea;text-align:right}
th{background:#eef1f4;position:sticky;top:0}td:not(.l){white-space:nowrap}
td.l,th.l{text-align:left}tr:hover td{background:#f3f7ff}
.bad{color:#b3261e;font-weight:600}.good{color:#1a7f37;font-weight:600}.muted{color:#6b7785}
.note{background:#fff7e0;border:1px solid #f0d48a;padding:6px 10px;margin:8px 0}
svg text{font:11px system-ui,sans-serif;fill:#4a5562}img{max-width:100%;border:1px solid #e3e6ea;margin:6px 0}
input{padding:4px 8px;margin:6px 0;width:320px}code{font-size:12px}
"""
FILTER_JS = """
function filterRows(q){q=q.toLowerCase();for(const r of document.querySelectorAll('tbody.filter tr')){
r.style.display=r.textContent.toLowerCase().includes(q)?'':'none';}}
function sortBy(th){const t=th.closest('table'),i=[...th.parentNode.children].indexOf(th),b=t.tBodies[0];
const d=th.dataset.dir=th.dataset.dir==='asc'?'desc':'asc';const v=r=>{const c=r.children[i],e=c.querySelector('[data-v]')||c;
const s=e.dataset.v!==undefined?e.dataset.v:c.textContent;const n=parseFloat(s);return isNaN(n)?s:n;};
[...b.rows].sort((x,y)=>{const a=v(x),c=v(y);const o=a<c?-1:a>c?1:0;return d==='asc'?o:-o;})
.forEach(r=>b.appendChild(r));}
document.addEventListener('DOMContentLoaded',()=>{for(const th of document.querySelectorAll('table.sortable th'))
th.addEventListener('click',()=>sortBy(th));});
"""
E = html.escape


@dataclass
class Site:
    """What ``build_site`` wrote and found (the CLI prints it)."""

    out_dir: Path
    history: History
    pages: list[Path] = field(default_factory=list)

    @property
    def tracked(self) -> list[TrackedSeries]:
        return self.history.tracked

    @property
    def skipped(self) -> list[tuple[Path, str]]:
        return self.history.skipped

    @property
    def regressions(self) -> list[tuple[TrackedSeries, ChangePoint]]:
        return self.history.regressions


def natural_key(text: str) -> list:
    """"b2" before "b16": digit runs compare as numbers (re.split alternates str, int, str...)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def slug(text: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]
    return f"{base}-{hashlib.sha1(text.encode()).hexdigest()[:6]}"


def fmt_us(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "-"
    return f"{v:.4g} us" if v < 1e4 else f"{v / 1e3:.4g} ms"


def _quartiles(xs: Sequence[float]) -> tuple[float, float]:
    return stats.quantile(xs, 0.25), stats.quantile(xs, 0.75)


def _page(title: str, body: str, depth: int = 0) -> str:
    up = "../" * depth
    nav = (f'<a href="{up}index.html">Benchmarks</a><a href="{up}regressions.html">Regressions</a>'
           f'<a href="{up}commits.html">Commits</a><a href="{up}sglang.html">sglang pairs</a>')
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{E(title)}</title>"
            f"<style>{CSS}</style><script>{FILTER_JS}</script></head><body><header>{nav}</header>"
            f"<main><h1>{E(title)}</h1>{body}</main></body></html>\n")


# ---------------------------------------------------------------------------------------------
# SVG


def _scale(lo: float, hi: float, a: float, b: float):
    if hi <= lo:
        lo, hi = lo - 1, hi + 1
    return lambda v: a + (v - lo) / (hi - lo) * (b - a)


SPARK_RANGE = 0.10  # index sparklines: every one spans latest median x (1 +- 10%), clipped at the edge


def sparkline(values: Sequence[float | None], width: int = 140, height: int = 30, *,
              relative: float | None = None) -> str:
    """``relative``: a shared scale, values over the latest one within 1 +- ``relative`` (a 2.5%
    wiggle then looks a quarter of an 10% step; each line scaled to its own range made them equal)."""
    pts = [(i, v) for i, v in enumerate(values) if v is not None]
    if not pts:
        return '<svg class="spark" width="%d" height="%d"></svg>' % (width, height)
    ys = [v for _, v in pts]
    x = _scale(0, max(len(values) - 1, 1), 4, width - 4)
    if relative is not None:
        ref = ys[-1]
        lo, hi = ref * (1 - relative), ref * (1 + relative)
        pts = [(i, min(max(v, lo), hi)) for i, v in pts]
        y = _scale(lo, hi, height - 4, 4)
    else:
        y = _scale(min(ys), max(ys), height - 4, 4)
    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pts)
    dots = "".join(f'<circle class="pt" cx="{x(i):.1f}" cy="{y(v):.1f}" r="2"><title>{E(fmt_us(v))}</title></circle>'
                   for i, v in pts)
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f'<polyline points="{line}" fill="none" stroke="#2f6fd0" stroke-width="1.2"/>{dots}</svg>')


@dataclass(frozen=True)
class _Frame:
    """The plot area of a chart: x by point index, y in us."""

    width: int
    height: int
    n: int
    lo: float
    hi: float
    left: int = 70
    right: int = 20
    top: int = 14
    bottom: int = 60

    def x(self, i: float) -> float:
        return _scale(0, max(self.n - 1, 1), self.left, self.width - self.right)(i)

    def y(self, v: float) -> float:
        return _scale(self.lo, self.hi, self.height - self.bottom, self.top)(v)

    def axes(self, css_class: str, commits: Sequence[str]) -> list[str]:
        w, h = self.width, self.height
        parts = [f'<svg class="{css_class}" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
                 f'<rect x="{self.left}" y="{self.top}" width="{w - self.left - self.right}" '
                 f'height="{h - self.top - self.bottom}" fill="#fff" stroke="#d5dae0"/>']
        for k in range(5):
            v = self.lo + (self.hi - self.lo) * k / 4
            parts.append(f'<line x1="{self.left}" x2="{w - self.right}" y1="{self.y(v):.1f}" y2="{self.y(v):.1f}" '
                         f'stroke="#eef1f4"/><text x="{self.left - 6}" y="{self.y(v) + 4:.1f}" '
                         f'text-anchor="end">{E(fmt_us(v))}</text>')
        step = max(1, math.ceil(len(commits) / 24))
        for i, c in enumerate(commits):
            if i % step == 0:
                xi, yb = self.x(i), h - self.bottom + 14
                parts.append(f'<text x="{xi:.1f}" y="{yb}" text-anchor="end" '
                             f'transform="rotate(-40 {xi:.1f} {yb})">{E(c[:8])}</text>')
        return parts

    def floor(self, floors: Sequence[float | None], kind: str = "pcie") -> str:
        """A floor per commit, as a dashed line: ``pcie`` (grey: the time the bytes need at pinned-copy
        speed) or ``gather`` (brown: the bare gather of the case's rows, which moves with the node)."""
        pts = [(i, f) for i, f in enumerate(floors) if f]
        if not pts:
            return ""
        css, label, stroke, dash = FLOOR_LINES[kind]
        line = " ".join(f"{self.x(i):.1f},{self.y(f):.1f}" for i, f in pts)
        return (f'<polyline class="{css}" points="{line}" fill="none" stroke="{stroke}" stroke-dasharray="{dash}" '
                f'stroke-width="1.3"><title>{label} {E(fmt_us(pts[-1][1]))}</title></polyline>'
                f'<text x="{self.x(pts[-1][0]) - 4:.1f}" y="{self.y(pts[-1][1]) - 5:.1f}" text-anchor="end" '
                f'fill="{stroke}">{label}</text>')


# kind -> (css class, label, stroke, dash) of a floor line
FLOOR_LINES = {"pcie": ("floor", "PCIe floor", "#6b7785", "6,4"),
               "gather": ("gather-floor", "gather floor", "#8a5a2b", "2,3")}


def _frame(values: Sequence[float], n: int, width: int, height: int) -> _Frame:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.01 or 1.0
    return _Frame(width, height, n, lo - pad, hi + pad)


def _point_title(p: CommitPoint, m: float, q1: float, q3: float, prefix: str = "") -> str:
    return (f"{prefix}{p.commit[:12]}  {p.date:%Y-%m-%d %H:%M}  median {fmt_us(m)}  IQR {fmt_us(q1)}..{fmt_us(q3)}  "
            f"n={len(p.samples_us)}")


def trend_chart(t: TrackedSeries, width: int = 900, height: int = 320) -> str:
    """Median per commit (line + points with hover titles), IQR band, PCIe and gather floors, change points,
    failed commits."""
    pts = t.series.points
    rows = [(i, p, stats.median(p.samples_us), *_quartiles(p.samples_us)) for i, p in enumerate(pts) if p.ok]
    if not rows:
        return f'<svg class="trend" width="{width}" height="{height}"><text x="20" y="40">no data</text></svg>'
    floors = [f for f in (*t.floor_us, *t.gather_floor_us) if f]
    fr = _frame([r[3] for r in rows] + [r[4] for r in rows] + floors, len(pts), width, height)
    x, y = fr.x, fr.y
    parts = fr.axes("trend", [p.commit for p in pts])
    band = ([f"{x(i):.1f},{y(q3):.1f}" for i, _, _, _, q3 in rows]
            + [f"{x(i):.1f},{y(q1):.1f}" for i, _, _, q1, _ in reversed(rows)])
    parts.append(f'<polygon class="iqr" points="{" ".join(band)}" fill="#2f6fd0" fill-opacity="0.15" stroke="none"/>')
    parts.append(fr.floor(t.floor_us))
    parts.append(fr.floor(t.gather_floor_us, "gather"))
    parts.append('<polyline class="median" points="%s" fill="none" stroke="#2f6fd0" stroke-width="1.6"/>'
                 % " ".join(f"{x(i):.1f},{y(m):.1f}" for i, _, m, _, _ in rows))
    for c in t.changes:
        xc = (x(c.index - 1) + x(c.index)) / 2
        color = "#b3261e" if c.kind == REGRESSION else "#1a7f37"
        parts.append(f'<line class="change" x1="{xc:.1f}" x2="{xc:.1f}" y1="{fr.top}" y2="{height - fr.bottom}" '
                     f'stroke="{color}" stroke-dasharray="5,3" stroke-width="1.5">'
                     f'<title>{E(_change_text(t, c))}</title></line>')
    for i, p in enumerate(pts):
        if p.failed and not p.ok:
            parts.append(f'<text class="failed" x="{x(i):.1f}" y="{height - fr.bottom - 4}" text-anchor="middle" '
                         f'fill="#b3261e">x<title>{E(p.commit[:12])} failed: {E(p.failed[0])}</title></text>')
    for i, p, m, q1, q3 in rows:
        parts.append(f'<a href="../commit/{E(_commit_slug(p.commit))}.html"><circle class="pt" cx="{x(i):.1f}" '
                     f'cy="{y(m):.1f}" r="3.5" fill="#2f6fd0"><title>{E(_point_title(p, m, q1, q3))}</title>'
                     '</circle></a>')
    parts.append("</svg>")
    return "".join(parts)


def compare_chart(members: Sequence[TrackedSeries], width: int = 900, height: int = 340) -> str:
    """The implementations that measure one case, one median line each (colour and marker shape per
    implementation, hollow for the sglang ones), on one commit axis, with the case's PCIe and gather floors
    (each commit's from the first member that recorded one there)."""
    commits: dict[str, tuple] = {}
    for t in members:
        for p in t.series.points:
            commits.setdefault(p.commit, (p.date, p.commit))
    order = sorted(commits, key=lambda c: commits[c])
    at = {c: i for i, c in enumerate(order)}
    meds = [stats.median(p.samples_us) for t in members for p in t.series.points if p.ok]
    floor_of: dict[str, dict] = {"pcie": {}, "gather": {}}  # kind -> commit -> floor
    for t in members:
        for kind, floors in (("pcie", t.floor_us), ("gather", t.gather_floor_us)):
            for p, f in zip(t.series.points, floors):
                if f:
                    floor_of[kind].setdefault(p.commit, f)
    if not meds:
        return f'<svg class="compare" width="{width}" height="{height}"><text x="20" y="40">no data</text></svg>'
    fr = _frame(meds + [f for by in floor_of.values() for f in by.values()], len(order), width, height)
    parts = fr.axes("compare", order)
    for kind, by in floor_of.items():
        parts.append(fr.floor([by.get(c) for c in order], kind))
    for k, t in enumerate(members):
        impl = str(t.series.params.get("implementation") or t.series.case_id.split("/")[0])
        style = impl_style(impl)
        rows = [(at[p.commit], p, stats.median(p.samples_us), *_quartiles(p.samples_us))
                for p in t.series.points if p.ok]
        fill = "#fff" if style.hollow else style.color
        parts.append(f'<polyline class="impl" data-impl="{E(impl)}" points="'
                     + " ".join(f"{fr.x(i):.1f},{fr.y(m):.1f}" for i, _, m, _, _ in rows)
                     + f'" fill="none" stroke="{style.color}" stroke-width="1.6"/>')
        for i, p, m, q1, q3 in rows:
            parts.append(f'<circle class="pt" cx="{fr.x(i):.1f}" cy="{fr.y(m):.1f}" r="3.5" fill="{fill}" '
                         f'stroke="{style.color}" stroke-width="1.5"><title>{E(_point_title(p, m, q1, q3, impl + "  "))}'
                         '</title></circle>')
        ly = fr.top + 14 + 15 * k
        lx = width - fr.right - 190
        parts.append(f'<line x1="{lx}" x2="{lx + 18}" y1="{ly - 4}" y2="{ly - 4}" stroke="{style.color}" '
                     f'stroke-width="2"/><circle cx="{lx + 9}" cy="{ly - 4}" r="3.5" fill="{fill}" '
                     f'stroke="{style.color}" stroke-width="1.5"/><text class="legend" x="{lx + 24}" y="{ly}">'
                     f'{E(impl)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _change_text(t: TrackedSeries, c: ChangePoint) -> str:
    commit = t.series.points[c.index].commit
    return (f"{c.kind} at {commit[:12]}: {fmt_us(c.before_median)} -> {fmt_us(c.after_median)} "
            f"({c.change * 100:+.2f}%, threshold {c.threshold * 100:.2f}%, p={c.p_value:.3f})"
            + node_note(t.gather_floor_step(c)))


def node_note(step: float | None) -> str:
    """What a change point says when the case's gather floor stepped at the same commit."""
    return floor_step_note(step, "at the same commit")


def _floor_step_cell(step: float | None) -> str:
    return f'<span title="the node, the rows or the floor changed too">{step:.2f}x</span>' if step else "-"


def _commit_slug(commit: str) -> str:
    return commit[:12] if re.fullmatch(r"[0-9a-f]{7,40}", commit) else slug(commit)


def _bench_href(t: TrackedSeries) -> str:
    return f"bench/{slug(t.key)}.html"


# ---------------------------------------------------------------------------------------------
# Pages


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], *, body_class: str = "", empty: str = "none",
           css_class: str = "") -> str:
    """An HTML table; ``head`` labels starting with "<" are left-aligned (text) columns. Cells are HTML."""
    left = [h.startswith("<") for h in head]
    th = "".join(f'<th class="l">{E(h[1:])}</th>' if lft else f"<th>{E(h)}</th>" for h, lft in zip(head, left))
    trs = ["<tr>" + "".join(f'<td class="l">{c}</td>' if lft else f"<td>{c}</td>" for c, lft in zip(r, left))
           + "</tr>" for r in rows]
    if not trs:
        trs = [f'<tr><td class="l muted" colspan="{len(head)}">{E(empty)}</td></tr>']
    cls = f' class="{css_class}"' if css_class else ""
    return f'<table{cls}><thead><tr>{th}</tr></thead><tbody class="{body_class}">{"".join(trs)}</tbody></table>'


def _link(href: str, text: str) -> str:
    return f'<a href="{E(href)}">{E(text)}</a>'


def _bad(text: str) -> str:
    return f'<span class="bad">{E(text)}</span>'


REFERENCE_NOTE = '<p class="note">Reference backend: PyTorch on the CPU. These are not kernel times.</p>'


def _param_value(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_param_value(x)}" for k, x in sorted(v.items())) or "-"
    if isinstance(v, (list, tuple)):
        return ", ".join(_param_value(x) for x in v) or "-"
    return "-" if v is None else str(v)


def params_table(params: dict) -> str:
    """A case's parameters, one row each (pdl on/off, nested workload parameters as k=v)."""
    return _table(["<parameter", "<value"], ([E(k), E(_param_value(v))] for k, v in params.items()),
                  css_class="params")


def _point_row(p: CommitPoint) -> list[str]:
    row = [_link(f"../commit/{_commit_slug(p.commit)}.html", p.commit[:12]), f"{p.date:%Y-%m-%d %H:%M}"]
    if not p.ok:
        return row + [_bad("failed: " + ("; ".join(p.failed) or "no samples"))] + ["-"] * 5 + [E(", ".join(p.run_ids))]
    m = stats.median(p.samples_us)
    q1, q3 = _quartiles(p.samples_us)
    gbps = f"{p.gbps_per_us / m:.2f}" if p.gbps_per_us and m else "-"
    return row + [fmt_us(m), fmt_us(q1), fmt_us(q3), fmt_us(q3 - q1), str(len(p.samples_us)), gbps,
                  E(", ".join(p.run_ids))]


def _same_case_key(t: TrackedSeries) -> tuple:
    """Series equal in everything but the implementation measure the same case."""
    s = t.series
    rest = {k: v for k, v in s.params.items() if k != "implementation"}
    return s.machine, s.backend, repr(sorted((k, repr(v)) for k, v in rest.items()))


def counterpart_points(t: TrackedSeries, runs: dict[str, RunFile]) -> list[tuple[CommitPoint, str, list[float]]]:
    """(point, sglang's case id, ours/sglang of each of the point's runs) for every commit where the
    engine linked this case to sglang's counterpart (the stored ``counterpart_link``; render never
    pairs cases itself). A run whose sglang case was not timed adds no ratio."""
    out = []
    for p in t.series.points:
        links = [link for rid in p.run_ids if rid in runs
                 for case in [runs[rid].record.case(t.series.case_id)] if case is not None
                 for link in [case.counterpart_link] if link is not None]
        if links:
            out.append((p, links[0].case_id, [link.ratio for link in links if link.ratio is not None]))
    return out


def _counterpart_html(t: TrackedSeries, peers: Sequence[TrackedSeries], runs: dict[str, RunFile]) -> str:
    """"Ours vs sglang": per commit, ours/sglang (median over the commit's runs), linked to sglang's page."""
    found = counterpart_points(t, runs)
    if not found:
        return ""
    pages = {p.series.case_id: "../" + _bench_href(p) for p in peers}

    def row(p: CommitPoint, theirs: str, ratios: list[float]) -> list[str]:
        value = stats.median(ratios) if ratios else None
        cell = "-" if value is None else (f'<span class="{"good" if value < 1 else "bad" if value > 1 else ""}">'
                                          f"{value:.3f}</span>")
        return [_link(f"../commit/{_commit_slug(p.commit)}.html", p.commit[:12]), f"{p.date:%Y-%m-%d %H:%M}",
                _link(pages[theirs], theirs) if theirs in pages else E(theirs), cell, str(len(ratios))]

    return ('<h2>Ours vs sglang</h2><p class="muted">time of this case / time of sglang\'s case doing the same '
            "work, as the engine linked them (below 1: ours faster; the median over the commit's runs).</p>"
            + _table(["<commit", "<date", "<sglang case", "ours/sglang", "runs"],
                     (row(*f) for f in found), css_class="vs-sglang"))


def _bench_page(t: TrackedSeries, peers: Sequence[TrackedSeries], runs: dict[str, RunFile] | None = None) -> str:
    s = t.series
    body = [f'<p class="muted">machine <b>{E(s.machine)}</b>, backend <b>{E(s.backend or "-")}</b></p>']
    if s.backend == "reference":
        body.append(REFERENCE_NOTE)
    body.append(trend_chart(t))
    if t.changes:
        body.append("<h2>Change points</h2><ul>" + "".join(
            f'<li class="{"bad" if c.kind == REGRESSION else "good"}">{E(_change_text(t, c))}</li>'
            for c in t.changes) + "</ul>")
    if len(peers) > 1:
        links = ", ".join(_link("../" + _bench_href(p), str(p.series.params.get("implementation"))) for p in peers)
        body.append(f"<h2>All implementations of this case</h2><p class=\"muted\">{links}</p>" + compare_chart(peers))
    body.append(_counterpart_html(t, peers, runs or {}))
    body.append("<h2>Parameters</h2>" + params_table(s.params))
    body.append("<h2>Per commit</h2>" + _table(
        ["<commit", "<date", "median", "q1", "q3", "IQR", "n", "GB/s", "<runs"], (_point_row(p) for p in s.points)))
    return _page(f"{s.case_id}", "".join(body), depth=1)


def _plots_html(run: RunFile, make_plots: bool, out: Path) -> str:
    """The run's figures as files under ``out/plots/<run id>/``, linked and loaded lazily (inlined as
    base64 they made commit pages 2-6 MB). Reused between builds: a run's folder newer than its run
    file is not redrawn. The PNGs next to the run file (``hisparse-bench plot``) are copied when present."""
    dest = out / "plots" / slug(run.run_id)
    note = ""
    fresh = dest.is_dir() and any(dest.glob("*.png")) and dest.stat().st_mtime >= run.path.stat().st_mtime
    if not fresh:
        plot_dir = run.path.with_suffix("")
        pngs = sorted(plot_dir.glob("*.png")) if plot_dir.is_dir() else []
        if pngs:
            for p in pngs:
                write_atomic(dest / p.name, p.read_bytes())
        elif make_plots:
            try:
                from hisparse.render.plots import plot_run  # noqa: PLC0415
                from hisparse.results.model import load_run  # noqa: PLC0415

                plot_run(load_run(run.path), dest)
            except Exception as e:  # noqa: BLE001 (no matplotlib, an older file: the page goes on)
                note = f'<p class="muted">plots unavailable: {E(type(e).__name__)}: {E(str(e))}</p>'
    pngs = sorted(dest.glob("*.png")) if dest.is_dir() else []
    imgs = "".join(f'<figure><a href="../plots/{slug(run.run_id)}/{E(p.name)}"><img loading="lazy" alt="{E(p.stem)}" '
                   f'src="../plots/{slug(run.run_id)}/{E(p.name)}"></a>'
                   f'<figcaption class="muted">{E(p.name)}</figcaption></figure>' for p in pngs)
    return imgs or note or '<p class="muted">no plots for this run</p>'


def _case_row(c: dict) -> list[str]:
    st, d = c.get("stats") or {}, c.get("derived") or {}
    samples = c.get("samples_us") or []
    med = st.get("median_us", stats.median(samples) if samples else None)
    status = str(c.get("status"))
    gbps, over = d.get("gbps"), d.get("over_pcie_floor")
    return [E(c["case_id"]), _bad(status) if status == "failed" else E(status), fmt_us(med), fmt_us(st.get("iqr_us")),
            str(len(samples)), "-" if gbps is None else f"{gbps:.2f}", _over_pcie_cell(over, c.get("work") or {}),
            E(str(c.get("reason") or _modes_note((c.get("timing") or {}).get("replay_us") or samples)))]


def _over_pcie_cell(over: float | None, work: dict) -> str:
    """The x-PCIe-floor figure, with "*" and a tooltip where the case reads its host rows more than once
    (the text summary's mark, hisparse.render.text.run_table)."""
    if over is None:
        return "-"
    share = reread_share(work)
    if share is None:
        return f"{over:.2f}"
    tip = (f"rows read more than once: {share:.0%} of the copied rows are distinct host rows; the PCIe floor "
           f"counts every copied row, and a re-read row need not cross the link")
    return f'<span title="{E(tip)}">{over:.2f}*</span>'


def _modes_note(samples: Sequence[float]) -> str:
    """"bimodal: 53.2 us x43% | 55.2 us x57%" for a two-mode sample (its median follows the mix), else ""."""
    found = stats.modes(samples) if samples else ()
    return "bimodal: " + modes_text(found, fmt_us) if found else ""


def _run_facts(r: RunFile) -> list[str]:
    """What a run ran on; facts the run did not record (a CPU run has no GPU or driver) are left out."""
    env, cfg = r.environment, r.data.get("config") or {}
    gpu = " ".join(x for x in (env.get("gpu"), f"driver {env['driver']}" if env.get("driver") else None) if x)
    host = host_text(env)
    facts = [f"machine {r.machine}", f"backend {r.data.get('backend') or '-'}", gpu,
             f"torch {env['torch']}" if env.get("torch") else "", f"config {cfg.get('name') or '-'}",
             f"host {host}" if host else "", f"created {r.data.get('created') or '-'}"]
    if r.record.resumes:  # its cases may come from different machine starts
        facts.append(f"resumed {len(r.record.resumes)} time(s), "
                     f"{r.record.resumed_case_count} case(s) timed by a resume")
    return [f for f in facts if f]


def _commit_page(commit: str, runs: list[RunFile], date, make_plots: bool, out: Path, subject: str = "",
                 changes: Sequence[tuple] = ()) -> str:
    body = [f'<p>commit <code>{E(commit)}</code>, {date:%Y-%m-%d %H:%M} UTC</p>'
            + (f'<p class="subject"><b>{E(subject)}</b></p>' if subject else ""), _changes_html(changes)]
    for r in runs:
        flags = ("; <b>dirty tree</b>" if r.dirty else "") + ("" if r.finished else "; <b>unfinished</b>")
        body.append(f'<h2>Run {E(r.run_id)}</h2><p class="muted">{E("; ".join(_run_facts(r)))}{flags}</p>')
        if r.data.get("backend") == "reference":
            body.append(REFERENCE_NOTE)
        body.append(_plots_html(r, make_plots, out))
        cases = sorted(r.cases, key=lambda c: natural_key(c["case_id"]))
        body.append("<details><summary>every case of the run</summary>" + _table(
            ["<case", "<status", "median", "IQR", "n", "GB/s", "x PCIe floor", "<reason / note"],
            (_case_row(c) for c in cases)) + "</details>")
    return _page(f"Commit {commit[:12]}", "".join(body), depth=1)


def _change_cell(ratio: float | None) -> str:
    """"1.08x slower" (red) / "1.05x faster" (green) with the ratio as the sort value."""
    if ratio is None:
        return "-"
    words = change_words(ratio)
    cls = "" if words == "same" else (' class="bad"' if ratio > 1 else ' class="good"')
    return f'<span{cls} data-v="{ratio:.6f}">{E(words)}</span>'


def _changes_html(changes: Sequence[tuple]) -> str:
    """The commit's change per series against the previous commit of that series and against its
    first (the baseline), with the lone-pair verdict on the raw samples; unchanged rows counted."""
    if not changes:
        return '<p class="muted">no earlier commit of these series: nothing to compare</p>'
    shown = [c for c in changes if c[3] != "unchanged"]
    rows = [[_link("../" + _bench_href(t), t.series.case_id) + (f' <span class="muted">@{E(t.series.timing)}</span>'
                                                         if t.series.timing else ""),
             E(parent[:12]), _change_cell(r_parent), E(verdict), _change_cell(r_base)]
            for t, parent, r_parent, verdict, r_base in sorted(shown, key=lambda c: -abs(math.log(c[2] or 1)))]
    return ("<h2>Change against the parent and the baseline</h2>"
            f'<p class="muted">parent: the previous commit with a point of the series; baseline: its first. '
            f"Verdict: compare's policy on the raw samples (5% floor, Mann-Whitney p &lt; 0.01). "
            f"{len(changes) - len(shown)} of {len(changes)} series unchanged (not listed).</p>"
            + _table(["<series", "<parent", "vs parent", "<verdict", "vs baseline"], rows, empty="every series unchanged"))


def _sglang_page(pairs: Sequence[Pair]) -> str:
    """Every pair of ours and sglang's series: the latest ours/sglang, its trend over commits (one
    shared scale: 0 to 1.5, the dashed line at 1 = as fast as sglang), and how many commits had both.
    A pair counts as faster or slower only where its latest samples differ (``Pair.latest``); the
    others are marked and counted as not distinguishable."""
    rows = []
    for pr in pairs:
        values = [r for _, r in pr.ratios]
        latest = pr.latest
        cls = "" if latest is None or latest.tie else (' class="good"' if latest.ratio < 1 else ' class="bad"')
        cell = "-" if latest is None else (f'<span{cls} data-v="{latest.ratio:.6f}">{latest.ratio:.3f}'
                                           f'{" " + EVEN_MARK if latest.tie else ""}</span>')
        rows.append([_link(_bench_href(pr.ours), pr.ours.series.case_id), E(pr.ours.series.timing or "-"),
                     _link(_bench_href(pr.theirs), pr.theirs.series.case_id.split("/")[0]), cell,
                     str(len(values)), _ratio_spark(values)])
    faster, slower, rated, _ = wins(pr.latest for pr in pairs if pr.latest is not None)
    return _page("Ours vs sglang", (
        f'<p class="muted">{len(pairs)} pair(s); at the latest commit with both, ours faster in {faster} of '
        f"{rated}, slower in {slower}, not distinguishable in {rated - faster - slower} ({EVEN_MARK}: Mann-Whitney p >= "
        f"{PAIR_ALPHA:g} on the two cases' samples, pooled over the commit's runs). ours/sglang = median time "
        "ours / median time sglang's (below 1: ours faster), per commit where both timed the case with the "
        "same timing settings. Click a column to sort.</p>"
        '<input placeholder="filter" oninput="filterRows(this.value)">'
        + _table(["<ours", "<timing", "<sglang's", "latest ours/sglang", "commits", "trend"], rows,
                 body_class="filter", empty="no pair of ours and sglang's in these runs", css_class="sortable")))


def _ratio_spark(values: Sequence[float], width: int = 140, height: int = 30) -> str:
    """Ratios on one scale for every row, 0 to 1.5, with the line at 1."""
    if not values:
        return ""
    x = _scale(0, max(len(values) - 1, 1), 4, width - 4)
    y = _scale(0.0, 1.5, height - 3, 3)
    pts = " ".join(f"{x(i):.1f},{y(min(v, 1.5)):.1f}" for i, v in enumerate(values))
    dots = "".join(f'<circle class="pt" cx="{x(i):.1f}" cy="{y(min(v, 1.5)):.1f}" r="2"><title>{v:.3f}</title></circle>'
                   for i, v in enumerate(values))
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f'<line x1="0" x2="{width}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" stroke="#999" stroke-dasharray="3,3"/>'
            f'<polyline points="{pts}" fill="none" stroke="#2f6fd0" stroke-width="1.2"/>{dots}</svg>')


def commit_changes(tracked: Sequence[TrackedSeries]) -> dict[str, list[tuple]]:
    """commit -> [(series, parent commit, ratio to parent, verdict, ratio to baseline)] for every series
    with an ok point at that commit and an earlier ok point."""
    from hisparse.track import policy as pol  # noqa: PLC0415

    out: dict[str, list[tuple]] = {}
    for t in tracked:
        ok = [p for p in t.series.points if p.ok]
        for prev, p in zip(ok, ok[1:]):
            m, mp, mb = (stats.median(x.samples_us) for x in (p, prev, ok[0]))
            policy = pol.RegressionPolicy(min_effect=pol.DEFAULT_POLICY.min_effect_unknown_noise)
            verdict = pol.judge(prev.samples_us, p.samples_us, policy).status
            out.setdefault(p.commit, []).append((t, prev.commit, m / mp if mp else None, verdict,
                                                 m / mb if mb else None))
    return out


def _index_row(t: TrackedSeries) -> list[str]:
    s = t.series
    meds = [stats.median(p.samples_us) if p.ok else None for p in s.points]
    last = next((m for m in reversed(meds) if m is not None), None)
    regs = t.regressions
    rated = [m for m in meds if m is not None]
    change = rated[-1] / rated[-2] if len(rated) >= 2 and rated[-2] else None
    return [_link(_bench_href(t), s.case_id), E(s.timing or "-"), E(case_axes.regime(s.params)), E(s.machine),
            E(s.backend or "-"),
            str(len(s.points)), f'<span data-v="{last or 0:.6f}">{fmt_us(last)}</span>', _change_cell(change),
            sparkline(meds, relative=SPARK_RANGE), _bad(f"{len(regs)} regression(s)") if regs else ""]


def _commits_row(c: str, runs: list[RunFile], date) -> list[str]:
    def names(values) -> str:
        return E(", ".join(sorted({str(v or "-") for v in values})))

    return [_link(f"commit/{_commit_slug(c)}.html", c[:12]), f"{date:%Y-%m-%d %H:%M}", names(r.machine for r in runs),
            names(r.data.get("backend") for r in runs), E(", ".join(r.run_id for r in runs)),
            str(sum(1 for r in runs for k in r.cases if k.get("status") == "failed"))]


def build_site(history: History, out_dir: str | os.PathLike, *, make_plots: bool = True,
               subjects: dict[str, str] | None = None) -> Site:
    """Write the dashboard of ``history`` (``hisparse.track.series.load_history``) into ``out_dir``."""
    out = Path(out_dir)
    site = Site(out, history)
    for sub in ("bench", "commit", "plots"):
        (out / sub).mkdir(parents=True, exist_ok=True)

    def write(rel: str, text: str) -> None:
        path = out / rel
        write_atomic(path, text)
        site.pages.append(path)

    dates = history.dates
    by_commit: dict[str, list[RunFile]] = {}
    for r in sorted(history.runs, key=lambda r: r.created):
        by_commit.setdefault(r.commit or f"run:{r.run_id}", []).append(r)
    commits = sorted(by_commit, key=lambda c: (dates[c], c))

    tracked = sorted(history.tracked, key=lambda t: (natural_key(t.series.case_id), t.series.machine,
                                                     t.series.backend))
    peers: dict[tuple, list[TrackedSeries]] = {}
    for t in tracked:
        peers.setdefault(_same_case_key(t), []).append(t)
    runs_by_id = {r.run_id: r for r in history.runs}
    for t in tracked:
        write(_bench_href(t), _bench_page(t, peers[_same_case_key(t)], runs_by_id))
    notes = "".join(f'<p class="note">skipped {E(str(p))}: {E(reason)}</p>' for p, reason in history.skipped)
    write("index.html", _page("hisparse-bench: benchmarks", notes + (
        f'<p class="muted">{len(tracked)} benchmark(s), {len(commits)} commit(s). Times are medians per '
        'commit (re-runs pooled); lower is better. One benchmark = case x machine x backend.</p>'
        '<input placeholder="filter" oninput="filterRows(this.value)">')
        + f'<p class="muted">Click a column to sort. Trend: every sparkline on one scale, the latest median '
        f'+-{SPARK_RANGE:.0%}; change: the latest commit against the one before. A benchmark is a case and its '
        'timing settings (g20x5: 20-call graphs, each sample 5 replays).</p>'
        + _table(["<benchmark", "<timing", "<regime", "<machine", "<backend", "commits", "latest median", "change vs previous",
                  "trend", "<alerts"],
                 (_index_row(t) for t in tracked), body_class="filter", empty="no runs", css_class="sortable")))

    write("sglang.html", _sglang_page(sglang_pairs(tracked)))
    changes = commit_changes(tracked)
    for c in commits:
        write(f"commit/{_commit_slug(c)}.html", _commit_page(c, by_commit[c], dates[c], make_plots, out,
                                                             (subjects or {}).get(c, ""), changes.get(c, ())))
    write("commits.html", _page("Commits", _table(
        ["<commit", "<date", "<machine", "<backend", "<runs", "failed cases"],
        (_commits_row(c, by_commit[c], dates[c]) for c in reversed(commits)))))

    regressions = _table(
        ["<benchmark", "<machine", "<backend", "<first commit", "before", "after", "change", "threshold", "p",
         "gather floor step"], (
            [_link(_bench_href(t), t.series.case_id), E(t.series.machine), E(t.series.backend or "-"),
             _link(f"commit/{_commit_slug(t.series.points[c.index].commit)}.html",
                   t.series.points[c.index].commit[:12]),
             fmt_us(c.before_median), fmt_us(c.after_median), _bad(f"{c.change * 100:+.2f}%"),
             f"{c.threshold * 100:.2f}%", f"{c.p_value:.3f}", _floor_step_cell(t.gather_floor_step(c))]
            for t, c in site.regressions))
    failed = _table(["<commit", "<machine", "<backend", "<case", "<reason"], (
        [_link(f"commit/{_commit_slug(c)}.html", c[:12]), E(r.machine), E(str(r.data.get("backend") or "-")),
         E(k["case_id"]), E(str(k.get("reason") or ""))]
        for c in reversed(commits) for r in by_commit[c]
        for k in sorted(r.cases, key=lambda k: natural_key(k["case_id"])) if k.get("status") == "failed"))
    write("regressions.html", _page("Regressions", (
        '<h2>Detected regressions (change points)</h2><p class="muted">Binary segmentation with a permutation '
        "test over per-commit medians; a change must exceed the case's own noise (docs/regression.md).</p>"
        + regressions + "<h2>Failed cases</h2>" + failed)))
    return site
