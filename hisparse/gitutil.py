"""The one way the package runs git: ``git -C <repo> <args>``, text output.

``git`` is for commands whose failure is an error (``HisparseError`` naming the command, the
repository and git's own message); ``git_or_none`` for questions a missing git, a directory outside
any checkout or an unknown revision simply answer with None (run metadata never fails, docs/design.md).
Only local git: it works on an offline GPU node.
"""
from __future__ import annotations

import os
import subprocess

from hisparse.errors import HisparseError


def _run(repo: str | os.PathLike, args: tuple[str, ...], timeout: float | None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout)


def git(repo: str | os.PathLike, *args: str, check: bool = True, timeout: float | None = None) -> str:
    """stdout of ``git -C repo args``. ``check``: a non-zero exit (or no git at all) raises
    HisparseError; without it the (possibly empty) stdout is returned whatever the exit."""
    try:
        out = _run(repo, args, timeout)
    except (OSError, subprocess.SubprocessError) as e:
        if check:
            raise HisparseError(f"git {' '.join(args)} failed in {repo}: {e}") from e
        return ""
    if check and out.returncode != 0:
        raise HisparseError(f"git {' '.join(args)} failed in {repo}: {out.stderr.strip()}")
    return out.stdout


def git_or_none(repo: str | os.PathLike, *args: str, timeout: float | None = None) -> str | None:
    """stdout of ``git -C repo args`` when it exits 0; None when it fails, times out or git is missing."""
    try:
        out = _run(repo, args, timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None
