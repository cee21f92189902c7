"""`hisparse-bench run`: check and time every case of a sweep config, write the run file after every
case, print the summary table, and draw the plots."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

import click

from hisparse import env


class _UsageFailure(click.ClickException):
    exit_code = 2


@click.command("run")
@click.argument("config", required=False)
@click.option("--ci", is_flag=True, help="Use the config's reduced CI grid.")
@click.option("--filter", "filters", multiple=True, metavar="EXPR",
              help="Keep only matching cases (repeatable; syntax of `hisparse-bench list`).")
@click.option("--view", default=None, metavar="NAME",
              help="Keep only the cases of the config's named view (its `views:`; with --filter, both apply).")
@click.option("--out", type=click.Path(), default=None,
              help="Output directory or a .json file path (default: results/runs on a GPU, the git-ignored "
                   "results/local on the reference backend).")
@click.option("--force", is_flag=True, help="Overwrite an existing run file (otherwise refused).")
@click.option("--resume", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Continue an interrupted run file: its finished cases are skipped.")
@click.option("--backend", "backend_name", type=click.Choice(["auto", "cuda", "reference"]), default="auto",
              show_default=True, help="auto = cuda when a GPU is visible, else the PyTorch reference on the CPU.")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Write PNG figures next to the run file.")
@click.option("--processes", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Then time every case again in N-1 fresh processes (`hisparse-bench retime`), samples pooled: "
                   "for effects fixed per process that rounds cannot average.")
@click.option("--sglang-src", type=click.Path(exists=True, file_okay=False), default=None,
              help="sglang checkout or unpacked wheel whose kernels the sglang_* implementations run "
                   "(default: HISPARSE_SGLANG_SRC, else an installed sglang).")
@click.pass_context
def run(ctx: click.Context, config: str | None, ci: bool, filters: tuple[str, ...], view: str | None, out: str | None,
        force: bool, resume: str | None, backend_name: str, plots: bool, processes: int, sglang_src: str | None) -> None:
    """Run the sweep CONFIG (a name under configs/ or a YAML path; default "default", or
    "cpu-small" when no GPU is available).

    Exit status: 0 when every case passed, 1 when one failed, 2 on a usage error (also: nothing to
    time, or the run file exists), 130 when interrupted, 143 on SIGTERM (both keep finished cases)."""
    from hisparse.bench import session as sweep
    from hisparse.errors import HisparseError
    from hisparse.render import text

    if sglang_src is not None:  # the environment too: sglang's cases run in a spawned worker
        env.SGLANG_SRC = os.environ["HISPARSE_SGLANG_SRC"] = str(Path(sglang_src).resolve())
    if resume is not None and processes > 1:
        raise _UsageFailure("--processes cannot be combined with --resume (it would retime the finished cases "
                            "again): resume, then run `hisparse-bench retime FILE` once per missing process")
    request = sweep.RunRequest(config=config, ci=ci, filters=filters, view=view, out=out, resume=resume,
                               backend=backend_name, force=force)
    try:
        session = sweep.prepare(request, say=click.echo)
    except HisparseError as e:
        raise _UsageFailure(str(e)) from e
    _announce(session)
    try:
        with _sigterm_as_interrupt(), _progress(len(session.cases)) as on_case:
            record = sweep.execute(session, on_case=on_case)
    except KeyboardInterrupt as e:
        path = session.writer.path
        what = "Terminated (SIGTERM)" if isinstance(e, Terminated) else "Interrupted"
        click.echo(f"\n{what}. Finished cases are in {path}; continue with:\n  "
                   f"{_resume_command(session, path, backend_name, env.SGLANG_SRC if sglang_src is not None else None)}", err=True)
        ctx.exit(143 if isinstance(e, Terminated) else 130)
    record = _more_processes(session, record, processes)
    click.echo("\n" + text.run_summary(record) + f"\n\nrun file: {session.writer.path}")
    if plots:
        _plots(record, session.writer.path.with_suffix(""), replace_pngs=force or session.resumed)
    ctx.exit(1 if any(c.status == "failed" for c in record.cases) else 0)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Slurm and CI send at a time limit), raised where the run is so it ends as an
    interrupt does: finished cases kept, the resume command printed; exit 143 (128 + 15)."""


@contextmanager
def _sigterm_as_interrupt():
    import signal

    def raise_terminated(signum, frame):
        raise Terminated()

    try:
        old = signal.signal(signal.SIGTERM, raise_terminated)
    except ValueError:  # not the main thread: signals cannot be caught here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _resume_command(session, path: Path, backend_name: str, sglang_src: str | None) -> str:
    """The command that finishes an interrupted run: --resume wants the same selection (--ci and the
    filters, a view's written out), so it is spelled out rather than left to memory; with the backend
    and sglang's tree the run was given (`sglang_src`: the resolved path of --sglang-src, None without it)."""
    import shlex

    words = ["hisparse-bench", "run", session.config, "--resume", str(path)]
    if session.expansion.ci:
        words.append("--ci")
    for f in session.expansion.filters:
        words += ["--filter", f]
    if backend_name != "auto":
        words += ["--backend", backend_name]
    if sglang_src is not None:
        words += ["--sglang-src", sglang_src]
    return " ".join(shlex.quote(w) for w in words)


