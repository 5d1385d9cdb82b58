"""Ask/tell studies: the service runs Algorithm 1 (``GroupwiseAlgorithm``) for remote evaluators.

``StudyManager`` drives the same ``GroupwiseAlgorithm`` as the in-process loop; where the loop
calls an evaluator, the manager leases the generation's candidates to clients and waits for
their results. All of it happens under one lock in the service process (the only writer), one
database transaction per request.

* suggest: the client's outstanding trial again (idempotent); else a pending candidate of the
  current generation; else one whose lease expired (re-issued, counted); else "wait" — every
  candidate is out and the generation barrier holds — with a retry-after.
* complete / fail: the server scores the trial from its own budgets (``GroupwiseAlgorithm.score``:
  CacheScore and fitness; FAIL never gets a number). The first result of a trial counts, from
  its current holder or from an earlier one whose lease expired; any later one is a duplicate,
  ignored and counted. The last result of a generation tells the optimizer and asks the next
  generation (new pending rows), in the same transaction.
* restart: each study's algorithm is rebuilt by replaying its finished generations; the current
  generation's stored candidates must be what the replayed optimizer asks (else refused).
* leases: ``suggest`` hands each trial out with a lease secret (an HMAC of the trial, the issue
  and the client under the service's own key), returned by ``suggest`` alone and never listed;
  ``complete`` / ``fail`` must present it, so seeing a trial's holder in a listing is not
  enough to report a result for it. Nothing new is stored: the secret is recomputed.
"""

from __future__ import annotations

import hmac
import json
import math
import os
import threading
from datetime import timedelta, timezone

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from evolalloc.core.allocation import Allocation
from evolalloc.core.scorer_names import canonical_scorer
from evolalloc.engine.base import EvalResult
from evolalloc.search.config import SearchConfig
from evolalloc.search.groupwise import Candidate, GroupwiseAlgorithm
from evolalloc.search.store import TrialRecord
from evolalloc.service.db import utcnow
from evolalloc.service.jobs import JobError
from evolalloc.service.study_db import TRIAL_DONE, Study, StudyTrial

DEFAULT_RETRY = 0.2  # seconds; before any result has told how long a trial takes
MIN_RETRY, MAX_RETRY = 0.01, 30.0


def _aware(value):
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def _record(row: StudyTrial, units: list[int]) -> TrialRecord:
    return TrialRecord(
        group=row.group, generation=row.generation, candidate=row.candidate, units=units, ratios=list(row.ratios),
        budgets=row.budgets, mean_budget=row.mean_budget or 0.0, group_mean_budget=row.group_mean_budget or 0.0,
        state=row.state, task_score=row.task_score, cache_score=row.cache_score, fitness=row.fitness,
        error=row.error, seconds=row.seconds or 0.0,
    )


