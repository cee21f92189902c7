"""`hisparse-bench compare`: the regression policy (docs/regression.md) on two runs, without history and
without a confirming re-run. Exit 0 no regression; 1 a regression (or a case that A timed and B failed);
2 the runs cannot be compared: unreadable, no case in common, or incomparable (another backend, GPU or
config) unless --allow-incomparable."""
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
@click.pass_context
def compare(ctx: click.Context, run_a: str, run_b: str, threshold: float, alpha: float,
            allow_incomparable: bool) -> None:
    """Compare RUN_B against RUN_A (ratio = B/A; > 1 means B is slower)."""
    from hisparse.track import compare as cmp
    from hisparse.errors import HisparseError
    from hisparse.render import text
    from hisparse.results.model import load_run

    try:
        a, b = load_run(run_a), load_run(run_b)
        verdicts = cmp.compare(a, b, threshold=threshold, alpha=alpha)
    except (HisparseError, ValueError) as e:
        _fail(ctx, str(e))
    reasons = cmp.incomparable(a, b)
    if reasons and not allow_incomparable:
        _fail(ctx, "incomparable runs: " + "; ".join(reasons) + " (--allow-incomparable to compare anyway)")
    if not verdicts:
        _fail(ctx, f"no common cases: {a.run_id} and {b.run_id} share no case id")
    for w in reasons + cmp.comparability_warnings(a, b):
        click.echo(f"warning: runs differ in {w}", err=True)
    only_a, only_b = cmp.only_in(a, b)
    click.echo(f"A: {a.run_id}\nB: {b.run_id}")
    click.echo(text.compare_table(verdicts, threshold=threshold, alpha=alpha, pairs=cmp.counterpart_ratios(a, b)))
    if only_a or only_b:
        click.echo(f"{len(only_a)} case(s) only in A, {len(only_b)} only in B (not compared)")
        for side, ids in (("only in A (missing in B)", only_a), ("only in B (missing in A)", only_b)):
            if ids:
                click.echo(f"  {side}: " + ", ".join(ids[:10]) + (f", ... ({len(ids) - 10} more)" if len(ids) > 10 else ""))
    regressed = [v.case_id for v in verdicts if v.regressed]
    broken = [v.case_id for v in verdicts if v.newly_failed]
    if regressed:
        click.echo(f"REGRESSION: {len(regressed)} case(s) slower beyond the threshold: " + ", ".join(regressed))
    if broken:
        click.echo(f"FAILED IN B: {len(broken)} case(s) timed in A fail in B: " + ", ".join(broken))
    ctx.exit(1 if regressed or broken else 0)


def _fail(ctx: click.Context, message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    ctx.exit(2)  # not click's exit 1: 1 means a regression
