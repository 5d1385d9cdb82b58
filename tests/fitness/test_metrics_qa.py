"""Token F1 and exact match, on hand-checked examples."""

import pytest

from fitness import get_metric
from fitness.metrics import normalize_answer

qa_f1 = get_metric("qa_f1")
exact_match = get_metric("exact_match")


def test_normalisation_drops_case_punctuation_articles_and_extra_spaces():
    assert normalize_answer("  The  Eiffel-Tower, in Paris! ") == "eiffeltower in paris"
    assert normalize_answer("An apple a day") == "apple day"


def test_identical_answers_score_one():
    assert qa_f1("The Eiffel Tower", ["eiffel tower"]) == 1.0


def test_partial_overlap_is_the_harmonic_mean_of_precision_and_recall():
    # prediction {paris, france}, reference {paris}: P = 1/2, R = 1 -> F1 = 2/3
    assert qa_f1("Paris, France", ["Paris"]) == pytest.approx(2 / 3)
    # prediction {in, 1889}, reference {completed, in, 1889}: P = 1, R = 2/3 -> F1 = 0.8
    assert qa_f1("in 1889", ["completed in 1889"]) == pytest.approx(0.8)


def test_repeated_tokens_count_only_as_often_as_the_reference_has_them():
    # prediction {paris x3}, reference {paris}: 1 common token, P = 1/3, R = 1 -> 0.5
    assert qa_f1("paris paris paris", ["paris"]) == pytest.approx(0.5)


def test_an_empty_prediction_scores_zero():
    assert qa_f1("", ["Paris"]) == 0.0
    assert exact_match("", ["Paris"]) == 0.0
    assert qa_f1("the", ["a"]) == 0.0  # both normalise to nothing: LongBench gives no credit


def test_unicode_answers_are_compared_after_lower_casing():
    assert qa_f1("Zürich", ["zürich"]) == 1.0
    assert exact_match("Ångström", ["ångström"]) == 1.0
    assert qa_f1("北京 大学", ["北京"]) == pytest.approx(2 / 3)


def test_several_references_take_the_best_match():
    # "London" 0; "Paris" 2/3; "France is big": P = 1/2, R = 1/3 -> 0.4; the best is 2/3
    assert qa_f1("Paris, France", ["London", "Paris", "France is big"]) == pytest.approx(2 / 3)
    assert exact_match("the Beatles!", ["Rolling Stones", "beatles"]) == 1.0


def test_exact_match_requires_the_whole_answer():
    assert exact_match("Paris France", ["Paris"]) == 0.0


def test_a_metric_without_references_is_an_error():
    with pytest.raises(ValueError, match="at least one reference"):
        qa_f1("x", [])
