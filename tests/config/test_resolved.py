"""The resolved run: a recipe decided once into typed values, saved as run.json, read back by the report."""

import dataclasses

import pytest

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.config.resolved import ResolvedRun, resolve_run
from evolalloc.config.run_folder import RUN_FILE, create_run_folder, load_resolved, missing_outputs
from evolalloc.core.errors import UserError


def _recipe(**budget):
    return recipe_from_dict({"name": "r", "task": {"name": "passkey", "context_tokens": 1000},
                             "budget": {"target": 64, **budget}}, check_names=False)


def test_expansions_left_unset_resolve_to_twice_and_four_times_the_target():
    run = resolve_run(_recipe())
    assert (run.target, run.expansions, run.budgets) == (64, (128, 256), (64, 128, 256))
    assert run.curve_grid == () and run.curve_anchors == ()


def test_a_curve_resolves_to_its_grid_with_the_target_first_and_its_anchors():
    run = resolve_run(_recipe(curve={"low": 0.25, "high": 4.0, "points": 5}))
    assert run.curve_grid == (16, 32, 64, 128, 256) and run.curve_anchors == (16, 64, 256)
    assert run.budgets[0] == 64 and sorted(run.budgets) == list(run.curve_grid) and run.expansions == ()


def test_the_fitness_mode_is_decided_here_from_the_recipe_or_each_tasks_default():
    default = resolve_run(_recipe())
    assert default.fitness_mode == "likelihood" and not default.fitness_mode_given  # passkey's own default
    given = recipe_from_dict({"task": {"name": "passkey"}, "budget": {"target": 64}, "fitness": {"mode": "graded"}},
                             check_names=False)
    assert resolve_run(given).fitness_mode == "graded" and resolve_run(given).fitness_mode_given
    several = recipe_from_dict({"budget": {"target": 64}, "tasks": [{"name": "passkey"}, {"name": "niah_multivalue"}]},
                               check_names=False)
    assert [t.fitness_mode for t in resolve_run(several).tasks] == ["likelihood", "graded"]
    assert resolve_run(several).fitness_mode == "likelihood+graded" and resolve_run(several).multi_task


def test_the_resolved_run_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolve_run(_recipe()).target = 32


def test_a_run_folder_holds_run_json_and_reads_back_the_same_values(tmp_path):
    recipe = _recipe(expansions=[96, 512], expansion_rule="additive")
    folder = create_run_folder(recipe, tmp_path)
    assert (folder / RUN_FILE).is_file()
    loaded = load_resolved(folder)
    assert isinstance(loaded, ResolvedRun) and loaded == resolve_run(recipe)
    assert loaded.budgets == (64, 96, 512) and loaded.expansion_rule == "additive"
    assert missing_outputs(folder, loaded)[:3] == ["allocation-c64.json", "allocation-c96.json", "allocation-c512.json"]


def test_a_folder_from_before_run_json_is_resolved_from_its_recipe_yaml(tmp_path):
    recipe = _recipe()
    folder = create_run_folder(recipe, tmp_path)
    (folder / RUN_FILE).unlink()  # what a run folder made before this change holds
    assert load_resolved(folder) == resolve_run(recipe)
    assert not (folder / RUN_FILE).exists()  # reading a run never writes into it


@pytest.mark.parametrize("text", ["{", "[]", '{"version": 99}', '{"version": 1, "name": "r"}'])
def test_a_damaged_run_json_is_one_user_error_naming_the_file(tmp_path, text):
    folder = create_run_folder(_recipe(), tmp_path)
    (folder / RUN_FILE).write_text(text)
    with pytest.raises(UserError) as err:
        load_resolved(folder)
    assert err.value.source == str(folder / RUN_FILE) and "not a resolved run file" in str(err.value)
