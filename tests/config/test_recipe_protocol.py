"""Recipe sections of the search protocol: fitness mode, split curation, several weighted tasks."""

from __future__ import annotations

import pytest

from evolalloc.config.recipe import load_recipe

MULTI = """\
name: multi
seed: 5
tasks:
  - {name: passkey, weight: 2, context_tokens: 1000, search: {n: 4, seed: 9}}
  - {name: niah_single, label: words, params: {needle_type: word}, context_tokens: 800,
     search: {n: 6, curate: {full_cache_solves: true, reference_unsolved: uniform, draw: 30}}}
budget: {target: 128}
"""


def write(tmp_path, text, name="recipe.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_by_default_nothing_is_curated_and_the_fitness_mode_is_the_tasks_own(tmp_path):
    recipe = load_recipe(write(tmp_path, "task: {name: passkey}\nbudget: {target: 64}\n"), check_names=False)
    assert recipe.fitness.mode is None
    for split in (recipe.task.search, recipe.task.heldout):
        assert not split.curate.active and split.curate.draw is None and split.curate.reference_unsolved is None
    assert recipe.tasks is None and not recipe.multi_task


def test_one_task_is_one_entry_of_weight_one_labelled_with_its_name(tmp_path):
    recipe = load_recipe(write(tmp_path, "task: {name: passkey, search: {n: 3}}\nbudget: {target: 64}\n"))
    (entry,) = recipe.task_entries
    assert (entry.name, entry.label, entry.weight, entry.search.n) == ("passkey", "passkey", 1.0, 3)
    assert recipe.task_names == "passkey"
    assert "tasks" not in recipe.to_dict()


def test_several_tasks_resolve_labels_weights_and_seeds_per_task(tmp_path):
    recipe = load_recipe(write(tmp_path, MULTI))
    assert recipe.task is None and recipe.multi_task
    first, second = recipe.task_entries
    assert (first.label, first.weight, first.search.seed, first.heldout.seed) == ("passkey", 2.0, 9, 5)
    assert (second.label, second.weight, second.search.seed) == ("words", 1.0, 5)
    assert second.search.curate.active and second.search.curate.draw == 30
    assert recipe.task_names == "passkey+words"
    assert "task" not in recipe.to_dict()


def test_a_multi_task_recipe_round_trips_through_its_resolved_yaml(tmp_path):
    recipe = load_recipe(write(tmp_path, MULTI))
    again = load_recipe(write(tmp_path, recipe.to_yaml(), "again.yaml"))
    assert again == recipe


def test_overrides_reach_into_a_listed_task(tmp_path):
    recipe = load_recipe(write(tmp_path, MULTI), ["tasks.1.search.n=2", "tasks.0.weight=0.5"])
    assert recipe.tasks[1].search.n == 2 and recipe.tasks[0].weight == 0.5


def test_for_task_gives_a_single_task_recipe_of_that_entry(tmp_path):
    recipe = load_recipe(write(tmp_path, MULTI))
    words = recipe.for_task(recipe.task_entries[1])
    assert words.tasks is None and words.task.name == "niah_single" and words.task.context_tokens == 800
    assert words.task.search.curate.reference_unsolved == "uniform"
    assert words.budget == recipe.budget and words.name == recipe.name


@pytest.mark.parametrize("name, search_n, heldout_n", [("quickstart", 16, 64), ("passkey_snapkv", 32, 100)])
def test_the_main_jobs_follow_the_search_protocol(name, search_n, heldout_n):
    """Curated search split, held-out split never filtered, likelihood fitness. The quickstart's
    splits are smaller than passkey's: its 2048-token prompts must fit a 10-minute run on two cores
    (results/main-job/README.md)."""
    from pathlib import Path

    recipe = load_recipe(Path(__file__).resolve().parents[2] / "runs" / f"{name}.yaml")
    search, heldout = recipe.task.search, recipe.task.heldout
    assert search.n >= search_n and search.curate.full_cache_solves and search.curate.draw >= search.n
    assert heldout.n >= heldout_n and heldout.curate.reference_unsolved is None and not heldout.curate.active
    assert recipe.fitness.mode in (None, "likelihood")


def test_the_passkey_snapkv_recipe_keeps_its_measured_settings():
    from pathlib import Path

    recipe = load_recipe(Path(__file__).resolve().parents[2] / "runs" / "passkey_snapkv.yaml")
    assert recipe.task.name == "passkey" and recipe.budgets == [128, 256, 512]
    assert recipe.scorer.name == "snapkv" and recipe.search_space.name == "layer_groups"
    search, heldout = recipe.task.search, recipe.task.heldout
    assert search.n >= 48 and search.curate.full_cache_solves and search.curate.draw >= search.n
    assert heldout.n >= 100 and heldout.curate.reference_unsolved is None
    assert recipe.fitness.mode in (None, "likelihood")


def test_the_second_recipe_searches_niah_single_with_uuid_needles_below_the_prompt_length():
    from pathlib import Path

    recipe = load_recipe(Path(__file__).resolve().parents[2] / "runs" / "niah_single.yaml")
    assert recipe.task.name == "niah_single" and recipe.task.params == {"needle_type": "uuid"}
    assert max(recipe.budgets) < recipe.task.context_tokens
    assert recipe.task.search.n >= 48 and recipe.task.search.curate.full_cache_solves and recipe.task.heldout.n >= 100


def test_a_listed_task_asking_after_compression_refuses_a_query_aware_scorer(tmp_path):
    import pytest

    from evolalloc.core.errors import UserError

    text = MULTI.replace("context_tokens: 800,", "context_tokens: 800, question_after_compression: true,")
    with pytest.raises(UserError, match=r"scorer\.name: scorer 'snapkv' .* tasks\[1\]\.question_after_compression"):
        load_recipe(write(tmp_path, text))
    assert load_recipe(write(tmp_path, text, "q.yaml"), ["scorer.name=knorm"]).scorer.name == "knorm"
