"""`hisparse-bench history A..B`: measure each commit of a range with its own tree's kernels and harness."""
from __future__ import annotations

from pathlib import Path

import click


@click.command("history")
@click.argument("revisions", default="HEAD")
@click.option("--max", "max_count", type=click.IntRange(min=1), default=None,
              help="Measure at most N commits (the newest not yet measured).")
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default="results", show_default=True,
              help="Results root: run files go to RESULTS/runs, asv results to RESULTS/asv.")
@click.option("--config", default="configs/ci.yaml", show_default=True,
              help="Config path inside each commit's tree (run with --ci).")
@click.option("--machine", default=None, help="Machine name (default HISPARSE_MACHINE, else the hostname).")
@click.option("--python", "python", default=None, help="Interpreter that runs each tree (default: this one).")
@click.option("--repo", type=click.Path(file_okay=False, exists=True), default=".", show_default=True,
              help="The git repository.")
@click.option("--worktree-dir", type=click.Path(file_okay=False), default=None,
              help="Where worktrees are made (default HISPARSE_WORKTREE_DIR or <repo>/.cache/hisparse/worktrees).")
@click.option("--keep-worktrees", is_flag=True, help="Keep each commit's worktree after measuring it.")
@click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds allowed per commit.")
@click.option("--asv/--no-asv", "convert_asv", default=True, show_default=True,
              help="Also write asv results (RESULTS/asv).")
@click.pass_context
def history(ctx: click.Context, revisions: str, max_count: int | None, results_dir: str, config: str,
            machine: str | None, python: str | None, repo: str, worktree_dir: str | None, keep_worktrees: bool,
            timeout_s: float | None, convert_asv: bool) -> None:
    """Measure REVISIONS (A..B, or one commit; default HEAD): a git worktree per commit, that tree's
    `python -m hisparse run CONFIG --ci`, results recorded under the commit's hash. Commits already
    measured on this machine are skipped, and so are trees without a runnable harness.

    Exit status: 0 when no commit failed, 1 when one did, 2 on a usage error."""
    from hisparse.track import history as hist
    from hisparse.errors import HisparseError

    machine = hist.machine_name(machine)

    def report(o: hist.CommitOutcome) -> None:
        line = f"{o.commit[:12]}  {o.status}"
        if o.reason:
            line += f": {o.reason}"
        for p in o.run_files + o.asv_files:
            line += f"\n    {p}"
        click.echo(line, err=o.status == "failed")

    click.echo(f"machine {machine}; results in {results_dir}")
    try:
        outcomes = hist.measure_history(
            repo, revisions, results_dir=results_dir, machine=machine, config=config, max_count=max_count,
            runner=hist.subprocess_runner(python, timeout_s=timeout_s),
            worktree_root=Path(worktree_dir) if worktree_dir else None, keep_worktrees=keep_worktrees,
            convert_asv=convert_asv, on_commit=report,
        )
    except HisparseError as e:
        raise click.UsageError(str(e)) from e
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    click.echo(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no commits")
    ctx.exit(1 if counts.get("failed") else 0)
