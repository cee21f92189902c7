"""`hisparse-bench compare`: the regression policy (docs/regression.md) on two runs, without history and
without a confirming re-run, printed as pyperf's compare_to does ("1.08x slower", significant rows only
unless -v, geometric means). Exit 0 no regression; 1 a regression (or a case that A timed and B failed)
in this project's implementations (sglang's too with --judge-sglang); 2 the runs cannot be compared:
unreadable, no case in common, or incomparable (another backend, GPU or config) unless
--allow-incomparable."""
from __future__ import annotations

import click


@click.command("compare")
@click.argument("run_a", type=click.Path(exists=True, dir_okay=False))
@click.argument("run_b", type=click.Path(exists=True, dir_okay=False))
@click.option("--threshold", type=float, default=0.05, show_default=True,
              help="Floor of the relative median change that counts (raised by 3x the within-run noise).")
@click.option("--alpha", type=float, default=0.01, show_default=True,
              help="Significance level of the Mann-Whitney U test on the raw samples.")
@click.option("--allow-incomparable", is_flag=True, help="Compare runs of different backend, GPU or config.")
@click.option("-v", "--verbose", is_flag=True, help="Also list the cases whose change is not significant.")
@click.option("--sort", type=click.Choice(["case", "change"]), default="case", show_default=True,
              help="Row order: run A's case order, or the most slowed first.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write every row and geometric mean as JSON to this file ('-': stdout, nothing else printed).")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write every row as CSV to this file ('-': stdout, nothing else printed).")
@click.option("--force", is_flag=True, help="Replace an existing --json / --csv file.")
@click.option("--judge-sglang", is_flag=True,
              help="Let sglang's cases decide the exit status too (by default their changes are information).")
@click.pass_context
def compare(ctx: click.Context, run_a: str, run_b: str, threshold: float, alpha: float,
            allow_incomparable: bool, verbose: bool, sort: str, json_out: str | None, csv_out: str | None,
            judge_sglang: bool, force: bool) -> None:
    """Compare RUN_B against RUN_A (ratio = B/A; > 1 means B is slower)."""
    from hisparse.cli._style import use_colour
    from hisparse.track import changes as ch
    from hisparse.track import compare as cmp
    from hisparse.errors import HisparseError
    from hisparse.render import text
    from hisparse.results.model import load_run

    from hisparse.files import check_new_output

    try:
        for option, out in (("--json", json_out), ("--csv", csv_out)):
            if out and out != "-":
                check_new_output(out, force=force, inputs=(run_a, run_b), option=option)
        a, b = load_run(run_a), load_run(run_b)
        verdicts = cmp.compare(a, b, threshold=threshold, alpha=alpha)
    except (HisparseError, ValueError) as e:
        _fail(ctx, str(e))
    reasons = cmp.incomparable(a, b)
    if reasons and not allow_incomparable:
        _fail(ctx, "incomparable runs: " + "; ".join(reasons) + " (--allow-incomparable to compare anyway)")
    if not verdicts:
        _fail(ctx, f"no common cases: {a.run_id} and {b.run_id} share no case id")
    for w in [f"runs differ in {r}" for r in reasons] + cmp.node_warnings(a, b) + cmp.resume_warnings(a, b):
        click.echo(f"warning: {w}", err=True)
    only_a, only_b = cmp.only_in(a, b)
    rows = ch.sort_changes(ch.changes(verdicts, a, b), sort)
    means = ch.geometric_means(rows)
    _export(json_out, csv_out, rows, means, a, b)
    if "-" not in (json_out, csv_out):
        colour = use_colour()
        click.echo(f"A: {a.run_id}\nB: {b.run_id}")
        click.echo(text.compare_report(rows, means, threshold=threshold, alpha=alpha, verbose=verbose, colour=colour,
                                       pairs=cmp.counterpart_ratios(a, b)))
        if only_a or only_b:
            click.echo(f"{len(only_a)} case(s) only in A, {len(only_b)} only in B (not compared)")
            for side, ids in (("only in A (missing in B)", only_a), ("only in B (missing in A)", only_b)):
                if ids:
                    click.echo(f"  {side}: {text.id_list(ids)}")
        warning = text.noisy_warning(ch.noisy(rows, threshold), threshold)
        if warning:
            click.echo(warning, err=True)
    judged = ch.judged(rows, all_implementations=judge_sglang)
    regressed = [c.case_id for c in judged if c.verdict.regressed]
    with_floor = sum(c.verdict.regressed and c.moved_with_floor for c in judged)
    broken = [c.case_id for c in judged if c.verdict.newly_failed]
    info = [c.case_id for c in rows if not (c.ours or judge_sglang) and (c.verdict.regressed or c.verdict.newly_failed)]
    if "-" not in (json_out, csv_out):
        if regressed:
            click.echo(f"REGRESSION: {len(regressed)} case(s) slower beyond the threshold"
                       + (f" ({with_floor} with their own gather floor: `floor B/A`)" if with_floor else "")
                       + ": " + ", ".join(regressed))
        if broken:
            click.echo(f"FAILED IN B: {len(broken)} case(s) timed in A fail in B: " + ", ".join(broken))
        if info:
            click.echo(f"information: {len(info)} of sglang's case(s) slower or failed in B (not judged; "
                       "--judge-sglang to judge them): " + ", ".join(info))
    ctx.exit(1 if regressed or broken else 0)


def _export(json_out: str | None, csv_out: str | None, rows, means, a, b) -> None:
    """The --json / --csv files ('-': stdout)."""
    import csv
    import io
    import json

    from hisparse.track import changes as ch

    if json_out:
        doc = {"a": a.run_id, "b": b.run_id, "ratio": "B/A median time per call",
               "cases": [r.to_dict() for r in rows], "geometric_means": [m.to_dict() for m in means]}
        _write(json_out, json.dumps(doc, indent=1) + "\n")
    if csv_out:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=ch.CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r.to_dict())
        _write(csv_out, buf.getvalue())


def _write(path: str, content: str) -> None:
    if path == "-":
        click.echo(content, nl=False)
        return
    from hisparse.files import write_atomic

    write_atomic(path, content)


def _fail(ctx: click.Context, message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    ctx.exit(2)  # not click's exit 1: 1 means a regression
