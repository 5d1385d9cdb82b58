"""The evaluator interface the search loop uses; engines (local, ray) implement it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np


@dataclass
class InstanceOutcome:
    """One task instance scored under one allocation, in fitness mode ``mode``.

    generate: ``prediction`` is the greedy answer, ``metric`` the task's metric value and
    ``score`` its common score in [0, 1]. graded: the same, but ``score`` is the task's graded
    score. likelihood: nothing is generated (``prediction`` is ""), and ``metric`` and ``score``
    both hold the likelihood score in [0, 1] (the best reference continuation's mean token
    probability).
    """

    uid: str
    prediction: str
    metric: float
    score: float  # what the mode scores, in [0, 1]; an EvalResult's task_score is their mean
    generated_tokens: int = 0
    error: str | None = None
    mode: str = "generate"


@dataclass
class EvalResult:
    """One allocation evaluated on a set of instances.

    ``task_score`` is the mean of the instances' ``score`` (in the evaluator's fitness mode), or ``None`` when the evaluation
    failed (``error`` says why). A failure is never reported as a number.
    """

    task_score: float | None
    instances: list[InstanceOutcome] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.task_score is not None and bool(np.isfinite(self.task_score))


class Evaluator(Protocol):
    """Scores budgets of shape ``[num_layers, num_kv_heads]`` (integers) on a fixed task split."""

    def evaluate(self, budgets: Sequence[np.ndarray]) -> list[EvalResult]:
        """One result per budget array, in order. Must not raise for a failed candidate."""
        ...
