"""`hisparse-bench compare`: per-case A/B verdicts; exit code 1 on any regression beyond the
threshold (or a case that A timed and B failed)."""
from __future__ import annotations

import click


@click.command("compare")
@click.argument("run_a", type=click.Path(exists=True, dir_okay=False))
@click.argument("run_b", type=click.Path(exists=True, dir_okay=False))
@click.option("--threshold", type=float, default=0.05, show_default=True,
              help="Minimum relative slowdown of the median that counts as a regression.")
@click.option("--alpha", type=float, default=0.01, show_default=True,
              help="Significance level of the Mann-Whitney U test on the raw samples.")
@click.pass_context
def compare(ctx: click.Context, run_a: str, run_b: str, threshold: float, alpha: float) -> None:
    """Compare RUN_B against RUN_A (ratio = B/A; > 1 means B is slower)."""
    from hisparse.track import compare as cmp
    from hisparse.errors import HisparseError
    from hisparse.render import text
    from hisparse.results.model import load_run

    try:
        a, b = load_run(run_a), load_run(run_b)
        verdicts = cmp.compare(a, b, threshold=threshold, alpha=alpha)
    except (HisparseError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    for w in cmp.comparability_warnings(a, b):
        click.echo(f"warning: runs differ in {w}", err=True)
    only_a, only_b = cmp.only_in(a, b)
    click.echo(f"A: {a.run_id}\nB: {b.run_id}")
    click.echo(text.compare_table(verdicts, threshold=threshold, alpha=alpha))
    if only_a or only_b:
        click.echo(f"{len(only_a)} case(s) only in A, {len(only_b)} only in B (not compared)")
    regressed = [v.case_id for v in verdicts if v.regressed]
    broken = [v.case_id for v in verdicts if v.newly_failed]
    if regressed:
        click.echo(f"REGRESSION: {len(regressed)} case(s) slower by more than {threshold:.1%}: " + ", ".join(regressed))
    if broken:
        click.echo(f"FAILED IN B: {len(broken)} case(s) timed in A fail in B: " + ", ".join(broken))
    ctx.exit(1 if regressed or broken else 0)
