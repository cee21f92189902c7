"""`hisparse-bench check`: the stress sequences (hisparse/bench/stress.py) for every multi-step
implementation, ours and sglang's, each call checked before the next; prints the table
implementation x case -> pass or the first failure."""
from __future__ import annotations

from pathlib import Path

import click

from hisparse import env
from hisparse.files import write_json_atomic


def _earlier_results(json_out: str | None, resume: bool, backend: str, force: bool = False) -> list:
    """The cells of an earlier run to keep (``--resume``); refuses to mix backends or to overwrite
    a finished report without --resume (or --force: start it again)."""
    import json

    from hisparse.bench import stress
    from hisparse.errors import OutputPathError
    from hisparse.files import check_target

    if json_out is None:
        if resume:
            raise click.UsageError("--resume needs --json FILE (the report to continue)")
        return []
    try:
        check_target(json_out)  # a bad path fails now, not after the first cell
    except OutputPathError as e:
        raise click.UsageError(str(e)) from None
    path = Path(json_out)
    if not path.exists() or (force and not resume):
        return []
    if not resume:
        raise click.UsageError(f"--json {json_out}: the file exists; pass --resume to continue it, --force to "
                               "replace it, or another name")
    try:
        data = json.loads(path.read_text())
        report = stress.StressReport.from_dict(data)
    except (OSError, ValueError) as e:
        raise click.UsageError(f"--json {json_out}: cannot resume from it ({e})") from None
    if data.get("backend") != backend:
        raise click.UsageError(f"--json {json_out}: written by backend {data.get('backend')!r}, this run is {backend!r}")
    return [r for r in report.results if r.status != "fault"]  # a worker death is worth another try


def _resume_command(params: dict) -> str:
    """This invocation's options with --resume: a continued check must select the same cells."""
    import shlex

    words = ["hisparse-bench", "check"]
    for name, flag in (("impls", "-i"), ("steps", "--steps"), ("hots", "--hot"), ("items", "--item"),
                       ("layouts", "--layout")):
        for value in params.get(name) or ():
            words += [flag, str(value)]
    words += ["--backend", params["backend_name"], "--top-k", str(params["top_k"]), "--batch", str(params["batch"])]
    if params.get("sglang_src"):
        words += ["--sglang-src", params["sglang_src"]]
    words += ["--json", params["json_out"], "--resume"]
    return " ".join(shlex.quote(w) for w in words)


def _multi_step_names() -> list[str]:
    from hisparse.bench import implementations

    return [i.name for i in implementations.TABLE if i.multi_step]


@click.command("check")
@click.option("--implementation", "-i", "impls", multiple=True, type=click.Choice(_multi_step_names()),
              help="Multi-step implementation to stress (repeatable; default: every one, sglang's included).")
@click.option("--backend", "backend_name", type=click.Choice(["auto", "cuda", "reference"]), default="auto",
              show_default=True, help="reference: our PyTorch reference of the multi-step swap, on the CPU.")
@click.option("--steps", multiple=True, type=click.IntRange(1, 8), help="Steps (repeatable; default 2 and 4).")
@click.option("--hot", "hots", multiple=True, type=click.IntRange(2, 32768),
              help="Hot buffer sizes (repeatable; default 4096, 6144, 32768).")
@click.option("--item", "items", multiple=True, type=click.IntRange(1, 1 << 16),
              help="Item sizes in bytes (repeatable; default 576, 656, 584, 100).")
@click.option("--layout", "layouts", multiple=True, type=click.Choice(["dense", "aligned16"]),
              help="Row layout (repeatable; default both): dense = row r at r*item bytes, aligned16 = rows "
                   "padded to 16 bytes.")
@click.option("--top-k", "top_k", type=click.IntRange(1, 8192), default=2048, show_default=True)
@click.option("--batch", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the results as JSON here, after every cell (a cut run keeps what finished; "
                   "\"complete\": false until the last cell).")
@click.option("--resume", is_flag=True,
              help="With --json: keep the cells already in that file and run only the others.")
@click.option("--force", is_flag=True, help="Replace an existing --json file (otherwise refused without --resume).")
@click.option("--sglang-src", type=click.Path(exists=True, file_okay=False), default=None,
              help="sglang checkout or unpacked wheel (default: HISPARSE_SGLANG_SRC, else an installed sglang).")
@click.pass_context
def check(ctx: click.Context, impls: tuple[str, ...], backend_name: str, steps: tuple[int, ...],
          hots: tuple[int, ...], items: tuple[int, ...], layouts: tuple[str, ...], top_k: int, batch: int,
          json_out: str | None, resume: bool, force: bool, sglang_src: str | None) -> None:
    """Run the stress sequences and print implementation x case -> pass or the first failure.

    Exit status: 0 when nothing failed (pruned and skipped cells are not failures), 1 when a call
    failed its checks or a worker died, 2 on a usage error, 130 when interrupted."""
    import os

    from hisparse.bench import stress
    from hisparse.bench.backends import get_backend, resolve_name
    from hisparse.errors import HisparseError

    if sglang_src is not None:  # the environment too: sglang's cases run in a spawned worker
        env.SGLANG_SRC = os.environ["HISPARSE_SGLANG_SRC"] = str(Path(sglang_src).resolve())
    try:
        backend = get_backend(resolve_name(backend_name))
    except HisparseError as e:
        raise click.UsageError(str(e)) from e
    cases = [stress.StressCase(s, h, i, layout, top_k=top_k, batch=batch)
             for s in (steps or stress.STEPS) for h in (hots or stress.HOT_SIZES)
             for i in (items or stress.ITEM_SIZES) for layout in (layouts or stress.LAYOUTS)]
    names = tuple(impls) or stress.multi_step_implementations()
    done = _earlier_results(json_out, resume, backend.name, force)
    click.echo(f"{len(names)} implementation(s) x {len(cases)} stress case(s) on backend {backend.name}"
               + (f"; {len(done)} cell(s) kept from {json_out}" if done else ""))
    report = stress.StressReport(list(done))

    def progress(r: stress.StressResult) -> None:
        click.echo(f"  {r.implementation} {r.case_id}: {r.cell}")
        if json_out is not None:  # run_all has appended r to report already
            write_json_atomic(json_out, {"backend": backend.name, "complete": False, **report.to_dict()})

    try:
        stress.run_all(names, cases, backend, progress=progress, report=report)
    except KeyboardInterrupt:  # exit 130, not 1 ("a check failed")
        click.echo(f"\nInterrupted after {len(report.results)} cell(s). " + (
            f"Finished cells are in {json_out}; continue with:\n  {_resume_command(ctx.params)}"
            if json_out is not None else
            "Nothing was kept: pass --json FILE to keep finished cells, then --resume to continue."), err=True)
        ctx.exit(130)
    click.echo("")
    click.echo(report.table())
    if json_out is not None:
        write_json_atomic(json_out, {"backend": backend.name, "complete": True, **report.to_dict()})
        click.echo(f"\nresults: {json_out}")
    ctx.exit(1 if report.failed else 0)
