"""The bounded queue: at most ``--max-queued`` jobs wait in the whole service, and at most
``--max-queued-per-token`` per bearer token where tokens are used. A submission (or a resume)
beyond either is a 429 with ``Retry-After``; nothing is queued.

Jobs are counted by their submitter: a fingerprint of the bearer token they came with (a prefix of
its SHA-256, never the token itself), or none on a tokenless service. ``Retry-After`` is when the
first running job is estimated to end (its estimate minus its time so far), kept within
``RETRY_MIN..RETRY_MAX`` seconds; ``RETRY_DEFAULT`` when no running job has an estimate.
"""

from __future__ import annotations

import hashlib
import threading

from sqlalchemy import func, select

from evolalloc.service.db import Job, aware, utcnow
from evolalloc.service.jobs import JobError

RETRY_MIN, RETRY_MAX, RETRY_DEFAULT = 10, 3600, 60
# Counting the queue and adding to it happen under this lock: two submissions at once cannot both
# take the last place (one service process per database: ``app.open_service`` claims it).
QUEUE_LOCK = threading.Lock()


def submitter_of(authorization: str | None, settings) -> str | None:
    """The fingerprint of the request's bearer token, or ``None`` where the service has no tokens.
    (The token guard has already checked the token: only a valid one gets here.)"""
    if settings.token is None and settings.read_token is None:
        return None
    _, _, given = (authorization or "").partition(" ")
    return "sha256:" + hashlib.sha256(given.strip().encode()).hexdigest()[:16]


def queue_counts(session, submitter: str | None = None) -> tuple[int, int]:
    """Jobs queued in the whole service, and of them ``submitter``'s."""
    total = session.scalar(select(func.count()).select_from(Job).where(Job.status == "queued"))
    mine = 0
    if submitter is not None:
        mine = session.scalar(select(func.count()).select_from(Job).where(Job.status == "queued",
                                                                          Job.submitter == submitter))
    return total, mine


def check_room(session, limits, submitter: str | None) -> None:
    """A 429 ``JobError`` with ``Retry-After`` if one more queued job would be over a limit."""
    total, mine = queue_counts(session, submitter)
    if total >= limits.max_queued:
        why = (f"the queue is full: {total} jobs wait, this service's limit is {limits.max_queued} "
               "(serve --max-queued)")
    elif submitter is not None and mine >= limits.max_queued_per_token:
        why = (f"this token has {mine} jobs waiting, the limit per token is {limits.max_queued_per_token} "
               "(serve --max-queued-per-token)")
    else:
        return
    wait = retry_after(session)
    raise JobError(429, f"{why}; try again in {wait} s, or cancel a queued job", headers={"Retry-After": str(wait)})


def retry_after(session) -> int:
    """Seconds until the first running job is estimated to end (see the module's docstring)."""
    now = utcnow()
    left = [job.estimated_seconds - (now - aware(job.started_at)).total_seconds()
            for job in session.scalars(select(Job).where(Job.status == "running"))
            if job.estimated_seconds is not None and job.started_at is not None]
    if not left:
        return RETRY_DEFAULT
    return int(min(RETRY_MAX, max(RETRY_MIN, min(left))))
