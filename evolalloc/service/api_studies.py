"""``/studies`` and ``/trials``: the optimizer as a service for evaluators that run elsewhere.

``POST /studies`` -> a study (its model geometry, target, search space, optimizer settings, λ, γ,
expansions); ``POST /studies/{id}/suggest {client_id}`` -> a trial or "wait" (HTTP 200 with
``Retry-After``) or "finished"; ``POST /trials/{id}/complete {client_id, task_score, metrics?}``;
``POST /trials/{id}/fail {client_id, error}``; ``GET /studies/{id}`` progress and best;
``GET /studies/{id}/trials``. Bodies are checked by pydantic (unknown fields refused; a score
must be a finite JSON number — NaN, infinities, strings and booleans are a 422).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from evolalloc.core.errors import UserError
from evolalloc.engine.base import EvalResult
from evolalloc.search.config import SearchConfig, default_popsize
from evolalloc.service.confinement import check_model
from evolalloc.service.jobs import JobError
from evolalloc.service.limits import MAX_BUDGET, check_search_size
from evolalloc.service.study_db import Study, StudyTrial

router = APIRouter(tags=["studies"])

Number = StrictFloat | StrictInt


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GeometryIn(Strict):
    num_layers: int = Field(gt=0, le=4096)
    num_kv_heads: int = Field(gt=0, le=4096)
    num_query_heads: int | None = Field(None, gt=0, le=4096, description="default: num_kv_heads")
    head_dim: int = Field(64, gt=0, le=1 << 16, description="only recorded in the registered profile")
    max_positions: int = Field(131072, gt=0, le=MAX_BUDGET, description="only recorded in the registered profile")


class ModelIn(Strict):
    spec: str = Field(min_length=1, max_length=500, description="a model spec as in a recipe (its config is read)")


class SearchSpaceIn(Strict):
    name: str = Field("layer_groups", description="a search space: layer_groups, head_groups, or a plugin")
    group_size: int = Field(8, gt=0)
    ratio_bounds: tuple[Annotated[float, Field(ge=0, le=1e6)], Annotated[float, Field(ge=0, le=1e6)]] | None = None
    min_budget: int = Field(1, ge=0, le=MAX_BUDGET)
    max_budget: int | None = Field(None, gt=0, le=MAX_BUDGET)


class OptimizerIn(Strict):
    name: str = "cma"
    generations: int | None = Field(10, ge=1, le=10000,
                                    description="EvolKV's fixed M per group; null: each group until it converges")
    popsize: int | None = Field(None, ge=3, le=10000)
    passes: int = Field(1, ge=1, le=10, description="how many times the search visits every group (a recipe's "
                                                    "optimizer.passes; 1: EvolKV)")
    sigma0: float = Field(0.3, gt=0, le=1e6)
    seed: int = Field(0, ge=0, le=2**63 - 1)
    options: dict = Field(default_factory=dict,
                          description="passed to the back-end's library, as a recipe's optimizer.options")


class StudyIn(Strict):
    name: str = Field("study", min_length=1, max_length=200)
    model: ModelIn | None = None
    geometry: GeometryIn | None = None
    target: float = Field(gt=0, le=MAX_BUDGET)
    search_space: SearchSpaceIn = SearchSpaceIn()
    optimizer: OptimizerIn = OptimizerIn()
    lam: float = Field(0.3, ge=0, le=1e6)
    gamma: float = Field(0.2, ge=0, le=1)
    cache_scope: Literal["group", "allocation"] = "group"
    budget_rule: Literal["cachescore", "exact"] = "cachescore"
    expansions: list[Annotated[float, Field(gt=0, le=MAX_BUDGET)]] = Field(default_factory=list, max_length=64)
    scorer: str = Field("external", max_length=100, description="label recorded in the registered profile")
    task: str | None = Field(None, max_length=100, description="label recorded in the registered profile")
    lease_seconds: float = Field(600.0, gt=0, le=7 * 86400)


class SuggestIn(Strict):
    client_id: str = Field(min_length=1, max_length=200)


def finite_number(value):
    """A JSON number as a finite float, or ``ValueError``: NaN, infinities and integers too large for a
    float (``1e999`` parses as inf, a 400-digit integer overflows) would break every later read."""
    try:
        number = float(value)
    except OverflowError:
        raise ValueError("must be a finite number (this integer is too large)") from None
    if not math.isfinite(number):
        raise ValueError("must be a finite number (a failed evaluation is POST /trials/{id}/fail)")
    return value


class CheckpointIn(Strict):
    """A scorer checkpoint as the evaluator read it (``runtime.checkpoint_file.checkpoint_provenance``)."""
    path: str = Field(min_length=1, max_length=1000)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    format: str | None = Field(None, max_length=100)
    trained: dict[str, Number | str | bool | None | list[str]] = Field(default_factory=dict, max_length=32)


class ScorerIn(Strict):
    """The scorer an evaluator ranked tokens with; a trained one names its checkpoint's fingerprint."""
    name: str = Field(min_length=1, max_length=100)
    params: dict[str, Number | str | bool | None] = Field(default_factory=dict, max_length=64)
    checkpoint: CheckpointIn | None = None


