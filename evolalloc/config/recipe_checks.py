"""The rules a recipe's sections cannot check one field at a time (``schema.py`` does those):
cross-field rules, the rules on list items, and the task, scorer and engine names and parameters
against their registries (``check_registered_names``, which imports the registries). Each problem is a
``FieldProblem`` naming the dotted field; ``recipe.py`` turns it into a ``UserError``."""

from __future__ import annotations

import re

from evolalloc.config.recipe_type import Recipe
from evolalloc.config.schema import TRAINABLE_SCORERS, TaskSection
from evolalloc.config.section_builder import FieldProblem, unknown_key
from evolalloc.core.baselines import EVOLVED, reading_checkpoints
from evolalloc.core.composition import CompositionProblem, from_mapping, is_method, label_of, parse_label
from evolalloc.core.record_settings import parse_size
from evolalloc.core.scorer_names import CHECKPOINT_KINDS, RETENTION_GATES, canonical_scorer
from evolalloc.core.topup import TOPUP_RULES, topup_problem
from evolalloc.registry import UnknownNameError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
NO_TASK = "missing required field (registered task (see `evolalloc tasks`); or list several under tasks)"


def _check_labels(path: str, labels: list[str]) -> None:
    """Each label of the list at ``path`` is a folder-safe name, used once."""
    for i, label in enumerate(labels):
        if not _NAME.match(label):
            raise FieldProblem(f"{path}[{i}].label", f"must be letters, digits, '.', '_' or '-', got {label!r}")
        if label in labels[:i]:
            raise FieldProblem(f"{path}[{i}].label", f"{label!r} is used twice: give each task its own label")


