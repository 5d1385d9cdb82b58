"""A method is a composition (allocation rule x scorer x adapter); the old names are its aliases."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import make_baseline
from evolalloc.core.composition import (
    ALIASES,
    SCORER_ALWAYS_KEPT,
    Composition,
    CompositionProblem,
    allocation_adapter,
    from_mapping,
    is_method,
    label_of,
    parse_label,
)
from evolalloc.core.geometry import ModelGeometry

GEOMETRY = ModelGeometry(num_layers=6, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


def test_every_alias_is_the_label_of_its_composition_and_parses_back():
    for alias, composition in ALIASES.items():
        assert label_of(composition) == alias and parse_label(alias) == composition


def test_a_mapping_equal_to_an_alias_is_that_alias():
    assert label_of(from_mapping({"allocation": "uniform", "adapter": "adakv"})) == "uniform+adakv"
    assert label_of(from_mapping({"allocation": "pyramid", "scorer": "snapkv"})) == "pyramid-snapkv"
    assert label_of(from_mapping({"allocation": "uniform", "adapter": "cake"})) == "cake"
    assert label_of(from_mapping({"allocation": "lukv"})) == "lukv"


def test_a_new_combination_gets_a_label_that_rebuilds_it_without_a_class():
    composition = from_mapping({"allocation": "pyramid", "adapter": "cake"})
    assert label_of(composition) == "pyramid+cake" and parse_label("pyramid+cake") == composition
    method = make_baseline("pyramid+cake")
    assert method.adapter == ("cake", {}) and method.scorer is None
    assert np.array_equal(method.allocation(GEOMETRY, 40).budgets, make_baseline("pyramid").allocation(GEOMETRY,
                                                                                                        40).budgets)


@pytest.mark.parametrize("entry, field", [
    ({"allocation": "pyramyd"}, "allocation"),
    ({"allocation": "uniform", "scorer": "nope"}, "scorer"),
    ({"allocation": "uniform", "adaptor": "adakv"}, "adaptor"),
    ({"scorer": "snapkv"}, "allocation"),
    ({"allocation": "streaming", "scorer": "snapkv"}, "scorer"),  # streaming ranks with its own
    ({"allocation": "gates", "adapter": "adakv"}, "adapter"),  # the gates' global top-k is theirs
    ({"allocation": "evolved", "scorer": "snapkv"}, "scorer"),
    ({"allocation": "lukv", "scorer": "snapkv"}, "scorer"),  # its curves are the run scorer's
    ({"allocation": 3}, "allocation"),
])
def test_a_bad_mapping_names_its_field(entry, field):
    with pytest.raises(CompositionProblem) as err:
        from_mapping(entry)
    assert err.value.field == field


def test_an_unknown_label_is_refused_with_did_you_mean():
    with pytest.raises(ValueError, match="did you mean 'uniform'"):
        make_baseline("unifrom")


def test_the_allocation_records_its_composition():
    assert make_baseline("uniform+adakv").allocation(GEOMETRY, 40).provenance["composition"] == {
        "allocation": "uniform", "scorer": None, "adapter": "adakv"}
    assert make_baseline("streaming").allocation(GEOMETRY, 40).provenance["composition"] == {
        "allocation": "streaming", "scorer": "streaming", "adapter": None}
    evolved = make_baseline("uniform").allocation(GEOMETRY, 40, provenance={"method": "evolved"})
    evolved.provenance["method"] = "evolved"
    adapted = make_baseline("evolved+adakv").allocation(GEOMETRY, 40, base=evolved)
    assert adapted.provenance["method"] == "evolved+adakv" and adapted.provenance["composition"]["adapter"] == "adakv"
    assert np.array_equal(adapted.budgets, evolved.budgets)


def test_the_adapter_an_allocation_runs_with_comes_from_its_composition():
    assert allocation_adapter(make_baseline("pyramid+cake").allocation(GEOMETRY, 40)) == ("cake", {})
    assert allocation_adapter(make_baseline("gates").allocation(GEOMETRY, 40)) == ("global", {})
    assert allocation_adapter(make_baseline("pyramid").allocation(GEOMETRY, 40)) is None


def test_a_composed_scorer_s_always_kept_tokens_are_the_runtime_scorer_s_at_its_defaults():
    from evolalloc.runtime.scorers import get_scorer

    for name, kept in SCORER_ALWAYS_KEPT.items():
        assert get_scorer(name).always_kept == kept


def test_an_allocation_may_name_a_composition_but_not_an_unknown_method():
    budgets = np.full((6, 2), 40)
    Allocation(model="m", geometry=GEOMETRY, scorer="snapkv", target=40, budgets=budgets,
               provenance={"method": "uniform+cake"})
    with pytest.raises(ValueError, match="provenance"):
        Allocation(model="m", geometry=GEOMETRY, scorer="snapkv", target=40, budgets=budgets,
                   provenance={"method": "uniform+"})
    assert Composition("uniform", adapter="cake") == parse_label("uniform+cake")  # whose one label is "cake"
    assert label_of(parse_label("uniform+cake")) == "cake"


def test_global_topk_is_also_read_by_its_old_name_gates():
    old, new = make_baseline("gates"), make_baseline("global-topk")
    assert type(old.rule) is type(new.rule) and old.scorer[1] == new.scorer[1]
    assert (old.scorer[0], new.scorer[0]) == ("gates", "retention-gates")  # its own scorer, spelled as its name
    assert parse_label("gates") == Composition("gates") and is_method("gates")  # kept as written: its rows' label
    assert np.array_equal(old.allocation(GEOMETRY, 40).budgets, new.allocation(GEOMETRY, 40).budgets)
    assert allocation_adapter(new.allocation(GEOMETRY, 40)) == ("global", {})


@pytest.mark.parametrize("run_scorer", ["gates", "snapkv"])
def test_an_old_recipe_s_gates_row_is_written_as_before_and_a_new_one_by_the_current_names(run_scorer):
    old = make_baseline("gates").allocation(GEOMETRY, 40, scorer=run_scorer)
    assert old.scorer == "gates" and old.provenance["method"] == "gates"
    assert old.provenance["composition"] == {"allocation": "gates", "scorer": "gates", "adapter": "global"}
    new = make_baseline("global-topk").allocation(GEOMETRY, 40, scorer="snapkv")
    assert new.scorer == "retention-gates" and new.provenance["method"] == "global-topk"
    assert new.provenance["composition"] == {"allocation": "global-topk", "scorer": "retention-gates",
                                             "adapter": "global"}


@pytest.mark.parametrize("method, run_scorer", [("gates", "retention-gates"), ("global-topk", "gates")])
def test_the_method_ranks_under_the_run_s_spelling_of_the_run_s_own_scorer(method, run_scorer):
    # One ranking, one key: a run's retention gates serve its global-topk row whatever each is called.
    assert make_baseline(method).allocation(GEOMETRY, 40, scorer=run_scorer).scorer == run_scorer


def test_an_unknown_method_is_listed_by_current_names_and_an_old_one_is_suggested_by_its_new_name():
    with pytest.raises(ValueError) as err:
        make_baseline("gatez")
    assert "did you mean 'global-topk'" in str(err.value)
    known = str(err.value).split("known:")[1]
    assert "global-topk" in known and "gates" not in known
    with pytest.raises(CompositionProblem, match="own adapter"):  # a rule's "-" is not a scorer's
        parse_label("global-topk+adakv")
