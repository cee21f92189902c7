"""`hisparse-bench env` and `hisparse-bench wheelhouse` (CPU, no network: pip is mocked)."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hisparse import env
from hisparse.results import metadata
from hisparse.cli import wheelhouse_build as wh
from hisparse.cli import main
from hisparse.cli import envinfo

REPO = Path(__file__).resolve().parents[2]
REAL_RUN = subprocess.run

# What `env` must report (a contract: scripts/gpu_session.sh logs it, people grep it).
ENV_KEYS = ("machine", "python", "torch", "torch_cuda_build", "cuda_available", "gpu", "compute_capability",
            "driver", "nvcc", "nvcc_version", "cuda_home", "cuda_arch", "jit_cache_dir", "no_jit", "tvm_ffi",
            "asv")


def _lines(output: str) -> dict[str, str]:
    """`env` text output -> {key: printed value}."""
    out = {}
    for line in output.splitlines():
        key, _, value = line.partition(" ")
        if not key.endswith(":"):
            out[key] = value.strip()
    return out


# ---------------------------------------------------------------------------------------------- env


def test_env_prints_every_key():
    result = CliRunner().invoke(main, ["env"])
    assert result.exit_code == 0, result.output
    printed = _lines(result.output)
    for key in ENV_KEYS:
        assert printed.get(key), f"{key} missing from:\n{result.output}"
    assert printed["jit_cache_dir"] == str(env.CACHE_DIR)
    assert printed["cuda_arch"] == env.CUDA_ARCH


def test_env_json_parses_and_matches_text():
    runner = CliRunner()
    result = runner.invoke(main, ["env", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert set(ENV_KEYS) <= set(info)
    assert isinstance(info["cuda_available"], bool) and isinstance(info["no_jit"], bool)
    assert info["no_jit"] is env.NO_JIT
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    assert info["asv"] is not None and info["tvm_ffi"] is not None  # both are installed in the test env
    # the text form is the same data
    text = _lines(runner.invoke(main, ["env"]).output)
    assert list(text) == list(info)
    assert text["torch"] == str(info["torch"])


@pytest.fixture
def bare_machine(monkeypatch, tmp_path):
    """No GPU, no CUDA toolkit, nothing on PATH, a clean JIT cache."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in ("CUDA_HOME", "NVCC", "NVCC_VERSION"):
        monkeypatch.setattr(env, name, None)
    monkeypatch.setattr(env, "CUDA_ARCH", env.DEFAULT_CUDA_ARCH)
    monkeypatch.setattr(env, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(env, "NO_JIT", False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no nvcc, no nvidia-smi, no git
    monkeypatch.delenv("HISPARSE_CUDA_ARCH", raising=False)
    return tmp_path / "cache"


def test_env_on_a_cpu_machine_prints_none_and_not_found(bare_machine):
    result = CliRunner().invoke(main, ["env"])
    assert result.exit_code == 0, result.output
    printed = _lines(result.output)
    assert printed["cuda_available"] == "no"
    for key in ("gpu", "compute_capability", "driver", "nvcc_version"):
        assert printed[key] == "none", key
    for key in ("nvcc", "nvcc_on_path", "cuda_home"):
        assert printed[key] == "not found", key
    assert printed["cuda_arch"] == env.DEFAULT_CUDA_ARCH
    assert printed["cuda_arch_source"].startswith("default")

    info = json.loads(CliRunner().invoke(main, ["env", "--json"]).output)
    assert info["nvcc"] is None and info["cuda_home"] is None and info["gpu"] is None
    assert info["gpu_count"] == 0 and info["jit_prebuilt_modules"] == 0


def test_env_survives_broken_probes(bare_machine, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr(metadata, "collect_environment", boom)
    monkeypatch.setattr(env, "CUDA_ARCH", "nine")  # an invalid HISPARSE_CUDA_ARCH
    result = CliRunner().invoke(main, ["env"])
    assert result.exit_code == 0, result.output
    printed = _lines(result.output)
    assert printed["torch"] == "none" and printed["machine"] not in ("", "none")
    assert printed["cuda_arch"] == "nine" and printed["cuda_arch_tag"] == "none"
    assert "warning: cuda_arch 'nine' is not a valid arch" in result.output


def test_env_reports_prebuilt_kernels_and_no_jit(bare_machine, monkeypatch):
    monkeypatch.setattr(env, "NO_JIT", True)
    result = CliRunner().invoke(main, ["env"])
    assert _lines(result.output)["no_jit"] == "yes"
    assert "HISPARSE_NO_JIT=1 but no prebuilt kernel" in result.output

    so = bare_machine / "sm_90" / "swap_single_abc" / "swap_single_abc.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"")
    result = CliRunner().invoke(main, ["env"])
    assert _lines(result.output)["jit_prebuilt_modules"] == "1"
    assert "no prebuilt kernel" not in result.output


def test_env_collect_is_the_command_data():
    assert list(envinfo.collect()) == list(json.loads(CliRunner().invoke(main, ["env", "--json"]).output))


# ---------------------------------------------------------------------------------------- wheelhouse


def _pyproject_pins() -> dict[str, str]:
    """name -> "==version" of every exact pin in pyproject.toml (read independently of hisparse)."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for d in deps:
        m = re.fullmatch(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?\s*(==\s*\S+)", d.strip())
        if m:
            pins[m.group(1)] = m.group(2).replace(" ", "")
    return pins


@pytest.fixture
def fake_pip(monkeypatch):
    """subprocess.run that records pip commands and drops a plausible wheel where pip would."""
    calls: list[tuple[list[str], dict]] = []
    fail: dict[str, str] = {}

    def run(cmd, *args, **kwargs):
        if not (isinstance(cmd, list) and cmd[1:3] == ["-m", "pip"]):
            return REAL_RUN(cmd, *args, **kwargs)  # git (metadata.git_info) and anything else: real
        calls.append((list(cmd), kwargs))
        verb, target = cmd[3], cmd[-1]
        if verb == "download":
            if any(target.startswith(name) for name in fail):
                return subprocess.CompletedProcess(cmd, 1, "", fail[next(n for n in fail if target.startswith(n))])
            name, spec = re.fullmatch(r"([A-Za-z0-9._-]+)(.*)", target).groups()
            version = spec[2:] if spec.startswith("==") else "1.0"
            dest = Path(cmd[cmd.index("-d") + 1])
            (dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"PK")
        elif verb == "wheel":
            if "wheel" in fail:  # the tree's own wheel
                return subprocess.CompletedProcess(cmd, 1, "", fail["wheel"])
            (Path(cmd[cmd.index("-w") + 1]) / "hisparse_bench-0.1.0-py3-none-any.whl").write_bytes(b"PK")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    run.calls, run.fail = calls, fail
    return run


def _downloads(fake_pip) -> list[list[str]]:
    return [c for c, _ in fake_pip.calls if c[3] == "download"]


def test_wheelhouse_downloads_the_pins_and_asv_runtime(fake_pip, tmp_path):
    dest = tmp_path / "wh"
    result = CliRunner().invoke(main, ["wheelhouse", str(dest)])
    assert result.exit_code == 0, result.output
    pins = _pyproject_pins()
    assert {"apache-tvm-ffi", "asv", "asv-runner"} <= set(pins)
    expected = [f"{n}{v}" for n, v in pins.items()] + ["json5", "pympler", "importlib-metadata<9", "tabulate"]
    platform_args = [a for p in wh.DEFAULT_PLATFORMS for a in ("--platform", p)]
    assert _downloads(fake_pip) == [
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
         "--implementation", "cp", *platform_args, "-d", str(dest.resolve()), spec]
        for spec in expected]
    assert wh.DEFAULT_PLATFORMS == ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
                                    "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
    # the tree's own wheel, built in the checkout without build isolation
    wheels = [(c, kw) for c, kw in fake_pip.calls if c[3] == "wheel"]
    assert [c for c, _ in wheels] == [[sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                                       ".", "-w", str(dest.resolve())]]
    assert Path(wheels[0][1]["cwd"]) == env.REPO_ROOT
    assert "hisparse_bench-0.1.0-py3-none-any.whl" in result.output
    assert len(list(dest.glob("*.whl"))) == len(expected) + 1


def test_wheelhouse_options_reach_pip(fake_pip, tmp_path):
    dest = tmp_path / "wh"
    result = CliRunner().invoke(main, ["wheelhouse", str(dest), "--python-version", "3.10", "--platform",
                                       "manylinux_2_34_x86_64", "--platform", "manylinux_2_17_x86_64", "--no-self"])
    assert result.exit_code == 0, result.output
    for cmd in _downloads(fake_pip):
        assert cmd[cmd.index("--python-version") + 1] == "3.10"
        assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"] == ["manylinux_2_34_x86_64",
                                                                                "manylinux_2_17_x86_64"]
    assert not [c for c, _ in fake_pip.calls if c[3] == "wheel"]  # --no-self
    script = (dest / "install.sh").read_text()
    assert "sys.version_info[:2] != (3, 10)" in script and "hisparse-bench (wheel" not in script


def test_install_sh_is_executable_and_offline(fake_pip, tmp_path):
    dest = tmp_path / "wh"
    assert CliRunner().invoke(main, ["wheelhouse", str(dest)]).exit_code == 0
    script = dest / "install.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert 'TARGET=${TARGET:-/tmp/site}' in text
    assert re.search(r'pip install --no-index --no-deps .*--target "\$TARGET" "\$\{wheels\[@\]\}"', text)
    assert re.search(r'if \[ "\$TARGET" = env \]; then\n\s+"\$PYTHON" -m pip install --no-index --no-deps ', text)
    assert "export PYTHONPATH=$TARGET" in text


def _fake_python(tmp_path: Path) -> tuple[Path, Path]:
    """An interpreter stand-in: `-c CODE` runs the real one, anything else (pip) is only logged."""
    log = tmp_path / "pip.log"
    exe = tmp_path / "fake-python"
    exe.write_text(f'#!/usr/bin/env bash\nif [ "$1" = -c ]; then exec "{sys.executable}" "$@"; fi\n'
                   f'echo "$@" >> "{log}"\n')
    exe.chmod(0o755)
    return exe, log


@pytest.mark.skipif(shutil.which("bash") is None, reason="install.sh is a bash script")
def test_install_sh_runs_pip_offline(fake_pip, tmp_path):
    dest = tmp_path / "wh"
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert CliRunner().invoke(main, ["wheelhouse", str(dest), "--python-version", here]).exit_code == 0
    python, log = _fake_python(tmp_path)
    wheels = " ".join(str(w) for w in sorted(dest.glob("*.whl")))
    base = {**os.environ, "PYTHON": str(python)}

    site = tmp_path / "site"
    out = REAL_RUN(["bash", str(dest / "install.sh")], env={**base, "TARGET": str(site)},
                   capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert log.read_text().splitlines() == [
        f"-m pip install --no-index --no-deps --no-cache-dir --upgrade --target {site} {wheels}"]
    assert out.stdout.splitlines()[0] == f"export PYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}}"

    log.unlink()
    out = REAL_RUN(["bash", str(dest / "install.sh")], env={**base, "TARGET": "env"},
                   capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert log.read_text().splitlines() == [f"-m pip install --no-index --no-deps --no-cache-dir {wheels}"]
    assert out.stdout == ""


@pytest.mark.skipif(shutil.which("bash") is None, reason="install.sh is a bash script")
def test_install_sh_refuses_another_python(fake_pip, tmp_path):
    dest = tmp_path / "wh"
    assert CliRunner().invoke(main, ["wheelhouse", str(dest), "--python-version", "3.99"]).exit_code == 0
    python, log = _fake_python(tmp_path)
    out = REAL_RUN(["bash", str(dest / "install.sh")], env={**os.environ, "PYTHON": str(python)},
                   capture_output=True, text=True)
    assert out.returncode == 1 and "this wheelhouse is for Python 3.99" in out.stderr
    assert not log.exists()


@pytest.mark.parametrize("bad", ["three", "3", "3.x", "py312", ""])
def test_bad_python_version_is_a_click_error(fake_pip, tmp_path, bad):
    dest = tmp_path / "wh"
    result = CliRunner().invoke(main, ["wheelhouse", str(dest), "--python-version", bad])
    assert result.exit_code == 2
    assert "Invalid value for '--python-version'" in result.output
    assert f"{bad!r} is not a Python version" in result.output and "3.12" in result.output
    assert not fake_pip.calls and not dest.exists()


def test_bad_platform_is_a_click_error(fake_pip, tmp_path):
    result = CliRunner().invoke(main, ["wheelhouse", str(tmp_path / "wh"), "--platform", "many linux"])
    assert result.exit_code == 2 and "Invalid value for '--platform'" in result.output
    assert not fake_pip.calls


def test_pip_failure_is_reported_and_no_install_sh(fake_pip, tmp_path):
    fake_pip.fail["asv=="] = "ERROR: No matching distribution found for asv==0.6.6"
    dest = tmp_path / "wh"
    result = CliRunner().invoke(main, ["wheelhouse", str(dest), "--platform", "manylinux_2_28_x86_64"])
    assert result.exit_code == 1
    assert "pip download asv==" in result.output and "No matching distribution" in result.output
    assert "pip matches --platform tags exactly" in result.output
    assert not (dest / "install.sh").exists()


def test_self_wheel_failure_names_the_way_out_and_no_install_sh(fake_pip, tmp_path):
    # A fresh machine's python3 without setuptools >= 70.1 or `wheel` (seen 2026-12-03): the pinned
    # wheels still download, the error names the cause and --no-self, and no install.sh half-describes it.
    fake_pip.fail["wheel"] = "error: invalid command 'bdist_wheel'"
    dest = tmp_path / "wh"
    result = CliRunner().invoke(main, ["wheelhouse", str(dest)])
    assert result.exit_code == 1
    assert "invalid command 'bdist_wheel'" in result.output and "needs setuptools>=70.1" in result.output
    assert "--no-self" in result.output
    assert len(list(dest.glob("*.whl"))) == len(_downloads(fake_pip)) > 0
    assert not (dest / "install.sh").exists()


def test_stale_wheel_of_another_version_is_refused(fake_pip, tmp_path):
    dest = tmp_path / "wh"
    dest.mkdir()
    (dest / "asv-0.6.1-cp36-abi3-manylinux2014_x86_64.whl").write_bytes(b"PK")
    result = CliRunner().invoke(main, ["wheelhouse", str(dest), "--no-self"])
    assert result.exit_code == 1
    assert "more than one wheel of a project" in result.output and "asv-0.6.1-" in result.output
    assert not (dest / "install.sh").exists()


def test_installed_wheel_reads_pins_from_its_metadata(monkeypatch, fake_pip, tmp_path):
    import importlib.metadata

    from_tree = wh.requirements()
    deps, _ = wh.project_dependencies()
    requires_dist = [*deps, 'pytest>=8; extra == "test"']  # what the wheel's METADATA carries
    monkeypatch.setattr(importlib.metadata, "requires", lambda dist: requires_dist if dist == "hisparse-bench" else [])
    monkeypatch.setattr(env, "REPO_ROOT", None)
    assert [str(r) for r in wh.requirements()] == [str(r) for r in from_tree]
    result = CliRunner().invoke(main, ["wheelhouse", str(tmp_path / "wh")])
    assert result.exit_code == 1 and "--no-self" in result.output
    assert CliRunner().invoke(main, ["wheelhouse", str(tmp_path / "wh"), "--no-self"]).exit_code == 0


def test_pins_are_not_restated_in_the_library():
    source = (REPO / "hisparse" / "cli" / "wheelhouse_build.py").read_text()
    assert not re.search(r"==\s*\d", source), "versions belong in pyproject.toml only"
    assert wh.ASV_RUNTIME == ("json5", "pympler", "importlib-metadata", "tabulate")  # asv 0.6.6 imports all four


@pytest.mark.skipif(shutil.which("bash") is None, reason="a bash script")
def test_build_wheelhouse_sh_wraps_the_command(tmp_path):
    script = REPO / "scripts" / "build_wheelhouse.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    environ = {**os.environ, "PYTHON": sys.executable}
    out = REAL_RUN([str(script), "--help"], env=environ, capture_output=True, text=True)
    assert out.returncode == 0 and "Usage:" in out.stdout and "wheelhouse" in out.stdout
    # no DIR given: the default (.whl) is supplied and the options reach the command's validation
    out = REAL_RUN([str(script), "--python-version", "three"], env=environ, capture_output=True, text=True,
                   cwd=tmp_path)
    assert out.returncode == 2 and "'--python-version'" in out.stderr