def check_recipe(recipe: Recipe) -> None:
    """Cross-field rules and the rules on list items (the schema checks single fields)."""
    if not _NAME.match(recipe.name):
        raise FieldProblem("name", f"must be a folder name of letters, digits, '.', '_' or '-', got {recipe.name!r}")
    target = recipe.budget.target
    for i, value in enumerate(recipe.budget.expansions):
        if value < 1:
            raise FieldProblem(f"budget.expansions[{i}]", f"must be >= 1, got {value}")
        if value == target or value in recipe.budget.expansions[:i]:
            raise FieldProblem(f"budget.expansions[{i}]", f"{value} is listed twice (the target counts)")
        if value < target:
            # As for `evolalloc expand`: a profile searched at c says nothing about a smaller cache.
            raise FieldProblem(f"budget.expansions[{i}]", f"{value} is below budget.target {target}: a profile is "
                                                          "only carried to larger budgets; "
                                                          "search at that target instead")
    _check_curve(recipe)
    for path, task in _task_sections(recipe):
        context = task.context_tokens
        if context is not None and target >= context:
            raise FieldProblem("budget.target", f"{target} leaves nothing to compress in a {context}-token prompt "
                                                f"({path}.context_tokens); choose a smaller target")
        _check_curation(path, task)
    if recipe.tasks is not None:
        _check_labels("tasks", [task.label for task in recipe.tasks])
        if recipe.engine.kind == "ray" and len(recipe.tasks) > 1:
            raise FieldProblem("engine.kind",
                               "the ray engine evaluates one task; use engine.kind: local for several tasks")
    try:
        parse_size(recipe.engine.record_memory)
    except ValueError as err:
        raise FieldProblem("engine.record_memory", str(err)) from None
    bounds = recipe.search_space.ratio_bounds
    if bounds is not None and not (0 <= bounds[0] < bounds[1]):
        raise FieldProblem("search_space.ratio_bounds", f"must be [lo, hi] with 0 <= lo < hi, got {bounds}")
    lowest = min(recipe.budgets)  # the target, or the curve's low end
    _check_checkpoints(recipe)
    for i, name in enumerate(recipe.baselines):
        _composition(f"baselines[{i}]", name)
        if name in recipe.baselines[:i]:
            raise FieldProblem(f"baselines[{i}]", f"{name!r} is listed twice")
        problem = baseline_problem(recipe, name)  # e.g. global-topk without a trained checkpoint
        if problem:
            raise FieldProblem(f"baselines[{i}]", problem)
        baseline = reading_checkpoints(name, recipe.checkpoints)
        least = baseline.min_target  # e.g. streaming's sink tokens
        if target < least:
            raise FieldProblem("budget.target", f"baseline {name!r} needs a target >= {least:g}, got {target}")
        if lowest < least:
            raise FieldProblem("budget.curve.low", f"baseline {name!r} needs budgets >= {least:g}; the curve starts at "
                                                   f"{lowest}")
    if recipe.storage is not None and not _URL.match(recipe.storage):
        raise FieldProblem("storage", f"must be a database URL such as sqlite:///path/study.db, got {recipe.storage!r}")
    _check_scorer_training(recipe)
    from evolalloc.config.decode_checks import check_decode_modes
    from evolalloc.config.resolved import task_default_mode

    check_decode_modes(recipe, task_default_mode)
    from searchspaces import SEARCH_SPACES  # a leaf package of plain numpy: cheap

    _check_registered("search_space.name", SEARCH_SPACES, recipe.search_space.name)
    space = SEARCH_SPACES.get(recipe.search_space.name)
    if space.scorers is not None and canonical_scorer(recipe.scorer.name) not in space.scorers:
        raise FieldProblem("search_space.name", f"search space {recipe.search_space.name!r} only works with scorer "
                                                f"{' or '.join(space.scorers)}; got scorer.name {recipe.scorer.name!r}")
    if recipe.budget.expansion_rule in TOPUP_RULES:  # the global top-k places the extra tokens
        problem = topup_problem(recipe.scorer.name, space.adapter, recipe.budget.expansion_rule)
        if problem:
            raise FieldProblem("budget.expansion_rule", problem)
    if recipe.search_space.floor_fraction is not None and "floor_fraction" not in space.params:
        raise FieldProblem("search_space.floor_fraction", f"only the floors_under_global_topk search space takes it, "
                                                          f"not {recipe.search_space.name!r}")
    for i, name in enumerate(recipe.baselines):
        if space.adapter is not None and parse_label(name).allocation == EVOLVED:  # e.g. evolved+adakv on the hybrid
            raise FieldProblem(f"baselines[{i}]",
                               f"{name!r} adapts the searched budgets, but {recipe.search_space.name!r}'s "
                                                  "budgets are read by its own adapter "
                                                  f"({space.adapter}), not as budgets")


def baseline_problem(recipe: Recipe, name: str) -> str | None:
    """Why method ``name`` cannot run in ``recipe``'s run (the checkpoint of the trained scorer it ranks
    with is missing...), or ``None``. One that ranks with the run's own scorer reads the run's checkpoint,
    checked (or trained) with the run's scorer, not here."""
    method = reading_checkpoints(name, recipe.checkpoints)
    declared = method.scorer
    if declared and canonical_scorer(declared[0]) == canonical_scorer(recipe.scorer.name):
        return None
    return method.problem()


def _check_checkpoints(recipe: Recipe) -> None:
    """``checkpoints``: each key a trained scorer, named once, that is not the run's own (whose checkpoint
    is ``scorer.params.checkpoint``), each value a file that exists (its model is checked once it is loaded;
    the service confines the paths before any of this: ``service/confinement.py``)."""
    from pathlib import Path

    seen: dict[str, str] = {}
    for key, value in recipe.checkpoints.items():
        field, scorer = f"checkpoints.{key}", canonical_scorer(str(key))
        if scorer not in CHECKPOINT_KINDS:
            raise FieldProblem(field, f"not a trained scorer; those with a checkpoint: {', '.join(CHECKPOINT_KINDS)}")
        if scorer in seen:
            raise FieldProblem(field, f"{scorer} is named twice (also as {seen[scorer]!r})")
        seen[scorer] = str(key)
        if scorer == canonical_scorer(recipe.scorer.name):
            raise FieldProblem(field, f"the run's scorer is {scorer}: its checkpoint (scorer.params.checkpoint) is "
                                      "its methods' too")
        if not (isinstance(value, str) and value):
            raise FieldProblem(field, f"must be a checkpoint file's path, got {value!r}")
        if not Path(value).expanduser().is_file():
            raise FieldProblem(field, f"no file at {value}")


