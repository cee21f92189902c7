"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never a torn one.

Every file the package writes that another process may read while it is written (run files, asv
results, dashboard pages, plots, the JIT stamp a concurrent build checks) goes through here: a temp
file in the same directory (so ``os.replace`` is a rename on one filesystem), fsync, then replace.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before any thread writes.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_umask()  # what open() would give a new file (mkstemp makes it 0600)


def write_atomic(path: str | os.PathLike, data: str | bytes, *, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text is encoded with ``encoding``) to ``path`` atomically; makes the parent
    directories. The file keeps its permissions when it exists, else gets the umask's."""
    path = Path(path)
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
