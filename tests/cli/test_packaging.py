"""A non-editable install ships the CUDA sources as hisparse/_csrc and the sweep configs as
hisparse/configs, and hisparse.env finds both there."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def source_copy(tmp_path: Path) -> Path:
    """A copy of the files the build reads, so the test never writes build/ into the checkout."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("hisparse", "csrc", "configs"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "_csrc", "*.o", "*.so"))
    return src


def _can_build_wheels_offline() -> bool:
    try:
        return (importlib.util.find_spec("setuptools.command.bdist_wheel") is not None
                or importlib.util.find_spec("wheel") is not None)
    except ModuleNotFoundError:  # no setuptools at all
        return False


def test_wheel_ships_the_configs(tmp_path):
    """Without them an installed `hisparse-bench run` answered "config not found (no configs installed)"."""
    if not _can_build_wheels_offline():
        pytest.skip("offline wheel build needs setuptools >= 70.1 or the wheel package")
    src = source_copy(tmp_path)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(tmp_path / "dist"), str(src)], check=True, capture_output=True, text=True)
    (wheel,) = (tmp_path / "dist").glob("hisparse_bench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = sorted(p.name for p in (REPO / "configs").glob("*.yaml"))
    assert {"default.yaml", "cpu-small.yaml", "ci.yaml"} <= set(configs)
    assert sorted(n.removeprefix("hisparse/configs/") for n in names if n.startswith("hisparse/configs/")) == configs
    with zipfile.ZipFile(wheel) as z:  # byte for byte the checkout's file
        assert z.read("hisparse/configs/cpu-small.yaml") == (REPO / "configs" / "cpu-small.yaml").read_bytes()
    assert "hisparse/_csrc/include/hisparse/copy.cuh" in names


def test_pip_install_ships_csrc(tmp_path):
    src = source_copy(tmp_path)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "site"), str(src)]
    # setuptools >= 70.1 builds wheels by itself: build offline in this env; else let pip fetch the backend
    if importlib.util.find_spec("setuptools.command.bdist_wheel") is not None:
        cmd[4:4] = ["--no-build-isolation", "--no-index"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)

    shipped = tmp_path / "site" / "hisparse" / "_csrc"
    expected = sorted(p.relative_to(src / "csrc") for p in (src / "csrc").rglob("*") if p.is_file())
    assert expected and Path("include/hisparse/copy.cuh") in expected
    assert sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file()) == expected
    # the installed package (run without site-packages, from outside any checkout) points at its own copy
    out = subprocess.run([sys.executable, "-S", "-c",
                          "from hisparse import env; print(env.CSRC_DIR, env.REPO_ROOT, env.CONFIG_DIRS[-1])"],
                         capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})
    configs = tmp_path / "site" / "hisparse" / "configs"
    assert out.stdout.split() == [str(shipped), "None", str(configs)]
    assert (configs / "default.yaml").read_bytes() == (REPO / "configs" / "default.yaml").read_bytes()
