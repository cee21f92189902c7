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


# -- variables read at call time -------------------------------------------------------------------


def test_call_time_variables_follow_the_environment(monkeypatch, tmp_path):
    for name in ("HISPARSE_MACHINE", "HISPARSE_GIT_COMMIT", "HISPARSE_GIT_DIRTY", "HISPARSE_WORKTREE_DIR",
                 "HISPARSE_ASV_PYTHON", "HISPARSE_CUDA_ARCH"):
        monkeypatch.delenv(name, raising=False)
    assert (env.machine(), env.git_commit_override(), env.git_dirty_override(), env.worktree_dir(),
            env.asv_python(), env.cuda_arch_override()) == (None, None, None, None, None, None)
    monkeypatch.setenv("HISPARSE_MACHINE", "h200-sxm")
    monkeypatch.setenv("HISPARSE_GIT_COMMIT", "9" * 40)
    monkeypatch.setenv("HISPARSE_WORKTREE_DIR", str(tmp_path / "wt"))
    monkeypatch.setenv("HISPARSE_ASV_PYTHON", "/opt/py/bin/python3")
    monkeypatch.setenv("HISPARSE_CUDA_ARCH", "  9.0a ")
    assert env.machine() == "h200-sxm" and env.git_commit_override() == "9" * 40
    assert env.worktree_dir() == tmp_path / "wt" and env.asv_python() == "/opt/py/bin/python3"
    assert env.cuda_arch_override() == "9.0a"
    monkeypatch.setenv("HISPARSE_CUDA_ARCH", "   ")
    assert env.cuda_arch_override() is None  # blank is unset: the GPU's arch, else the default


@pytest.mark.parametrize(("value", "flag"), [("1", True), ("0", False), ("maybe", None), ("", None)])
def test_git_dirty_override_is_a_flag_or_unknown(monkeypatch, value, flag):
    monkeypatch.setenv("HISPARSE_GIT_DIRTY", value)
    assert env.git_dirty_override() is flag


def test_numeric_variables_default_and_refuse_words(monkeypatch):
    monkeypatch.delenv("HISPARSE_INJECT_SLOWDOWN", raising=False)
    monkeypatch.setenv("HISPARSE_NIGHTLY_MIN_EFFECT", " ")
    assert env.inject_slowdown() == 0.0 and env.nightly_min_effect(0.02) == 0.02
    monkeypatch.setenv("HISPARSE_INJECT_SLOWDOWN", "0.10")
    monkeypatch.setenv("HISPARSE_NIGHTLY_MIN_EFFECT", "0.005")
    assert env.inject_slowdown() == 0.10 and env.nightly_min_effect(0.02) == 0.005
    monkeypatch.setenv("HISPARSE_NIGHTLY_MIN_EFFECT", "five percent")
    with pytest.raises(ConfigError, match=r"HISPARSE_NIGHTLY_MIN_EFFECT='five percent': expected a number"):
        env.nightly_min_effect(0.02)


# -- every HISPARSE_* read goes through env.py ---------------------------------------------------------

import ast  # noqa: E402


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _key_problem(key: ast.AST | None) -> str | None:
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value if key.value.startswith("HISPARSE_") else None
    return "a computed name"  # could be a HISPARSE_ variable: only env.py may read those


def environment_reads(source: str, filename: str = "<src>") -> list[str]:
    """``line: variable`` for every read of a HISPARSE_* variable (or of a name the code computes)
    in ``source``: ``os.environ.get/pop/setdefault``, ``os.getenv``, ``os.environ[...]`` read, and
    ``... in os.environ``. Writing one (``os.environ[X] = ...``) or copying the whole environment
    for a child process is no read."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        key, hit = None, False
        if isinstance(node, ast.Call):
            f = node.func
            environ_method = isinstance(f, ast.Attribute) and _is_environ(f.value) and f.attr in (
                "get", "pop", "setdefault")
            getenv = (isinstance(f, ast.Attribute) and f.attr == "getenv") or (
                isinstance(f, ast.Name) and f.id == "getenv")
            hit, key = environ_method or getenv, node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            hit, key = True, node.slice
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            hit, key = any(_is_environ(c) for c in node.comparators), node.left
        problem = _key_problem(key) if hit else None
        if problem:
            found.append((node.lineno, problem))
    return [f"{line}: {problem}" for line, problem in sorted(found)]


def test_no_module_but_env_reads_a_hisparse_variable():
    pkg = REPO / "hisparse"
    bad = [f"{p.relative_to(REPO)}:{hit}" for p in sorted(pkg.rglob("*.py")) if p != pkg / "env.py"
           for hit in environment_reads(p.read_text(), str(p))]
    assert bad == [], "read these through hisparse/env.py:\n" + "\n".join(bad)


def test_the_environment_scanner_sees_every_form_of_read():
    # A planted control: the check above would pass vacuously if the scanner missed these.
    planted = (
        "import os\nfrom os import environ, getenv\n"
        "a = os.environ.get('HISPARSE_A')\n"
        "b = os.getenv('HISPARSE_B', 'x')\n"
        "c = os.environ['HISPARSE_C']\n"
        "d = 'HISPARSE_D' in os.environ\n"
        "e = environ.get('HISPARSE_E')\n"
        "f = getenv('HISPARSE_F')\n"
        "def g(name):\n    return os.environ.get(name)\n"
        "h = os.environ.pop('HISPARSE_H', None)\n"
    )
    assert environment_reads(planted) == ["3: HISPARSE_A", "4: HISPARSE_B", "5: HISPARSE_C", "6: HISPARSE_D",
                                          "7: HISPARSE_E", "8: HISPARSE_F", "10: a computed name",
                                          "11: HISPARSE_H"]
    allowed = (
        "import os\n"
        "os.environ['HISPARSE_SGLANG_SRC'] = '/x'\n"  # a write: a child process inherits it
        "p = os.environ.get('PATH', '')\n"
        "child = {**os.environ, 'HISPARSE_MACHINE': 'm'}\n"
        "kept = {k: v for k, v in os.environ.items() if k != 'HISPARSE_GIT_COMMIT'}\n"
    )
    assert environment_reads(allowed) == []


def _names_read(path: Path) -> set[str]:
    import re  # noqa: PLC0415

    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and re.fullmatch(r"HISPARSE_[A-Z_]+", n.value)}


def test_the_docstring_table_names_every_variable():
    # Every HISPARSE_* name env.py or the asv suite (benchmarks/common.py) reads has a line in the
    # table, and the table names no variable nobody reads.
    read = _names_read(REPO / "hisparse" / "env.py") | _names_read(REPO / "benchmarks" / "common.py")
    assert {"HISPARSE_MACHINE", "HISPARSE_ASV_PATH", "HISPARSE_INJECT_SLOWDOWN"} <= read  # the reader works
    table = env.__doc__.split("Variables", 1)[1]
    import re  # noqa: PLC0415

    # a table entry: the name at the start of a line (indented), followed by what it means
    entries = set(re.findall(r"(?m)^\s+(HISPARSE_[A-Z_]+)\b(?:=\S+)?\s+\S", table))
    assert entries == read
