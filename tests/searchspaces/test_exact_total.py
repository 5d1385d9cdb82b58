"""The exact budget rule: a search space that completes every candidate to c * units."""

import numpy as np
import pytest

from searchspaces import get_search_space


@pytest.mark.parametrize("name, units", [("layer_groups", 30), ("head_groups", 90)])
def test_every_decoded_candidate_costs_exactly_the_target_total(name, units):
    space = get_search_space(name, num_layers=30, num_kv_heads=3, target=128, min_budget=32, exact_total=True)
    rng = np.random.default_rng(0)
    for _ in range(50):
        budgets = space.decode(rng.uniform(*space.ratio_bounds, size=units))
        assert budgets.sum() == 128 * 30 * 3
        assert budgets.min() >= 32


def test_the_uniform_start_decodes_to_uniform_and_order_is_kept():
    space = get_search_space("layer_groups", num_layers=8, num_kv_heads=2, target=64, min_budget=4, exact_total=True)
    assert (space.decode(space.initial_ratios()) == 64).all()
    ratios = np.array([3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5])
    per_layer = space.decode(ratios)[:, 0]
    assert per_layer.sum() == 64 * 8
    assert per_layer[0] > per_layer[2] > per_layer[6]  # proportional: ranks survive completion
    assert (space.decode(ratios)[:, 0] == space.decode(ratios)[:, 1]).all()  # layer granularity kept


def test_without_the_rule_a_candidate_may_overspend():
    free = get_search_space("layer_groups", num_layers=8, num_kv_heads=2, target=64, min_budget=4)
    assert free.decode(np.full(8, 2.0)).sum() == 2 * 64 * 8 * 2
