"""The service's database: one table of jobs, one of registered profiles (SQLAlchemy 2).

Any SQLAlchemy URL works: by default a SQLite file beside the run folders
(``<runs>/.service/service.db``), on a cluster a shared PostgreSQL (``postgresql://...``), the
same URL family as the trial store. Tables are created on start; later tables (ask/tell studies
and their trials) join the same ``Base``.

Only the service process writes here (workers report through their exit status and files),
so SQLite never sees two writing processes.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

JOB_STATES = ("queued", "running", "finished", "failed", "cancelled")
ACTIVE_STATES = ("queued", "running")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def aware(value: datetime | None) -> datetime | None:
    """``value`` with its time zone: SQLite hands back naive datetimes, and they were written in UTC."""
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def iso(value: datetime | None) -> str | None:
    """A stored time as ISO 8601 with its offset (``None`` stays ``None``)."""
    return None if value is None else aware(value).isoformat()


class Base(DeclarativeBase):
    pass


class Job(Base):
    """One submitted recipe: its run folder ``<runs>/<name>``, its state and progress.

    ``owner`` is the id of the service process that launched the current worker; a job found
    ``running`` under another owner at start-up was orphaned by a killed service and is resumed.
    Progress columns are refreshed by the service from the run's trial store.
    """

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    recipe: Mapped[str] = mapped_column(Text)  # the resolved recipe, YAML
    model: Mapped[str] = mapped_column(String(500))
    task: Mapped[str] = mapped_column(String(100))
    engine: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # worker launches (resumes count)
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    phase: Mapped[str | None] = mapped_column(String(32), nullable=True)  # core/phases.py's names, done
    phase_done: Mapped[int | None] = mapped_column(Integer, nullable=True)  # progress within the phase
    phase_total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    phase_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    estimated_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)  # job_limits.plan_job's estimate
    submitter: Mapped[str | None] = mapped_column(String(32), nullable=True)  # token fingerprint (job_queue.py)
    evaluations_done: Mapped[int] = mapped_column(Integer, default=0)
    evaluations_planned: Mapped[int | None] = mapped_column(Integer, nullable=True)
    best_fitness: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)

    def to_dict(self) -> dict:
        start = aware(self.started_at)
        end = aware(self.finished_at) or (utcnow() if start else None)
        return {
            "id": self.id, "name": self.name, "status": self.status, "model": self.model, "task": self.task,
            "engine": self.engine, "phase": self.phase, "phase_done": self.phase_done, "phase_total": self.phase_total,
            "phase_since": iso(self.phase_since), "estimated_seconds": self.estimated_seconds,
            "evaluations_done": self.evaluations_done, "evaluations_planned": self.evaluations_planned,
            "best_fitness": self.best_fitness, "error": self.error, "attempts": self.attempts,
            "created_at": iso(self.created_at), "started_at": iso(self.started_at),
                "finished_at": iso(self.finished_at),
            "seconds": round((end - start).total_seconds(), 3) if start and end else None,
        }


class Profile(Base):
    """A registered budget profile: the allocation document and what it was searched for."""

    __tablename__ = "profiles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    model: Mapped[str] = mapped_column(String(500), index=True)
    task: Mapped[str | None] = mapped_column(String(100), index=True, nullable=True)
    scorer: Mapped[str] = mapped_column(String(100), index=True)
    granularity: Mapped[str] = mapped_column(String(10), index=True)
    target: Mapped[float] = mapped_column(Float)
    fitness: Mapped[float | None] = mapped_column(Float, nullable=True)
    min_budget: Mapped[int] = mapped_column(Integer, default=1)  # floor used when expanding it
    comparison: Mapped[list | None] = mapped_column(JSON, nullable=True)  # held-out rows at this budget
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id"), nullable=True, index=True)
    source: Mapped[str] = mapped_column(String(20))  # "job" or "upload"
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    document: Mapped[str] = mapped_column(Text)  # the allocation JSON, byte for byte as registered

    def to_dict(self) -> dict:
        return {
            "id": self.id, "content_hash": self.content_hash, "model": self.model, "task": self.task,
            "scorer": self.scorer, "granularity": self.granularity, "target": self.target,
            "fitness": self.fitness, "min_budget": self.min_budget, "comparison": self.comparison,
            "job_id": self.job_id, "source": self.source,
            "created_at": (self.created_at.replace(tzinfo=timezone.utc) if self.created_at.tzinfo is None
                           else self.created_at).isoformat(),
        }


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL (readers never wait for the writer) and a busy timeout."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(connection, _record):  # pragma: no cover - exercised by every test
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()
    else:
        engine = create_engine(url, pool_pre_ping=True)
    Base.metadata.create_all(engine)
    _add_missing_columns(engine)
    return engine


def _add_missing_columns(engine: Engine) -> None:
    """Columns added to a table since a database was made (all nullable): added to it, so a service
    upgraded in place keeps its jobs (``create_all`` makes missing tables, never missing columns)."""
    existing = inspect(engine)
    for table in Base.metadata.sorted_tables:
        if not existing.has_table(table.name):
            continue
        present = {column["name"] for column in existing.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present and column.nullable:
                kind = column.type.compile(dialect=engine.dialect)
                with engine.begin() as connection:
                    connection.execute(text(f'ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}'))


def make_sessions(engine: Engine) -> sessionmaker:
    return sessionmaker(engine, expire_on_commit=False)
