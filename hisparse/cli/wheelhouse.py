"""`hisparse-bench wheelhouse DIR [--python-version 3.12] [--platform TAG ...] [--no-self]`: on a connected
machine, collect what an offline GPU node needs (pinned wheels + a wheel of this tree) and an install.sh.
The logic lives in hisparse/cli/wheelhouse_build.py."""
from __future__ import annotations

from pathlib import Path

import click

from hisparse.cli import wheelhouse_build as wh
from hisparse.errors import HisparseError


def _python_version(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        return wh.check_python_version(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e


def _platforms(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    try:
        return tuple(wh.check_platform(v) for v in value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e


@click.command("wheelhouse")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--python-version", default=wh.DEFAULT_PYTHON_VERSION, show_default=True, metavar="X.Y",
              callback=_python_version, help="The node's Python (MAJOR.MINOR): wheels are picked for CPython X.Y.")
@click.option("--platform", "platforms", multiple=True, metavar="TAG", callback=_platforms,
              help="Wheel platform tag the node accepts (repeatable; default: "
                   f"{', '.join(wh.DEFAULT_PLATFORMS)}).")
@click.option("--no-self", is_flag=True, help="Leave out the wheel of this source tree (pinned dependencies only).")
@click.option("--with-sglang", "sglang", metavar="VERSION", default=None,
              help="Also carry sglang's wheel of VERSION (no dependencies) and msgspec, for the sglang_* "
                   "implementations; install.sh unpacks it and prints HISPARSE_SGLANG_SRC.")
def wheelhouse(directory: Path, python_version: str, platforms: tuple[str, ...], no_self: bool,
               sglang: str | None) -> None:
    """Build a wheelhouse in DIR for an offline GPU node.

    \b
    Downloads (pip download --no-deps --only-binary=:all:, for CPython X.Y on the given platforms):
      - the dependencies pyproject.toml pins with == (apache-tvm-ffi, asv, asv-runner),
      - what asv needs at runtime on the node (json5, pympler, importlib-metadata<9);
    builds a wheel of this tree (unless --no-self) and writes DIR/install.sh. On the node:

    \b
      eval "$(bash DIR/install.sh)"      # into /tmp/site (TARGET=...), sets PYTHONPATH and PATH
      TARGET=env bash DIR/install.sh     # or into the current Python environment

    torch, numpy, click, matplotlib and pyyaml are not included: the node's own are used.
    With --with-sglang VERSION, DIR/sglang/ holds sglang's wheel; install.sh unpacks it to
    DIR/sglang-src and prints HISPARSE_SGLANG_SRC for the sglang_* implementations.
    """
    platforms = platforms or wh.DEFAULT_PLATFORMS
    click.echo(f"hisparse-bench wheelhouse: CPython {python_version}, platforms {', '.join(platforms)} -> {directory}")
    try:
        report = wh.build(directory, python_version, platforms, self_wheel=not no_self, echo=click.echo, sglang=sglang)
    except HisparseError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"\n{len(report.wheels)} wheel(s) in {report.dest}:")
    for name in report.wheels:
        click.echo(f"  {name}")
    click.echo(f"\nwrote {report.install_script}. Copy {report.dest} to the node, then:\n"
               f"  eval \"$(bash {directory}/{report.install_script.name})\"   "
               "# offline install into /tmp/site; TARGET=env for the current environment")
