"""Where a long run stands, for whoever watches it: a phase name and, where it can be counted,
the progress within it (``prefilling`` 3 of 20 prompts, ``searching`` 40 of 400 evaluations).

The pipeline announces phases at the points where the slow work happens (the model load, drawing a
split's instances, each prefill, each step of training a scorer, each generation of the search, each
held-out evaluation); nobody listens by default, so a run from the command line pays one ``None``
test per announcement. The service's job worker installs a listener that writes the phase to a
file its service reads (``service/worker.py``): a person watching a job can tell a slow start from
a hung one.

One listener per process (a worker runs one job); announcements come from the thread that runs
the pipeline.

Every change of phase is also noted with its time, so a run can say where its time went
(``spent``; its report, ``pipeline/wall_clock.py``). Work between two announcements counts for the
earlier one.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

Listener = Callable[[str, "int | None", "int | None"], None]
_listener: Listener | None = None
# (time.time(), phase) at each change of phase; bounded for a process that lives long (evolalloc serve).
_changes: deque[tuple[float, str]] = deque(maxlen=10_000)


def listen(listener: Listener | None) -> None:
    """Send every announcement to ``listener(phase, done, total)`` (``None``: stop listening)."""
    global _listener
    _listener = listener


def announce(phase: str, done: int | None = None, total: int | None = None) -> None:
    """The run is in ``phase``; ``done`` of ``total`` steps of it are finished (``None``: not counted)."""
    if not _changes or _changes[-1][1] != phase:
        _changes.append((time.time(), phase))
    if _listener is not None:
        _listener(phase, done, total)


def spent(since: float, now: float | None = None, first: str = "starting") -> dict[str, float]:
    """Seconds spent in each phase between ``since`` and ``now`` (``time.time()``; default: the present), in
    the order first entered; the time before the first announcement after ``since`` is ``first``'s (a
    run's imports, checks and recipe reading come before any)."""
    now = time.time() if now is None else now
    totals: dict[str, float] = {}
    phase, start = first, since
    for when, entered in list(_changes):
        if when <= since or when > now:
            continue
        totals[phase] = totals.get(phase, 0.0) + (when - start)
        phase, start = entered, when
    totals[phase] = totals.get(phase, 0.0) + max(0.0, now - start)
    return totals
