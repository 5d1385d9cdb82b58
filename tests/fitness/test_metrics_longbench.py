"""LongBench's metrics, on examples derived by hand from the definitions in LongBench's
``metrics.py`` / ``eval.py`` (each comment shows the computation)."""

import pytest

from fitness import get_metric

CLASSES = ["Date", "Number", "Number of something", "Human"]
classification = get_metric("classification")
retrieval = get_metric("retrieval")
count = get_metric("count")
code_sim = get_metric("code_sim")
rouge_l = get_metric("rouge_l")


# --- classification: classes named in the prediction, minus parts of the reference ------------
def test_classification_naming_exactly_the_reference_class_scores_one():
    assert classification("Date", ["Date"], all_classes=CLASSES) == 1.0


def test_classification_ignores_a_class_that_is_only_part_of_the_reference():
    # named: "Number", "Number of something"; "Number" is a proper part of the reference -> dropped
    assert classification("Number of something", ["Number of something"], all_classes=CLASSES) == 1.0
    # named: "Number" only, dropped for the same reason -> nothing left -> 0
    assert classification("Number", ["Number of something"], all_classes=CLASSES) == 0.0


def test_classification_naming_two_classes_gets_half_credit():
    # named: "Date", "Number" -> the reference is one of two -> 1/2
    assert classification("Date or Number", ["Date"], all_classes=CLASSES) == 0.5


def test_classification_naming_no_class_scores_zero():
    # LongBench's difflib fallback sits behind a guard that is always true: it never runs
    assert classification("no idea", ["Date"], all_classes=CLASSES) == 0.0
    assert classification("", ["Date"], all_classes=CLASSES) == 0.0


def test_classification_takes_the_best_reference_and_needs_the_classes():
    assert classification("Human", ["Date", "Human"], all_classes=CLASSES) == 1.0
    with pytest.raises(ValueError, match="all_classes"):
        classification("Date", ["Date"])


# --- retrieval and count: the share of numbers in the prediction that are right -------------
def test_retrieval_reads_the_paragraph_number_of_the_reference():
    assert retrieval("Paragraph 12", ["Paragraph 12"]) == 1.0
    assert retrieval("The answer is Paragraph 12 or Paragraph 3", ["Paragraph 12"]) == 0.5
    assert retrieval("Paragraph 1", ["Paragraph 12"]) == 0.0  # numbers match whole, not by prefix
    assert retrieval("", ["Paragraph 12"]) == 0.0


def test_count_scores_the_share_of_correct_numbers():
    assert count("There are 14 unique paragraphs.", ["14"]) == 1.0
    assert count("14 or 15", ["14"]) == 0.5
    assert count("fourteen", ["14"]) == 0.0
    assert count("7", ["14", "7"]) == 1.0


# --- code edit similarity ---------------------------------------------------------------------
def test_code_sim_scores_the_first_line_that_is_not_a_comment_or_fence():
    prediction = "\n```python\n# the next line\nreturn x + 1\nprint(x)"
    assert code_sim(prediction, ["return x + 1"]) == 1.0


def test_code_sim_is_the_normalised_indel_similarity():
    # "return x+1" (10 chars) vs "return x + 1" (12): longest common subsequence 10 -> 2*10/22;
    # LongBench's fuzz.ratio rounds that to 91 -> 0.91, we keep 0.909...
    assert code_sim("return x+1", ["return x + 1"]) == pytest.approx(20 / 22)
    assert code_sim("return x+1", ["return x + 1"]) == pytest.approx(0.91, abs=0.005)


def test_code_sim_of_an_empty_or_comment_only_prediction_is_zero():
    assert code_sim("", ["x = 1"]) == 0.0
    assert code_sim("# only a comment\n// and another", ["x = 1"]) == 0.0


def test_code_sim_handles_unicode_and_several_references():
    assert code_sim('print("héllo")', ['print("hello")', 'print("héllo")']) == 1.0


# --- ROUGE-L --------------------------------------------------------------------------------
def test_rouge_l_agrees_with_longbench_when_precision_equals_recall():
    # LCS of "the cat sat on the mat" / "the cat lay on the rug" = "the cat on the" = 4 of 6 words:
    # P = R = 2/3, so LongBench's P/R-weighted F and the harmonic F1 both give 2/3.
    assert rouge_l("the cat sat on the mat", ["the cat lay on the rug"]) == pytest.approx(2 / 3)
    # "police killed the gunman" / "police kill the gunman": LCS 3 of 4 -> 0.75
    assert rouge_l("police killed the gunman", ["police kill the gunman"]) == pytest.approx(0.75)


def test_rouge_l_is_the_harmonic_f1_when_lengths_differ():
    # LCS("a b c d", "a c") = 2: P = 2/4, R = 2/2 -> F1 = 2/3
    assert rouge_l("a b c d", ["a c"]) == pytest.approx(2 / 3)


def test_rouge_l_of_an_empty_prediction_is_zero():
    assert rouge_l("", ["the cat sat"]) == 0.0


def test_rouge_l_keeps_unicode_words():
    # rouge-score's default tokenizer would drop every non-ASCII letter
    assert rouge_l("Café au lait", ["café au lait"]) == 1.0
    assert rouge_l("東京 タワー", ["東京 タワー"]) == 1.0
    assert rouge_l("東京", ["大阪"]) == 0.0


def test_rouge_l_takes_the_best_reference():
    assert rouge_l("the cat sat", ["a dog ran", "the cat sat"]) == 1.0
