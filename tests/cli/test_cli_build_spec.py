"""`hisparse-bench build --spec` checks our ops' template keys and values before nvcc sees them
(issue 14: block_size=333 or colour=red came back as pages of C++ errors); out-of-tree kernels
(--source-dir) pass through."""
from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hisparse import env
from hisparse.bench import backends
from hisparse.cli import main
from hisparse.cli.build import check_spec, parse_spec, specs_from_config
from hisparse.kernels import jit

PROBE_DIR = Path(__file__).parents[1] / "data" / "csrc"


@pytest.fixture(autouse=True)
def no_compiler(monkeypatch, tmp_path):
    """Every rejection must come before a build: a build here fails loudly instead of compiling."""
    monkeypatch.setattr(env, "CACHE_DIR", tmp_path / "cache")

    def build_many(*_a, **_kw):
        raise AssertionError("build_many reached: the spec was not rejected first")

    monkeypatch.setattr(jit, "build_many", build_many)


def build(*specs: str, extra: tuple[str, ...] = ()):
    args = ["build", "--arch", "9.0"]
    for s in specs:
        args += ["--spec", s]
    return CliRunner().invoke(main, [*args, *extra])


@pytest.mark.parametrize("spec, needles", [
    ("swap_single:hisparse::swap_single_entry:block_size=333,record_plan=false",
     ("block_size=333 is not allowed", "allowed: 128, 256, 512, 960, 1024")),
    ("swap_single:hisparse::swap_single_entry:block_size=256,record_plan=false,colour=red",
     ("no template key 'colour'", "allowed keys: block_size, record_plan, copy, flat_copy")),
    ("swap_single:hisparse::swap_single_entry:block_size=256,record_plan=false,copy=false,flat_copy=false",
     ("copy=false needs record_plan=true",)),
    ("swap_single:hisparse::swap_single_entry:block_size=256,record_plan=true,copy=false,flat_copy=true",
     ("flat_copy=true needs copy=true",)),
    ("swap_single:hisparse::swap_single_entry:block_size=256,record_plan=true,copy=true",
     ("swap_single needs flat_copy=...", "flat_copy false, true")),
    ("swap_single:hisparse::swap_single_entry:block_size=true,record_plan=false",
     ("block_size=true is not allowed", "allowed: 128, 256")),
    ("swap_multi:hisparse::swap_multi_entry:pdl=red,record_plan=true",
     ("pdl=red is not allowed", "allowed: false, true")),
    ("swap_multi:hisparse::swap_multi_entry:pdl=1,record_plan=true",
     ("pdl=1 is not allowed", "allowed: false, true")),
    ("gather_floor:hisparse::gather_floor_entry:loads_in_flight=3",
     ("loads_in_flight=3 is not allowed", "allowed: 1, 2, 4, 8")),
    ("copy_planned:hisparse::copy_planned_entry", ("copy_planned needs block_size=...", "128, 256, 512, 1024")),
    ("copy_planned:hisparse::other_entry:block_size=128", ("has entry hisparse::copy_planned_entry",)),
    ("swapp_single:hisparse::swap_single_entry:block_size=256",
     ("unknown op 'swapp_single'", "swap_single, swap_multi, copy_planned, gather_floor", "--source-dir")),
])
def test_invalid_spec_is_a_usage_error_naming_key_and_allowed_values(spec, needles):
    result = build(spec)
    assert result.exit_code == 2, result.output
    assert "--spec" in result.output
    for needle in needles:
        assert needle in result.output, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, AssertionError)


def test_every_instantiation_the_configs_need_passes_the_check():
    """The check's table agrees with what the implementations actually build."""
    seen = set()
    for config in ("default", "shared-layers", "upstream", "stability"):
        for spec in specs_from_config(config, ci=False):
            check_spec(spec, spec.op)
            seen.add(spec.op)
    assert seen == {"swap_single", "swap_multi", "copy_planned", "gather_floor"}


def test_valid_spec_of_ours_reaches_the_build(monkeypatch):
    got = {}

    def build_many(specs, **kw):
        got["specs"] = specs
        return []

    monkeypatch.setattr(jit, "build_many", build_many)
    result = build("swap_single:hisparse::swap_single_entry:block_size=960,record_plan=true,copy=false,flat_copy=false")
    assert result.exit_code == 0, result.output
    assert [s.template_args for s in got["specs"]] == [(("block_size", 960), ("record_plan", True), ("copy", False),
                                                        ("flat_copy", False))]


def test_out_of_tree_kernel_is_not_checked():
    spec = parse_spec("jit_probe:jit_probe::copy_rows_entry:in_flight=2,pdl=false,anything=goes", PROBE_DIR)
    check_spec(spec, "jit_probe")  # no table for it: passes through to the build
    with pytest.raises(click.BadParameter, match="unknown op 'jit_probe'"):
        check_spec(parse_spec("jit_probe:jit_probe::copy_rows_entry:in_flight=2"), "jit_probe")


def test_build_without_config_builds_what_run_would_time(monkeypatch):
    if backends.resolve_name("auto") == "cuda":
        pytest.skip("a GPU is visible: the default config is the full one")
    got = {}

    def build_many(specs, **kw):
        got["specs"] = specs
        return []

    monkeypatch.setattr(jit, "build_many", build_many)
    result = CliRunner().invoke(main, ["build", "--arch", "9.0"])
    assert result.exit_code == 0, result.output
    assert "configs/cpu-small.yaml" in result.output and "build default" in result.output
    assert got["specs"] == specs_from_config("cpu-small", ci=False)
