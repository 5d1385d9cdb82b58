"""Expansion rule ``topup-half`` on a real prefill: the expanded profile, read by
``floors_under_global_topk`` at ``floor_fraction = c / (2 c')``, keeps exactly ``c' * L * H``
entries, every head at least half its searched budget, never fewer in a head as ``c'`` grows (one
input), the same counts every time, and at ``c' == c`` the searched profile itself. Rule ``search``
does not try it (earlier picks stand)."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.pipeline.expansion import candidate_rules
from evolalloc.runtime.adaptive import Adapted
from evolalloc.runtime.adaptive.selection import scorer_for_allocation
from evolalloc.runtime.compress import compress
from tests.runtime.test_floors_under_global_topk import LENGTH, gates, kept_in_cache, record  # noqa: F401 (fixtures)
from tests.runtime.test_topup import SEARCHED, searched

EXTRAS = [1, 4, 8, 16, 28]


@pytest.mark.parametrize("budgets", SEARCHED)
@pytest.mark.parametrize("extra", EXTRAS)
def test_topup_half_keeps_exactly_the_new_total_and_half_of_every_searched_budget(llama, gates, record, budgets,
                                                                                  extra):  # noqa: F811
    profile = searched(llama, gates, budgets)
    target = profile.target + extra
    expanded = profile.expand(target, min_budget=gates.min_budget, rule="topup-half")
    scorer = scorer_for_allocation(expanded)
    assert isinstance(scorer, Adapted) and scorer.adapter.name == "floors_under_global_topk"
    assert scorer.adapter.floor_fraction == pytest.approx(profile.target / (2 * target))
    counts = scorer.adapt(record, expanded.budgets)
    assert counts.sum() == expanded.total == round(target * 3 * 2)
    assert (counts >= np.maximum(profile.budgets // 2 - 1, gates.min_budget)).all() and (counts <= LENGTH).all()
    assert kept_in_cache(compress(record, expanded.budgets, scorer)) == expanded.total
    assert (scorer.adapt(record, expanded.budgets) == counts).all()  # deterministic: a pure function of the record


@pytest.mark.parametrize("budgets", SEARCHED)
def test_a_head_never_keeps_fewer_tokens_when_the_budget_grows(llama, gates, record, budgets):  # noqa: F811
    profile = searched(llama, gates, budgets)
    previous = None
    for extra in EXTRAS:
        expanded = profile.expand(profile.target + extra, min_budget=gates.min_budget, rule="topup-half")
        counts = scorer_for_allocation(expanded).adapt(record, expanded.budgets)
        if previous is not None:
            assert (counts >= previous).all(), extra
        previous = counts


def test_at_the_searched_budget_it_is_the_profile_itself(llama, gates, record, tmp_path):  # noqa: F811
    profile = searched(llama, gates, SEARCHED[1])
    same = profile.expand(profile.target, min_budget=gates.min_budget, rule="topup-half")
    assert (same.budgets == profile.budgets).all() and "adapter" not in same.provenance
    # The expansion's adapter travels in the file: loading it gives the same per-input counts.
    expanded = profile.expand(profile.target + 8, min_budget=gates.min_budget, rule="topup-half")
    loaded = load_allocation(save_allocation(expanded, tmp_path / "a.json"))
    assert loaded.provenance["expansion_rule"] == "topup-half"
    assert (scorer_for_allocation(loaded).adapt(record, loaded.budgets)
            == scorer_for_allocation(expanded).adapt(record, expanded.budgets)).all()


def test_rule_search_does_not_try_it(llama, gates):  # noqa: F811
    assert candidate_rules(searched(llama, gates, SEARCHED[0])) == ("proportional", "additive", "topup")
