"""The task base class: deterministic instances per split, and scoring with a registered metric.

Besides its (often binary) metric, a task says how a search may score it more finely
(``FITNESS_MODES``): ``graded_score`` (a graded metric of the generated answer) and
``reference_continuations`` (the text the likelihood mode scores), and which of the three
modes it defaults to (``default_fitness_mode``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.metric import get_metric

#: How an evaluator scores an instance for the search.
#: generate   — greedy answer, the task's own metric (what compare and every report use);
#: graded     — greedy answer, the task's graded score (``Task.graded_score``);
#: likelihood — no generation: the compressed model's mean probability of the reference
#:              continuation, teacher-forced (``Task.reference_continuations``).
FITNESS_MODES = ("generate", "graded", "likelihood")


def check_fitness_mode(mode: str) -> str:
    """``mode`` if it is one of ``FITNESS_MODES``, else ``ValueError`` naming the valid ones."""
    if mode not in FITNESS_MODES:
        raise ValueError(f"unknown fitness mode {mode!r}; valid modes: {', '.join(FITNESS_MODES)}")
    return mode


class Task:
    """A source of ``Instance``s plus the metric that scores them.

    Subclasses set ``metric`` (a registered metric name), ``version`` (bump it whenever the prompt,
    the references or the metric change, so stored results are not compared across versions) and a
    one-line ``description``; ``graded_metric`` names a finer metric for the graded mode (``None``:
    the task's metric is already graded, or has no graded form) and ``default_fitness_mode`` the
    mode a search uses unless told otherwise; ``reference_continuation`` whether the task can give
    ``reference_continuations`` (the likelihood mode and LU-KV's profiling teacher-force them). They
    take their parameters as keyword-only ``__init__`` arguments (``get_task`` passes a recipe's
    parameters through and rejects unknown ones).
    """

    name: str = ""
    metric: str = ""
    version: int = 1
    description: str = ""
    graded_metric: str | None = None
    default_fitness_mode: str = "generate"
    reference_continuation: bool = True

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
        return self._apply(self.metric, instance, prediction)

    def _apply(self, name: str, instance: Instance, prediction: str) -> tuple[float, float]:
        metric = get_metric(name)
        value = metric(self.prepare_prediction(instance, prediction), instance.references,
                       **self.metric_extra(instance))
        if not math.isfinite(value):
            # A NaN score would steer the optimizer; it is a bug, never a number to average.
            raise FitnessError(f"metric {metric.name!r} returned {value} for instance {instance.uid!r}")
        common = self.common_score(value)
        if not metric.higher_is_better:
            common = 1.0 - common
        return value, common

    def graded_score(self, instance: Instance, prediction: str) -> float:
        """A score in [0, 1] that also credits partly right answers (``graded_metric``); without
        one, the common score of the task's own metric."""
        return self._apply(self.graded_metric or self.metric, instance, prediction)[1]

    def reference_continuations(self, instance: Instance) -> tuple[str, ...]:
        """The texts the model should produce right after the prompt, for the likelihood mode;
        each is an acceptable answer on its own (the instance scores as its best one).

        Default: each reference, after a space unless the prompt already ends in whitespace
        (BPE tokenizers fold the space into the next token or, for digits, emit it alone, and the
        model's answer after "... The pass key is" starts with that space).
        """
        lead = "" if instance.prompt[-1:].isspace() else " "
        return tuple(lead + ref.strip() for ref in instance.references)

    def describe(self) -> str:
        return f"{self.name} (v{self.version}, metric {self.metric}): {self.description}"
