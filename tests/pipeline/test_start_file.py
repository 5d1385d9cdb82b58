"""A search may start from an allocation file (``optimizer.start: uniform,path/allocation.json``): a
profile from an earlier run, its budgets carried to ``c``, evaluated and stored as the start's trial.
A missing file or another model's profile is refused before the run's folder exists."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
import yaml

from evolalloc.config.search_start import resolve_start
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import save_allocation
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry


def test_a_start_list_may_hold_best_and_files():
    assert resolve_start("best,runs/a/allocation-c24.json", "layer_groups", ["passkey"]) == (
        "uniform", "pyramid", "lukv", "runs/a/allocation-c24.json")
    assert resolve_start("runs/a/allocation-c24.json", "head_groups") == ("runs/a/allocation-c24.json",)
    with pytest.raises(UserError, match="optimizer.start"):
        resolve_start("best,noname", "layer_groups")


def write_recipe(tmp_path, model_dir, start: str):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({
        "name": "from-file", "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 160, "search": {"n": 2}, "heldout": {"n": 2}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24},
        "search_space": {"name": "head_groups", "group_size": 8},
        "optimizer": {"name": "cma", "generations_per_group": 1, "popsize": 3, "start": start},
        "engine": {"kind": "local", "threads": 1}, "baselines": ["uniform"], "seed": 0,
    }))
    return path


def head_profile(geometry, budgets, target) -> Allocation:
    return Allocation(model="elsewhere", geometry=geometry, target=target, granularity="head",
                      budgets=np.asarray(budgets), provenance={"method": "evolved"})


def test_a_search_starts_from_an_allocation_file_carried_to_c(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.start import start_run
    from evolalloc.runtime.model import model_geometry
    from evolalloc.search.checkpoint import load_checkpoint

    geometry = model_geometry(str(tiny_model_dir), "float32")  # 4 layers x 2 KV heads
    # a per-head profile at c = 48 (another run's budget): the start carries it to c = 24, halving each budget
    source = head_profile(geometry, [[16, 80], [40, 56], [72, 24], [48, 48]], 48.0)
    start = save_allocation(source, tmp_path / "earlier" / "allocation-c48.json")
    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, f"uniform,{start}"))
    run_dir = tmp_path / "runs" / recipe.name
    start_run(recipe, tmp_path / "runs", progress=False)

    scores = load_checkpoint(run_dir).start_scores
    assert set(scores) == {"uniform", str(start)} and all(v is not None for v in scores.values())
    study = optuna.load_study(study_name=recipe.name, storage=f"sqlite:///{run_dir / 'study.db'}")
    stored = {t.user_attrs.get("label"): t.user_attrs["budgets"] for t in study.trials if t.user_attrs.get("label")}
    assert np.array_equal(stored[str(start)], source.budgets // 2)  # exact: 24 x 8 units is half of 48 x 8
    assert np.array_equal(stored["uniform"], np.full((4, 2), 24))


@pytest.mark.parametrize("problem", ["missing", "another model"])
def test_a_bad_start_file_is_refused_before_the_run_folder_exists(tmp_path, tiny_model_dir, problem):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.start import start_run

    path = tmp_path / "start.json"
    if problem == "another model":  # 3 layers: not this model's shape
        other = ModelGeometry(num_layers=3, num_query_heads=4, num_kv_heads=2, head_dim=16, max_positions=2048)
        save_allocation(head_profile(other, np.full((3, 2), 24), 24.0), path)
    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, f"best,{path}"))
    with pytest.raises(UserError) as raised:
        start_run(recipe, tmp_path / "runs", progress=False)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "runs" / recipe.name).exists()
