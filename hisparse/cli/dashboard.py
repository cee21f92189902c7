"""`hisparse-bench dashboard`: a self-contained static site of the per-commit history."""
from __future__ import annotations

from pathlib import Path

import click


def _git_repo(path: str) -> str | None:
    from hisparse.gitutil import git_or_none  # noqa: PLC0415  (lazy, like every command's imports)

    out = git_or_none(path, "rev-parse", "--show-toplevel")
    return (out.strip() or None) if out is not None else None


def _subjects(repo: str | None, history) -> dict[str, str]:
    """commit -> its subject line, for the commit pages ({} without git)."""
    from hisparse.gitutil import git_or_none  # noqa: PLC0415

    out = {}
    for commit in {r.commit for r in history.runs if r.commit}:
        line = git_or_none(repo, "log", "-1", "--format=%s", commit) if repo else None
        if line and line.strip():
            out[commit] = line.strip()
    return out


@click.command("dashboard")
@click.option("--results", "results_dir", type=click.Path(file_okay=False, exists=True), default="results",
              show_default=True, help="Results root (its runs/ holds the run files).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="site", show_default=True,
              help="Output directory; open OUT/index.html (works offline, from file://).")
@click.option("--repo", default=".", show_default=True,
              help="Git repository used to order commits by committer date (else by run time).")
@click.option("--machine", default=None, help="Only runs of this machine.")
@click.option("--plots/--no-plots", "make_plots", default=True, show_default=True,
              help="Draw a run's plots when the run file has none next to it.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a regression change point is detected.")
@click.option("--force", is_flag=True, help="Write into an OUT folder that is not empty (its files are replaced).")
@click.pass_context
def dashboard(ctx: click.Context, results_dir: str, out_dir: str, repo: str, machine: str | None,
              make_plots: bool, fail_on_regression: bool, force: bool) -> None:
    """Write the dashboard: benchmarks with sparklines, a trend page per benchmark (median, IQR band,
    change points), a page per commit (summary table and plots), and the regressions page. A run file
    that cannot be read is skipped with its reason; the others are built.

    Exit status: 0 built, 1 a regression with --fail-on-regression, 2 on a usage error."""
    from hisparse.errors import HisparseError
    from hisparse.files import check_output_dir, same_file
    from hisparse.render.dashboard import build_site, node_note
    from hisparse.track.series import load_history

    try:
        if same_file(out_dir, results_dir) or Path(results_dir).resolve().is_relative_to(Path(out_dir).resolve()):
            raise click.UsageError(f"--out {out_dir} holds the results it reads (--results {results_dir}): "
                                   "choose another folder")
        check_output_dir(out_dir, force=force)
    except HisparseError as e:
        raise click.UsageError(str(e)) from e

    # track detects the change points, render only draws them
    history = load_history(results_dir, repo=_git_repo(repo), machine=machine)
    site = build_site(history, out_dir, make_plots=make_plots, subjects=_subjects(_git_repo(repo), history))
    for path, reason in history.skipped:
        click.echo(f"skipped {path}: {reason}", err=True)
    regressions = history.regressions
    for t, c in regressions:
        click.echo(f"regression: {t.key} at {t.series.points[c.index].commit[:12]}: "
                   f"{c.before_median:.4g} -> {c.after_median:.4g} us ({c.change * 100:+.2f}%)"
                   + node_note(t.gather_floor_step(c)))
    click.echo(f"{len(history.tracked)} benchmark(s), {len(site.pages)} page(s): {Path(out_dir) / 'index.html'}")
    ctx.exit(1 if fail_on_regression and regressions else 0)
