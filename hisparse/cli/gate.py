"""`hisparse-bench gate`: the nightly's compare steps (ci/nightly.sh); the logic is hisparse/track/gate.py.

    hisparse-bench gate --base B.json --head H.json [--confirm H2.json] [--results R] [--json OUT]
    hisparse-bench gate baseline --results R --head HEAD.json   # prints the baseline run file (or nothing)
    hisparse-bench gate asv --results R RUN.json...             # write asv results (R/asv)

Gate exit status: 0 pass; 4 the gate failed once (re-measure the head, then call again with
``--confirm``); 1 a CONFIRMED regression (the re-run failed too); 3 the head lacks cases of the base
(``--allow-missing`` to pass anyway); 2 usage error or incomparable runs.
Environment: BASELINE (run file or commit, for ``baseline``); HISPARSE_NIGHTLY_MIN_EFFECT (the policy's
min_effect); TEST HOOK HISPARSE_INJECT_SLOWDOWN=0.10 multiplies every head sample by 1.10 before gating
(recorded files untouched; a banner says so), so CI can prove the gate fires.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace

import click

EXIT = {"pass": 0, "confirmed": 1, "usage": 2, "missing": 3, "suspect": 4}
_FILE = click.Path(exists=True, dir_okay=False)


def _fail(ctx: click.Context, message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    ctx.exit(EXIT["usage"])  # not click's exit 1: 1 means a confirmed regression


@click.group("gate", invoke_without_command=True)
@click.option("--base", type=_FILE, help="The base run file.")
@click.option("--head", type=_FILE, help="The head run file (tonight's run).")
@click.option("--confirm", type=_FILE, help="A re-run of the head: only a case failing both fails.")
@click.option("--results", type=click.Path(file_okay=False), help="Results root: history for the noise.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write every verdict here.")
@click.option("--force", is_flag=True, help="Replace an existing --json file (otherwise refused).")
@click.option("--allow-incomparable", is_flag=True, help="Gate runs of different backend, GPU or config.")
@click.option("--allow-missing", is_flag=True,
              help="Pass a head that lacks cases of the base (otherwise exit 3: a cut run is not a pass).")
@click.option("-v", "--verbose", is_flag=True, help="List every case, not only the failing ones.")
@click.pass_context
def gate(ctx: click.Context, base, head, confirm, results, json_out, force, allow_incomparable, allow_missing,
         verbose) -> None:
    """Gate HEAD against BASE under the regression policy (docs/regression.md)."""
    if ctx.invoked_subcommand is not None:
        return
    from hisparse import env
    from hisparse.errors import HisparseError
    from hisparse.files import check_new_output, write_atomic
    from hisparse.track import gate as g
    from hisparse.track.policy import DEFAULT_POLICY

    if not (base and head):
        _fail(ctx, "--base and --head are required (or a subcommand: baseline, asv)")
    try:
        if json_out:  # before any work: `--json H.json` once replaced the head it was gating
            check_new_output(json_out, force=force, inputs=(base, head, confirm), option="--json")
        inject = env.inject_slowdown()
        policy = replace(DEFAULT_POLICY, min_effect=env.nightly_min_effect(DEFAULT_POLICY.min_effect))
        b, h, c = g.read(base), g.read(head), g.read(confirm) if confirm else None
        g.check_comparable(b, h, allow_incomparable=allow_incomparable)
        if c is not None:
            g.check_confirm(h, c)
        noise = g.history_noise(results, h, {h.path.resolve()} | ({c.path.resolve()} if c else set()), policy)
        report = replace(g.gate_runs(b, h, c, noise, inject=inject, policy=policy), allow_missing=allow_missing)
    except (HisparseError, ValueError) as e:
        _fail(ctx, str(e))
    _print(report, b, h, c, noise_cases=len(noise), inject=inject, min_runs=policy.history_min_runs, verbose=verbose)
    _print_missing(report)
    if json_out:
        write_atomic(json_out, json.dumps(g.report_json(report, base=base, head=head, confirm=confirm,
                                                        inject=inject, policy=policy), indent=1))
    status = report.exit_status
    click.echo({"confirmed": f"CONFIRMED regression in {report.count('confirmed')} case(s)",
                "suspect": f"{report.count('suspect')} case(s) failed the gate once: re-run to confirm",
                "missing": f"INCOMPLETE head: {len(report.missing_in_head)} case(s) of the base are missing "
                           "(--allow-missing to pass anyway)",
                "pass": f"pass: {len(report.decisions)} case(s) compared"}[status])
    ctx.exit(EXIT[status])


def _print_missing(report) -> None:
    """Cases only one side has are not gated; a pass must not hide them (a head cut after 5 of 14
    cases once passed as "5 case(s) compared")."""
    from hisparse.render import text

    for what, ids in (("missing in head", report.missing_in_head), ("new in head", report.missing_in_base)):
        if ids:
            click.echo(f"{what}: {len(ids)} case(s) not gated: {text.id_list(ids)}")


def _print(report, b, h, c, *, noise_cases: int, inject: float, min_runs: int, verbose: bool) -> None:
    from hisparse.cli._style import use_colour
    from hisparse.render import text
    from hisparse.track.compare import case_floor_step

    if inject:
        click.echo(f"*** TEST HOOK: HISPARSE_INJECT_SLOWDOWN={inject}: head samples x {1 + inject:.3f} ***")
    click.echo(f"base {b.record.run_id} ({(b.commit or '?')[:12]}) vs head {h.record.run_id} ({(h.commit or '?')[:12]})"
               + (f", confirmed by {c.record.run_id}" if c else "") + f"; {noise_cases} case(s) with history noise")
    for w in report.warnings:
        click.echo(f"warning: {w}", err=True)
    if report.no_history:
        click.echo(f"note: {len(report.no_history)} case(s) have fewer than {min_runs} earlier runs here: gated with "
                   f"the {report.no_history_floor:.1%} floor that two re-runs of one tree pass (compare's; "
                   "docs/regression.md), within-run noise and the re-run spread, until history accumulates")
    colour = use_colour()
    for d in report.decisions:
        if d.status != "pass" or d.first.status != "unchanged" or verbose:
            step = case_floor_step(b.record, h.record, d.final.case_id)
            click.echo(text.gate_line(d, colour=colour) + text.floor_step_note(step, "between base and head"))
    for case_id in report.newly_failed:
        click.echo(f"{'newly failed':12s} {case_id}")


@gate.command("baseline")
@click.option("--results", required=True, type=click.Path(file_okay=False))
@click.option("--head", required=True, type=_FILE)
@click.pass_context
def baseline(ctx: click.Context, results: str, head: str) -> None:
    """Print the baseline run file for HEAD (BASELINE, else the latest run of its series); nothing if none."""
    from hisparse.errors import HisparseError
    from hisparse.track import gate as g

    try:
        found = g.find_baseline(results, g.read(head), os.environ.get("BASELINE"))
    except (HisparseError, ValueError) as e:
        _fail(ctx, str(e))
    if found is not None:
        click.echo(str(found.path))


@gate.command("asv")
@click.option("--results", required=True, type=click.Path(file_okay=False))
@click.option("--repo", default=".", show_default=True, help="Git repository for the commit dates.")
@click.argument("runs", nargs=-1, required=True, type=_FILE)
@click.pass_context
def asv(ctx: click.Context, results: str, repo: str, runs: tuple[str, ...]) -> None:
    """Write asv results (RESULTS/asv) for the run files."""
    from hisparse.errors import HisparseError
    from hisparse.track import gate as g

    try:
        for line in g.write_asv(results, list(runs), repo):
            click.echo(line)
    except (HisparseError, ValueError) as e:
        _fail(ctx, str(e))
