"""Every recipe checked in loads — the examples under runs/ and each study's own under
results/<study>/recipes/: names, parameters and values valid, and its task (with its parameters)
builds, so a recipe the README or a results page points at never fails on a typo."""

from __future__ import annotations

from pathlib import Path

import pytest

import fitness
from evolalloc.config.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"
STUDY_RECIPES = sorted((ROOT / "results").glob("*/recipes/*.yaml"))
RECIPES = sorted(RUNS.glob("*.yaml")) + STUDY_RECIPES


def study_recipe(stem: str) -> Path:
    """The one study recipe named ``stem`` (``results/<study>/recipes/<stem>.yaml``)."""
    (path,) = [p for p in STUDY_RECIPES if p.stem == stem]
    return path


def test_there_are_checked_in_recipes_including_the_prose_ones():
    names = {path.stem for path in RECIPES}
    assert {"quickstart", "niah_single"} <= names
    assert any(name.startswith("prose_") for name in names)


def test_no_two_recipes_share_a_name_so_no_two_runs_share_a_folder():
    names = [path.stem for path in RECIPES]
    assert len(names) == len(set(names))


def elsewhere_checkpoints(path: Path, placeholder: Path) -> list[str]:
    """Overrides pointing each ``checkpoints:`` file the recipe names but this machine lacks (a study's
    trained scorer, in the cache of the machine that trained it) at ``placeholder``: the rest of the
    recipe is still checked; that the file must exist is tests/pipeline/test_checkpointed_rows.py's."""
    from evolalloc.config.recipe import read_recipe_file

    merged, _ = read_recipe_file(path)
    return [f"checkpoints.{key}={placeholder}" for key, value in (merged.get("checkpoints") or {}).items()
            if isinstance(value, str) and not Path(value).expanduser().is_file()]


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_a_checked_in_recipe_loads_and_its_task_builds(path, tmp_path):
    placeholder = tmp_path / "gates.pt"
    placeholder.touch()
    recipe = load_recipe(path, elsewhere_checkpoints(path, placeholder))
    assert recipe.name == path.stem  # its run folder is named after the file, as the README says
    train = recipe.scorer.train
    # the training mixture too
    for entry in [*recipe.task_entries, *((train.tasks or []) if train is not None else [])]:
        task = fitness.get_task(entry.name, **entry.params)
        assert task.name == entry.name


def test_the_kamradt_design_recipe_reuses_the_word_answer_gates_whose_mixture_never_shows_its_needle():
    kamradt, word = load_recipe(study_recipe("design_kamradt_evolved")), load_recipe(study_recipe("design_word_answer"))
    # The same scorer section is the same trained-gates cache entry: no retraining for this table.
    assert kamradt.scorer == word.scorer
    (entry,) = kamradt.task_entries
    needle = fitness.get_task(entry.name, **entry.params).needle
    mixture = [fitness.get_task(t.name, **t.params) for t in kamradt.scorer.train.tasks]
    kamradt_like = [t for t in mixture if t.name == "niah"]
    assert kamradt_like and all(t.needle != needle for t in kamradt_like)


def test_the_evolved_word_recipe_searches_budgets_over_the_answer_trained_gates_it_does_not_retrain():
    """design_word_evolved differs from design_word_answer only in what is searched and how it is
    carried: same task and scorer section (so the cached checkpoint is re-used), static per-layer
    budgets in one group of 30, CMA-ES 6 x 4, expansions chosen on the search split."""
    evolved, answer = load_recipe(study_recipe("design_word_evolved")), load_recipe(study_recipe("design_word_answer"))
    assert evolved.scorer == answer.scorer and evolved.task_entries == answer.task_entries
    assert (evolved.search_space.name, evolved.search_space.group_size) == ("layer_groups", 30)
    assert (evolved.optimizer.name, evolved.optimizer.popsize, evolved.optimizer.generations_per_group) == ("cma", 6, 4)
    assert (evolved.budget.target, evolved.budget.expansions, evolved.budget.expansion_rule) == (40, [48, 64], "search")


def test_the_multikey_word_recipe_reuses_the_query_aware_gates_whose_mixture_lacks_its_task():
    """design_mkword_evolved searches static per-layer budgets over the query-aware gates of
    design_number_hybrid (same scorer section: the cached checkpoint, no retraining) on the multi-key
    common-word needle, a task their training mixture does not contain."""
    mkword, number = (
        load_recipe(study_recipe("design_mkword_evolved")),
        load_recipe(study_recipe("design_number_hybrid")),
    )
    assert mkword.scorer == number.scorer
    (entry,) = mkword.task_entries
    assert (entry.name, entry.params) == ("niah_multikey", {"needle_type": "word", "haystack": "prose"})
    mixture = {(t.name, t.params.get("needle_type")) for t in mkword.scorer.train.tasks}
    assert ("niah_multikey", "word") not in mixture and ("niah_multikey", "uuid") in mixture
    assert (mkword.search_space.name, mkword.search_space.group_size) == ("layer_groups", 30)
    assert (mkword.optimizer.name, mkword.optimizer.popsize, mkword.optimizer.generations_per_group) == ("cma", 6, 4)
    assert (mkword.budget.target, mkword.budget.expansions, mkword.budget.expansion_rule) == (64, [96, 128], "search")


