"""A non-editable install ships the CUDA sources as hisparse/_csrc and env.CSRC_DIR finds them there."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_pip_install_ships_csrc(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    # a copy of the files the build reads, so the test never writes build/ into the checkout
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("hisparse", "csrc"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "_csrc", "*.o", "*.so"))
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
    out = subprocess.run([sys.executable, "-S", "-c", "from hisparse import env; print(env.CSRC_DIR, env.REPO_ROOT)"],
                         capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.split() == [str(shipped), "None"]
