import numpy as np
import pytest

import searchspaces
from searchspaces import SEARCH_SPACES, SearchSpace, get_search_space, list_search_spaces, register_search_space
from searchspaces.registry import ADAPTER_ALIASES, canonical_adapter


def test_the_spaces_are_registered():
    assert list_search_spaces() == ["depth_knots", "floors_under_global_topk", "head_groups", "layer_groups",
                                    "score_prior", "score_prior_heads"]


@pytest.mark.parametrize("old, new", [("gate_floors", "floors_under_global_topk"), ("gate_prior", "score_prior"),
                                      ("gate_prior_heads", "score_prior_heads")])
def test_an_old_space_name_builds_the_renamed_space(old, new):
    assert SEARCH_SPACES.get(old) is SEARCH_SPACES.get(new) and SEARCH_SPACES.canonical(old) == new
    settings = dict(num_layers=4, num_kv_heads=2, target=16, group_size=2)
    as_old, as_new = get_search_space(old, **settings), get_search_space(new, **settings)
    ratios = as_new.initial_ratios() * np.linspace(0.5, 1.5, as_new.initial_ratios().size)
    assert (as_old.decode(ratios) == as_new.decode(ratios)).all()
    # An old recipe's profiles name their adapter as they always did; a new one's by its current name.
    assert as_old.adapter in ADAPTER_ALIASES and canonical_adapter(as_old.adapter) == as_new.adapter


def test_an_unknown_space_is_listed_by_current_names_only():
    with pytest.raises(ValueError) as err:
        get_search_space("gate_prio", num_layers=4, num_kv_heads=2, target=16)
    assert "did you mean 'score_prior'" in str(err.value) and "gate_" not in str(err.value).split("valid names:")[1]


def test_an_unknown_name_lists_the_valid_ones_and_suggests_the_closest():
    with pytest.raises(ValueError) as err:
        get_search_space("layer_group", num_layers=4, num_kv_heads=2, target=16)
    message = str(err.value)
    assert "'layer_group'" in message
    assert "head_groups, layer_groups" in message
    assert "did you mean 'layer_groups'" in message


def test_registering_a_name_twice_raises():
    with pytest.raises(ValueError, match="already registered"):

        @register_search_space("layer_groups")
        class Again(SearchSpace):  # noqa: F841
            granularity = "layer"


def test_get_search_space_passes_every_option_through():
    space = get_search_space(
        "head_groups", num_layers=5, num_kv_heads=3, target=64, group_size=4,
        ratio_bounds=(0.5, 2.0), min_budget=8, max_budget=100,
    )
    assert space.name == "head_groups"
    assert (space.num_layers, space.num_kv_heads, space.target, space.group_size) == (5, 3, 64.0, 4)
    assert space.ratio_bounds == (0.5, 2.0)
    assert (space.min_budget, space.max_budget) == (8, 100)


def test_the_package_imports_only_the_registry_from_evolalloc():
    import subprocess
    import sys

    code = ("import sys, searchspaces; print(any(m.split('.')[0] == 'evolalloc'"
            " and m not in ('evolalloc', 'evolalloc.registry') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert set(searchspaces.__all__) >= {"SearchSpace", "get_search_space", "list_search_spaces",
                                         "register_search_space"}


def test_each_space_declares_its_granularity():
    assert searchspaces.search_space_granularity("layer_groups") == "layer"
    assert searchspaces.search_space_granularity("head_groups") == "head"


def test_a_space_without_a_granularity_is_refused():
    with pytest.raises(TypeError, match="granularity"):

        @register_search_space("no_granularity")
        class Vague(SearchSpace):  # noqa: F841
            pass


def test_a_space_takes_only_the_settings_it_declares():
    from searchspaces import get_search_space

    floors = get_search_space("gate_floors", num_layers=4, num_kv_heads=2, target=32, floor_fraction=0.25)
    assert floors.adapter_params == {"floor_fraction": 0.25} and floors.exact_total
    assert get_search_space("gate_floors", num_layers=4, num_kv_heads=2,
                            target=32).adapter_params == {"floor_fraction": 0.5}
    with pytest.raises(ValueError, match="floor_fraction"):
        get_search_space("layer_groups", num_layers=4, num_kv_heads=2, target=32, floor_fraction=0.25)
    with pytest.raises(ValueError, match="floor_fraction"):
        get_search_space("gate_floors", num_layers=4, num_kv_heads=2, target=32, floor_fraction=2.0)
