"""The hybrid's space: every candidate holds the exact total, the start is a zero prior, and the
prior a candidate encodes follows its ratios."""

from __future__ import annotations

import numpy as np
import pytest

from searchspaces import get_search_space, search_space_granularity
from searchspaces.score_prior import prior_of, recorded_prior


def space(**changes):
    settings = dict(num_layers=6, num_kv_heads=3, target=64, group_size=4, min_budget=20)
    settings.update(changes)
    return get_search_space("score_prior", **settings)


def test_it_declares_its_adapter_and_scorer_and_is_layer_granular():
    assert search_space_granularity("score_prior") == "layer"
    built = space()
    assert built.adapter == "score_prior" and built.scorers == ("retention-gates",)
    assert get_search_space("layer_groups", num_layers=2, num_kv_heads=1, target=8).adapter is None


def test_the_uniform_start_decodes_to_a_zero_prior():
    budgets = space().decode(space().initial_ratios())
    assert (budgets == 64).all()
    assert (prior_of(budgets) == 0.0).all()


@pytest.mark.parametrize("seed", range(5))
def test_every_candidate_keeps_exactly_c_times_layers_per_head_whatever_the_rule(seed):
    ratios = np.random.default_rng(seed).uniform(0.0, 6.0, size=6)
    for exact in (False, True):  # the recipe's budget_rule cannot turn the exact total off
        budgets = space(exact_total=exact).decode(ratios)
        assert budgets.sum() == 64 * 6 * 3 and (budgets >= 20).all()
        assert (budgets == budgets[:, :1]).all()


def test_the_per_head_hybrid_searches_one_offset_per_kv_head_at_the_exact_total():
    heads = get_search_space("gate_prior_heads", num_layers=6, num_kv_heads=3, target=64, group_size=4, min_budget=20)
    assert search_space_granularity("gate_prior_heads") == "head" and heads.adapter == "gate_prior"
    assert heads.n_units == 18
    ratios = np.ones(18)
    ratios[4] = 3.0  # layer 1, head 1
    budgets = heads.decode(ratios)
    assert budgets.sum() == 64 * 18 and budgets[1, 1] == budgets.max() and budgets[1, 0] < budgets[1, 1]


def test_the_prior_follows_the_ratios_up_to_a_shift():
    ratios = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 1.5])
    prior = prior_of(space().decode(ratios))[:, 0]
    assert np.argsort(prior).tolist() == np.argsort(ratios, kind="stable").tolist()
    # log ratios between layers survive the completion's rescaling (to integer rounding)
    assert prior[1] - prior[0] == pytest.approx(np.log(2.0), abs=0.02)
    assert prior[2] - prior[0] == pytest.approx(np.log(0.5), abs=0.02)


def test_the_recorded_prior_is_rounded_and_refuses_budgets_below_one():
    assert recorded_prior(np.array([[10, 10], [30, 30]])) == [[-0.6931, -0.6931], [0.4055, 0.4055]]
    with pytest.raises(ValueError, match=">= 1"):
        prior_of(np.array([[0, 2]]))
