"""`hisparse-bench list`: the cases a config expands to, and the pruned combinations with reasons."""
from __future__ import annotations

import click


@click.command("list")
@click.argument("config", required=False)
@click.option("--ci", is_flag=True, help="Use the config's reduced CI grid.")
@click.option("--filter", "filters", multiple=True, metavar="EXPR", help="Keep only matching cases (repeatable).")
@click.option("--view", default=None, metavar="NAME", help="Keep only the cases of the config's named view (`views:`).")
def list_cases(config: str | None, ci: bool, filters: tuple[str, ...], view: str | None) -> None:
    """List the cases of CONFIG (a name under configs/ or a YAML path; default: what `run` picks,
    "default" on a GPU and "cpu-small" without one)."""
    from hisparse.bench.backends import resolve_name
    from hisparse.bench.config import load_config
    from hisparse.bench.session import default_config
    from hisparse.errors import HisparseError
    from hisparse.render import text

    if config is None:
        config = default_config(resolve_name("auto"))
        click.echo(f"config {config} (what `run` picks here; name one to list another)")
    try:
        cfg = load_config(config)
        expansion = cfg.expand(ci=ci, filters=cfg.selection(view, filters))
    except HisparseError as e:
        raise click.UsageError(str(e)) from e  # exit 2: a bad config is a usage error
    click.echo(text.listing(expansion.cases, expansion.pruned))
    if not view and cfg.views:
        click.echo(f"views (--view NAME): {', '.join(cfg.views)}")
