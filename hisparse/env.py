"""Every path and HISPARSE_* environment variable, in one place.

Read values as ``env.X`` (never ``from hisparse.env import X``) so tests and the CLI can override them
with ``monkeypatch.setattr(env, "X", ...)`` / ``env.X = ...`` (flashinfer's jit/env.py convention).

Cheap values (paths, flags) are computed at import. Values that need a subprocess or a device query
(``CUDA_ARCH``, ``CUDA_HOME``, ``NVCC``, ``NVCC_VERSION``) are computed on first access and then kept
as module attributes: importing this module never touches a GPU.

Variables (every ``HISPARSE_*`` the package reads; tests/test_env.py holds that none is read elsewhere):

  read at import (override with ``env.X = ...``):
    HISPARSE_CACHE_DIR   JIT cache root (default: <repo>/.cache/hisparse/jit in a source checkout,
                         else ./.cache/hisparse/jit). Kernels live in CACHE_DIR/<arch>/<module_name>/.
    HISPARSE_NO_JIT=1    never compile: load prebuilt .so files from the cache or raise KernelUnavailable.
    HISPARSE_SGLANG_SRC  an sglang checkout or unpacked wheel whose HiSparse kernels the sglang_*
                         implementations run (hisparse/bench/sglang.py); unset: an installed sglang.
  read on first access of ``env.CUDA_ARCH`` (``cuda_arch_override()`` reads it at call time):
    HISPARSE_CUDA_ARCH   target, e.g. "9.0" or "9.0a" (space-separated list allowed). Default: the
                         capability of GPU 0, else "9.0" so compile-only builds work without a GPU.
  read at call time by the functions below (tests change them with monkeypatch.setenv):
    HISPARSE_MACHINE     machine name recorded in run files and asv results (``machine()``; unset:
                         the host name, hisparse/results/metadata.py).
    HISPARSE_GIT_COMMIT  the commit a copied tree is (``git_commit_override()``): wins over its git,
                         which a copy may lack or have stale (hisparse/results/metadata.py git_info).
    HISPARSE_GIT_DIRTY   0/1 with HISPARSE_GIT_COMMIT: whether that tree had uncommitted changes
                         (``git_dirty_override()``; anything else: unknown).
    HISPARSE_WORKTREE_DIR  where `hisparse-bench history` makes its worktrees (``worktree_dir()``;
                         unset: <repo's git dir>/../.cache/hisparse/worktrees).
    HISPARSE_ASV_PYTHON  the interpreter named in asv result file names (``asv_python()``; unset:
                         this interpreter). Keep it fixed per machine: it is part of every file name.
    HISPARSE_NIGHTLY_MIN_EFFECT  the gate policy's min_effect (``nightly_min_effect()``, a fraction).
    HISPARSE_INJECT_SLOWDOWN  TEST HOOK of `hisparse-bench gate`: 0.10 multiplies every head sample
                         by 1.10 before gating (``inject_slowdown()``), so CI can prove the gate fires.
  read by benchmarks/common.py (the asv suite; outside the package, it must also run against old
  commits' hisparse, so it reads them itself):
    HISPARSE_ASV_PATH    os.pathsep list put first on sys.path: the tree under test, then site dirs.
    HISPARSE_ASV_CONFIG  the sweep config the suite measures (default configs/ci.yaml).
    HISPARSE_ASV_BACKEND the backend it measures on (default auto).
  not HISPARSE_*, honoured too:
    CUDA_HOME/CUDA_PATH  honoured when they hold bin/nvcc; otherwise derived from the real nvcc.
"""
from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

from hisparse.errors import ConfigError

_PKG_DIR = Path(__file__).resolve().parent


def _version() -> str:
    # pyproject.toml's version is the one source; a tree run without being installed has none.
    try:
        return importlib.metadata.version("hisparse-bench")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


VERSION: str = _version()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _find_repo_root() -> Path | None:
    """The source checkout this package runs from (editable install), or None for an installed wheel."""
    root = _PKG_DIR.parent
    if (root / "csrc").is_dir() and (root / "pyproject.toml").is_file():
        return root
    return None