def _composition(path: str, entry):
    """The composition ``entry`` (a label or a mapping) at ``path`` names, or ``FieldProblem`` naming the piece."""
    try:
        return from_mapping(entry) if isinstance(entry, dict) else parse_label(entry)
    except CompositionProblem as problem:
        raise FieldProblem(f"{path}.{problem.field}" if problem.field else path, str(problem)) from None


def _check_adapters(recipe: Recipe) -> None:
    """Each baseline's adapter (``baselines[i].adapter``) is a registered runtime budget adapter."""
    from evolalloc.runtime.adaptive import ADAPTERS

    for i, name in enumerate(recipe.baselines):
        adapter = parse_label(name).adapter
        if adapter is not None and adapter not in ADAPTERS.load_all() and adapter not in ADAPTERS:  # or an old name
            raise FieldProblem(f"baselines[{i}].adapter", f"unknown adapter {adapter!r}; known: "
                                                          f"{', '.join(sorted(ADAPTERS.load_all()))}")


def method_labels(data):
    """The parsed recipe with each ``baselines`` mapping (``{allocation: ..., scorer: ..., adapter: ...}``)
    (and each name, ``uniform+cake``) replaced by its method's one label (``core/composition.py``): a
    mapping equal to an alias is that alias,
    so its rows, comparison.json keys and files are the alias's."""
    if not (isinstance(data, dict) and isinstance(data.get("baselines"), list)):
        return data
    return {**data, "baselines": [label_of(_composition(f"baselines[{i}]", entry))
                                  if isinstance(entry, dict) or is_method(entry) else entry  # a bad name: checked later
                                  for i, entry in enumerate(data["baselines"])]}


def _check_curve(recipe: Recipe) -> None:
    """``budget.curve``: instead of expansions, a grid of distinct budgets whose anchors lie on it."""
    curve, target = recipe.budget.curve, recipe.budget.target
    if curve is None:
        return
    if recipe.budget.expansions:
        raise FieldProblem("budget.expansions",
                           "give either expansions or curve (its grid holds every budget), not both")
    if curve.low >= 1:
        raise FieldProblem("budget.curve.low", f"must be below 1 (a multiple of c under c), got {curve.low}")
    grid = curve.grid(target)
    if len(grid) < curve.points:
        raise FieldProblem("budget.curve.points",
                           f"{curve.points} points from {curve.low}*c to {curve.high}*c round to "
                                                  f"only {len(grid)} distinct budgets "
                                                  f"({grid}); use fewer points or a wider range")
    for i, value in enumerate(curve.anchors or []):
        if value not in grid:
            raise FieldProblem(f"budget.curve.anchors[{i}]", f"{value} is not on the grid {grid}")
    anchors = curve.anchor_budgets(target)
    if anchors[0] != grid[0] or anchors[-1] != grid[-1]:
        raise FieldProblem("budget.curve.anchors", f"must include both ends of the grid ({grid[0]} and {grid[-1]}): "
                                                   "budgets outside the anchors would not be searched")
    if recipe.search_space.name not in ("layer_groups", "head_groups"):
        raise FieldProblem("budget.curve", f"needs budgets a unit keeps (layer_groups or head_groups), not the "
                                           f"{recipe.search_space.name!r} search space's prior")


