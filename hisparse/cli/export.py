"""`hisparse-bench export RUN [--csv OUT]`: a run file as CSV, one column per axis (results/export.py)."""
from __future__ import annotations

import click


@click.command("export")
@click.argument("run_file", metavar="RUN", type=click.Path(exists=True, dir_okay=False))
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, allow_dash=True), default="-", show_default=True,
              help="Where to write the CSV ('-': stdout).")
def export(run_file: str, csv_out: str) -> None:
    """Write RUN as CSV: one row per case, one column per axis, then the figures."""
    from hisparse.errors import HisparseError
    from hisparse.files import write_atomic
    from hisparse.results.export import to_csv
    from hisparse.results.model import load_run

    try:
        content = to_csv(load_run(run_file))
    except HisparseError as e:
        raise click.ClickException(str(e)) from e
    if csv_out == "-":
        click.echo(content, nl=False)
    else:
        write_atomic(csv_out, content)
