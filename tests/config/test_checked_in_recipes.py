"""Every recipe checked in under runs/ loads: names, parameters and values valid, and its task
(with its parameters) builds, so a recipe the README points at never fails on a typo."""

from __future__ import annotations

from pathlib import Path

import pytest

import fitness
from evolalloc.config.recipe import load_recipe

RUNS = Path(__file__).resolve().parents[2] / "runs"
RECIPES = sorted(RUNS.glob("*.yaml"))


def test_there_are_checked_in_recipes_including_the_prose_ones():
    names = {path.stem for path in RECIPES}
    assert {"quickstart", "niah_single"} <= names
    assert any(name.startswith("prose_") for name in names)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_a_checked_in_recipe_loads_and_its_task_builds(path):
    recipe = load_recipe(path)
    assert recipe.name == path.stem  # its run folder is named after the file, as the README says
    train = recipe.scorer.train
    for entry in [*recipe.task_entries, *((train.tasks or []) if train is not None else [])]:  # the training mixture too
        task = fitness.get_task(entry.name, **entry.params)
        assert task.name == entry.name
