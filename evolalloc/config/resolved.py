"""The resolved run: what a recipe decided, as typed values, made once and carried everywhere.

A ``Recipe`` keeps the shape of the YAML (sections, nulls meaning "the default"). ``resolve_run``
turns it, once, into a frozen ``ResolvedRun``: the target ``c`` and every budget the run reports
on, the expansion rule or the curve's grid and anchors, each task's fitness mode (``fitness.mode``
or the task's own default, decided here rather than wherever a mode is needed), the scorer, the
baselines and the plain facts ``show`` prints. The pipeline takes it from ``Experiment.resolved``;
``config/run_folder.py`` saves it as ``run.json`` beside ``recipe.yaml``; ``show``, ``compare`` and the
seeds summary read that file instead of parsing the recipe or allocation file names again.

This module is the only reader of ``budget.target`` after ``config/recipe.py`` checked it
(``tests/config/test_budget_walk.py`` holds every other module to that).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from evolalloc.core.errors import UserError

#: Bumped when a field changes meaning; a file of another version is refused, not guessed at.
VERSION = 1


@dataclass(frozen=True)
class TaskFacts:
    """One task the fitness averages: its label (its name alone), weight, prompt length and mode."""

    label: str
    name: str
    weight: float
    context_tokens: int
    fitness_mode: str


@dataclass(frozen=True)
class ResolvedRun:
    """Everything downstream of the recipe needs to know about its budgets, fitness and methods.

    ``budgets``: the target first, then the expansions in the recipe's order, or the rest of the
    curve's grid (ascending) — every budget a profile is shipped and compared at. ``curve_anchors``
    is empty without ``budget.curve``. ``fitness_mode_given``: whether the recipe named the mode
    (else each task's default decided it).
    """

    name: str
    model: str
    target: int
    budgets: tuple[int, ...]
    expansions: tuple[int, ...]
    expansion_rule: str
    curve_grid: tuple[int, ...]
    curve_anchors: tuple[int, ...]
    granularity: str
    tasks: tuple[TaskFacts, ...]
    multi_task: bool
    fitness_mode_given: bool
    scorer: str
    scorer_checkpoint: str | None
    scorer_training: tuple[int, int] | None  # (steps, seed) when the run trains its scorer
    baselines: tuple[str, ...]
    search_space: str
    group_size: int
    optimizer: str
    generations_per_group: int
    storage: str | None
    version: int = VERSION

    @property
    def fitness_mode(self) -> str:
        """The mode(s) the search climbed, one word: ``graded`` or ``graded+generate`` (task order)."""
        return "+".join(dict.fromkeys(task.fitness_mode for task in self.tasks))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ResolvedRun":
        """The inverse of ``to_dict`` (``ValueError``/``TypeError``/``KeyError`` on a wrong shape)."""
        data = dict(data)
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r}, this evolalloc reads version {VERSION}")
        data["tasks"] = tuple(TaskFacts(**task) for task in data["tasks"])
        for key in ("budgets", "expansions", "curve_grid", "curve_anchors", "baselines"):
            data[key] = tuple(data[key])
        if data["scorer_training"] is not None:
            data["scorer_training"] = tuple(data["scorer_training"])
        return cls(**data)


def _default_mode(task_name: str) -> str:
    """A task's own fitness mode (a class attribute: no task is built, no dataset read)."""
    from fitness.registry import task_class

    try:
        return getattr(task_class(task_name), "default_fitness_mode", "generate")
    except LookupError:  # an unregistered name: its recipe was loaded without name checks
        return "generate"


def resolve_run(recipe) -> ResolvedRun:
    """The typed, frozen facts of a loaded (already checked and defaulted) ``Recipe``."""
    budget = recipe.budget
    curve = budget.curve
    return ResolvedRun(
        name=recipe.name,
        model=recipe.model.spec,
        target=budget.target,
        budgets=tuple(recipe.budgets),
        expansions=tuple(budget.expansions or ()),
        expansion_rule=budget.expansion_rule,
        curve_grid=tuple(curve.grid(budget.target)) if curve is not None else (),
        curve_anchors=tuple(curve.anchor_budgets(budget.target)) if curve is not None else (),
        granularity=recipe.granularity,
        tasks=tuple(TaskFacts(label=e.label, name=e.name, weight=float(e.weight), context_tokens=e.context_tokens,
                              fitness_mode=recipe.fitness.mode or _default_mode(e.name)) for e in recipe.task_entries),
        multi_task=recipe.multi_task,
        fitness_mode_given=recipe.fitness.mode is not None,
        scorer=recipe.scorer.name,
        scorer_checkpoint=recipe.scorer.params.get("checkpoint"),
        scorer_training=(recipe.scorer.train.steps, recipe.scorer.train.seed) if recipe.scorer.train else None,
        baselines=tuple(recipe.baselines),
        search_space=recipe.search_space.name,
        group_size=recipe.search_space.group_size,
        optimizer=recipe.optimizer.name,
        generations_per_group=recipe.optimizer.generations_per_group,
        storage=recipe.storage,
    )


def resolved_json(resolved: ResolvedRun) -> str:
    """What ``run.json`` holds (``config/run_folder.py`` writes and reads it)."""
    return json.dumps(resolved.to_dict(), indent=2) + "\n"


def parse_resolved(text: str, source: str) -> ResolvedRun:
    """``run.json``'s text as a ``ResolvedRun``; ``UserError`` naming ``source`` if it is not one."""
    try:
        return ResolvedRun.from_dict(json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise UserError(f"not a resolved run file ({type(err).__name__}: {err})", source=source) from None
