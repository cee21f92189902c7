"""Plain-text tables (terminal and Markdown-compatible). Formatting only: every function returns a
string; the commands print it."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hisparse import stats
from hisparse.results import axes, metadata
from hisparse.track.changes import Change, GeoMean, change_words
from hisparse.track.compare import PAIR_ALPHA, Pair, pair_of, within
from hisparse.track.policy import IMPROVED, REGRESSED
from hisparse.results.model import RunRecord, reread_share

REFERENCE_NOTE = ("NOTE: backend 'reference': times are PyTorch-reference times on the CPU, not kernel "
                  "times; they say nothing about GPU performance.")


RED, GREEN = "31", "32"  # ANSI colours: slower, faster


def paint(s: str, colour: str | None) -> str:
    """``s`` in an ANSI colour (RED, GREEN); unchanged for None. The command decides whether the
    terminal wants colour (cli/_style.py), this only wraps."""
    return f"\x1b[{colour}m{s}\x1b[0m" if colour else s


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None,
          colours: Sequence[str | None] | None = None) -> str:
    """Markdown-style pipe table; ``align`` is one char per column ('l' or 'r', default: first l);
    ``colours``: one ANSI colour (or None) per row, applied after padding so columns stay aligned."""
    rows = [list(map(str, r)) for r in rows]
    align = align or ("l" + "r" * (len(headers) - 1))
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(cells: Sequence[str]) -> str:
        out = []
        for c, w, a in zip(cells, widths, align):
            out.append(c.ljust(w) if a == "l" else c.rjust(w))
        return "| " + " | ".join(out) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2))
                         for w, a in zip(widths, align)) + "|"
    colours = list(colours or []) + [None] * len(rows)
    return "\n".join([fmt(headers), sep] + [paint(fmt(r), c) for r, c in zip(rows, colours)])


def id_list(ids: Sequence[str], limit: int = 10) -> str:
    """The first ``limit`` case ids, comma-separated, then how many more."""
    return ", ".join(ids[:limit]) + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


def num(x: Any, spec: str = ".1f", none: str = "-") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


def us(x: Any) -> str:
    """Microseconds with 3-4 significant digits."""
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.2f}"


def ratio(x: Any) -> str:
    return num(x, ".2f") + ("x" if x is not None else "")


def host_text(env: dict) -> str | None:
    """The host a run had ("AMD EPYC 9654, IOMMU off, hypervisor yes"); None for a file written before
    run files described it. It sets the rate of a scattered gather (docs/perf-notes.md, 2026-12-06)."""
    if not metadata.records_host(env):
        return None
    hyp = {True: "yes", False: "no"}.get(env.get("hypervisor"), "unknown")
    return f"{env.get('cpu') or 'unknown'}, IOMMU {env.get('iommu') or 'unknown'}, hypervisor {hyp}"


def run_header(run: RunRecord) -> str:
    env = run.environment
    cfg = run.config
    where = env.get("gpu") or f"CPU ({env.get('cpu') or 'unknown'})"
    commit = str(env["git_commit"])[:12] if env.get("git_commit") else "unknown (not a git checkout)"
    lines = [
        f"run {run.run_id}  backend={run.backend}  config={cfg.get('name')} (hash {str(cfg.get('hash'))[:12]})"
        + ("  --ci" if cfg.get("ci") else ""),
        f"machine {env.get('machine')}: {where}, torch {env.get('torch')}, commit {commit}"
        f"{' (dirty)' if env.get('git_dirty') else ''}",
    ]
    pinned = run.floors.get("pinned_h2d_gbps")
    lines.append(f"pinned host->device bandwidth: {num(pinned, '.1f')} GB/s" if pinned is not None
                 else f"pinned host->device bandwidth: {run.floors.get('note') or 'n/a'}")
    host = host_text(env)
    if run.backend == "reference":
        lines.append(REFERENCE_NOTE)
    elif host:
        lines.append(f"host: {host}")
    lines += [resume_text(r) for r in run.resumes]
    return "\n".join(lines)


def resume_text(resume: Any, word: str = "resumed") -> str:
    """One --resume of the run (``word`` leads: "Resumed" starts a sentence): when, how many cases it
    timed, and what it found different (a resumed session may run on another machine start: its cases'
    ratios to the creating session's are cross-start)."""
    found = ", ".join(f"{k} {v!r}" for k, v in sorted(resume.environment.items()))
    return (f"{word} {resume.started}: {len(resume.cases)} case(s) timed then, "
            + (f"environment differs: {found}" if found else "environment as recorded"))


def cross_session(run: RunRecord, case_id: str, other: str) -> bool:
    """Whether two cases of the run were timed by different sessions of it (one of them by a resume)."""
    return bool(run.resumes) and run.session_of(case_id) != run.session_of(other)


CROSS_NOTE = ("+ across sessions: the two cases of this ratio were timed by different sessions of this resumed"
              " run (see `resumed` above), possibly on different machine starts.")


def run_table(run: RunRecord) -> str:
    # On the reference backend the gather floor is a PyTorch copy on the CPU and GB/s a CPU rate:
    # ratios of 12x-1800x and 0.0002 GB/s that say nothing about a kernel, so "-" as for the PCIe floor.
    kernel_times = run.backend != "reference"
    # the warm gather column only where the engine recorded it (floors.gather_warm_us: L = 1's gather)
    warm_col = any(axes.gather_warm_us(c.floor) for c in run.cases if c.ok)
    rows, reread, crossed = [], [], 0
    for c in run.cases:
        if not c.ok:
            continue
        cross = c.speedup is not None and cross_session(run, c.case_id, c.speedup_link.baseline)
        crossed += cross
        s, d, w = c.stats or {}, c.derived or {}, c.work or {}
        share = reread_share(w) if d.get("over_pcie_floor") is not None else None
        if share is not None:
            reread.append(share)
        warm = axes.gather_warm_us(c.floor)
        rows.append([
            c.case_id, axes.regime(c.params), us(s.get("median_us")), us(s.get("iqr_us")),
            pct(axes.relative_noise(c.summary)),
            ratio(d.get("over_pcie_floor")) + ("" if share is None else "*"),
            ratio(d.get("over_gather_floor") if kernel_times else None),
        ] + ([ratio(c.median_us / warm if warm and kernel_times else None)] if warm_col else []) + [
            num(d.get("gbps") if kernel_times else None, ".3g"),
            ratio(c.speedup) + ("+" if cross else ""),
            num(w.get("unique_misses_per_call"), ".0f"),
        ])
    if not rows:
        return "(no timed cases)"
    out = table(["case", "regime", "time/call us", "IQR us", "noise", "/PCIe floor", "/gather floor"]
                + (["/gather warm"] if warm_col else []) + ["GB/s", "speedup vs LRU", "misses/call"], rows,
                "ll" + "r" * (len(rows[0]) - 2))
    out += ("\nregime: warm = every call on one host pool (layers = 1); decode L=N = calls rotate over N "
            "per-layer host pools (translations cold). noise = IQR / median.")
    if reread:
        lo, hi = f"{min(reread):.0%}", f"{max(reread):.0%}"
        out += (f"\n* rows read more than once: the PCIe floor counts every row a call copies, but these cases"
                f" read only {lo if lo == hi else f'{lo}-{hi}'} of them as distinct host rows (requests or"
                f" layers share rows), and a re-read row need not cross the link, so the case can run under it.")
    if crossed:
        out += "\n" + CROSS_NOTE
    return out


def noisy_cases_warning(run: RunRecord, threshold: float) -> str:
    """"" or a warning naming the timed cases whose IQR / median exceeds ``threshold`` (the gate's floor
    without history): a change of that size is not resolvable on them."""
    noisy = [(c.case_id, axes.relative_noise(c.summary)) for c in run.cases if c.ok]
    noisy = [(cid, n) for cid, n in noisy if n is not None and n > threshold]
    if not noisy:
        return ""
    return (f"warning: {len(noisy)} case(s) noisier than the gate's {threshold:.1%} threshold (IQR / median): "
            + ", ".join(f"{cid} ({pct(n)})" for cid, n in noisy))


def failed_table(run: RunRecord) -> str:
    bad = [c for c in run.cases if not c.ok]
    if not bad:
        return ""
    return f"{len(bad)} case(s) not timed:\n" + "\n".join(f"  {c.status.upper()} {c.case_id}: {c.reason}" for c in bad)


def modes_text(found: Sequence[stats.Mode], fmt: Callable[[float], str] = lambda v: f"{v:,.1f} us") -> str:
    """"53.2 us x40% | 55.2 us x60%": each mode's centre (``fmt``) and share."""
    return " | ".join(f"{fmt(m.center)} x{m.fraction:.0%}" for m in found)


def bimodal_table(run: RunRecord) -> str:
    """The timed cases whose samples fall into two modes, with each mode's centre and share."""
    lines = []
    for c in run.cases:
        found = stats.modes(c.replay_us) if c.ok and c.samples_us else ()
        if found:
            lines.append(f"  {c.case_id}: " + modes_text(found))
    if not lines:
        return ""
    return (f"{len(lines)} case(s) bimodal (their median moves with the mix of the two modes; "
            "compare the mode centres):\n" + "\n".join(lines))


def _without_impl(case_id: str) -> str:
    return case_id.partition("/")[2] or case_id


EVEN_MARK = "~"
EVEN_NOTE = (f"{EVEN_MARK} not distinguishable within this run: Mann-Whitney p >= {PAIR_ALPHA:g} on the two cases' "
             "samples.")


def marked(value: str, marks: str, width: int) -> str:
    """``value`` with its marks, padded on the right to ``width`` marks, so that a right-aligned column
    keeps its decimal points in line whether or not a row is marked."""
    return value + marks + " " * (width - len(marks))


def wins(pairs: Iterable[Pair]) -> tuple[int, int, int, int]:
    """Of pairs: (faster, slower, rated, without a ratio). Faster and slower count only the pairs whose
    samples differ (``Pair.differs``); the rest of the rated ones are not distinguishable."""
    pairs = list(pairs)
    rated = [p for p in pairs if p.ratio is not None]
    return (sum(1 for p in rated if p.differs and p.ratio < 1), sum(1 for p in rated if p.differs and p.ratio > 1),
            len(rated), len(pairs) - len(rated))


def faster_of(pairs: Iterable[Pair]) -> str:
    """"3 of 5": the pairs ours wins (``wins``) of those rated."""
    faster, _, rated, _ = wins(pairs)
    return f"{faster} of {rated}"


def faster_line(pairs: Iterable[Pair], what: str = "pairs") -> str:
    """"ours faster in 3 of 5 pairs, slower in 1, not distinguishable in 1" (+ "; 1 without a ratio")."""
    faster, slower, rated, untimed = wins(pairs)
    line = f"ours faster in {faster} of {rated} {what}, slower in {slower}"
    if rated - faster - slower:
        line += f", not distinguishable in {rated - faster - slower} (p >= {PAIR_ALPHA:g})"
    if untimed:
        line += f"; {untimed} without a ratio (sglang's case not timed)"
    return line


def vs_sglang_table(run: RunRecord) -> str:
    """Our cases next to sglang's doing the same work (the engine's stored ``counterpart_link``):
    both medians and ours/sglang, marked where the samples do not tell the two apart; "" when the run has
    no such pair."""
    pairs = linked_pairs(run)  # each pair's test once, for the marks and the counts
    rows, crossed, even = [], 0, 0
    for c in run.cases:
        link = c.counterpart_link
        if link is None:
            continue
        theirs = run.case(link.case_id)
        cross = link.ratio is not None and cross_session(run, c.case_id, link.case_id)
        crossed += cross
        tie = pairs[c.case_id].tie
        even += tie
        rows.append([str(c.params.get("implementation") or c.case_id.split("/")[0]), _without_impl(c.case_id),
                     us(c.median_us), us(theirs.median_us if theirs is not None and theirs.ok else None),
                     (num(link.ratio, ".3f"), (EVEN_MARK if tie else "") + ("+" if cross else ""))])
    if not rows:
        return ""
    width = max(len(r[4][1]) for r in rows)
    rows = [r[:4] + [marked(*r[4], width)] for r in rows]
    notes = ([EVEN_NOTE] if even else []) + ([f"{CROSS_NOTE} ({crossed} pair(s))"] if crossed else [])
    return ("ours vs sglang (median time per call; ours/sglang < 1: ours faster):\n"
            + table(["ours", "case", "ours us", "sglang us", "ours/sglang"], rows, "llrrr")
            + "\n" + "\n".join(vs_sglang_counts(run, pairs) + notes))


def linked_pairs(run: RunRecord) -> dict[str, Pair]:
    """Each of our cases that the engine linked to sglang's (``counterpart_link``): case id -> its pair."""
    return {c.case_id: pair_of(run, c) for c in run.cases if c.counterpart_link is not None}


def vs_sglang_pairs(run: RunRecord, pairs: dict[str, Pair] | None = None) -> dict[str, list[Pair]]:
    """The run's pairs (``linked_pairs``, computed unless given) by regime ("decode", "warm"). A kernel
    can win every decode pair and lose warm ones, and the decode regime is the one a deployment runs in
    (README, "Two regimes"), so the counts are given per regime too."""
    pairs = linked_pairs(run) if pairs is None else pairs
    out: dict[str, list[Pair]] = {}
    for c in run.cases:
        if c.case_id in pairs:
            out.setdefault("warm" if axes.layers(c.params) == 1 else "decode", []).append(pairs[c.case_id])
    return dict(sorted(out.items()))  # decode first


def vs_sglang_counts(run: RunRecord, pairs: dict[str, Pair] | None = None) -> list[str]:
    """One line for all the pairs, then one per regime where the pairs span both; [] without a pair."""
    by_regime = vs_sglang_pairs(run, pairs)
    if not by_regime:
        return []
    lines = [faster_line([p for group in by_regime.values() for p in group])]
    if len(by_regime) > 1:
        lines += [f"  {name}: {faster_line(group)}" for name, group in by_regime.items()]
    return lines


def run_summary(run: RunRecord, noise_threshold: float = 0.05) -> str:
    """Header, the per-case table, ours vs sglang, bimodal cases, cases noisier than
    ``noise_threshold`` (the gate's floor without history), failed cases with reasons, pruned count."""
    parts = [run_header(run), "", run_table(run)]
    for extra in (vs_sglang_table(run), bimodal_table(run), noisy_cases_warning(run, noise_threshold),
                  failed_table(run)):
        if extra:
            parts += ["", extra]
    pruned = run.config.get("pruned") or []
    ok = sum(1 for c in run.cases if c.ok)
    parts += ["", f"{ok} ok, {len(run.cases) - ok} failed/skipped, {len(pruned)} pruned by the config's rules"
              + (" (see `hisparse-bench list`)" if pruned else "")]
    return "\n".join(parts)


def compare_table(verdicts: Sequence[Any], *, threshold: float, alpha: float, pairs: Sequence[Any] = ()) -> str:
    """The verdict per case, a footer of counts, and (``pairs``: ``track.compare.counterpart_ratios``)
    the ours/sglang ratio in A and in B of every pair both runs linked."""
    return _verdict_table(verdicts, threshold=threshold, alpha=alpha) + (
        "\n\n" + compare_pairs_table(pairs) if pairs else "")


def compare_pairs_table(pairs: Sequence[Any]) -> str:
    """One row per pair with a ratio on either side (kept small: pairs sglang timed in neither run
    are only counted), marked where that side's samples do not tell the kernels apart, then how often
    ours was faster in A and in B."""
    shown = [p for p in pairs if p.ratio_a is not None or p.ratio_b is not None]
    even = any(p.pair_a.tie or p.pair_b.tie for p in shown)
    rows = [[p.case_id, *(marked(num(q.ratio, ".3f"), EVEN_MARK if q.tie else "", int(even)) for q in (p.pair_a, p.pair_b))]
            for p in shown]
    untimed = len(pairs) - len(shown)

    foot = (f"ours faster in A: {faster_of(p.pair_a for p in shown)} pairs, in B: {faster_of(p.pair_b for p in shown)}"
            + (f"; {untimed} pair(s) sglang timed in neither run" if untimed else ""))
    return ("ours vs sglang (ours/sglang median, < 1: ours faster):\n"
            + (table(["ours", "A", "B"], rows) + "\n" if rows else "") + foot + ("\n" + EVEN_NOTE if even else ""))


def _verdict_table(verdicts: Sequence[Any], *, threshold: float, alpha: float) -> str:
    rows = []
    for v in verdicts:
        ci = "-" if v.ci_low is None else f"[{num(v.ci_low, '.3f')}, {num(v.ci_high, '.3f')}]"
        rows.append([v.case_id, us(v.base_median), us(v.head_median), num(v.ratio, ".3f"), ci,
                     num(v.p_value, ".2g"), v.status + (f" ({v.note})" if v.note else "")])
    if not rows:
        return "(no common cases)"
    return table(["case", "A us", "B us", "B/A", "95% CI", "p", "verdict"], rows, "lrrrrrl") + "\n" + _verdict_footer(
        verdicts, threshold=threshold, alpha=alpha)


def _verdict_footer(verdicts: Sequence[Any], *, threshold: float, alpha: float) -> str:
    counts = {k: sum(1 for v in verdicts if v.status == k) for k in ("regressed", "improved", "unchanged", "insufficient", "failed")}
    agree, rated = within(list(verdicts), threshold)
    return (f"ratio = B/A median time per call (> 1: B slower); significant: Mann-Whitney p < {alpha}; "
            f"threshold max({threshold:.1%}, 3 x within-run noise).\n" + ", ".join(f"{n} {k}" for k, n in counts.items())
            + f"; medians within {threshold:.1%}: {agree} of {rated}")


def pct(x: float | None) -> str:
    """A relative figure as a percentage: 0.0123 -> "1.2%"."""
    return "-" if x is None else f"{x * 100:.1f}%"


def _change_colour(c: Change, colour: bool) -> str | None:
    if not colour or c.verdict.status not in ("regressed", "improved", "failed"):
        return None
    return GREEN if c.verdict.status == "improved" else RED


def compare_report(rows: Sequence[Change], means: Sequence[GeoMean], *, threshold: float, alpha: float,
                   verbose: bool = False, colour: bool = False, pairs: Sequence[Any] = ()) -> str:
    """compare in pyperf's manner: the significant rows ("1.08x slower"; every row with ``verbose``),
    how many were hidden, the geometric mean of B/A per implementation, workload and regime, the
    verdict counts, and ours vs sglang in A and B. sglang's rows are marked as information."""
    shown = [c for c in rows if verbose or c.shown]
    body = []
    for c in shown:
        v = c.verdict
        ci = "-" if v.ci_low is None else f"[{num(v.ci_low, '.3f')}, {num(v.ci_high, '.3f')}]"
        body.append([c.case_id, us(v.base_median), us(v.head_median), change_words(c.ratio), ci,
                     num(c.floor_ratio, ".3f"), pct(c.noise_a), pct(c.noise_b), num(v.p_value, ".2g"),
                     v.status + ("" if c.ours else " (sglang's: information)") + (f" ({v.note})" if v.note else "")
                     + (" (floor moved)" if c.moved_with_floor else "")])
    parts = []
    if body:
        parts.append(table(["case", "A us", "B us", "change", "B/A 95% CI", "floor B/A", "noise A", "noise B", "p",
                            "verdict"], body, "lrrrrrrrrl", [_change_colour(c, colour) for c in shown]))
    hidden = len(rows) - len(shown)
    if hidden:
        parts.append(f"{hidden} case(s) hidden: not significant (-v shows them)")
    if means:
        parts.append("geometric mean of B/A:\n" + table(
            ["implementation", "workload", "regime", "cases", "B/A", "change"],
            [[m.implementation + ("" if m.ours else " (sglang)"), m.workload, m.regime, str(m.cases),
              num(m.ratio, ".3f"), change_words(m.ratio)] for m in means], "lllrrl"))
    parts.append(_verdict_footer([c.verdict for c in rows], threshold=threshold, alpha=alpha)
                 + "; floor B/A = the case's bare gather of its rows, B's over A's; noise = IQR / median of each "
                 "run's samples")
    step_footer = floor_step_footer(rows)
    if step_footer:
        parts.append(step_footer)
    if pairs:
        parts.append(compare_pairs_table(pairs))
    return "\n\n".join(parts)


def floor_step_note(step: float | None, where: str) -> str:
    """"" or what a change says when the case's own gather floor moved beyond compare's floor with it
    (``where``: "at the same commit", "between base and head")."""
    return (f"; its gather floor moved {step:.2f}x {where}: the node, the case's rows or the floor "
            "changed too, not only the kernels") if step else ""


def floor_step_footer(rows: Sequence[Change]) -> str:
    """"" or how many of the changed cases' own gather floors moved beyond compare's floor with them,
    in the direction of the change: those are read against their floor, not as the kernels' change."""
    changed = [c for c in rows if c.verdict.status in (REGRESSED, IMPROVED)]
    along = [c for c in changed if c.moved_with_floor]
    if not along:
        return ""
    return (f"{len(along)} of the {len(changed)} changed case(s) have a gather floor that moved the same way "
            "beyond the threshold (column `floor B/A`): the node or the rows moved them, at least in part")


def noisy_warning(rows: Sequence[Change], threshold: float) -> str:
    """"" or a warning naming the cases whose IQR / median exceeds ``threshold`` (the smallest change
    the verdict can resolve there is larger than the threshold says)."""
    if not rows:
        return ""
    return (f"warning: {len(rows)} case(s) noisier than the {threshold:.1%} threshold (IQR / median), a change "
            "of that size is not resolvable there: " + ", ".join(f"{c.case_id} ({pct(c.noisiest)})" for c in rows))


def gate_line(decision: Any, colour: bool = False) -> str:
    """One case of the nightly gate: its confirm status and the verdict that decided it, the change
    named as pyperf does ("1.08x slower", "1.02x faster"); red when it failed or is suspect."""
    v = decision.final
    line = (f"{decision.status:12s} {v.case_id}: {us(v.base_median)} -> {us(v.head_median)} us "
            f"({change_words(v.ratio if v.ratio is None or math.isfinite(v.ratio) else None)}, "
            f"threshold {num(v.threshold * 100 if v.threshold is not None else None, '.2f')}%, "
            f"p={num(v.p_value, '.2g')})")
    return paint(line, RED if colour and decision.status in ("confirmed", "suspect") else None)


def listing(cases: Sequence[Any], pruned: Sequence[Any]) -> str:
    """Case ids, then the pruned combinations with their reasons."""
    lines = [f"{len(cases)} case(s):"] + [f"  {c.case_id}" for c in cases]
    if pruned:
        lines.append(f"{len(pruned)} pruned:")
        lines += [f"  {_pruned_id(p)}: {p.reason}" for p in pruned]
    return "\n".join(lines)


def _pruned_id(p: Any) -> str:
    cid = getattr(p, "case_id", None)
    if cid:
        return cid
    params = getattr(p, "params", {})
    return ", ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, dict) else str(params)
