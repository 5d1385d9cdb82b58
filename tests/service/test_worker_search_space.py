"""``evolalloc worker`` scores a study's budgets as the study means them: a hybrid (gate_prior)
study's budgets are a prior its adapter applies per input, which the worker's evaluator only
does when its recipe's search space has that adapter."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evolalloc.core.errors import UserError
from evolalloc.service.remote_worker import check_search_space


def recipe(name: str):
    return SimpleNamespace(search_space=SimpleNamespace(name=name))


def test_a_hybrid_study_is_refused_by_a_worker_whose_recipe_has_no_adapter():
    study = {"id": 3, "config": {"search_space": "gate_prior"}}
    with pytest.raises(UserError) as err:
        check_search_space(study, recipe("layer_groups"))
    assert err.value.field == "search_space.name" and "gate_prior" in str(err.value)


def test_matching_adapters_are_served():
    check_search_space({"id": 1, "config": {"search_space": "gate_prior_heads"}}, recipe("gate_prior"))
    check_search_space({"id": 2, "config": {"search_space": "head_groups"}}, recipe("layer_groups"))
    check_search_space({"id": 2, "config": {}}, recipe("gate_prior"))


def test_a_floors_study_is_refused_by_a_worker_whose_recipe_keeps_another_floor_fraction():
    study = {"id": 4, "config": {"search_space": "gate_floors", "space_params": {"floor_fraction": 0.25}}}
    mine = SimpleNamespace(search_space=SimpleNamespace(name="gate_floors", floor_fraction=0.5))
    with pytest.raises(UserError) as err:
        check_search_space(study, mine)
    assert err.value.field == "search_space" and "0.25" in str(err.value)
    check_search_space(study, SimpleNamespace(search_space=SimpleNamespace(name="gate_floors", floor_fraction=0.25)))
