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
from dataclasses import asdict, dataclass, field

from evolalloc.config.search_start import resolve_start
from evolalloc.core.errors import UserError
from evolalloc.search.stopping import DEFAULT_RULE, StopRule, passes_words

#: Bumped when a field changes meaning; a file of another version is refused, not guessed at.
VERSION = 1


@dataclass(frozen=True)
class SplitFacts:
    """How a split's instances are drawn: how many, the seed, and what curation keeps (if any)."""

    n: int
    seed: int | None
    full_cache_solves: bool = False
    reference_unsolved: str | None = None
    draw: int | None = None

    @property
    def curated(self) -> bool:
        return self.full_cache_solves or self.reference_unsolved is not None


@dataclass(frozen=True)
class TaskFacts:
    """One task the fitness averages: its label (its name alone), weight, prompt length and mode,
    its parameters and how each split is drawn."""

    label: str
    name: str
    weight: float
    context_tokens: int
    fitness_mode: str
    params: dict = field(default_factory=dict)
    search: SplitFacts | None = None  # None: read from a run.json written before these were recorded
    heldout: SplitFacts | None = None
    question_after_compression: bool = False

    @classmethod
    def from_dict(cls, data: dict) -> "TaskFacts":
        data = dict(data)
        for split in ("search", "heldout"):
            if data.get(split) is not None:
                data[split] = SplitFacts(**data[split])
        return cls(**data)


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
    generations_per_group: int | None  # EvolKV's fixed M; None: each group until it converged
    storage: str | None
    # What the report says was searched (a run.json written before these were recorded lacks them).
    dtype: str = "float32"
    scorer_params: dict = field(default_factory=dict)
    ratio_bounds: tuple[float, float] | None = None
    sigma0: float | None = None
    popsize: int | None = None  # None: EvolKV's 4 + floor(3 ln n_g)
    optimizer_seed: int | None = None
    lam: float | None = None
    gamma: float | None = None
    cache_scope: str = "group"
    engine: str = "local"
    workers: int = 1
    seed: int = 0  # the recipe's: the comparison's bootstrap
    curve_range: tuple[float, float] | None = None  # budget.curve's low and high, as multiples of c
    curve_anchors_named: tuple[int, ...] | None = None  # budget.curve.anchors as written; None: the ends and c
    keep_records: bool = False  # ``engine.keep_records``: the spilled records stay once the run is finished
    # The converging rule (when generations_per_group is None) and the start's methods (empty: uniform, EvolKV).
    max_generations_per_group: int = DEFAULT_RULE.max_generations
    patience: int = DEFAULT_RULE.patience
    tolerance: float = DEFAULT_RULE.tolerance
    start: tuple[str, ...] = ()
    passes: int = 1  # ``optimizer.passes``: visits of every group (absent from a run.json written before it)
    decode_interval: int | None = None  # ``budget.decode.interval``: budgets held while decoding; None: prompt-only
    version: int = VERSION

    @property
    def task_names(self) -> str:
        """``passkey`` or ``passkey+words``: the task label(s) in one word (as ``Recipe.task_names``)."""
        return "+".join(task.label for task in self.tasks)

    @property
    def decode(self):
        """The decode-time eviction every evaluation of the run holds (``core.decode_eviction``), or None."""
        from evolalloc.core.decode_eviction import DecodeEviction

        return None if self.decode_interval is None else DecodeEviction(self.decode_interval)

    @property
    def fitness_mode(self) -> str:
        """The mode(s) the search climbed, one word: ``graded`` or ``graded+generate`` (task order)."""
        return "+".join(dict.fromkeys(task.fitness_mode for task in self.tasks))

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def stop_words(self) -> str:
        """How each group's search stops, in words (``search.stopping.StopRule.words``)."""
        words = StopRule(self.generations_per_group, self.max_generations_per_group, self.patience,
                         self.tolerance).words()
        return words + passes_words(self.passes)

    @classmethod
    def from_dict(cls, data: dict) -> "ResolvedRun":
        """The inverse of ``to_dict`` (``ValueError``/``TypeError``/``KeyError`` on a wrong shape)."""
        data = dict(data)
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r}, this evolalloc reads version {VERSION}")
        data["tasks"] = tuple(TaskFacts.from_dict(task) for task in data["tasks"])
        for key in ("budgets", "expansions", "curve_grid", "curve_anchors", "baselines"):
            data[key] = tuple(data[key])
        if data["scorer_training"] is not None:
            data["scorer_training"] = tuple(data["scorer_training"])
        for key in ("ratio_bounds", "curve_range", "curve_anchors_named", "start"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)


def task_default_mode(task_name: str) -> str:
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
        tasks=tuple(_task_facts(entry, recipe.fitness.mode) for entry in recipe.task_entries),
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
        dtype=recipe.model.dtype,
        scorer_params=dict(recipe.scorer.params),
        ratio_bounds=tuple(recipe.search_space.ratio_bounds) if recipe.search_space.ratio_bounds else None,
        sigma0=recipe.optimizer.sigma0,
        popsize=recipe.optimizer.popsize,
        optimizer_seed=recipe.optimizer.seed,
        lam=recipe.optimizer.lam,
        gamma=recipe.optimizer.gamma,
        cache_scope=recipe.optimizer.cache_scope,
        engine=recipe.engine.kind,
        workers=recipe.engine.workers,
        seed=recipe.seed,
        curve_range=(curve.low, curve.high) if curve is not None else None,
        curve_anchors_named=tuple(curve.anchors) if curve is not None and curve.anchors is not None else None,
        keep_records=recipe.engine.keep_records,
        max_generations_per_group=recipe.optimizer.max_generations_per_group,
        patience=recipe.optimizer.patience,
        tolerance=recipe.optimizer.tolerance,
        start=resolve_start(recipe.optimizer.start, recipe.search_space.name,
                            [entry.name for entry in recipe.task_entries]),
        passes=recipe.optimizer.passes,
        decode_interval=budget.decode.interval if budget.decode is not None else None,
    )


def _split_facts(section) -> SplitFacts:
    curate = section.curate
    return SplitFacts(n=section.n, seed=section.seed, full_cache_solves=curate.full_cache_solves,
                      reference_unsolved=curate.reference_unsolved, draw=curate.draw)


def _task_facts(entry, mode: str | None) -> TaskFacts:
    return TaskFacts(label=entry.label, name=entry.name, weight=float(entry.weight),
                     context_tokens=entry.context_tokens,
                     fitness_mode=mode or task_default_mode(entry.name), params=dict(entry.params),
                     search=_split_facts(entry.search), heldout=_split_facts(entry.heldout),
                     question_after_compression=entry.question_after_compression)


def resolved_json(resolved: ResolvedRun) -> str:
    """What ``run.json`` holds (``config/run_folder.py`` writes and reads it)."""
    return json.dumps(resolved.to_dict(), indent=2) + "\n"


def parse_resolved(text: str, source: str) -> ResolvedRun:
    """``run.json``'s text as a ``ResolvedRun``; ``UserError`` naming ``source`` if it is not one."""
    try:
        return ResolvedRun.from_dict(json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise UserError(f"not a resolved run file ({type(err).__name__}: {err})", source=source) from None
