"""The task base class: deterministic instances per split, and scoring with a registered metric."""

from __future__ import annotations

import math
from typing import Any, Mapping

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.registry import get_metric


class Task:
    """A source of ``Instance``s plus the metric that scores them.

    Subclasses set ``metric`` (a registered metric name), ``version`` (bump it whenever the prompt,
    the references or the metric change, so stored results are not compared across versions) and a
    one-line ``description``; they take their parameters as keyword-only ``__init__`` arguments
    (``get_task`` passes a recipe's parameters through and rejects unknown ones).
    """

    name: str = ""
    metric: str = ""
    version: int = 1
    description: str = ""

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        """``n`` instances of ``split`` ("search" or "heldout"); the same arguments give the same
        instances, and the two splits never share one."""
        raise NotImplementedError

    # --- scoring ---------------------------------------------------------------------------
    def prepare_prediction(self, instance: Instance, prediction: str) -> str:
        """Post-processing applied before the metric (e.g. keep the first line)."""
        return prediction

    def metric_extra(self, instance: Instance) -> Mapping[str, Any]:
        """Keyword arguments the metric needs beyond the references (e.g. LongBench classes)."""
        return {}

    def common_score(self, value: float) -> float:
        """Map the metric value to [0, 1] (all our metrics already live there)."""
        return min(1.0, max(0.0, value))

    def score(self, instance: Instance, prediction: str) -> tuple[float, float]:
        """``(metric value, common score in [0, 1])`` of ``prediction`` for ``instance``."""
        metric = get_metric(self.metric)
        value = metric(self.prepare_prediction(instance, prediction), instance.references, **self.metric_extra(instance))
        if not math.isfinite(value):
            # A NaN score would steer the optimizer; it is a bug, never a number to average.
            raise FitnessError(f"metric {metric.name!r} returned {value} for instance {instance.uid!r}")
        common = self.common_score(value)
        if not metric.higher_is_better:
            common = 1.0 - common
        return value, common

    def describe(self) -> str:
        return f"{self.name} (v{self.version}, metric {self.metric}): {self.description}"
