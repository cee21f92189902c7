"""`hisparse-bench build` and the kernel-spec registry, end to end on real nvcc (compile-only)."""
from __future__ import annotations

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
from hisparse.bench import kernel_specs as registry

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
    """A stand-in for hisparse.bench.config: two cases of a registered implementation, one reference case,
    one case of an implementation whose wrapper is not written."""
    cases = [types.SimpleNamespace(impl="probe", in_flight=2), types.SimpleNamespace(impl="probe", in_flight=2),
             types.SimpleNamespace(impl="reference"), types.SimpleNamespace(impl="ghost")]
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
    monkeypatch.setitem(registry.KERNEL_SPECS, "probe", lambda case: [probe_spec(case.in_flight)])
    monkeypatch.setitem(registry.MISSING, "ghost", "hisparse.kernels.ops.ghost does not exist yet")
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
    assert "ghost: skipped (hisparse.kernels.ops.ghost does not exist yet)" in result.output
    assert "reference" not in result.output


def test_build_without_config_machinery_says_so(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "hisparse.bench.config", None)  # as before hisparse/bench/config.py exists
    result = CliRunner().invoke(main, ["build"])
    assert result.exit_code == 1
    assert "hisparse/bench/config.py" in result.output and "--spec" in result.output


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


# -- registry ---------------------------------------------------------------------------------------

def test_specs_for_case_looks_up_the_implementation(monkeypatch):
    monkeypatch.setitem(registry.KERNEL_SPECS, "probe", lambda case: [probe_spec(case.in_flight)])
    notes: list[str] = []
    assert registry.specs_for_case(types.SimpleNamespace(impl="probe", in_flight=4), notes) == [probe_spec(4)]
    assert registry.specs_for_case(types.SimpleNamespace(implementation="reference"), notes) == []
    assert registry.specs_for_case(types.SimpleNamespace(impl="unknown_impl"), notes) == []
    registry.specs_for_case(types.SimpleNamespace(impl="unknown_impl"), notes)
    assert notes == ["unknown_impl: skipped (no kernel spec factory registered)"]
    with pytest.raises(TypeError, match="names no implementation"):
        registry.specs_for_case(types.SimpleNamespace(batch=1))
    monkeypatch.setitem(registry.KERNEL_SPECS, "bad", lambda case: ["not a spec"])
    with pytest.raises(TypeError, match="non-KernelSpec"):
        registry.specs_for_case(types.SimpleNamespace(impl="bad"))


def test_builtin_factories_combine_ops_and_tolerate_unwritten_wrappers(monkeypatch, tmp_path):
    import hisparse.kernels.ops

    def fake_op(name, **attrs):
        module = types.ModuleType(f"hisparse.kernels.ops.{name}")
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, module.__name__, module)

    fake_op("t_single", kernel_spec=lambda case: probe_spec(case.in_flight))
    fake_op("t_plural", kernel_specs=lambda case: [probe_spec(1), probe_spec(2)])
    fake_op("t_nofactory")
    monkeypatch.setattr(registry, "IMPLEMENTATION_OPS", {
        "both": ("t_single", "t_plural"), "half": ("t_single", "t_ghost"), "none": ("t_ghost", "t_nofactory")})
    monkeypatch.setattr(registry, "KERNEL_SPECS", {})
    monkeypatch.setattr(registry, "MISSING", {})
    registry._load_builtins()
    assert set(registry.KERNEL_SPECS) == {"both", "half"}
    case = types.SimpleNamespace(implementation="both", in_flight=8)
    assert registry.specs_for_case(case) == [probe_spec(8), probe_spec(1), probe_spec(2)]
    notes: list[str] = []
    assert registry.specs_for_case(types.SimpleNamespace(implementation="half", in_flight=4), notes) == [probe_spec(4)]
    assert registry.specs_for_case(types.SimpleNamespace(implementation="none"), notes) == []
    assert notes == ["half: partly skipped (hisparse.kernels.ops.t_ghost does not exist yet)",
                     "none: skipped (hisparse.kernels.ops.t_ghost does not exist yet; "
                     "hisparse.kernels.ops.t_nofactory defines neither kernel_specs(case) nor kernel_spec(case))"]
    # a wrapper that exists but cannot import one of its own dependencies is an error, not "missing"
    (tmp_path / "t_broken.py").write_text("import hisparse_no_such_dependency\n")
    monkeypatch.setattr(hisparse.kernels.ops, "__path__", [*hisparse.kernels.ops.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "IMPLEMENTATION_OPS", {"broken": ("t_broken",)})
    with pytest.raises(ModuleNotFoundError, match="hisparse_no_such_dependency"):
        registry._load_builtins()


def test_every_configured_implementation_has_a_factory_entry():
    implementations = pytest.importorskip("hisparse.bench.calls")
    assert set(implementations.IMPLEMENTATIONS) <= set(registry.IMPLEMENTATION_OPS) | registry.NO_KERNEL
