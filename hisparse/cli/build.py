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


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:{'>' if i == 1 else '<'}{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


@click.command("build")
@click.argument("config", required=False)
@click.option("--ci", is_flag=True, help="Expand the config's CI subset only.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Parallel compiles (default: CPU count).")
@click.option("--arch", default=None,
              help="Target CUDA arch, e.g. 9.0 (default: HISPARSE_CUDA_ARCH, else the GPU's, else 9.0).")
@click.option("--spec", "spec_texts", multiple=True, metavar="OP:ENTRY[:name=value,...]",
              help="Also build this instantiation, e.g. swap_single:hisparse::swap_single_entry:"
                   "block_size=256,record_plan=true (repeatable; with no CONFIG, only these are built).")
@click.option("--source-dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Directory holding the --spec headers (default: the csrc/ tree); an out-of-tree kernel "
                   "still sees csrc/include and csrc/host.")
def build(config: str | None, ci: bool, jobs: int | None, arch: str | None, spec_texts: tuple[str, ...],
          source_dir: Path | None) -> None:
    """Compile the CUDA kernels CONFIG needs (a name under configs/ or a YAML path; default "default",
    or only the --spec instantiations when given without CONFIG). No GPU needed.

    Prints one row per module (seconds, built or cached) and exits 1 if any build fails, with nvcc's
    output. Modules go to HISPARSE_CACHE_DIR/<sm_XX>/ (copy that to an offline GPU node).
    """
    from hisparse.kernels import jit  # noqa: PLC0415

    arch = arch or env.CUDA_ARCH
    try:
        env.arch_tag(arch)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--arch") from e
    specs = [parse_spec(t, source_dir) for t in spec_texts]
    if config is not None or not specs:
        config = config if config is not None else "default"
        try:
            specs += [s for s in specs_from_config(config, ci) if s not in specs]
        except HisparseError as e:
            raise click.ClickException(str(e)) from e
        source = f"config {config}{' (--ci)' if ci else ''}"
    else:
        source = "--spec"
    try:
        for s in specs:  # headers exist, names resolve: fail before printing anything
            s.module_name(arch)
    except KernelUnavailable as e:
        raise click.ClickException(str(e)) from e
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
    rows = [(r.module_name, f"{r.seconds:.1f}", "cached" if r.cached else ("built" if r.ok else "FAILED"))
            for r in reports]
    click.echo(_table(rows, ("module", "seconds", "status")))
    failed = [r for r in reports if not r.ok]
    built = sum(1 for r in reports if r.ok and not r.cached)
    click.echo(f"{len(reports)} module(s): {built} built, {sum(r.cached for r in reports)} cached, "
               f"{len(failed)} failed in {time.perf_counter() - t0:.1f} s")
    for r in failed:
        click.echo(f"\n=== {r.module_name} FAILED ===\n{r.error}", err=True)
    if failed:
        raise SystemExit(1)