class StudyManager:
    """The service's studies; ``sessions`` is the service's sessionmaker."""

    def __init__(self, sessions, on_finish=None, lease_key: bytes | None = None):
        self.sessions = sessions
        self.lease_key = lease_key if lease_key is not None else os.urandom(32)
        self.lock = threading.RLock()
        self._algorithms: dict[int, GroupwiseAlgorithm] = {}
        # Per study, a running mean of a trial's turnaround (lease to result): how long a client
        # told "wait" should sleep. Memory only; after a restart it starts from DEFAULT_RETRY.
        self._turnaround: dict[int, float] = {}
        self.on_finish = on_finish  # callable(session, study, algorithm) -> list of profile ids

    # -- create -------------------------------------------------------------------------------
    def create(self, name: str, config: SearchConfig, spec: dict) -> dict:
        # The first generation is asked before taking the lock every study shares: a big one
        # must not hold up the other studies' suggests and results.
        algorithm = GroupwiseAlgorithm(config)
        algorithm.ask()
        with self.lock, self.sessions.begin() as session:
            study = Study(name=name, config=config.to_dict(), spec=spec)
            session.add(study)
            session.flush()
            self._insert_generation(session, study, algorithm)
            self._algorithms[study.id] = algorithm
            return self._summary(session, study, algorithm)

    # -- state --------------------------------------------------------------------------------
    def _study(self, session: Session, study_id: int) -> Study:
        study = session.get(Study, study_id)
        if study is None:
            raise JobError(404, f"no study {study_id}")
        return study

    def _rows(self, session: Session, study_id: int, position: tuple[int, int] | None = None) -> list[StudyTrial]:
        query = select(StudyTrial).where(StudyTrial.study_id == study_id)
        if position is not None:
            query = query.where(StudyTrial.group == position[0], StudyTrial.generation == position[1])
        return list(session.scalars(query.order_by(StudyTrial.group, StudyTrial.generation, StudyTrial.candidate)))

    def _algorithm(self, session: Session, study: Study) -> GroupwiseAlgorithm:
        """The study's algorithm, rebuilt by replay when the service (re)started."""
        algorithm = self._algorithms.get(study.id)
        if algorithm is not None:
            return algorithm
        config = SearchConfig(**{**study.config, "ratio_bounds": tuple(study.config["ratio_bounds"])
                                 if study.config.get("ratio_bounds") else None})
        algorithm = GroupwiseAlgorithm(config)
        by_key: dict[tuple[int, int], list[StudyTrial]] = {}
        for row in self._rows(session, study.id):
            by_key.setdefault((row.group, row.generation), []).append(row)
        while not algorithm.done:
            candidates = algorithm.ask()
            rows = by_key.get(algorithm.position, [])
            if len(rows) != len(candidates) or not all(
                    algorithm.matches(c, r.ratios) for c, r in zip(candidates, rows)):
                raise RuntimeError(f"study {study.id}: the stored trials of generation {algorithm.position} are not "
                                   "what the replayed optimizer asks (another optimizer library version?)")
            if any(r.state not in TRIAL_DONE for r in rows):
                break  # the current generation
            algorithm.tell([_record(r, [int(u) for u in c.units]) for c, r in zip(candidates, rows)])
        self._algorithms[study.id] = algorithm
        return algorithm

    def _insert_generation(self, session: Session, study: Study, algorithm: GroupwiseAlgorithm) -> None:
        for c in algorithm.ask():
            session.add(StudyTrial(study_id=study.id, group=c.group, generation=c.generation, candidate=c.index,
                                   ratios=[float(v) for v in c.x], budgets=c.budgets.tolist(), state="pending",
                                   clients=[]))
        session.flush()

    # -- suggest ------------------------------------------------------------------------------
    def suggest(self, study_id: int, client_id: str) -> dict:
        with self.lock:
            try:
                with self.sessions.begin() as session:
                    return self._suggest(session, study_id, client_id)
            except BaseException:
                self._algorithms.pop(study_id, None)  # memory may be ahead of a rolled-back database
                raise

    def _suggest(self, session: Session, study_id: int, client_id: str) -> dict:
        study = self._study(session, study_id)
        if study.status == "finished":
            return {"status": "finished", "study": self._summary(session, study, None)}
        algorithm = self._algorithm(session, study)
        now = utcnow()
        lease = timedelta(seconds=float(study.spec.get("lease_seconds", 600)))
        rows = self._rows(session, study.id, algorithm.position)
        mine = [r for r in rows if r.state == "leased" and r.client_id == client_id]
        if mine:  # idempotent: the same trial again (its lease renewed)
            row = mine[0]
            row.lease_expires = now + lease
            return {"status": "trial", "trial": self._trial(row, study)}
        pending = [r for r in rows if r.state == "pending"]
        expired = [r for r in rows if r.state == "leased" and _aware(r.lease_expires) <= now]
        if pending or expired:
            row = (pending or expired)[0]
            if row.state == "leased":
                study.reissues += 1
            row.state, row.client_id, row.lease_expires = "leased", client_id, now + lease
            row.clients = [*row.clients, client_id] if client_id not in row.clients else list(row.clients)
            row.issues += 1
            return {"status": "trial", "trial": self._trial(row, study)}
        out = [_aware(r.lease_expires) for r in rows if r.state == "leased"]
        retry = self._turnaround.get(study.id, DEFAULT_RETRY) / 2  # the barrier lifts with the last result
        if out:  # or, at the latest, when a lease expires and the trial can be re-issued
            retry = min(retry, max(0.0, min((t - now).total_seconds() for t in out)))
        retry = min(MAX_RETRY, max(MIN_RETRY, retry))
        return {"status": "wait", "retry_after": round(retry, 3),
                "message": f"generation {algorithm.generation} of group "
                           f"{algorithm.group} is all out; wait for its results"}

    def _trial(self, row: StudyTrial, study: Study) -> dict:
        return {"id": row.id, "study_id": study.id, "group": row.group, "generation": row.generation,
                "candidate": row.candidate, "budgets": row.budgets, "client_id": row.client_id,
                "lease_expires": _aware(row.lease_expires).isoformat(), "target": study.config["target"],
                "lease": self._lease(row.id, row.issues, row.client_id)}

    def _lease(self, trial_id: int, issue: int, client_id: str) -> str:
        message = f"{trial_id}:{issue}:{client_id}".encode()
        return hmac.new(self.lease_key, message, "sha256").hexdigest()[:32]

    def _lease_ok(self, row: StudyTrial, client_id: str, lease: str) -> bool:
        """One of the leases this client was given for the trial (an earlier, expired one counts too)."""
        return any(hmac.compare_digest(lease.encode(), self._lease(row.id, issue, client_id).encode())
                   for issue in range(1, (row.issues or 0) + 1))

    # -- complete / fail ----------------------------------------------------------------------
    def finish_trial(self, trial_id: int, client_id: str, lease: str, result: EvalResult, metrics: dict | None,
                     budgets: list | None, scorer: dict | None = None) -> dict:
        with self.lock:
            study_id = None
            try:
                with self.sessions.begin() as session:
                    row = session.get(StudyTrial, trial_id)
                    if row is None:
                        raise JobError(404, f"no trial {trial_id}")
                    study_id = row.study_id
                    answer = self._finish(session, row, client_id, lease, result, metrics, budgets, scorer)
                    try:  # the response is built, and must serialise, before the commit
                        json.dumps(answer, allow_nan=False)
                    except ValueError:
                        raise JobError(422, "the result holds a number that is not finite",
                                       field="task_score") from None
                    return answer
            except BaseException:
                if study_id is not None:
                    self._algorithms.pop(study_id, None)
                raise

    def _finish(self, session: Session, row: StudyTrial, client_id: str, lease: str, result: EvalResult,
                metrics: dict | None, budgets: list | None, scorer: dict | None = None) -> dict:
        study = self._study(session, row.study_id)
        if client_id not in (row.clients or []):
            raise JobError(403, f"trial {row.id} was not issued to client {client_id!r}")
        if not self._lease_ok(row, client_id, lease):
            raise JobError(403, f"wrong lease for trial {row.id}: send the lease its suggest returned", field="lease")
        if budgets is not None:
            shape = np.asarray(row.budgets).shape
            given = np.asarray(budgets, dtype=object)
            if given.shape != shape:
                raise JobError(422, f"budgets have shape {list(given.shape)}, but the study's model has "
                                    f"{shape[0]} layers x {shape[1]} KV heads")
            if [[int(v) for v in line] for line in budgets] != row.budgets:
                raise JobError(409, f"these are not trial {row.id}'s budgets")
        if scorer is not None:
            _pin_scorer(study, row, scorer)
        if row.state in TRIAL_DONE:
            study.duplicates += 1
            return {"accepted": False, "duplicate": True, "trial": self._trial_done(row)}
        algorithm = self._algorithm(session, study)
        if row.lease_expires is not None:
            lease = float(study.spec.get("lease_seconds", 600))
            took = max(0.0, (utcnow() - (_aware(row.lease_expires) - timedelta(seconds=lease))).total_seconds())
            previous = self._turnaround.get(study.id)
            self._turnaround[study.id] = took if previous is None else 0.8 * previous + 0.2 * took
        candidate: Candidate = algorithm.ask()[row.candidate]
        record = algorithm.score(candidate, result)
        if record.ok and not all(finite(v) for v in (record.task_score, record.cache_score, record.fitness)):
            # A finite but huge score can still overflow the fitness: refused before anything is
            # written (told to CMA-ES, it would break every later result of the study).
            raise JobError(422, f"a task score of {result.task_score!r} gives a fitness that is not a finite number",
                           field="task_score")
        row.state, row.finished_by, row.metrics = record.state, client_id, metrics
        row.task_score, row.cache_score, row.fitness = record.task_score, record.cache_score, record.fitness
        row.mean_budget, row.group_mean_budget = record.mean_budget, record.group_mean_budget
        row.seconds, row.error = record.seconds, record.error
        study.evaluations_done += 1
        study.failures += 0 if record.ok else 1
        rows = self._rows(session, study.id, algorithm.position)
        if all(r.state in TRIAL_DONE for r in rows):  # the barrier lifts: tell, then ask the next generation
            units = [int(u) for u in candidate.units]
            algorithm.tell([_record(r, units) for r in rows])
            if algorithm.found:
                study.best_fitness, study.best_task_score = algorithm.best_fitness, algorithm.best_task_score
                study.best_budgets = algorithm.best_budgets.tolist()
            if algorithm.done:
                study.status, study.finished_at = "finished", utcnow()
                if self.on_finish is not None:
                    study.profile_ids = self.on_finish(session, study, algorithm)
                # A finished study needs no optimizer state (its reads and late results use the rows):
                # a long-running service would otherwise keep every study's CMA-ES in memory.
                self._algorithms.pop(study.id, None)
                self._turnaround.pop(study.id, None)
            else:
                self._insert_generation(session, study, algorithm)
        return {"accepted": True, "duplicate": False, "trial": self._trial_done(row)}

    @staticmethod
    def _trial_done(row: StudyTrial) -> dict:
        return {"id": row.id, "state": row.state, "task_score": row.task_score, "cache_score": row.cache_score,
                "fitness": row.fitness, "error": row.error}

    # -- read ---------------------------------------------------------------------------------
    def get(self, study_id: int) -> dict:
        with self.lock, self.sessions() as session:
            study = self._study(session, study_id)
            algorithm = None if study.status == "finished" else self._algorithm(session, study)
            return self._summary(session, study, algorithm)

    def list(self) -> list[dict]:
        with self.sessions() as session:
            return [{"id": s.id, "name": s.name, "status": s.status, "evaluations_done": s.evaluations_done,
                     "best_fitness": s.best_fitness} for s in session.scalars(select(Study).order_by(Study.id))]

    def trials(self, study_id: int) -> list[dict]:
        with self.sessions() as session:
            self._study(session, study_id)
            return [r.to_dict() for r in self._rows(session, study_id)]

    def _summary(self, session: Session, study: Study, algorithm: GroupwiseAlgorithm | None) -> dict:
        config = SearchConfig(**{**study.config, "ratio_bounds": tuple(study.config["ratio_bounds"])
                                 if study.config.get("ratio_bounds") else None})
        planned = config.planned_evaluations()
        position = algorithm.position if algorithm is not None else None
        return {
            "id": study.id, "name": study.name, "status": study.status, "config": study.config, "spec": study.spec,
            "evaluations_done": study.evaluations_done, "evaluations_planned": planned,
            "failures": study.failures, "reissues": study.reissues, "duplicates": study.duplicates,
            "group": position[0] if position else None, "generation": position[1] if position else None,
            "best": None if study.best_fitness is None else {
                "fitness": study.best_fitness, "task_score": study.best_task_score, "budgets": study.best_budgets},
            "profile_ids": study.profile_ids or [],
            "created_at": _aware(study.created_at).isoformat(),
            "finished_at": _aware(study.finished_at).isoformat() if study.finished_at else None,
        }


