"""Greedy agreement: how closely a prediction follows a reference, token for token.

What they judge: the compressed cache's greedy continuation against the full cache's own (tasks
judged against the full cache, ``Task.judged_against_full_cache``: the evaluator hands both as the
model's token ids), or an answer that must repeat a text verbatim (``repeat_passage``: both are
text, split into words, ``\\w+``, case kept). Punctuation is left out of text: a comma matches
every other comma, so counting marks would credit a wrong answer for the punctuation it shares.

- ``greedy_prefix``: the tokens matched before the first divergence, as a fraction of the
  reference's length N. Strict: what a reader sees of the full cache's text before the compressed
  model departs from it.
- ``token_agreement``: the longest common subsequence of the two, over the longer one's length.
  Every token reproduced in order counts, also after a slip the model recovers from; tokens left
  out or added (stopping early, going on past the end) cost as much as wrong ones. 1 only for
  identical sequences.
"""

from __future__ import annotations

import re
from typing import Hashable, Sequence

from rapidfuzz.distance import LCSseq

from fitness.metrics.normalize import best_over
from fitness.registry import register_metric

_WORD = re.compile(r"\w+", re.UNICODE)

#: The metrics that take token sequences (a task judged against the full cache scores with one of them).
AGREEMENT_METRICS = ("greedy_prefix", "token_agreement")


def check_agreement_metric(metric: str, task: str) -> str:
    """``metric`` if it takes token sequences, as a task judged against the full cache's tokens needs."""
    from fitness.errors import FitnessError

    if metric not in AGREEMENT_METRICS:
        raise FitnessError(f"task {task!r} is judged against the full cache's tokens: metric must be one of "
                           f"{', '.join(AGREEMENT_METRICS)}, got {metric!r}")
    return metric


def tokens_of(sequence: str | Sequence[Hashable]) -> tuple:
    """A text's words (case kept); any other sequence (token ids) as it is."""
    if isinstance(sequence, str):
        return tuple(_WORD.findall(sequence))
    return tuple(sequence)


def prefix_fraction(prediction: Sequence[Hashable], reference: Sequence[Hashable]) -> float:
    """Tokens of ``prediction`` equal to ``reference``'s before the first difference, over ``len(reference)``."""
    if not reference:
        return 1.0 if not prediction else 0.0
    matched = 0
    for mine, theirs in zip(prediction, reference):
        if mine != theirs:
            break
        matched += 1
    return matched / len(reference)


def lcs_fraction(prediction: Sequence[Hashable], reference: Sequence[Hashable]) -> float:
    """The longest common subsequence's length over the longer sequence's length (1 for two empty ones)."""
    longer = max(len(prediction), len(reference))
    if longer == 0:
        return 1.0
    return LCSseq.similarity(list(prediction), list(reference)) / longer


@register_metric("greedy_prefix", higher_is_better=True)
def greedy_prefix(prediction, references) -> float:
    """Tokens matched before the first divergence, as a fraction of the reference's tokens; best over references."""
    mine = tokens_of(prediction)
    return best_over(references, lambda ref: prefix_fraction(mine, tokens_of(ref)))


@register_metric("token_agreement", higher_is_better=True)
def token_agreement(prediction, references) -> float:
    """Longest common subsequence over the longer sequence's length; best over references."""
    mine = tokens_of(prediction)
    return best_over(references, lambda ref: lcs_fraction(mine, tokens_of(ref)))
