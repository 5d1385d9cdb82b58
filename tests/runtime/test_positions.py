"""The two budget/position rules every path shares: what fits the model's positions, and the
least budget a scorer can honour."""

from __future__ import annotations

import pytest

from evolalloc.runtime.positions import positions_beyond
from evolalloc.runtime.scorers import get_scorer


@pytest.mark.parametrize("prompt, question, answer, needed", [
    (2000, 0, 48, None),       # exactly at the limit fits
    (2000, 0, 49, 2049),       # one over does not
    (1990, 20, 40, 2050),      # the question fed after eviction counts too
])
def test_a_generation_fits_when_prompt_question_and_answer_stay_within_the_positions(prompt, question, answer, needed):
    assert positions_beyond(2048, prompt, question, answer) == needed


def test_a_model_without_a_position_limit_fits_anything():
    assert positions_beyond(0, 10**9, answer=10**6) is None


@pytest.mark.parametrize("name, params, least", [
    ("snapkv", {"window": 8}, 8),      # the observation window is always kept
    ("streaming", {}, 4),              # its sinks (the recent window is the budget's rest)
    ("knorm", {}, 1),                  # keeps nothing by rule: one token still
])
def test_a_scorers_min_budget_is_its_always_kept_tokens_and_one_at_least(name, params, least):
    scorer = get_scorer(name, **params)
    assert scorer.min_budget == least == max(1, scorer.always_kept)