class CompleteIn(Strict):
    client_id: str = Field(min_length=1, max_length=200)
    lease: str = Field(min_length=1, max_length=200, description="the trial's lease secret, as suggest returned it")
    task_score: Number
    metrics: dict[str, Number | str | bool | None] | None = Field(None, max_length=256)
    budgets: list[list[StrictInt]] | None = Field(None, description="optional: the budgets evaluated, checked")
    seconds: Number = Field(0.0, ge=0)
    scorer: ScorerIn | None = Field(None, description="optional: the scorer (and checkpoint) that ranked the tokens; "
                                                      "the study's profiles record it, and every result must agree")

    @field_validator("task_score", "seconds")
    @classmethod
    def finite(cls, value):
        return finite_number(value)

    @field_validator("metrics")
    @classmethod
    def finite_metrics(cls, metrics):
        for key, value in (metrics or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    finite_number(value)
                except ValueError as err:
                    raise ValueError(f"{key}: {err}") from None
            elif isinstance(value, str) and len(value) > 10000:
                raise ValueError(f"{key}: a string of at most 10000 characters")
        return metrics


class FailIn(Strict):
    client_id: str = Field(min_length=1, max_length=200)
    lease: str = Field(min_length=1, max_length=200, description="the trial's lease secret, as suggest returned it")
    error: str = Field(min_length=1, max_length=10000)
    budgets: list[list[StrictInt]] | None = None


def build_study(body: StudyIn, validator, settings) -> tuple[SearchConfig, dict]:
    if (body.model is None) == (body.geometry is None):
        raise UserError("give exactly one of 'model' (a spec whose config.json gives the geometry) or 'geometry'",
                        field="model")
    if body.geometry is not None:
        geometry = body.geometry.model_dump()
        geometry["num_query_heads"] = geometry["num_query_heads"] or geometry["num_kv_heads"]
        model = body.name
    else:
        check_model(body.model.spec, settings.model_roots, field="model.spec")
        # Read from the model's config by the validator process (any spec the CLI takes, bundled
        # ones too): the HTTP process never imports torch nor loads weights.
        geometry = validator.geometry(body.model.spec, source="study")
        geometry.pop("dtype_bytes", None)
        model = body.model.spec
    space, opt = body.search_space, body.optimizer
    # Before SearchConfig: building it builds the search space, whose size is what is capped.
    check_search_size(cells=geometry["num_layers"] * geometry["num_kv_heads"], group_size=space.group_size,
                      popsize=opt.popsize or default_popsize(space.group_size), source="study",
                      cells_field="geometry" if body.geometry is not None else "model.spec")
    config = SearchConfig(
        num_layers=geometry["num_layers"], num_kv_heads=geometry["num_kv_heads"], target=body.target,
        search_space=space.name, group_size=space.group_size, ratio_bounds=space.ratio_bounds,
        min_budget=space.min_budget, max_budget=space.max_budget, optimizer=opt.name, generations=opt.generations,
        popsize=opt.popsize, passes=opt.passes, sigma0=opt.sigma0, lam=body.lam, gamma=body.gamma,
        cache_scope=body.cache_scope,
        budget_rule=body.budget_rule, seed=opt.seed, study_name=body.name, optimizer_options=dict(opt.options),
    )
    for budget in body.expansions:
        if not (math.isfinite(budget) and budget >= body.target):
            # As the CLI: a profile is only carried to larger budgets (Allocation.expand's rule).
            raise UserError(f"expansions must be budgets >= the target {body.target:g}, got {budget}",
                            field="expansions")
    spec = {"model": model, "geometry": geometry, "scorer": body.scorer, "task": body.task,
            "expansions": [float(b) for b in body.expansions], "lease_seconds": body.lease_seconds}
    return config, spec


def _studies(request: Request):
    return request.app.state.service.studies


# Route dependencies run before the body is read (FastAPI), so an unknown id is a 404 whatever the
# body holds, as it is on every other route, not a 422 about the body.
def known_study(request: Request, study_id: int) -> None:
    _known(request, Study, study_id, "study")


def known_trial(request: Request, trial_id: int) -> None:
    _known(request, StudyTrial, trial_id, "trial")


def _known(request: Request, table, row_id: int, what: str) -> None:
    with request.app.state.service.sessions() as session:
        if session.get(table, row_id) is None:
            raise JobError(404, f"no {what} {row_id}")


@router.post("/studies", status_code=201)
def post_study(request: Request, body: StudyIn):
    """Create an ask/tell study; its first generation is ready for ``suggest`` at once."""
    service = request.app.state.service
    config, spec = build_study(body, service.validator, service.settings)
    return _studies(request).create(body.name, config, spec)


@router.get("/studies")
def get_studies(request: Request):
    """Every study, oldest first (id, name, status, evaluations)."""
    return {"studies": _studies(request).list()}


@router.get("/studies/{study_id}")
def get_study(request: Request, study_id: int):
    """Progress (evaluations done / planned, group, generation, re-issued leases, duplicates) and the best so far;
    ``profile_ids`` once finished."""
    return _studies(request).get(study_id)


@router.get("/studies/{study_id}/trials")
def get_trials(request: Request, study_id: int):
    return {"trials": _studies(request).trials(study_id)}


@router.post("/studies/{study_id}/suggest", dependencies=[Depends(known_study)])
def post_suggest(request: Request, study_id: int, body: SuggestIn):
    """A trial to evaluate (the same one again while this client holds it), or ``wait`` with
    ``Retry-After`` (the generation barrier), or ``finished``."""
    answer = _studies(request).suggest(study_id, body.client_id)
    headers = {"Retry-After": str(max(1, math.ceil(answer["retry_after"])))} if answer["status"] == "wait" else None
    return JSONResponse(answer, headers=headers)


@router.post("/trials/{trial_id}/complete", dependencies=[Depends(known_trial)])
def post_complete(request: Request, trial_id: int, body: CompleteIn):
    """Report a task score; CacheScore and fitness are computed here from the trial's budgets."""
    result = EvalResult(task_score=float(body.task_score), seconds=float(body.seconds))
    scorer = body.scorer.model_dump() if body.scorer is not None else None
    return _studies(request).finish_trial(trial_id, body.client_id, body.lease, result, body.metrics, body.budgets,
                                          scorer=scorer)


@router.post("/trials/{trial_id}/fail", dependencies=[Depends(known_trial)])
def post_fail(request: Request, trial_id: int, body: FailIn):
    """Record a failed evaluation (a FAIL trial: it ranks below every success, never a made-up score)."""
    result = EvalResult(task_score=None, error=body.error)
    return _studies(request).finish_trial(trial_id, body.client_id, body.lease, result, None, body.budgets)