def _pin_scorer(study: Study, row: StudyTrial, scorer: dict) -> None:
    """Record the scorer the first result names in the study's spec (``scorer_identity``): its profiles
    name it and its checkpoint like a run's. A result ranked by another scorer or another checkpoint
    file (sha256) is refused (409): its score is not comparable to the others'."""
    label = study.spec.get("scorer") or "external"
    # Compared by current name: a worker that says retention-gates scores for a study made with gates.
    if label != "external" and canonical_scorer(scorer["name"]) != canonical_scorer(label):
        raise JobError(409, f"trial {row.id} was scored with {scorer['name']!r}, but study {study.id} is for "
                            f"scorer {label!r}", field="scorer.name")
    pinned = study.spec.get("scorer_identity")
    if pinned is None:
        study.spec = {**study.spec, "scorer_identity": scorer}  # a new dict: the JSON column sees the change
        return

    def same(identity: dict):  # the checkpoint's path may differ between machines, its bytes may not
        params = {k: v for k, v in identity["params"].items() if k != "checkpoint"}
        return canonical_scorer(identity["name"]), params, (identity.get("checkpoint") or {}).get("sha256")

    (name, params, sha), (_, pinned_params, pinned_sha) = same(scorer), same(pinned)
    if same(scorer) != same(pinned):
        field = "scorer.checkpoint" if (name, params) == same(pinned)[:2] else "scorer"
        raise JobError(409,
                       f"trial {row.id} was scored with {name} {params} checkpoint sha256 {(sha or '-')[:12]}, but "
                            f"study {study.id}'s results so far came from {pinned['name']} {pinned_params} checkpoint "
                            f"sha256 {(pinned_sha or '-')[:12]}", field=field)


