"""Whether a prompt fits the model's positions: the one rule every path that feeds a model uses.

A generation occupies one position per token of the prompt, of the question (fed after eviction
with ``question_after_compression``) and of the answer; the model has ``max_positions`` of them
(``ModelGeometry.max_positions``, from its config). 0 means the config names no limit.
"""

from __future__ import annotations


def positions_beyond(limit: int, prompt: int, question: int = 0, answer: int = 0) -> int | None:
    """The positions a generation of ``prompt`` + ``question`` + ``answer`` tokens needs, if that is
    more than ``limit``; None when it fits (or ``limit`` is 0, unknown)."""
    needed = prompt + question + answer
    return needed if limit and needed > limit else None
