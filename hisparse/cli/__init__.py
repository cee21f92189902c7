"""The `hisparse-bench` command line. Each subcommand lives in its own module under
hisparse/cli/ and is registered here; this is the only layer that prints and sets exit codes."""
from __future__ import annotations

import importlib
import importlib.util

import click

# (command name, module under hisparse.cli, attribute). Imported lazily so `--help` stays fast
# and a missing optional piece (e.g. matplotlib for plot) breaks only its own command.
_COMMANDS = (
    ("run", "run", "run"),
    ("retime", "retime", "retime"),
    ("list", "listing", "list_cases"),
    ("build", "build", "build"),
    ("compare", "compare", "compare"),
    ("gate", "gate", "gate"),
    ("plot", "plot", "plot"),
    ("report", "report", "report"),
    ("env", "envinfo", "env"),
    ("history", "history", "history"),
    ("dashboard", "dashboard", "dashboard"),
    ("wheelhouse", "wheelhouse", "wheelhouse"),
    ("check", "check", "check"),
    ("export", "export", "export"),
)


class _UsageError(click.ClickException):
    exit_code = 2  # every command reserves 1 (and 4) for failed cases or regressions


class _LazyGroup(click.Group):
    def invoke(self, ctx: click.Context):
        """A bad path, config or run file that reaches here, from any command, is a usage error with its
        message (the path and the way out), not a traceback with exit 1, which means "a case failed"."""
        from hisparse.errors import ConfigError, OutputPathError, ResultFormatError

        try:
            return super().invoke(ctx)
        except (OutputPathError, ConfigError, ResultFormatError) as e:
            raise _UsageError(str(e)) from e

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, mod, _ in _COMMANDS if _module_exists(mod)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for name, mod, attr in _COMMANDS:
            if name == cmd_name and _module_exists(mod):
                return getattr(importlib.import_module(f"hisparse.cli.{mod}"), attr)
        return None


def _module_exists(mod: str) -> bool:
    return importlib.util.find_spec(f"hisparse.cli.{mod}") is not None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hisparse-bench")
def main() -> None:
    """Benchmark and regression-track HiSparse KV-cache swap kernels.

    \b
    Typical use:
      hisparse-bench run                 # default config (CPU reference backend without a GPU)
      hisparse-bench run configs/ci.yaml --ci
      hisparse-bench compare results/runs/A.json results/runs/B.json
    """


if __name__ == "__main__":
    main()
