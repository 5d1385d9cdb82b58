"""LongBench's answer-matching metrics: classification (TREC), passage retrieval, passage count.

Written from the definitions in LongBench's ``metrics.py``; each takes the max over references.
"""

from __future__ import annotations

import re
from typing import Sequence

from fitness.metrics.normalize import best_over
from fitness.registry import register_metric

_NUMBER = re.compile(r"\d+")
_PARAGRAPH = re.compile(r"Paragraph (\d+)")


def _share_equal_to(prediction: str, target: str) -> float:
    """Of all the numbers in the prediction, the share equal to ``target`` (so "3" scores 1 and
    "3 or 4" scores 0.5: hedging is penalised)."""
    numbers = _NUMBER.findall(prediction)
    if not numbers:
        return 0.0
    return sum(number == target for number in numbers) / len(numbers)


@register_metric("count", higher_is_better=True)
def count(prediction: str, references: Sequence[str]) -> float:
    """PassageCount: the share of numbers in the prediction equal to the reference count."""
    return best_over(references, lambda ref: _share_equal_to(prediction, ref.strip()))


@register_metric("retrieval", higher_is_better=True)
def retrieval(prediction: str, references: Sequence[str]) -> float:
    """PassageRetrieval: reference "Paragraph N"; the share of numbers in the prediction equal to N."""

    def one(ref: str) -> float:
        found = _PARAGRAPH.findall(ref) or _NUMBER.findall(ref)
        return _share_equal_to(prediction, found[0]) if found else 0.0

    return best_over(references, one)


@register_metric("classification", higher_is_better=True)
def classification(prediction: str, references: Sequence[str], *, all_classes: Sequence[str] = ()) -> float:
    """TREC: the classes named in the prediction (as substrings), ignoring those that are only a
    part of the reference class; 1/len(named) if the reference is among them, else 0.

    LongBench's code also holds a difflib fallback for "no class named", but its guard
    (``list != 0``) is always true, so it never runs: naming no class scores 0, as here.
    """
    if not all_classes:
        raise ValueError("classification needs all_classes")

    def one(ref: str) -> float:
        named = [c for c in all_classes if c in prediction]
        named = [c for c in named if not (c in ref and c != ref)]
        return 1.0 / len(named) if ref in named else 0.0

    return best_over(references, one)
