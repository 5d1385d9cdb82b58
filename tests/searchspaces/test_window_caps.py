"""Sliding-window layers in the search: a layer whose window already decides its budget (cap at or
below c) is pinned at its cap and costs no search dimension; the total stays c per unit."""

from __future__ import annotations

import numpy as np
import pytest

from searchspaces.completion import complete_budgets
from searchspaces.registry import get_search_space

CAPS = [23, None, 23, None, 100, None]  # W - 1 of three sliding layers (windows 24, 24, 101)


def space(name="layer_groups", **changes):
    settings = dict(num_layers=6, num_kv_heads=2, target=40, group_size=2, exact_total=True, layer_caps=CAPS)
    return get_search_space(name, **{**settings, **changes})


def test_a_layer_whose_window_decides_is_in_no_group_and_held_at_its_cap():
    s = space()
    assert [g.tolist() for g in s.groups()] == [[1, 3], [4, 5]]
    rng = np.random.default_rng(0)
    for _ in range(20):
        budgets = s.decode(rng.uniform(0.2, 3.0, size=s.n_units))
        assert budgets[[0, 2]].tolist() == [[23, 23], [23, 23]]
        assert budgets.sum() == 40 * 12  # the total of c per unit: what the windows cannot hold goes elsewhere
        assert budgets[4].max() <= 100  # a window above c is searched, up to its cap


def test_head_units_take_the_caps_of_their_layer():
    s = space("head_groups")
    assert 0 not in np.concatenate(s.groups()) and 1 not in np.concatenate(s.groups())
    assert s.decode(np.ones(s.n_units))[[0, 2]].max() == 23


def test_a_space_whose_units_are_not_layers_refuses_a_sliding_model():
    with pytest.raises(ValueError, match="cannot take a model with sliding-window layers"):
        space("depth_knots")


def test_capped_completion_keeps_the_total_and_no_unit_above_its_cap():
    caps = np.array([5, 10**9, 5, 10**9])
    out = complete_budgets(np.array([10, 20, 10, 10]), 100, 1, caps=caps)
    assert out.sum() == 100 and np.all(out <= caps) and out.tolist() == [5, 60, 5, 30]
    assert complete_budgets(np.array([10, 20, 10, 10]), 100, 1).tolist() == [20, 40, 20, 20]


def test_without_caps_nothing_changes():
    plain = get_search_space("layer_groups", num_layers=6, num_kv_heads=2, target=40, group_size=2, exact_total=True)
    capped_none = space(layer_caps=[None] * 6)
    ratios = np.array([1, 3, 1, 0.5, 3, 1.0])
    assert np.array_equal(plain.decode(ratios), capped_none.decode(ratios))
    assert [g.tolist() for g in plain.groups()] == [[0, 1], [2, 3], [4, 5]]
