"""The task base class: deterministic instances per split, and scoring with a registered metric.

Besides its (often binary) metric, a task says how a search may score it more finely
(``FITNESS_MODES``): ``graded_score`` (a graded metric of the generated answer) and
``reference_continuations`` (the text the likelihood mode scores), and which mode it defaults to
(``default_fitness_mode``).

A task with no answers of its own (a file of prompts, prose to continue) is *judged against the
full cache* (``judged_against_full_cache``): its reference is the full cache's own greedy
continuation of the same prompt, which only the evaluator can write, so the evaluator hands it over
in the model's tokens (``score_against``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.metric import get_metric

#: How an evaluator scores an instance for the search.
#: generate   — greedy answer, the task's own metric (what compare and every report use);
#: graded     — greedy answer, the task's graded score (``Task.graded_score``);
#: likelihood — no generation: the compressed model's mean probability of the reference
#:              continuation, teacher-forced (``Task.reference_continuations``);
#: fidelity*  — no labels: the full cache's own greedy continuation, teacher-forced under the
#:              compressed cache, scored against the full cache's (``evolalloc.runtime.fidelity``:
#:              ``fidelity`` the likelihood kept, capped on the mean; ``fidelity-tokens`` capped per
#:              token; ``fidelity-abs`` any change costs; ``fidelity-top1`` the tokens greedy would write);
#: agreement  — no labels, any task: the greedy answer's token agreement (``token_agreement``) with the
#:              full cache's own greedy continuation, in the model's tokens; for a task with answers of
#:              its own too (what a compressed cache changes in a long answer, whatever the answer).
FIDELITY_MODES = ("fidelity", "fidelity-tokens", "fidelity-abs", "fidelity-top1")
AGREEMENT_MODE = "agreement"
FITNESS_MODES = ("generate", "graded", "likelihood", *FIDELITY_MODES, AGREEMENT_MODE)


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
    #: True: no answers of its own; a prediction is judged against the full cache's greedy
    #: continuation (``score_against``), and its metric takes token sequences (``AGREEMENT_METRICS``).
    judged_against_full_cache: bool = False

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
        prepared = self.prepare_prediction(instance, prediction)
        return self._apply(self.metric, instance, prepared, self._answers(instance))

    def score_against(self, instance: Instance, prediction: Sequence[int], reference: Sequence[int], *,
                      graded: bool = False) -> tuple[float, float]:
        """A task judged against the full cache: ``(metric value, common score)`` of the greedy
        answer's token ids ``prediction`` against the full cache's own, ``reference`` (the graded
        metric with ``graded``)."""
        name = (self.graded_metric or self.metric) if graded else self.metric
        return self._apply(name, instance, tuple(prediction), (tuple(reference),))

    def _answers(self, instance: Instance) -> tuple[str, ...]:
        if self.judged_against_full_cache:
            raise FitnessError(f"task {self.name!r} has no answers of its own: its predictions are judged "
                               "against the full cache's continuation (score_against)")
        return instance.references

    def _apply(self, name: str, instance: Instance, prediction, references) -> tuple[float, float]:
        metric = get_metric(name)
        value = metric(prediction, references, **self.metric_extra(instance))
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
        return self._apply(self.graded_metric or self.metric, instance, self.prepare_prediction(instance, prediction),
                           self._answers(instance))[1]

    def reference_continuations(self, instance: Instance) -> tuple[str, ...]:
        """The texts the model should produce right after the prompt, for the likelihood mode;
        each is an acceptable answer on its own (the instance scores as its best one).

        Default: each reference, after a space unless the prompt already ends in whitespace
        (BPE tokenizers fold the space into the next token or, for digits, emit it alone, and the
        model's answer after "... The pass key is" starts with that space).
        A task judged against the full cache has none: the fidelity mode scores its continuation.
        """
        if self.judged_against_full_cache:
            raise FitnessError(f"task {self.name!r} has no reference to score in the likelihood "
                               "mode: use fitness.mode fidelity-tokens (the full cache's own continuation)")
        lead = "" if instance.prompt[-1:].isspace() else " "
        return tuple(lead + ref.strip() for ref in instance.references)

    def describe(self) -> str:
        return f"{self.name} (v{self.version}, metric {self.metric}): {self.description}"
