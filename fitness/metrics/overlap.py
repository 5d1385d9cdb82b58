"""Text-overlap metrics built on established libraries: ROUGE-L (``rouge-score``) and code edit
similarity (``rapidfuzz``), as LongBench uses them for summaries and code completion."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from rapidfuzz import fuzz

from fitness.metrics.normalize import best_over
from fitness.registry import register_metric

_WORD = re.compile(r"\w+", re.UNICODE)


class _UnicodeTokenizer:
    """rouge-score's default tokenizer keeps only ``[a-z0-9]``, so "café" would score as "caf" and
    a non-Latin answer as nothing at all; this one lower-cases and keeps every Unicode word."""

    def tokenize(self, text: str) -> list[str]:
        return _WORD.findall(text.lower())


@lru_cache(maxsize=1)
def _scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False, tokenizer=_UnicodeTokenizer())


@register_metric("rouge_l", higher_is_better=True)
def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure (longest common subsequence of words), max over references.

    LongBench calls the ``rouge`` package, whose ROUGE-L splits at "." (summary level) and uses a
    P/R-weighted F; we use ``rouge-score``'s sentence-level LCS and the harmonic F1. They agree when
    precision equals recall on one sentence; elsewhere ours is the textbook definition.
    """
    return best_over(references, lambda ref: _scorer().score(ref, prediction)["rougeL"].fmeasure)


def first_code_line(prediction: str) -> str:
    """LongBench's code answer: the first line that is not a comment or a markdown fence."""
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            return line
    return ""


@register_metric("code_sim", higher_is_better=True)
def code_sim(prediction: str, references: Sequence[str]) -> float:
    """Edit similarity (normalised Indel, ``fuzz.ratio / 100``) between the first code line of the
    prediction and a reference line; max over references. LongBench rounds it to whole percent;
    we keep the fraction, a finer signal for the search."""
    line = first_code_line(prediction)
    if not line:
        return 0.0
    return best_over(references, lambda ref: fuzz.ratio(line, ref) / 100.0 if ref else 0.0)
