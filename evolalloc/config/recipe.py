"""Run recipes: dataclass defaults -> YAML file -> ``--set`` overrides, validated in one place.

>>> recipe = load_recipe("runs/quickstart.yaml", overrides=["optimizer.generations_per_group=2"])  # doctest: +SKIP
>>> recipe.budgets  # doctest: +SKIP
[128, 256, 512]

A recipe file may name a ``base:`` recipe and override a few of its keys; the chain is merged
before anything is checked (``recipe_base.py``), so what is validated, resolved and saved is the
merged recipe.

Every problem (unreadable file, bad YAML, unknown or missing key, wrong type, bad value, an
unknown task or scorer) raises one ``UserError(message, source=<file or --set>, field=<dotted
key>)`` before anything is written. The sections and their defaults are in ``evolalloc.config.schema``.

A loaded ``Recipe`` is *resolved*: seeds left null take the recipe's ``seed``, expansions left
null become ``[2c, 4c]`` and the name defaults to the file's stem, so ``to_yaml()`` writes down
exactly what ran and loading that file again gives an equal recipe.

Where the parts live: the ``Recipe`` type in ``recipe_type.py``, reading the YAML and the ``--set``
overrides in ``recipe_reading.py``, the cross-field rules in ``recipe_checks.py``; this module puts
them in order (read, override, build, resolve, check).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from evolalloc.config.recipe_base import BASE_KEY, Layer, read_with_bases
from evolalloc.config.recipe_checks import NO_TASK, check_recipe, check_registered_names, method_labels
from evolalloc.config.recipe_reading import OVERRIDE_SOURCE, apply_overrides, read_yaml_file, source_of
from evolalloc.config.recipe_type import Recipe
from evolalloc.config.section_builder import FieldProblem, build_section
from evolalloc.core.errors import UserError

__all__ = ["OVERRIDE_SOURCE", "Recipe", "load_recipe", "read_recipe_file", "recipe_from_dict"]


def load_recipe(path: str | Path, overrides: Iterable[str] = (), *, check_names: bool = True) -> Recipe:
    """Read, override, validate and resolve the recipe at ``path``.

    ``overrides`` are ``"dotted.key=value"`` strings (the CLI's ``--set``); values are YAML, so
    ``budget.expansions=[256,512]`` and ``storage=null`` work. ``check_names`` also checks the
    task's and the scorer's names and parameters against their registries (the scorer registry
    imports torch, ~3 s); switch it off for commands that only read a finished run.
    """
    path = Path(path)
    merged, layers = read_recipe_file(path)
    data, applied = apply_overrides(merged, overrides)
    return recipe_from_dict(data, source=str(path), default_name=path.stem, applied=applied, check_names=check_names,
                            layers=layers)


def read_recipe_file(path: str | Path) -> tuple[Any, list[Layer]]:
    """The parsed recipe file merged over its ``base:`` chain (``recipe_base``), not yet
    validated, and the chain's files (``path`` first) for blaming a bad field on its file."""
    return read_with_bases(Path(path), read_yaml_file)


def recipe_from_dict(
    data: Any, *, source: str = "<recipe>", default_name: str = "run", applied: dict[str, str] | None = None,
    check_names: bool = True, layers: list[Layer] = (),
) -> Recipe:
    """Validate and resolve an already-parsed recipe (see ``load_recipe``). ``layers``: the
    ``base:`` chain it was merged from, so an inherited bad field names the base file."""
    applied = applied or {}
    try:
        if isinstance(data, dict) and BASE_KEY in data:
            # Only a recipe *file* has a folder its base is relative to (and the service must not
            # be made to read files): a parsed mapping arrives merged.
            raise FieldProblem(BASE_KEY, "is resolved only when a recipe file is read (`evolalloc search FILE`); "
                                         "send the merged recipe instead (a run folder's recipe.yaml)")
        if isinstance(data, dict) and data.get("task") is None and data.get("tasks") is None:
            raise FieldProblem("task.name", NO_TASK)  # the first thing a recipe must say
        recipe = build_section(Recipe, method_labels(data))
        _resolve(recipe, default_name)
        check_recipe(recipe)
        if check_names:
            check_registered_names(recipe)
    except FieldProblem as problem:
        raise UserError(problem.message, source=source_of(problem.field, source, applied, layers),
                        field=problem.field) from None
    recipe.source = source
    return recipe


def _resolve(recipe: Recipe, default_name: str) -> None:
    if recipe.name is None:
        recipe.name = default_name
    tasks = [recipe.task] if recipe.task is not None else list(recipe.tasks or [])
    for section in [s for task in tasks for s in (task.search, task.heldout)] + [recipe.optimizer]:
        if section.seed is None:
            section.seed = recipe.seed
    for task in recipe.tasks or []:
        if task.label is None:
            task.label = task.name
    if recipe.budget.curve is not None and recipe.budget.expansions is None:
        recipe.budget.expansions = []  # the curve's grid holds every budget
    train = recipe.scorer.train
    for entry in (train.tasks or []) if train is not None else []:
        # Resolved here, so the saved recipe (and the training key) name what was really drawn.
        entry.label = entry.label or entry.name
        entry.seed = train.seed if entry.seed is None else entry.seed
        if entry.context_tokens is None and tasks:
            entry.context_tokens = tasks[0].context_tokens
    if recipe.budget.expansions is None and recipe.budget.target is not None:
        recipe.budget.expansions = [2 * recipe.budget.target, 4 * recipe.budget.target]
    # Absolute, so that the saved recipe and the rows' allocation files name the file wherever they are read.
    recipe.checkpoints = {key: str(Path(value).expanduser().absolute()) if isinstance(value, str) and value else value
                          for key, value in recipe.checkpoints.items()}
