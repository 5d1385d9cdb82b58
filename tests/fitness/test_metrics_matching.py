"""RULER's string matching, keyword recall and GSM8K's final-number accuracy."""

import pytest

from fitness import get_metric
from fitness.metrics.matching import extract_final_number

match_all = get_metric("string_match_all")
match_part = get_metric("string_match_part")
keyword_recall = get_metric("keyword_recall")
numeric_match = get_metric("numeric_match")


def test_string_match_all_is_the_share_of_references_found():
    assert match_all("The numbers are 123 and 456.", ["123", "456"]) == 1.0
    assert match_all("The numbers are 123 and 789.", ["123", "456"]) == 0.5
    assert match_all("", ["123"]) == 0.0


def test_string_match_part_needs_any_one_reference():
    assert match_part("it is 456", ["123", "456"]) == 1.0
    assert match_part("it is 789", ["123", "456"]) == 0.0
    assert match_part("", ["123"]) == 0.0


def test_string_matching_ignores_case_and_keeps_unicode():
    assert match_all("ÉLAN and Straße", ["élan", "straße"]) == 1.0
    assert match_part("CAFÉ", ["café"]) == 1.0


def test_keyword_recall_counts_whole_normalised_keywords():
    prediction = "Eat a sandwich and sit in Dolores Park."
    assert keyword_recall(prediction, ["sandwich", "Dolores Park", "sunny day"]) == pytest.approx(2 / 3)
    assert keyword_recall("sandwiches", ["sandwich"]) == 0.0  # whole words only
    assert keyword_recall("", ["sandwich"]) == 0.0
    assert keyword_recall("Ein Käsebrot", ["käsebrot"]) == 1.0


def test_the_final_number_follows_the_answer_is_else_it_is_the_last_number():
    assert extract_final_number("5 + 4 = 9. The answer is 9.") == "9"
    assert extract_final_number("She pays $1,234.50 in all. The answer is $1,234.50.") == "1234.5"
    assert extract_final_number("so 3 apples and then 18") == "18"
    assert extract_final_number("The answer is -3") == "-3"
    assert extract_final_number("no digits here") is None


def test_numeric_match_compares_numbers_not_strings():
    assert numeric_match("The answer is 18.00.", ["18"]) == 1.0
    assert numeric_match("The answer is 1,000.", ["1000"]) == 1.0
    assert numeric_match("The answer is 17.", ["18"]) == 0.0
    assert numeric_match("", ["18"]) == 0.0
    assert numeric_match("The answer is 7", ["18", "7"]) == 1.0
