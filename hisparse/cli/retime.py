"""`hisparse-bench retime RUN`: add this process's timing rounds to every ok case of a finished run
(what `run --processes N` does N-1 times; see hisparse/bench/retime.py)."""
from __future__ import annotations

import click


@click.command("retime")
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--backend", "backend_name", type=click.Choice(["auto", "cuda", "reference"]), default="auto",
              show_default=True, help="Must be the backend the run used.")
@click.pass_context
def retime(ctx: click.Context, run_file: str, backend_name: str) -> None:
    """Time every ok case of RUN_FILE again in this process (``timing.rounds`` rounds each, no checks)
    and merge the samples into the file, which is rewritten after every case.

    Exit status: 0 when every case was retimed, 1 when one failed (its reason is in
    ``timing.retime_errors``; its earlier samples are kept), 2 on a usage error, 130 when interrupted
    (the cases not retimed say so in ``retime_errors``)."""
    from hisparse.bench import retime as repeat
    from hisparse.bench.backends import get_backend, resolve_name
    from hisparse.errors import HisparseError

    retimed = []
    try:
        backend = get_backend(resolve_name(backend_name))
        before = {c.case_id: len(c.timing.get("retime_errors") or []) for c in repeat.load_run(run_file).cases if c.ok}
        failed = 0
        with click.progressbar(length=len(before), label="retime", show_pos=True) as bar:
            for case_id, merged in repeat.retime_run(run_file, backend):
                failed += len(merged.timing.get("retime_errors") or []) > before.get(case_id, 0)
                retimed.append(case_id)
                bar.update(1)
    except HisparseError as e:
        raise click.UsageError(str(e)) from e
    except KeyboardInterrupt:  # not exit 1, which means a case failed
        click.echo(f"\nInterrupted: {len(retimed)} of {len(before)} case(s) got this process's rounds; the others "
                   f"say so in their retime_errors (\"{repeat.INTERRUPTED}\"). {run_file} is whole: use it as it is, "
                   f"or add a full process to every case with:\n  hisparse-bench retime {run_file}", err=True)
        ctx.exit(130)
    click.echo(f"{run_file}: retimed, {failed} case(s) failed")
    ctx.exit(1 if failed else 0)