def _check_scorer_training(recipe: Recipe) -> None:
    """``scorer.train``: a scorer the run can train, no checkpoint named beside it, capacities above
    the always-kept tokens."""
    train = recipe.scorer.train
    if train is None:
        return
    if canonical_scorer(recipe.scorer.name) not in TRAINABLE_SCORERS:
        raise FieldProblem("scorer.train", f"a run can train {', '.join(TRAINABLE_SCORERS)} only; "
                                           f"{recipe.scorer.name!r} has nothing to train")
    if recipe.scorer.params.get("checkpoint"):
        raise FieldProblem("scorer.params.checkpoint",
                           "give either a checkpoint or scorer.train (which makes one), not both")
    if train.tasks is not None:
        if not train.tasks:
            raise FieldProblem("scorer.train.tasks", "must list at least one task (or null: the recipe's own tasks)")
        if train.traces is None:
            raise FieldProblem("scorer.train.traces",
                               "required with scorer.train.tasks: how many prompts the mixture traces")
        _check_labels("scorer.train.tasks", [entry.label for entry in train.tasks])
    if canonical_scorer(recipe.scorer.name) != RETENTION_GATES:
        if train.votes:
            raise FieldProblem("scorer.train.votes", f"only {RETENTION_GATES} read SnapKV votes; "
                                                     f"{recipe.scorer.name!r} does not")
        if train.objective != "attention":
            raise FieldProblem("scorer.train.objective",
                               f"only anchored gates train on the answer; {recipe.scorer.name!r} cannot")
        if train.anchored or not train.residual:
            field = "scorer.train.anchored" if train.anchored else "scorer.train.residual"
            raise FieldProblem(field, f"only {RETENTION_GATES} can be anchored at SnapKV; "
                                      f"{recipe.scorer.name!r} cannot")
        return  # capacities are the retention gates' training budgets
    if not train.residual and not train.anchored:
        raise FieldProblem("scorer.train.residual",
                           "false is a setting of anchored gates (set scorer.train.anchored: true)")
    if train.anchored and not train.votes:
        raise FieldProblem("scorer.train.anchored",
                           "anchored gates start from SnapKV's votes: set scorer.train.votes (e.g. 32)")
    if train.objective == "answer" and not train.anchored:
        raise FieldProblem("scorer.train.objective", "answer trains anchored gates: set scorer.train.anchored: true")
    if train.objective == "answer" and train.splits_per_trace != 1:
        raise FieldProblem("scorer.train.splits_per_trace", "the answer objective trains at the prompt end only "
                                                            "(where compression happens): set 1")
    kept = int(recipe.scorer.params.get("sinks", 4)) + int(recipe.scorer.params.get("window", 16))
    for i, capacity in enumerate(train.capacities if train.capacities is not None else recipe.budgets):
        if capacity <= kept:
            where = f"scorer.train.capacities[{i}]" if train.capacities is not None else "budget.target"
            raise FieldProblem(where,
                               f"{capacity} does not exceed the scorer's "
                               f"always-kept tokens ({kept}): nothing to train for")


def _task_sections(recipe: Recipe) -> list[tuple[str, TaskSection]]:
    """``(dotted path, section)`` of every task: ``task``, or ``tasks[0]``, ``tasks[1]``..."""
    if recipe.task is not None and recipe.tasks is not None:
        raise FieldProblem("tasks", "give either task (one task) or tasks (several), not both")
    if recipe.task is None and recipe.tasks is None:
        raise FieldProblem("task.name", NO_TASK)
    if recipe.tasks is not None and not recipe.tasks:
        raise FieldProblem("tasks", "must list at least one task")
    if recipe.task is not None:
        return [("task", recipe.task)]
    return [(f"tasks[{i}]", task) for i, task in enumerate(recipe.tasks)]


def _check_curation(path: str, task: TaskSection) -> None:
    """The held-out split is never filtered by a compressed method's score; draws must make sense."""
    for split in ("search", "heldout"):
        section = getattr(task, split)
        curate, where = section.curate, f"{path}.{split}.curate"
        if split == "heldout" and curate.reference_unsolved is not None:
            raise FieldProblem(f"{where}.reference_unsolved", "the held-out split is never filtered by a compressed "
                                                              "method's score; only full_cache_solves is allowed there")
        if curate.reference_unsolved is not None and not curate.full_cache_solves:
            raise FieldProblem(f"{where}.reference_unsolved", "needs full_cache_solves: true (an instance the full "
                                                              "cache fails carries no signal either)")
        if curate.draw is not None and not curate.active:
            raise FieldProblem(f"{where}.draw", "only matters when curating: set full_cache_solves: true")
        if curate.draw is not None and curate.draw < section.n:
            raise FieldProblem(f"{where}.draw", f"must be >= {path}.{split}.n ({section.n}), got {curate.draw}")


