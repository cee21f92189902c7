"""`hisparse-bench plot`: PNG figures of a run file."""
from __future__ import annotations

from pathlib import Path

import click


@click.command("plot")
@click.argument("run_file", metavar="RUN", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the PNGs (default: next to RUN, in a folder named after it).")
def plot(run_file: str, out_dir: str | None) -> None:
    """Draw the figures of RUN."""
    from hisparse.errors import HisparseError
    from hisparse.render.plots import plot_run
    from hisparse.results.model import load_run

    try:
        record = load_run(run_file)
    except HisparseError as e:
        raise click.ClickException(str(e)) from e
    paths = plot_run(_linked(record), Path(out_dir) if out_dir else Path(run_file).with_suffix(""))
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
