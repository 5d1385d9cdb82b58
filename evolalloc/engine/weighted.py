"""Several tasks as one evaluator: the fitness is the weighted mean of the per-task scores.

``WeightedEvaluator([(label, weight, evaluator), ...])`` evaluates the population on every task's
evaluator (one call each, so each still sees a whole generation) and combines allocation ``a``'s
results as ``sum_t w_t * score_t(a) / sum_t w_t``. A task whose evaluation of ``a`` failed makes
``a``'s combined result fail with that task's error: half a fitness is not a fitness.

Instance outcomes are kept, their uids prefixed with the task's label (``label/uid``) so that two
tasks' instances never share a uid; ``task_scores`` holds each task's own score.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import numpy as np

from evolalloc.engine.base import EvalResult, Evaluator


@dataclasses.dataclass
class WeightedResult(EvalResult):
    """An ``EvalResult`` of several tasks; ``task_scores`` maps each task's label to its score."""

    task_scores: dict[str, float] = dataclasses.field(default_factory=dict)


class WeightedEvaluator:
    def __init__(self, parts: Sequence[tuple[str, float, Evaluator]]):
        if not parts:
            raise ValueError("a weighted evaluator needs at least one task")
        if any(weight <= 0 for _, weight, _ in parts):
            raise ValueError("task weights must be > 0")
        self.parts = list(parts)
        self.total_weight = float(sum(weight for _, weight, _ in parts))

    def evaluate(self, budgets: Sequence[np.ndarray]) -> list[EvalResult]:
        started = time.perf_counter()
        per_task = []
        for label, _, evaluator in self.parts:
            results = evaluator.evaluate(budgets)
            if len(results) != len(budgets):
                raise RuntimeError(f"task {label}: evaluator returned {len(results)} "
                                   f"results for {len(budgets)} budgets")
            per_task.append(results)
        elapsed = time.perf_counter() - started
        return [self._combine([results[a] for results in per_task], elapsed / max(1, len(budgets)))
                for a in range(len(budgets))]

    def _combine(self, results: list[EvalResult], seconds: float) -> EvalResult:
        for (label, _, _), result in zip(self.parts, results):
            if not result.ok:
                return WeightedResult(task_score=None, seconds=seconds,
                                      error=f"task {label}: "
                                            f"{result.error or f'non-finite score {result.task_score!r}'}")
        scores = {label: float(result.task_score) for (label, _, _), result in zip(self.parts, results)}
        combined = sum(weight * scores[label] for label, weight, _ in self.parts) / self.total_weight
        instances = [dataclasses.replace(o, uid=f"{label}/{o.uid}")
                     for (label, _, _), result in zip(self.parts, results) for o in result.instances]
        return WeightedResult(task_score=combined, instances=instances, seconds=seconds, task_scores=scores)

    def close(self) -> None:
        for _, _, evaluator in self.parts:
            close = getattr(evaluator, "close", None)
            if close is not None:
                close()
