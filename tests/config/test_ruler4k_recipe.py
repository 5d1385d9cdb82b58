"""runs/ruler4k.yaml: RULER's niah_single at 4096-token prompts over the bundled prose, a small search
that fits the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolalloc.config.recipe import load_recipe

RECIPE = Path(__file__).resolve().parents[2] / "runs" / "ruler4k.yaml"


def test_the_ruler4k_recipe_searches_niah_single_at_4096_tokens_below_the_prompt_length():
    recipe = load_recipe(RECIPE)
    assert recipe.name == "ruler4k"
    assert recipe.task.name == "niah_single" and recipe.task.context_tokens == 4096
    # RULER-4k's 7-digit value, hidden in the bundled books rather than repeated filler sentences
    assert recipe.task.params == {"needle_type": "number", "haystack": "prose"}
    assert recipe.budgets == [256, 512, 1024] and max(recipe.budgets) < recipe.task.context_tokens
    # the long-context default item 2 of results/long-context-4k kept: expand the profile searched at c
    assert recipe.budget.expansion_rule == "search" and recipe.budget.curve is None
    search = recipe.task.search
    assert search.curate.full_cache_solves and search.curate.draw >= search.n


@pytest.mark.real_model
def test_its_prompts_are_about_4096_tokens_and_fit_the_models_positions():
    from evolalloc.runtime.model import load_tokenizer, model_geometry
    from fitness import get_task

    recipe = load_recipe(RECIPE)
    tokenizer = load_tokenizer(recipe.model.spec)
    task = get_task(recipe.task.name, **recipe.task.params)
    (instance,) = task.instances("search", 1, recipe.seed, recipe.task.context_tokens, tokenizer)
    tokens = len(tokenizer.encode(instance.prompt))
    assert abs(tokens - 4096) <= 0.05 * 4096
    assert tokens + instance.max_new_tokens <= model_geometry(recipe.model.spec).max_positions
