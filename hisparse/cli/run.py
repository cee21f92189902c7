"""`hisparse-bench run`: check and time every case of a sweep config, write the run file after every
case, print the summary table, and draw the plots."""
from __future__ import annotations

from pathlib import Path

import click

from hisparse import env


class _UsageFailure(click.ClickException):
    exit_code = 2


def default_out_dir() -> Path:
    return (env.REPO_ROOT or Path.cwd()) / "results" / "runs"


def _out_path(out: str | None, run_id: str) -> Path:
    if out is not None and out.endswith(".json"):
        return Path(out)
    return (Path(out) if out is not None else default_out_dir()) / f"{run_id}.json"


@click.command("run")
@click.argument("config", required=False)
@click.option("--ci", is_flag=True, help="Use the config's reduced CI grid.")
@click.option("--filter", "filters", multiple=True, metavar="EXPR",
              help="Keep only matching cases (repeatable; syntax of `hisparse-bench list`).")
@click.option("--out", type=click.Path(), default=None,
              help="Output directory (default results/runs) or a .json file path.")
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
def run(ctx: click.Context, config: str | None, ci: bool, filters: tuple[str, ...], out: str | None,
        resume: str | None, backend_name: str, plots: bool, processes: int, sglang_src: str | None) -> None:
    """Run the sweep CONFIG (a name under configs/ or a YAML path; default "default", or
    "cpu-small" when no GPU is available)."""
    from datetime import datetime, timezone

    from hisparse.bench import measure
    from hisparse.results import metadata
    from hisparse.results import model as results
    from hisparse.bench.backends import get_backend, resolve_name
    from hisparse.bench.config import load_config
    from hisparse.errors import HisparseError
    from hisparse.bench.floors import PinnedBandwidth, measure_pinned_h2d
    from hisparse.render import text

    if sglang_src is not None:  # the environment too: sglang's cases run in a spawned worker
        import os

        env.SGLANG_SRC = os.environ["HISPARSE_SGLANG_SRC"] = str(Path(sglang_src).resolve())
    if resume is not None and processes > 1:
        raise _UsageFailure("--processes cannot be combined with --resume (it would retime the finished cases "
                            "again): resume, then run `hisparse-bench retime FILE` once per missing process")
    try:
        resolved = resolve_name(backend_name)
        backend = get_backend(resolved)
    except HisparseError as e:
        raise _UsageFailure(str(e)) from e
    if config is None:
        config = "default" if resolved == "cuda" else "cpu-small"
        if resolved == "reference":
            click.echo("No GPU available: running configs/cpu-small.yaml on the PyTorch reference backend.")
    if resolved == "reference":
        click.echo(text.REFERENCE_NOTE)

    try:
        cfg = load_config(config)
        expansion = cfg.expand(ci=ci, filters=tuple(filters))
    except HisparseError as e:
        raise _UsageFailure(str(e)) from e
    cases = list(expansion.cases)
    environment = metadata.collect_environment(backend.device)
    if _has_sglang(cases):  # which sglang: version, and for a checkout its commit and dirty flag
        from hisparse.bench.sglang import provenance

        environment.update(provenance())

    if resume is not None:
        try:
            writer = results.RunWriter.resume(resume, config_hash=cfg.config_hash, backend=backend.name,
                                              environment=environment)
        except HisparseError as e:
            raise _UsageFailure(str(e)) from e
        old = writer.record.config
        if bool(old.get("ci")) != ci or list(old.get("filters") or []) != list(filters):
            raise _UsageFailure(f"{resume}: cannot resume: it was run with --ci={old.get('ci')} and filters "
                                f"{old.get('filters')}, not --ci={ci} and {list(filters)}")
        pinned = PinnedBandwidth.from_dict(writer.record.floors)
        left = len([c for c in cases if c.case_id not in writer.done_ids])
        click.echo(f"Resuming {resume}: {len(cases) - left} case(s) done, {left} to run.")
    else:
        created = datetime.now(timezone.utc)
        run_id = results.make_run_id(created, environment.get("git_commit"), cfg.name)
        if backend.is_kernel:
            click.echo("Measuring pinned host->device bandwidth ...")
        pinned = measure_pinned_h2d(backend.device)
        record = results.RunRecord(
            run_id=run_id, created=results.utc_iso(created), backend=backend.name,
            config={"name": cfg.name, "path": str(getattr(cfg, "path", None) or config), "hash": cfg.config_hash,
                    "ci": ci, "filters": list(filters),
                    "pruned": [{"case_id": p.case_id, "reason": p.reason} for p in expansion.pruned]},
            environment=environment, floors=pinned.to_dict(),
        )
        writer = results.RunWriter.create(_out_path(out, run_id), record)

    click.echo(f"{len(cases)} case(s), {len(expansion.pruned)} pruned; writing {writer.path}")
    try:
        with click.progressbar(cases, label="cases", show_pos=True,
                               item_show_func=lambda c: c.case_id if c is not None else "") as bar:
            with _case_runner(cases, backend) as runner:
                for _case, _result in measure.run_sweep(bar, backend, writer, floors=pinned, run=runner):
                    pass
    except KeyboardInterrupt:
        click.echo(f"\nInterrupted. Finished cases are in {writer.path}; continue with --resume {writer.path}",
                   err=True)
        ctx.exit(130)
    record = writer.finish()
    for p in range(1, processes):
        click.echo(f"process {p + 1} of {processes}: hisparse-bench retime {writer.path}")
        _retime_in_new_process(writer.path, resolved)
    if processes > 1:
        record = results.load_run(writer.path)

    click.echo("")
    click.echo(text.run_summary(record))
    click.echo(f"\nrun file: {writer.path}")
    if plots:
        _plots(record, writer.path.with_suffix(""))
    ctx.exit(1 if any(c.status == "failed" for c in record.cases) else 0)


def _has_sglang(cases: list) -> bool:
    from hisparse.bench import implementations

    return any(implementations.get(c.implementation).source == "sglang" for c in cases)


def _case_runner(cases: list, backend):
    """sglang's cases in a worker process when they can run (a CUDA fault there fails that case, not the
    sweep: hisparse/bench/sglang.py IsolatedRunner); everything else in this process."""
    import contextlib

    from hisparse.bench import measure

    if backend.is_kernel and _has_sglang(cases):
        from hisparse.bench.isolate import IsolatedRunner

        return IsolatedRunner(backend.name)
    return contextlib.nullcontext(measure.run_case)


def _retime_in_new_process(path: Path, backend: str) -> None:
    """A fresh interpreter (new CUDA context, allocator, address space): the point of --processes."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "hisparse", "retime", str(path), "--backend", backend], check=False)
    if proc.returncode not in (0, 1):  # 1: some case failed there and kept its earlier samples
        click.echo(f"retime process exited with {proc.returncode}; {path} keeps what it had", err=True)


def _plots(record, out_dir: Path) -> None:
    try:
        from hisparse.render.plots import plot_run
    except ImportError as e:  # matplotlib missing: the run itself is complete
        click.echo(f"plots skipped: {e}")
        return
    paths = plot_run(record, out_dir)
    if paths:
        click.echo("plots: " + ", ".join(str(p) for p in paths))
