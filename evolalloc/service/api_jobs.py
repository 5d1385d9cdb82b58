"""``/jobs``: submit a recipe, list and read jobs, their evaluations, cancel.

The polled reads (``GET /jobs``, ``GET /jobs/{id}``) are ``async``: one indexed row read is cheaper
than the hop to a thread; the rest run in the thread pool (validation, study reads, signals).
"""

from __future__ import annotations

import copy
from functools import lru_cache

import yaml
from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select

from evolalloc.core.errors import UserError
from evolalloc.search.config import default_popsize
from evolalloc.search.optimizers import check_optimizer_options
from evolalloc.service.confinement import check_checkpoints_reach, check_reach, check_start_reach
from evolalloc.service.db import ACTIVE_STATES, JOB_STATES, Job, Profile
from evolalloc.service.job_limits import check_recipe_size, plan_job
from evolalloc.service.job_queue import QUEUE_LOCK, check_room, queue_counts, submitter_of
from evolalloc.service.jobs import JobError
from evolalloc.service.limits import check_search_size
from evolalloc.service.progress import read_progress
from evolalloc.service.recipes import (
    SOURCE,
    check_confinement,
    check_schema,
    parse_body,
)
from evolalloc.service.redaction import redact

router = APIRouter(tags=["jobs"])


