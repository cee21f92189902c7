"""hisparse.env: paths, HISPARSE_* variables and CUDA toolkit discovery (real files, real subprocesses)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hisparse import env
from hisparse.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def _fake_toolkit(root: Path) -> Path:
    """A directory shaped like a CUDA toolkit whose bin/nvcc starts like an ELF binary."""
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_bytes(b"\x7fELF" + b"\0" * 60)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return root.resolve()


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def clean_cuda_env(monkeypatch):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    return monkeypatch


def test_nvcc_wrapper_script_resolves_to_the_real_toolkit(tmp_path, clean_cuda_env):
    home = _fake_toolkit(tmp_path / "cuda-9.9")
    _script(tmp_path / "wrap" / "nvcc", f'#!/bin/sh\nexec {home}/bin/nvcc "$@"\n')
    clean_cuda_env.setenv("PATH", str(tmp_path / "wrap"))
    assert env._find_cuda_home() == home


def test_nvcc_symlink_resolves_to_the_real_toolkit(tmp_path, clean_cuda_env):
    home = _fake_toolkit(tmp_path / "cuda-9.9")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "nvcc").symlink_to(home / "bin" / "nvcc")
    clean_cuda_env.setenv("PATH", str(tmp_path / "links"))
    assert env._find_cuda_home() == home


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_wrapper_without_exec_is_resolved_by_asking_nvcc(tmp_path, clean_cuda_env):
    real = env._find_cuda_home()
    _script(tmp_path / "wrap" / "nvcc", f'#!/bin/sh\nNV={real}/bin/nvcc\n"$NV" "$@"\n')
    clean_cuda_env.setenv("PATH", str(tmp_path / "wrap"))
    assert env._find_cuda_home() == real


def test_valid_cuda_home_is_honoured_and_invalid_one_ignored(tmp_path, clean_cuda_env):
    home = _fake_toolkit(tmp_path / "cuda-custom")
    clean_cuda_env.setenv("CUDA_HOME", str(home))
    assert env._find_cuda_home() == home
    other = _fake_toolkit(tmp_path / "cuda-9.9")
    _script(tmp_path / "wrap" / "nvcc", f'#!/bin/sh\nexec {other}/bin/nvcc "$@"\n')
    clean_cuda_env.setenv("CUDA_HOME", str(tmp_path / "not-a-toolkit"))
    clean_cuda_env.setenv("PATH", str(tmp_path / "wrap"))
    assert env._find_cuda_home() == other


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_detected_toolkit_is_a_real_compiler():
    assert env.CUDA_HOME is not None
    assert env._is_elf(env.NVCC)
    assert env.NVCC == env.CUDA_HOME / "bin" / "nvcc"
    assert env.NVCC_VERSION and env.NVCC_VERSION[0].isdigit()


def test_source_checkout_paths():
    assert env.REPO_ROOT == REPO
    assert env.CSRC_DIR == REPO / "csrc"
    assert (env.CSRC_DIR / "include" / "hisparse" / "copy.cuh").is_file()
    assert (env.CSRC_DIR / "host" / "launch.h").is_file()


def _env_in_child(**variables: str) -> dict:
    code = ("import json; from hisparse import env; "
            "print(json.dumps({'cache': str(env.CACHE_DIR), 'no_jit': env.NO_JIT, 'arch': env.CUDA_ARCH}))")
    child = {k: v for k, v in os.environ.items() if not k.startswith("HISPARSE_")}
    child.update(variables)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child, check=True)
    return json.loads(out.stdout)


def test_environment_variables(tmp_path):
    got = _env_in_child(HISPARSE_CACHE_DIR=str(tmp_path / "c"), HISPARSE_NO_JIT="1", HISPARSE_CUDA_ARCH="8.0")
    assert got == {"cache": str((tmp_path / "c").resolve()), "no_jit": True, "arch": "8.0"}
    got = _env_in_child(HISPARSE_NO_JIT="0", HISPARSE_CUDA_ARCH="9.0a")
    assert got["cache"] == str(REPO / ".cache" / "hisparse" / "jit")
    assert got["no_jit"] is False and got["arch"] == "9.0a"


def test_default_arch_without_gpu_is_90():
    import torch

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        assert _env_in_child()["arch"] == f"{major}.{minor}"
    else:
        assert _env_in_child()["arch"] == "9.0"


@pytest.mark.parametrize("arch, tag", [("9.0", "sm_90"), ("9.0a", "sm_90a"), ("8.9 9.0", "sm_89-sm_90"),
                                       ("10.0", "sm_100")])
def test_arch_tag(arch, tag):
    assert env.arch_tag(arch) == tag


@pytest.mark.parametrize("arch", ["", "90", "sm_90", "9.x"])
def test_bad_arch_is_a_config_error(arch):
    with pytest.raises(ConfigError):
        env.arch_tag(arch)
