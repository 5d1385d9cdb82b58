"""The scorer, the method and the search spaces over the global top-k were renamed (issue 37:
``gates`` -> ``retention-gates`` / ``global-topk``; ``gate_prior`` -> ``score_prior``,
``gate_prior_heads`` -> ``score_prior_heads``, ``gate_floors`` -> ``floors_under_global_topk``). A
recipe or allocation file written before still loads as written, and means what the new names mean."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evolalloc.config.recipe import load_recipe
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.composition import allocation_adapter
from evolalloc.core.geometry import ModelGeometry
from searchspaces import get_search_space

ROOT = Path(__file__).resolve().parents[2]
HYBRID = ROOT / "results/design-word-hybrid/recipes/design_word_hybrid.yaml"  # scorer gates, gate_prior, gates
FLOORS = ROOT / "results/design-word-floors/recipes/design_word_floors.yaml"  # search_space gate_floors
CURRENT = ["scorer.name=retention-gates", "search_space.name=score_prior", "baselines=[uniform, global-topk]"]
GEOMETRY = ModelGeometry(num_layers=3, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=128)


def renamed(data: dict) -> dict:
    """``data`` (a recipe as a dict) with the old names replaced by the current ones."""
    data = json.loads(json.dumps(data))
    data["scorer"]["name"] = {"gates": "retention-gates"}.get(data["scorer"]["name"], data["scorer"]["name"])
    data["search_space"]["name"] = {"gate_prior": "score_prior"}.get(data["search_space"]["name"],
                                                                       data["search_space"]["name"])
    data["baselines"] = [{"gates": "global-topk"}.get(name, name) for name in data["baselines"]]
    return data


def test_a_study_recipe_in_the_old_names_loads_as_written_and_is_the_recipe_in_the_current_names():
    old, new = load_recipe(HYBRID), load_recipe(HYBRID, overrides=CURRENT)
    # As written, so the run folder's files (allocation files, comparison.json) are what they were.
    assert (old.scorer.name, old.search_space.name, old.baselines) == ("gates", "gate_prior", ["uniform", "gates"])
    assert renamed(old.to_dict()) == new.to_dict()


def test_an_old_space_name_builds_the_renamed_space_and_names_its_adapter_as_before():
    recipe = load_recipe(FLOORS)
    assert recipe.search_space.name == "gate_floors"
    space = get_search_space(recipe.search_space.name, num_layers=4, num_kv_heads=2, target=16,
                             floor_fraction=recipe.search_space.floor_fraction or 0.5)
    assert type(space).name == "floors_under_global_topk" and space.adapter == "gate_floors"


def test_an_old_hybrid_allocation_file_loads_and_runs_with_the_renamed_adapter(tmp_path):
    budgets = np.array([[10, 10], [20, 20], [30, 30]])
    old = Allocation(model="m", geometry=GEOMETRY, scorer="gates", target=20, budgets=budgets,
                     provenance={"method": "evolved", "adapter": "gate_prior"})
    save_allocation(old, tmp_path / "old.json")
    written = json.loads((tmp_path / "old.json").read_text())
    assert written["scorer"] == "gates" and written["provenance"]["adapter"] == "gate_prior"
    assert "prior" in written["provenance"]  # still known as the hybrid's: its prior is written
    loaded = load_allocation(tmp_path / "old.json")
    assert allocation_adapter(loaded) == ("gate_prior", {})

    from evolalloc.runtime.adaptive import get_adapter

    assert type(get_adapter("gate_prior")).name == "score_prior"


def test_an_old_allocation_file_of_the_gates_method_loads(tmp_path):
    old = Allocation(model="m", geometry=GEOMETRY, scorer="gates", target=20, budgets=np.full((3, 2), 20),
                     provenance={"method": "gates"})
    save_allocation(old, tmp_path / "gates.json")
    assert allocation_adapter(load_allocation(tmp_path / "gates.json")) == ("global", {})


def test_a_top_up_names_its_adapter_in_the_spelling_of_the_profile_it_expands():
    from evolalloc.core.topup import topup_provenance

    def profile(scorer):
        return Allocation(model="m", geometry=GEOMETRY, scorer=scorer, target=20, budgets=np.full((3, 2), 20),
                          provenance={"method": "evolved"})

    assert topup_provenance(profile("gates"), 40)["adapter"] == "gate_floors"
    assert topup_provenance(profile("retention-gates"), 40)["adapter"] == "floors_under_global_topk"


def test_a_recipe_training_retention_gates_shares_the_trained_checkpoint_of_one_that_says_gates():
    from types import SimpleNamespace

    from evolalloc.pipeline.scorer_training import settings_of

    def settings(name):
        recipe = load_recipe(HYBRID, overrides=[f"scorer.name={name}"])
        return settings_of(SimpleNamespace(recipe=recipe, resolved=recipe.resolved))

    old, new = settings("gates"), settings("retention-gates")
    assert old == new and old.scorer == "gates"  # the checkpoint kind: the old runs' key, and so their cache


def test_the_gates_scorer_is_retention_gates_under_its_old_name():
    from evolalloc.runtime.adaptive import Adapted, get_adapter
    from evolalloc.runtime.scorers import SCORERS, get_scorer, list_scorers

    assert SCORERS.get("gates") is SCORERS.get("retention-gates")
    assert "retention-gates" in list_scorers() and "gates" not in list_scorers()
    old, new = get_scorer("gates"), get_scorer("retention-gates")
    assert type(old) is type(new) and old.params() == new.params()
    assert (old.name, new.name) == ("gates", "retention-gates")  # each writes what its recipe said
    for scorer in (old, new):  # the adapters that need the gates' calibrated scores take either spelling
        Adapted(scorer, get_adapter("score_prior"))
