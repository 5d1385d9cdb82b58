"""Atomic file writes: a crash or kill leaves the old file or the new one, never half of one."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to a temp file in the same folder, fsync it, then ``os.replace`` it into place.

    The temp file is created with mode 0666 filtered by the umask, like any ``open(path, "w")``
    (``tempfile.mkstemp`` would make it 0600, and ``os.replace`` keeps that mode: a team sharing a
    runs directory could then not read each other's files).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:  # astronomically unlikely; try another name
            continue
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def file_mode() -> int:
    """The mode a new file gets under the current umask (``0o666 & ~umask``)."""
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def follow_umask(path: str | os.PathLike) -> None:
    """Give a file that a library created with its own mode (SQLite: 0644) the umask's mode."""
    os.chmod(path, file_mode())
