"""A wheelhouse for offline GPU nodes: the pinned wheels the harness needs there, a wheel of this tree,
and an ``install.sh`` that installs them without network.

What goes in:

- every dependency ``pyproject.toml`` pins exactly (``NAME==VERSION``: apache-tvm-ffi, asv, asv-runner).
  The pins are read from the file (tomllib), never restated here; an installed wheel without the source
  tree reads the same list from its own metadata (``Requires-Dist``);
- :data:`ASV_RUNTIME`, the packages asv imports on the node that a GPU image does not carry;
- ``hisparse-bench`` itself (``pip wheel --no-deps --no-build-isolation .``) unless ``--no-self``;
- with ``--with-sglang VERSION``: sglang's wheel (no dependencies) in ``DIR/sglang/`` and msgspec, for
  the ``sglang_*`` implementations. sglang's wheels are built for one CPython (0.5.23: cp311,
  manylinux_2_34) and would drag in its serving stack, so it is not pip-installed: install.sh unpacks
  it to ``DIR/sglang-src`` and prints ``HISPARSE_SGLANG_SRC`` (its HiSparse kernels are Python and
  CUDA sources, JIT-built on the node; hisparse/bench/sglang.py loads them without ``import sglang``).

Everything is fetched with ``pip download --no-deps --only-binary=:all:`` for the node's interpreter
and platforms, so the build machine's own Python does not matter. torch, numpy, click, matplotlib and
pyyaml are not included: the node's image has them (and its CUDA torch must not be replaced).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hisparse import env
from hisparse.files import write_atomic
from hisparse.errors import HisparseError

DEFAULT_PYTHON_VERSION = "3.12"  # the H200 nodes' interpreter (3.12.3)
DEFAULT_PLATFORMS = (  # newest first; pip takes the first wheel any of them accepts
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
# The harness runs asv on the offline node (results format, existing-environment runner), and asv
# imports these at runtime; pyproject does not list them because pip resolves them from asv's own
# metadata, which `--no-deps` skips. A version constraint, if any, comes from pyproject.toml
# (importlib-metadata<9 there: 10.x needs a further package on 3.11/3.12).
ASV_RUNTIME = ("json5", "pympler", "importlib-metadata", "tabulate")  # `import asv` fails without tabulate

INSTALL_SCRIPT = "install.sh"
SGLANG_DIR = "sglang"  # DIR/sglang/: sglang's wheel, kept out of the *.whl that install.sh pip-installs
SGLANG_SRC_DIR = "sglang-src"  # where install.sh unpacks it
# Interpreters and platforms sglang publishes wheels for, tried after the node's own (0.5.23: cp311 only).
SGLANG_WHEEL_PYTHONS = ("3.11", "3.12", "3.10")
SGLANG_PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_31_x86_64", *DEFAULT_PLATFORMS)
PROJECT = "hisparse-bench"


class WheelhouseError(HisparseError, RuntimeError):
    """A wheelhouse cannot be built: a pip command failed, pins unreadable, conflicting wheels in DIR."""


def normalize(name: str) -> str:
    """PEP 503 project name: ``Importlib_Metadata`` -> ``importlib-metadata``."""
    return re.sub(r"[-_.]+", "-", name).lower()


# PEP 508 subset: NAME [EXTRAS] SPECIFIER [; MARKER]; pyproject holds no URLs.
_REQ = re.compile(r"\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?"
                  r"\s*(?P<spec>[^;]*?)\s*(?:;\s*(?P<marker>.*?))?\s*")


@dataclass(frozen=True)
class Requirement:
    name: str  # as written, extras dropped (an extra's own deps are not fetched: --no-deps)
    specifier: str  # "==X.Y.Z", "<9" or ""
    reason: str  # "pinned in pyproject.toml" / "asv runtime"

    def __str__(self) -> str:
        return f"{self.name}{self.specifier}"

    @property
    def key(self) -> str:
        return normalize(self.name)

    @property
    def pinned(self) -> bool:
        return bool(re.fullmatch(r"===?\s*[^,*\s]+", self.specifier))


def parse_requirement(text: str, reason: str = "") -> Requirement:
    m = _REQ.fullmatch(text)
    if m is None:
        raise WheelhouseError(f"cannot parse dependency {text!r}: expected NAME[extras] SPECIFIER")
    return Requirement(m.group("name"), re.sub(r"\s+", "", m.group("spec")), reason)


def _load_toml(path: Path) -> dict:
    try:
        import tomllib  # noqa: PLC0415  (3.11+)
    except ModuleNotFoundError:  # 3.10: the same parser under its PyPI name
        try:
            import tomli as tomllib  # noqa: PLC0415
        except ModuleNotFoundError:
            from pip._vendor import tomli as tomllib  # noqa: PLC0415  (pip always vendors it)
    with path.open("rb") as f:
        return tomllib.load(f)


def project_dependencies(pyproject: Path | None = None) -> tuple[list[str], str]:
    """The ``[project] dependencies`` strings and where they were read from."""
    if pyproject is None and env.REPO_ROOT is not None:
        pyproject = env.REPO_ROOT / "pyproject.toml"
    if pyproject is not None:
        try:
            deps = _load_toml(pyproject)["project"]["dependencies"]
        except (OSError, ValueError, KeyError) as e:
            raise WheelhouseError(f"cannot read [project] dependencies from {pyproject}: {e}") from e
        return list(deps), str(pyproject)
    from importlib.metadata import PackageNotFoundError, requires  # noqa: PLC0415

    try:  # installed wheel: Requires-Dist is pyproject's list (plus the extras, marked `extra == ...`)
        deps = [r for r in requires(PROJECT) or [] if "extra ==" not in r.replace('"', "").replace("'", "")]
    except PackageNotFoundError as e:
        raise WheelhouseError(f"no source checkout and no installed {PROJECT} metadata: cannot read the pins") from e
    return deps, f"{PROJECT} metadata"


def requirements(pyproject: Path | None = None) -> list[Requirement]:
    """What the wheelhouse holds besides this tree: the exact pins of pyproject.toml, then ASV_RUNTIME
    (with pyproject's constraint where it names the package)."""
    deps, source = project_dependencies(pyproject)
    declared = {r.key: r for r in (parse_requirement(d, f"pinned in {Path(source).name}") for d in deps)}
    out = [r for r in declared.values() if r.pinned]
    if not out:
        raise WheelhouseError(f"{source} pins no dependency with ==: nothing to put in the wheelhouse")
    for name in ASV_RUNTIME:
        dep = declared.get(normalize(name))
        if dep is None or not dep.pinned:
            out.append(Requirement(name, dep.specifier if dep else "", "asv runtime on the node"))
    return out


def check_python_version(text: str) -> str:
    """``3.12`` / ``3.12.3`` -> unchanged; anything else -> ValueError naming what is expected."""
    value = text.strip()
    if not re.fullmatch(r"3\.\d{1,2}(\.\d{1,3})?", value):
        raise ValueError(f"{text!r} is not a Python version: expected MAJOR.MINOR of the node's "
                         "interpreter, e.g. 3.12")
    return value


def check_platform(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[a-z0-9_]+", value):
        raise ValueError(f"{text!r} is not a wheel platform tag: expected e.g. manylinux_2_28_x86_64")
    return value


def download_command(req: Requirement | str, dest: Path, python_version: str, platforms: tuple[str, ...] | list[str],
                     python: str | None = None) -> list[str]:
    cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", python_version, "--implementation", "cp"]
    for p in platforms:
        cmd += ["--platform", p]
    return [*cmd, "-d", str(dest), str(req)]


def self_wheel_command(dest: Path, python: str | None = None) -> list[str]:
    """Run in the source checkout (cwd): a py3-none-any wheel of this tree, csrc/ shipped as hisparse/_csrc."""
    return [python or sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", ".",
            "-w", str(dest)]


def sglang_requirements(version: str) -> list[Requirement]:
    """``--with-sglang VERSION``: msgspec (the kernel loader's one extra import) for the node; sglang
    itself is fetched apart (``sglang_download_commands``)."""
    if not re.fullmatch(r"\d+(\.\d+)*([a-z]+\d*)?(\.post\d+)?", version.strip()):
        raise WheelhouseError(f"--with-sglang: {version!r} is not a version: expected e.g. 0.5.23")
    return [Requirement("msgspec", "", "sglang's kernel loader imports it (--with-sglang)")]


def sglang_download_commands(version: str, dest: Path, python_version: str, python: str | None = None) -> list[list[str]]:
    """pip download of sglang==VERSION (no deps) into ``dest``, one command per interpreter to try: the
    node's first, then those sglang publishes for."""
    pythons = [python_version] + [p for p in SGLANG_WHEEL_PYTHONS if p != python_version]
    return [download_command(f"sglang=={version}", dest, p, SGLANG_PLATFORMS, python) for p in pythons]


def install_script(python_version: str, platforms: tuple[str, ...] | list[str], reqs: list[Requirement],
                   self_wheel: bool, sglang: str | None = None) -> str:
    major, minor = python_version.split(".")[:2]
    contents = [f"#   {r}  ({r.reason})" for r in reqs]
    if self_wheel:
        contents.append(f"#   {PROJECT} (wheel of the source tree)")
    if sglang:
        contents.append(f"#   sglang=={sglang} in {SGLANG_DIR}/ (unpacked to {SGLANG_SRC_DIR}/, not installed)")
    unpack = "" if not sglang else f"""
# sglang: unpacked, not installed (its wheel is for one CPython and pulls in the serving stack); the
# harness loads its HiSparse kernels from the tree (HISPARSE_SGLANG_SRC).
for w in "$here"/{SGLANG_DIR}/sglang-*.whl; do
  if [ ! -d "$here/{SGLANG_SRC_DIR}/sglang" ]; then
    "$PYTHON" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$here/{SGLANG_SRC_DIR}" >&2
  fi
  echo "export HISPARSE_SGLANG_SRC=$here/{SGLANG_SRC_DIR}"
done
"""
    return f"""#!/usr/bin/env bash
# Offline install of the wheels next to this script (written by `hisparse-bench wheelhouse`).
# Built for CPython {python_version} on {", ".join(platforms)}; holds
{chr(10).join(contents)}
#
# usage: bash install.sh                  -> pip install into ${{TARGET:-/tmp/site}}, then print the
#                                            PYTHONPATH/PATH lines to use it: eval "$(bash install.sh)"
#        TARGET=env bash install.sh       -> into the current Python environment instead
#        PYTHON=/path/to/python3 ...      -> the interpreter to install for (default: python3)
# No index is contacted and no dependency is resolved (--no-index --no-deps): the node's own torch,
# numpy, click, matplotlib and pyyaml are used as they are.
set -euo pipefail
here=$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)
PYTHON=${{PYTHON:-python3}}
TARGET=${{TARGET:-/tmp/site}}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != ({major}, {minor}))'; then
  echo "install.sh: this wheelhouse is for Python {major}.{minor}; $PYTHON is $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')." \\
       "Rebuild it with: hisparse-bench wheelhouse DIR --python-version X.Y" >&2
  exit 1
fi
shopt -s nullglob
wheels=("$here"/*.whl)
if [ ${{#wheels[@]}} -eq 0 ]; then
  echo "install.sh: no .whl files in $here" >&2
  exit 1
fi
# pip's own output goes to stderr so that stdout is only the lines to eval
if [ "$TARGET" = env ]; then
  "$PYTHON" -m pip install --no-index --no-deps --no-cache-dir "${{wheels[@]}}" >&2
  echo "# installed into $("$PYTHON" -c 'import sys; print(sys.prefix)')" >&2
else
  "$PYTHON" -m pip install --no-index --no-deps --no-cache-dir --upgrade --target "$TARGET" "${{wheels[@]}}" >&2
  echo "export PYTHONPATH=$TARGET\\${{PYTHONPATH:+:\\$PYTHONPATH}}"
  echo "export PATH=$TARGET/bin:\\$PATH"
fi
{unpack}"""


def wheel_project(path: Path) -> str:
    """Normalized project name of a wheel file (``Pympler-1.1-py3-none-any.whl`` -> ``pympler``)."""
    return normalize(path.name.split("-", 1)[0])


def _conflicts(dest: Path) -> list[str]:
    by_project: dict[str, list[str]] = {}
    for w in sorted(dest.glob("*.whl")):
        by_project.setdefault(wheel_project(w), []).append(w.name)
    return [f"{p}: {', '.join(names)}" for p, names in by_project.items() if len(names) > 1]


def _tail(proc: subprocess.CompletedProcess, lines: int = 25) -> str:
    text = "\n".join(s for s in ((proc.stdout or "").strip(), (proc.stderr or "").strip()) if s)
    return "\n".join(text.splitlines()[-lines:]) or f"(no output, exit status {proc.returncode})"


@dataclass
class Report:
    dest: Path
    requirements: list[Requirement]
    wheels: list[str]
    install_script: Path
    self_wheel: bool


def build(dest: Path, python_version: str = DEFAULT_PYTHON_VERSION,
          platforms: tuple[str, ...] | list[str] = DEFAULT_PLATFORMS, self_wheel: bool = True,
          pyproject: Path | None = None, echo=print, sglang: str | None = None) -> Report:
    """Download the wheels into ``dest``, build this tree's wheel there, write ``dest/install.sh``.
    ``sglang``: also sglang's wheel of that version (no deps) in ``dest/sglang/``, and msgspec."""
    python_version = check_python_version(python_version)
    platforms = tuple(check_platform(p) for p in platforms) or DEFAULT_PLATFORMS
    reqs = requirements(pyproject) + (sglang_requirements(sglang) if sglang else [])
    root = env.REPO_ROOT
    if self_wheel and root is None:
        raise WheelhouseError(f"{PROJECT} runs from an installed wheel, not a source checkout: there is no "
                              "tree to build a wheel of (pass --no-self, and copy that wheel in yourself)")
    dest = Path(dest).expanduser().resolve()
    dest.mkdir(parents=True, exist_ok=True)

    failures = []
    for r in reqs:
        echo(f"download {r}  ({r.reason})")
        proc = subprocess.run(download_command(r, dest, python_version, platforms), capture_output=True, text=True)
        if proc.returncode != 0:
            hint = ("" if set(DEFAULT_PLATFORMS) <= set(platforms) else
                    "\n(pip matches --platform tags exactly: manylinux_2_28 does not imply the older "
                    "manylinux_2_17/manylinux2014 tags many wheels carry; list each tag the node accepts)")
            failures.append(f"pip download {r} failed:\n{_tail(proc)}{hint}")
    if sglang:
        failure = _download_sglang(sglang, dest / SGLANG_DIR, python_version, echo)
        if failure:
            failures.append(failure)
    if self_wheel:
        from hisparse.results.metadata import git_info  # noqa: PLC0415

        commit, dirty = git_info(root)
        state = f" at {commit[:12]}{' + uncommitted changes' if dirty else ''}" if commit else ""
        echo(f"wheel  {PROJECT} from {root}{state}")
        # setuptools builds in the checkout (build/, *.egg-info): remove what this build created. A build/
        # that was already there is reused, and a file deleted from the tree since would still be shipped.
        scratch = [p for p in (root / "build", root / f"{PROJECT.replace('-', '_')}.egg-info") if not p.exists()]
        if (root / "build").exists():
            echo(f"note: {root / 'build'} exists and setuptools reuses it; delete it if files were removed "
                 "from the tree since it was made (they would still be in the wheel)")
        try:
            proc = subprocess.run(self_wheel_command(dest), cwd=root, capture_output=True, text=True)
        finally:
            for p in scratch:
                shutil.rmtree(p, ignore_errors=True)
        if proc.returncode != 0:
            failures.append(f"pip wheel of {root} failed (needs setuptools>=70.1 or `wheel` in this "
                            f"environment: --no-build-isolation). Install one of them, or leave this tree's "
                            f"wheel out with --no-self: a node that runs from a checkout "
                            f"(scripts/gpu_node_setup.sh puts the tree on PYTHONPATH) needs only the "
                            f"others.\n{_tail(proc)}")
    if failures:
        raise WheelhouseError("\n\n".join(failures))
    conflicts = _conflicts(dest)
    if conflicts:  # install.sh installs every *.whl: two versions of one project make pip refuse
        raise WheelhouseError(f"{dest} holds more than one wheel of a project (left from an earlier build?); "
                              "remove the stale ones and rerun:\n  " + "\n  ".join(conflicts))
    script = dest / INSTALL_SCRIPT
    write_atomic(script, install_script(python_version, platforms, reqs, self_wheel, sglang))
    script.chmod(0o755)
    return Report(dest, reqs, sorted(w.name for w in dest.glob("*.whl")), script, self_wheel)


def _download_sglang(version: str, dest: Path, python_version: str, echo=print) -> str | None:
    """sglang==VERSION's wheel into ``dest`` (the first interpreter tag that has one); an error text or None."""
    dest.mkdir(parents=True, exist_ok=True)
    stale = [w for w in dest.glob("sglang-*.whl") if not w.name.startswith(f"sglang-{version}-")]
    if stale:
        return f"{dest} holds another sglang wheel ({', '.join(w.name for w in stale)}): remove it and rerun"
    last = None
    for cmd in sglang_download_commands(version, dest, python_version):
        echo(f"download sglang=={version} (no deps, CPython {cmd[cmd.index('--python-version') + 1]})")
        last = subprocess.run(cmd, capture_output=True, text=True)
        if not last.returncode:
            return None
    return f"pip download sglang=={version} failed for every interpreter tried:\n{_tail(last)}"
