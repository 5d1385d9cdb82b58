"""How big a job may be, how many may wait, how long one may run: the operator's limits (``serve``
options), checked when a recipe is submitted, before anything is queued.

A recipe over a limit is a 422 naming the recipe field, its value and the limit. The evaluations a
job plans are computed as its search computes them (``SearchConfig``: the recipe's search space on
the model's shape, which the validator reads from the model's config): the start's candidates, then
groups x generations x population (population ``4 + floor(3 ln n_g)`` unless set; generations: the
fixed ``M``, or the cap of a search that stops on convergence), times the curve's anchors (each is its
own search). The same plan gives an estimated duration, shown on the job from the start.

The estimate is deliberately simple, and only an estimate: answers decoded x the operator's
``--seconds-per-answer``. Answers decoded = planned evaluations x search instances (each
evaluation answers every search prompt once) + held-out instances x (1 + baselines) x budgets (the
comparison). Model load, prefill, curation and scorer training are not counted. The default rate is
a placeholder, not a measurement: an operator sets it from a job their machine finished
(``seconds`` / answers decoded).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from evolalloc.core.errors import UserError
from evolalloc.search.stopping import groups_in_passes

# Defaults for one machine serving a team. A recipe's own defaults are far inside them (8 search and
# 20 held-out instances; SmolLM2's 30 layers in groups of 8, at most 20 generations and a start of 3: 783).
DEFAULTS = {
    "max_instances": 1000,  # task instances per split (task.search.n, task.heldout.n)
    "max_draws": 2000,  # candidates drawn to curate a split (curate.draw; null = 2n)
    "max_traces": 1000,  # scorer.train.traces (null = every search instance)
    "max_train_steps": 20_000,  # scorer.train.steps
    "max_evaluations": 10_000,  # planned evaluations of one job
    "max_budgets": 64,  # budgets a job ships and compares (the target and expansions, or the curve's grid)
    "max_workers": 32,  # engine.workers: evaluator processes (Ray actors) one job starts
    "max_job_hours": 24.0,  # wall time of one run of a job (a resume starts a new one)
    "max_queued": 20,  # jobs waiting in the queue, the whole service
    "max_queued_per_token": 10,  # jobs waiting, per bearer token (where tokens are used)
    "seconds_per_answer": 1.0,  # the estimate's rate (see above): an assumption, not a measurement
}
OPTIONS = {name: "--" + name.replace("_", "-") for name in DEFAULTS}  # the serve option of each


@dataclass(frozen=True)
class JobLimits:
    max_instances: int = DEFAULTS["max_instances"]
    max_draws: int = DEFAULTS["max_draws"]
    max_traces: int = DEFAULTS["max_traces"]
    max_train_steps: int = DEFAULTS["max_train_steps"]
    max_evaluations: int = DEFAULTS["max_evaluations"]
    max_budgets: int = DEFAULTS["max_budgets"]
    max_workers: int = DEFAULTS["max_workers"]
    max_job_hours: float = DEFAULTS["max_job_hours"]
    max_queued: int = DEFAULTS["max_queued"]
    max_queued_per_token: int = DEFAULTS["max_queued_per_token"]
    seconds_per_answer: float = DEFAULTS["seconds_per_answer"]

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UserError(f"must be a number > 0, got {value!r}", field=OPTIONS[name])

    @property
    def max_job_seconds(self) -> float:
        return self.max_job_hours * 3600.0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class JobPlan:
    """What a job will do, from its recipe and model shape: evaluations, answers, a duration estimate."""

    evaluations: int
    answers: int
    estimated_seconds: float


def _refuse(field: str, value, limit: str, what: str, limits: JobLimits, source: str) -> None:
    raise UserError(f"{value} {what} is over this service's limit of {getattr(limits, limit)} (the operator's "
                    f"serve {OPTIONS[limit]})", source=source, field=field)


def check_recipe_size(recipe, limits: JobLimits, source: str) -> None:
    """``UserError`` naming the first field over a limit (what needs no model: instances, draws,
    budgets, workers, training)."""
    for path, task in _task_sections(recipe):
        for split in ("search", "heldout"):
            section = getattr(task, split)
            if section.n > limits.max_instances:
                _refuse(f"{path}.{split}.n", section.n, "max_instances", "instances", limits, source)
            curate = section.curate
            draws = curate.draw if curate.draw is not None else (2 * section.n if curate.active else None)
            if draws is not None and draws > limits.max_draws:
                _refuse(f"{path}.{split}.curate.draw", draws, "max_draws", "draws", limits, source)
    resolved = recipe.resolved
    if len(resolved.budgets) > limits.max_budgets:
        where = "budget.curve.points" if resolved.curve_grid else "budget.expansions"
        _refuse(where, len(resolved.budgets), "max_budgets", "budgets", limits, source)
    if recipe.engine.workers > limits.max_workers:
        _refuse("engine.workers", recipe.engine.workers, "max_workers", "workers", limits, source)
    train = recipe.scorer.train
    if train is not None:
        if train.traces is not None and train.traces > limits.max_traces:
            _refuse("scorer.train.traces", train.traces, "max_traces", "traces", limits, source)
        if train.steps > limits.max_train_steps:
            _refuse("scorer.train.steps", train.steps, "max_train_steps", "training steps", limits, source)


def _task_sections(recipe) -> list[tuple[str, object]]:
    if recipe.tasks is not None:
        return [(f"tasks[{i}]", task) for i, task in enumerate(recipe.tasks)]
    return [("task", recipe.task)]


def plan_job(recipe, geometry: dict, limits: JobLimits, source: str) -> JobPlan:
    """The job's plan on a model of ``geometry`` (``ModelGeometry.to_dict()``); ``UserError`` naming
    the generations field if its evaluations are over the limit."""
    from evolalloc.search.config import SearchConfig

    try:
        resolved = recipe.resolved
        config = SearchConfig.from_sections(target=resolved.target, search_space=recipe.search_space,
                                            optimizer=recipe.optimizer, num_layers=geometry["num_layers"],
                                            num_kv_heads=geometry["num_kv_heads"], start=resolved.start)
    except UserError as err:  # the search's own field names: say where in the recipe
        raise UserError(str(err).removeprefix(f"{err.field}: "), source=source, field=err.field) from None
    groups = [len(units) for units in config.schedule()]  # every pass's
    searches = len(resolved.curve_anchors) if resolved.curve_grid else 1
    evaluations = searches * config.planned_evaluations()
    if evaluations > limits.max_evaluations:
        rule = config.stop_rule
        passes = groups_in_passes(len(groups), config.passes)
        size = (f"({len(config.start)} start + {len(groups)} groups{passes} x {'' if rule.fixed else 'at most '}"
                f"{rule.cap} generations x {config.popsize_for(groups[0])} candidates)"
                + (f" x {searches} curve anchors" if searches > 1 else ""))
        raise UserError(f"{size} = {evaluations} evaluations is over this service's limit of "
                        f"{limits.max_evaluations} (the operator's serve {OPTIONS['max_evaluations']})",
                        source=source, field=_evaluations_field(recipe, config, searches, limits.max_evaluations))
    tasks = [task for _, task in _task_sections(recipe)]
    answers = (evaluations * sum(t.search.n for t in tasks)
               + sum(t.heldout.n for t in tasks) * (1 + len(recipe.baselines)) * len(resolved.budgets))
    return JobPlan(evaluations=evaluations, answers=answers, estimated_seconds=answers * limits.seconds_per_answer)


def _evaluations_field(recipe, config, searches: int, limit: int) -> str:
    """The recipe field to blame for too many evaluations: the passes when one pass would fit, else a
    population set above EvolKV's, else the generations (EvolKV's M when fixed; else the converging rule's
    cap; the model's shape and the group size are blamed in the message's arithmetic)."""
    import dataclasses

    from evolalloc.search.config import default_popsize

    if config.passes > 1 and searches * dataclasses.replace(config, passes=1).planned_evaluations() <= limit:
        return "optimizer.passes"
    popsize = recipe.optimizer.popsize
    if popsize is not None and popsize > default_popsize(len(config.schedule()[0])):
        return "optimizer.popsize"
    return "optimizer.generations_per_group" if config.stop_rule.fixed else "optimizer.max_generations_per_group"