def study_allocation(study: Study, algorithm: GroupwiseAlgorithm) -> Allocation:
    """The study's best profile, completed to the exact target total (as the pipeline ships one)."""
    from evolalloc.core.geometry import ModelGeometry
    from searchspaces import search_space_granularity

    spec, config = study.spec, algorithm.config
    provenance = {
        "method": "evolved", "task": spec.get("task"), "fitness": algorithm.best_fitness,
        "task_score": algorithm.best_task_score, "lam": config.lam, "gamma": config.gamma,
        "group_size": config.group_size, "sigma0": config.sigma0, "seed": config.seed,
        "population": config.popsize_for(config.group_size), "evaluations": study.evaluations_done,
        **({"passes": config.passes} if config.passes > 1 else {}),
        "optimizer": (algorithm.implementation or ("", ""))[0],
        "optimizer_version": (algorithm.implementation or ("", ""))[1], "study": study.id,
        **({"adapter": algorithm.space.adapter} if algorithm.space.adapter else {}),  # the hybrid's prior
        **({"adapter_params": algorithm.space.adapter_params} if algorithm.space.adapter_params else {}),
    }
    if provenance["task"] is None:
        del provenance["task"]  # an allocation file's task is a name or absent, never null
    identity = spec.get("scorer_identity") or {}  # what the evaluators reported they ranked with
    if identity.get("checkpoint"):
        provenance["scorer_checkpoint"] = identity["checkpoint"]  # as a run records it
    best = Allocation(
        model=spec["model"], geometry=ModelGeometry(**spec["geometry"]),
        scorer=identity.get("name") or spec.get("scorer") or "external",
        scorer_params=dict(identity.get("params") or {}), target=config.target,
                      granularity=search_space_granularity(config.search_space),
        budgets=algorithm.best_budgets, provenance=provenance,
    )
    return best.complete(min_budget=config.min_budget)


def finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def register_study_profiles(session: Session, study: Study, algorithm: GroupwiseAlgorithm) -> list[int]:
    """Put the finished study's profile and its expansions into the profile registry; their ids."""
    from evolalloc.service.profiles import register

    if not algorithm.found:
        return []  # every candidate failed: there is no profile to register
    evolved = study_allocation(study, algorithm)
    floor = algorithm.config.min_budget
    profiles = [evolved] + [evolved.expand(b, min_budget=floor) for b in study.spec.get("expansions", [])]
    return [register(session, p, source="study", min_budget=floor)[0].id for p in profiles]