def _find_csrc_dir() -> Path:
    # Source checkout: <repo>/csrc. Installed wheel: the tree ships as hisparse/_csrc (setup.py copies it).
    if REPO_ROOT is not None:
        return REPO_ROOT / "csrc"
    return _PKG_DIR / "_csrc"


REPO_ROOT: Path | None = _find_repo_root()
CSRC_DIR: Path = _find_csrc_dir()
CACHE_DIR: Path = Path(
    os.environ.get("HISPARSE_CACHE_DIR") or ((REPO_ROOT or Path.cwd()) / ".cache" / "hisparse" / "jit")
).expanduser().resolve()
NO_JIT: bool = _truthy(os.environ.get("HISPARSE_NO_JIT"))
SGLANG_SRC: str | None = os.environ.get("HISPARSE_SGLANG_SRC") or None
# Where sweep configs are found by name: the checkout's configs/ (a source tree), then the copy an
# installed wheel ships as hisparse/configs (setup.py); a name is also looked up in ./configs.
CONFIG_DIRS: tuple[Path, ...] = tuple(d for d in ((REPO_ROOT / "configs") if REPO_ROOT else None,
                                                  _PKG_DIR / "configs") if d is not None)
DEFAULT_CUDA_ARCH = "9.0"  # H20/H100/H200; used when no GPU is visible (compile-only)


# ---------------------------------------------------------------------------------------------
# Variables read at call time: a test's monkeypatch.setenv (or a parent setting them for a child
# run) must take effect without re-importing this module.


def _str(name: str) -> str | None:
    """The variable's value, None when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name) or ""
    try:
        return float(raw) if raw.strip() else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a number, e.g. 0.005") from None


def cuda_arch_override() -> str | None:
    """HISPARSE_CUDA_ARCH, when set (``CUDA_ARCH`` is it, else the GPU's, else the default)."""
    return _str("HISPARSE_CUDA_ARCH")


def machine() -> str | None:
    """HISPARSE_MACHINE, when set."""
    return os.environ.get("HISPARSE_MACHINE") or None


# The variables that name a tree's commit from outside: a parent that runs another tree drops them
# so the child's own git is asked (hisparse/track/history.py).
GIT_OVERRIDE_VARS = ("HISPARSE_GIT_COMMIT", "HISPARSE_GIT_DIRTY")


def git_commit_override() -> str | None:
    """HISPARSE_GIT_COMMIT, when set."""
    return os.environ.get("HISPARSE_GIT_COMMIT") or None


def git_dirty_override() -> bool | None:
    """HISPARSE_GIT_DIRTY as a flag: "1" True, "0" False, anything else (or unset) unknown."""
    value = os.environ.get("HISPARSE_GIT_DIRTY")
    return (value == "1") if value in ("0", "1") else None


def worktree_dir() -> Path | None:
    """HISPARSE_WORKTREE_DIR, when set."""
    value = os.environ.get("HISPARSE_WORKTREE_DIR")
    return Path(value) if value else None


def asv_python() -> str | None:
    """HISPARSE_ASV_PYTHON, when set."""
    return os.environ.get("HISPARSE_ASV_PYTHON") or None


def nightly_min_effect(default: float) -> float:
    """HISPARSE_NIGHTLY_MIN_EFFECT, else ``default``; ConfigError when it is not a number."""
    return _float("HISPARSE_NIGHTLY_MIN_EFFECT", default)


def inject_slowdown() -> float:
    """HISPARSE_INJECT_SLOWDOWN (gate test hook), else 0.0; ConfigError when it is not a number."""
    return _float("HISPARSE_INJECT_SLOWDOWN", 0.0)


# ---------------------------------------------------------------------------------------------
# CUDA toolkit discovery. `nvcc` on PATH may be a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc
# "$@"` on our CPU machines); tvm-ffi takes CUDA_HOME = dirname(dirname(which nvcc)) and then fails to
# link (-lcudart not found), so we resolve the real compiler ourselves (docs/semantics.md §H2).


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _valid_cuda_home(home: Path | str | None) -> Path | None:
    if not home:
        return None
    home = Path(home).expanduser()
    return home.resolve() if (home / "bin" / "nvcc").is_file() else None


def _home_from_nvcc(nvcc: str) -> Path | None:
    """CUDA_HOME of the compiler that `nvcc` (a path) really runs."""
    real = Path(nvcc).resolve()  # follows symlinks (e.g. /usr/bin/nvcc -> /usr/local/cuda/bin/nvcc)
    if _is_elf(real):
        return _valid_cuda_home(real.parent.parent)
    # A script: look for `exec /path/to/nvcc ...` first (no subprocess) ...
    try:
        text = real.read_text(errors="replace")
    except OSError:
        text = ""
    for m in re.finditer(r"""(?m)^\s*exec\s+["']?([^\s"']+/nvcc)\b""", text):
        home = _home_from_nvcc(m.group(1)) if Path(m.group(1)) != real else None
        if home is not None:
            return home
    # ... else ask the driver where it lives: `--dryrun` prints `#$ _HERE_=<real bin dir>`.
    try:
        out = subprocess.run([nvcc, "--dryrun", "-E", "-x", "cu", os.devnull], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"_HERE_=(\S+)", out.stdout + out.stderr)
    return _valid_cuda_home(Path(m.group(1)).parent) if m else None


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", path.name)) or (0,)


def _find_cuda_home() -> Path | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = _valid_cuda_home(os.environ.get(var))
        if home is not None:
            return home
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        home = _home_from_nvcc(nvcc)
        if home is not None:
            return home
    candidates = [Path("/usr/local/cuda")]
    candidates += sorted(Path("/usr/local").glob("cuda-*"), key=_version_key, reverse=True)
    for c in candidates:
        home = _valid_cuda_home(c)
        if home is not None:
            return home
    return None


def _nvcc_version(nvcc: Path | None) -> str | None:
    if nvcc is None:
        return None
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\S+?),? V?(\S+)", out)
    return m.group(2) if m else (out.strip().splitlines() or [None])[-1]


