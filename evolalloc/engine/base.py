"""The evaluator interface the search loop uses, and the engines (local, ray) that provide it.

An ``Evaluator`` scores populations on one split; an ``Engine`` makes evaluators for an
experiment's workload and owns their resources until ``close()``. Engines are entries of ``ENGINES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from evolalloc.engine.workload import Workload
from evolalloc.registry import Registry


@dataclass
class InstanceOutcome:
    """One task instance scored under one allocation, in fitness mode ``mode``.

    generate: ``prediction`` is the greedy answer, ``metric`` the task's metric value and
    ``score`` its common score in [0, 1]. graded: the same, but ``score`` is the task's graded
    score. likelihood: nothing is generated (``prediction`` is ""), and ``metric`` and ``score``
    both hold the likelihood score in [0, 1] (the best reference continuation's mean token
    probability). fidelity: nothing is generated either; ``score`` is the fidelity score in [0, 1]
    and ``metric`` the likelihood kept before its cap at 1 (``runtime.continuation``). A task judged
    against the full cache scores its greedy answers (generate, graded) against the full cache's
    continuation, in the model's tokens; its ``greedy_prefix`` (the share of that continuation matched
    before the first divergence) is kept beside whichever metric the task scores, for the tables.
    agreement: ``score`` is the greedy answer's token agreement with the full cache's continuation (any
    task), ``metric`` the task's own common score of that answer, ``greedy_prefix`` kept as above.
    """

    uid: str
    prediction: str
    metric: float
    score: float  # what the mode scores, in [0, 1]; an EvalResult's task_score is their mean
    generated_tokens: int = 0
    error: str | None = None
    mode: str = "generate"
    greedy_prefix: float | None = None  # agreement; generate/graded for a task judged against the full cache


@dataclass
class EvalResult:
    """One allocation evaluated on a set of instances.

    ``task_score`` is the mean of the instances' ``score`` (in the evaluator's fitness mode), or
    ``None`` when the evaluation failed (``error`` says why). A failure is never reported as a number.
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


def check_scorer(scorer, held: Sequence[str]) -> None:
    """``ValueError`` unless prefill records holding rankings ``held`` (scorer keys) serve ``scorer``."""
    if scorer.key not in held:
        raise ValueError(f"the records hold no ranking for scorer {scorer.key!r}; they hold: {', '.join(held)}")


class Engine:
    """Where an experiment's allocations are evaluated; owns what that needs (workers, pools).

    Built by the pipeline from the recipe's ``engine`` section (``kind`` names the entry of
    ``ENGINES``; ``engine.options`` are the constructor's keyword arguments) and closed by it. It
    receives a ``Workload`` (``engine/workload.py``): the ``loaded`` model, ``task``,
    ``instances(split)``, ``records(split)`` (prefill records holding every ranking in
    ``scorers()``), the batch size and the workers; never the recipe or the experiment.

    A new engine is one file: a subclass registered with ``@register_engine("name")`` that
    implements ``evaluator``; ``check_scorer`` and ``evolalloc.engine.shards`` are shared.
    """

    name: str = ""
    #: the most ``engine.workers`` it can use (``None``: no limit); the recipe check reads it
    max_workers: int | None = None

    def __init__(self, workload: Workload):
        self.workload = workload
        self.closed = False

    def evaluator(self, split: str, scorer, mode: str = "generate") -> Evaluator:
        """An ``Evaluator`` of ``split`` that ranks tokens with ``scorer`` (one of ``workload.scorers()``)
        and scores in fitness ``mode`` (``fitness.FITNESS_MODES``; see ``LocalEvaluator``)."""
        raise NotImplementedError

    def scorer_keys(self) -> list[str]:
        """Keys of the scorers whose rankings the records hold."""
        return [s.key for s in self.workload.scorers()]

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"the {self.name} engine is closed")

    def close(self) -> None:
        """Release what the engine holds; closing twice is harmless."""
        self.closed = True

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


ENGINES: Registry[type[Engine]] = Registry(
    "engine",
    base=Engine,
    # Lazy: naming an engine (recipe checks, --help) imports neither torch nor Ray.
    lazy={"local": "evolalloc.engine.local", "ray": "evolalloc.engine.ray_engine"},
    package="evolalloc.engine",
)


def register_engine(name: str):
    """Class decorator: register an ``Engine`` subclass as ``name`` (the recipe's ``engine.kind``)."""
    return ENGINES.register(name)
