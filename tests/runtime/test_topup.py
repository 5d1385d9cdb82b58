"""Expansion rule ``topup`` at run time: the expanded profile, read by its ``gate_floors`` adapter on
a real prefill, keeps exactly ``c' * L * H`` entries, every head at least its searched budget (up to
one token of rounding), and at ``c' == c`` exactly the searched profile."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.runtime.adaptive import Adapted
from evolalloc.runtime.adaptive.selection import scorer_for_allocation
from evolalloc.runtime.compress import compress
from evolalloc.runtime.model import geometry_of
from tests.runtime.test_floors_under_global_topk import LENGTH, gates, kept_in_cache, record  # noqa: F401 (fixtures)

SEARCHED = [
    [[24, 24], [40, 40], [20, 20]],
    [[21, 35], [33, 20], [27, 32]],
]


def searched(llama, gates, budgets) -> Allocation:  # noqa: F811 (the fixture)
    budgets = np.asarray(budgets, dtype=np.int64)
    return Allocation(model="tiny", geometry=geometry_of(llama.config), scorer="gates", scorer_params=gates.params(),
                      target=float(budgets.mean()), granularity="head", budgets=budgets,
                      provenance={"method": "evolved"})


@pytest.mark.parametrize("budgets", SEARCHED)
@pytest.mark.parametrize("extra", [0, 1, 8, 28])
def test_topup_keeps_exactly_the_new_total_and_every_searched_budget(llama, gates, record, budgets,
                                                                     extra):  # noqa: F811
    profile = searched(llama, gates, budgets)
    target = profile.target + extra
    expanded = profile.expand(target, min_budget=gates.min_budget, rule="topup")
    scorer = scorer_for_allocation(expanded)
    assert isinstance(scorer, Adapted) and scorer.adapter.name == "floors_under_global_topk"
    assert expanded.provenance["adapter"] == "gate_floors"  # a profile spelled the old way (scorer gates) stays so
    assert scorer.adapter.floor_fraction == pytest.approx(profile.target / target)
    counts = scorer.adapt(record, expanded.budgets)
    assert counts.sum() == expanded.total == round(target * 3 * 2)
    assert (counts >= profile.budgets - 1).all() and (counts <= LENGTH).all()
    assert kept_in_cache(compress(record, expanded.budgets, scorer)) == expanded.total
    if extra == 0:  # nothing to top up: the searched profile, head by head
        assert (expanded.budgets == profile.budgets).all() and (counts == profile.budgets).all()


def test_the_extra_tokens_follow_the_input_not_the_profile(llama, gates, record):  # noqa: F811
    """Proportional scales the profile's shape; topup gives the new memory to the global top-k, so
    it keeps a different set of head budgets from the same expanded total."""
    profile = searched(llama, gates, SEARCHED[0])
    proportional = profile.expand(2 * profile.target, rule="proportional")
    topped = profile.expand(2 * profile.target, rule="topup")
    assert (proportional.budgets == topped.budgets).all()  # the same static budgets on disk ...
    counts = scorer_for_allocation(topped).adapt(record, topped.budgets)
    assert not (counts == proportional.budgets).all()  # ... but not the same heads' shares per input
