"""The job runner: a queue in the database, at most ``max_jobs`` worker processes, recovery.

One thread ("scheduler") does all the work, once a second or when woken: reap workers that
exited (record the outcome, register a finished run's profiles), launch queued jobs while there
is room, and refresh the progress columns of running jobs from their trial stores.

Start-up after a crash: every job still ``running`` belongs to a dead service (``owner`` is
another process's id). Those are launched again first (up to ``max_jobs``; the rest go back to
the queue) and their worker resumes from the run folder; the job lock in ``worker.py`` makes the
new worker wait until the old one, which follows its dead parent, is gone.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml
from sqlalchemy import select, update

import evolalloc
from evolalloc.service.db import ACTIVE_STATES, Job, utcnow
from evolalloc.service.profiles import register_run
from evolalloc.service.progress import read_progress, release
from evolalloc.service.redaction import redact, without_secrets
from evolalloc.service.settings import ServiceSettings
from evolalloc.service.worker import EXIT_LOCKED, EXIT_USER_ERROR

log = logging.getLogger("evolalloc.service")
TICK_SECONDS = 1.0
KILL_GRACE_SECONDS = 5.0


class JobError(Exception):
    """A request about a job that cannot be honoured (``status`` is the HTTP status)."""

    def __init__(self, status: int, message: str, field: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.field = field
        self.headers = headers  # e.g. a 429's Retry-After


@dataclass
class _Running:
    process: subprocess.Popen
    log_file: object
    started: float  # time.monotonic() at launch: the wall-time limit counts from here


def child_env() -> dict[str, str]:
    """The environment of a child process: it imports this very evolalloc, not another install."""
    root = str(Path(evolalloc.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**without_secrets(), "PYTHONPATH": root + (os.pathsep + path if path else "")}  # no service token


class JobRunner:
    def __init__(self, settings: ServiceSettings, sessions):
        self.settings = settings
        self.sessions = sessions
        self.owner = uuid.uuid4().hex
        self.jobs_dir = settings.service_dir / "jobs"
        self.locks_dir = settings.service_dir / "locks"
        self._running: dict[int, _Running] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        self._recover()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="scheduler")
        self._thread.start()

    def stop(self) -> None:
        """Stop scheduling and end the workers; their jobs stay ``running`` and resume next start."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            for running in self._running.values():
                _signal_group(running.process, signal.SIGTERM)
            for running in self._running.values():
                try:
                    running.process.wait(timeout=KILL_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    _signal_group(running.process, signal.SIGKILL)
                    running.process.wait()
                running.log_file.close()
            self._running.clear()

    def wake(self) -> None:
        self._wake.set()

    def _recover(self) -> None:
        with self.sessions.begin() as session:
            orphans = list(session.scalars(select(Job).where(Job.status == "running").order_by(Job.started_at, Job.id)))
            for job in orphans[self.settings.max_jobs:]:
                job.status, job.owner, job.pid = "queued", None, None  # no room now: back in the queue
            if orphans:
                log.info("resuming %d job(s) left running by a previous service",
                         min(len(orphans), self.settings.max_jobs))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._reap()
                self._stop_overdue()
                self._launch()
                self._refresh()
            except Exception:  # keep scheduling; the log keeps the traceback
                log.exception("scheduler step failed")
            self._wake.wait(TICK_SECONDS)
            self._wake.clear()

    # -- launching ---------------------------------------------------------------------------

    def _launch(self) -> None:
        with self._lock:
            room = self.settings.max_jobs - len(self._running)
            if room <= 0 or self._stop.is_set():
                return
            with self.sessions() as session:
                orphans = session.scalars(select(Job.id).where(Job.status == "running", Job.owner != self.owner)
                                          .order_by(Job.started_at, Job.id)).all()
                queued = session.scalars(select(Job.id).where(Job.status == "queued").order_by(Job.id)).all()
            for job_id in [*orphans, *queued][:room]:
                self._claim_and_spawn(job_id)

    def _claim_and_spawn(self, job_id: int) -> None:
        with self.sessions.begin() as session:
            claimed = session.execute(
                update(Job).where(Job.id == job_id, Job.status.in_(ACTIVE_STATES),
                                  (Job.owner.is_(None)) | (Job.owner != self.owner))
                .values(status="running", owner=self.owner, attempts=Job.attempts + 1)).rowcount
            if not claimed:
                return
            job = session.get(Job, job_id)
            if job.started_at is None:
                job.started_at = utcnow()
            # A phase from the first second: the worker reports its own once its libraries are imported.
            job.phase, job.phase_done, job.phase_total, job.phase_since = "starting", None, None, utcnow()
            phase_file = self.jobs_dir / f"{job.id}.phase.json"
            phase_file.unlink(missing_ok=True)
            recipe_file = self.jobs_dir / f"{job.id}.yaml"
            recipe_file.write_text(job.recipe, encoding="utf-8")
            error_file = self.jobs_dir / f"{job.id}.error"
            error_file.unlink(missing_ok=True)
            log_file = open(self.jobs_dir / f"{job.id}.log", "a")  # noqa: SIM115 - closed when reaped
            command = [sys.executable, "-m", "evolalloc.service.worker", "--recipe-file", str(recipe_file),
                       "--runs-dir", str(self.settings.runs_dir), "--name", job.name, "--attempt", str(job.attempts),
                       "--parent", str(os.getpid()), "--lock", str(self.locks_dir / f"job-{job.id}.lock"),
                       "--error-file", str(error_file), "--result-file", str(self.jobs_dir / f"{job.id}.result.json"),
                       "--phase-file", str(phase_file)]
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                       env=child_env(), start_new_session=True)
            job.pid = process.pid
            self._running[job.id] = _Running(process, log_file, time.monotonic())
            log.info("job %d (%s): worker %d started, attempt %d", job.id, job.name, process.pid, job.attempts)

    # -- reaping -----------------------------------------------------------------------------

    def _reap(self) -> None:
        with self._lock:
            exited = {job_id: r for job_id, r in self._running.items() if r.process.poll() is not None}
            for job_id, running in exited.items():
                del self._running[job_id]
                running.log_file.close()
                self._record_exit(job_id, running.process.returncode)

    def _record_exit(self, job_id: int, code: int) -> None:
        error_file = self.jobs_dir / f"{job_id}.error"
        message = error_file.read_text(encoding="utf-8").strip() if error_file.exists() else None
        with self.sessions.begin() as session:
            job = session.get(Job, job_id)
            if job is None or job.status != "running" or job.owner != self.owner:
                return  # cancelled meanwhile: the kill was ours
            run_dir = self.settings.runs_dir / job.name
            if code == 0:
                self._update_progress(job)
                try:
                    register_run(session, run_dir, job.id, min_budget=_min_budget(self.jobs_dir, job.id))
                except Exception as err:
                    log.exception("job %d: registering its profiles failed", job.id)
                    job.status, job.error = "failed", f"registering the profiles failed: {err}"
                else:
                    job.status, job.phase = "finished", "done"
            elif code == EXIT_USER_ERROR:
                job.status, job.error = "failed", message or "the recipe was refused"
            elif code == EXIT_LOCKED:
                job.status, job.error = "failed", "a worker of an earlier service still holds this job"
            else:
                how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
                job.status, job.error = "failed", f"worker {how}" + (f": {message}" if message else "")
            job.finished_at, job.pid = utcnow(), None
            log.info("job %d (%s): %s%s", job.id, job.name, job.status, f" ({redact(job.error)})" if job.error else "")
            release(run_dir, (yaml.safe_load(job.recipe) or {}).get("storage"))  # its connections, not kept forever

    # -- the wall-time limit ------------------------------------------------------------------

    def _stop_overdue(self) -> None:
        """A worker running longer than ``--max-job-hours`` is stopped and its job recorded as failed
        with that reason; ``resume`` continues it from its last checkpoint (with a new allowance)."""
        limit = self.settings.limits.max_job_seconds
        now = time.monotonic()
        with self._lock:
            overdue = {job_id: r for job_id, r in self._running.items() if now - r.started > limit}
        for job_id, running in overdue.items():
            with self.sessions.begin() as session:
                stopped = session.execute(
                    update(Job).where(Job.id == job_id, Job.status == "running", Job.owner == self.owner)
                    .values(status="failed", finished_at=utcnow(), pid=None,
                            error=f"stopped at this service's wall-time limit of {_hours(limit)} per run "
                                  "(serve --max-job-hours); resume it to continue from its last checkpoint")).rowcount
            if stopped:
                log.info("job %d: over the wall-time limit, stopped", job_id)
                _signal_group(running.process, signal.SIGTERM)
                threading.Timer(KILL_GRACE_SECONDS, _signal_group, (running.process, signal.SIGKILL)).start()

    # -- progress ----------------------------------------------------------------------------

    def _refresh(self) -> None:
        with self._lock:
            ids = list(self._running)
        for job_id in ids:
            with self.sessions.begin() as session:
                job = session.get(Job, job_id)
                if job is not None and job.status == "running":
                    self._update_progress(job)

    def _update_progress(self, job: Job) -> None:
        reported = read_phase(self.jobs_dir / f"{job.id}.phase.json")
        if reported is not None:  # the worker's own phase (core/phases.py)
            phase, job.phase_done, job.phase_total, since = reported
            if phase != job.phase:
                job.phase, job.phase_since = phase, since
        recipe = yaml.safe_load(job.recipe)
        try:
            progress = read_progress(self.settings.runs_dir / job.name, recipe.get("storage"), job.name)
        except Exception:
            log.debug("job %d: progress not readable yet", job.id, exc_info=True)
            return
        job.evaluations_done = progress.done
        if progress.planned is not None:  # else the plan made at submission stays
            job.evaluations_planned = progress.planned
        job.best_fitness = progress.best_fitness
        if reported is None and progress.phase is not None:  # no phase file: what the run folder tells
            job.phase = progress.phase

    # -- cancel ------------------------------------------------------------------------------

    def cancel(self, job_id: int) -> None:
        with self._lock:
            with self.sessions.begin() as session:
                job = session.get(Job, job_id)
                if job is None:
                    raise JobError(404, f"no job {job_id}")
                cancelled = session.execute(
                    update(Job).where(Job.id == job_id, Job.status.in_(ACTIVE_STATES))
                    .values(status="cancelled", finished_at=utcnow(), pid=None)).rowcount
                if not cancelled:
                    raise JobError(409, f"job {job_id} is already {job.status}")
            running = self._running.get(job_id)
        if running is not None:
            _signal_group(running.process, signal.SIGTERM)
            threading.Timer(KILL_GRACE_SECONDS, _signal_group, (running.process, signal.SIGKILL)).start()
        self.wake()


    # -- resume ------------------------------------------------------------------------------

    def requeue(self, job_id: int) -> None:
        """Queue a failed or cancelled job again; its next worker resumes from the run folder
        (a worker killed by SIGKILL, an out-of-memory kill, a cancel regretted)."""
        with self._lock, self.sessions.begin() as session:
            job = session.get(Job, job_id)
            if job is None:
                raise JobError(404, f"no job {job_id}")
            if job.status not in ("failed", "cancelled"):
                raise JobError(409, f"job {job_id} is {job.status}; only a failed or cancelled job resumes")
            clash = session.scalar(select(Job.id).where(Job.name == job.name, Job.status.in_(ACTIVE_STATES)))
            if clash is not None:
                raise JobError(409, f"job {clash} runs under the name {job.name!r} now")
            job.status, job.owner, job.pid, job.error, job.finished_at = "queued", None, None, None, None
        self.wake()


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    """Signal a worker's whole process group (its session, started for it alone)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def read_phase(path: Path):
    """``(phase, done, total, since)`` from a worker's phase file, or ``None`` (none yet, or unreadable)."""
    from datetime import datetime, timezone

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return (str(data["phase"])[:32], data.get("done"), data.get("total"),
                datetime.fromtimestamp(float(data["since"]), timezone.utc))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds:g} s"


def _min_budget(jobs_dir: Path, job_id: int) -> int:
    """The floor the run expanded its profile with, as its worker recorded it (1 if unknown)."""
    path = jobs_dir / f"{job_id}.result.json"
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["min_budget"])
    except (OSError, ValueError, KeyError, TypeError):
        return 1
