"""SQuAD-style answer normalisation, shared by F1, exact match and keyword recall."""

from __future__ import annotations

import re
import string
from typing import Callable, Sequence

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop English articles, collapse whitespace
    (the SQuAD v1.1 evaluation script's order of operations)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def best_over(references: Sequence[str], score: Callable[[str], float]) -> float:
    """The best score over several references (every per-reference metric reports the max)."""
    if not references:
        raise ValueError("a metric needs at least one reference")
    return max(score(reference) for reference in references)
