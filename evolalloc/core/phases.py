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
"""

from __future__ import annotations

from typing import Callable

Listener = Callable[[str, "int | None", "int | None"], None]
_listener: Listener | None = None


def listen(listener: Listener | None) -> None:
    """Send every announcement to ``listener(phase, done, total)`` (``None``: stop listening)."""
    global _listener
    _listener = listener


def announce(phase: str, done: int | None = None, total: int | None = None) -> None:
    """The run is in ``phase``; ``done`` of ``total`` steps of it are finished (``None``: not counted)."""
    if _listener is not None:
        _listener(phase, done, total)
