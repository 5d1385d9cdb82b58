"""A run's wall time: every session that worked on it, from its start to its end, added up.

A run may take several sessions: ``search`` starts it (its imports, checks, model load and curation
count: the clock starts when the ``evolalloc`` command began, ``core/process_clock.py``, or when
``prepare_run`` is called from Python), a kill stops it, ``resume`` continues it. Each
session is one line of the run folder's ``sessions.json`` (``{"started": epoch s, "ended": epoch s}``),
written when it begins, so a session that is killed is still there. A killed session never wrote its
end: it is taken as the newest file the run folder holds when the next session begins (the last
thing it did that left a trace), and marked ``"killed": true``. The time between a kill and the
``resume`` is no session's, so it is not counted.

A session that ends also keeps where its time went, by phase (``core/phases.py``: starting,
prefilling, searching, comparing, ...); a killed one cannot (nor a folder from before this), so the
run's breakdown then says it covers only the sessions that recorded it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from evolalloc.config.run_folder import SESSIONS_FILE
from evolalloc.core import phases
from evolalloc.core.fileio import write_atomic


def _read(run_dir: Path) -> list[dict]:
    path = run_dir / SESSIONS_FILE
    if not path.is_file():
        return []
    try:
        sessions = json.loads(path.read_text())
    except (OSError, ValueError):
        return []  # a damaged clock costs the report its wall time, never the run
    return sessions if isinstance(sessions, list) else []


def _newest_write(run_dir: Path) -> float:
    """The newest modification time of any file in ``run_dir`` but the clock's own."""
    times = [p.stat().st_mtime for p in run_dir.rglob("*") if p.is_file() and p.name != SESSIONS_FILE]
    return max(times, default=0.0)


def begin_session(run_dir: str | Path, started: float, by_phase: bool = True) -> None:
    """Record a session of the run in ``run_dir`` that began at ``started`` (``time.time()``),
    closing a previous one that was killed (no end written) at the folder's newest write.
    ``by_phase=False``: the session will not say where its time went (a start set back over work this
    process did for other runs, as ``benchmarks/search_versus.py`` does, would credit that work to it)."""
    run_dir = Path(run_dir)
    sessions = _read(run_dir)
    if sessions and sessions[-1].get("ended") is None:
        last = sessions[-1]
        last["ended"] = max(float(last["started"]), min(_newest_write(run_dir), started))
        last["killed"] = True
    sessions.append({"started": float(started), "ended": None, **({} if by_phase else {"by_phase": False})})
    write_atomic(run_dir / SESSIONS_FILE, json.dumps(sessions, indent=1) + "\n")


def end_session(run_dir: str | Path, now: float | None = None) -> float:
    """Close the current session at ``now`` (default: the present) and return the run's wall time
    in seconds: the sum of every session's length."""
    run_dir = Path(run_dir)
    sessions = _read(run_dir)
    now = time.time() if now is None else now
    if not sessions or sessions[-1].get("ended") is not None:
        sessions.append({"started": now, "ended": None})  # a folder from before the clock: this moment only
    sessions[-1]["ended"] = now
    if sessions[-1].get("by_phase", True):
        spent = phases.spent(float(sessions[-1]["started"]), now)
        sessions[-1]["phases"] = {phase: round(seconds, 1) for phase, seconds in spent.items()}
    write_atomic(run_dir / SESSIONS_FILE, json.dumps(sessions, indent=1) + "\n")
    return sum(max(0.0, float(s["ended"]) - float(s["started"])) for s in sessions)


def sessions_of(run_dir: str | Path) -> list[dict]:
    """The sessions recorded for the run in ``run_dir`` (empty for a folder made before the clock)."""
    return _read(Path(run_dir))


def phase_seconds(run_dir: str | Path) -> tuple[dict[str, float], bool]:
    """Seconds by phase over the sessions of the run in ``run_dir`` that recorded them, in the order
    first entered, and whether every session did (``False``: one was killed, was begun ``by_phase=False``,
    or predates the breakdown)."""
    totals: dict[str, float] = {}
    sessions = _read(Path(run_dir))
    for session in sessions:
        for phase, seconds in (session.get("phases") or {}).items():
            totals[phase] = totals.get(phase, 0.0) + float(seconds)
    return totals, bool(sessions) and all(isinstance(s.get("phases"), dict) for s in sessions)
