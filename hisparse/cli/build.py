"""`hisparse-bench build [CONFIG] [--ci] [--jobs N] [--arch 9.0] [--spec ...]`: compile every kernel
instantiation a config needs (compile-only without a GPU), in parallel, and print the time per module.

Run it before timing so no JIT lands inside a measurement, on a build machine to prebuild the cache
for an offline GPU node (HISPARSE_NO_JIT=1 there), and in CI as the compile check.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import click

from hisparse import env
from hisparse.errors import ConfigError, HisparseError, KernelUnavailable


_SPEC_RE = re.compile(r"(?P<op>\w+):(?P<entry>(?:::)?\w+(?:::\w+)*)(?::(?P<args>.*))?")


def parse_spec(text: str, source_dir: Path | None = None):
    """``OP:ENTRY[:name=value,...]`` -> KernelSpec; values: int, true/false, or a C++ name."""
    from hisparse.kernels.jit import KernelSpec  # noqa: PLC0415

    m = _SPEC_RE.fullmatch(text.strip())
    if m is None:
        raise click.BadParameter(f"{text!r}: expected OP:ENTRY[:name=value,...]", param_hint="--spec")
    op, entry, args_text = m.group("op"), m.group("entry"), m.group("args") or ""
    args = []
    for item in filter(None, (a.strip() for a in args_text.split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{text!r}: template argument {item!r} is not name=value", param_hint="--spec")
        args.append((name, _parse_value(value)))
    try:
        return KernelSpec(op=op, entry=entry, template_args=tuple(args), source_dir=source_dir)
    except ValueError as e:
        raise click.BadParameter(f"{text!r}: {e}", param_hint="--spec") from e


_BOOLS = (False, True)


def _template_table() -> dict[str, tuple[str, dict[str, tuple]]]:
    """op -> (entry, {template key: allowed values}) for the kernels of csrc/ (the ops' own tables)."""
    from hisparse.kernels.ops import copy_planned, gather_floor, swap_multi, swap_single  # noqa: PLC0415

    return {
        swap_single.OP: (swap_single.ENTRY, {"block_size": swap_single.BLOCK_SIZES, "record_plan": _BOOLS,
                                             "copy": _BOOLS, "flat_copy": _BOOLS}),
        swap_multi.OP: (swap_multi.ENTRY, {"pdl": _BOOLS, "record_plan": _BOOLS}),
        copy_planned.OP: (copy_planned.ENTRY, {"block_size": copy_planned.BLOCK_SIZES}),
        gather_floor.OP: (gather_floor.ENTRY, {"loads_in_flight": gather_floor.LOADS_IN_FLIGHT}),
    }


def _show(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def check_spec(spec, text: str) -> None:
    """Reject a --spec of one of our ops whose entry, template keys or values the op does not
    instantiate, before nvcc sees it (it would answer block_size=333 with pages of C++ errors).
    An out-of-tree kernel (--source-dir) has no table and is passed through."""
    table = _template_table()
    if spec.source_dir is not None and spec.op not in table:
        return
    if spec.op not in table:
        raise click.BadParameter(f"{text!r}: unknown op {spec.op!r}; allowed: {', '.join(table)} "
                                 "(an out-of-tree kernel needs --source-dir)", param_hint="--spec")
    entry, allowed = table[spec.op]
    if spec.entry.removeprefix("::") != entry:
        raise click.BadParameter(f"{text!r}: op {spec.op} has entry {entry}, not {spec.entry}", param_hint="--spec")
    given = dict(spec.template_args)
    for key, value in given.items():
        if key not in allowed:
            raise click.BadParameter(f"{text!r}: {spec.op} has no template key {key!r}; allowed keys: "
                                     f"{', '.join(allowed)}", param_hint="--spec")
        ok = allowed[key]
        if (value not in ok) or isinstance(value, bool) != isinstance(ok[0], bool):
            raise click.BadParameter(f"{text!r}: {spec.op} {key}={_show(value)} is not allowed; allowed: "
                                     f"{', '.join(map(_show, ok))}", param_hint="--spec")
    missing = [k for k in allowed if k not in given]
    if missing:
        raise click.BadParameter(f"{text!r}: {spec.op} needs {', '.join(f'{k}=...' for k in missing)} (allowed: "
                                 + "; ".join(f"{k} {', '.join(map(_show, allowed[k]))}" for k in missing) + ")",
                                 param_hint="--spec")
    if given.get("copy") is False and given.get("record_plan") is False:  # the kernel's static_assert
        raise click.BadParameter(f"{text!r}: {spec.op} copy=false needs record_plan=true (the plan is what its copy "
                                 "reads)", param_hint="--spec")
    if given.get("copy") is False and given.get("flat_copy") is True:  # the kernel's static_assert
        raise click.BadParameter(f"{text!r}: {spec.op} flat_copy=true needs copy=true (a swap that does not copy "
                                 "has no copy to shape)", param_hint="--spec")


def _parse_value(value: str) -> int | bool | str:
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(value, 0)
    except ValueError:
        return value


def specs_from_config(config_ref: str, ci: bool) -> list:
    """Expand the config (a name under configs/ or a YAML path) -> distinct KernelSpecs, in first-use order."""
    from hisparse.bench import implementations  # noqa: PLC0415
    from hisparse.bench.config import load_config  # noqa: PLC0415

    specs: dict = {}
    for case in load_config(config_ref).expand(ci=ci):
        for spec in implementations.kernel_specs(case):
            specs.setdefault(spec, None)
    return list(specs)


def _default_config() -> str:
    """What `run` would pick (cpu-small when no GPU is visible), said aloud: a CPU build machine that
    prebuilds for a GPU node must name the config (`build default`)."""
    from hisparse.bench.backends import resolve_name  # noqa: PLC0415
    from hisparse.bench.session import default_config  # noqa: PLC0415

    name = default_config(resolve_name("auto"))
    if name != "default":
        click.echo(f"No GPU visible: building the kernels of configs/{name}.yaml, what `run` would time here "
                   "(name a config, e.g. `build default`, to prebuild for a GPU node)")
    return name


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:{'>' if i == 1 else '<'}{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def _resolve_specs(config: str | None, ci: bool, arch: str, spec_texts: tuple[str, ...],
                   source_dir: Path | None) -> tuple[list, str]:
    """The instantiations to build and where they came from; every problem is a click error before
    anything is printed or compiled (bad arch, bad --spec value, config error, missing header)."""
    try:
        env.arch_tag(arch)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--arch") from e
    specs = [parse_spec(t, source_dir) for t in spec_texts]
    for spec, spec_text in zip(specs, spec_texts):
        check_spec(spec, spec_text)
    if config is not None or not specs:
        config = config if config is not None else _default_config()
        try:
            specs += [s for s in specs_from_config(config, ci) if s not in specs]
        except HisparseError as e:
            raise click.ClickException(str(e)) from e
        source = f"config {config}{' (--ci)' if ci else ''}"
    else:
        source = "--spec"
    try:
        for s in specs:  # headers exist, names resolve
            s.module_name(arch)
    except KernelUnavailable as e:
        raise click.ClickException(str(e)) from e
    return specs, source


def _report(reports: list, seconds: float) -> list:
    """One row per module, the totals, nvcc's output of each failure; returns the failed reports."""
    rows = [(r.module_name, f"{r.seconds:.1f}", "cached" if r.cached else ("built" if r.ok else "FAILED"))
            for r in reports]
    click.echo(_table(rows, ("module", "seconds", "status")))
    failed = [r for r in reports if not r.ok]
    built = sum(1 for r in reports if r.ok and not r.cached)
    click.echo(f"{len(reports)} module(s): {built} built, {sum(r.cached for r in reports)} cached, "
               f"{len(failed)} failed in {seconds:.1f} s")
    for r in failed:
        click.echo(f"\n=== {r.module_name} FAILED ===\n{r.error}", err=True)
    return failed


@click.command("build")
@click.argument("config", required=False)
@click.option("--ci", is_flag=True, help="Expand the config's CI subset only.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Parallel compiles (default: CPU count).")
@click.option("--arch", default=None,
              help="Target CUDA arch, e.g. 9.0 (default: HISPARSE_CUDA_ARCH, else the GPU's, else 9.0).")
@click.option("--spec", "spec_texts", multiple=True, metavar="OP:ENTRY[:name=value,...]",
              help="Also build this instantiation, e.g. swap_single:hisparse::swap_single_entry:"
                   "block_size=256,record_plan=true,copy=true (repeatable; with no CONFIG, only these are built).")
@click.option("--source-dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Directory holding the --spec headers (default: the csrc/ tree); an out-of-tree kernel "
                   "still sees csrc/include and csrc/host.")
def build(config: str | None, ci: bool, jobs: int | None, arch: str | None, spec_texts: tuple[str, ...],
          source_dir: Path | None) -> None:
    """Compile the CUDA kernels CONFIG needs (a name under configs/ or a YAML path; default: what `run`
    picks, "default" on a GPU and "cpu-small" without one; only the --spec instantiations when given
    without CONFIG). No GPU needed.

    Prints one row per module (seconds, built or cached) and exits 1 if any build fails, with nvcc's
    output. Modules go to HISPARSE_CACHE_DIR/<sm_XX>/ (copy that to an offline GPU node).
    """
    from hisparse.kernels import jit  # noqa: PLC0415

    arch = arch or env.CUDA_ARCH
    specs, source = _resolve_specs(config, ci, arch, spec_texts, source_dir)
    jobs = jobs or os.cpu_count() or 1
    click.echo(f"hisparse-bench build: {len(specs)} module(s) for {source}; arch {arch} "
               f"({env.arch_tag(arch)}), {jobs} job(s), cache {Path(env.CACHE_DIR) / env.arch_tag(arch)}")
    if not specs:
        click.echo("nothing to compile: no case of this config uses a CUDA kernel")
        return
    t0 = time.perf_counter()
    try:
        reports = jit.build_many(specs, jobs=jobs, arch=arch, keep_going=True)
    except KernelUnavailable as e:  # no toolkit, NO_JIT without prebuilt modules, missing header
        raise click.ClickException(str(e)) from e
    failed = _report(reports, time.perf_counter() - t0)
    if failed:
        raise SystemExit(1)
