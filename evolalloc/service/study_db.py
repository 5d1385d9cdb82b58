"""The ask/tell tables: studies, and their trials with leases (same ``Base`` as jobs and profiles).

The trials *are* the optimizer state. A study's CMA-ES is never serialised: on start-up the
service replays ask/tell from the stored finished trials (``GroupwiseAlgorithm`` is seeded and
deterministic), exactly as ``evolalloc resume`` does from an Optuna study. The trials live here,
in the service's own database, rather than in an Optuna study, because a trial's lease (who
holds it, until when, who held it before) and its result must change in one transaction with
the study's progress: a SIGKILL then leaves either the whole completion or none of it.

A generation's candidates are written as ``pending`` rows when it is asked, so a trial's id is
stable across restarts: a client holding trial 17 when the service died completes trial 17 after.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from evolalloc.service.db import Base, iso, utcnow

TRIAL_OPEN = ("pending", "leased")
TRIAL_DONE = ("COMPLETE", "FAIL")


class Study(Base):
    """One ask/tell search: its settings (a ``SearchConfig`` and what the registry needs) and counters."""

    __tablename__ = "studies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="running")  # running / finished
    config: Mapped[dict] = mapped_column(JSON)  # SearchConfig.to_dict()
    spec: Mapped[dict] = mapped_column(JSON)  # model, geometry, scorer, task, expansions, lease_seconds
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    evaluations_done: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    reissues: Mapped[int] = mapped_column(Integer, default=0)  # leases that expired and went to another client
    duplicates: Mapped[int] = mapped_column(Integer, default=0)  # results for trials already finished (ignored)
    best_fitness: Mapped[float | None] = mapped_column(Float, nullable=True)
    best_task_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    best_budgets: Mapped[list | None] = mapped_column(JSON, nullable=True)
    profile_ids: Mapped[list | None] = mapped_column(JSON, nullable=True)


class StudyTrial(Base):
    """One candidate of a study: ``pending`` -> ``leased`` -> ``COMPLETE`` / ``FAIL``."""

    __tablename__ = "study_trials"
    __table_args__ = (UniqueConstraint("study_id", "group", "generation", "candidate"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    group: Mapped[int] = mapped_column(Integer)
    generation: Mapped[int] = mapped_column(Integer)
    candidate: Mapped[int] = mapped_column(Integer)
    ratios: Mapped[list] = mapped_column(JSON)  # the optimizer's x for the group's units
    budgets: Mapped[list] = mapped_column(JSON)  # [num_layers][num_kv_heads]
    state: Mapped[str] = mapped_column(String(10), default="pending", index=True)
    client_id: Mapped[str | None] = mapped_column(String(200), nullable=True)  # current holder
    clients: Mapped[list] = mapped_column(JSON, default=list)  # every client it was issued to
    lease_expires: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    issues: Mapped[int] = mapped_column(Integer, default=0)
    task_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    cache_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    fitness: Mapped[float | None] = mapped_column(Float, nullable=True)
    mean_budget: Mapped[float | None] = mapped_column(Float, nullable=True)
    group_mean_budget: Mapped[float | None] = mapped_column(Float, nullable=True)
    seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    metrics: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    finished_by: Mapped[str | None] = mapped_column(String(200), nullable=True)

    def to_dict(self) -> dict:
        return {
            "id": self.id, "study_id": self.study_id, "group": self.group, "generation": self.generation,
            "candidate": self.candidate, "budgets": self.budgets, "state": self.state, "client_id": self.client_id,
            "lease_expires": iso(self.lease_expires), "task_score": self.task_score, "cache_score": self.cache_score,
            "fitness": self.fitness, "error": self.error, "metrics": self.metrics,
        }
