"""Temporary spill folders left behind by killed processes, found and removed.

A run whose records spill before it has a run folder (curation's drawn candidates, or any run
without ``spill_dir``) writes them to a temporary folder that ``RecordKeeper.close`` removes. A
process killed by SIGKILL or the OOM killer never closes, and its folder — gigabytes for a
held-out split of 1k-token prompts — stayed in the temp directory for good. So each temporary
folder carries its host and process id in its name, and a new one first removes the folders of
this user and host whose process is gone. (The host: containers that share a temp directory
each have their own process ids; another host's folder is never judged by ours.)
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

PREFIX = "evolalloc-records-"


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def temporary_folder() -> tempfile.TemporaryDirectory:
    """A new temporary spill folder named after this process, after removing stale ones."""
    remove_stale(Path(tempfile.gettempdir()))
    return tempfile.TemporaryDirectory(prefix=f"{PREFIX}{_host()}-{os.getpid()}-")


def remove_stale(directory: Path) -> list[Path]:
    """Remove ``directory``'s spill folders of this user and host whose process no longer exists.

    A folder without a host and process id in its name (older versions), another user's or
    host's, or one whose process is alive is left alone. Returns the folders removed.
    """
    owned = re.compile(re.escape(f"{PREFIX}{_host()}-") + r"(\d+)-")
    removed = []
    for path in directory.glob(f"{PREFIX}*"):
        match = owned.match(path.name)
        if match is None or not path.is_dir() or path.stat().st_uid != os.getuid():
            continue
        if not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


__all__ = ["PREFIX", "remove_stale", "temporary_folder"]
