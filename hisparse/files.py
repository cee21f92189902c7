"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never a torn one.

Every file the package writes that another process may read while it is written (run files, asv
results, dashboard pages, plots, the JIT stamp a concurrent build checks) goes through here: a temp
file in the same directory (so ``os.replace`` is a rename on one filesystem), fsync, then replace.
"""
from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hisparse.errors import OutputPathError


def _umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before any thread writes.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_umask()  # what open() would give a new file (mkstemp makes it 0600)


def check_target(path: str | os.PathLike) -> Path:
    """OutputPathError unless ``path`` can be written as a regular file: it is not a directory or a
    device (os.replace would swap /dev/null out for a file), the first existing folder above it is a
    folder (not a file) and writable. Checked before any work, so a bad --out fails in a second, not
    after the sweep."""
    path = Path(path)
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # under a regular file: the walk below names that file
        st = None
    except OSError as e:
        raise _bad(path, e) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, a pipe, ...)"
        raise OutputPathError(f"{path}: cannot write the output there: it is {kind}; name a file path instead")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputPathError(f"{path}: cannot write the output there: {parent} is a file, not a folder; "
                              "choose a path in a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{path}: cannot write the output there: the folder {parent} is not writable "
                              "(read-only?); choose a writable folder")
    return path


def _bad(path: Path, error: OSError) -> OutputPathError:
    return OutputPathError(f"{path}: cannot write the output there ({error.strerror or error}); "
                           "choose a writable path in an existing folder, or create it")


def check_new_output(path: str | os.PathLike, *, force: bool, inputs: Iterable[str | os.PathLike] = (),
                     option: str = "the output") -> Path:
    """``check_target`` plus the two rules that keep a user's files: an output that is one of the
    command's ``inputs`` is refused (even with --force: it would replace what it reads), and an existing
    file is kept unless ``force``."""
    path = check_target(path)
    for given in inputs:
        if given is not None and same_file(path, given):
            raise OutputPathError(f"{option} {path} is also an input of this command; writing it would replace "
                                  "that input: choose another path")
    if path.exists() and not force:
        raise OutputPathError(f"{option} {path} already exists; refusing to overwrite it: choose another path, "
                              "or pass --force to replace it")
    return path


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file (through links and relative spellings)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet): compare where they would be
        return Path(a).resolve() == Path(b).resolve()


def check_output_dir(path: str | os.PathLike, *, force: bool, pattern: str = "*", option: str = "--out") -> Path:
    """A folder a command fills (plots, the dashboard): refused when it is a file, under a file or
    read-only, or when it already holds files matching ``pattern`` (another command's, or the user's)
    and not ``force``."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path}: it is a file, not a folder; name a folder")
    check_target(path / ".probe")  # the folder, or the first existing one above it, must be writable
    present = sorted(p.name for p in path.glob(pattern)) if path.is_dir() else []
    if present and not force:
        more = f" and {len(present) - 3} more" if len(present) > 3 else ""
        raise OutputPathError(f"{option} {path} already holds {', '.join(present[:3])}{more}; refusing to overwrite: "
                              "choose an empty or new folder, or pass --force to replace them")
    return path


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, *, fallback: str = "unknown") -> str:
    """``name`` as one path component: runs of characters other than letters, digits, ``.``, ``_`` and
    ``-`` become ``-``, and no result is ``.`` or ``..`` (a machine named ``../../escape`` once wrote asv
    results outside --results). Names already safe are returned unchanged."""
    out = _UNSAFE.sub("-", str(name)).strip("-.") if _UNSAFE.search(str(name)) else str(name)
    return out if out and set(out) != {"."} else fallback


def claim_new(path: str | os.PathLike) -> Path:
    """Create ``path`` empty, failing with FileExistsError when it exists: O_EXCL makes "does the file
    exist" and "make it" one step, so two processes can never both take one name."""
    path = check_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except FileExistsError:
        raise
    except OSError as e:
        raise _bad(path, e) from None
    return path


def write_atomic(path: str | os.PathLike, data: str | bytes, *, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text is encoded with ``encoding``) to ``path`` atomically; makes the parent
    directories. The file keeps its permissions when it exists, else gets the umask's. OutputPathError
    (naming the path) when it cannot be written there."""
    path = check_target(path)
    try:
        return _write_atomic(path, data, encoding)
    except OutputPathError:
        raise
    except OSError as e:
        raise _bad(path, e) from None


def _write_atomic(path: Path, data: str | bytes, encoding: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = _NEW_FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """``data`` as JSON (indent 1, a trailing newline; NaN refused: it is not JSON) written atomically.
    Serialised first, so a value JSON cannot hold raises before anything touches the disk."""
    return write_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")
