"""A run folder written before issue 50 (no ``optimizer.start``, a fixed ``generations_per_group``, a
checkpoint without the groups' record) still reads as the search it was: EvolKV's uniform start, the
same fixed generations, resumable."""

from __future__ import annotations

import json

import yaml

from evolalloc.config.resolved import ResolvedRun
from evolalloc.config.run_folder import RECIPE_FILE, load_run_recipe
from evolalloc.search.checkpoint import checkpoint_path, load_checkpoint
from evolalloc.search.config import SearchConfig

OLD_OPTIMIZER = {"name": "cma", "sigma0": 0.3, "popsize": None, "generations_per_group": 2, "lam": 0.3, "gamma": 0.2,
                 "cache_scope": "group", "budget_rule": "exact", "seed": None, "options": {}}


def old_recipe(folder):
    folder.mkdir(parents=True, exist_ok=True)
    recipe = {"name": "old", "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 2},
                                      "heldout": {"n": 2}},
              "budget": {"target": 24, "expansions": [48]}, "optimizer": OLD_OPTIMIZER, "seed": 0}
    (folder / RECIPE_FILE).write_text(yaml.safe_dump(recipe))
    return folder


def test_an_old_run_folders_recipe_starts_at_uniform_with_its_fixed_generations(tmp_path):
    recipe = load_run_recipe(old_recipe(tmp_path / "run"))
    assert recipe.optimizer.start == "uniform" and recipe.resolved.start == ()
    assert recipe.optimizer.generations_per_group == 2


def test_a_new_run_folders_recipe_keeps_its_start(tmp_path):
    folder = old_recipe(tmp_path / "run")
    data = yaml.safe_load((folder / RECIPE_FILE).read_text())
    data["optimizer"]["start"] = "best"
    (folder / RECIPE_FILE).write_text(yaml.safe_dump(data))
    assert load_run_recipe(folder).resolved.start == ("uniform", "pyramid", "lukv")


def test_an_old_run_json_resolves_to_the_uniform_start_and_its_fixed_generations(tmp_path):
    data = json.loads(json.dumps(load_run_recipe(old_recipe(tmp_path / "run")).resolved.to_dict()))
    for key in ("start", "max_generations_per_group", "patience", "tolerance", "decode_interval"):
        data.pop(key)  # what a run.json of the previous evolalloc lacks
    old = ResolvedRun.from_dict(data)
    assert old.start == () and old.generations_per_group == 2 and "2 generations per group (fixed" in old.stop_words


def test_an_old_checkpoint_without_the_groups_record_loads_as_it_was(tmp_path):
    config = SearchConfig(num_layers=4, num_kv_heads=2, target=24.0, group_size=2, generations=2)
    old = {"format": "evolalloc.search_checkpoint", "version": 2, "config": {
        k: v for k, v in config.to_dict().items() if k not in ("max_generations", "patience", "tolerance", "start")},
        "group": 1, "generation": 1}
    checkpoint_path(tmp_path).write_text(json.dumps(old))
    loaded = load_checkpoint(tmp_path)
    assert (loaded.group, loaded.generation, loaded.groups, loaded.start_scores, loaded.seconds) == (1, 1, [], {}, 0.0)
    assert loaded.config == config and loaded.config.start == () and loaded.config.generations == 2