def _detect_cuda_arch() -> str:
    env_arch = cuda_arch_override()
    if env_arch:
        return env_arch
    try:
        import torch  # noqa: PLC0415  (lazy: no device query at import)

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            return f"{major}.{minor}"
    except Exception:  # a broken driver must not stop compile-only use; fall back to the default
        pass
    return DEFAULT_CUDA_ARCH


def _lazy_cuda_home() -> Path | None:
    return _find_cuda_home()


def _get(name: str):
    return globals()[name] if name in globals() else __getattr__(name)


def _lazy_nvcc() -> Path | None:
    home = _get("CUDA_HOME")
    return home / "bin" / "nvcc" if home is not None else None


_LAZY = {
    "CUDA_ARCH": _detect_cuda_arch,  # str, e.g. "9.0"
    "CUDA_HOME": _lazy_cuda_home,  # Path | None
    "NVCC": _lazy_nvcc,  # Path | None: the real compiler binary
    "NVCC_VERSION": lambda: _nvcc_version(_get("NVCC")),  # str | None, e.g. "13.0.88"
}


def __getattr__(name: str):
    if name in _LAZY:
        value = _LAZY[name]()
        globals()[name] = value  # computed once; later reads are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def arch_tag(arch: str) -> str:
    """Directory tag of an arch setting: "9.0" -> "sm_90", "8.9 9.0a" -> "sm_89-sm_90a"."""
    parts = arch.replace(",", " ").replace(";", " ").split()
    if not parts:
        raise ConfigError("empty CUDA arch (HISPARSE_CUDA_ARCH / --arch): expected e.g. '9.0'")
    tags = []
    for p in parts:
        m = re.fullmatch(r"(\d+)\.(\d+)([a-z]?)", p)
        if m is None:
            raise ConfigError(f"invalid CUDA arch {p!r} (HISPARSE_CUDA_ARCH / --arch): expected MAJOR.MINOR, "
                              "e.g. '9.0' or '9.0a'")
        tags.append(f"sm_{m.group(1)}{m.group(2)}{m.group(3)}")
    return "-".join(tags)
