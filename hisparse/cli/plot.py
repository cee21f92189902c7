"""`hisparse-bench plot`: PNG figures of a run file."""
from __future__ import annotations

from pathlib import Path

import click


@click.command("plot")
@click.argument("run_file", metavar="RUN", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the PNGs (default: next to RUN, in a folder named after it).")
@click.option("--force", is_flag=True, help="Replace PNGs already in the folder (otherwise refused).")
def plot(run_file: str, out_dir: str | None, force: bool) -> None:
    """Draw the figures of RUN.

    Exit status: 0 drawn (or nothing to draw), 2 on a usage error (unreadable RUN, a folder that
    cannot be written or already holds PNGs without --force)."""
    from hisparse.errors import HisparseError
    from hisparse.files import check_output_dir
    from hisparse.render.plots import plot_run
    from hisparse.results.model import load_run

    out = Path(out_dir) if out_dir else Path(run_file).with_suffix("")
    try:
        record = load_run(run_file)
        check_output_dir(out, force=force, pattern="*.png")
    except HisparseError as e:
        raise click.UsageError(str(e)) from e
    paths = plot_run(_linked(record), out)
    if not paths:
        click.echo("no figures: the run has no timed cases")
    for p in paths:
        click.echo(str(p))


def _linked(record):
    """``record`` with the engine's sglang counterpart links (files written before
    ``counterpart_link`` existed have none, and render reads only stored links); the file itself is
    left as it is. Without the engine's dependencies (torch) the record is drawn as stored."""
    try:
        from hisparse.bench.measure import link_counterparts  # noqa: PLC0415
    except ImportError:
        return record
    return link_counterparts(record)
