"""Greedy agreement metrics: the prefix before the first divergence and the in-order overlap, on
token ids (as the evaluator hands them) and on text (words, case kept, punctuation left out)."""

import pytest

from fitness import get_metric
from fitness.metrics.agreement import greedy_prefix, token_agreement


def test_a_sequence_agrees_with_itself_completely():
    ids = [5, 17, 3, 99, 2]
    assert greedy_prefix(ids, (ids,)) == token_agreement(ids, (ids,)) == 1.0


def test_the_prefix_counts_the_tokens_before_the_first_divergence_as_a_share_of_the_reference():
    reference = [1, 2, 3, 4, 5, 6, 7, 8]
    assert greedy_prefix([1, 2, 3, 9, 5, 6, 7, 8], (reference,)) == pytest.approx(3 / 8)
    assert greedy_prefix([9, 2, 3, 4, 5, 6, 7, 8], (reference,)) == 0.0
    assert greedy_prefix([1, 2], (reference,)) == pytest.approx(2 / 8)  # stopped early


def test_token_agreement_credits_a_recovered_slip_and_charges_for_extra_or_missing_tokens():
    reference = [1, 2, 3, 4, 5, 6, 7, 8]
    assert token_agreement([1, 2, 3, 9, 5, 6, 7, 8], (reference,)) == pytest.approx(7 / 8)
    assert token_agreement([1, 2, 3, 4, 5, 6, 7, 8, 0, 0], (reference,)) == pytest.approx(8 / 10)  # went on
    assert token_agreement([1, 2, 3, 4], (reference,)) == pytest.approx(4 / 8)  # stopped early
    assert token_agreement([8, 7, 6, 5, 4, 3, 2, 1], (reference,)) == pytest.approx(1 / 8)  # order matters


def test_text_is_compared_word_by_word_with_case_kept_and_punctuation_ignored():
    reference = 'The cat sat on the mat, "quietly".'
    assert token_agreement("The cat sat on the mat quietly", (reference,)) == 1.0
    assert greedy_prefix("the cat sat on the mat quietly", (reference,)) == 0.0  # case counts: verbatim
    assert token_agreement("The dog sat on the mat quietly", (reference,)) == pytest.approx(6 / 7)
    # A wrong answer gets no credit for the commas it shares with the reference.
    assert token_agreement("x, y, z, w", ("a, b, c, d",)) == 0.0


def test_the_best_reference_counts_and_both_are_registered():
    assert greedy_prefix([1, 2, 3], ([1, 9, 9], [1, 2, 3])) == 1.0
    assert get_metric("greedy_prefix").higher_is_better and get_metric("token_agreement").higher_is_better
    assert get_metric("token_agreement")([1, 2], [[1, 2]]) == 1.0


def test_empty_sequences_agree_only_with_empty_ones():
    assert greedy_prefix([], ([],)) == token_agreement([], ([],)) == 1.0
    assert greedy_prefix([1], ([],)) == token_agreement([1], ([],)) == 0.0
    with pytest.raises(ValueError, match="at least one reference"):
        token_agreement([1], ())
