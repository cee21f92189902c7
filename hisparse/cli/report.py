"""`hisparse-bench report`: Markdown result tables from run files (docs/benchmarks-h200.md, README)."""
from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run_files", metavar="RUN...", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the whole document here (default: print it).")
@click.option("--readme", "readme", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Rewrite the block between <!-- report:begin --> and <!-- report:end --> in this "
                   "file with each run's main grid, and the one between <!-- example:begin --> and "
                   "<!-- example:end -->, where the file has it, with six rows of the first run's table.")
def report(run_files: tuple[str, ...], out: str | None, readme: str | None) -> None:
    """Tables of RUN... (each table names its run file, commit, date and machine).

    \b
      hisparse-bench report results/runs/A_default.json results/runs/B_vs-sglang.json --out docs/benchmarks-h200.md
      hisparse-bench report results/runs/A_default.json --readme README.md
    """
    from hisparse.errors import HisparseError
    from hisparse.files import write_atomic
    from hisparse.render.report import (EXAMPLE_BEGIN, EXAMPLE_END, Named, document, example_block, readme_block,
                                        replace_block)
    from hisparse.results.model import load_run

    try:
        runs = [Named(_shown_path(p), load_run(p)) for p in run_files]
    except HisparseError as e:
        raise click.ClickException(str(e)) from e
    if readme:
        path = Path(readme)
        try:
            text = replace_block(path.read_text(), readme_block(runs))
            example = EXAMPLE_BEGIN in text  # the sample of `run`'s table, from the same run as the results
            if example:
                text = replace_block(text, example_block(runs[0]), EXAMPLE_BEGIN, EXAMPLE_END)
            write_atomic(path, text)
        except ValueError as e:
            raise click.ClickException(f"{readme}: {e}") from e
        click.echo(f"rewrote the report {'and example blocks' if example else 'block'} of {readme}")
    if out:
        write_atomic(out, document(runs))
        click.echo(f"wrote {out}")
    if not out and not readme:
        click.echo(document(runs), nl=False)


def _shown_path(path: str) -> str:
    """The path as the docs should name it: relative to the current directory when inside it."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
