"""String-containment metrics: RULER's string-match-all / string-match-part, keyword recall for
needle-in-a-haystack, and the final-number accuracy of GSM8K."""

from __future__ import annotations

import difflib
import re
from typing import Sequence

from fitness.metrics.normalize import best_over, normalize_answer
from fitness.registry import register_metric


@register_metric("string_match_all", higher_is_better=True)
def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """RULER: the share of references found (case-insensitive) in the prediction. All references
    are needed at once (every needle), so this is a mean, not a max."""
    if not references:
        raise ValueError("a metric needs at least one reference")
    pred = prediction.lower()
    return sum(ref.lower() in pred for ref in references) / len(references)


@register_metric("string_match_part", higher_is_better=True)
def string_match_part(prediction: str, references: Sequence[str]) -> float:
    """RULER: 1 if any reference occurs (case-insensitive) in the prediction."""
    pred = prediction.lower()
    return best_over(references, lambda ref: float(ref.lower() in pred))


@register_metric("keyword_recall", higher_is_better=True)
def keyword_recall(prediction: str, references: Sequence[str]) -> float:
    """The share of keywords (the references) the prediction contains as whole words, after
    SQuAD normalisation (so case, punctuation and articles do not matter)."""
    if not references:
        raise ValueError("a metric needs at least one reference")
    words = f" {normalize_answer(prediction)} "
    return sum(f" {normalize_answer(ref)} " in words for ref in references) / len(references)


_WORD_EDGES = ".,;:!?\"'()[]{}<>"


def _key_chars_one(prediction: str, key: str) -> float:
    """In-order characters of ``key`` matched by the prediction's best word, over the longer length."""
    key = key.strip().lower()
    if not key:
        raise ValueError("a key must not be empty")
    if key in prediction.lower():
        return 1.0  # what string_match_all counts as right is fully right here too
    best = 0.0
    for word in prediction.lower().split():
        word = word.strip(_WORD_EDGES)
        if word:
            # difflib's matching blocks: characters that agree in order (not a full LCS, but
            # close for keys of a few characters, and well kept).
            matched = sum(b.size
                          for b in difflib.SequenceMatcher(None, key, word, autojunk=False).get_matching_blocks())
            best = max(best, matched / max(len(key), len(word)))
    return best


@register_metric("key_chars", higher_is_better=True)
def key_chars(prediction: str, references: Sequence[str]) -> float:
    """Graded key retrieval: per reference key, the share of its characters that the prediction's
    best-matching word gets right in order, over the longer of the two (so a missing, extra,
    wrong or swapped digit each cost one character); 1 when the key occurs verbatim. Every key is
    needed (like ``string_match_all``), so this is the mean over references."""
    if not references:
        raise ValueError("a metric needs at least one reference")
    return sum(_key_chars_one(prediction, ref) for ref in references) / len(references)


_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
_ANSWER_IS = re.compile(rf"answer is\s*:?\s*\$?\s*({_NUMBER})", re.IGNORECASE)
_ANY_NUMBER = re.compile(_NUMBER)


def extract_final_number(text: str) -> str | None:
    """The chain-of-thought answer: the number after the first "The answer is", else the last
    number in the text; commas and a trailing ".0" are dropped."""
    found = _ANSWER_IS.search(text)
    number = found.group(1) if found else (_ANY_NUMBER.findall(text) or [None])[-1]
    return None if number is None else _canonical(number)


def _canonical(number: str) -> str:
    number = number.replace(",", "").rstrip(".")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return number


@register_metric("numeric_match", higher_is_better=True)
def numeric_match(prediction: str, references: Sequence[str]) -> float:
    """GSM8K accuracy: 1 when the extracted final number equals a reference number."""
    answer = extract_final_number(prediction)
    return best_over(references, lambda ref: float(answer is not None and answer == _canonical(ref.strip())))
