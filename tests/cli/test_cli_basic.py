"""`hisparse-bench build` and the kernel-spec registry, end to end on real nvcc (compile-only)."""
from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hisparse import env
from hisparse.kernels import jit
from hisparse.cli import main
from hisparse.cli.build import parse_spec
from hisparse.errors import ConfigError
from hisparse.bench import implementations
from hisparse.bench.case import Case

PROBE_DIR = Path(__file__).parents[1] / "data" / "csrc"
PROBE = "jit_probe:jit_probe::copy_rows_entry:in_flight=2,pdl=false"
needs_nvcc = pytest.mark.skipif(env.CUDA_HOME is None, reason="no CUDA toolkit (nvcc) on this machine")


def probe_spec(in_flight: int = 2) -> jit.KernelSpec:
    return jit.KernelSpec("jit_probe", "jit_probe::copy_rows_entry", (("in_flight", in_flight), ("pdl", False)),
                          source_dir=PROBE_DIR)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(env, "NO_JIT", False)
    return tmp_path / "cache"


@pytest.fixture
def fake_config(monkeypatch, tmp_path):
    """A stand-in for hisparse.bench.config: two cases that need the probe kernel, one that needs none."""
    cases = [types.SimpleNamespace(impl="probe", in_flight=2), types.SimpleNamespace(impl="probe", in_flight=2),
             types.SimpleNamespace(impl="reference")]
    seen = {}

    def expand(ci=False):
        seen["ci"] = ci
        return cases

    def load_config(ref):
        if not Path(ref).is_file():
            raise ConfigError(f"config {ref} not found")
        seen["path"] = Path(ref)
        return types.SimpleNamespace(expand=expand)

    monkeypatch.setitem(sys.modules, "hisparse.bench.config", types.SimpleNamespace(load_config=load_config))
    monkeypatch.setattr(implementations, "kernel_specs",
                        lambda case: [probe_spec(case.in_flight)] if case.impl == "probe" else [])
    config = tmp_path / "sweep.yaml"
    config.write_text("# read by the fake loader only\n")
    return config, seen


def test_help_lists_build_and_its_options():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "build" in result.output
    result = CliRunner().invoke(main, ["build", "--help"])
    assert result.exit_code == 0
    for option in ("--ci", "--jobs", "--arch", "--spec", "--source-dir"):
        assert option in result.output


@needs_nvcc
def test_build_spec_prints_a_table_and_caches(cache):
    args = ["build", "--spec", PROBE, "--source-dir", str(PROBE_DIR), "--arch", "9.0", "--jobs", "2"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    name = probe_spec().module_name("9.0")
    assert name in first.output and "built" in first.output
    assert "1 built, 0 cached, 0 failed" in first.output
    assert (cache / "sm_90" / name / f"{name}.so").is_file()
    second = CliRunner().invoke(main, args)
    assert second.exit_code == 0 and "0 built, 1 cached" in second.output


@needs_nvcc
def test_build_failure_exits_nonzero_with_nvcc_output(cache, tmp_path):
    (tmp_path / "bad.cuh").write_text('#include "launch.h"\ntemplate <int N> void bad_entry() { undeclared_thing(N); }\n')
    result = CliRunner().invoke(main, ["build", "--spec", "bad:bad_entry:n=1", "--source-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "FAILED" in result.output
    assert "undeclared_thing" in result.output and "is undefined" in result.output  # nvcc's diagnostic


@needs_nvcc
def test_build_config_compiles_what_its_cases_need(cache, fake_config):
    config, seen = fake_config
    result = CliRunner().invoke(main, ["build", str(config), "--ci", "--arch", "9.0"])
    assert result.exit_code == 0, result.output
    assert seen == {"path": config, "ci": True}
    assert "1 module(s)" in result.output  # two probe cases share one instantiation; reference needs none
    assert "reference" not in result.output


def test_build_config_error_is_reported(fake_config, tmp_path):
    result = CliRunner().invoke(main, ["build", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1 and "nope.yaml not found" in result.output
    assert not isinstance(result.exception, ConfigError)  # reported, not a traceback


def test_build_rejects_bad_arch_and_missing_header(cache, tmp_path):
    result = CliRunner().invoke(main, ["build", "--spec", PROBE, "--arch", "sm90"])
    assert result.exit_code == 2 and "invalid CUDA arch" in result.output
    result = CliRunner().invoke(main, ["build", "--spec", "nothere:f", "--source-dir", str(tmp_path)])
    assert result.exit_code == 1 and "nothere.cuh not found" in result.output


def test_no_jit_without_prebuilt_modules_fails_cleanly(cache, monkeypatch):
    monkeypatch.setattr(env, "NO_JIT", True)
    result = CliRunner().invoke(main, ["build", "--spec", PROBE, "--source-dir", str(PROBE_DIR)])
    assert result.exit_code == 1 and "HISPARSE_NO_JIT=1" in result.output
    assert not result.exception or isinstance(result.exception, SystemExit)


# -- --spec parsing ---------------------------------------------------------------------------------

def test_parse_spec():
    spec = parse_spec("swap_single:hisparse::swap_single_entry:block_size=256,record_plan=true,word=hisparse::W")
    assert spec == jit.KernelSpec("swap_single", "hisparse::swap_single_entry",
                                  (("block_size", 256), ("record_plan", True), ("word", "hisparse::W")))
    assert parse_spec("k:f") == jit.KernelSpec("k", "f")
    assert parse_spec("k:ns::f:n=0x10").template_args == (("n", 16),)


@pytest.mark.parametrize("text", ["k", "k:", "k:f:n", "k:f:n=1.5", "-k:f"])
def test_parse_spec_rejects(text):
    with pytest.raises(click.BadParameter):
        parse_spec(text)


# -- the implementation table ----------------------------------------------------------------------

def test_build_compiles_each_implementations_ops_with_the_wrappers_constants():
    def names(impl, **kw):
        case = Case(implementation=impl, workload="upstream", **kw)
        return [(s.op, s.template_args) for s in implementations.kernel_specs(case)]

    single = [("swap_single", (("block_size", 1024), ("record_plan", r), ("copy", True), ("flat_copy", f)))
              for r in (False, True) for f in (False, True)]
    floor = [("gather_floor", (("loads_in_flight", 1),))]
    copy = [("copy_planned", (("block_size", 1024),))]
    multi_pdl = [("swap_multi", (("pdl", True), ("record_plan", False))),
                 ("swap_multi", (("pdl", True), ("record_plan", True)))]
    assert names("lru_sequential") == single + floor
    assert names("multi_step", pdl=True) == multi_pdl + floor
    assert names("multi_step_planned", pdl=True) == multi_pdl + copy + floor
    assert names("lru_sequential_planned") == single + copy + floor
    plan_only = [("swap_single", (("block_size", 1024), ("record_plan", True), ("copy", False), ("flat_copy", False)))]
    assert names("lru_sequential_grid") == single + plan_only + copy + floor
    assert names("multi_step", pdl=False)[0] == ("swap_multi", (("pdl", False), ("record_plan", False)))


def test_every_row_of_the_table_is_complete():
    from hisparse.bench import calls  # noqa: PLC0415

    for impl in implementations.TABLE:
        assert impl.binder in calls._BINDERS, impl.name
        assert impl.baseline is None or implementations.get(impl.baseline).baseline is None, impl.name
        for op in impl.ops:
            assert callable(importlib.import_module(f"hisparse.kernels.ops.{op}").kernel_specs), (impl.name, op)
    with pytest.raises(ValueError, match="implementation: must be one of lru_sequential, multi_step"):
        implementations.get("nope")
