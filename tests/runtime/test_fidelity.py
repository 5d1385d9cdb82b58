"""The fidelity scores (runtime/fidelity.py): what each one gives a cache that is surer of some tokens and
less sure of others than the full cache, and ``top1``, the teacher-forced reading of greedy decoding: up to
the first token it misses, a compressed cache's greedy answer is the full cache's, with the prompt-only
cache and with budgets held while decoding."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.fidelity import FIDELITY_SCORES, fidelity_score, likelihood_kept
from evolalloc.runtime.held_likelihood import held_logprobs_batch
from evolalloc.runtime.likelihood import TeacherForced, reference_forced_batch
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from fitness.task import FIDELITY_MODES
from tests.runtime.conftest import random_prompt

SCORER = get_scorer("snapkv", window=4)
FULL = torch.log(torch.tensor([0.5, 0.5, 0.5, 0.5]))


def forced(probabilities, top1=(True, True, True, True)) -> TeacherForced:
    return TeacherForced(torch.log(torch.tensor(probabilities)), torch.tensor(top1))


def test_every_mode_has_a_score_and_the_full_caches_own_tokens_score_one():
    assert set(FIDELITY_SCORES) == set(FIDELITY_MODES)
    for mode in FIDELITY_MODES:
        assert fidelity_score(mode, forced([0.5] * 4), FULL) == pytest.approx(1.0)


def test_a_surplus_on_some_tokens_pays_for_a_loss_only_in_the_mean_capped_score():
    # Surer of three tokens (0.9 against 0.5), far less sure of one (0.1): the geometric mean is above the full cache's.
    mixed = forced([0.9, 0.9, 0.9, 0.1], top1=(True, True, True, False))
    assert likelihood_kept(mixed.token_logprobs, FULL) > 1
    assert fidelity_score("fidelity", mixed, FULL) == 1.0
    assert fidelity_score("fidelity-tokens", mixed, FULL) == pytest.approx((3 + 0.2) / 4)
    expected_abs = math.exp(-(3 * math.log(0.9 / 0.5) + math.log(5)) / 4)
    assert fidelity_score("fidelity-abs", mixed, FULL) == pytest.approx(expected_abs)
    assert fidelity_score("fidelity-top1", mixed, FULL) == 0.75


def test_a_cache_surer_of_every_token_is_penalised_only_by_the_absolute_gap():
    surer = forced([0.8] * 4)
    assert fidelity_score("fidelity", surer, FULL) == fidelity_score("fidelity-tokens", surer, FULL) == 1.0
    assert fidelity_score("fidelity-abs", surer, FULL) == pytest.approx(0.5 / 0.8)


def test_tokens_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="same non-empty tokens"):
        fidelity_score("fidelity-tokens", forced([0.5] * 3, (True,) * 3), FULL)


def first_miss(hits: torch.Tensor) -> int:
    misses = (~hits).nonzero()
    return int(misses[0]) if len(misses) else len(hits)


def agreed(tokens: list[int], reference: torch.Tensor) -> int:
    """Tokens of ``tokens`` equal to ``reference``'s before the first that differs."""
    n = 0
    while n < min(len(tokens), len(reference)) and tokens[n] == int(reference[n]):
        n += 1
    return n


@pytest.mark.parametrize("decode", [None, DecodeEviction(3)], ids=["prompt-only", "held"])
def test_top1_up_to_its_first_miss_is_greedy_decodings_agreement_with_the_full_cache(llama, decode):
    settings = DecodeSettings(max_new_tokens=20)
    records = [prefill(llama, random_prompt(n, seed=n + 3), [SCORER]) for n in (70, 90, 110)]
    full = [generate(llama, [(r, np.full((3, 2), 400))], SCORER, settings)[0] for r in records]
    checked = 0
    for budgets in (np.full((3, 2), 6), np.array([[20, 5], [9, 14], [12, 7]]), np.full((3, 2), 30)):
        for record, reference in zip(records, full):
            ids = torch.tensor(reference.token_ids)
            row = [(record, budgets, ids)]
            teacher = (reference_forced_batch(llama, row, SCORER) if decode is None
                       else held_logprobs_batch(llama, row, SCORER, decode))[0]
            (mine,) = generate(llama, [(record, budgets)], SCORER, settings, decode=decode)
            assert first_miss(teacher.top1) == agreed(mine.token_ids, ids)
            checked += first_miss(teacher.top1) < len(ids)
    assert checked > 0  # some budget made a cache miss a token: the rule was tested where it can fail


def test_the_full_caches_own_greedy_tokens_are_all_its_top1(llama):
    record = prefill(llama, random_prompt(64, seed=5), [SCORER])
    (reference,) = generate(llama, [(record, np.full((3, 2), 400))], SCORER, DecodeSettings(max_new_tokens=16))
    (teacher,) = reference_forced_batch(llama, [(record, np.full((3, 2), 400), torch.tensor(reference.token_ids))],
                                        SCORER)
    assert bool(teacher.top1.all())