def _check_registered(field: str, registry, name: str) -> None:
    """A ``FieldProblem`` (did-you-mean and the valid names) unless ``registry`` knows ``name``."""
    try:
        registry.check_name(name)
    except UnknownNameError as err:
        raise FieldProblem(field, str(err)) from None


def check_registered_names(recipe: Recipe) -> None:
    """Task and scorer names and parameter names, against their registries."""
    from fitness.registry import TASKS, task_class, task_parameters

    for path, task in _task_sections(recipe):
        _check_registered(f"{path}.name", TASKS, task.name)
        valid = task_parameters(task.name)
        for key in task.params:
            if key not in valid:
                raise unknown_key(f"{path}.params", key, valid)
        if recipe.fitness.mode == "likelihood" and task_class(task.name).judged_against_full_cache:
            raise FieldProblem("fitness.mode", f"task {task.name!r} has no reference to score in the likelihood mode "
                                               "(it is judged against the full cache's own continuation): "
                                               "use fidelity-tokens")

    train = recipe.scorer.train
    for i, entry in enumerate((train.tasks or []) if train is not None else []):
        path = f"scorer.train.tasks[{i}]"
        _check_registered(f"{path}.name", TASKS, entry.name)
        valid = task_parameters(entry.name)
        for key in entry.params:
            if key not in valid:
                raise unknown_key(f"{path}.params", key, valid)

    from evolalloc.engine.base import ENGINES

    engines = ENGINES.load_all()
    most = engines[recipe.engine.kind].max_workers
    if most is not None and recipe.engine.workers > most:
        unlimited = [name for name, cls in engines.items() if cls.max_workers is None]
        raise FieldProblem("engine.workers", f"the {recipe.engine.kind} engine runs at most {most} worker(s), got "
                                             f"{recipe.engine.workers}; use engine.kind: "
                                             f"{' or '.join(unlimited)} for more")
    takes = [p for p in ENGINES.parameters(recipe.engine.kind) if p != "workload"]
    for key in recipe.engine.options:
        if key not in takes:
            raise unknown_key("engine.options", key, takes)

    from evolalloc.runtime.scorers import SCORERS, get_scorer

    _check_registered("scorer.name", SCORERS, recipe.scorer.name)
    _check_adapters(recipe)
    try:
        scorer = get_scorer(recipe.scorer.name, **recipe.scorer.params)
    except ValueError as err:
        raise FieldProblem("scorer.params", str(err)) from None
    from evolalloc.config.decode_checks import check_decode_scorers

    owned = [(f"baselines[{i}]", method.scorer[0]) for i, name in enumerate(recipe.baselines)
             if (method := reading_checkpoints(name, recipe.checkpoints)).scorer]  # a method's own scorer (streaming)
    check_decode_scorers(recipe, scorer, owned)
    # Every task of the recipe (``task``, or each entry of ``tasks``) shares the one scorer.
    asking = [i for i, entry in enumerate(recipe.task_entries) if entry.question_after_compression]
    if recipe.scorer.train is not None and recipe.scorer.train.votes and asking:
        raise FieldProblem("scorer.train.votes", "query-aware gates read what the question attends to; "
                                                 "question_after_compression: true has no question at compression")
    if asking and not scorer.query_free:
        where = "task" if not recipe.multi_task else f"tasks[{asking[0]}]"
        query_free = [name for name, cls in SCORERS.load_all().items() if cls.query_free]
        raise FieldProblem("scorer.name", f"scorer {scorer.name!r} ranks tokens by what the queries attend to, so it "
                                          f"cannot serve {where}.question_after_compression: true (the question comes "
                                          f"after compression); use a query-free scorer: {', '.join(query_free)}")
