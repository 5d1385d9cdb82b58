"""Token F1 and exact match over SQuAD-normalised answers (LongBench's ``qa_f1_score``)."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from fitness.metrics.normalize import best_over, normalize_answer
from fitness.registry import register_metric


def token_f1(prediction: str, reference: str) -> float:
    """Bag-of-tokens F1 after normalisation; 0 when nothing overlaps (also when both are empty,
    as in LongBench: an empty answer never earns credit)."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


@register_metric("qa_f1", higher_is_better=True)
def qa_f1(prediction: str, references: Sequence[str]) -> float:
    """Token F1, max over references."""
    return best_over(references, lambda ref: token_f1(prediction, ref))


@register_metric("exact_match", higher_is_better=True)
def exact_match(prediction: str, references: Sequence[str]) -> float:
    """1 when the normalised prediction equals a normalised reference."""
    pred = normalize_answer(prediction)
    return best_over(references, lambda ref: float(pred == normalize_answer(ref)))
