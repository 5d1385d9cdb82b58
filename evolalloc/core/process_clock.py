"""When this process's command began, so a run's wall time counts the imports before it.

The console entry (``evolalloc.cli.run``) marks the moment first thing, before torch and
transformers are imported (seconds, inside the commands); ``search`` and ``resume`` take it as the
start of their run's session. Taken once: a later run in the same process (``evolalloc serve``'s
jobs, a test calling commands in-process) starts its clock when it is prepared, as before.
"""

from __future__ import annotations

import time

_marked: float | None = None


def mark_command_start() -> None:
    global _marked
    _marked = time.time()


def take_command_start() -> float | None:
    """The marked start, or ``None`` if none was marked or it was taken already."""
    global _marked
    started, _marked = _marked, None
    return started