def _announce(session) -> None:
    """What runs where, said before the first case (and a warning when it will take long)."""
    from hisparse.render import text

    if session.backend_name == "reference":
        if session.config_defaulted:
            click.echo(f"No GPU available: running configs/{session.config}.yaml on the PyTorch reference backend.")
        click.echo(text.REFERENCE_NOTE)
    _announce_duration(session)
    if session.resumed:
        click.echo(f"Resuming {session.writer.path}: {session.resumed_done} case(s) done, {session.to_run} to run.")
    click.echo(f"{len(session.cases)} case(s), {len(session.expansion.pruned)} pruned; writing {session.writer.path}")


def _announce_duration(session) -> None:
    """How long the cases left will take, from what is known: the same cases' earlier runs on this
    machine and backend (the run file's folder and the committed runs). Cases never timed here make the
    time unknown, and that is said rather than guessed (a cost model once said 77 s for 14.5 minutes)."""
    from hisparse.bench.session import LONG_RUN_S, default_out_dir, estimate_from_history

    todo = [c for c in session.cases if c.case_id not in session.writer.done_ids]
    record = session.writer.record
    folders = [session.writer.path.parent, default_out_dir(session.backend_name),
               default_out_dir("cuda"), default_out_dir("reference")]
    est = estimate_from_history(todo, machine=record.environment.get("machine"), backend=record.backend,
                                config_name=str(record.config.get("name") or session.config), folders=folders)
    where = f"on {record.environment.get('machine')} ({session.backend_name})"
    if est.unknown:
        known = f"; the other {est.known} took {_duration(est.known_s)} before" if est.known else ""
        click.echo(f"note: {est.unknown} of {len(todo)} case(s) were never timed {where}: the run's duration is "
                   f"unknown{known}", err=True)
    elif est.known_s > LONG_RUN_S:
        click.echo(f"warning: {len(todo)} case(s) {where}: expect about {_duration(est.known_s)} "
                   "(what they took in earlier runs)", err=True)


@contextmanager
def _progress(total: int):
    """A bar on a terminal; elsewhere (CI, Slurm, nohup, a pipe) a bar shows nothing until the end,
    so one line per finished case instead. The bar is closed on an interrupt too (it hides the cursor)."""
    if not sys.stdout.isatty():
        yield _line
        return
    with click.progressbar(length=total, label="cases", show_pos=True, show_eta=True,
                           item_show_func=lambda case_id: case_id or "") as bar:
        yield lambda p: bar.update(1, p.case_id)


def _line(p) -> None:
    from hisparse.render.text import us

    what = f"{us(p.median_us)} us/call" if p.median_us is not None else p.status.upper()
    eta = f", ETA {_duration(p.eta_s)}" if p.eta_s is not None and p.index < p.total else ""
    click.echo(f"[{p.index}/{p.total}] {p.case_id}  {what}  (elapsed {_duration(p.elapsed_s)}{eta})")


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _more_processes(session, record, processes: int):
    from hisparse.results.model import load_run

    for p in range(1, processes):
        click.echo(f"process {p + 1} of {processes}: hisparse-bench retime {session.writer.path}")
        _retime_in_new_process(session.writer.path, session.backend_name)
    return load_run(session.writer.path) if processes > 1 else record


def _retime_in_new_process(path: Path, backend: str) -> None:
    """A fresh interpreter (new CUDA context, allocator, address space): the point of --processes."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "hisparse", "retime", str(path), "--backend", backend], check=False)
    if proc.returncode not in (0, 1):  # 1: some case failed there and kept its earlier samples
        click.echo(f"retime process exited with {proc.returncode}; {path} keeps what it had", err=True)


def _plots(record, out_dir: Path, *, replace_pngs: bool) -> None:
    """The run's figures in ``out_dir``; PNGs already there are replaced only with --force or on
    --resume (then they are this run's own), else the plots are skipped with the way to draw them."""
    from hisparse.errors import OutputPathError
    from hisparse.files import check_output_dir

    try:
        from hisparse.render.plots import plot_run
    except ImportError as e:  # matplotlib missing: the run itself is complete
        click.echo(f"plots skipped: {e}")
        return
    try:
        check_output_dir(out_dir, force=replace_pngs, pattern="*.png", option="plot folder")
    except OutputPathError as e:  # the run file is complete: keep exit status for the cases
        click.echo(f"plots skipped: {e} (then `hisparse-bench plot RUN --force`)", err=True)
        return
    paths = plot_run(record, out_dir)
    if paths:
        click.echo("plots: " + ", ".join(str(p) for p in paths))
