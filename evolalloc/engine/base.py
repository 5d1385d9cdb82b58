"""The evaluator interface the search loop uses; engines (local, ray) implement it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np


@dataclass
class InstanceOutcome:
    """One task instance decoded under one allocation."""

    uid: str
    prediction: str
    metric: float  # the task's own metric value
    score: float  # common score in [0, 1]
    generated_tokens: int = 0
    error: str | None = None


@dataclass
class EvalResult:
    """One allocation evaluated on a set of instances.

    ``task_score`` is the mean common score over instances, or ``None`` when the evaluation
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
