"""What is kept: exactly the budgets, the top of the ranking, nested across budgets; per-head
budgets really change what each head sees."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.runtime.compress import compress, validate_budgets
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer, list_scorers
from tests.runtime.conftest import random_prompt


def kept_positions(cache, record, layer: int, head: int) -> set[int]:
    """Positions of the record whose keys sit in a valid slot of the cache."""
    used = cache.used[layer]
    keys = cache.keys[layer][0, head, :used]
    valid = cache.valid[layer][0, head, :used] if cache.valid[layer] is not None else torch.ones(used, dtype=torch.bool)
    full = record.keys[layer][head]
    found = set()
    for slot in valid.nonzero()[:, 0].tolist():
        match = (full == keys[slot]).all(dim=-1).nonzero()[:, 0].tolist()
        assert len(match) == 1
        found.add(match[0])
    return found


@pytest.fixture(scope="module")
def record(llama, scorers):
    return prefill(llama, random_prompt(80, seed=3), scorers)


@pytest.fixture(params=list_scorers())
def scorer(request, scorers):
    return next(s for s in scorers if s.name == request.param)


def test_kept_positions_are_exactly_the_top_of_the_ranking_and_nested(record, scorer):
    budgets = np.array([[36, 50], [40, 40], [70, 33]])
    previous = None
    for extra in (0, 1, 2):
        cache = compress(record, budgets + extra, scorer)
        kept = {}
        for layer in range(3):
            for head in range(2):
                got = kept_positions(cache, record, layer, head)
                b = int(budgets[layer, head]) + extra
                assert len(got) == b
                assert got == set(record.rankings[scorer.key][layer, head, :b].tolist())
                if previous is not None:
                    assert previous[layer, head] <= got
                kept[layer, head] = got
        previous = kept


def test_always_kept_tokens_lead_every_ranking(record, scorer):
    ranking = record.rankings[scorer.key]
    length = record.length
    forced = set(range(scorer.sinks)) | set(range(length - scorer.window, length))
    for layer in range(3):
        for head in range(2):
            assert set(ranking[layer, head, : len(forced)].tolist()) == forced


def test_per_layer_budgets_shrink_the_tensors_for_real(record):
    cache = compress(record, np.array([33, 45, 60]), get_scorer("snapkv"))
    assert [k.shape[2] for k in cache.keys] == [33, 45, 60]
    assert all(v is None for v in cache.valid)


def test_uniform_per_head_budgets_match_the_per_layer_path(llama, record):
    scorer = get_scorer("snapkv")
    settings = DecodeSettings(max_new_tokens=8, keep_logits=True)
    (per_layer,) = generate(llama, [(record, np.array([40, 48, 36]))], scorer, settings)
    (per_head,) = generate(llama, [(record, np.array([[40, 40], [48, 48], [36, 36]]))], scorer, settings)
    assert per_layer.token_ids == per_head.token_ids
    for a, b in zip(per_layer.logits, per_head.logits):
        torch.testing.assert_close(a, b)


def test_a_head_cannot_see_a_token_it_evicted_that_another_head_keeps(llama, record):
    """Head 0 of layer 1 keeps only the window; head 1 keeps everything. Corrupting the values of
    tokens head 0 evicted changes nothing through head 0, but does change the output through head 1."""
    scorer = get_scorer("snapkv")
    budgets = np.array([[80, 80], [32, 80], [80, 80]])
    settings = DecodeSettings(max_new_tokens=4, keep_logits=True)
    (base,) = generate(llama, [(record, budgets)], scorer, settings)
    evicted = record.rankings[scorer.key][1, 0, 32:]

    def corrupted(head: int):
        values = [v.clone() for v in record.values]
        values[1][head, evicted] = 50.0
        return type(record)(record.uid, record.length, record.keys, values, record.first_logits, record.rankings)

    (through_head0,) = generate(llama, [(corrupted(0), budgets)], scorer, settings)
    (through_head1,) = generate(llama, [(corrupted(1), budgets)], scorer, settings)
    for a, b in zip(base.logits, through_head0.logits):
        torch.testing.assert_close(a, b)
    assert not torch.allclose(base.logits[1], through_head1.logits[1])


@pytest.mark.parametrize(
    "budgets, message",
    [
        (np.full((3, 3), 40), r"shape \[3\] or \[3, 2\]"),
        (np.full(4, 40), r"shape \[3\] or \[3, 2\]"),
        (np.array([40, -1, 40]), ">= 0"),
        (np.array([40.5, 40, 40]), "whole numbers"),
        (np.array([40, 10, 40]), "always keeps 32"),
        ([[40, 40], [40], [40, 40]], "shape"),
    ],
)
def test_bad_budgets_raise_a_value_error_saying_what_was_expected(budgets, message):
    with pytest.raises(ValueError, match=message):
        validate_budgets(budgets, 3, 2, get_scorer("snapkv"))


def test_an_unknown_scorer_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid names: .*snapkv"):
        get_scorer("snap")