@lru_cache(maxsize=512)
def _recipe_dict(job_id: int, text: str) -> dict:
    """A job's stored recipe as data (it never changes once submitted; parsing YAML is slow)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loaders only

RECIPE_BODY = {"requestBody": {"required": True, "content": {
    "application/yaml": {"schema": {"type": "string"}, "example": "task: {name: passkey}\nbudget: {target: 128}\n"},
    "application/json": {"schema": {"type": "object"}}}}}


def _service(request: Request):
    return request.app.state.service


def _job(session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise JobError(404, f"no job {job_id}")
    return job


@router.post("/jobs", status_code=201, openapi_extra=RECIPE_BODY)
async def submit_job(request: Request, name: str | None = Query(None, description="run name (default: the recipe's)")):
    """Queue a search. The body is a run recipe (YAML, or JSON with ``Content-Type: application/json``),
    checked exactly as ``evolalloc search`` checks it; a bad recipe is a 422 naming the field."""
    body = await request.body()
    submitter = submitter_of(request.headers.get("authorization"), _service(request).settings)
    return await run_in_threadpool(_submit, _service(request), body, request.headers.get("content-type"), name,
                                   submitter)


def _submit(service, body: bytes, content_type: str | None, name: str | None, submitter: str | None) -> dict:
    limits = service.settings.limits
    with service.sessions() as session:  # a full queue refuses before any parsing (checked again below)
        check_room(session, limits, submitter)
    raw = parse_body(body, content_type)
    check_checkpoints_reach(raw, service.settings)  # before the checks that look for the files
    check_start_reach(raw, service.settings)
    recipe = check_schema(raw, name)
    check_confinement(recipe, service.settings.runs_dir)
    check_reach(raw, recipe, service.settings)
    check_recipe_size(recipe, limits, SOURCE)  # instances, draws, training: the operator's limits
    popsize = recipe.optimizer.popsize or default_popsize(recipe.search_space.group_size)
    check_search_size(cells=None, group_size=recipe.search_space.group_size, popsize=popsize, source=SOURCE)
    try:  # typed, allow-listed options now, not a failed job later
        check_optimizer_options(recipe.optimizer.name, recipe.optimizer.options)
    except UserError as err:
        raise UserError(str(err).removeprefix(f"{err.field}: "), source=SOURCE, field=err.field) from None
    # Task and scorer names, and the model's geometry from its config (the helper process: torch and
    # transformers stay out of this one, and no weights are read): a job's cells are capped now, as a
    # study's are, not by a failed job later.
    geometry = service.validator.check(recipe.to_dict(), SOURCE)
    check_search_size(cells=geometry["num_layers"] * geometry["num_kv_heads"],
                      group_size=recipe.search_space.group_size,
                      popsize=popsize, source=SOURCE, cells_field="model.spec")
    plan = plan_job(recipe, geometry, limits, SOURCE)  # its evaluations under the limit, and an estimate
    with QUEUE_LOCK, service.sessions.begin() as session:
        check_room(session, limits, submitter)
        clash = session.scalar(select(Job.id).where(Job.name == recipe.name, Job.status.in_(ACTIVE_STATES)))
        if clash is not None:
            raise JobError(409,
                           f"job {clash} already runs under the name {recipe.name!r}; pass ?name= to choose another")
        if (service.settings.runs_dir / recipe.name).exists():
            raise JobError(409, f"run folder {recipe.name!r} already exists; a run is never overwritten: pass ?name=")
        job = Job(name=recipe.name, status="queued", recipe=recipe.to_yaml(), model=recipe.model.spec,
                  task=recipe.task_names, engine=recipe.engine.kind, submitter=submitter, phase="queued",
                  evaluations_planned=plan.evaluations, estimated_seconds=round(plan.estimated_seconds, 1))
        session.add(job)
        session.flush()
        result = redact(job.to_dict())
    service.runner.wake()
    return result


@router.get("/jobs")
async def list_jobs(request: Request, status: str | None = Query(None, description="only jobs in this state")):
    """Every job, newest first."""
    if status is not None and status not in JOB_STATES:
        raise UserError(f"unknown status {status!r}; choose one of {', '.join(JOB_STATES)}", field="status")
    with _service(request).sessions() as session:
        query = select(Job).order_by(Job.id.desc())
        if status:
            query = query.where(Job.status == status)
        return {"jobs": [redact(job.to_dict()) for job in session.scalars(query)]}


@router.get("/jobs/{job_id}")
async def get_job(request: Request, job_id: int):
    """State, progress (evaluations done / planned, best fitness so far), timings, error."""
    with _service(request).sessions() as session:
        job = _job(session, job_id)
        result = job.to_dict()
        result["profiles"] = [
            p.id for p in session.scalars(select(Profile).where(Profile.job_id == job_id).order_by(Profile.target))
        ]
        result["recipe"] = copy.deepcopy(_recipe_dict(job.id, job.recipe))
        return redact(result)  # a storage URL's password (or one in an error) never leaves the service


@router.get("/jobs/{job_id}/evaluations")
def job_evaluations(request: Request, job_id: int):
    """Every stored evaluation (search order) with the best fitness so far, the best budgets
    ``[layers][kv_heads]`` so far, and the held-out comparison once the run has one."""
    from evolalloc.config.run_folder import COMPARISON_FILE

    service = _service(request)
    with service.sessions() as session:
        job = _job(session, job_id)
        name, storage = job.name, _recipe_dict(job.id, job.recipe).get("storage")
    run_dir = service.settings.runs_dir / name
    progress = read_progress(run_dir, storage, name, with_history=True)
    comparison = None
    if (run_dir / COMPARISON_FILE).exists():
        import json

        comparison = json.loads((run_dir / COMPARISON_FILE).read_text(encoding="utf-8"))
    return {"job": job_id, "evaluations": progress.history, "planned": progress.planned,
            "best_budgets": progress.best_budgets, "comparison": comparison}


@router.post("/jobs/{job_id}/cancel")
def cancel_job(request: Request, job_id: int):
    """Stop a queued or running job (its worker's process group is killed); 409 if it has ended."""
    service = _service(request)
    service.runner.cancel(job_id)
    with service.sessions() as session:
        return redact(_job(session, job_id).to_dict())


@router.post("/jobs/{job_id}/resume")
def resume_job(request: Request, job_id: int):
    """Queue a failed or cancelled job again: its worker resumes from the run folder (no finished
    evaluation is lost or repeated); 409 if it is queued, running or finished."""
    service = _service(request)
    with QUEUE_LOCK:
        with service.sessions() as session:
            job = _job(session, job_id)
            if job.status in ("failed", "cancelled"):  # it would join the queue (anything else is a 409 below)
                check_room(session, service.settings.limits, job.submitter)
        service.runner.requeue(job_id)
    with service.sessions() as session:
        return redact(_job(session, job_id).to_dict())


@router.get("/limits")
async def get_limits(request: Request):
    """The operator's limits (job sizes, queue, wall time; ``serve --help``) and the queue now."""
    service = _service(request)
    submitter = submitter_of(request.headers.get("authorization"), service.settings)
    with service.sessions() as session:
        queued, mine = queue_counts(session, submitter)
    limits = service.settings.limits
    return {"limits": limits.to_dict(), "max_jobs": service.settings.max_jobs,
            "queue": {"queued": queued, "max_queued": limits.max_queued, "full": queued >= limits.max_queued,
                      **({"queued_by_this_token": mine} if submitter else {})},
            "estimate": "answers decoded x seconds_per_answer: a rough estimate (docs/service.md, limits)"}