def test_the_passkey_design_recipe_reuses_the_number_needles_gates_and_searches_them_6x4_in_one_group():
    passkey, number = (
        load_recipe(study_recipe("design_passkey_evolved")),
        load_recipe(study_recipe("design_number_hybrid")),
    )
    # The same scorer section is the same trained-gates cache entry: no retraining for this table.
    assert passkey.scorer == number.scorer and passkey.scorer.name == "gates"
    ((task,),) = [[entry.name for entry in passkey.task_entries]]
    assert task == "passkey"  # the synthetic filler task; the gates' mixture is real text only
    assert "passkey" not in {t.name for t in passkey.scorer.train.tasks}
    assert passkey.task.heldout.n == 100 and passkey.task.search.n == 16
    assert (passkey.search_space.name, passkey.search_space.group_size) == ("layer_groups", 30)
    assert (passkey.optimizer.name, passkey.optimizer.popsize, passkey.optimizer.generations_per_group) == ("cma", 6, 4)
    assert passkey.budget.expansion_rule == "search" and len(passkey.budget.expansions) == 2
    assert all(c > passkey.budget.target for c in passkey.budget.expansions)


def test_the_long_context_study_recipes_differ_from_ruler4k_only_in_task_heldout_and_rows():
    """The three tasks of results/long-context-4k are runs/ruler4k.yaml's study (4096 tokens, 16 curated
    search prompts, its search) with 100 held-out prompts of a fresh seed and every unsearched row, and
    differ from each other only in the task: one search protocol, one test."""
    # runs/ruler4k.yaml as the study ran it: 2 generations per group from uniform (issue 50 changed the example)
    ruler = load_recipe(RUNS / "ruler4k.yaml", ["optimizer.generations_per_group=2", "optimizer.start=uniform"])
    number, word, multikey = (load_recipe(study_recipe(f"long_context_4k_{t}")) for t in ("number", "word", "multikey"))
    assert [(r.task.name, r.task.params["needle_type"]) for r in (number, word, multikey)] == [
        ("niah_single", "number"), ("niah_single", "word"), ("niah_multikey", "number")]
    for recipe in (number, word, multikey):
        assert recipe.task.params["haystack"] == "prose" and recipe.task.context_tokens == 4096
        assert (recipe.search_space, recipe.optimizer, recipe.fitness, recipe.model) == (
            ruler.search_space, ruler.optimizer, ruler.fitness, ruler.model)
        assert recipe.task.search.n == 16 and recipe.task.search.curate.full_cache_solves
        assert recipe.task.heldout.n >= 100 and recipe.task.heldout.seed != ruler.task.heldout.seed
        assert not recipe.task.heldout.curate.active  # never filtered by any method's score
        assert recipe.budget.expansion_rule == "search" and len(recipe.budget.expansions) == 2
        assert {"uniform", "pyramid", "streaming", "uniform+adakv", "cake", "lukv",
                "evolved+adakv"} <= set(recipe.baselines)
    assert number.task.heldout == word.task.heldout == multikey.task.heldout
    assert number.budget == word.budget == multikey.budget  # until the budget commit gives each task its own c


def test_the_long_context_gates_are_query_aware_and_trained_on_the_three_tasks_search_splits_at_4096():
    gates = load_recipe(study_recipe("long_context_4k_gates"))
    train = gates.scorer.train
    assert gates.scorer.name == "gates" and train.votes == 32 and train.splits_per_trace == 1
    study = {(t.name, t.params["needle_type"]) for t in
             (load_recipe(study_recipe(f"long_context_4k_{n}")).task for n in ("number", "word", "multikey"))}
    assert {(t.name, t.params["needle_type"]) for t in train.tasks} == study
    assert all(t.params["haystack"] == "prose" and t.context_tokens in (None, 4096) for t in train.tasks)
    assert gates.task.context_tokens == 4096


def test_the_8k_recipe_is_the_number_task_at_the_models_length_with_64_held_out_prompts():
    from evolalloc.pipeline.start import check_context_fits

    long, number = (
        load_recipe(study_recipe("long_context_8k_number")),
        load_recipe(study_recipe("long_context_4k_number")),
    )
    assert long.task.heldout.n >= 64 and long.task.context_tokens > 8000
    assert (long.task.name, long.task.params) == (number.task.name, number.task.params)
    assert long.baselines == [*number.baselines, "full"]  # the full cache on the run's own held-out prefill
    assert (long.engine.threads, long.engine.batch_size) == (2, 4)
    check_context_fits(long)  # prompt and answer within the model's 8192 positions (config only, no weights)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_a_recipe_that_fixes_the_generations_says_why_on_that_line(path):
    """Issue 50: a fixed M below what the converging search runs is a starved search; a checked-in recipe
    may fix one only with a comment saying why (a study replayed as it ran, a smoke run)."""
    import re

    for number, line in enumerate(path.read_text().splitlines(), 1):
        fixed = re.match(r"\s+generations_per_group:\s*(\d+)\s*(#.*)?$", line)
        if fixed:
            assert fixed.group(2) and len(fixed.group(2)) > 10, f"{path.name}:{number}: {line.strip()}"


def test_the_examples_search_until_converged_from_the_best_start():
    for name in ("quickstart", "ruler4k", "your_data", "passkey_snapkv"):
        recipe = load_recipe(RUNS / f"{name}.yaml")
        assert recipe.optimizer.generations_per_group is None, name
        assert recipe.resolved.start == ("uniform", "pyramid", "lukv"), name
